package afpacket

import (
	"encoding/binary"
	"errors"

	"github.com/intd-project/intd/dataplane/wire"
)

// VnetHdr is struct virtio_net_hdr, what PACKET_VNET_HDR puts before every
// frame (in the host's byte order, as the kernel writes it for packet
// sockets).
type VnetHdr struct {
	Flags      uint8  // VnetNeedsCsum, VnetDataValid
	GSOType    uint8  // GSONone, GSOTCPv4, GSOUDP, GSOTCPv6, GSOUDPL4, optionally | GSOECN
	HdrLen     uint16 // a hint (skb_headlen for packet sockets), not trusted
	GSOSize    uint16 // payload bytes per segment (MSS)
	CsumStart  uint16 // offset of the L4 header when VnetNeedsCsum
	CsumOffset uint16 // offset of the checksum field from CsumStart
}

// virtio_net_hdr flags and GSO types.
const (
	VnetNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	VnetDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID

	GSONone  = 0    // VIRTIO_NET_HDR_GSO_NONE
	GSOTCPv4 = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	GSOUDP   = 3    // VIRTIO_NET_HDR_GSO_UDP (UFO: IP fragments)
	GSOTCPv6 = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	GSOUDPL4 = 5    // VIRTIO_NET_HDR_GSO_UDP_L4 (USO: UDP datagrams)
	GSOECN   = 0x80 // VIRTIO_NET_HDR_GSO_ECN: the super-packet has CWR set
)

// ParseVnetHdr decodes the 10 bytes of a virtio_net_hdr.
func ParseVnetHdr(b []byte) VnetHdr {
	_ = b[vnetHdrLen-1]
	return VnetHdr{Flags: b[0], GSOType: b[1],
		HdrLen: binary.NativeEndian.Uint16(b[2:]), GSOSize: binary.NativeEndian.Uint16(b[4:]),
		CsumStart: binary.NativeEndian.Uint16(b[6:]), CsumOffset: binary.NativeEndian.Uint16(b[8:])}
}

// Put encodes h into the first 10 bytes of b.
func (h VnetHdr) Put(b []byte) {
	_ = b[vnetHdrLen-1]
	b[0], b[1] = h.Flags, h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}

// Limits of Segment: headers (L2 to L4) replicated in every segment, and
// segments per super-packet (64 KB at an MSS of 32 bytes), so that the
// work per frame stays linear in its length.
const (
	MaxGSOHeader   = 256
	MaxGSOSegments = 2048
)

// Errors of Segment; nothing is emitted when one is returned.
var (
	ErrGSOType   = errors.New("afpacket: unsupported GSO type")
	ErrGSOFrame  = errors.New("afpacket: GSO frame with malformed or unexpected headers")
	ErrGSOSize   = errors.New("afpacket: GSO size out of range")
	ErrGSOCsum   = errors.New("afpacket: checksum start or offset outside the frame")
	ErrGSOHeader = errors.New("afpacket: GSO headers longer than MaxGSOHeader")
)

// Segment hands emit the frames a super-packet stands for, as the
// kernel's software GSO would put them on the wire, and returns how many
// it emitted.
//
// A frame without GSO (GSOType GSONone) is emitted as it is, its checksum
// completed first when the sender left it partial (VnetNeedsCsum). A GSO
// super-packet (Ethernet, up to two VLAN tags, IPv4 or IPv6 with
// hop-by-hop, routing or destination options headers, then TCP or UDP)
// is cut into segments of GSOSize payload bytes, each with a copy of the
// headers, fixed as tcp_gso_segment, __udp_gso_segment and
// inet_gso_segment/ipv6_gso_segment fix them:
//
//   - IPv4 total length, identification (the super-packet's, plus one per
//     segment) and header checksum; IPv6 payload length;
//   - TCP: sequence number advanced by GSOSize per segment, FIN and PSH
//     only on the last segment, CWR only on the first;
//   - UDP (GSOUDPL4, USO): length of each datagram;
//   - the TCP or UDP checksum computed in full over each segment with its
//     pseudo-header, whatever the sender left in it.
//
// GSOUDP (UFO, legacy and IPv4 only) becomes IPv4 fragments of the UDP
// datagram, whose checksum is computed over the whole datagram: one
// identification, fragment offsets, MF on all but the last (the payload
// per fragment is GSOSize rounded down to a multiple of 8).
//
// Segmentation is in place: the headers of segment i are written over the
// last bytes of segment i-1's payload, which emit has already seen, so it
// needs no buffer and no allocation. The frame is destroyed, and emit must
// not keep the slice it is given beyond the call (soft.Switch.Receive
// copies). The work is linear in the frame's length, at most
// MaxGSOSegments segments with MaxGSOHeader bytes of headers each.
// Malformed or unsupported frames are reported with an error before
// anything is emitted.
func Segment(h VnetHdr, frame []byte, emit func(seg []byte)) (int, error) {
	gt := h.GSOType &^ GSOECN
	if gt == GSONone {
		if h.Flags&VnetNeedsCsum != 0 && !completeChecksum(frame, int(h.CsumStart), int(h.CsumOffset)) {
			return 0, ErrGSOCsum
		}
		emit(frame)
		return 1, nil
	}
	var proto byte
	switch gt {
	case GSOTCPv4, GSOTCPv6:
		proto = 6
	case GSOUDP, GSOUDPL4:
		proto = 17
	default:
		return 0, ErrGSOType
	}
	hd, ok := parseHeaders(frame)
	// A TCP super-packet in a session tunnel, which AF_PACKET reports as
	// TCP (the tunnel flag lost): cut by its inner headers, the outer
	// ones fixed on every segment as well.
	var outer headers
	tunnel := false
	if ok && proto == 6 && hd.proto == 17 && h.Flags&VnetNeedsCsum != 0 {
		if in, iok := tunnelInnerHeaders(frame, hd, int(h.CsumStart)); iok {
			outer, hd, tunnel = hd, in, true
		}
	}
	if !ok || hd.proto != proto || (gt == GSOTCPv4 || gt == GSOUDP) && !hd.v4 || gt == GSOTCPv6 && hd.v4 {
		return 0, ErrGSOFrame
	}
	if h.Flags&VnetNeedsCsum != 0 && int(h.CsumStart) != hd.l4 {
		return 0, ErrGSOFrame
	}
	mss := int(h.GSOSize)
	if gt == GSOUDP {
		return fragmentUDP4(frame, hd, mss&^7, emit)
	}
	hlen := hd.l4 + 8
	if proto == 6 {
		hlen = hd.l4 + int(frame[hd.l4+12]>>4)*4
		if hlen < hd.l4+20 || hlen > len(frame) {
			return 0, ErrGSOFrame
		}
	}
	if hlen > MaxGSOHeader {
		return 0, ErrGSOHeader
	}
	plen := len(frame) - hlen
	nseg := 1
	if plen > 0 {
		if mss == 0 {
			return 0, ErrGSOSize
		}
		nseg = (plen + mss - 1) / mss
	}
	if nseg > MaxGSOSegments {
		return 0, ErrGSOSize
	}
	var tmpl [MaxGSOHeader]byte
	copy(tmpl[:hlen], frame[:hlen])
	l3, l4 := hd.l3, hd.l4
	addrs := addrSum(frame, hd)
	id := binary.BigEndian.Uint16(frame[l3+4:])
	oid := binary.BigEndian.Uint16(frame[outer.l3+4:])
	seq := binary.BigEndian.Uint32(frame[l4+4:])
	for i := 0; i < nseg; i++ {
		start := hlen + i*mss
		end := min(start+mss, len(frame))
		seg := frame[start-hlen : end]
		if i > 0 {
			copy(seg, tmpl[:hlen])
		}
		if hd.v4 {
			binary.BigEndian.PutUint16(seg[l3+2:], uint16(len(seg)-l3))
			binary.BigEndian.PutUint16(seg[l3+4:], id+uint16(i))
			seg[l3+10], seg[l3+11] = 0, 0
			binary.BigEndian.PutUint16(seg[l3+10:], ^wire.Fold64(wire.Sum64(0, seg[l3:l4])))
		} else {
			binary.BigEndian.PutUint16(seg[l3+4:], uint16(len(seg)-l3-40))
		}
		l4len := len(seg) - l4
		sum := addrs + uint64(proto) + uint64(l4len)
		if proto == 6 {
			binary.BigEndian.PutUint32(seg[l4+4:], seq+uint32(i*mss))
			if i < nseg-1 {
				seg[l4+13] &^= tcpFIN | tcpPSH
			}
			if i > 0 {
				seg[l4+13] &^= tcpCWR
			}
			seg[l4+16], seg[l4+17] = 0, 0
			binary.BigEndian.PutUint16(seg[l4+16:], ^wire.Fold64(wire.Sum64(sum, seg[l4:])))
			if tunnel {
				fixOuter(seg, outer, oid+uint16(i))
			}
		} else {
			binary.BigEndian.PutUint16(seg[l4+4:], uint16(l4len))
			seg[l4+6], seg[l4+7] = 0, 0
			c := ^wire.Fold64(wire.Sum64(sum, seg[l4:]))
			if c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(seg[l4+6:], c)
		}
		emit(seg)
	}
	return nseg, nil
}

// tunnelInnerHeaders finds the inner IP and TCP headers of a TCP packet
// in a session tunnel (outer headers hd; wire.ParseSessionTunnel) whose
// inner TCP header is at l4.
func tunnelInnerHeaders(f []byte, hd headers, l4 int) (headers, bool) {
	t, ok := wire.ParseSessionTunnel(f, hd.l3)
	if !ok || t.InnerL4 != l4 || t.InnerProto != wire.ProtoTCP || len(f) < l4+20 {
		return headers{}, false
	}
	return headers{l3: t.Inner, l4: l4, v4: t.IPVersion == 4, proto: t.InnerProto}, true
}

// fixOuter sets the outer IP and UDP lengths of a segment of a tunnel
// super-packet (outer headers o), the IPv4 identification and header
// checksum, and a UDP checksum that is not 0.
func fixOuter(seg []byte, o headers, id uint16) {
	if o.v4 {
		binary.BigEndian.PutUint16(seg[o.l3+2:], uint16(len(seg)-o.l3))
		binary.BigEndian.PutUint16(seg[o.l3+4:], id)
		binary.BigEndian.PutUint16(seg[o.l3+10:], wire.IPv4HeaderChecksum(seg[o.l3:o.l4]))
	} else {
		binary.BigEndian.PutUint16(seg[o.l3+4:], uint16(len(seg)-o.l3-40))
	}
	ulen := len(seg) - o.l4
	binary.BigEndian.PutUint16(seg[o.l4+4:], uint16(ulen))
	if seg[o.l4+6]|seg[o.l4+7] != 0 {
		seg[o.l4+6], seg[o.l4+7] = 0, 0
		c := ^wire.Fold64(wire.Sum64(addrSum(seg, o)+17+uint64(ulen), seg[o.l4:]))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(seg[o.l4+6:], c)
	}
}

// TCP flags in byte 13 of the header.
const (
	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

// fragmentUDP4 is UFO: the UDP datagram at hd.l4 (checksum computed over
// all of it) cut into IPv4 fragments of fs bytes.
func fragmentUDP4(frame []byte, hd headers, fs int, emit func([]byte)) (int, error) {
	l3, l4 := hd.l3, hd.l4
	hlen := l4
	if len(frame) < l4+8 {
		return 0, ErrGSOFrame
	}
	if hlen > MaxGSOHeader {
		return 0, ErrGSOHeader
	}
	plen := len(frame) - hlen
	if fs == 0 {
		return 0, ErrGSOSize
	}
	nseg := (plen + fs - 1) / fs
	if nseg > MaxGSOSegments {
		return 0, ErrGSOSize
	}
	frame[l4+6], frame[l4+7] = 0, 0
	c := ^wire.Fold64(wire.Sum64(addrSum(frame, hd)+17+uint64(plen), frame[l4:]))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[l4+6:], c)
	var tmpl [MaxGSOHeader]byte
	copy(tmpl[:hlen], frame[:hlen])
	for i := 0; i < nseg; i++ {
		start := hlen + i*fs
		end := min(start+fs, len(frame))
		seg := frame[start-hlen : end]
		if i > 0 {
			copy(seg, tmpl[:hlen])
		}
		binary.BigEndian.PutUint16(seg[l3+2:], uint16(len(seg)-l3))
		fo := uint16(i * fs >> 3)
		if i < nseg-1 {
			fo |= 0x2000 // MF
		}
		binary.BigEndian.PutUint16(seg[l3+6:], fo)
		seg[l3+10], seg[l3+11] = 0, 0
		binary.BigEndian.PutUint16(seg[l3+10:], ^wire.Fold64(wire.Sum64(0, seg[l3:l4])))
		emit(seg)
	}
	return nseg, nil
}

// headers locates the layers of a frame.
type headers struct {
	l3, l4 int  // offsets of the IP and the TCP/UDP header
	v4     bool // IPv4, else IPv6
	proto  byte // L4 protocol (IPv6: after extension headers)
}

// parseHeaders walks Ethernet, up to two VLAN tags, IPv4 (not a fragment)
// or IPv6 with hop-by-hop, routing and destination options headers, to
// the L4 header, which must fit in the frame with at least 8 bytes (20 for
// TCP).
func parseHeaders(f []byte) (headers, bool) {
	var h headers
	if len(f) < 14 {
		return h, false
	}
	off, et := 14, binary.BigEndian.Uint16(f[12:])
	for tags := 0; (et == 0x8100 || et == 0x88a8) && tags < 2; tags++ {
		if len(f) < off+4 {
			return h, false
		}
		et = binary.BigEndian.Uint16(f[off+2:])
		off += 4
	}
	h.l3 = off
	switch et {
	case 0x0800:
		if len(f) < off+20 || f[off]>>4 != 4 {
			return h, false
		}
		ihl := int(f[off]&15) * 4
		if ihl < 20 || binary.BigEndian.Uint16(f[off+6:])&0x3fff != 0 { // MF or offset: a fragment
			return h, false
		}
		h.v4, h.proto, h.l4 = true, f[off+9], off+ihl
	case 0x86dd:
		if len(f) < off+40 || f[off]>>4 != 6 {
			return h, false
		}
		nh, p := f[off+6], off+40
		for nh == 0 || nh == 43 || nh == 60 {
			if len(f) < p+8 {
				return h, false
			}
			nh, p = f[p], p+(int(f[p+1])+1)*8
		}
		h.proto, h.l4 = nh, p
	default:
		return h, false
	}
	min := 8
	if h.proto == 6 {
		min = 20
	}
	return h, len(f) >= h.l4+min
}

// addrSum is the checksum pseudo-header's addresses, summed and folded
// (so that small values can be added to it without a carry).
func addrSum(f []byte, h headers) uint64 {
	if h.v4 {
		return uint64(wire.Fold64(wire.Sum64(0, f[h.l3+12:h.l3+20])))
	}
	return uint64(wire.Fold64(wire.Sum64(0, f[h.l3+8:h.l3+40])))
}

// segmentIPLen returns the IP length of the largest segment Segment would
// cut TCP or UDP (GSO_UDP_L4) super-packet frame into, 0 when frame is
// not one Segment would take (legacy UFO, which becomes fragments,
// included), so that it is never forwarded whole.
func segmentIPLen(h VnetHdr, frame []byte) int {
	gt := h.GSOType &^ GSOECN
	var proto byte
	switch gt {
	case GSOTCPv4, GSOTCPv6:
		proto = 6
	case GSOUDPL4:
		proto = 17
	default:
		return 0
	}
	hd, ok := parseHeaders(frame)
	if !ok || hd.proto != proto || gt == GSOTCPv4 && !hd.v4 || gt == GSOTCPv6 && hd.v4 ||
		h.Flags&VnetNeedsCsum == 0 || int(h.CsumStart) != hd.l4 || h.GSOSize == 0 {
		return 0
	}
	hlen := hd.l4 + 8
	if proto == 6 {
		hlen = hd.l4 + int(frame[hd.l4+12]>>4)*4
		if hlen < hd.l4+20 || hlen > len(frame) {
			return 0
		}
	}
	if hlen > MaxGSOHeader || (len(frame)-hlen+int(h.GSOSize)-1)/int(h.GSOSize) > MaxGSOSegments {
		return 0
	}
	return hlen - hd.l3 + min(int(h.GSOSize), len(frame)-hlen)
}

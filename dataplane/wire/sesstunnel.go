package wire

import (
	"encoding/binary"
	"net/netip"

	"github.com/intd-project/intd/sai/spec"
)

// SessionTunnelLen is what an INT session tunnel adds after its outer IP
// header: UDP, VXLAN-GPE, the INT shim and the INT-MD header (the hops
// come on top).
const SessionTunnelLen = UDPLen + VXLANLen + ShimLen + MDHeaderLen

// SessionTunnelOverhead is the whole encapsulation of a session tunnel
// of IP version ipv carrying hop bytes of INT-MD stack.
func SessionTunnelOverhead(ipv uint8, hop int) int {
	if ipv == 6 {
		return IPv6Len + SessionTunnelLen + hop
	}
	return IPv4MinLen + SessionTunnelLen + hop
}

// EncapSessionTunnel puts the IP packet p (parsed from pkt, no IPv6
// extension headers) behind the encapsulation of an INT session tunnel
// from src to dst (of the packet's IP version): outer IP (the inner
// DSCP and ECN; IPv4 with DF, identification 0, TTL 64; IPv6 flow label
// 0, hop limit 64), UDP (source port the inner flow's entropy port,
// destination 4790, checksum 0), VXLAN-GPE (flags I and P, next protocol
// INT, VNI 0), the INT shim (next protocol IPv4 or IPv6) and md, the
// INT-MD header and stack. pkt must have the room in its capacity; p
// then describes the tunnel packet (Reparse not needed for lengths: L4,
// Shim, INT, Next and End are set).
func EncapSessionTunnel(pkt []byte, p *Packet, src, dst netip.Addr, md []byte) ([]byte, error) {
	if p.L3 < 0 || len(md) < MDHeaderLen || len(md)%4 != 0 || len(md)/4 > 0xff {
		return pkt, ErrUnsupported
	}
	v6 := p.IPVersion == 6
	if src.Is4() == v6 || dst.Is4() == v6 || p.End > len(pkt) {
		return pkt, ErrUnsupported
	}
	ohl := IPv4MinLen
	if v6 {
		ohl = IPv6Len
	}
	n := ohl + UDPLen + VXLANLen + ShimLen + len(md)
	if cap(pkt)-p.End < n {
		return pkt, ErrNoRoom
	}
	l3 := p.L3
	inner := p.End - l3
	pkt = pkt[:p.End+n]
	copy(pkt[l3+n:], pkt[l3:p.End])
	h := pkt[l3 : l3+n]
	ih := pkt[l3+n:]
	total := inner + n
	next := uint8(1)
	if v6 {
		_ = IPv6Header{TrafficClass: ih[0]<<4 | ih[1]>>4, PayloadLen: uint16(total - IPv6Len), NextHeader: ProtoUDP,
			HopLimit: 64, Src: src.As16(), Dst: dst.As16()}.Put(h)
		next = 2
	} else {
		_ = IPv4Header{TOS: ih[1], TotalLen: uint16(total), Flags: 2, TTL: 64, Proto: ProtoUDP,
			Src: src.As4(), Dst: dst.As4()}.Put(h)
	}
	u := h[ohl:]
	_ = UDPHeader{SrcPort: p.Flow.EntropyPort(), DstPort: spec.PortVXLANGPE, Length: uint16(total - ohl)}.Put(u)
	_ = VXLANGPE{Flags: GPEFlagI | GPEFlagP, NextProto: spec.VXLANGPENextProtoINT}.Put(u[UDPLen:])
	_ = GPEShim{Type: spec.TypeMD, Length: uint8(len(md) / 4), NextProto: next}.Put(u[UDPLen+VXLANLen:])
	copy(u[UDPLen+VXLANLen+ShimLen:], md)
	// The outer header is IPv4 with options, or the inner one was: the
	// parse below names the outer header's fields.
	p.L4 = l3 + ohl
	p.Tunnel = p.L4 + UDPLen
	p.Shim = p.Tunnel + VXLANLen
	p.INT = p.Shim + ShimLen
	p.INTType, p.INTLen, p.Encap = spec.TypeMD, len(md), spec.EncapVXLANGPE
	p.Next = p.INT + len(md)
	p.End += n
	p.Proto = ProtoUDP
	p.IPHeaderLen = ohl
	return pkt, nil
}

// SessionTunnelLayout is where the headers of an INT session tunnel
// packet are (ParseSessionTunnel): offsets into its frame.
type SessionTunnelLayout struct {
	L3, L4 int // outer IP and UDP headers
	Shim   int // INT shim (after VXLAN-GPE), the INT-MD header after it
	Inner  int // inner IP header, after the INT-MD stack
	// InnerL4 is the inner transport header: after the inner IPv4
	// header's options, or the IPv6 fixed header.
	InnerL4    int
	InnerProto uint8 // inner IPv4 protocol or IPv6 next header
	IPVersion  uint8 // 4 or 6, outer and inner alike
}

// ParseSessionTunnel reads frame b, its outer IP header at l3, as an INT
// session tunnel packet, the layout EncapSessionTunnel writes: IPv4
// without options and not a fragment, or IPv6 whose next header is UDP;
// UDP to port 4790; VXLAN-GPE with next protocol INT; an INT-MD shim
// whose next protocol is the outer IP version (1 IPv4, 2 IPv6) and whose
// length (in words, shim excluded) holds at least the INT-MD header;
// then an inner IP header of the same version, whole in b. It does not
// allocate.
func ParseSessionTunnel(b []byte, l3 int) (t SessionTunnelLayout, ok bool) {
	if l3 < 0 || len(b) < l3+IPv4MinLen {
		return t, false
	}
	t.L3 = l3
	var next byte // the shim's next protocol
	switch b[l3] >> 4 {
	case 4:
		if b[l3] != 0x45 || b[l3+9] != ProtoUDP || binary.BigEndian.Uint16(b[l3+6:])&0x3fff != 0 {
			return t, false
		}
		t.IPVersion, t.L4, next = 4, l3+IPv4MinLen, 1
	case 6:
		if len(b) < l3+IPv6Len || b[l3+6] != ProtoUDP {
			return t, false
		}
		t.IPVersion, t.L4, next = 6, l3+IPv6Len, 2
	default:
		return t, false
	}
	t.Shim = t.L4 + UDPLen + VXLANLen
	s := t.Shim
	if len(b) < s+ShimLen || binary.BigEndian.Uint16(b[t.L4+2:]) != spec.PortVXLANGPE ||
		b[t.L4+UDPLen+3] != spec.VXLANGPENextProtoINT || spec.HeaderType(b[s]>>4) != spec.TypeMD ||
		int(b[s+1])*4 < MDHeaderLen || b[s+3] != next {
		return t, false
	}
	in := s + ShimLen + int(b[s+1])*4
	t.Inner = in
	if t.IPVersion == 6 {
		if len(b) < in+IPv6Len || b[in]>>4 != 6 {
			return t, false
		}
		t.InnerL4, t.InnerProto = in+IPv6Len, b[in+6]
		return t, true
	}
	if len(b) < in+IPv4MinLen || b[in]>>4 != 4 || b[in]&15 < 5 {
		return t, false
	}
	t.InnerL4, t.InnerProto = in+int(b[in]&15)*4, b[in+9]
	return t, true
}

// InnerDst is the inner destination of session tunnel packet b laid out
// as t.
func (t *SessionTunnelLayout) InnerDst(b []byte) netip.Addr {
	if t.IPVersion == 6 {
		return netip.AddrFrom16([16]byte(b[t.Inner+24 : t.Inner+40]))
	}
	return netip.AddrFrom4([4]byte(b[t.Inner+16 : t.Inner+20]))
}

// SessionTunnelInner says whether p (parsed from pkt) is a session tunnel
// packet (ParseSessionTunnel) and returns its inner destination.
func SessionTunnelInner(pkt []byte, p *Packet) (inner netip.Addr, ok bool) {
	if p.L3 < 0 || p.Encap != spec.EncapVXLANGPE || p.INTType != spec.TypeMD || p.Proto != ProtoUDP || p.End > len(pkt) {
		return inner, false
	}
	t, ok := ParseSessionTunnel(pkt[:p.End], p.L3)
	if !ok {
		return inner, false
	}
	return t.InnerDst(pkt), true
}

// SetSessionTunnelDst gives a session tunnel packet (SessionTunnelInner)
// the outer destination dst, its inner one, so that it is routed by the
// inner packet; the IPv4 header checksum and a UDP checksum are updated.
func SetSessionTunnelDst(pkt []byte, p *Packet, dst netip.Addr) {
	l3 := p.L3
	var old, nw []byte
	if p.IPVersion == 6 {
		a := dst.As16()
		old, nw = pkt[l3+24:l3+40], a[:]
	} else {
		a := dst.As4()
		old, nw = pkt[l3+16:l3+20], a[:]
	}
	// One's complement: subtract the old words, add the new ones.
	delta := Sum(0, nw) + uint32(^Fold(Sum(0, old)))
	copy(old, nw)
	if p.IPVersion == 4 {
		binary.BigEndian.PutUint16(pkt[l3+10:], AdjustChecksum(binary.BigEndian.Uint16(pkt[l3+10:]), delta))
	}
	if ck := binary.BigEndian.Uint16(pkt[p.L4+6:]); ck != 0 {
		ck = AdjustChecksum(ck, delta)
		if ck == 0 {
			ck = 0xffff
		}
		binary.BigEndian.PutUint16(pkt[p.L4+6:], ck)
	}
	p.Flow.Dst = dst
}

// DecapSessionTunnel removes a session tunnel's encapsulation
// (SessionTunnelInner) from pkt: outer IP, UDP, VXLAN-GPE and INT, what
// comes before the outer IP header (Ethernet) moved up to the inner
// packet. A congestion mark (CE) of the outer header is copied to an
// ECN-capable inner packet (RFC 6040). It returns the frame, a suffix of
// pkt; p no longer describes it.
func DecapSessionTunnel(pkt []byte, p *Packet) []byte {
	in := p.Next
	outer := pkt[p.L3]<<4 | pkt[p.L3+1]>>4 // IPv6 traffic class
	if p.IPVersion == 4 {
		outer = pkt[p.L3+1]
	}
	if outer&3 == 3 {
		if p.IPVersion == 6 {
			if w := binary.BigEndian.Uint16(pkt[in:]); w&0x30 != 0 {
				binary.BigEndian.PutUint16(pkt[in:], w|0x30)
			}
		} else if w := binary.BigEndian.Uint16(pkt[in:]); w&3 != 0 && w&3 != 3 {
			binary.BigEndian.PutUint16(pkt[in:], w|3)
			binary.BigEndian.PutUint16(pkt[in+10:], UpdateChecksum(binary.BigEndian.Uint16(pkt[in+10:]), w, w|3))
		}
	}
	n := in - p.L3
	copy(pkt[n:in], pkt[:p.L3])
	return pkt[n:p.End]
}

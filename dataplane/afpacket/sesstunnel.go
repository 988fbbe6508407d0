//go:build linux

package afpacket

import (
	"encoding/binary"

	"github.com/intd-project/intd/dataplane/wire"
)

// CanTunnel says whether the port sends UDP-tunnelled super-packets
// whole (it has a TunnelOut). It implements soft.TunnelLink.
func (p *Port) CanTunnel() bool { return p.tunnel.Load() != nil }

// setTunnel gives the port tunnel output o (nil: none), safely while it
// forwards, and returns the one it had.
func (p *Port) setTunnel(o *TunnelOut) *TunnelOut { return p.tunnel.Swap(o) }

// TransmitTunnel sends a TCP super-packet in a UDP tunnel (outer UDP
// header at outerL4, inner IP header at innerL3) through the port's
// TunnelOut, for segments of mss bytes of TCP payload, after the frames
// queued before it. Without a TunnelOut (taken away while the packet was
// queued) it is cut into segments here. It implements soft.TunnelLink.
func (p *Port) TransmitTunnel(frame []byte, outerL4, innerL3, mss int) {
	h, ok := tunnelHdr(frame, outerL4, innerL3, mss)
	if !ok {
		p.stats.TxErrors++
		return
	}
	err := errTunnelClosed
	if o := p.tunnel.Load(); o != nil {
		if p.txN > 0 {
			p.Flush() // in order with what the switch sent before
		}
		err = o.Send(frame, h)
	}
	switch {
	case err == errTunnelClosed:
		// No TunnelOut (any more): cut here. As AF_PACKET reports such a
		// super-packet: plain TCP, which Segment recognises as a tunnel
		// by its checksum start.
		h.Vnet.GSOType &^= GSOUDPTunnelIPv4 | GSOUDPTunnelIPv6
		h.Vnet.Flags &^= VnetUDPTunnelCsum
		if _, err := Segment(h.Vnet, frame, p.transmitFn); err != nil {
			p.stats.TxErrors++
		}
		return
	case err != nil:
		p.stats.TxErrors++
		return
	}
	p.stats.TxTunnel++
	p.stats.TxFrames++
	p.stats.TxBytes += uint64(len(frame))
}

// tunnelHdr describes a UDP-tunnelled TCP super-packet to TunnelOut:
// the inner TCP checksum completed per segment from its pseudo-header
// sum, the outer UDP checksum left as it is (0) unless set.
func tunnelHdr(f []byte, outerL4, innerL3, mss int) (TunnelHdr, bool) {
	var h TunnelHdr
	if innerL3+40 > len(f) || outerL4 < 14 || mss <= 0 || mss > 0xffff {
		return h, false
	}
	l4, gt := 0, uint8(0)
	switch f[innerL3] >> 4 {
	case 4:
		if f[innerL3+9] != wire.ProtoTCP {
			return h, false
		}
		l4, gt = innerL3+int(f[innerL3]&15)*4, GSOTCPv4
	case 6:
		if f[innerL3+6] != wire.ProtoTCP {
			return h, false
		}
		l4, gt = innerL3+wire.IPv6Len, GSOTCPv6
	default:
		return h, false
	}
	if l4+20 > len(f) {
		return h, false
	}
	if gt == GSOTCPv6 { // a session tunnel is of its packet's IP version
		gt |= GSOUDPTunnelIPv6
	} else {
		gt |= GSOUDPTunnelIPv4
	}
	if f[l4+13]&0x80 != 0 {
		gt |= GSOECN // CWR
	}
	var fl uint8 = VnetNeedsCsum
	if binary.BigEndian.Uint16(f[outerL4+6:]) != 0 {
		fl |= VnetUDPTunnelCsum
	}
	h.Vnet = VnetHdr{Flags: fl, GSOType: gt, HdrLen: uint16(l4 + int(f[l4+12]>>4)*4), GSOSize: uint16(mss),
		CsumStart: uint16(l4), CsumOffset: 16}
	h.OuterTransport, h.InnerNetwork = uint16(outerL4), uint16(innerL3)
	return h, true
}

// TransmitTCP queues a TCP super-packet (IP header at l3) with a fresh
// virtio_net_hdr for segments of mss payload bytes (the TCP checksum
// completed per segment from its pseudo-header sum). The frame is
// queued by reference, as with TransmitWhole. It implements
// soft.TCPLink.
func (p *Port) TransmitTCP(frame []byte, l3, mss int) {
	if l3+40 > len(frame) || mss <= 0 || mss > 0xffff {
		p.stats.TxErrors++
		return
	}
	var l4 int
	var gt uint8
	switch frame[l3] >> 4 {
	case 4:
		l4, gt = l3+int(frame[l3]&15)*4, GSOTCPv4
	case 6:
		l4, gt = l3+wire.IPv6Len, GSOTCPv6
	}
	if l4 == 0 || l4+20 > len(frame) {
		p.stats.TxErrors++
		return
	}
	if frame[l4+13]&0x80 != 0 {
		gt |= GSOECN
	}
	if p.txN == len(p.txMsgs) {
		p.Flush()
	}
	i := p.txN
	VnetHdr{Flags: VnetNeedsCsum, GSOType: gt, HdrLen: uint16(l4 + int(frame[l4+12]>>4)*4), GSOSize: uint16(mss),
		CsumStart: uint16(l4), CsumOffset: 16}.Put(p.txHdr[i][:])
	p.txIov[2*i].Base = &p.txHdr[i][0]
	p.txIov[2*i+1].Base = &frame[0]
	p.txIov[2*i+1].SetLen(len(frame))
	p.txN++
	p.refs++
}

// tunnelSegmentIPLen is segmentIPLen for a TCP super-packet in a
// session tunnel (wire.ParseSessionTunnel), which AF_PACKET reports as
// plain TCP (the tunnel flag lost): the checksum starts at the inner TCP
// header. 0 when it is not one.
func tunnelSegmentIPLen(h VnetHdr, frame []byte) int {
	gt := h.GSOType &^ GSOECN
	if gt != GSOTCPv4 && gt != GSOTCPv6 || h.Flags&VnetNeedsCsum == 0 || h.GSOSize == 0 {
		return 0
	}
	hd, ok := parseHeaders(frame)
	if !ok || hd.proto != wire.ProtoUDP {
		return 0
	}
	in, ok := tunnelInnerHeaders(frame, hd, int(h.CsumStart))
	if !ok || in.v4 != (gt == GSOTCPv4) {
		return 0
	}
	l4 := in.l4
	hlen := l4 + int(frame[l4+12]>>4)*4
	if hlen < l4+20 || hlen > len(frame) || hlen > MaxGSOHeader ||
		(len(frame)-hlen+int(h.GSOSize)-1)/int(h.GSOSize) > MaxGSOSegments {
		return 0
	}
	return hlen - hd.l3 + min(int(h.GSOSize), len(frame)-hlen)
}

package soft

import (
	"encoding/binary"
	"net/netip"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// mtuRoom is how many bytes b may grow by on port p without exceeding the
// port's MTU (0 when it already does).
func mtuRoom(b *pbuf, p *port) int {
	return max(0, p.cfg.MTU-(b.pkt.End-b.pkt.L3))
}

// setData points b.data at the frame out returned by a wire edit (in
// b.store, or in place in the receive buffer of a super-packet).
func (b *pbuf) setData(out []byte) { b.data = out }

// transit is the INT transit hop step.
func (s *Switch) transit(b *pbuf, c *compiled, p *port, t int64) {
	if b.pkt.INTType == spec.TypeMX {
		p.ctr.IntTransited++
		s.node.IntTransited++
		if s.reporter != nil {
			ev := s.event(report.KindFlow, b, t)
			s.fillHop(b, c, t, &ev.Hop)
			s.emit(ev)
		}
		return
	}
	s.fillHop(b, c, t, &s.hop)
	room := mtuRoom(b, p)
	if b.whole {
		// Every segment grows by the hop (the session tunnel's source
		// sized them for its hops).
		room = max(0, p.cfg.MTU-b.segIP)
		b.tunOut = true
	}
	limit := len(b.data) + room
	limit = min(limit, cap(b.data))
	out, err := wire.PushHop(b.data[:len(b.data):limit], &b.pkt, &s.hop, wire.PushOptions{})
	b.setData(out)
	switch err {
	case nil:
		p.ctr.IntTransited++
		s.node.IntTransited++
	case wire.ErrHopLimit:
		p.ctr.EBitSet++
		s.node.EBitSet++
	case wire.ErrNoRoom, wire.ErrGeneveTooLong:
		p.ctr.MBitSet++
		s.node.MBitSet++
		if err == wire.ErrGeneveTooLong {
			s.setMBit(b)
		}
	}
}

// setMBit sets M on an INT-MD header when wire did not (Geneve overflow).
// The header is inside a UDP tunnel whose checksum is updated.
func (s *Switch) setMBit(b *pbuf) {
	h := b.data[b.pkt.INT:]
	if h[0]&0x02 != 0 {
		return
	}
	old := binary.BigEndian.Uint16(h)
	nw := old | 0x0200
	binary.BigEndian.PutUint16(h, nw)
	s.l4Word(b, b.pkt.INT, old, nw)
}

// l4Word updates the TCP/UDP checksum of b for a 16-bit word at off (even
// distance from the L4 header) that changed from old to nw.
func (s *Switch) l4Word(b *pbuf, off int, old, nw uint16) {
	p := &b.pkt
	if p.L4 < 0 || (off-p.L4)&1 != 0 {
		return
	}
	var at int
	switch p.Proto {
	case wire.ProtoUDP:
		at = p.L4 + 6
		if binary.BigEndian.Uint16(b.data[at:]) == 0 {
			return
		}
	case wire.ProtoTCP:
		at = p.L4 + 16
	default:
		return
	}
	ck := wire.UpdateChecksum(binary.BigEndian.Uint16(b.data[at:]), old, nw)
	if ck == 0 && p.Proto == wire.ProtoUDP {
		ck = 0xffff
	}
	binary.BigEndian.PutUint16(b.data[at:], ck)
}

// sink is the INT sink step: this node's metadata goes on the stack (or in
// the report for MX), the stack goes to the reporter, and INT is removed.
// It returns false when the packet must be discarded (D bit).
func (s *Switch) sink(b *pbuf, c *compiled, p *port, t int64) bool {
	discard := b.data[b.pkt.INT]&0x08 != 0
	s.fillHop(b, c, t, &s.hop)
	if b.pkt.INTType == spec.TypeMD {
		out, err := wire.PushHop(b.data, &b.pkt, &s.hop, wire.PushOptions{})
		b.setData(out)
		if err == wire.ErrHopLimit {
			p.ctr.EBitSet++
			s.node.EBitSet++
		}
	}
	if s.reporter != nil {
		ev := s.event(report.KindFlow, b, t)
		ev.Hop = s.hop
		s.emit(ev)
	}
	if s.tunnelEndsHere(b, c) {
		// A session tunnel ends here: all of it goes.
		l3 := b.pkt.L3
		b.data = wire.DecapSessionTunnel(b.data, &b.pkt)
		b.pkt.L3 = l3
		b.tcpOut = b.whole
	} else {
		out, err := wire.Strip(b.data, &b.pkt, wire.SinkOptions{RestoreDSCP: b.pkt.Encap == spec.EncapDSCP})
		if err != nil {
			s.node.IntMalformedDrop++
			p.ctr.IntMalformedDrop++
			s.countDrop(b.out, spec.DropUnknown)
			return false
		}
		b.setData(out)
	}
	p.ctr.IntStripped++
	s.node.IntStripped++
	if discard {
		p.ctr.IntDiscarded++
		s.node.IntDiscarded++
	}
	return !discard
}

// tunnelEnd is this node's session tunnel end of p's IP version.
func (s *Switch) tunnelEnd(p *wire.Packet, c *compiled) netip.Addr {
	if p.IPVersion == 6 {
		return c.tunAddr6
	}
	return c.tunAddr4
}

// tunnelEndsHere says whether INT packet b is a session tunnel that ends
// at this node: its outer destination is the inner one (given on
// arrival) and the node has a tunnel address of its IP version.
func (s *Switch) tunnelEndsHere(b *pbuf, c *compiled) bool {
	dst, ok := wire.SessionTunnelInner(b.data, &b.pkt)
	return ok && dst == b.pkt.Flow.Dst && c.tunnelAddr(s.tunnelEnd(&b.pkt, c))
}

// tunnelSource says whether TCP super-packet b, matched by ent with flow
// op INT, goes whole into a session tunnel through port out: ent's
// session has one for its IP version, and the port's link sends them.
func (s *Switch) tunnelSource(c *compiled, b *pbuf, ent *wlEntry, out int) bool {
	if ent == nil || ent.sess == nil || !ent.sess.tunnel || ent.act.FlowOp != sai.FlowOpInt ||
		!c.endpoint || out < 0 || c.sink[out] || ent.sess.a.Mode != sai.IntModeMD {
		return false
	}
	pk := &b.pkt
	if pk.Proto != wire.ProtoTCP || pk.L4 < 0 || pk.Tunnel >= 0 || pk.INT >= 0 || !s.tunnelEnd(pk, c).IsValid() ||
		!ent.sess.dst(pk.IPVersion).IsValid() {
		return false
	}
	l := s.ports[out].tun
	return l != nil && l.CanTunnel()
}

// dst is the session's tunnel destination for IP version ipv.
func (se *session) dst(ipv uint8) netip.Addr {
	if ipv == 6 {
		return se.dst6
	}
	return se.dst4
}

// tunSource is the source step of a session tunnel's packet: INT-MD with
// this node's hop in a VXLAN-GPE tunnel to the session's destination
// (wire.EncapSessionTunnel). A super-packet's segments are made small
// enough for the tunnel and MaxHopCount hops. A packet that cannot be
// encapsulated leaves untouched, counted as not initiated.
func (s *Switch) tunSource(b *pbuf, c *compiled, p *port, t int64) {
	se := b.entry.sess
	pk := &b.pkt
	src, dst := s.tunnelEnd(pk, c), se.dst(pk.IPVersion)
	if se.a.Mode != sai.IntModeMD || pk.L3 < 0 || !src.IsValid() || !dst.IsValid() ||
		pk.IPVersion == 6 && pk.IPHeaderLen != wire.IPv6Len || pk.End != len(b.data) || se.hopML > 31 {
		se.stats.NotInitiatedUnsupported++
		return
	}
	hopb := se.hopML * 4
	n := wire.SessionTunnelOverhead(pk.IPVersion, hopb)
	if b.whole {
		reserve := n + max(int(se.a.MaxHopCount)-1, 0)*hopb
		hdrs := b.segIP - b.mss
		if p.cfg.MTU < hdrs+reserve+256 {
			se.stats.NotInitiatedNoRoom++
			return
		}
		b.mss = min(b.mss, p.cfg.MTU-hdrs-reserve)
	} else if pk.End-pk.L3+n > p.cfg.MTU {
		se.stats.NotInitiatedNoRoom++
		return
	}
	hdr := s.hdr[:]
	h := wire.MDHeader{Version: wire.Version2, Discard: se.a.Discard, HopML: uint8(se.hopML),
		RemainingHops: se.a.MaxHopCount - 1, Instructions: se.inst,
		DomainID: se.a.DomainSpecificID, DSInstructions: se.a.DSInstruction, DSFlags: se.a.DSFlags}
	_ = h.Put(hdr)
	s.fillHop(b, c, t, &s.hop)
	m, _ := wire.PutHop(hdr[wire.MDHeaderLen:], se.inst, se.dsWords, &s.hop)
	out, err := wire.EncapSessionTunnel(b.data, pk, src, dst, hdr[:wire.MDHeaderLen+m])
	if err != nil {
		se.stats.NotInitiatedUnsupported++
		return
	}
	b.setData(out)
	b.tunOut = b.whole
	se.stats.PacketsInitiated++
	p.ctr.IntInserted++
	s.node.IntInserted++
}

// tunnelKind says which INT tunnel encapsulation the source can use for b,
// or EncapNone.
func tunnelKind(b *pbuf, c *compiled) spec.Encap {
	pk := &b.pkt
	if pk.Tunnel < 0 {
		return spec.EncapNone
	}
	switch {
	case pk.Proto == wire.ProtoGRE && c.parser.GREProto != 0 && pk.IPVersion == 4:
		return spec.EncapGRE
	case pk.Proto == wire.ProtoUDP:
		switch binary.BigEndian.Uint16(b.data[pk.L4+2:]) {
		case spec.PortVXLANGPE:
			if c.parser.VXLANGPEPort != 0 && b.data[pk.Tunnel]&wire.GPEFlagP != 0 {
				return spec.EncapVXLANGPE
			}
		case spec.PortGeneve:
			if c.parser.GenevePort != 0 {
				return spec.EncapGeneve
			}
		}
	}
	return spec.EncapNone
}

// source is the INT source step for a watched flow with flow op INT.
func (s *Switch) source(b *pbuf, c *compiled, p *port, t int64) {
	se := b.entry.sess
	if se.tunnel {
		s.tunSource(b, c, p, t)
		return
	}
	tun := tunnelKind(b, c)
	opt := c.src
	fixed := wire.ShimLen + wire.MDHeaderLen
	switch {
	case tun != spec.EncapNone:
	case opt.Encap == spec.EncapNone:
		se.stats.NotInitiatedUnsupported++
		return
	case opt.Encap == spec.EncapProbeMarker:
		fixed += wire.ProbeLen
	case opt.Encap == spec.EncapUDPPort:
		if opt.NPT == spec.NPTUDPPort && b.pkt.Proto != wire.ProtoUDP {
			opt.NPT = spec.NPTIPProto // non-UDP traffic always gets NPT 2
		}
		if opt.NPT == spec.NPTIPProto {
			fixed += wire.UDPLen
		}
	}
	room := mtuRoom(b, p)
	if b.pkt.L3 < 0 || (tun == spec.EncapNone && b.pkt.L4 < 0) {
		se.stats.NotInitiatedUnsupported++
		return
	}
	if fixed > room {
		se.stats.NotInitiatedNoRoom++ // never fragment
		return
	}
	hdr := s.hdr[:]
	typ := spec.TypeMD
	n := wire.MDHeaderLen
	if se.a.Mode == sai.IntModeMX {
		typ = spec.TypeMX
		_ = wire.MXHeader{Version: wire.Version2, Discard: se.a.Discard, Instructions: se.inst,
			DomainID: se.a.DomainSpecificID, DSInstructions: se.a.DSInstruction, DSFlags: se.a.DSFlags}.Put(hdr)
	} else {
		rhc := se.a.MaxHopCount
		if tun == spec.EncapGeneve {
			rhc = uint8(min(int(rhc), wire.GeneveHopLimit(se.hopML, int(b.data[b.pkt.Tunnel]&0x3f))))
		}
		h := wire.MDHeader{Version: wire.Version2, Discard: se.a.Discard, HopML: uint8(se.hopML),
			RemainingHops: rhc, Instructions: se.inst,
			DomainID: se.a.DomainSpecificID, DSInstructions: se.a.DSInstruction, DSFlags: se.a.DSFlags}
		if fixed+se.hopML*4 > room {
			h.MTUExceeded = true // headers fit, our metadata does not
			p.ctr.MBitSet++
			s.node.MBitSet++
		} else {
			h.RemainingHops--
			s.fillHop(b, c, t, &s.hop)
			m, _ := wire.PutHop(hdr[wire.MDHeaderLen:], se.inst, se.dsWords, &s.hop)
			n += m
		}
		_ = h.Put(hdr)
	}
	var out []byte
	var err error
	if tun != spec.EncapNone {
		out, err = insertTunnel(b.data, &b.pkt, tun, typ, hdr[:n], c.parser.GREProto)
	} else {
		out, err = wire.InsertINT(b.data, &b.pkt, typ, hdr[:n], &opt)
	}
	if err != nil {
		se.stats.NotInitiatedUnsupported++
		return
	}
	b.setData(out)
	se.stats.PacketsInitiated++
	p.ctr.IntInserted++
	s.node.IntInserted++
	if typ == spec.TypeMX && s.reporter != nil {
		ev := s.event(report.KindFlow, b, t)
		s.fillHop(b, c, t, &ev.Hop)
		s.emit(ev)
	}
}

// insertTunnel inserts INT into a packet that is already GRE, VXLAN-GPE or
// Geneve encapsulated (the spec's "original packet had the tunnel" case):
// a GRE or GPE shim after the tunnel header, or an INT Geneve option
// placed first. Lengths and checksums are updated incrementally.
func insertTunnel(pkt []byte, p *wire.Packet, e spec.Encap, typ spec.HeaderType, hdr []byte, greProto uint16) ([]byte, error) {
	words := len(hdr) / 4
	n := wire.ShimLen + len(hdr)
	t := p.Tunnel
	var at int
	switch e {
	case spec.EncapGRE:
		flags := binary.BigEndian.Uint16(pkt[t:])
		if flags&0x8000 != 0 {
			return pkt, wire.ErrUnsupported // GRE checksum present
		}
		at = t + 4
		if flags&0x2000 != 0 {
			at += 4
		}
		if flags&0x1000 != 0 {
			at += 4
		}
	case spec.EncapVXLANGPE:
		at = t + wire.VXLANLen
	case spec.EncapGeneve:
		if words > wire.MaxGeneveOptionWords || int(pkt[t]&0x3f)+n/4 > 63 {
			return pkt, wire.ErrGeneveTooLong
		}
		at = t + wire.GeneveLen
	}
	if cap(pkt)-len(pkt) < n {
		return pkt, wire.ErrNoRoom
	}
	old := len(pkt)
	pkt = pkt[:old+n]
	copy(pkt[at+n:], pkt[at:old])
	var delta uint32 // change of the UDP segment sum
	word := func(off int, v uint16) {
		o := binary.BigEndian.Uint16(pkt[off:])
		binary.BigEndian.PutUint16(pkt[off:], v)
		delta += uint32(^o) + uint32(v)
	}
	switch e {
	case spec.EncapGRE:
		_ = wire.GREShim{Type: typ, Length: uint8(words), NextProto: binary.BigEndian.Uint16(pkt[t+2:])}.Put(pkt[at:])
		binary.BigEndian.PutUint16(pkt[t+2:], greProto)
	case spec.EncapVXLANGPE:
		_ = wire.GPEShim{Type: typ, Length: uint8(words), NextProto: pkt[t+3]}.Put(pkt[at:])
		word(t+2, uint16(pkt[t+2])<<8|spec.VXLANGPENextProtoINT)
	case spec.EncapGeneve:
		_ = wire.GeneveOption{Class: spec.GeneveClassINT, Type: uint8(typ), Length: uint8(words)}.Put(pkt[at:])
		word(t, uint16(pkt[t]&0xc0|(pkt[t]&0x3f+uint8(n/4)))<<8|uint16(pkt[t+1]))
	}
	copy(pkt[at+wire.ShimLen:], hdr)
	// IP length and header checksum.
	l3 := p.L3
	if p.IPVersion == 4 {
		o := binary.BigEndian.Uint16(pkt[l3+2:])
		binary.BigEndian.PutUint16(pkt[l3+2:], o+uint16(n))
		ck := binary.BigEndian.Uint16(pkt[l3+10:])
		binary.BigEndian.PutUint16(pkt[l3+10:], wire.UpdateChecksum(ck, o, o+uint16(n)))
	} else {
		o := binary.BigEndian.Uint16(pkt[l3+4:])
		binary.BigEndian.PutUint16(pkt[l3+4:], o+uint16(n))
	}
	if e != spec.EncapGRE {
		u := p.L4
		ol := binary.BigEndian.Uint16(pkt[u+4:])
		word(u+4, ol+uint16(n))
		delta += uint32(^ol) + uint32(ol+uint16(n)) // pseudo-header length
		delta += wire.Sum(0, pkt[at:at+n])
		if ck := binary.BigEndian.Uint16(pkt[u+6:]); ck != 0 {
			ck = wire.AdjustChecksum(ck, delta)
			if ck == 0 {
				ck = 0xffff
			}
			binary.BigEndian.PutUint16(pkt[u+6:], ck)
		}
	}
	p.End += n
	p.Encap, p.Shim, p.INT, p.INTType, p.INTLen, p.Next = e, at, at+wire.ShimLen, typ, len(hdr), at+n
	return pkt, nil
}

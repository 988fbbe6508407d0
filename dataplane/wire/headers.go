package wire

import (
	"encoding/binary"
	"net/netip"

	"github.com/intd-project/intd/sai/spec"
)

// Code points used while parsing.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100
	EtherTypeQinQ = 0x88a8
	EtherTypeTEB  = 0x6558 // transparent Ethernet bridging (GRE payload is Ethernet)

	ProtoICMP   = 1
	ProtoIPv4   = 4
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoIPv6   = 41
	ProtoGRE    = spec.IPProtoGRE
	ProtoICMPv6 = 58

	// The tunnels' ports and code points are spec.EncapTable's.

	EthernetLen = 14
	IPv4MinLen  = 20
	IPv6Len     = 40
	UDPLen      = 8
	TCPMinLen   = 20
	VXLANLen    = 8
	GeneveLen   = 8
	ShimLen     = 4
	ProbeLen    = 8
)

// Parser holds the INT domain's marking configuration; every way of finding
// INT is off until its field is set. A Parser is read-only during Parse and
// safe to share between goroutines.
type Parser struct {
	DSCP, DSCPMask uint8  // INT over TCP/UDP when dscp&DSCPMask == DSCP (mask 0 disables)
	UDPPort        uint16 // INT_TBD UDP destination port (0 disables)
	ProbeMarker    uint64 // 64-bit probe marker after TCP/UDP (0 disables)
	GREProto       uint16 // GRE protocol type announcing INT (TBD_INT; 0 disables)
	VXLANGPEPort   uint16 // UDP port of VXLAN-GPE (0 disables)
	GenevePort     uint16 // UDP port of Geneve (0 disables)
	// GPENextProto and GeneveClass are the VXLAN-GPE next protocol and
	// Geneve option class announcing INT; 0 means the spec's
	// (spec.VXLANGPENextProtoINT, spec.GeneveClassINT).
	GPENextProto uint8
	GeneveClass  uint16
	// AllowTruncated accepts IP packets shorter than their length field,
	// as found in telemetry reports; End is then the end of the buffer and
	// Packet.Truncated is set. Never edit such packets in place.
	AllowTruncated bool
	// AllowCutINT, with AllowTruncated, accepts an INT stack that runs
	// past a truncated packet's end (Packet.INTCut): a report's copy.
	AllowCutINT bool
	// TCPBeforeOptions puts INT right after the fixed 20-byte TCP header
	// instead of after the options; the spec lets a domain pick either.
	TCPBeforeOptions bool
	// NoINT finds the tunnel headers but never INT, whatever the
	// markings say: for packets from outside the INT domain.
	NoINT bool
	// PastL4INT has ParseInner find a UDP tunnel's header behind INT over
	// UDP that kept the destination port (DSCP or probe marker): reports
	// carry such frames as the INT domain left them.
	PastL4INT bool
}

// Packet is what Parse learns about a frame: offsets into the frame and a
// few decoded values. Offsets are -1 when the layer is absent.
type Packet struct {
	End         int    // end of the IP datagram (excludes Ethernet padding)
	EtherType   uint16 // EtherType after VLAN tags
	VLANs       uint8  // number of VLAN tags
	VLAN        [2]uint16
	L3          int
	IPVersion   uint8
	IPHeaderLen int
	Proto       uint8 // transport protocol (after IPv6 extension headers)
	L4          int
	L4HeaderLen int
	// Flow is the flow's original 5-tuple: for NPT 1 the destination port
	// comes from the shim, for NPT 2 the protocol and ports from the L4
	// header behind the INT stack.
	Flow    FlowKey
	Encap   spec.Encap
	Tunnel  int             // GRE, VXLAN-GPE or Geneve header
	Shim    int             // INT shim (for Geneve, the option header)
	INT     int             // INT-MD or INT-MX header
	INTType spec.HeaderType // spec.TypeMD or spec.TypeMX
	INTLen  int             // bytes of INT header and stack (shim excluded)
	Next    int             // first byte after the INT stack
	// Truncated is set when the IP length field exceeds the buffer
	// (Parser.AllowTruncated).
	Truncated bool
	// INTCut is set when a truncated packet's INT stack runs past the
	// buffer (Parser.AllowCutINT): INTLen is then the bytes present.
	INTCut bool
	cutOK  bool // Parser.AllowCutINT, for setINT
	// Fragment is set for an IP fragment: IPv4 with More Fragments or an
	// offset, IPv6 with a fragment header with M or an offset (an atomic
	// fragment is not one).
	Fragment bool
}

func (p *Packet) reset() {
	*p = Packet{L3: -1, L4: -1, Tunnel: -1, Shim: -1, INT: -1, Next: -1}
}

// HasINT reports whether Parse found an INT-MD or INT-MX header.
func (p *Packet) HasINT() bool { return p.INT >= 0 }

// Parse walks Ethernet, VLAN, IPv4/IPv6, TCP/UDP/GRE and the tunnel headers
// of frame and fills p. It never allocates. A frame without INT is not an
// error; malformed headers are.
func (c *Parser) Parse(frame []byte, p *Packet) error {
	p.reset()
	p.cutOK = c.AllowCutINT
	if len(frame) < EthernetLen {
		return ErrTruncated
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	for (et == EtherTypeVLAN || et == EtherTypeQinQ) && p.VLANs < 2 {
		if len(frame) < off+6 {
			return ErrTruncated
		}
		p.VLAN[p.VLANs] = binary.BigEndian.Uint16(frame[off+2:]) & 0x0fff
		p.VLANs++
		off += 4
		et = binary.BigEndian.Uint16(frame[off:])
	}
	p.EtherType = et
	return c.parseL3(frame, off+2, p)
}

// ParseIP is Parse for a buffer that starts with an IPv4 or IPv6 header.
func (c *Parser) ParseIP(b []byte, p *Packet) error {
	p.reset()
	p.cutOK = c.AllowCutINT
	if len(b) == 0 {
		return ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		p.EtherType = EtherTypeIPv4
	case 6:
		p.EtherType = EtherTypeIPv6
	default:
		return ErrBadVersion
	}
	return c.parseL3(b, 0, p)
}

func (c *Parser) parseL3(b []byte, off int, p *Packet) error {
	p.End = len(b)
	var dscp uint8
	switch p.EtherType {
	case EtherTypeIPv4:
		if len(b) < off+IPv4MinLen {
			return ErrTruncated
		}
		h := b[off:]
		if h[0]>>4 != 4 {
			return ErrBadVersion
		}
		ihl := int(h[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(h[2:]))
		if ihl < IPv4MinLen || total < ihl || len(h) < ihl {
			return ErrBadLength
		}
		if len(h) < total {
			if !c.AllowTruncated {
				return ErrBadLength
			}
			total, p.Truncated = len(h), true
		}
		p.L3, p.IPVersion, p.IPHeaderLen, p.Proto = off, 4, ihl, h[9]
		p.End = off + total
		dscp = h[1] >> 2
		p.Flow.Src = netip.AddrFrom4([4]byte(h[12:16]))
		p.Flow.Dst = netip.AddrFrom4([4]byte(h[16:20]))
		p.Flow.Proto = p.Proto
		frag := binary.BigEndian.Uint16(h[6:])
		p.Fragment = frag&0x3fff != 0
		if frag&0x1fff != 0 {
			return nil // non-first fragment: no transport header
		}
		off += ihl
	case EtherTypeIPv6:
		if len(b) < off+IPv6Len {
			return ErrTruncated
		}
		h := b[off:]
		if h[0]>>4 != 6 {
			return ErrBadVersion
		}
		plen := int(binary.BigEndian.Uint16(h[4:]))
		if len(h) < IPv6Len+plen {
			if !c.AllowTruncated {
				return ErrBadLength
			}
			plen, p.Truncated = len(h)-IPv6Len, true
		}
		p.L3, p.IPVersion, p.End = off, 6, off+IPv6Len+plen
		dscp = uint8(binary.BigEndian.Uint16(h[0:])>>4) >> 2
		p.Flow.Src = netip.AddrFrom16([16]byte(h[8:24]))
		p.Flow.Dst = netip.AddrFrom16([16]byte(h[24:40]))
		next := h[6]
		off += IPv6Len
		// Skip the extension headers that may precede the transport header.
		for n := 0; n < 8; n++ {
			if next != 0 && next != 43 && next != 60 && next != 44 {
				break
			}
			if p.End < off+8 {
				return ErrTruncated
			}
			if next == 44 {
				p.Fragment = p.Fragment || binary.BigEndian.Uint16(b[off+2:])&0xfff9 != 0
				if binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
					p.Proto, p.Flow.Proto = b[off], b[off]
					p.IPHeaderLen = off - p.L3
					return nil // non-first fragment
				}
				next, off = b[off], off+8
				continue
			}
			next, off = b[off], off+8*(int(b[off+1])+1)
		}
		p.IPHeaderLen = off - p.L3
		p.Proto, p.Flow.Proto = next, next
	default:
		return nil // not IP: nothing more to find
	}
	if off > p.End {
		return ErrTruncated
	}
	return c.parseL4(b[:p.End], off, dscp, p)
}

func (c *Parser) parseL4(b []byte, off int, dscp uint8, p *Packet) error {
	dscpMarked := c.DSCPMask != 0 && dscp&c.DSCPMask == c.DSCP && !c.NoINT
	switch p.Proto {
	case ProtoUDP:
		if len(b) < off+UDPLen {
			return ErrTruncated
		}
		p.L4, p.L4HeaderLen = off, UDPLen
		sport, dport := binary.BigEndian.Uint16(b[off:]), binary.BigEndian.Uint16(b[off+2:])
		p.Flow.SrcPort, p.Flow.DstPort = sport, dport
		next := off + UDPLen
		switch {
		case c.UDPPort != 0 && dport == c.UDPPort && !c.NoINT:
			return c.parseShim(b, next, spec.EncapUDPPort, p)
		case c.VXLANGPEPort != 0 && dport == c.VXLANGPEPort:
			return c.parseGPE(b, next, p)
		case c.GenevePort != 0 && dport == c.GenevePort:
			return c.parseGeneve(b, next, p)
		}
		return c.parseMarked(b, next, dscpMarked, p)
	case ProtoTCP:
		if len(b) < off+TCPMinLen {
			return ErrTruncated
		}
		doff := int(b[off+12]>>4) * 4
		if doff < TCPMinLen || len(b) < off+doff {
			return ErrBadLength
		}
		p.L4, p.L4HeaderLen = off, doff
		p.Flow.SrcPort, p.Flow.DstPort = binary.BigEndian.Uint16(b[off:]), binary.BigEndian.Uint16(b[off+2:])
		if c.TCPBeforeOptions {
			doff = TCPMinLen
		}
		return c.parseMarked(b, off+doff, dscpMarked, p)
	case ProtoGRE:
		return c.parseGRE(b, off, p)
	}
	return nil
}

// parseMarked handles INT right after a TCP/UDP header, announced by DSCP
// or by a probe marker.
func (c *Parser) parseMarked(b []byte, off int, dscpMarked bool, p *Packet) error {
	if dscpMarked {
		return c.parseShim(b, off, spec.EncapDSCP, p)
	}
	if c.ProbeMarker != 0 && !c.NoINT && len(b) >= off+ProbeLen+ShimLen &&
		binary.BigEndian.Uint64(b[off:]) == c.ProbeMarker {
		return c.parseShim(b, off+ProbeLen, spec.EncapProbeMarker, p)
	}
	return nil
}

func (c *Parser) parseShim(b []byte, off int, e spec.Encap, p *Packet) error {
	s, err := DecodeShim(b[min(off, len(b)):])
	if err != nil {
		return err
	}
	if s.NPT > 2 || (s.NPT != 0 && e != spec.EncapUDPPort) {
		return ErrBadValue
	}
	if err := p.setINT(b, e, off, ShimLen, s.Type, int(s.Length)*4); err != nil {
		return err
	}
	switch s.NPT {
	case 1:
		p.Flow.DstPort = s.Value
	case 2:
		p.Flow.Proto = s.OrigProto()
		p.Flow.SrcPort, p.Flow.DstPort = 0, 0
		if (p.Flow.Proto == ProtoTCP || p.Flow.Proto == ProtoUDP) && len(b) >= p.Next+4 {
			p.Flow.SrcPort = binary.BigEndian.Uint16(b[p.Next:])
			p.Flow.DstPort = binary.BigEndian.Uint16(b[p.Next+2:])
		}
	}
	return nil
}

// setINT records the INT header found at shim+shimLen and checks that its
// version matches its type and that it fits in the buffer.
func (p *Packet) setINT(b []byte, e spec.Encap, shim, shimLen int, t spec.HeaderType, intLen int) error {
	if t != spec.TypeMD && t != spec.TypeMX {
		return ErrBadType
	}
	start := shim + shimLen
	cut := false
	if intLen < MDHeaderLen || len(b) < start+intLen {
		if len(b) < start+MDHeaderLen {
			return ErrTruncated
		}
		if intLen < MDHeaderLen || !p.Truncated || !p.cutOK {
			return ErrBadLength
		}
		// The packet was cut (a report's copy): the stack up to the cut.
		cut, intLen = true, len(b)-start
	}
	if b[start]>>4 != 2 {
		return ErrBadVersion
	}
	if t == spec.TypeMD {
		ml := int(b[start+2]&0x1f) * 4
		if (intLen-MDHeaderLen) != 0 && ml == 0 {
			return ErrBadLength
		}
	}
	p.Encap, p.Shim, p.INT, p.INTType, p.INTLen, p.Next = e, shim, start, t, intLen, start+intLen
	p.INTCut = cut
	return nil
}

func (c *Parser) parseGRE(b []byte, off int, p *Packet) error {
	if len(b) < off+4 {
		return ErrTruncated
	}
	flags := binary.BigEndian.Uint16(b[off:])
	n := 4
	if flags&0xc000 != 0 { // checksum or routing present: checksum+offset word
		n += 4
	}
	if flags&0x2000 != 0 { // key
		n += 4
	}
	if flags&0x1000 != 0 { // sequence number
		n += 4
	}
	if flags&0x4000 != 0 || flags&0x7 != 0 {
		return ErrUnsupported // source routing (RFC 1701) or GRE version != 0
	}
	if len(b) < off+n {
		return ErrTruncated
	}
	p.Tunnel = off
	if c.NoINT || c.GREProto == 0 || binary.BigEndian.Uint16(b[off+2:]) != c.GREProto {
		return nil
	}
	s, err := DecodeGREShim(b[off+n:])
	if err != nil {
		return err
	}
	return p.setINT(b, spec.EncapGRE, off+n, ShimLen, s.Type, int(s.Length)*4)
}

func (c *Parser) parseGPE(b []byte, off int, p *Packet) error {
	if len(b) < off+VXLANLen {
		return ErrTruncated
	}
	p.Tunnel = off
	np := c.GPENextProto
	if np == 0 {
		np = spec.VXLANGPENextProtoINT
	}
	if c.NoINT || b[off]&0x04 == 0 || b[off+3] != np {
		return nil // plain VXLAN, or GPE without INT
	}
	// Walk the chain of INT shims; the one INT nodes act on is MD or MX.
	// Destination-type headers come after it and are skipped.
	at := off + VXLANLen
	for i := 0; i < 8; i++ {
		s, err := DecodeGPEShim(b[min(at, len(b)):])
		if err != nil {
			return err
		}
		if s.Type == spec.TypeMD || s.Type == spec.TypeMX {
			return p.setINT(b, spec.EncapVXLANGPE, at, ShimLen, s.Type, int(s.Length)*4)
		}
		if s.NextProto != np {
			return nil
		}
		at += ShimLen + int(s.Length)*4
	}
	return ErrBadLength
}

func (c *Parser) parseGeneve(b []byte, off int, p *Packet) error {
	if len(b) < off+GeneveLen {
		return ErrTruncated
	}
	if b[off]>>6 != 0 {
		return ErrBadVersion
	}
	optEnd := off + GeneveLen + int(b[off]&0x3f)*4
	if len(b) < optEnd {
		return ErrTruncated
	}
	p.Tunnel = off
	if c.NoINT {
		return nil
	}
	class := c.GeneveClass
	if class == 0 {
		class = spec.GeneveClassINT
	}
	for at := off + GeneveLen; at+4 <= optEnd; {
		o, err := DecodeGeneveOption(b[at:optEnd])
		if err != nil {
			return err
		}
		t := spec.HeaderType(o.Type & 0x7f) // the top bit of the type is the critical flag
		if o.Class == class && (t == spec.TypeMD || t == spec.TypeMX) {
			return p.setINT(b[:optEnd], spec.EncapGeneve, at, ShimLen, t, int(o.Length)*4)
		}
		at += 4 + int(o.Length)*4
	}
	return nil
}

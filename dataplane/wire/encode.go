package wire

import "encoding/binary"

// Minimal encoders for the outer headers an INT source or a test builds.

// PutEthernet writes an Ethernet header into b[:14].
func PutEthernet(b []byte, dst, src [6]byte, etherType uint16) error {
	if len(b) < EthernetLen {
		return ErrTruncated
	}
	copy(b, dst[:])
	copy(b[6:], src[:])
	binary.BigEndian.PutUint16(b[12:], etherType)
	return nil
}

// IPv4Header holds the fields of an option-less IPv4 header.
type IPv4Header struct {
	TOS      uint8 // DSCP<<2 | ECN
	TotalLen uint16
	ID       uint16
	Flags    uint8 // 3 bits: 0b010 is DF
	TTL      uint8
	Proto    uint8
	Src, Dst [4]byte
}

// Put writes h into b[:20] with a correct header checksum.
func (h IPv4Header) Put(b []byte) error {
	if len(b) < IPv4MinLen {
		return ErrTruncated
	}
	b[0], b[1] = 0x45, h.TOS
	binary.BigEndian.PutUint16(b[2:], h.TotalLen)
	binary.BigEndian.PutUint16(b[4:], h.ID)
	binary.BigEndian.PutUint16(b[6:], uint16(h.Flags&7)<<13)
	b[8], b[9] = h.TTL, h.Proto
	copy(b[12:], h.Src[:])
	copy(b[16:], h.Dst[:])
	// One sum over the header, its checksum field 0 first.
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint16(b[10:], ^Fold(Sum(0, b[:IPv4MinLen])))
	return nil
}

// IPv6Header holds the fields of an IPv6 fixed header.
type IPv6Header struct {
	TrafficClass uint8  // DSCP<<2 | ECN
	FlowLabel    uint32 // 20 bits
	PayloadLen   uint16
	NextHeader   uint8
	HopLimit     uint8
	Src, Dst     [16]byte
}

// Put writes h into b[:40].
func (h IPv6Header) Put(b []byte) error {
	if len(b) < IPv6Len {
		return ErrTruncated
	}
	if h.FlowLabel > 0xfffff {
		return ErrBadValue
	}
	binary.BigEndian.PutUint32(b, 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel)
	binary.BigEndian.PutUint16(b[4:], h.PayloadLen)
	b[6], b[7] = h.NextHeader, h.HopLimit
	copy(b[8:], h.Src[:])
	copy(b[24:], h.Dst[:])
	return nil
}

// UDPHeader is a UDP header.
type UDPHeader struct {
	SrcPort, DstPort, Length, Checksum uint16
}

// Put writes h into b[:8].
func (h UDPHeader) Put(b []byte) error {
	if len(b) < UDPLen {
		return ErrTruncated
	}
	binary.BigEndian.PutUint16(b, h.SrcPort)
	binary.BigEndian.PutUint16(b[2:], h.DstPort)
	binary.BigEndian.PutUint16(b[4:], h.Length)
	binary.BigEndian.PutUint16(b[6:], h.Checksum)
	return nil
}

// TCPHeader is an option-less TCP header.
type TCPHeader struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8 // CWR ECE URG ACK PSH RST SYN FIN
	Window           uint16
	Checksum         uint16
	Urgent           uint16
}

// Put writes h into b[:20].
func (h TCPHeader) Put(b []byte) error {
	if len(b) < TCPMinLen {
		return ErrTruncated
	}
	binary.BigEndian.PutUint16(b, h.SrcPort)
	binary.BigEndian.PutUint16(b[2:], h.DstPort)
	binary.BigEndian.PutUint32(b[4:], h.Seq)
	binary.BigEndian.PutUint32(b[8:], h.Ack)
	b[12], b[13] = 5<<4, h.Flags
	binary.BigEndian.PutUint16(b[14:], h.Window)
	binary.BigEndian.PutUint16(b[16:], h.Checksum)
	binary.BigEndian.PutUint16(b[18:], h.Urgent)
	return nil
}

// PutGRE writes a 4-byte GRE header without optional fields.
func PutGRE(b []byte, protocol uint16) error {
	if len(b) < 4 {
		return ErrTruncated
	}
	b[0], b[1] = 0, 0
	binary.BigEndian.PutUint16(b[2:], protocol)
	return nil
}

// SetL4Checksum recomputes the TCP or UDP checksum of a parsed packet from
// scratch (for sources and tests; transit nodes use incremental updates).
// A zero UDP checksum is left zero unless force is set.
func SetL4Checksum(pkt []byte, p *Packet, force bool) {
	if p.L4 < 0 {
		return
	}
	var src, dst []byte
	if p.IPVersion == 4 {
		src, dst = pkt[p.L3+12:p.L3+16], pkt[p.L3+16:p.L3+20]
	} else {
		src, dst = pkt[p.L3+8:p.L3+24], pkt[p.L3+24:p.L3+40]
	}
	seg := pkt[p.L4:p.End]
	ps := PseudoHeaderSum(src, dst, p.Proto)
	switch p.Proto {
	case ProtoTCP:
		binary.BigEndian.PutUint16(seg[16:], L4Checksum(ps, seg, 16))
	case ProtoUDP:
		if force || binary.BigEndian.Uint16(seg[6:]) != 0 {
			binary.BigEndian.PutUint16(seg[6:], UDPChecksum(ps, seg))
		}
	}
}

// VerifyL4Checksum reports whether the TCP/UDP checksum of a parsed packet
// is correct (a zero UDP checksum counts as correct).
func VerifyL4Checksum(pkt []byte, p *Packet) bool {
	if p.L4 < 0 {
		return true
	}
	var src, dst []byte
	if p.IPVersion == 4 {
		src, dst = pkt[p.L3+12:p.L3+16], pkt[p.L3+16:p.L3+20]
	} else {
		src, dst = pkt[p.L3+8:p.L3+24], pkt[p.L3+24:p.L3+40]
	}
	seg := pkt[p.L4:p.End]
	if p.Proto == ProtoUDP && binary.BigEndian.Uint16(seg[6:]) == 0 {
		return true
	}
	acc := PseudoHeaderSum(src, dst, p.Proto) + uint32(len(seg))
	return Fold(Sum(acc, seg)) == 0xffff
}

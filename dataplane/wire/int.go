package wire

import (
	"encoding/binary"
	"math/bits"
)

// Instructions is the 16-bit INT instruction bitmap. Bit 0 of the spec is
// the most significant bit, so InstNodeID is 1<<15.
type Instructions uint16

// Instruction bits (INT v2.1 §5.8). Bits 9-14 are reserved.
const (
	InstNodeID             Instructions = 1 << (15 - iota) // bit 0
	InstL1Ports                                            // bit 1: L1 ingress(16)+egress(16) interface
	InstHopLatency                                         // bit 2
	InstQueue                                              // bit 3: queue id(8)+occupancy(24)
	InstIngressTimestamp                                   // bit 4: 8 bytes
	InstEgressTimestamp                                    // bit 5: 8 bytes
	InstL2Ports                                            // bit 6: L2 ingress(32)+egress(32), 8 bytes
	InstTxUtilization                                      // bit 7
	InstBuffer                                             // bit 8: buffer id(8)+occupancy(24)
	InstChecksumComplement Instructions = 1                // bit 15, always last in a hop
)

// Bit reports whether spec bit n (0 = MSB) is set.
func (i Instructions) Bit(n int) bool { return i&(0x8000>>uint(n)) != 0 }

// FieldWords is the size of the metadata for spec bit n in 4-byte words:
// two for bits 4, 5 and 6, one otherwise (reserved bits included).
func FieldWords(n int) int {
	if n >= 4 && n <= 6 {
		return 2
	}
	return 1
}

// Words is the per-hop baseline metadata length in words, counting the
// checksum complement and reserved bits (filled with all ones).
func (i Instructions) Words() int {
	v := uint16(i)
	n := 0
	for v != 0 {
		n++
		v &= v - 1
	}
	return n + int((i>>9)&1+(i>>10)&1+(i>>11)&1) // bits 4-6 are double
}

// MDHeaderLen and MXHeaderLen are the fixed INT header sizes.
const (
	MDHeaderLen = 12
	MXHeaderLen = 12
	Version2    = 2
)

// MDHeader is the INT-MD metadata header.
type MDHeader struct {
	Version          uint8
	Discard          bool  // D
	HopCountExceeded bool  // E
	MTUExceeded      bool  // M
	HopML            uint8 // per-hop metadata length in words (5 bits)
	RemainingHops    uint8
	Instructions     Instructions
	DomainID         uint16
	DSInstructions   uint16
	DSFlags          uint16
}

// DecodeMDHeader reads an INT-MD header; only version 2 is accepted.
func DecodeMDHeader(b []byte) (MDHeader, error) {
	if len(b) < MDHeaderLen {
		return MDHeader{}, ErrTruncated
	}
	h := MDHeader{
		Version:          b[0] >> 4,
		Discard:          b[0]&0x08 != 0,
		HopCountExceeded: b[0]&0x04 != 0,
		MTUExceeded:      b[0]&0x02 != 0,
		HopML:            b[2] & 0x1f,
		RemainingHops:    b[3],
		Instructions:     Instructions(binary.BigEndian.Uint16(b[4:])),
		DomainID:         binary.BigEndian.Uint16(b[6:]),
		DSInstructions:   binary.BigEndian.Uint16(b[8:]),
		DSFlags:          binary.BigEndian.Uint16(b[10:]),
	}
	if h.Version != Version2 {
		return h, ErrBadVersion
	}
	return h, nil
}

// Put writes h into b[:12]. Reserved bits are written as zero.
func (h MDHeader) Put(b []byte) error {
	if len(b) < MDHeaderLen {
		return ErrTruncated
	}
	if h.Version > 15 || h.HopML > 31 {
		return ErrBadValue
	}
	b[0] = h.Version<<4 | b2u8(h.Discard)<<3 | b2u8(h.HopCountExceeded)<<2 | b2u8(h.MTUExceeded)<<1
	b[1] = 0
	b[2] = h.HopML
	b[3] = h.RemainingHops
	binary.BigEndian.PutUint16(b[4:], uint16(h.Instructions))
	binary.BigEndian.PutUint16(b[6:], h.DomainID)
	binary.BigEndian.PutUint16(b[8:], h.DSInstructions)
	binary.BigEndian.PutUint16(b[10:], h.DSFlags)
	return nil
}

// MXHeader is the INT-MX header. Source-inserted domain-specific metadata,
// if any, follows it and is counted in the shim length.
type MXHeader struct {
	Version        uint8
	Discard        bool
	Instructions   Instructions
	DomainID       uint16
	DSInstructions uint16
	DSFlags        uint16
}

// DecodeMXHeader reads an INT-MX header; only version 2 is accepted.
func DecodeMXHeader(b []byte) (MXHeader, error) {
	if len(b) < MXHeaderLen {
		return MXHeader{}, ErrTruncated
	}
	h := MXHeader{
		Version:        b[0] >> 4,
		Discard:        b[0]&0x08 != 0,
		Instructions:   Instructions(binary.BigEndian.Uint16(b[4:])),
		DomainID:       binary.BigEndian.Uint16(b[6:]),
		DSInstructions: binary.BigEndian.Uint16(b[8:]),
		DSFlags:        binary.BigEndian.Uint16(b[10:]),
	}
	if h.Version != Version2 {
		return h, ErrBadVersion
	}
	return h, nil
}

// Put writes h into b[:12].
func (h MXHeader) Put(b []byte) error {
	if len(b) < MXHeaderLen {
		return ErrTruncated
	}
	if h.Version > 15 {
		return ErrBadValue
	}
	b[0] = h.Version<<4 | b2u8(h.Discard)<<3
	b[1], b[2], b[3] = 0, 0, 0
	binary.BigEndian.PutUint16(b[4:], uint16(h.Instructions))
	binary.BigEndian.PutUint16(b[6:], h.DomainID)
	binary.BigEndian.PutUint16(b[8:], h.DSInstructions)
	binary.BigEndian.PutUint16(b[10:], h.DSFlags)
	return nil
}

// Unavailable is the all-ones value written for metadata a node cannot
// provide or for reserved instruction bits.
const (
	Unavailable32 = 0xffffffff
	Unavailable64 = 0xffffffffffffffff
)

// HopMetadata holds one hop's metadata values. On encode, fields whose
// instruction bit is not in Valid are written as all ones; on decode, every
// requested field is filled and Valid has the bits whose value is not all
// ones.
type HopMetadata struct {
	NodeID           uint32
	IngressPort      uint16 // level 1
	EgressPort       uint16 // level 1
	HopLatency       uint32
	QueueID          uint8
	QueueOccupancy   uint32 // 24 bits
	IngressTimestamp uint64
	EgressTimestamp  uint64
	L2IngressPort    uint32
	L2EgressPort     uint32
	TxUtilization    uint32
	BufferID         uint8
	BufferOccupancy  uint32 // 24 bits
	// ChecksumComplement is the raw bit-15 word (encoders compute it).
	ChecksumComplement uint32
	// DomainSpecific is the domain-specific metadata (whole words), placed
	// after the baseline fields and before the checksum complement.
	DomainSpecific []byte
	Valid          Instructions
}

// PutHop writes m for the instruction bitmap inst into b, in bitmap order,
// followed by the domain-specific metadata padded with all ones to dsWords
// words, then the checksum complement word (all ones) if bit 15 is set. It
// returns the number of bytes written.
func PutHop(b []byte, inst Instructions, dsWords int, m *HopMetadata) (int, error) {
	n := (inst.Words() + dsWords) * 4
	if len(b) < n {
		return 0, ErrTruncated
	}
	if len(m.DomainSpecific) > dsWords*4 {
		return 0, ErrBadLength
	}
	off := 0
	valid := m.Valid
	// Walk only the set baseline bits (0-14), most significant first.
	for v := uint16(inst) &^ 1; v != 0; {
		bit := bits.LeadingZeros16(v)
		v &^= 0x8000 >> uint(bit)
		ok := valid&(0x8000>>uint(bit)) != 0
		if FieldWords(bit) == 2 {
			v := uint64(Unavailable64)
			if ok {
				switch bit {
				case 4:
					v = m.IngressTimestamp
				case 5:
					v = m.EgressTimestamp
				case 6:
					v = uint64(m.L2IngressPort)<<32 | uint64(m.L2EgressPort)
				}
			}
			binary.BigEndian.PutUint64(b[off:], v)
			off += 8
			continue
		}
		v := uint32(Unavailable32)
		if ok {
			switch bit {
			case 0:
				v = m.NodeID
			case 1:
				v = uint32(m.IngressPort)<<16 | uint32(m.EgressPort)
			case 2:
				v = m.HopLatency
			case 3:
				v = uint32(m.QueueID)<<24 | m.QueueOccupancy&0xffffff
			case 7:
				v = m.TxUtilization
			case 8:
				v = uint32(m.BufferID)<<24 | m.BufferOccupancy&0xffffff
			}
		}
		binary.BigEndian.PutUint32(b[off:], v)
		off += 4
	}
	off += copy(b[off:], m.DomainSpecific)
	// Pad unknown domain-specific metadata with all ones.
	for pad := b[off : n-4*int(inst&1)]; len(pad) > 0; pad = pad[1:] {
		pad[0] = 0xff
	}
	off = n - 4*int(inst&1)
	if inst&InstChecksumComplement != 0 {
		binary.BigEndian.PutUint32(b[off:], Unavailable32)
		off += 4
	}
	return off, nil
}

// DecodeHop reads one hop's metadata from b (exactly one hop: baseline
// words for inst, then domain-specific words, then the checksum
// complement). DomainSpecific aliases b.
func DecodeHop(b []byte, inst Instructions, m *HopMetadata) error {
	base := inst.Words() * 4
	if len(b) < base || len(b)%4 != 0 {
		return ErrTruncated
	}
	*m = HopMetadata{}
	off := 0
	for v := uint16(inst) &^ 1; v != 0; {
		bit := bits.LeadingZeros16(v)
		mask := Instructions(0x8000 >> uint(bit))
		v &^= uint16(mask)
		if FieldWords(bit) == 2 {
			v := binary.BigEndian.Uint64(b[off:])
			off += 8
			if v != Unavailable64 {
				m.Valid |= mask
			}
			switch bit {
			case 4:
				m.IngressTimestamp = v
			case 5:
				m.EgressTimestamp = v
			case 6:
				m.L2IngressPort, m.L2EgressPort = uint32(v>>32), uint32(v)
			}
			continue
		}
		v := binary.BigEndian.Uint32(b[off:])
		off += 4
		if v != Unavailable32 {
			m.Valid |= mask
		}
		switch bit {
		case 0:
			m.NodeID = v
		case 1:
			m.IngressPort, m.EgressPort = uint16(v>>16), uint16(v)
		case 2:
			m.HopLatency = v
		case 3:
			m.QueueID, m.QueueOccupancy = uint8(v>>24), v&0xffffff
		case 7:
			m.TxUtilization = v
		case 8:
			m.BufferID, m.BufferOccupancy = uint8(v>>24), v&0xffffff
		}
	}
	// The checksum complement sits after the domain-specific metadata.
	end := len(b)
	if inst&InstChecksumComplement != 0 {
		end -= 4
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != Unavailable32 {
			m.Valid |= InstChecksumComplement
		}
	}
	m.DomainSpecific = b[off:end:end]
	return nil
}

// MDStack is a view of an INT-MD metadata stack: the hops pushed by the
// source and transit nodes (top of stack first), then any source-only
// domain-specific metadata.
type MDStack struct {
	Hops       []byte // all per-hop blocks, most recent first
	HopLen     int    // bytes per hop (Hop ML * 4)
	SourceOnly []byte // source-only domain-specific metadata at the bottom
}

// NewMDStack splits stack (the bytes after the INT-MD header) into hops of
// hopML words and sourceOnlyLen bytes of source-only metadata. Only the
// INT domain knows the source-only length; pass -1 to infer it as the
// remainder that is not a whole hop.
func NewMDStack(stack []byte, hopML uint8, sourceOnlyLen int) (MDStack, error) {
	hl := int(hopML) * 4
	if hl == 0 {
		if sourceOnlyLen < 0 {
			sourceOnlyLen = len(stack)
		}
		if sourceOnlyLen != len(stack) {
			return MDStack{}, ErrBadLength
		}
		return MDStack{SourceOnly: stack}, nil
	}
	if sourceOnlyLen < 0 {
		sourceOnlyLen = len(stack) % hl
	}
	n := len(stack) - sourceOnlyLen
	if n < 0 || n%hl != 0 || sourceOnlyLen%4 != 0 {
		return MDStack{}, ErrBadLength
	}
	return MDStack{Hops: stack[:n:n], HopLen: hl, SourceOnly: stack[n:]}, nil
}

// Count returns the number of hops in the stack.
func (s MDStack) Count() int {
	if s.HopLen == 0 {
		return 0
	}
	return len(s.Hops) / s.HopLen
}

// Hop returns hop i's bytes; 0 is the most recent hop.
func (s MDStack) Hop(i int) []byte {
	return s.Hops[i*s.HopLen : (i+1)*s.HopLen : (i+1)*s.HopLen]
}

// DecodeMD reads an INT-MD header and its stack from b, which must hold
// exactly the header and stack (shim Length*4 bytes).
func DecodeMD(b []byte, sourceOnlyLen int) (MDHeader, MDStack, error) {
	h, err := DecodeMDHeader(b)
	if err != nil {
		return h, MDStack{}, err
	}
	if h.Instructions.Words() > int(h.HopML) {
		return h, MDStack{}, ErrBadLength
	}
	s, err := NewMDStack(b[MDHeaderLen:], h.HopML, sourceOnlyLen)
	return h, s, err
}

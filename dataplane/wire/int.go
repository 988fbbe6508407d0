package wire

import (
	"encoding/binary"
	"math/bits"

	"github.com/intd-project/intd/sai/spec"
)

// Instructions is the 16-bit INT instruction bitmap; its bits, their names
// and metadata lengths are spec.Instructions.
type Instructions = spec.Instruction

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
	n, _, err := putHop(b, inst, dsWords, m)
	return n, err
}

// putHop is PutHop that also returns the one's complement sum of the bytes
// written (as a sum of 32-bit big-endian words, unfolded), so that the
// transit step needs no second pass over the hop for the L4 checksum. The
// baseline fields are unrolled in bitmap order: no per-bit loop or switch.
func putHop(b []byte, inst Instructions, dsWords int, m *HopMetadata) (int, uint64, error) {
	return putHopWords(b, inst, inst.Words(), dsWords, m)
}

// putHopWords is putHop with inst.Words() already known.
func putHopWords(b []byte, inst Instructions, words, dsWords int, m *HopMetadata) (int, uint64, error) {
	n := (words + dsWords) * 4
	if len(b) < n {
		return 0, 0, ErrTruncated
	}
	if len(m.DomainSpecific) > dsWords*4 {
		return 0, 0, ErrBadLength
	}
	b = b[:n]
	valid := m.Valid
	var sum uint64
	off := 0
	put32 := func(bit Instructions, v uint32) {
		if valid&bit == 0 {
			v = Unavailable32
		}
		binary.BigEndian.PutUint32(b[off:], v)
		sum += uint64(v)
		off += 4
	}
	put64 := func(bit Instructions, v uint64) {
		if valid&bit == 0 {
			v = Unavailable64
		}
		binary.BigEndian.PutUint64(b[off:], v)
		sum += v>>32 + v&0xffffffff
		off += 8
	}
	if inst&spec.InstNodeID != 0 {
		put32(spec.InstNodeID, m.NodeID)
	}
	if inst&spec.InstL1Interfaces != 0 {
		put32(spec.InstL1Interfaces, uint32(m.IngressPort)<<16|uint32(m.EgressPort))
	}
	if inst&spec.InstHopLatency != 0 {
		put32(spec.InstHopLatency, m.HopLatency)
	}
	if inst&spec.InstQueue != 0 {
		put32(spec.InstQueue, uint32(m.QueueID)<<24|m.QueueOccupancy&0xffffff)
	}
	if inst&spec.InstIngressTimestamp != 0 {
		put64(spec.InstIngressTimestamp, m.IngressTimestamp)
	}
	if inst&spec.InstEgressTimestamp != 0 {
		put64(spec.InstEgressTimestamp, m.EgressTimestamp)
	}
	if inst&spec.InstL2Interfaces != 0 {
		put64(spec.InstL2Interfaces, uint64(m.L2IngressPort)<<32|uint64(m.L2EgressPort))
	}
	if inst&spec.InstEgressTxUtil != 0 {
		put32(spec.InstEgressTxUtil, m.TxUtilization)
	}
	if inst&spec.InstBuffer != 0 {
		put32(spec.InstBuffer, uint32(m.BufferID)<<24|m.BufferOccupancy&0xffffff)
	}
	// Reserved bits 9-14 and unknown domain-specific metadata are all ones.
	end := n - 4*int(inst&1)
	if off < end {
		start := off
		for r := bits.OnesCount16(uint16(inst&spec.InstReserved)) * 4; r > 0; r-- {
			b[off] = 0xff
			off++
		}
		off += copy(b[off:end], m.DomainSpecific)
		for pad := b[off:end]; len(pad) > 0; pad = pad[1:] {
			pad[0] = 0xff
		}
		sum += uint64(Sum(0, b[start:end]))
		off = end
	}
	if inst&spec.InstChecksumComplement != 0 {
		binary.BigEndian.PutUint32(b[off:], Unavailable32)
		sum += Unavailable32
		off += 4
	}
	return off, sum, nil
}

// DecodeFields decodes the fields of bits 0-14 of inst (in bitmap order,
// each set bit taking spec.FieldWords words) from b into m, sets m.Valid to
// the fields decoded and returns the offset after them. With unavail,
// all-ones values are left out of m.Valid (hop metadata); otherwise every
// field selected is valid (report metadata). Fields inst leaves out keep
// their values. The caller checks that b holds inst's words.
func DecodeFields(b []byte, inst Instructions, m *HopMetadata, unavail bool) int {
	off := 0
	var valid Instructions
	// Unrolled in bitmap order; the helpers are inlined.
	get32 := func(bit Instructions) uint32 {
		v := binary.BigEndian.Uint32(b[off:])
		off += 4
		if !unavail || v != Unavailable32 {
			valid |= bit
		}
		return v
	}
	get64 := func(bit Instructions) uint64 {
		v := binary.BigEndian.Uint64(b[off:])
		off += 8
		if !unavail || v != Unavailable64 {
			valid |= bit
		}
		return v
	}
	if inst&spec.InstNodeID != 0 {
		m.NodeID = get32(spec.InstNodeID)
	}
	if inst&spec.InstL1Interfaces != 0 {
		v := get32(spec.InstL1Interfaces)
		m.IngressPort, m.EgressPort = uint16(v>>16), uint16(v)
	}
	if inst&spec.InstHopLatency != 0 {
		m.HopLatency = get32(spec.InstHopLatency)
	}
	if inst&spec.InstQueue != 0 {
		v := get32(spec.InstQueue)
		m.QueueID, m.QueueOccupancy = uint8(v>>24), v&0xffffff
	}
	if inst&spec.InstIngressTimestamp != 0 {
		m.IngressTimestamp = get64(spec.InstIngressTimestamp)
	}
	if inst&spec.InstEgressTimestamp != 0 {
		m.EgressTimestamp = get64(spec.InstEgressTimestamp)
	}
	if inst&spec.InstL2Interfaces != 0 {
		v := get64(spec.InstL2Interfaces)
		m.L2IngressPort, m.L2EgressPort = uint32(v>>32), uint32(v)
	}
	if inst&spec.InstEgressTxUtil != 0 {
		m.TxUtilization = get32(spec.InstEgressTxUtil)
	}
	if inst&spec.InstBuffer != 0 {
		v := get32(spec.InstBuffer)
		m.BufferID, m.BufferOccupancy = uint8(v>>24), v&0xffffff
	}
	// Reserved bits 9-14: one word each, valid when not all ones.
	for r := uint16(inst & spec.InstReserved); r != 0; {
		bit := spec.InstructionBit(bits.LeadingZeros16(r))
		r &^= uint16(bit)
		get32(bit)
	}
	m.Valid = valid
	return off
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
	off := DecodeFields(b, inst, m, true)
	valid := m.Valid
	// The checksum complement sits after the domain-specific metadata.
	end := len(b)
	if inst&spec.InstChecksumComplement != 0 {
		end -= 4
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != Unavailable32 {
			valid |= spec.InstChecksumComplement
		}
	}
	m.Valid = valid
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

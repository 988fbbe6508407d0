package wire

import (
	"encoding/binary"

	"github.com/intd-project/intd/sai/spec"
)

// The INT header types (spec.HeaderType) and Next Protocol Types
// (spec.NPT) are sai/spec's.

const maxShimWord = 255

// Shim is the 4-byte INT shim for TCP/UDP:
//
//	Type(4) NPT(2) R(2) | Length(8) | UDP port, IP proto or DSCP (16)
//
// Length counts the INT header and stack in 4-byte words, not the shim.
type Shim struct {
	Type   spec.HeaderType
	NPT    spec.NPT
	Length uint8
	Value  uint16
}

// DSCP returns the original DSCP kept in an NPT 0 shim (upper 6 bits of the
// last byte).
func (s Shim) DSCP() uint8 { return uint8(s.Value) >> 2 }

// OrigProto returns the original IP protocol kept in an NPT 2 shim.
func (s Shim) OrigProto() uint8 { return uint8(s.Value) }

// ShimDSCP builds the Value of an NPT 0 shim carrying dscp.
func ShimDSCP(dscp uint8) uint16 { return uint16(dscp&0x3f) << 2 }

// DecodeShim reads a TCP/UDP shim.
func DecodeShim(b []byte) (Shim, error) {
	if len(b) < ShimLen {
		return Shim{}, ErrTruncated
	}
	return Shim{
		Type:   spec.HeaderType(b[0] >> 4),
		NPT:    spec.NPT(b[0]>>2) & 3,
		Length: b[1],
		Value:  binary.BigEndian.Uint16(b[2:]),
	}, nil
}

// Put writes s into b[:4].
func (s Shim) Put(b []byte) error {
	if len(b) < ShimLen {
		return ErrTruncated
	}
	if s.Type > 15 || s.NPT > 3 {
		return ErrBadValue
	}
	b[0] = uint8(s.Type)<<4 | uint8(s.NPT)<<2
	b[1] = s.Length
	binary.BigEndian.PutUint16(b[2:], s.Value)
	return nil
}

// GREShim is the INT shim after a GRE header:
//
//	Type(4) G(1) Rsvd(3) | Length(8) | Next Protocol EtherType (16)
//
// G set means the INT source added the GRE encapsulation itself.
type GREShim struct {
	Type      spec.HeaderType
	G         bool
	Length    uint8
	NextProto uint16
}

// DecodeGREShim reads a GRE INT shim.
func DecodeGREShim(b []byte) (GREShim, error) {
	if len(b) < ShimLen {
		return GREShim{}, ErrTruncated
	}
	return GREShim{
		Type:      spec.HeaderType(b[0] >> 4),
		G:         b[0]&0x08 != 0,
		Length:    b[1],
		NextProto: binary.BigEndian.Uint16(b[2:]),
	}, nil
}

// Put writes s into b[:4].
func (s GREShim) Put(b []byte) error {
	if len(b) < ShimLen {
		return ErrTruncated
	}
	if s.Type > 15 {
		return ErrBadValue
	}
	b[0] = uint8(s.Type)<<4 | b2u8(s.G)<<3
	b[1] = s.Length
	binary.BigEndian.PutUint16(b[2:], s.NextProto)
	return nil
}

// GPEShim is the INT shim after a VXLAN-GPE header:
//
//	Type(4) Rsvd(4) | Length(8) | G(1) Reserved(7) | Next Protocol(8)
//
// G set means the original packet used plain VXLAN. NextProto is
// spec.VXLANGPENextProtoINT when another INT shim follows.
type GPEShim struct {
	Type      spec.HeaderType
	Length    uint8
	G         bool
	NextProto uint8
}

// DecodeGPEShim reads a VXLAN-GPE INT shim.
func DecodeGPEShim(b []byte) (GPEShim, error) {
	if len(b) < ShimLen {
		return GPEShim{}, ErrTruncated
	}
	return GPEShim{Type: spec.HeaderType(b[0] >> 4), Length: b[1], G: b[2]&0x80 != 0, NextProto: b[3]}, nil
}

// Put writes s into b[:4].
func (s GPEShim) Put(b []byte) error {
	if len(b) < ShimLen {
		return ErrTruncated
	}
	if s.Type > 15 {
		return ErrBadValue
	}
	b[0] = uint8(s.Type) << 4
	b[1] = s.Length
	b[2] = b2u8(s.G) << 7
	b[3] = s.NextProto
	return nil
}

// GeneveOption is a Geneve option header:
//
//	Option Class(16) | Type(8) | R(3) Length(5)
//
// For INT the class is spec.GeneveClassINT and the type is the INT header type.
// Length counts the option data in 4-byte words, at most 31 (124 bytes).
type GeneveOption struct {
	Class  uint16
	Type   uint8
	Length uint8
}

// MaxGeneveOptionWords is the largest Length a Geneve option can express.
const MaxGeneveOptionWords = 31

// maxGeneveOptionsWords is the largest Opt Len of a Geneve header.
const maxGeneveOptionsWords = 63

// GeneveHopLimit is the most hops of hopML words an INT-MD Geneve option
// holds next to otherWords words of other options: the option's data (the
// INT-MD header and the stack) is at most 31 words, all options together
// at most 63. A source caps Remaining Hop Count at it, so that the hop
// that finds no room sets E and M keeps meaning "MTU exceeded". It is at
// least 1 (the source's own hop; if even that does not fit, inserting INT
// fails).
func GeneveHopLimit(hopML, otherWords int) int {
	if hopML <= 0 {
		return 255
	}
	room := min(MaxGeneveOptionWords, maxGeneveOptionsWords-otherWords-1) - MDHeaderLen/4
	return min(255, max(1, room/hopML))
}

// DecodeGeneveOption reads an option header and checks that its data fits.
func DecodeGeneveOption(b []byte) (GeneveOption, error) {
	if len(b) < 4 {
		return GeneveOption{}, ErrTruncated
	}
	o := GeneveOption{Class: binary.BigEndian.Uint16(b), Type: b[2], Length: b[3] & 0x1f}
	if len(b) < 4+int(o.Length)*4 {
		return o, ErrTruncated
	}
	return o, nil
}

// Put writes o into b[:4].
func (o GeneveOption) Put(b []byte) error {
	if len(b) < 4 {
		return ErrTruncated
	}
	if o.Length > MaxGeneveOptionWords {
		return ErrGeneveTooLong
	}
	binary.BigEndian.PutUint16(b, o.Class)
	b[2] = o.Type
	b[3] = o.Length
	return nil
}

// VXLANGPE is the VXLAN-GPE header (flags R R Ver I P B O, next protocol, VNI).
type VXLANGPE struct {
	Flags     uint8 // I=0x08 P=0x04 B=0x02 O=0x01; version in bits 0x30
	NextProto uint8
	VNI       uint32
}

// GPE flag bits.
const (
	GPEFlagI = 0x08
	GPEFlagP = 0x04
)

// Put writes h into b[:8].
func (h VXLANGPE) Put(b []byte) error {
	if len(b) < VXLANLen {
		return ErrTruncated
	}
	if h.VNI > 0xffffff {
		return ErrBadValue
	}
	b[0], b[1], b[2], b[3] = h.Flags, 0, 0, h.NextProto
	binary.BigEndian.PutUint32(b[4:], h.VNI<<8)
	return nil
}

// Geneve is the fixed Geneve header.
type Geneve struct {
	OptLen   uint8 // options length in 4-byte words (6 bits)
	OAM      bool
	Critical bool
	Protocol uint16
	VNI      uint32
	Version  uint8
}

// Put writes h into b[:8].
func (h Geneve) Put(b []byte) error {
	if len(b) < GeneveLen {
		return ErrTruncated
	}
	if h.OptLen > 63 || h.VNI > 0xffffff || h.Version > 3 {
		return ErrBadValue
	}
	b[0] = h.Version<<6 | h.OptLen
	b[1] = b2u8(h.OAM)<<7 | b2u8(h.Critical)<<6
	binary.BigEndian.PutUint16(b[2:], h.Protocol)
	binary.BigEndian.PutUint32(b[4:], h.VNI<<8)
	return nil
}

func b2u8(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

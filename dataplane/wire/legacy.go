package wire

import (
	"encoding/binary"

	"github.com/intd-project/intd/sai/spec"
)

// Legacy formats, decoded for interoperability with older INT hosts.
//
// INT 2016 (int-spec-2016.txt §5.3): an 8-byte hop-by-hop header
//
//	Ver(2) Rep(2) C E R(5) InsCnt(5) | MaxHopCnt(8) | TotalHopCnt(8)
//	Instruction Bitmap(16) | Reserved(16)
//
// with every metadata value 4 bytes and the most significant bit of each
// value used as bottom-of-stack marker. Over VXLAN-GPE the shim is
// Type(8) Reserved(8) Length(8, includes the shim) NextProto(8) and the GPE
// next protocol for INT is 0x05; over Geneve it is an option whose type is
// the INT header type.
//
// INT 0.5 (Dec 2017) is not in the specs folder; its layout is derived from
// the 2016 header and from the peer captures. The metadata header keeps the
// 2016 field positions except that Ver grows to 4 bits (Ver(4) Rep(2) C E
// R(3) InsCnt(5)): the captures carry 0x00 0x04 0x02 0x01, i.e. version 0,
// 4 instructions, max 2 hops, 1 hop so far, and 4 instruction bits set in
// 0xCC00, which only fits InsCnt in the low 5 bits of the second byte. The
// TCP/UDP shim is Type(8) Reserved(8) Length(8) Reserved/DSCP(8), and Length
// counts the shim itself (captured: Length 9 = 36 bytes = shim + 8-byte
// header + 16-byte hop + 8 trailing bytes, exactly the UDP payload in
// front of "hello-int-N"). All metadata values are 4 bytes (timestamps are
// 32-bit). INT over TCP/UDP ends with a 4-byte tail header
// Proto(8) DstPort(16) DSCP(8) carrying what the sink restores; in the
// UDP-extension variant (new UDP header, INT port 33122) its Proto is the
// original IP protocol (0x11 in the capture) and the original L4 header
// follows the tail. Host-INT's type 3 adds a 4-byte flow sequence number
// between the stack and the tail, both counted in Length; its reports carry
// the stack as updated by the sink with the tail removed (Length 12 = shim
// + header + 2 hops + sequence number).

// Legacy version/type code points.
const (
	GPENextProtoINT2016 = 0x05
	INT05TypeHopByHop   = 1
	INT05TypeDest       = 2
	INT05TypeHostSeq    = 3 // Host-INT: hop-by-hop plus flow sequence number
	INT05HeaderLen      = 8
	INT05TailLen        = 4
	HostINTDefaultPort  = 33122 // Host-INT UDP-extension destination port
)

// LegacyHeader is the 8-byte hop-by-hop header of INT 2016 and INT 0.5.
type LegacyHeader struct {
	Version      uint8
	Rep          uint8
	Copy         bool
	HopsExceeded bool
	InstCount    uint8
	MaxHops      uint8
	TotalHops    uint8
	Instructions Instructions
}

// Decode2016Header reads a 2016 header (2-bit version field).
func Decode2016Header(b []byte) (LegacyHeader, error) {
	if len(b) < INT05HeaderLen {
		return LegacyHeader{}, ErrTruncated
	}
	h := LegacyHeader{
		Version:      b[0] >> 6,
		Rep:          (b[0] >> 4) & 3,
		Copy:         b[0]&0x08 != 0,
		HopsExceeded: b[0]&0x04 != 0,
	}
	h.fill(b)
	if h.Version != 0 {
		return h, ErrBadVersion
	}
	return h, h.check()
}

// DecodeINT05Header reads an INT 0.5 header (4-bit version field).
func DecodeINT05Header(b []byte) (LegacyHeader, error) {
	if len(b) < INT05HeaderLen {
		return LegacyHeader{}, ErrTruncated
	}
	h := LegacyHeader{
		Version:      b[0] >> 4,
		Rep:          (b[0] >> 2) & 3,
		Copy:         b[0]&0x02 != 0,
		HopsExceeded: b[0]&0x01 != 0,
	}
	h.fill(b)
	if h.Version != 0 {
		return h, ErrBadVersion
	}
	return h, h.check()
}

func (h *LegacyHeader) fill(b []byte) {
	h.InstCount = b[1] & 0x1f
	h.MaxHops, h.TotalHops = b[2], b[3]
	h.Instructions = Instructions(binary.BigEndian.Uint16(b[4:]))
}

func (h *LegacyHeader) check() error {
	if h.TotalHops > h.MaxHops && h.MaxHops != 0 {
		return ErrBadValue
	}
	return nil
}

// Put writes h in the INT 0.5 layout when int05 is set, else the 2016 one.
func (h LegacyHeader) Put(b []byte, int05 bool) error {
	if len(b) < INT05HeaderLen {
		return ErrTruncated
	}
	if int05 {
		b[0] = h.Version<<4 | (h.Rep&3)<<2 | b2u8(h.Copy)<<1 | b2u8(h.HopsExceeded)
	} else {
		b[0] = (h.Version&3)<<6 | (h.Rep&3)<<4 | b2u8(h.Copy)<<3 | b2u8(h.HopsExceeded)<<2
	}
	b[1], b[2], b[3] = h.InstCount&0x1f, h.MaxHops, h.TotalHops
	binary.BigEndian.PutUint16(b[4:], uint16(h.Instructions))
	b[6], b[7] = 0, 0
	return nil
}

// StackLen is the metadata stack length the header announces.
func (h LegacyHeader) StackLen() int { return int(h.InstCount) * 4 * int(h.TotalHops) }

// LegacyHop is one hop of a legacy stack; every value is 4 bytes.
type LegacyHop struct {
	Values []byte // InstCount*4 bytes, aliases the packet
}

// Value returns the i-th value of the hop (in instruction order), with the
// bottom-of-stack bit (2016 format) removed when clearBOS is set. It is 0
// when the hop has fewer values.
func (h LegacyHop) Value(i int, clearBOS bool) uint32 {
	if i < 0 || 4*i+4 > len(h.Values) {
		return 0
	}
	v := binary.BigEndian.Uint32(h.Values[4*i:])
	if clearBOS {
		v &^= 0x8000_0000
	}
	return v
}

// BOS reports whether the hop's last value carries the 2016 bottom-of-stack bit.
func (h LegacyHop) BOS() bool {
	return len(h.Values) >= 4 && h.Values[len(h.Values)-4]&0x80 != 0
}

// LegacyStack is a decoded legacy INT header and stack.
type LegacyStack struct {
	Header LegacyHeader
	Stack  []byte // TotalHops hops of InstCount words, most recent first
}

// Hop returns hop i (0 = most recent).
func (s LegacyStack) Hop(i int) LegacyHop {
	n := int(s.Header.InstCount) * 4
	return LegacyHop{Values: s.Stack[i*n : (i+1)*n : (i+1)*n]}
}

// Hops returns the number of hops.
func (s LegacyStack) Hops() int { return int(s.Header.TotalHops) }

func decodeLegacyStack(b []byte, int05 bool) (LegacyStack, error) {
	var h LegacyHeader
	var err error
	if int05 {
		h, err = DecodeINT05Header(b)
	} else {
		h, err = Decode2016Header(b)
	}
	if err != nil {
		return LegacyStack{}, err
	}
	n := h.StackLen()
	if len(b) < INT05HeaderLen+n {
		return LegacyStack{}, ErrBadLength
	}
	return LegacyStack{Header: h, Stack: b[INT05HeaderLen : INT05HeaderLen+n : INT05HeaderLen+n]}, nil
}

// Legacy2016GPE is one INT 2016 shim plus header found after VXLAN-GPE.
type Legacy2016GPE struct {
	Type      uint8 // 1 hop-by-hop, 2 destination
	Length    uint8 // words, shim included
	NextProto uint8
	LegacyStack
}

// Decode2016GPE decodes the INT shim chain that follows a VXLAN-GPE header
// whose next protocol is GPENextProtoINT2016. It calls fn for each INT
// header in the chain and returns the offset of the encapsulated payload.
func Decode2016GPE(b []byte, fn func(*Legacy2016GPE)) (int, error) {
	off := 0
	for i := 0; i < 8; i++ {
		if len(b) < off+4 {
			return 0, ErrTruncated
		}
		g := Legacy2016GPE{Type: b[off], Length: b[off+2], NextProto: b[off+3]}
		end := off + int(g.Length)*4
		if g.Length < 3 || end > len(b) {
			return 0, ErrBadLength
		}
		s, err := decodeLegacyStack(b[off+4:end], false)
		if err != nil {
			return 0, err
		}
		g.LegacyStack = s
		if fn != nil {
			fn(&g)
		}
		off = end
		if g.NextProto != GPENextProtoINT2016 {
			return off, nil
		}
	}
	return 0, ErrBadLength
}

// Decode2016Geneve decodes an INT 2016 Geneve option body (the bytes after
// the option header, Length*4 of them).
func Decode2016Geneve(b []byte) (LegacyStack, error) { return decodeLegacyStack(b, false) }

// INT05Shim is the INT 0.5 shim for TCP/UDP.
type INT05Shim struct {
	Type   uint8
	Length uint8 // 4-byte words including the shim
	DSCP   uint8 // last byte (reserved, or original DSCP)
}

// INT05Tail is the INT 0.5 tail header for TCP/UDP.
type INT05Tail struct {
	Proto   uint8
	DstPort uint16
	DSCP    uint8
}

// INT05 is a decoded INT 0.5 over TCP/UDP block.
type INT05 struct {
	Shim INT05Shim
	LegacyStack
	HasSeq  bool
	Seq     uint32 // Host-INT flow sequence number (type 3)
	HasTail bool
	Tail    INT05Tail
	Len     int // bytes of INT (shim Length*4)
}

// INT05Options say which optional trailers the INT 0.5 block has.
type INT05Options struct {
	// NoTail is set for INT blocks taken from reports, where the sink has
	// removed the tail header.
	NoTail bool
}

// DecodeINT05 decodes INT 0.5 over TCP/UDP starting at the shim (the first
// byte after the TCP/UDP header, or after the new UDP header of the
// UDP-extension variant). b may extend past the INT block.
func DecodeINT05(b []byte, opt INT05Options) (INT05, error) {
	var r INT05
	if len(b) < 4 {
		return r, ErrTruncated
	}
	r.Shim = INT05Shim{Type: b[0], Length: b[2], DSCP: b[3]}
	r.Len = int(r.Shim.Length) * 4
	if r.Shim.Type < INT05TypeHopByHop || r.Shim.Type > INT05TypeHostSeq {
		return r, ErrBadType
	}
	if r.Len < 4+INT05HeaderLen || r.Len > len(b) {
		return r, ErrBadLength
	}
	s, err := decodeLegacyStack(b[4:r.Len], true)
	if err != nil {
		return r, err
	}
	r.LegacyStack = s
	at := 4 + INT05HeaderLen + s.Header.StackLen()
	if r.Shim.Type == INT05TypeHostSeq {
		if at+4 > r.Len {
			return r, ErrBadLength
		}
		r.HasSeq, r.Seq = true, binary.BigEndian.Uint32(b[at:])
		at += 4
	}
	if !opt.NoTail {
		if at+INT05TailLen != r.Len {
			return r, ErrBadLength
		}
		r.HasTail = true
		r.Tail = INT05Tail{Proto: b[at], DstPort: binary.BigEndian.Uint16(b[at+1:]), DSCP: b[at+3]}
	} else if at != r.Len {
		return r, ErrBadLength
	}
	return r, nil
}

// INT05 instruction bits that differ from INT v2 (all values 4 bytes).
const (
	INT05InstSwitchID        = spec.InstNodeID
	INT05InstPorts           = spec.InstL1Interfaces
	INT05InstHopLatency      = spec.InstHopLatency
	INT05InstQueue           = spec.InstQueue
	INT05InstIngressTS       = spec.InstIngressTimestamp
	INT05InstEgressTS        = spec.InstEgressTimestamp
	INT05InstQueueCongestion = spec.InstL2Interfaces
	INT05InstTxUtilization   = spec.InstEgressTxUtil
)

// INT05HopMetadata is one INT 0.5 hop decoded by instruction bit.
type INT05HopMetadata struct {
	SwitchID                uint32
	IngressPort, EgressPort uint16
	HopLatency              uint32
	QueueID                 uint8
	QueueOccupancy          uint32
	IngressTimestamp        uint32
	EgressTimestamp         uint32
	QueueCongestion         uint32
	TxUtilization           uint32
}

// DecodeINT05Hop decodes hop i of an INT 0.5 stack.
func (s LegacyStack) DecodeINT05Hop(i int, m *INT05HopMetadata) { s.decodeHop(i, false, m) }

// Decode2016Hop decodes hop i of a 2016 stack, whose values carry the
// bottom-of-stack bit; the field layout is INT 0.5's.
func (s LegacyStack) Decode2016Hop(i int, m *INT05HopMetadata) { s.decodeHop(i, true, m) }

func (s LegacyStack) decodeHop(i int, clearBOS bool, m *INT05HopMetadata) {
	h := s.Hop(i)
	k := 0
	for bit := 0; bit < 16; bit++ {
		if !s.Header.Instructions.Bit(bit) {
			continue
		}
		if 4*k+4 > len(h.Values) {
			return
		}
		v := h.Value(k, clearBOS)
		k++
		switch bit {
		case 0:
			m.SwitchID = v
		case 1:
			m.IngressPort, m.EgressPort = uint16(v>>16), uint16(v)
		case 2:
			m.HopLatency = v
		case 3:
			m.QueueID, m.QueueOccupancy = uint8(v>>24), v&0xffffff
		case 4:
			m.IngressTimestamp = v
		case 5:
			m.EgressTimestamp = v
		case 6:
			m.QueueCongestion = v
		case 7:
			m.TxUtilization = v
		}
	}
}

// Telemetry Report 0.5: a 12-byte fixed header
//
//	Ver(4) NProto(4) | D Q F Reserved(15) hw_id(6) | Sequence(32) | Ingress timestamp(32)
//
// followed by what NProto says. 0 is the inner Ethernet frame; 1 and 2 are
// the drop and switch-local headers seen from switch-style reporters
// (common part: switch id(32) ingress port(16) egress port(16) queue
// id(8), then queue occupancy(24) + egress timestamp(32) for local, or drop
// reason(8) + pad(16) for drop), each followed by the Ethernet frame.
// Host-INT uses 4 for "inner IPv4" and, in the build captured, puts the
// sink's node ID in a word before the IPv4 header. The NProto values are
// spec.TR05Proto.
const (
	TR05HeaderLen    = 12
	TR05LocalLen     = 16
	TR05DropLen      = 12
	tr05CommonHeader = 9
)

// TR05Header is the Telemetry Report 0.5 fixed header.
type TR05Header struct {
	Version          uint8
	NextProto        spec.TR05Proto
	Dropped          bool
	Congested        bool
	TrackedFlow      bool
	HWID             uint8
	Seq              uint32
	IngressTimestamp uint32
}

// TR05Switch is the switch-local or drop header that may follow.
type TR05Switch struct {
	SwitchID        uint32
	IngressPort     uint16
	EgressPort      uint16
	QueueID         uint8
	QueueOccupancy  uint32 // local only
	EgressTimestamp uint32 // local only
	DropReason      uint8  // drop only
}

// TR05 is a decoded Telemetry Report 0.5 packet.
type TR05 struct {
	Header TR05Header
	// Switch is set for NextProto spec.TR05Local and spec.TR05Drop.
	Switch TR05Switch
	// ReporterID is Host-INT's sink node ID word, when present.
	ReporterID    uint32
	HasReporterID bool
	Inner         []byte // Ethernet frame, or IPv4 packet for spec.TR05IPv4
}

// DecodeTR05 decodes a Telemetry Report 0.5 UDP payload.
func DecodeTR05(b []byte) (TR05, error) {
	var r TR05
	if len(b) < TR05HeaderLen {
		return r, ErrTruncated
	}
	h := &r.Header
	h.Version, h.NextProto = b[0]>>4, spec.TR05Proto(b[0]&0x0f)
	h.Dropped, h.Congested, h.TrackedFlow = b[1]&0x80 != 0, b[1]&0x40 != 0, b[1]&0x20 != 0
	h.HWID = b[3] & 0x3f
	h.Seq = binary.BigEndian.Uint32(b[4:])
	h.IngressTimestamp = binary.BigEndian.Uint32(b[8:])
	if h.Version != 0 {
		return r, ErrBadVersion
	}
	rest := b[TR05HeaderLen:]
	switch h.NextProto {
	case spec.TR05Ethernet:
	case spec.TR05Local, spec.TR05Drop:
		n := TR05LocalLen
		if h.NextProto == spec.TR05Drop {
			n = TR05DropLen
		}
		if len(rest) < n {
			return r, ErrTruncated
		}
		s := &r.Switch
		s.SwitchID = binary.BigEndian.Uint32(rest)
		s.IngressPort = binary.BigEndian.Uint16(rest[4:])
		s.EgressPort = binary.BigEndian.Uint16(rest[6:])
		s.QueueID = rest[8]
		if h.NextProto == spec.TR05Local {
			s.QueueOccupancy = binary.BigEndian.Uint32(rest[8:]) & 0xffffff
			s.EgressTimestamp = binary.BigEndian.Uint32(rest[12:])
		} else {
			s.DropReason = rest[9]
		}
		rest = rest[n:]
	case spec.TR05IPv4:
		// An IPv4 header starts with version 4; anything else is the
		// reporter's node ID word.
		if len(rest) >= 4 && rest[0]>>4 != 4 {
			r.ReporterID, r.HasReporterID = binary.BigEndian.Uint32(rest), true
			rest = rest[4:]
		}
		if len(rest) < IPv4MinLen || rest[0]>>4 != 4 {
			return r, ErrBadVersion
		}
	case spec.TR05HostDrop:
	default:
		return r, ErrBadType
	}
	r.Inner = rest
	return r, nil
}

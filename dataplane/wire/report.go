package wire

import (
	"encoding/binary"
	mbits "math/bits"

	"github.com/intd-project/intd/sai/spec"
)

// Telemetry Report v2.0 (UDP payload): a group header followed by one or
// more individual reports.

// GroupHeaderLen is the size of the Telemetry Report Group Header.
const (
	GroupHeaderLen      = 8
	ReportHeaderLen     = 4
	INTReportFixedLen   = 8   // RepMdBits..DSMdstatus
	ReportLengthToEnd   = 255 // Report Length value meaning "up to the end of the payload"
	MaxReportSeq        = 1<<22 - 1
	TLVHeaderLen        = 4
	maxReportLengthWord = 254
)

// GroupHeader is the Telemetry Report Group Header.
type GroupHeader struct {
	Version uint8  // 2
	HWID    uint8  // 6 bits
	Seq     uint32 // 22 bits
	NodeID  uint32
}

// DecodeGroupHeader reads a group header (version 2 only).
func DecodeGroupHeader(b []byte) (GroupHeader, error) {
	if len(b) < GroupHeaderLen {
		return GroupHeader{}, ErrTruncated
	}
	w := binary.BigEndian.Uint32(b)
	g := GroupHeader{
		Version: uint8(w >> 28),
		HWID:    uint8(w>>22) & 0x3f,
		Seq:     w & MaxReportSeq,
		NodeID:  binary.BigEndian.Uint32(b[4:]),
	}
	if g.Version != Version2 {
		return g, ErrBadVersion
	}
	return g, nil
}

// AppendGroupHeader appends g to dst.
func AppendGroupHeader(dst []byte, g GroupHeader) ([]byte, error) {
	if g.Version > 15 || g.HWID > 0x3f || g.Seq > MaxReportSeq {
		return dst, ErrBadValue
	}
	w := uint32(g.Version)<<28 | uint32(g.HWID)<<22 | g.Seq
	dst = binary.BigEndian.AppendUint32(dst, w)
	return binary.BigEndian.AppendUint32(dst, g.NodeID), nil
}

// The report and inner types (spec.RepType, spec.InType) are sai/spec's.

// Report metadata bits (RepMdBits). Bit 0 is reserved because the node ID
// is in the group header; bit 15 is queue id + drop reason.
const (
	RepL1Ports          = uint16(spec.InstL1Interfaces)
	RepHopLatency       = uint16(spec.InstHopLatency)
	RepQueue            = uint16(spec.InstQueue)
	RepIngressTimestamp = uint16(spec.InstIngressTimestamp)
	RepEgressTimestamp  = uint16(spec.InstEgressTimestamp)
	RepL2Ports          = uint16(spec.InstL2Interfaces)
	RepTxUtilization    = uint16(spec.InstEgressTxUtil)
	RepBuffer           = uint16(spec.InstBuffer)
	RepDrop             = uint16(0x8000) >> spec.RepMdDropReason // queue id(8) + drop reason(8) + pad(16)
)

// ReportHeader carries the fields of an individual report other than the
// metadata values and the inner contents.
type ReportHeader struct {
	Type         spec.RepType
	InType       spec.InType
	Dropped      bool // D
	Congested    bool // Q
	TrackedFlow  bool // F
	Intermediate bool // I
	// INT main contents (RepType 1 only).
	RepMdBits  uint16
	DomainID   uint16
	DSMdBits   uint16
	DSMdStatus uint16
}

// ReportMetadata holds the baseline metadata of an INT report. Which
// fields are present is given by RepMdBits.
type ReportMetadata struct {
	IngressPort, EgressPort     uint16
	HopLatency                  uint32
	QueueID                     uint8
	QueueOccupancy              uint32
	IngressTimestamp            uint64
	EgressTimestamp             uint64
	L2IngressPort, L2EgressPort uint32
	TxUtilization               uint32
	BufferID                    uint8
	BufferOccupancy             uint32
	DropQueueID, DropReason     uint8
}

// RepMdWords is the baseline metadata length in words for RepMdBits bits.
func RepMdWords(bits uint16) int { return Instructions(bits).Words() }

// putReportMetadata writes md in RepMdBits order into b (len >= words*4).
func putReportMetadata(b []byte, bits uint16, md *ReportMetadata) int {
	off := 0
	for v := bits; v != 0; {
		bit := mbits.LeadingZeros16(v)
		v &^= uint16(spec.InstructionBit(bit))
		switch bit {
		case 1:
			binary.BigEndian.PutUint32(b[off:], uint32(md.IngressPort)<<16|uint32(md.EgressPort))
		case 2:
			binary.BigEndian.PutUint32(b[off:], md.HopLatency)
		case 3:
			binary.BigEndian.PutUint32(b[off:], uint32(md.QueueID)<<24|md.QueueOccupancy&0xffffff)
		case 4:
			binary.BigEndian.PutUint64(b[off:], md.IngressTimestamp)
		case 5:
			binary.BigEndian.PutUint64(b[off:], md.EgressTimestamp)
		case 6:
			binary.BigEndian.PutUint64(b[off:], uint64(md.L2IngressPort)<<32|uint64(md.L2EgressPort))
		case 7:
			binary.BigEndian.PutUint32(b[off:], md.TxUtilization)
		case 8:
			binary.BigEndian.PutUint32(b[off:], uint32(md.BufferID)<<24|md.BufferOccupancy&0xffffff)
		case 15:
			binary.BigEndian.PutUint32(b[off:], uint32(md.DropQueueID)<<24|uint32(md.DropReason)<<16)
		default:
			binary.BigEndian.PutUint32(b[off:], Unavailable32) // reserved
		}
		off += 4 * spec.FieldWords(bit)
	}
	return off
}

// AppendReport appends one individual report to dst (typically after a
// group header and earlier reports, for coalescing). For RepType INT, md
// holds the baseline metadata selected by h.RepMdBits and ds the
// domain-specific metadata for h.DSMdBits (whole words). inner is the
// truncated packet, TLVs or extension data; it is zero-padded to a word.
// A report longer than 254 words gets Report Length 0xFF, which means it
// extends to the end of the payload, so it must be the last one.
func AppendReport(dst []byte, h *ReportHeader, md *ReportMetadata, ds, inner []byte) ([]byte, error) {
	if h.Type > 15 || h.InType > 15 || len(ds)%4 != 0 {
		return dst, ErrBadValue
	}
	mdWords := 0
	fixed := 0
	if h.Type == spec.RepINT {
		mdWords = RepMdWords(h.RepMdBits) + len(ds)/4
		fixed = INTReportFixedLen
	} else if len(ds) != 0 || md != nil {
		return dst, ErrBadValue
	}
	if mdWords > 255 {
		return dst, ErrBadLength
	}
	pad := (4 - len(inner)%4) % 4
	words := (fixed + mdWords*4 + len(inner) + pad) / 4
	lw := words
	if lw > maxReportLengthWord {
		lw = ReportLengthToEnd
	}
	flags := b2u8(h.Dropped)<<7 | b2u8(h.Congested)<<6 | b2u8(h.TrackedFlow)<<5 | b2u8(h.Intermediate)<<4
	dst = append(dst, uint8(h.Type)<<4|uint8(h.InType), uint8(lw), uint8(mdWords), flags)
	if h.Type == spec.RepINT {
		dst = binary.BigEndian.AppendUint16(dst, h.RepMdBits)
		dst = binary.BigEndian.AppendUint16(dst, h.DomainID)
		dst = binary.BigEndian.AppendUint16(dst, h.DSMdBits)
		dst = binary.BigEndian.AppendUint16(dst, h.DSMdStatus)
		n := RepMdWords(h.RepMdBits) * 4
		start := len(dst)
		dst = grow(dst, n)
		var zero ReportMetadata
		if md == nil {
			md = &zero
		}
		putReportMetadata(dst[start:], h.RepMdBits, md)
		dst = append(dst, ds...)
	}
	dst = append(dst, inner...)
	for ; pad > 0; pad-- {
		dst = append(dst, 0)
	}
	return dst, nil
}

// grow extends b by n bytes (contents unspecified), reallocating only when
// the caller's buffer is too small.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	return append(b, make([]byte, n)...)
}

// Report is one decoded individual report. Its slices alias the payload.
type Report struct {
	ReportHeader
	Length   uint8 // raw Report Length field (0xFF: to end of payload)
	MDLength uint8
	Metadata []byte // baseline then domain-specific metadata (MD Length words)
	Inner    []byte // individual report inner contents
}

// Baseline decodes the baseline metadata of an INT report into md and
// returns the domain-specific metadata that follows it.
func (r *Report) Baseline(md *ReportMetadata) ([]byte, error) {
	n := RepMdWords(r.RepMdBits) * 4
	if len(r.Metadata) < n {
		return nil, ErrBadLength
	}
	b := r.Metadata
	off := 0
	for set := r.RepMdBits; set != 0; {
		bit := mbits.LeadingZeros16(set)
		set &^= uint16(spec.InstructionBit(bit))
		v := binary.BigEndian.Uint32(b[off:])
		switch bit {
		case 1:
			md.IngressPort, md.EgressPort = uint16(v>>16), uint16(v)
		case 2:
			md.HopLatency = v
		case 3:
			md.QueueID, md.QueueOccupancy = uint8(v>>24), v&0xffffff
		case 4:
			md.IngressTimestamp = binary.BigEndian.Uint64(b[off:])
		case 5:
			md.EgressTimestamp = binary.BigEndian.Uint64(b[off:])
		case 6:
			md.L2IngressPort, md.L2EgressPort = v, binary.BigEndian.Uint32(b[off+4:])
		case 7:
			md.TxUtilization = v
		case 8:
			md.BufferID, md.BufferOccupancy = uint8(v>>24), v&0xffffff
		case 15:
			md.DropQueueID, md.DropReason = uint8(v>>24), uint8(v>>16)
		}
		off += 4 * spec.FieldWords(bit)
	}
	return b[n:], nil
}

// ReportReader iterates over the individual reports of a telemetry report
// payload without allocating.
type ReportReader struct {
	rest []byte
	err  error
}

// NewReportReader decodes the group header of payload (the UDP payload)
// and returns a reader positioned on the first individual report.
func NewReportReader(payload []byte) (GroupHeader, ReportReader, error) {
	g, err := DecodeGroupHeader(payload)
	if err != nil {
		return g, ReportReader{}, err
	}
	return g, ReportReader{rest: payload[GroupHeaderLen:]}, nil
}

// Next decodes the next report into r. It returns false at the end of the
// payload or on error (see Err).
func (rr *ReportReader) Next(r *Report) bool {
	if rr.err != nil || len(rr.rest) == 0 {
		return false
	}
	b := rr.rest
	if len(b) < ReportHeaderLen {
		rr.err = ErrTruncated
		return false
	}
	*r = Report{}
	r.Type, r.InType = spec.RepType(b[0]>>4), spec.InType(b[0]&0x0f)
	r.Length, r.MDLength = b[1], b[2]
	r.Dropped, r.Congested = b[3]&0x80 != 0, b[3]&0x40 != 0
	r.TrackedFlow, r.Intermediate = b[3]&0x20 != 0, b[3]&0x10 != 0
	end := len(b)
	if r.Length != ReportLengthToEnd {
		end = ReportHeaderLen + int(r.Length)*4
		if end > len(b) {
			rr.err = ErrTruncated
			return false
		}
	}
	body := b[ReportHeaderLen:end]
	rr.rest = b[end:]
	switch r.Type {
	case spec.RepINT:
		md := int(r.MDLength) * 4
		if len(body) < INTReportFixedLen+md {
			rr.err = ErrBadLength
			return false
		}
		r.RepMdBits = binary.BigEndian.Uint16(body)
		r.DomainID = binary.BigEndian.Uint16(body[2:])
		r.DSMdBits = binary.BigEndian.Uint16(body[4:])
		r.DSMdStatus = binary.BigEndian.Uint16(body[6:])
		if RepMdWords(r.RepMdBits) > int(r.MDLength) {
			rr.err = ErrBadLength
			return false
		}
		r.Metadata = body[INTReportFixedLen : INTReportFixedLen+md : INTReportFixedLen+md]
		r.Inner = body[INTReportFixedLen+md:]
	case spec.RepInnerOnly:
		r.Inner = body
	default:
		r.Inner = body // IOAM and future types: contents left opaque
	}
	return true
}

// Err returns the error that stopped Next, if any.
func (rr *ReportReader) Err() error { return rr.err }

// TLV types of the report inner contents.
const (
	TLVDSExt    = 0
	TLVEthernet = 1
	TLVIPv4     = 2
	TLVIPv6     = 3
)

// TLV is one decoded TLV; Data aliases the report.
type TLV struct {
	Type     uint8
	Template uint16
	Data     []byte
}

// AppendTLV appends a TLV with data zero-padded to a word.
func AppendTLV(dst []byte, typ uint8, template uint16, data []byte) ([]byte, error) {
	pad := (4 - len(data)%4) % 4
	words := (len(data) + pad) / 4
	if typ > 15 || words > 255 {
		return dst, ErrBadValue
	}
	dst = append(dst, typ<<4, uint8(words))
	dst = binary.BigEndian.AppendUint16(dst, template)
	dst = append(dst, data...)
	for ; pad > 0; pad-- {
		dst = append(dst, 0)
	}
	return dst, nil
}

// TLVReader iterates over TLV inner contents.
type TLVReader struct {
	rest []byte
	err  error
}

// NewTLVReader returns a reader over b (a report's Inner with InType TLV).
func NewTLVReader(b []byte) TLVReader { return TLVReader{rest: b} }

// Next decodes the next TLV into t.
func (tr *TLVReader) Next(t *TLV) bool {
	if tr.err != nil || len(tr.rest) == 0 {
		return false
	}
	b := tr.rest
	if len(b) < TLVHeaderLen {
		tr.err = ErrTruncated
		return false
	}
	end := TLVHeaderLen + int(b[1])*4
	if end > len(b) {
		tr.err = ErrTruncated
		return false
	}
	*t = TLV{Type: b[0] >> 4, Template: binary.BigEndian.Uint16(b[2:]), Data: b[TLVHeaderLen:end:end]}
	tr.rest = b[end:]
	return true
}

// Err returns the error that stopped Next, if any.
func (tr *TLVReader) Err() error { return tr.err }

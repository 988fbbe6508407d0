package collector

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// hopRecip[ml] is 2^32 / (ml*4) rounded up, for hopsIn.
var hopRecip = func() (t [32]uint64) {
	for ml := uint64(1); ml < 32; ml++ {
		t[ml] = (1<<32 + ml*4 - 1) / (ml * 4)
	}
	return t
}()

// hopsIn is x / (ml*4), the whole hops of ml words in x bytes, for
// 0 < ml < 32 and x >= 0: below 2^16 a multiply by the reciprocal, exact
// there (x times the rounding error stays below 2^32), instead of a
// division, which takes tens of cycles.
func hopsIn(x, ml int) int {
	if uint(x) >= 1<<16 {
		return x / (ml * 4)
	}
	return int(uint64(x) * hopRecip[ml&31] >> 32)
}

// hopLayout is where each metadata field of one instruction bitmap lies in
// a hop (byte offsets, -1 when not selected), computed once per stack so
// that each hop is decoded with independent loads. Reserved bits 9-14 take
// a word each and are skipped.
type hopLayout struct {
	inst                                  wire.Instructions
	node, l1, lat, q, its, ets, l2, tx, b int
	fixed                                 int // bytes of bits 0-14
	words                                 int // fixed / 4
	// sel is the fields of bits 0-8 the layout selects; repValid, the
	// Valid of report metadata laid out so (sel and the reserved bits).
	sel, repValid wire.Instructions
}

func (l *hopLayout) set(inst wire.Instructions) {
	l.inst = inst
	off := 0
	at := func(bit wire.Instructions, n int) int {
		if inst&bit == 0 {
			return -1
		}
		o := off
		off += n
		return o
	}
	l.node = at(spec.InstNodeID, 4)
	l.l1 = at(spec.InstL1Interfaces, 4)
	l.lat = at(spec.InstHopLatency, 4)
	l.q = at(spec.InstQueue, 4)
	l.its = at(spec.InstIngressTimestamp, 8)
	l.ets = at(spec.InstEgressTimestamp, 8)
	l.l2 = at(spec.InstL2Interfaces, 8)
	l.tx = at(spec.InstEgressTxUtil, 4)
	l.b = at(spec.InstBuffer, 4)
	l.fixed = off + 4*bits.OnesCount16(uint16(inst&spec.InstReserved))
	l.words = l.fixed / 4
	l.sel = inst &^ (spec.InstReserved | spec.InstChecksumComplement)
	l.repValid = l.sel | inst&spec.InstReserved
}

// fields reads the fields of bits 0-8 that the layout selects from p
// (at least l.fixed bytes) into m and returns them; with unavail, those
// whose value is all ones (unavailable) are left out.
func (l *hopLayout) fields(p unsafe.Pointer, m *wire.HopMetadata, unavail bool) wire.Instructions {
	// Every selected field, less the unavailable ones: report metadata
	// (!unavail) takes no per-field work for its bitmap.
	valid := l.sel
	get32 := func(o int, bit wire.Instructions) uint32 {
		x := be32(p, o)
		if unavail && x == wire.Unavailable32 {
			valid &^= bit
		}
		return x
	}
	get64 := func(o int, bit wire.Instructions) uint64 {
		x := be64(p, o)
		if unavail && x == wire.Unavailable64 {
			valid &^= bit
		}
		return x
	}
	if o := l.node; o >= 0 {
		m.NodeID = get32(o, spec.InstNodeID)
	}
	if o := l.l1; o >= 0 {
		x := get32(o, spec.InstL1Interfaces)
		m.IngressPort, m.EgressPort = uint16(x>>16), uint16(x)
	}
	if o := l.lat; o >= 0 {
		m.HopLatency = get32(o, spec.InstHopLatency)
	}
	if o := l.q; o >= 0 {
		x := get32(o, spec.InstQueue)
		m.QueueID, m.QueueOccupancy = uint8(x>>24), x&0xffffff
	}
	if o := l.its; o >= 0 {
		m.IngressTimestamp = get64(o, spec.InstIngressTimestamp)
	}
	if o := l.ets; o >= 0 {
		m.EgressTimestamp = get64(o, spec.InstEgressTimestamp)
	}
	if o := l.l2; o >= 0 {
		x := get64(o, spec.InstL2Interfaces)
		m.L2IngressPort, m.L2EgressPort = uint32(x>>32), uint32(x)
	}
	if o := l.tx; o >= 0 {
		m.TxUtilization = get32(o, spec.InstEgressTxUtil)
	}
	if o := l.b; o >= 0 {
		x := get32(o, spec.InstBuffer)
		m.BufferID, m.BufferOccupancy = uint8(x>>24), x&0xffffff
	}
	return valid
}

// repMdWords is wire.RepMdWords(bits) for the layout of bits 0-14 of
// bits: its words and the drop word (bit 15).
func (l *hopLayout) repMdWords(bits uint16) int {
	return l.words + int(bits&wire.RepDrop)
}

// decodeReport is wire.DecodeFields of report metadata (every field
// selected valid, bit 15 left to the caller) with the layout of its
// bitmap: b holds at least l.fixed bytes. It returns the offset after the
// fields.
func (l *hopLayout) decodeReport(b []byte, m *wire.HopMetadata) int {
	if l.fixed > len(b) {
		panic("collector: report metadata shorter than its bitmap")
	}
	l.fields(unsafe.Pointer(unsafe.SliceData(b)), m, false)
	m.Valid = l.repValid // the reserved bits' words are skipped, but valid
	return l.fixed
}

// decode is wire.DecodeHop with the layout of its bitmap: b is one hop of at
// least l.fixed bytes (plus the checksum complement word if selected).
func (l *hopLayout) decode(b []byte, m *wire.HopMetadata) {
	end := len(b)
	if l.inst&spec.InstChecksumComplement != 0 {
		end -= 4
	}
	if l.fixed > end {
		panic("collector: INT hop shorter than its instruction bitmap")
	}
	// NodeID is read whatever Valid says (path hops are keyed by it): it
	// is 0 when the bitmap leaves it out, not a previous hop's value.
	m.NodeID = 0
	valid := l.fields(unsafe.Pointer(unsafe.SliceData(b)), m, true)
	m.ChecksumComplement = 0
	if l.inst&spec.InstChecksumComplement != 0 {
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != wire.Unavailable32 {
			valid |= spec.InstChecksumComplement
		}
	}
	m.Valid = valid
	m.DomainSpecific = b[l.fixed:end:end]
}

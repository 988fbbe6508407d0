package collector

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/intd-project/intd/dataplane/wire"
)

// decodeFields decodes the metadata fields of bits 0-14 of set (in bitmap
// order, each set bit taking FieldWords words) from b into m and returns
// the offset after them. With unavail, all-ones values are left out of
// m.Valid (hop metadata); otherwise every field selected is valid (report
// metadata). The caller checks that b holds set's words. It is the hot-path
// equivalent of wire.DecodeHop and Report.Baseline, visiting only the set
// bits.
func decodeFields(b []byte, set uint16, m *wire.HopMetadata, unavail bool) int {
	off := 0
	var valid wire.Instructions
	// Unrolled in bitmap order; the helpers are inlined.
	u32 := func(bit wire.Instructions) uint32 {
		x := binary.BigEndian.Uint32(b[off:])
		off += 4
		if !unavail || x != wire.Unavailable32 {
			valid |= bit
		}
		return x
	}
	u64 := func(bit wire.Instructions) uint64 {
		x := binary.BigEndian.Uint64(b[off:])
		off += 8
		if !unavail || x != wire.Unavailable64 {
			valid |= bit
		}
		return x
	}
	inst := wire.Instructions(set)
	if inst&wire.InstNodeID != 0 {
		m.NodeID = u32(wire.InstNodeID)
	}
	if inst&wire.InstL1Ports != 0 {
		x := u32(wire.InstL1Ports)
		m.IngressPort, m.EgressPort = uint16(x>>16), uint16(x)
	}
	if inst&wire.InstHopLatency != 0 {
		m.HopLatency = u32(wire.InstHopLatency)
	}
	if inst&wire.InstQueue != 0 {
		x := u32(wire.InstQueue)
		m.QueueID, m.QueueOccupancy = uint8(x>>24), x&0xffffff
	}
	if inst&wire.InstIngressTimestamp != 0 {
		m.IngressTimestamp = u64(wire.InstIngressTimestamp)
	}
	if inst&wire.InstEgressTimestamp != 0 {
		m.EgressTimestamp = u64(wire.InstEgressTimestamp)
	}
	if inst&wire.InstL2Ports != 0 {
		x := u64(wire.InstL2Ports)
		m.L2IngressPort, m.L2EgressPort = uint32(x>>32), uint32(x)
	}
	if inst&wire.InstTxUtilization != 0 {
		m.TxUtilization = u32(wire.InstTxUtilization)
	}
	if inst&wire.InstBuffer != 0 {
		x := u32(wire.InstBuffer)
		m.BufferID, m.BufferOccupancy = uint8(x>>24), x&0xffffff
	}
	// Reserved bits 9-14: one word each, nothing to store.
	for r := set & 0x7e; r != 0; {
		bit := uint16(0x8000) >> bits.LeadingZeros16(r)
		r &^= bit
		u32(wire.Instructions(bit))
	}
	m.Valid = valid
	return off
}

// decodeHop decodes one hop of hopLen bytes (len(b) == hopLen, at least
// inst.Words() words): baseline, domain-specific, checksum complement.
func decodeHop(b []byte, inst wire.Instructions, m *wire.HopMetadata) {
	off := decodeFields(b, uint16(inst), m, true)
	end := len(b)
	m.ChecksumComplement = 0
	if inst&wire.InstChecksumComplement != 0 {
		end -= 4
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != wire.Unavailable32 {
			m.Valid |= wire.InstChecksumComplement
		}
	}
	m.DomainSpecific = b[off:end:end]
}

// hopLayout is where each metadata field of one instruction bitmap lies in
// a hop (byte offsets, -1 when not selected), computed once per stack so
// that each hop is decoded with independent loads. Reserved bits 9-14 take
// a word each and are skipped.
type hopLayout struct {
	inst                                  wire.Instructions
	node, l1, lat, q, its, ets, l2, tx, b int
	fixed                                 int // bytes of bits 0-14
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
	l.node = at(wire.InstNodeID, 4)
	l.l1 = at(wire.InstL1Ports, 4)
	l.lat = at(wire.InstHopLatency, 4)
	l.q = at(wire.InstQueue, 4)
	l.its = at(wire.InstIngressTimestamp, 8)
	l.ets = at(wire.InstEgressTimestamp, 8)
	l.l2 = at(wire.InstL2Ports, 8)
	l.tx = at(wire.InstTxUtilization, 4)
	l.b = at(wire.InstBuffer, 4)
	l.fixed = off + 4*bits.OnesCount16(uint16(inst)&0x7e)
}

// decode is decodeHop with the layout of its bitmap: b is one hop of at
// least l.fixed bytes (plus the checksum complement word if selected).
func (l *hopLayout) decode(b []byte, m *wire.HopMetadata) {
	end := len(b)
	if l.inst&wire.InstChecksumComplement != 0 {
		end -= 4
	}
	if l.fixed > end {
		panic("collector: INT hop shorter than its instruction bitmap")
	}
	var valid wire.Instructions
	p := unsafe.Pointer(unsafe.SliceData(b))
	// NodeID is read whatever Valid says (path hops are keyed by it): it
	// is 0 when the bitmap leaves it out, not a previous hop's value.
	m.NodeID = 0
	if o := l.node; o >= 0 {
		x := be32(p, o)
		m.NodeID = x
		if x != wire.Unavailable32 {
			valid |= wire.InstNodeID
		}
	}
	if o := l.l1; o >= 0 {
		x := be32(p, o)
		m.IngressPort, m.EgressPort = uint16(x>>16), uint16(x)
		if x != wire.Unavailable32 {
			valid |= wire.InstL1Ports
		}
	}
	if o := l.lat; o >= 0 {
		x := be32(p, o)
		m.HopLatency = x
		if x != wire.Unavailable32 {
			valid |= wire.InstHopLatency
		}
	}
	if o := l.q; o >= 0 {
		x := be32(p, o)
		m.QueueID, m.QueueOccupancy = uint8(x>>24), x&0xffffff
		if x != wire.Unavailable32 {
			valid |= wire.InstQueue
		}
	}
	if o := l.its; o >= 0 {
		x := be64(p, o)
		m.IngressTimestamp = x
		if x != wire.Unavailable64 {
			valid |= wire.InstIngressTimestamp
		}
	}
	if o := l.ets; o >= 0 {
		x := be64(p, o)
		m.EgressTimestamp = x
		if x != wire.Unavailable64 {
			valid |= wire.InstEgressTimestamp
		}
	}
	if o := l.l2; o >= 0 {
		x := be64(p, o)
		m.L2IngressPort, m.L2EgressPort = uint32(x>>32), uint32(x)
		if x != wire.Unavailable64 {
			valid |= wire.InstL2Ports
		}
	}
	if o := l.tx; o >= 0 {
		x := be32(p, o)
		m.TxUtilization = x
		if x != wire.Unavailable32 {
			valid |= wire.InstTxUtilization
		}
	}
	if o := l.b; o >= 0 {
		x := be32(p, o)
		m.BufferID, m.BufferOccupancy = uint8(x>>24), x&0xffffff
		if x != wire.Unavailable32 {
			valid |= wire.InstBuffer
		}
	}
	m.ChecksumComplement = 0
	if l.inst&wire.InstChecksumComplement != 0 {
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != wire.Unavailable32 {
			valid |= wire.InstChecksumComplement
		}
	}
	m.Valid = valid
	m.DomainSpecific = b[l.fixed:end:end]
}

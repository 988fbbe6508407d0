package collector

import (
	"encoding/binary"
	"math/bits"

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

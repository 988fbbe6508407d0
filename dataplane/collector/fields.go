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
	for v := set &^ 1; v != 0; {
		bit := bits.LeadingZeros16(v)
		mask := uint16(0x8000) >> bit
		v &^= mask
		if bit >= 4 && bit <= 6 {
			x := binary.BigEndian.Uint64(b[off:])
			off += 8
			if !unavail || x != wire.Unavailable64 {
				valid |= wire.Instructions(mask)
			}
			switch bit {
			case 4:
				m.IngressTimestamp = x
			case 5:
				m.EgressTimestamp = x
			case 6:
				m.L2IngressPort, m.L2EgressPort = uint32(x>>32), uint32(x)
			}
			continue
		}
		x := binary.BigEndian.Uint32(b[off:])
		off += 4
		if !unavail || x != wire.Unavailable32 {
			valid |= wire.Instructions(mask)
		}
		switch bit {
		case 0:
			m.NodeID = x
		case 1:
			m.IngressPort, m.EgressPort = uint16(x>>16), uint16(x)
		case 2:
			m.HopLatency = x
		case 3:
			m.QueueID, m.QueueOccupancy = uint8(x>>24), x&0xffffff
		case 7:
			m.TxUtilization = x
		case 8:
			m.BufferID, m.BufferOccupancy = uint8(x>>24), x&0xffffff
		}
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

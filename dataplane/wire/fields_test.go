package wire

import (
	"encoding/binary"
	"math/bits"
	"reflect"
	"testing"
)

// refDecodeFields is a per-bit loop equivalent of DecodeFields; the unrolled
// version must leave exactly the same HopMetadata (including fields it
// does not touch) and offset.
func refDecodeFields(b []byte, set uint16, m *HopMetadata, unavail bool) int {
	off := 0
	var valid Instructions
	for v := set &^ 1; v != 0; {
		bit := bits.LeadingZeros16(v)
		mask := uint16(0x8000) >> bit
		v &^= mask
		if bit >= 4 && bit <= 6 {
			x := binary.BigEndian.Uint64(b[off:])
			off += 8
			if !unavail || x != Unavailable64 {
				valid |= Instructions(mask)
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
		if !unavail || x != Unavailable32 {
			valid |= Instructions(mask)
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

func FuzzDecodeFieldsReference(f *testing.F) {
	f.Add(uint16(0xf100), false, []byte{1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff, 5})
	f.Add(uint16(0xffff), true, make([]byte, 80))
	f.Fuzz(func(t *testing.T, set uint16, unavail bool, b []byte) {
		need := Instructions(set&^1).Words() * 4
		if len(b) < need {
			b = append(b, make([]byte, need-len(b))...)
		}
		prev := HopMetadata{NodeID: 7, HopLatency: 8, TxUtilization: 9, EgressTimestamp: 10, BufferID: 11, Valid: 0xffff}
		got, want := prev, prev
		gn, wn := DecodeFields(b, Instructions(set), &got, unavail), refDecodeFields(b, set, &want, unavail)
		if gn != wn || !reflect.DeepEqual(got, want) {
			t.Fatalf("set %04x unavail %v: %d %+v\nwant %d %+v", set, unavail, gn, got, wn, want)
		}
	})
}

package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"reflect"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// Differential tests: the unrolled and fast-path codecs must produce
// exactly what the straightforward per-bit versions (kept here as
// references) and the general PushHop produce.

func refPutHop(b []byte, inst Instructions, dsWords int, m *HopMetadata) (int, error) {
	n := (inst.Words() + dsWords) * 4
	if len(b) < n {
		return 0, ErrTruncated
	}
	if len(m.DomainSpecific) > dsWords*4 {
		return 0, ErrBadLength
	}
	off := 0
	valid := m.Valid
	for v := uint16(inst) &^ 1; v != 0; {
		bit := bits.LeadingZeros16(v)
		v &^= 0x8000 >> uint(bit)
		ok := valid&(0x8000>>uint(bit)) != 0
		if spec.FieldWords(bit) == 2 {
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
	for pad := b[off : n-4*int(inst&1)]; len(pad) > 0; pad = pad[1:] {
		pad[0] = 0xff
	}
	off = n - 4*int(inst&1)
	if inst&spec.InstChecksumComplement != 0 {
		binary.BigEndian.PutUint32(b[off:], Unavailable32)
		off += 4
	}
	return off, nil
}

func refDecodeHop(b []byte, inst Instructions, m *HopMetadata) error {
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
		if spec.FieldWords(bit) == 2 {
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
	end := len(b)
	if inst&spec.InstChecksumComplement != 0 {
		end -= 4
		m.ChecksumComplement = binary.BigEndian.Uint32(b[end:])
		if m.ChecksumComplement != Unavailable32 {
			m.Valid |= spec.InstChecksumComplement
		}
	}
	m.DomainSpecific = b[off:end:end]
	return nil
}

func hopFromBytes(seed []byte) HopMetadata {
	var w [64]byte
	copy(w[:], seed)
	u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(w[i*4:]) }
	return HopMetadata{NodeID: u32(0), IngressPort: uint16(u32(1)), EgressPort: uint16(u32(2)), HopLatency: u32(3),
		QueueID: uint8(u32(4)), QueueOccupancy: u32(5), IngressTimestamp: uint64(u32(6))<<32 | uint64(u32(7)),
		EgressTimestamp: uint64(u32(8)) << 7, L2IngressPort: u32(9), L2EgressPort: u32(10), TxUtilization: u32(11),
		BufferID: uint8(u32(12)), BufferOccupancy: u32(13), Valid: Instructions(u32(14))}
}

func FuzzHopCodecReference(f *testing.F) {
	f.Add(uint16(inst5), uint8(0), []byte{1, 2, 3}, []byte{})
	f.Add(uint16(0xffff), uint8(2), []byte{0xff, 0xff, 0xff, 0xff, 9}, []byte{1, 2, 3, 4})
	f.Add(uint16(0x807f), uint8(3), bytes.Repeat([]byte{0xff}, 60), []byte{5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, inst uint16, ds uint8, seed, dsBytes []byte) {
		m := hopFromBytes(seed)
		m.DomainSpecific = dsBytes[:len(dsBytes)&^3]
		dsw := int(ds % 8)
		n := (Instructions(inst).Words() + dsw) * 4
		got, want := make([]byte, n+8), make([]byte, n+8)
		gn, gerr := PutHop(got, Instructions(inst), dsw, &m)
		wn, werr := refPutHop(want, Instructions(inst), dsw, &m)
		if gn != wn || gerr != werr || !bytes.Equal(got, want) {
			t.Fatalf("PutHop %04x ds %d: %d %v\n% x\nwant %d %v\n% x", inst, dsw, gn, gerr, got, wn, werr, want)
		}
		if gerr == nil {
			_, sum, _ := putHop(got, Instructions(inst), dsw, &m)
			if Fold(fold64(sum)) != Fold(Sum(0, want[:wn])) {
				t.Fatalf("putHop sum %x, want %x", Fold(fold64(sum)), Fold(Sum(0, want[:wn])))
			}
		}
		// Decode both the encoded hop and raw bytes.
		for _, b := range [][]byte{want[:n], append(seed[:len(seed)&^3:len(seed)&^3], want[:n]...)} {
			var gm, wm HopMetadata
			gerr, werr := DecodeHop(b, Instructions(inst), &gm), refDecodeHop(b, Instructions(inst), &wm)
			if gerr != werr || !reflect.DeepEqual(gm, wm) {
				t.Fatalf("DecodeHop %04x % x:\n%+v %v\nwant %+v %v", inst, b, gm, gerr, wm, werr)
			}
		}
	})
}

// FuzzPushHopFastPath checks that PushHop's fast path leaves exactly the
// bytes, Packet and error of the general path.
func FuzzPushHopFastPath(f *testing.F) {
	for _, s := range specSeeds(f) {
		f.Add(s, false, uint8(0), []byte{1}, false)
	}
	for _, s := range captureSeeds(f) {
		f.Add(s, true, uint8(1), []byte{7, 7, 7}, true)
	}
	for _, tcp := range []bool{false, true} {
		for hops := 0; hops < 4; hops++ {
			bc := mdUDPPacket(f, hops, tcp)
			f.Add(bc.pkt, false, uint8(hops), []byte{byte(hops), 1, 2}, false)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, eth bool, room uint8, seed []byte, cc bool) {
		var p Packet
		if fuzzParserFor(eth, b, &p) != nil || !p.HasINT() {
			return
		}
		m := hopFromBytes(seed)
		opt := PushOptions{UseChecksumComplement: cc, DSWords: int(room % 3)}
		extra := int(room) * 4
		a := append(bytes.Clone(b), make([]byte, extra)...)[:len(b)]
		c := append(bytes.Clone(b), make([]byte, extra)...)[:len(b)]
		pa, pc := p, p
		ga, erra := PushHop(a, &pa, &m, opt)
		gc, errc := pushHop(c, &pc, &m, opt)
		if erra != errc || !bytes.Equal(ga, gc) || pa != pc {
			t.Fatalf("fast %v % x\n%+v\ngeneral %v % x\n%+v", erra, ga, pa, errc, gc, pc)
		}
	})
}

func FuzzSum64(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xff})
	f.Add(bytes.Repeat([]byte{0xff}, 77))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			got, want := Fold64(Sum64(0, b[i:])), Fold(Sum(0, b[i:]))
			if got != want {
				t.Fatalf("Sum64(0, % x) folds to %04x, Sum to %04x", b[i:], got, want)
			}
		}
	})
}

package collector

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
)

// TestHopsIn: the reciprocal division is the division, for every hop
// length and every stack length an INT header can give, and beyond.
func TestHopsIn(t *testing.T) {
	for ml := 1; ml < 32; ml++ {
		for x := 0; x < 1<<17; x++ {
			if got, want := hopsIn(x, ml), x/(ml*4); got != want {
				t.Fatalf("hopsIn(%d, %d) = %d, want %d", x, ml, got, want)
			}
		}
	}
}

// TestDecodeReportFields: report metadata decoded with the layout of its
// bitmap is wire.DecodeFields', for every bitmap of bits 0-14.
func TestDecodeReportFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, 80)
	for bits := 0; bits < 1<<16; bits += 2 { // bit 15 is the caller's
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		inst := wire.Instructions(bits)
		var l hopLayout
		l.set(inst)
		var got, want wire.HopMetadata
		for _, rb := range []uint16{uint16(bits), uint16(bits) | wire.RepDrop} {
			if w, want := l.repMdWords(rb), wire.RepMdWords(rb); w != want {
				t.Fatalf("bits %#04x: %d words, wire.RepMdWords %d", rb, w, want)
			}
		}
		n := l.decodeReport(b, &got)
		off := wire.DecodeFields(b, inst, &want, false)
		if n != off || !reflect.DeepEqual(got, want) {
			t.Fatalf("bits %#04x: offset %d, %+v; DecodeFields %d, %+v", bits, n, got, off, want)
		}
	}
}

package collector

import "testing"

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

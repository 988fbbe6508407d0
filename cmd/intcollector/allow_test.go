package main

import (
	"net/netip"
	"testing"
)

func TestParsePrefixes(t *testing.T) {
	got, err := parsePrefixes("10.0.0.1, 192.0.2.7/24,2001:db8::/32,::ffff:10.1.1.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.1.1.1/32")}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "node1", "::ffff:10.0.0.0/104"} {
		if _, err := parsePrefixes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

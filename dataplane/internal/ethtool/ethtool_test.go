//go:build linux

package ethtool

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inVeth runs fn on a thread inside a new network namespace holding the
// veth pair a/b, both up.
func inVeth(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer netns.Set(orig)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a"}, PeerName: "b"}); err != nil {
		t.Fatalf("veth pair: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		l, err := h.LinkByName(n)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("%s up: %v", n, err)
		}
	}
	fn()
}

// TestOffloads switches GRO off and on and reads it back, as
// `ethtool -K a gro off` would.
func TestOffloads(t *testing.T) {
	inVeth(t, func() {
		for _, on := range []bool{false, true, false} {
			if err := SetOffload("a", on, GRO); err != nil {
				t.Fatal(err)
			}
			got, err := GetOffload("a", GRO)
			if err != nil {
				t.Fatal(err)
			}
			if got != on {
				t.Errorf("GRO %v after setting it %v", got, on)
			}
		}
		// veth has no LRO to switch: skipped, not an error.
		if err := SetOffload("a", false, LRO); err != nil {
			t.Errorf("LRO off: %v", err)
		}
		if _, err := GetOffload("nosuchdev", GRO); !errors.Is(err, unix.ENODEV) {
			t.Errorf("unknown device: %v, want ENODEV", err)
		}
	})
}

// TestFeatures turns the segmentation features off by name and reads the
// active features back; features not named keep their state.
func TestFeatures(t *testing.T) {
	inVeth(t, func() {
		before, err := ActiveFeatures("a")
		if err != nil {
			t.Fatal(err)
		}
		seg := func(f string) bool { return strings.HasPrefix(f, "tx-") && strings.HasSuffix(f, "-segmentation") }
		if !before["tx-tcp-segmentation"] {
			t.Fatalf("veth starts without TSO: %v", before)
		}
		if err := SetFeatures("a", seg, false); err != nil {
			t.Fatal(err)
		}
		after, err := ActiveFeatures("a")
		if err != nil {
			t.Fatal(err)
		}
		if after["tx-tcp-segmentation"] || after["tx-tcp6-segmentation"] {
			t.Errorf("TSO still active after turning it off: %v", after)
		}
		if after["rx-checksum"] != before["rx-checksum"] {
			t.Errorf("rx-checksum changed from %v to %v; it was not named", before["rx-checksum"], after["rx-checksum"])
		}
		if err := SetFeatures("a", seg, true); err != nil {
			t.Fatal(err)
		}
		if again, err := ActiveFeatures("a"); err != nil || !again["tx-tcp-segmentation"] {
			t.Errorf("TSO back on: %v (%v)", again["tx-tcp-segmentation"], err)
		}
	})
}

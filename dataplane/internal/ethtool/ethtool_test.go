//go:build linux

package ethtool

import (
	"errors"
	"strings"
	"testing"

	"github.com/intd-project/intd/internal/netnstest"
	"golang.org/x/sys/unix"
)

// inVeth runs fn on a thread inside a new network namespace holding the
// veth pair a/b, both up.
func inVeth(t *testing.T, fn func()) {
	t.Helper()
	ns, h := netnstest.New(t)
	netnstest.Veth(t, h, [2]string{"a", "b"})
	netnstest.Enter(t, ns)
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

// TestSpeed reads a veth's speed, which the kernel reports as 10 Gbit/s,
// and fails on a device that does not exist.
func TestSpeed(t *testing.T) {
	inVeth(t, func() {
		s, err := Speed("a")
		if err != nil || s != 10_000_000_000 {
			t.Errorf("speed of a veth: %d, %v; want 10 Gbit/s", s, err)
		}
		if _, err := Speed("no-such-if"); err == nil {
			t.Error("speed of a missing interface: no error")
		}
	})
}

package ebpf

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/internal/netnstest"

	"github.com/intd-project/intd/dataplane/internal/hostlock"
)

// scratchNS returns a new network namespace with a veth pair d0-d1, up.
func scratchNS(t *testing.T) netns.NsHandle {
	t.Helper()
	needRoot(t)
	ns, h := netnstest.New(t)
	netnstest.Veth(t, h, [2]string{"d0", "d1"})
	return ns
}

// leftovers lists what intd may have left in ns: detour devices, tc
// filters and clsact qdiscs.
func leftovers(t *testing.T, ns netns.NsHandle) []string {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		name := l.Attrs().Name
		if strings.HasPrefix(name, detourPrefix) {
			out = append(out, "device "+name)
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := h.FilterList(l, parent)
			for _, f := range fs {
				out = append(out, name+" filter "+f.Type()+" "+strconv.Itoa(int(f.Attrs().Priority)))
			}
		}
		qs, _ := h.QdiscList(l)
		for _, q := range qs {
			if q.Type() == "clsact" {
				out = append(out, name+" clsact")
			}
		}
	}
	return out
}

// TestNewFailsFast checks that New returns, naming the interface, when
// one cannot be attached, and leaves nothing behind: it used to wait
// forever for a report reader it had not started.
func TestNewFailsFast(t *testing.T) {
	ns := scratchNS(t)
	err := netnstest.Run(t, ns, 10*time.Second, func() error {
		_, err := New(Config{Interfaces: []Interface{{Name: "d0"}, {Name: "nosuch0"}}})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Fatalf("New: %v, want an error naming nosuch0", err)
	}
	if l := leftovers(t, ns); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestInterfaceInUse checks that a second dataplane on an interface a
// running one is attached to is refused (it would replace the first's
// filters), and that after Close nothing is left.
func TestInterfaceInUse(t *testing.T) {
	ns := scratchNS(t)
	var d *Dataplane
	if err := netnstest.Run(t, ns, 10*time.Second, func() (err error) {
		d, err = New(Config{Interfaces: []Interface{{Name: "d0"}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := netnstest.Run(t, ns, 10*time.Second, func() error {
		d2, err := New(Config{Interfaces: []Interface{{Name: "d1"}, {Name: "d0"}}})
		if err == nil {
			d2.Close()
		}
		return err
	})
	if !errors.Is(err, hostlock.ErrHeld) || !strings.Contains(err.Error(), `"d0"`) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("second dataplane on d0: %v, want refused naming d0 and process %d", err, os.Getpid())
	}
	want := []string{"device intd-gso0", "device intd-gso1", "d0 filter bpf 3101", "d0 filter bpf 3101", "d0 clsact", "intd-gso1 filter bpf 3101", "intd-gso1 clsact"}
	if got := leftovers(t, ns); !sameSet(got, want) {
		t.Errorf("while the first runs: %v, want %v", got, want)
	}
	if err := netnstest.Run(t, ns, 10*time.Second, d.Close); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, ns); len(l) > 0 {
		t.Errorf("left behind after Close: %v", l)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

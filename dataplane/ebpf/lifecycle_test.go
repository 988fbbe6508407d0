package ebpf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/internal/logtest"
	"github.com/intd-project/intd/internal/netnstest"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/hostlock"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
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
	want := []string{"d0 filter bpf 3101", "d0 filter bpf 3101", "d0 clsact"}
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

// TestGSODetourOnDemand checks that the GSO detour pair exists only while
// the node is an INT endpoint: none after New, added (up, offloads as the
// detour needs them, intd_gso on the peer, named in the program's
// configuration, logged) by an apply with int-endpoint, removed (logged)
// without it and at Close; an apply it cannot be added for is refused
// naming /int/node/config/int-endpoint and changes nothing.
func TestGSODetourOnDemand(t *testing.T) {
	ns := scratchNS(t)
	var logBuf logtest.Buffer
	var d *Dataplane
	if err := netnstest.Run(t, ns, 10*time.Second, func() (err error) {
		d, err = New(Config{Interfaces: []Interface{{Name: "d0"}}, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netnstest.Run(t, ns, 10*time.Second, d.Close) })
	devices := func() []string {
		var out []string
		for _, l := range leftovers(t, ns) {
			if strings.HasPrefix(l, "device ") {
				out = append(out, strings.TrimPrefix(l, "device "))
			}
		}
		return out
	}
	if got := devices(); len(got) > 0 {
		t.Fatalf("after New without INT configured: %v", got)
	}
	o := dtel.New(d)
	apply := func(endpoint bool) error {
		dev := &gen.Device{}
		cfg := fmt.Sprintf(`{"intd-int:int": {"node": {"config": {"enabled": true, "node-id": 3, "int-endpoint": %v, "int-transit": true}}}}`, endpoint)
		if err := gen.Unmarshal([]byte(cfg), dev); err != nil {
			t.Fatal(err)
		}
		return o.Apply(context.Background(), dev)
	}
	cfg := func() intdCfg {
		var c intdCfg
		if err := d.objs.CfgMap.Lookup(uint32(0), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Transit only: no source step, no pair.
	if err := apply(false); err != nil {
		t.Fatal(err)
	}
	if got := devices(); len(got) > 0 || cfg().GsoDev != 0 {
		t.Fatalf("transit only: devices %v, program's detour %d", got, cfg().GsoDev)
	}

	if err := apply(true); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dev, err1 := h.LinkByName("intd-gso0")
	peer, err2 := h.LinkByName("intd-gso1")
	if err := cmpErr(err1, err2); err != nil {
		t.Fatalf("after int-endpoint: %v", err)
	}
	for _, l := range []netlink.Link{dev, peer} {
		if l.Type() != "veth" || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("%s: type %s, flags %v; want an up veth", l.Attrs().Name, l.Type(), l.Attrs().Flags)
		}
	}
	if c := cfg(); c.GsoDev != uint32(dev.Attrs().Index) || c.GsoPeer != uint32(peer.Attrs().Index) {
		t.Errorf("program's detour %d/%d, want %d/%d", c.GsoDev, c.GsoPeer, dev.Attrs().Index, peer.Attrs().Index)
	}
	fs, err := h.FilterList(peer, netlink.HANDLE_MIN_INGRESS)
	if err != nil || len(fs) != 1 || fs[0].(*netlink.BpfFilter).Name != "intd_gso" {
		t.Errorf("intd-gso1 ingress filters: %v %v, want intd_gso", fs, err)
	}
	if err := netnstest.Run(t, ns, 10*time.Second, func() error {
		f, err := ethtool.ActiveFeatures("intd-gso0")
		if err == nil && (f["tx-tcp-segmentation"] || f["tx-generic-segmentation"] || f["tx-checksum-ip-generic"]) {
			t.Errorf("intd-gso0: segmentation or checksum offload on: %v", f)
		}
		g, err2 := ethtool.ActiveFeatures("intd-gso1")
		if err2 == nil && g["rx-gro"] {
			t.Errorf("intd-gso1: GRO on")
		}
		return cmpErr(err, err2)
	}); err != nil {
		t.Fatal(err)
	}
	if l := logBuf.String(); !strings.Contains(l, "host setting changed") || !strings.Contains(l, "interface=intd-gso0 peer=intd-gso1") {
		t.Errorf("no host change logged for the pair:\n%s", l)
	}
	// Applied again: the same pair.
	if err := apply(true); err != nil {
		t.Fatal(err)
	}
	if got := devices(); !sameSet(got, []string{"intd-gso0", "intd-gso1"}) {
		t.Fatalf("applied twice: %v", got)
	}

	if err := apply(false); err != nil {
		t.Fatal(err)
	}
	if got := devices(); len(got) > 0 || cfg().GsoDev != 0 || cfg().GsoPeer != 0 {
		t.Fatalf("int-endpoint off: devices %v, program's detour %d/%d", got, cfg().GsoDev, cfg().GsoPeer)
	}
	if l := logBuf.String(); !strings.Contains(l, "host setting restored") || !strings.Contains(l, "removed=\"veth pair intd-gso0/intd-gso1\"") {
		t.Errorf("no restore logged for the pair:\n%s", l)
	}

	// Every detour name taken by devices not intd's (New and the apply
	// leave them be): the apply is refused and nothing changes.
	var taken []string
	for n := 0; n < 2*maxDetours; n += 2 {
		name := detourPrefix + strconv.Itoa(n)
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			t.Fatal(err)
		}
		taken = append(taken, name)
	}
	before := cfg()
	err = apply(true)
	t.Logf("with every detour name taken: %v", err)
	if err == nil || !strings.Contains(err.Error(), "/int/node/config/int-endpoint") || !strings.Contains(err.Error(), "GSO detour") {
		t.Fatalf("apply with every detour name taken: %v, want a refusal naming /int/node/config/int-endpoint", err)
	}
	if after := cfg(); after.Flags != before.Flags || after.GsoDev != 0 {
		t.Fatalf("refused apply reached the program: flags %#x -> %#x, detour %d", before.Flags, after.Flags, after.GsoDev)
	}
	if got := devices(); !sameSet(got, taken) {
		t.Fatalf("after the refused apply: %v", got)
	}
	for _, name := range taken {
		if err := h.LinkDel(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}

	// Close removes the pair.
	if err := apply(true); err != nil {
		t.Fatal(err)
	}
	if got := devices(); len(got) != 2 {
		t.Fatalf("int-endpoint on again: %v", got)
	}
	if err := netnstest.Run(t, ns, 10*time.Second, d.Close); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, ns); len(l) > 0 {
		t.Errorf("left behind after Close: %v", l)
	}
}

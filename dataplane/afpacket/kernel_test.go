//go:build linux

package afpacket

import (
	"net/netip"
	"testing"
)

// testKernel is a Kernel over two ports with a view as Sync would build
// it: 10.1.0.0/24 on port 0 (10.1.0.2 resolved), 10.2.0.0/16 via gateway
// 10.1.0.9 (not resolved), 10.3.0.0/16 via 10.1.0.2 (installed), the
// default route through an interface that is not a port, 10.4.0.0/16 a
// blackhole, 10.1.0.254 the node's own address.
func testKernel() *Kernel {
	ports := []*Port{{Name: "p0", Index: 10, MAC: [6]byte{2, 0, 0, 0, 0, 10}}, {Name: "p1", Index: 11, MAC: [6]byte{2, 0, 0, 0, 0, 11}}}
	k := NewKernel(nil, ports, nil)
	v := &kview{local: map[netip.Addr]bool{netip.MustParseAddr("10.1.0.254"): true},
		resolved: map[netip.Addr]bool{netip.MustParseAddr("10.1.0.2"): true}}
	v.v4.add(netip.MustParsePrefix("10.1.0.0/24"), vroute{kind: onLink, ifindex: 10})
	v.v4.add(netip.MustParsePrefix("10.2.0.0/16"), vroute{kind: viaPort, ifindex: 10, gw: netip.MustParseAddr("10.1.0.9")})
	v.v4.add(netip.MustParsePrefix("10.3.0.0/16"), vroute{kind: viaPort, ifindex: 10, gw: netip.MustParseAddr("10.1.0.2"), installed: true})
	v.v4.add(netip.MustParsePrefix("0.0.0.0/0"), vroute{kind: foreign})
	v.v4.add(netip.MustParsePrefix("10.4.0.0/16"), vroute{kind: foreign})
	// A route with a higher metric for the same prefix does not replace it.
	v.v4.add(netip.MustParsePrefix("10.3.0.0/16"), vroute{kind: foreign, metric: 100})
	k.view.Store(v)
	return k
}

func TestClassify(t *testing.T) {
	k := testKernel()
	mac := k.ports[0].MAC
	for _, c := range []struct {
		dst  string
		dmac [6]byte
		want Verdict
		nh   string
	}{
		{"10.1.0.2", mac, Forward, ""},
		{"10.1.0.3", mac, Hold, "10.1.0.3"},
		{"10.2.5.5", mac, Hold, "10.1.0.9"},
		{"10.3.5.5", mac, Forward, ""},
		{"10.4.5.5", mac, NoPortRoute, ""},
		{"192.0.2.1", mac, NoPortRoute, ""},
		{"10.1.0.254", mac, ToKernel, ""},
		{"224.0.0.5", mac, ToKernel, ""},
		{"10.1.0.2", [6]byte{2, 9, 9, 9, 9, 9}, ToKernel, ""}, // promiscuous
	} {
		f := udpFrame(c.dmac, [6]byte{2, 1, 1, 1, 1, 1}, netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr(c.dst), []byte("x"))
		v, nh := k.Classify(0, f)
		if v != c.want || c.nh != "" && nh != netip.MustParseAddr(c.nh) {
			t.Errorf("to %s: %v %v, want %v %s", c.dst, v, nh, c.want, c.nh)
		}
	}
	// Resolution requests went to the kernel's queue.
	if n := len(k.resolve); n != 2 {
		t.Errorf("%d resolution requests, want 2", n)
	}
}

func TestClassifyAllocs(t *testing.T) {
	k := testKernel()
	frames := [][]byte{}
	for _, d := range []string{"10.1.0.2", "10.3.5.5", "192.0.2.1", "10.1.0.3"} {
		frames = append(frames, udpFrame(k.ports[0].MAC, [6]byte{2, 1, 1, 1, 1, 1}, netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr(d), []byte("x")))
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			k.Classify(0, f)
		}
	}); n != 0 {
		t.Errorf("%v allocations per run", n)
	}
}

package ebpf

import (
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/internal/netnstest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// kernelLinked reports whether the kernel has a link of program p.
func kernelLinked(t *testing.T, p *ebpf.Program) bool {
	t.Helper()
	pi, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := pi.ID()
	it := new(link.Iterator)
	defer it.Close()
	found := false
	for it.Next() {
		if li, err := it.Link.Info(); err == nil && li.Program == id {
			found = true
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestTracersFollowConfig checks that the host-wide tracing programs are
// attached only while the configuration uses them: intd_xmit (queueing
// delay) never runs for another namespace's traffic without an INT
// function that needs it, runs once one does, and stops again after.
func TestTracersFollowConfig(t *testing.T) {
	ns := scratchNS(t)
	// Traffic of a namespace intd has nothing to do with.
	other, oh := netnstest.New(t)
	netnstest.Veth(t, oh, [2]string{"o0", "o1"})
	// Only o0 has an address: with o1's in the same subnet too, the
	// kernel could route the datagrams out of o1, where the neighbour is
	// unresolved and its queue holds them (no transmit, no tracepoint).
	o0, err := oh.LinkByName("o0")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.77.0.1/24")
	if err := oh.AddrAdd(o0, addr); err != nil {
		t.Fatal(err)
	}
	// A neighbour that is not there: the datagrams leave o0 for it.
	if err := oh.NeighAdd(&netlink.Neigh{LinkIndex: o0.Attrs().Index, State: netlink.NUD_PERMANENT, Family: unix.AF_INET,
		IP: net.IPv4(10, 77, 0, 3), HardwareAddr: net.HardwareAddr{0x02, 0, 0, 0, 0x77, 3}}); err != nil {
		t.Fatal(err)
	}
	// Until the pair has carrier, o0's qdisc holds what is sent and
	// nothing reaches the driver (the tracepoint).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := oh.LinkByName("o0")
		if err == nil && l.Attrs().OperState == netlink.OperUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("o0 has no carrier: %v", err)
		}
	}
	// send returns how many datagrams left o0 (a busy machine may leave
	// the socket's buffer full for a while: the sender gives up after 2s).
	send := func() uint64 {
		t.Helper()
		var sent uint64
		if err := netnstest.Run(t, other, 10*time.Second, func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 77, 0, 3), Port: 9})
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			for range 2000 {
				if _, err := c.Write(make([]byte, 64)); err == nil {
					sent++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if sent < 100 {
			t.Fatalf("only %d datagrams sent", sent)
		}
		return sent
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()

	var d *Dataplane
	if err := netnstest.Run(t, ns, 10*time.Second, func() (err error) {
		d, err = New(Config{Interfaces: []Interface{{Name: "d0"}}, NoGSODetour: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer netnstest.Run(t, ns, 10*time.Second, d.Close)
	runs := func() uint64 {
		s, err := d.objs.IntdXmit.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.RunCount
	}
	check := func(when string, xmit, drop bool) {
		t.Helper()
		if got := kernelLinked(t, d.objs.IntdXmit); got != xmit {
			t.Errorf("%s: intd_xmit linked %v, want %v", when, got, xmit)
		}
		if got := kernelLinked(t, d.objs.IntdKfreeSkb); got != drop {
			t.Errorf("%s: intd_kfree_skb linked %v, want %v", when, got, drop)
		}
		n0 := runs()
		t0 := time.Now()
		sent := send()
		t.Logf("%s: %d sent in %v", when, sent, time.Since(t0))
		if n := runs() - n0; xmit != (n >= sent) || !xmit && n != 0 {
			t.Errorf("%s: intd_xmit ran %d times for %d packets of another namespace", when, n, sent)
		}
	}
	check("no configuration", false, false)

	dtel := func(f func(a *sai.DTelAttrs)) sai.DTelAttrs {
		a := sai.DefaultDTelAttrs()
		f(&a)
		return a
	}
	dt, err := d.Create(dtel(func(a *sai.DTelAttrs) { a.IntEndpointEnable, a.DropReportEnable = true, true }))
	if err != nil {
		t.Fatal(err)
	}
	check("drop reports only", false, true)

	sa := sai.DefaultIntSessionAttrs()
	sa.Instructions = spec.InstNodeID | spec.InstQueue
	sess, err := d.Create(sa)
	if err != nil {
		t.Fatal(err)
	}
	check("a session without time", false, true)

	timed := sa
	timed.Instructions = spec.InstNodeID | spec.InstHopLatency
	for _, st := range []struct {
		when       string
		do         func() error
		fails      bool
		xmit, drop bool
	}{
		{"a session with hop latency", func() error { return d.Set(sess, timed) }, false, true, true},
		{"a failed apply", func() error {
			return d.Set(dt, dtel(func(a *sai.DTelAttrs) { a.IntEndpointEnable, a.SinkPortList = true, []string{"nosuch"} }))
		}, true, true, true},
		{"drop reports off", func() error { return d.Set(dt, dtel(func(a *sai.DTelAttrs) { a.IntEndpointEnable = true })) }, false, true, true},
		{"the session removed", func() error { return d.Remove(sess) }, false, false, false},
		{"transit", func() error { return d.Set(dt, dtel(func(a *sai.DTelAttrs) { a.IntTransitEnable = true })) }, false, true, true},
		{"everything removed", func() error { return d.Remove(dt) }, false, false, false},
	} {
		if err := st.do(); (err != nil) != st.fails {
			t.Fatalf("%s: %v", st.when, err)
		}
		check(st.when, st.xmit, st.drop)
	}
}

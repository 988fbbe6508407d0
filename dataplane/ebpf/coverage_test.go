package ebpf

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestBehaviourMore: NPT 2 source and sink, INT-MX transit and postcards,
// through both backends (the ebpf output must equal soft's), with the
// report events they generate.
func TestBehaviourMore(t *testing.T) {
	behaviourMore(t, tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world")))
}

// TestBehaviourMoreIPv6 is TestBehaviourMore on IPv6.
func TestBehaviourMoreIPv6(t *testing.T) {
	behaviourMore(t, tcpFrame("2001:db8:1::1", "2001:db8:2::1", 1234, 80, 0, []byte("hello, INT world")))
}

func behaviourMore(t *testing.T, tcp80 []byte) {
	npt2 := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTIPProto
	}
	mx := sai.IntSessionAttrs{Mode: sai.IntModeMX, Instructions: detInst}
	mxIn := insertINT(t, tcp80, mx, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
	npt2In := func() []byte {
		// What an NPT 2 source (either backend) sends.
		n := nodes(t, setup{sess: &mdSession, match: port80(), dt: npt2})
		return n[0].process(t, bytes.Clone(tcp80))
	}()
	postcard := setup{sess: &mdSession, match: port80(), noEntry: true}
	cases := []struct {
		name   string
		s      setup
		entry  *sai.WatchlistAction
		in     []byte
		want   []byte
		events int
	}{
		{"source MD over TCP with NPT 2 (UDP header added)", setup{sess: &mdSession, match: port80(), dt: npt2}, nil, tcp80, npt2In, 0},
		{"sink of NPT 2 removes the UDP header", setup{sink: true, dt: npt2}, nil, pushHop2(t, npt2In), tcp80, 1},
		{"transit leaves INT-MX unchanged and reports", setup{}, nil, mxIn, mxIn, 1},
		{"sink strips INT-MX", setup{sink: true}, nil, mxIn, tcp80, 1},
		{"postcard: packet unchanged, one report", postcard, &sai.WatchlistAction{FlowOp: sai.FlowOpPostcard, FlowSamplePercent: 100}, tcp80, tcp80, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pkts [][]byte
			for _, n := range nodes(t, c.s) {
				if c.entry != nil {
					if _, err := n.Create(sai.WatchlistEntryAttrs{Priority: 10, Match: port80(), Action: *c.entry}); err != nil {
						t.Fatal(err)
					}
				}
				got := n.process(t, bytes.Clone(c.in))
				if c.want != nil && !bytes.Equal(got, c.want) {
					t.Errorf("%s:\n got %x\nwant %x", n.name(), got, c.want)
				}
				rec := recorderOf(n)
				evs := rec.wait(t, c.events)
				if c.events == 0 {
					time.Sleep(20 * time.Millisecond)
					evs = rec.wait(t, 0)
				}
				if len(evs) != c.events {
					t.Fatalf("%s: %d events, want %d: %+v", n.name(), len(evs), c.events, evs)
				}
				for _, ev := range evs {
					pkts = append(pkts, ev.Packet)
				}
			}
			if len(pkts) == 2 && !bytes.Equal(pkts[0], pkts[1]) {
				t.Errorf("reported frames differ:\nsoft %x\nebpf %x", pkts[0], pkts[1])
			}
		})
	}
}

// pushHop2 is a transit hop on an NPT 2 (UDP port) packet, done by wire.
func pushHop2(t testing.TB, f []byte) []byte {
	t.Helper()
	g := make([]byte, len(f), len(f)+256)
	copy(g, f)
	var p wire.Packet
	if err := (&wire.Parser{UDPPort: 5000}).Parse(g, &p); err != nil || p.INT < 0 {
		t.Fatalf("NPT 2 frame does not parse: %v", err)
	}
	m := testHop(2)
	out, err := wire.PushHop(g, &p, &m, wire.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// onCPU pins the calling goroutine's thread to CPU 0 until undo: the
// ingress slot is per CPU, so ingress and egress test runs must share it.
func onCPU(t testing.TB) (undo func()) {
	runtime.LockOSThread()
	var old, one unix.CPUSet
	_ = unix.SchedGetaffinity(0, &old)
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	return func() { _ = unix.SchedSetaffinity(0, &old); runtime.UnlockOSThread() }
}

// TestQueueReportQuota: the latency threshold and breach quota applied in
// BPF: a breach sends BreachQuota reports, the packet ending it one more,
// and the next breach gets a fresh quota.
func TestQueueReportQuota(t *testing.T) {
	n := newBPFNode(t)
	n.in = 1 // lo, where intd_ingress runs: the latency is measured
	n.setMTU(1500)
	setup{dt: func(a *sai.DTelAttrs) { a.QueueReportEnable = true }}.apply(t, n)
	qr, err := n.Create(sai.QueueReportAttrs{Port: "lo", LatencyThreshold: 2, ResetThreshold: 1, BreachQuota: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := tcpFrame("10.0.1.1", "10.0.2.1", 1, 81, 0, []byte("queued"))
	defer onCPU(t)()
	// Ingress then egress: a latency is measured, above 2 ns.
	slow := func() {
		runProg(t, n.objs.IntdIngress, bytes.Clone(f))
		n.process(t, bytes.Clone(f))
	}
	// Egress alone: no latency, the breach ends.
	g := tcpFrame("10.0.1.1", "10.0.2.1", 1, 81, 0, []byte("not queued"))
	calm := func() { n.process(t, bytes.Clone(g)) }
	for i := 0; i < 5; i++ {
		slow()
	}
	calm()
	slow()
	evs := n.rec.wait(t, 5)
	st, _ := n.Stats(t.Context())
	q := st.QueueReports[qr]
	if q.Breaches != 2 || q.Reports != 4 || q.QuotaLeft != 2 {
		t.Errorf("queue report stats %+v, want 2 breaches, 4 reports, quota left 2", q)
	}
	if len(evs) != 5 {
		t.Fatalf("%d events, want 3 + breach end + 1", len(evs))
	}
	for i, ev := range evs {
		if ev.Kind != report.KindQueue || !ev.Unwatched || ev.Hop.Valid&spec.InstHopLatency == 0 && i != 3 {
			t.Errorf("event %d: kind %v unwatched %v valid %v", i, ev.Kind, ev.Unwatched, ev.Hop.Valid)
		}
	}
}

// dropLab is newLab with r1 (INT source, drop reports for its watched flow)
// and r2 (transit, drop reports) running the dataplane, reporting to
// recorders.
func dropConfig(node int, source bool) string {
	wl := ""
	if source {
		wl = `"watchlist": {"entries": {"entry": [{"sequence-id": 10,
			"config": {"sequence-id": 10},
			"match": {"config": {"source-prefix": "10.0.1.0/24", "destination-prefix": "10.0.2.0/24"}},
			"actions": {"config": {"flow-op": "INT", "int-session": "default", "sample-percent": 100, "drop-report": true}}}]}},`
	}
	return fmt.Sprintf(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true, "drop-report": true}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63, "vxlan-gpe-next-protocol": 0, "geneve-option-class": 0}},
	%s
	"int-sessions": {"int-session": [{"name": "default", "config": {"name": "default", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"], "remaining-hop-count": 8}}]}
}}`, node, wl)
}

// TestDropReports: the kfree_skb tracepoint reports kernel drops: a
// routing miss (29) of a watched flow at the source and of an INT packet at
// a transit node, and TTL expiry (26) at a transit node.
func TestDropReports(t *testing.T) {
	l := newLab(t)
	rec1, rec2 := &recorder{}, &recorder{}
	l.router(t, "r1", []string{"r1-h1", "r1-r2"}, rec1, dropConfig(1, true))
	l.router(t, "r2", []string{"r2-r1", "r2-r3"}, rec2, dropConfig(2, false))
	var c *net.UDPConn
	if err := l.in("h1", func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 1, 2), Port: 4000}, &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 9})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func() { _, _ = c.Write([]byte("drop me")) }
	drops := func(r *recorder, reason uint8) func() int {
		return func() int {
			n := 0
			for _, ev := range r.wait(t, 0) {
				if ev.Kind == report.KindDrop && ev.DropReason == reason {
					n++
				}
			}
			return n
		}
	}
	wait := func(what string, f func() int) {
		t.Helper()
		for end := time.Now().Add(3 * time.Second); f() == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("no %s", what)
			}
			send()
		}
	}
	send() // the flow passes r1 and r2 once: r1 watches it for drops
	time.Sleep(50 * time.Millisecond)

	l.exec(t, "r2", "ip", "route", "del", "default")
	wait("routing-miss drop report (29) of an INT packet at r2", drops(rec2, 29))
	l.exec(t, "r2", "ip", "route", "add", "default", "via", "10.0.23.2")

	if err := ipv4.NewConn(c).SetTTL(2); err != nil { // expires at r2
		t.Fatal(err)
	}
	wait("TTL drop report (26) at r2", drops(rec2, 26))
	_ = ipv4.NewConn(c).SetTTL(64)

	l.exec(t, "r1", "ip", "route", "del", "default")
	wait("routing-miss drop report (29) of a watched flow at r1", drops(rec1, 29))
	ev := rec1.wait(t, 1)[len(rec1.wait(t, 1))-1]
	if ev.Unwatched || ev.Flow.DstPort != 9 || ev.Hop.NodeID != 1 {
		t.Errorf("r1 drop event: %+v", ev)
	}
	for i, r := range []*recorder{rec1, rec2} {
		for _, ev := range r.wait(t, 0) {
			if ev.Kind == report.KindDrop && ev.DropReason != 29 && ev.DropReason != 26 {
				t.Errorf("r%d: drop reason %d: %+v %x", i+1, ev.DropReason, ev.Hop, ev.Packet)
			}
		}
	}
}

// TestQueueReportRateLimit: within one second, the BPF program passes at
// most the queue's rate limit of reports, whatever the quota left.
func TestQueueReportRateLimit(t *testing.T) {
	n := newBPFNode(t)
	n.in = 1 // lo, where intd_ingress runs: the latency is measured
	n.setMTU(1500)
	setup{dt: func(a *sai.DTelAttrs) { a.QueueReportEnable = true }}.apply(t, n)
	qr, err := n.Create(sai.QueueReportAttrs{Port: "lo", LatencyThreshold: 2, ResetThreshold: 1, BreachQuota: 100, RateLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := tcpFrame("10.0.1.1", "10.0.2.1", 1, 81, 0, []byte("queued"))
	defer onCPU(t)()
	for i := 0; i < 8; i++ {
		runProg(t, n.objs.IntdIngress, bytes.Clone(f))
		n.process(t, bytes.Clone(f))
	}
	evs := n.rec.wait(t, 4)
	st, _ := n.Stats(t.Context())
	if q := st.QueueReports[qr]; q.Breaches != 1 || q.Reports != 3 || q.QuotaLeft != 97 {
		t.Errorf("queue report stats %+v, want 1 breach, 3 reports, quota left 97", q)
	}
	if len(evs) != 3 {
		t.Errorf("%d events, want 3", len(evs))
	}
}

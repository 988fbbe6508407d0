package report

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

func TestSteadyFlowOneReportPerInterval(t *testing.T) {
	p, c := newTest(t, baseConfig(1))
	f := newFrame(1, []uint32{1, 2}, []uint32{500, 600})
	var ev Event
	for now := int64(0); now < 3500*ms; now += ms { // 3500 packets, 1 per ms
		f.event(&ev, now, 1000+uint32(now/ms%100)) // jitter < 256 ns
		p.Report(&ev)
	}
	st := p.Stats()
	reps := finish(t, p, c)
	if len(reps) != 4 { // t = 0, 1s, 2s, 3s
		t.Fatalf("got %d reports for a steady flow over 3.5 s, want 4", len(reps))
	}
	if st.ByType[spec.EventFlowState].Suppressed != 3496 {
		t.Errorf("suppressed %d, want 3496", st.ByType[spec.EventFlowState].Suppressed)
	}
	if st.Filter.New != 1 || st.Filter.Interval != 3 {
		t.Errorf("filter reasons %+v", st.Filter)
	}
	for _, r := range reps {
		if !r.hdr.TrackedFlow || r.hdr.Dropped || r.hdr.Congested || r.group.NodeID != 99 || r.group.HWID != 3 {
			t.Errorf("bad report header %+v group %+v", r.hdr, r.group)
		}
		// The stack asks for node id and hop latency: the report header
		// carries the sink's hop latency alone (the node id is in the
		// group header).
		if r.hdr.RepMdBits != wire.RepHopLatency || r.md.HopLatency < 1000 || r.md.HopLatency >= 1100 {
			t.Errorf("RepMdBits %#x metadata %+v", r.hdr.RepMdBits, r.md)
		}
		// The sink's INT stack is in the truncated packet.
		if !bytes.Equal(r.inner[:len(f.buf)], f.buf) {
			t.Errorf("inner packet differs")
		}
	}
}

func TestPathChangeAndLatencyJump(t *testing.T) {
	p, c := newTest(t, baseConfig(1))
	f := newFrame(7, []uint32{1, 2, 3}, []uint32{500, 600, 700})
	var ev Event
	now := int64(0)
	step := func(lat uint32) int {
		before := p.Stats().ByType[spec.EventFlowState].Generated
		now += ms
		f.event(&ev, now, lat)
		p.Report(&ev)
		return int(p.Stats().ByType[spec.EventFlowState].Generated - before)
	}
	if step(1000) != 1 {
		t.Fatal("first packet not reported")
	}
	if step(1100) != 0 || step(900) != 0 {
		t.Fatal("jitter below threshold reported")
	}
	f.setNode(1, 22) // path change in the middle of the stack
	if step(1000) != 1 {
		t.Fatal("path change not reported at once")
	}
	if step(1000) != 0 {
		t.Fatal("unchanged path reported again")
	}
	f.setLat(2, 700+256) // an upstream hop's latency jump
	if step(1000) != 1 {
		t.Fatal("upstream hop latency jump not reported")
	}
	if step(1000+256) != 1 { // this node's latency jump
		t.Fatal("own hop latency jump not reported")
	}
	// A slow drift adds up: 100 ns per packet, reported once it reaches 256.
	got := 0
	for i := 1; i <= 5; i++ {
		got += step(1256 + uint32(i)*100)
	}
	if got != 1 { // at +300 ns
		t.Fatalf("drift of 500 ns in 100 ns steps gave %d reports, want 1", got)
	}
	// Port and queue changes.
	now += ms
	f.event(&ev, now, 1756)
	ev.Hop.EgressPort = 3
	p.Report(&ev)
	now += ms
	f.event(&ev, now, 1756)
	ev.Hop.EgressPort = 3
	ev.Hop.QueueID = 5
	p.Report(&ev)
	// The stack growing by one hop is a path change too (and the port
	// and queue go back).
	f.build([]uint32{9, 1, 22, 3}, []uint32{1, 500, 600, 956})
	if step(1756) != 1 {
		t.Fatal("longer path not reported")
	}
	st := p.Stats()
	reps := finish(t, p, c)
	if st.Filter.Path != 2 || st.Filter.Latency != 4 || st.Filter.Port != 2 || st.Filter.Queue != 2 {
		t.Errorf("reasons %+v", st.Filter)
	}
	if len(reps) != 8 {
		t.Errorf("%d reports, want 8", len(reps))
	}
}

func TestReportAllAndClearCycle(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Filter.ClearCycle = 100 * time.Millisecond
	p, c := newTest(t, cfg)
	f := newFrame(1, []uint32{1}, []uint32{10})
	var ev Event
	for i := int64(0); i < 10; i++ {
		f.event(&ev, i*ms, 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	for i := int64(0); i < 300; i++ { // clear cycle every 100 ms: reported at 0, 100, 200 ms
		f.event(&ev, 1000*ms+i*ms, 10)
		p.Report(&ev)
	}
	st := p.Stats()
	finish(t, p, c)
	if g := st.ByType[spec.EventFlowReportAllPackets].Generated; g != 10 {
		t.Errorf("report-all generated %d, want 10", g)
	}
	if g := st.ByType[spec.EventFlowState].Generated; g != 3 {
		t.Errorf("flow state with clear cycle generated %d, want 3", g)
	}
}

func TestTCPFlagEvent(t *testing.T) {
	p, c := newTest(t, baseConfig(1))
	f := newFrame(1, nil, nil)
	var ev Event
	for i := int64(0); i < 10; i++ {
		f.event(&ev, i*ms, 10)
		ev.Flow.Proto = wire.ProtoTCP
		if i == 5 {
			ev.TCPFlags = tcpFIN
		}
		p.Report(&ev)
	}
	st := p.Stats()
	finish(t, p, c)
	if st.ByType[spec.EventFlowState].Generated != 1 || st.ByType[spec.EventFlowTCPFlag].Generated != 1 {
		t.Errorf("flow state %+v, tcp flag %+v", st.ByType[spec.EventFlowState], st.ByType[spec.EventFlowTCPFlag])
	}
}

func TestDropReports(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Events[spec.EventQueueReportTailDrop] = Route{Session: "s", DSCP: 9}
	cfg.Queues = []QueueReport{{Port: 4, Queue: 1, TailDrop: true}}
	p, c := newTest(t, cfg)
	a, b := newFrame(1, []uint32{1}, []uint32{10}), newFrame(2, []uint32{1}, []uint32{10})
	var ev Event
	drop := func(f *testFrame, now int64, reason uint8) {
		f.event(&ev, now, 10)
		ev.Kind, ev.DropReason = KindDrop, reason
		p.Report(&ev)
	}
	for i := int64(0); i < 100; i++ { // 100 drops per flow within 100 ms: one report each
		drop(a, i*ms, 29)
		drop(b, i*ms, 29)
	}
	drop(a, 200*ms, 160) // the drop reason changed: reported
	drop(a, 1200*ms, 160)
	// Tail drops: not reported unless enabled.
	tail := func(f *testFrame, now int64, enable, unwatched bool, port uint16) {
		f.event(&ev, now, 10)
		ev.Kind, ev.DropReason, ev.TailDrop, ev.TailDropReport, ev.Unwatched = KindDrop, 71, true, enable, unwatched
		ev.Hop.EgressPort, ev.Hop.QueueID = port, 1
		p.Report(&ev)
	}
	c3 := newFrame(3, nil, nil)
	tail(c3, 0, false, false, 2)
	tail(c3, 2000*ms, false, true, 2)
	if g := p.Stats().ByType[spec.EventDropReport].Generated; g != 4 {
		t.Fatalf("tail drops reported without being enabled (%d drop reports)", g)
	}
	tail(c3, 3000*ms, true, false, 2) // watchlist tail-drop reporting
	tail(newFrame(4, nil, nil), 3000*ms, false, true, 4)
	st := p.Stats()
	reps := finish(t, p, c)
	if len(reps) != 6 {
		t.Fatalf("%d reports, want 6", len(reps))
	}
	if st.ByType[spec.EventDropReport].Generated != 5 || st.ByType[spec.EventQueueReportTailDrop].Generated != 1 {
		t.Errorf("counters %+v", st.ByType)
	}
	if st.ByType[spec.EventDropReport].Suppressed != 198 {
		t.Errorf("suppressed %d, want 198", st.ByType[spec.EventDropReport].Suppressed)
	}
	if st.Filter.DropCause != 1 {
		t.Errorf("drop-cause changes counted %d, want 1 (29 -> 160)", st.Filter.DropCause)
	}
	for i, r := range reps {
		if !r.hdr.Dropped || r.hdr.RepMdBits&wire.RepDrop == 0 {
			t.Errorf("report %d: D %v RepMdBits %#x", i, r.hdr.Dropped, r.hdr.RepMdBits)
		}
	}
	if reps[0].md.DropReason != 29 || reps[2].md.DropReason != 160 || reps[4].md.DropReason != 71 {
		t.Errorf("drop reasons %d %d %d", reps[0].md.DropReason, reps[2].md.DropReason, reps[4].md.DropReason)
	}
	q := reps[5]
	if q.pkt.DSCP != 9 || !q.hdr.Congested || q.hdr.TrackedFlow || q.md.DropQueueID != 1 {
		t.Errorf("queue tail drop report: dscp %d hdr %+v md %+v", q.pkt.DSCP, q.hdr, q.md)
	}
}

func TestQueueReportsQuota(t *testing.T) {
	cfg := baseConfig(8)
	cfg.Queues = []QueueReport{{Port: 2, Queue: 3, LatencyThreshold: 2000, ResetThreshold: 500, Quota: 10}}
	p, c := newTest(t, cfg)
	var ev Event
	now := int64(0)
	pkt := func(flow int, lat uint32) {
		now += 1000
		f := newFrame(flow, nil, nil)
		f.event(&ev, now, lat)
		ev.Kind, ev.Unwatched = KindQueue, flow%2 == 0
		ev.Hop.EgressPort, ev.Hop.QueueID = 2, 3
		p.Report(&ev)
	}
	for i := 0; i < 50; i++ {
		pkt(i, 100) // below the trigger: nothing
	}
	for i := 0; i < 100; i++ { // burst: latency rises above the trigger
		pkt(i, 1500+uint32(i)*100)
	}
	for i := 0; i < 30; i++ { // drains, but stays above reset: quota stays spent
		pkt(i, 1000)
	}
	st := p.Stats()
	if q := st.Queues[0]; q.Breaches != 1 || q.Reports != 10 || q.QuotaLeft != 0 || !q.Breached {
		t.Fatalf("after the burst: %+v", q)
	}
	pkt(0, 400) // below reset: quota refills
	if q := p.Stats().Queues[0]; q.QuotaLeft != 10 || q.Breached {
		t.Fatalf("after draining: %+v", q)
	}
	for i := 0; i < 20; i++ { // second burst
		pkt(i, 3000)
	}
	// A queue without configuration is never reported.
	f := newFrame(1, nil, nil)
	f.event(&ev, now, 1e6)
	ev.Kind, ev.Hop.EgressPort, ev.Hop.QueueID = KindQueue, 2, 4
	p.Report(&ev)
	st = p.Stats()
	reps := finish(t, p, c)
	if q := st.Queues[0]; q.Breaches != 2 || q.Reports != 20 {
		t.Fatalf("after the second burst: %+v", q)
	}
	if len(reps) != 20 {
		t.Fatalf("%d queue reports, want 20", len(reps))
	}
	for i, r := range reps {
		if !r.hdr.Congested || r.md.QueueID != 3 || r.md.HopLatency < 2000 {
			t.Errorf("report %d: %+v %+v", i, r.hdr, r.md)
		}
		flow := int(r.inner[29]) // low byte of the source address
		if r.hdr.TrackedFlow != (flow%2 == 1) {
			t.Errorf("report %d: F %v for flow %d", i, r.hdr.TrackedFlow, flow)
		}
	}
}

func TestDepthTrigger(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Queues = []QueueReport{{Port: 2, Queue: 0, DepthThreshold: 10000, Quota: 3}}
	p, c := newTest(t, cfg)
	var ev Event
	for i, d := range []uint32{100, 10000, 12000, 9000, 8000, 6000, 4000, 20000} {
		newFrame(1, nil, nil).event(&ev, int64(i), 0)
		ev.Kind, ev.Hop.EgressPort, ev.Hop.QueueOccupancy = KindQueue, 2, d
		p.Report(&ev)
	}
	st := p.Stats()
	finish(t, p, c)
	if q := st.Queues[0]; q.Breaches != 2 || q.Reports != 4 || q.Suppressed != 2 {
		t.Errorf("%+v", q)
	}
}

func TestCoalescingSequenceTruncation(t *testing.T) {
	cfg := baseConfig(10)
	cfg.Sessions[0].Collectors = append(cfg.Sessions[0].Collectors, Collector{coll2})
	cfg.Sessions[0].TruncateSize = 64
	p, c := newTest(t, cfg)
	f := newFrame(1, []uint32{1, 2, 3, 4}, []uint32{1, 2, 3, 4})
	var ev Event
	for i := 0; i < 95; i++ {
		f.setID(1, uint32(i))
		f.event(&ev, int64(i), 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	p.Flush()
	reps := finish(t, p, c)
	if len(reps) != 190 {
		t.Fatalf("%d reports, want 95 per collector", len(reps))
	}
	seqs := map[string][]uint32{}
	for _, pk := range c.Packets() {
		seqs[pk.Dst.String()] = append(seqs[pk.Dst.String()], pk.Seq)
		if pk.Reports > 10 {
			t.Errorf("packet with %d reports", pk.Reports)
		}
	}
	for d, s := range seqs {
		if len(s) != 10 {
			t.Errorf("%s: %d packets, want 10", d, len(s))
		}
		for i, q := range s {
			if q != uint32(i) {
				t.Fatalf("%s: sequence %v not gap-free", d, s)
			}
		}
	}
	for i, r := range reps {
		if len(r.inner) != 64 || !bytes.Equal(r.inner, f.buf[:64]) {
			t.Fatalf("report %d: inner %d bytes, want the first 64", i, len(r.inner))
		}
		if r.group.Seq != r.pkt.Seq {
			t.Fatalf("group header seq %d, packet %d", r.group.Seq, r.pkt.Seq)
		}
	}
}

func TestCoalescingMTUAndDelay(t *testing.T) {
	cfg := baseConfig(100)
	cfg.Sessions[0].MTU = 576
	cfg.Sessions[0].MaxDelay = 5 * time.Millisecond
	p, c := newTest(t, cfg)
	var ev Event
	for i := 0; i < 40; i++ {
		f := newFrame(i, []uint32{1}, []uint32{1})
		f.setID(i, uint32(i))
		f.event(&ev, int64(i)*ms/10, 10) // 40 reports in 4 ms
		p.Report(&ev)
	}
	pending := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.routes[spec.EventFlowState].bs[0].n }
	p.Tick(3 * ms) // not yet due
	n := pending()
	p.Tick(20 * ms)
	if n != 5 || pending() != 0 {
		t.Errorf("pending %d before max delay, %d after", n, pending())
	}
	reps := finish(t, p, c)
	if len(reps) != 40 {
		t.Fatalf("%d reports", len(reps))
	}
	max := 576 - 28
	pk := c.Packets()
	for _, x := range pk {
		if len(x.Payload) > max {
			t.Errorf("payload %d exceeds %d", len(x.Payload), max)
		}
	}
	if len(pk) != 8 { // 5 reports of 100 bytes per 548-byte payload
		t.Errorf("%d packets", len(pk))
	}
	for i, r := range reps {
		if fl, id, ok := innerID(r.inner, 1); !ok || fl != i || id != uint32(i) {
			t.Fatalf("report %d is flow %d id %d", i, fl, id)
		}
	}
}

func TestMTUShortensInner(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Sessions[0].MTU = 576
	cfg.Sessions[0].TruncateSize = 2000
	p, c := newTest(t, cfg)
	big := make([]byte, 1400)
	ev := Event{Kind: KindFlow, Packet: big, INT: -1, ReportAll: true}
	p.Report(&ev)
	st := p.Stats()
	reps := finish(t, p, c)
	if len(reps) != 1 || len(c.Packets()[0].Payload) > 576-28 || st.Sessions["s"].Truncated != 1 {
		t.Fatalf("reports %d, payload %d, truncated %d", len(reps), len(c.Packets()[0].Payload), st.Sessions["s"].Truncated)
	}
}

func TestV05Format(t *testing.T) {
	cfg := baseConfig(0)
	cfg.Sessions[0].Format = spec.ReportFormatV05
	p, c := newTest(t, cfg)
	f := newFrame(1, []uint32{1}, []uint32{1})
	var ev Event
	f.event(&ev, 5, 10)
	ev.Hop.IngressTimestamp, ev.Hop.Valid = 12345, ev.Hop.Valid|spec.InstIngressTimestamp
	p.Report(&ev)
	f.event(&ev, 6, 10)
	ev.Kind, ev.DropReason, ev.Hop.QueueID = KindDrop, 29, 2
	p.Report(&ev)
	p.Close()
	pk := c.Packets()
	if len(pk) != 2 {
		t.Fatalf("%d packets", len(pk))
	}
	for i, x := range pk {
		r, err := wire.DecodeTR05(x.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if r.Header.Seq != uint32(i) || r.Header.HWID != 3 || r.Switch.SwitchID != 99 || !r.Header.TrackedFlow {
			t.Errorf("packet %d: %+v", i, r)
		}
		if !bytes.Equal(r.Inner, f.buf) {
			t.Errorf("packet %d: inner differs", i)
		}
		if i == 0 && (r.Header.NextProto != spec.TR05Local || r.Header.IngressTimestamp != 12345 || r.Switch.EgressPort != 2) {
			t.Errorf("local report %+v", r)
		}
		if i == 1 && (r.Header.NextProto != spec.TR05Drop || !r.Header.Dropped || r.Switch.DropReason != 29 || r.Switch.QueueID != 2) {
			t.Errorf("drop report %+v", r)
		}
	}
}

func TestEventRouting(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Sessions = nil
	for e := EventType(1); e < spec.NumEventTypes; e++ {
		cfg.Sessions = append(cfg.Sessions, Session{Name: e.String(), Src: srcIP, TruncateSize: 128,
			Collectors: []Collector{{coll1}, {wireAddr(int(e))}}})
		cfg.Events[e] = Route{Session: e.String(), DSCP: uint8(10 + e)}
	}
	cfg.Queues = []QueueReport{{Port: 2, Queue: 0, LatencyThreshold: 100, TailDrop: true}}
	p, c := newTest(t, cfg)
	var ev Event
	f := newFrame(1, nil, nil)
	f.flow.Proto = wire.ProtoTCP
	f.event(&ev, 0, 10)
	p.Report(&ev) // FLOW_STATE
	f.event(&ev, 1, 10)
	ev.ReportAll = true
	p.Report(&ev) // FLOW_REPORT_ALL_PACKETS
	f.event(&ev, 2, 10)
	ev.TCPFlags = tcpSYN
	p.Report(&ev) // FLOW_TCPFLAG (the filter suppresses the flow-state report)
	f.event(&ev, 3, 1000)
	ev.Kind = KindQueue
	p.Report(&ev) // QUEUE_REPORT_THRESHOLD_BREACH
	f.event(&ev, 4, 10)
	ev.Kind, ev.TailDrop, ev.DropReason = KindDrop, true, 71
	p.Report(&ev) // QUEUE_REPORT_TAIL_DROP
	f.event(&ev, 5, 10)
	ev.Kind, ev.DropReason = KindDrop, 29
	p.Report(&ev) // DROP_REPORT
	reps := finish(t, p, c)
	if len(reps) != 12 {
		t.Fatalf("%d reports, want 6 per collector", len(reps))
	}
	per := map[string]int{}
	for i, r := range reps {
		var e EventType
		for e = 1; e < spec.NumEventTypes && e.String() != r.pkt.Session; e++ {
		}
		per[r.pkt.Session]++
		if r.pkt.DSCP != uint8(10+e) || r.pkt.Src != srcIP || (r.pkt.Dst != coll1 && r.pkt.Dst != wireAddr(int(e))) {
			t.Errorf("report %d: session %q dscp %d to %v", i, r.pkt.Session, r.pkt.DSCP, r.pkt.Dst)
		}
	}
	for e := EventType(1); e < spec.NumEventTypes; e++ {
		if per[e.String()] != 2 {
			t.Errorf("%v: %d reports, want 2", e, per[e.String()])
		}
	}
	// coll1 is shared by all sessions: one sequence for it.
	var seq []uint32
	for _, x := range c.Packets() {
		if x.Dst == coll1 {
			seq = append(seq, x.Seq)
		}
	}
	for i, s := range seq {
		if s != uint32(i) {
			t.Fatalf("shared collector sequence %v", seq)
		}
	}
}

func TestConfigureKeepsSequenceAndState(t *testing.T) {
	cfg := baseConfig(1)
	p, c := newTest(t, cfg)
	var ev Event
	f := newFrame(1, nil, nil)
	for i := 0; i < 5; i++ {
		f.event(&ev, int64(i), 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	cfg2 := baseConfig(4)
	cfg2.Sessions[0].MaxDelay = 0
	cfg2.Events[spec.EventFlowReportAllPackets] = Route{Session: "s", DSCP: 46}
	if err := p.Configure(cfg2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.event(&ev, int64(10+i), 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	f.event(&ev, 20, 10)
	p.Report(&ev)                             // flow state: new flow
	if err := p.Configure(cfg2); err != nil { // pending reports go out, not lost
		t.Fatal(err)
	}
	f.event(&ev, 30, 10)
	p.Report(&ev) // flow state kept: suppressed
	st := p.Stats()
	reps := finish(t, p, c)
	if len(reps) != 9 || st.ByType[spec.EventFlowState].Suppressed != 1 {
		t.Fatalf("%d reports, suppressed %d", len(reps), st.ByType[spec.EventFlowState].Suppressed)
	}
	for i, x := range c.Packets() {
		if x.Seq != uint32(i) {
			t.Fatalf("packet %d seq %d", i, x.Seq)
		}
	}
	for _, x := range c.Packets()[5:] {
		if want := map[int]uint8{3: 46, 1: 0}[x.Reports]; x.DSCP != want {
			t.Errorf("packet of %d reports: DSCP %d, want %d", x.Reports, x.DSCP, want)
		}
	}
	bad := baseConfig(1)
	bad.Events[spec.EventDropReport] = Route{Session: "nope"}
	if err := p.Configure(bad); err == nil {
		t.Error("Configure accepted an unknown session")
	}
}

func TestRateLimit(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Sessions[0].RateLimit = 100 // burst 10
	p, c := newTest(t, cfg)
	var ev Event
	f := newFrame(1, nil, nil)
	for i := int64(0); i < 2000; i++ { // 2000 reports over 1 s
		f.event(&ev, i*ms/2, 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	st := p.Stats()
	reps := finish(t, p, c)
	if n := len(reps); n < 105 || n > 112 {
		t.Errorf("%d reports passed a 100/s limit with burst 10 in 1 s", n)
	}
	if s := st.Sessions["s"]; s.RateLimited != uint64(2000-len(reps)) {
		t.Errorf("rate limited %d", s.RateLimited)
	}
}

func TestBoundedQueue(t *testing.T) {
	gate := make(chan struct{})
	var sent int
	block := SenderFunc(func(p *Packet) error { <-gate; sent++; return nil })
	cfg := baseConfig(1)
	p, err := New(cfg, Options{Sender: block, TickInterval: -1, QueueLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	f := newFrame(1, nil, nil)
	f.event(&ev, 0, 10)
	ev.ReportAll = true
	for i := 0; i < 1000; i++ {
		p.Report(&ev)
	}
	allocs := testing.AllocsPerRun(1000, func() { p.Report(&ev) })
	st := p.Stats()
	s := st.Sessions["s"]
	// The worker holds one packet in Send; 8 buffers in all.
	if s.ByType[spec.EventFlowReportAllPackets].Dropped < 1990 || s.QueueFull < 1990 || s.Collectors[0].Queued > 8 {
		t.Errorf("blocked sender: %+v", s)
	}
	if allocs != 0 {
		t.Errorf("Report allocates %.1f with a blocked sender", allocs)
	}
	close(gate)
	p.Close()
	st = p.Stats()
	tot := st.ByType[spec.EventFlowReportAllPackets]
	if tot.Sent != uint64(sent) || tot.Sent+tot.Dropped != tot.Generated || sent > 8 {
		t.Errorf("after unblocking: sent %d, %+v", sent, tot)
	}
}

func TestZeroAllocFilter(t *testing.T) {
	p, c := newTest(t, baseConfig(16))
	defer finish(t, p, c)
	fr := newFrame(1, []uint32{1, 2, 3}, []uint32{1, 2, 3})
	var ev Event
	now := int64(0)
	fr.event(&ev, now, 10)
	p.Report(&ev)
	allocs := testing.AllocsPerRun(10000, func() {
		now += 1000
		fr.event(&ev, now, 10)
		p.Report(&ev) // suppressed
	})
	if allocs != 0 {
		t.Errorf("suppressed decision allocates %.1f", allocs)
	}
	allocs = testing.AllocsPerRun(10000, func() {
		now += int64(time.Second)
		fr.event(&ev, now, 10)
		p.Report(&ev) // reported and encoded
	})
	if allocs != 0 {
		t.Errorf("reported decision allocates %.1f", allocs)
	}
}

func TestValidate(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"hwid":       func(c *Config) { c.HWID = 64 },
		"no name":    func(c *Config) { c.Sessions[0].Name = "" },
		"no coll":    func(c *Config) { c.Sessions[0].Collectors = nil },
		"family":     func(c *Config) { c.Sessions[0].Collectors[0].Addr = netipAP("[2001:db8::1]:1") },
		"v05 coal":   func(c *Config) { c.Sessions[0].Format, c.Sessions[0].MaxReports = spec.ReportFormatV05, 4 },
		"bad dscp":   func(c *Config) { c.Events[spec.EventDropReport] = Route{Session: "s", DSCP: 64} },
		"no trigger": func(c *Config) { c.Queues = []QueueReport{{Port: 1}} },
		"mtu":        func(c *Config) { c.Sessions[0].MTU = 100 },
	} {
		c := baseConfig(1)
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := baseConfig(1)
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func wireAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)}), 9000)
}

func netipAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestIntermediateBit: queue and drop reports of packets carrying INT-MD
// are intermediate (I); the sink's flow report and reports of packets
// without INT are not.
func TestIntermediateBit(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Queues = []QueueReport{{Port: 2, Queue: 0, LatencyThreshold: 1000, Quota: 10}}
	p, c := newTest(t, cfg)
	var ev Event
	f := newFrame(1, []uint32{1, 2}, []uint32{100, 200})
	f.event(&ev, 1, 5000) // the sink's flow report
	p.Report(&ev)
	f.event(&ev, 2, 5000) // the same packet in a breached queue before the sink
	ev.Kind, ev.Hop.EgressPort = KindQueue, 2
	p.Report(&ev)
	g := newFrame(2, nil, nil)
	g.event(&ev, 3, 5000) // a packet without INT in that queue
	ev.Kind, ev.Hop.EgressPort, ev.INT, ev.INTLen, ev.INTType = KindQueue, 2, -1, 0, 0
	p.Report(&ev)
	reps := finish(t, p, c)
	if len(reps) != 3 {
		t.Fatalf("%d reports, want 3", len(reps))
	}
	for i, want := range []bool{false, true, false} {
		if reps[i].hdr.Intermediate != want {
			t.Errorf("report %d (%+v): I = %v, want %v", i, reps[i].hdr, reps[i].hdr.Intermediate, want)
		}
	}
}

// TestRepMdBitsFollowRequest: a flow report carries the metadata asked
// for (the INT header's bitmap, else the dataplane's Instructions, else all
// it has) minus what the node does not have; a drop report all it has for
// the drop; MD Length follows.
func TestRepMdBitsFollowRequest(t *testing.T) {
	f := newFrame(1, []uint32{1}, []uint32{500})
	all := spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTimestamp
	for _, c := range []struct {
		name  string
		ev    func(ev *Event)
		bits  uint16
		words uint8
		inter bool
	}{
		{"INT-MD sink: the stack's bitmap", func(ev *Event) {}, wire.RepHopLatency, 1, false},
		{"postcard: the session's bitmap", func(ev *Event) {
			ev.Packet, ev.INT = f.buf[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen], -1
			ev.Instructions, ev.HasInstructions = spec.InstL1Interfaces|spec.InstEgressTimestamp|spec.InstBuffer, true
		}, wire.RepL1Ports | wire.RepEgressTimestamp, 3, false},
		{"postcard without session: all it has", func(ev *Event) {
			ev.Packet, ev.INT = f.buf[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen], -1
		}, wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue | wire.RepEgressTimestamp, 5, false},
		{"transit drop of INT-MD: all it has, intermediate", func(ev *Event) {
			ev.Kind, ev.DropReason = KindDrop, uint8(spec.DropRoutingMiss)
			ev.Hop.Valid = spec.InstNodeID | spec.InstL1Interfaces | spec.InstIngressTimestamp
		}, wire.RepL1Ports | wire.RepIngressTimestamp | wire.RepDrop, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, capt := newTest(t, baseConfig(1))
			var ev Event
			f.event(&ev, ms, 700)
			ev.Hop.EgressTimestamp, ev.Hop.Valid = 12345, all
			c.ev(&ev)
			p.Report(&ev)
			p.Close()
			pkts := capt.Packets()
			if len(pkts) != 1 {
				t.Fatalf("%d packets", len(pkts))
			}
			_, rr, _ := wire.NewReportReader(pkts[0].Payload)
			var r wire.Report
			if !rr.Next(&r) || r.RepMdBits != c.bits || r.MDLength != c.words || r.Intermediate != c.inter {
				t.Fatalf("RepMdBits %#04x MD Length %d I %v, want %#04x %d %v", r.RepMdBits, r.MDLength, r.Intermediate,
					c.bits, c.words, c.inter)
			}
		})
	}
}

// TestSessionDSCP: reports take their event's DSCP, or the session's
// when the event leaves it 0.
func TestSessionDSCP(t *testing.T) {
	cfg := baseConfig(1)
	cfg.Sessions[0].DSCP = 46
	cfg.Events[spec.EventDropReport] = Route{Session: "s", DSCP: 10}
	p, capt := newTest(t, cfg)
	f := newFrame(1, []uint32{1}, []uint32{500})
	var ev Event
	f.event(&ev, ms, 700)
	p.Report(&ev)
	ev.Kind = KindDrop
	p.Report(&ev)
	p.Close()
	var got []uint8
	for _, pk := range capt.Packets() {
		got = append(got, pk.DSCP)
	}
	if len(got) != 2 || got[0] != 46 || got[1] != 10 {
		t.Fatalf("DSCPs %v, want [46 10]", got)
	}
}

// TestDSMetadata: a report answering an INT header's DS instruction in a
// domain the node knows carries the values it has (DSMdBits, Domain
// Specific ID, MD Length with the fields' sizes); in an unknown domain it
// carries none.
func TestDSMetadata(t *testing.T) {
	for _, c := range []struct {
		name   string
		domain uint16
		bits   uint16
		ds     []byte
	}{
		{"known domain", 7, 0x4000, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd}},
		{"unknown domain", 8, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig(1)
			// Bit 1 (3 words) has a value; bit 0 is asked for but has none.
			cfg.DSValues = []DSValue{{DomainID: 7, Bit: 1, Words: 3, Value: 0xabcd}, {DomainID: 7, Bit: 5, Words: 1, Value: 1}}
			p, capt := newTest(t, cfg)
			f := newFrame(1, []uint32{1}, []uint32{500})
			h := f.buf[f.intOff:]
			binary.BigEndian.PutUint16(h[6:], c.domain)
			binary.BigEndian.PutUint16(h[8:], 0xc000)
			var ev Event
			f.event(&ev, ms, 700)
			p.Report(&ev)
			p.Close()
			_, rr, _ := wire.NewReportReader(capt.Packets()[0].Payload)
			var r wire.Report
			if !rr.Next(&r) {
				t.Fatal(rr.Err())
			}
			var md wire.ReportMetadata
			ds, err := r.Baseline(&md)
			if err != nil {
				t.Fatal(err)
			}
			wantDomain := c.domain
			if c.bits == 0 {
				wantDomain = 0
			}
			if r.DSMdBits != c.bits || r.DomainID != wantDomain || !bytes.Equal(ds, c.ds) ||
				int(r.MDLength) != wire.RepMdWords(r.RepMdBits)+len(c.ds)/4 {
				t.Fatalf("DSMdBits %#04x domain %d MD Length %d DS %x", r.DSMdBits, r.DomainID, r.MDLength, ds)
			}
		})
	}
}

// TestTunnelIDSeparatesFlows: the same inner 5-tuple in two tunnels is two
// flows to the filter; in one tunnel, one.
func TestTunnelIDSeparatesFlows(t *testing.T) {
	p, c := newTest(t, baseConfig(1))
	f := newFrame(1, []uint32{1, 2}, []uint32{500, 600})
	var ev Event
	for i, teid := range []uint32{7, 7, 8} {
		f.event(&ev, int64(i)*ms, 1000)
		ev.Tunnel, ev.TunnelID = wire.TunnelGTPU, teid
		p.Report(&ev)
	}
	if reps := finish(t, p, c); len(reps) != 2 {
		t.Fatalf("%d reports, want 2: one per tunnel", len(reps))
	}
}

// TestQueueReportsRateLimit: a standing burst pattern breaches every 2 ms
// (quota refilled each time) for 3 s; the rate limit of 50 reports per
// second caps the queue's reports at 50 per one second window, 150 in all.
func TestQueueReportsRateLimit(t *testing.T) {
	cfg := baseConfig(8)
	cfg.Queues = []QueueReport{{Port: 2, Queue: 3, LatencyThreshold: 2000, ResetThreshold: 500, Quota: 4, RateLimit: 50}}
	p, c := newTest(t, cfg)
	var ev Event
	f := newFrame(1, nil, nil)
	var perWindow [3]int
	for n := int64(0); n < 3000; n++ { // one burst per 2 ms: 5 packets queued, 1 calm
		for i := int64(0); i < 6; i++ {
			now := n*int64(time.Millisecond) + i*100_000
			lat := uint32(3000)
			if i == 5 {
				lat = 100
			}
			f.event(&ev, now, lat)
			ev.Kind, ev.Hop.EgressPort, ev.Hop.QueueID = KindQueue, 2, 3
			before := p.Stats().Queues[0].Reports
			p.Report(&ev)
			if p.Stats().Queues[0].Reports > before {
				perWindow[now/int64(time.Second)]++
			}
		}
	}
	st := p.Stats()
	reps := finish(t, p, c)
	if q := st.Queues[0]; q.Breaches != 3000 || q.Reports != 150 {
		t.Errorf("queue stats %+v, want 3000 breaches, 150 reports", q)
	}
	if perWindow != [3]int{50, 50, 50} || len(reps) != 150 {
		t.Errorf("reports per second %v, %d sent; want 50 each, 150", perWindow, len(reps))
	}
}

// TestAdaptiveBandRemembersInTime: the adaptive filter's memory of a
// flow's variation is time, not packets. A hop that sits behind a burst
// every 700 ms (8 µs normally, 300 µs then, as the lab's TCP flow behind
// its UDP bursts) is a latency change the first time or two only, whether
// the flow sends 100 or 2,000 packets per second; a 5 ms spike after
// 10.5 s still is one.
func TestAdaptiveBandRemembersInTime(t *testing.T) {
	for _, pps := range []int64{100, 2000} {
		cfg := baseConfig(16)
		cfg.Filter.Adaptive, cfg.Filter.LatencyFactor, cfg.Filter.LatencyFloor = true, 32, 20_000
		p, c := newTest(t, cfg)
		f := newFrame(1, []uint32{1, 2, 3}, []uint32{8000, 8000, 8000})
		var ev Event
		period := int64(time.Second) / pps
		n := 10*pps + pps/2
		swing := 700 * ms / period // packets between bursts
		for i := int64(0); i <= n; i++ {
			lat := uint32(8000 + (i*7919)%2000) // ±1 µs
			if i > 0 && i%swing == 0 {
				lat = 300_000
			}
			if i == n {
				lat = 5_000_000
			}
			f.setLat(1, lat)
			f.setID(1, uint32(i))
			f.event(&ev, i*period, 5000)
			p.Report(&ev)
		}
		p.Flush()
		st := p.Stats().Filter
		rs := finish(t, p, c)
		t.Logf("%d packets per second: filter %+v", pps, st)
		// 15 swings and the spike; at most the first two swings count.
		if st.Latency < 1 || st.Latency > 3 {
			t.Errorf("%d packets per second: %d latency changes, want the spike and at most 2 swings", pps, st.Latency)
		}
		if _, id, ok := innerID(rs[len(rs)-1].inner, 3); !ok || id != uint32(n) {
			t.Errorf("%d packets per second: the last report is packet %d, not the spike %d", pps, id, n)
		}
	}
}

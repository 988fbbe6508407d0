package lab

// The reporting pipeline's behaviours (smart flow filter, drop
// reports, queue-congestion quotas, coalescing and sequence numbers) shown
// in the lab, with real queues and the soft dataplane, on a manual clock.
// Every count below follows from the scenario: flows send one packet every
// 1/PPS exactly, queues serialise at the link rate, and the filter
// interval is the lab's default 1 s.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

const (
	rt0 = int64(1_700_000_000_000_000_000) // the manual clock's start
	ms  = time.Millisecond
	us  = time.Microsecond
)

var (
	h1IP = netip.MustParseAddr("10.0.1.1")
	h2IP = netip.MustParseAddr("10.0.2.1")
)

// rlab is a lab on a manual clock whose reports are captured.
type rlab struct {
	*Lab
	t   *testing.T
	clk *soft.ManualClock
	cap *report.Capture
}

func newRLab(t *testing.T, topo *Topology, flows []Flow) *rlab {
	t.Helper()
	r := &rlab{t: t, clk: soft.NewManualClock(rt0), cap: &report.Capture{}}
	// The counts below follow SD-Fabric's fixed threshold (256 ns): on the
	// manual clock latencies move only by queueing.
	fixed := sai.DefaultDTelAttrs().FlowReport
	fixed.Adaptive = false
	l, err := New(Options{Topology: topo, Clock: r.clk, Flows: flows, Collector: DefaultCollector, Sender: r.cap, FlowReport: &fixed})
	if err != nil {
		t.Fatal(err)
	}
	r.Lab = l
	t.Cleanup(func() { l.Close() })
	return r
}

// until runs the lab up to rt0+d.
func (r *rlab) until(d time.Duration) { r.RunUntil(rt0 + int64(d)) }

// stats returns the named switch's reporting pipeline counters.
func (r *rlab) stats(sw string) report.Stats { return r.pipes[sw].Stats() }

// flowStats returns sw's FLOW_STATE counters.
func (r *rlab) flowStats(sw string) report.Counters {
	return r.stats(sw).ByType[spec.EventFlowState]
}

func (r *rlab) addFlow(f Flow) {
	r.t.Helper()
	if err := r.AddFlow(f); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rlab) key(name string) wire.FlowKey {
	r.t.Helper()
	k, ok := r.FlowKey(name)
	if !ok {
		r.t.Fatalf("no flow %q", name)
	}
	return k
}

// labReport is one individual report decoded from a captured packet.
type labReport struct {
	pkt   int // index of the captured packet
	node  uint32
	seq   uint32
	dst   netip.AddrPort
	hdr   wire.ReportHeader
	md    wire.ReportMetadata
	meta  []byte // raw metadata words
	raw   []byte // the whole individual report
	flow  wire.FlowKey
	path  []uint32 // node ids of the inner INT-MD stack, source first
	lat   []uint32 // their hop latencies
	inner []byte
}

// at is the report's time relative to the clock's start: the egress
// timestamp (the ingress one for drops, which have no egress).
func (x *labReport) at() time.Duration {
	if x.hdr.Dropped {
		return time.Duration(int64(x.md.IngressTimestamp) - rt0)
	}
	return time.Duration(int64(x.md.EgressTimestamp) - rt0)
}

// sent is when a sink-reported packet left its source host: links have no
// propagation delay, so it is the sink's egress time less every hop's
// latency (the sink's own is on the stack).
func (x *labReport) sent() time.Duration {
	d := x.at()
	for _, l := range x.lat {
		d -= time.Duration(l)
	}
	return d
}

func (x *labReport) String() string {
	return fmt.Sprintf("node %d seq %d at %v F%v D%v Q%v I%v flow %v:%d path %v lat %v md %+v", x.node, x.seq,
		x.at(), b2i(x.hdr.TrackedFlow), b2i(x.hdr.Dropped), b2i(x.hdr.Congested), b2i(x.hdr.Intermediate),
		x.flow.Src, x.flow.SrcPort, x.path, x.lat, x.md)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// finish stops the lab (flushing every pipeline) and decodes what the
// collectors got.
func (r *rlab) finish() ([]report.Packet, []labReport) {
	r.t.Helper()
	r.Close()
	pkts := r.cap.Packets()
	return pkts, decodeLab(r.t, pkts)
}

// decodeLab decodes captured v2.0 report packets into individual reports,
// parsing each inner frame (flow, INT-MD stack).
func decodeLab(t *testing.T, pkts []report.Packet) []labReport {
	t.Helper()
	var out []labReport
	parser := wire.Parser{DSCP: DSCPValue, DSCPMask: DSCPMask, AllowTruncated: true}
	for i, p := range pkts {
		g, rr, err := wire.NewReportReader(p.Payload)
		if err != nil {
			t.Fatalf("packet %d: group header: %v", i, err)
		}
		if g.Seq != p.Seq {
			t.Fatalf("packet %d: header seq %d, exporter says %d", i, g.Seq, p.Seq)
		}
		n, off := 0, wire.GroupHeaderLen
		var rep wire.Report
		for rr.Next(&rep) {
			x := labReport{pkt: i, node: g.NodeID, seq: g.Seq, dst: p.Dst, hdr: rep.ReportHeader,
				meta: rep.Metadata, inner: rep.Inner}
			size := len(p.Payload) - off
			if rep.Length != wire.ReportLengthToEnd {
				size = wire.ReportHeaderLen + int(rep.Length)*4
			}
			x.raw = p.Payload[off : off+size]
			off += size
			if rep.Type != spec.RepINT {
				t.Fatalf("packet %d: report type %d", i, rep.Type)
			}
			if _, err := rep.Baseline(&x.md); err != nil {
				t.Fatalf("packet %d: baseline: %v", i, err)
			}
			var pk wire.Packet
			if err := parser.Parse(rep.Inner, &pk); err != nil {
				t.Fatalf("packet %d: inner frame: %v", i, err)
			}
			x.flow = pk.Flow
			if pk.INT >= 0 && pk.INTType == spec.TypeMD {
				h, st, err := wire.DecodeMD(rep.Inner[pk.INT:pk.INT+pk.INTLen], -1)
				if err != nil {
					t.Fatalf("packet %d: INT-MD stack: %v", i, err)
				}
				for j := st.Count() - 1; j >= 0; j-- {
					var m wire.HopMetadata
					if err := wire.DecodeHop(st.Hop(j), h.Instructions, &m); err != nil {
						t.Fatalf("packet %d: hop %d: %v", i, j, err)
					}
					x.path = append(x.path, m.NodeID)
					x.lat = append(x.lat, m.HopLatency)
				}
			}
			out = append(out, x)
			n++
		}
		if err := rr.Err(); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if n != p.Reports {
			t.Fatalf("packet %d says %d reports, decoded %d", i, p.Reports, n)
		}
	}
	return out
}

// pick returns the reports that satisfy keep.
func pick(rs []labReport, keep func(*labReport) bool) []labReport {
	var out []labReport
	for i := range rs {
		if keep(&rs[i]) {
			out = append(out, rs[i])
		}
	}
	return out
}

// sinkFlow selects flow k's flow reports from node.
func sinkFlow(node uint32, k wire.FlowKey) func(*labReport) bool {
	return func(x *labReport) bool {
		return x.node == node && x.flow == k && x.hdr.TrackedFlow && !x.hdr.Dropped && !x.hdr.Congested
	}
}

func logReports(t *testing.T, rs []labReport) {
	t.Helper()
	for i := range rs {
		t.Log(rs[i].String())
	}
}

func udpFlow(name string, sport uint16, pps float64) Flow {
	return Flow{Name: name, From: "h1", To: "h2", Proto: wire.ProtoUDP, SrcPort: sport, DstPort: 5001, Size: 100, PPS: pps}
}

// diamond is s1 -> {s2, s3} -> s4 with 1 Gb/s links.
func diamond() *Topology {
	return &Topology{
		Switches: []SwitchSpec{{Name: "s1"}, {Name: "s2"}, {Name: "s3"}, {Name: "s4"}},
		Hosts:    []HostSpec{{Name: "h1", IP: h1IP, Port: "s1:h1"}, {Name: "h2", IP: h2IP, Port: "s4:h2"}},
		Links:    []LinkSpec{{A: "s1:a", B: "s2:a"}, {A: "s1:b", B: "s3:a"}, {A: "s2:b", B: "s4:a"}, {A: "s3:b", B: "s4:b"}},
	}
}

// TestReportsSteadyFlow: 10 s of a 1000 pps flow without congestion gives
// the sink exactly 10 flow reports (new, then one per 1 s interval), not
// 10,000; the other switches report nothing.
func TestReportsSteadyFlow(t *testing.T) {
	f := udpFlow("steady", 40010, 1000)
	f.Duration = 10 * time.Second
	r := newRLab(t, nil, []Flow{f})
	r.until(10*time.Second + 500*ms)
	k := r.key("steady")

	st := r.stats("s3")
	if c := st.ByType[spec.EventFlowState]; c.Generated != 10 || c.Suppressed != 9990 {
		t.Errorf("s3 flow reports %+v, want 10 generated and 9990 suppressed", c)
	}
	if fs := st.Filter; fs != (report.FilterStats{New: 1, Interval: 9}) {
		t.Errorf("s3 filter reasons %+v, want new 1 interval 9", fs)
	}
	for _, sw := range []string{"s1", "s2"} {
		st := r.stats(sw)
		if tot := st.Total(); tot != (report.Counters{}) {
			t.Errorf("%s reported %+v, want nothing", sw, tot)
		}
	}
	if v, _ := r.View(k); v.Reports != 10000 {
		t.Errorf("sink saw %d INT packets, want 10000", v.Reports)
	}

	pkts, rs := r.finish()
	if len(pkts) != 10 || len(rs) != 10 {
		logReports(t, rs)
		t.Fatalf("%d packets, %d reports, want 10", len(pkts), len(rs))
	}
	for i := range rs {
		x := &rs[i]
		if !sinkFlow(3, k)(x) || x.hdr.Intermediate || x.seq != uint32(i) || !slices.Equal(x.path, []uint32{1, 2, 3}) {
			t.Errorf("report %d: %v", i, x)
		}
		// One report per interval: the packets leave the sink exactly
		// 1 s apart (same latency each time).
		if i > 0 && x.at()-rs[i-1].at() != time.Second {
			t.Errorf("report %d at %v, previous at %v", i, x.at(), rs[i-1].at())
		}
	}
	if s := r.stats("s3").ByType[spec.EventFlowState]; s.Sent != 10 || s.Dropped != 0 {
		t.Errorf("s3 sent %+v", s)
	}
}

// TestReportsPathChange: in the diamond s1 -> {s2, s3} -> s4, moving the
// flow to the other branch is reported by the sink with the first packet
// on the new path (reasons path and port: s4's ingress port changes too),
// between the 1 s interval reports, which then restart from the change.
func TestReportsPathChange(t *testing.T) {
	r := newRLab(t, diamond(), []Flow{udpFlow("f", 40020, 1000)})
	k := r.key("f")
	// Packets leave h1 at whole milliseconds; the change falls between two.
	r.until(2500*ms + 500*us)
	if c := r.flowStats("s4"); c.Generated != 3 {
		t.Fatalf("s4 flow reports before the change %+v, want 3 (0, 1, 2 s)", c)
	}
	v, _ := r.View(k)
	if len(v.Path) != 3 || v.Path[1] != 2 && v.Path[1] != 3 {
		t.Fatalf("view %+v", v)
	}
	oldVia := v.Path[1]
	newVia, newPort := uint32(3), "b" // s1:a goes to s2, s1:b to s3
	if oldVia == 3 {
		newVia, newPort = 2, "a"
	}
	if err := r.Switch("s1").SetRoutes([]soft.Route{
		{Prefix: netip.PrefixFrom(h1IP, 32), Ports: []string{"h1"}},
		{Prefix: netip.PrefixFrom(h2IP, 32), Ports: []string{newPort}},
	}); err != nil {
		t.Fatal(err)
	}
	// The next packet (sent at 2501 ms) crosses three 1 Gb/s hops in a few
	// microseconds: it alone is reported.
	r.until(2501*ms + 100*us)
	st := r.stats("s4")
	if c := st.ByType[spec.EventFlowState]; c.Generated != 4 || c.Suppressed != 2498 {
		t.Errorf("s4 flow reports after the first packet on the new path %+v, want 4 generated, 2498 suppressed", c)
	}
	if fs := st.Filter; fs != (report.FilterStats{New: 1, Interval: 2, Path: 1, Port: 1}) {
		t.Errorf("s4 filter reasons %+v", fs)
	}
	// Then one report per second again, counted from the change.
	r.until(4600 * ms)
	if fs := r.stats("s4").Filter; fs != (report.FilterStats{New: 1, Interval: 4, Path: 1, Port: 1}) {
		t.Errorf("s4 filter reasons at 4.6 s %+v, want interval reports at 1, 2, 3.501, 4.501 s", fs)
	}

	_, rs := r.finish()
	rs = pick(rs, sinkFlow(4, k))
	if len(rs) != 6 {
		logReports(t, rs)
		t.Fatalf("%d sink reports, want 6", len(rs))
	}
	for i, want := range []time.Duration{0, time.Second, 2 * time.Second, 2501 * ms, 3501 * ms, 4501 * ms} {
		x := &rs[i]
		via := oldVia
		if i >= 3 {
			via = newVia
		}
		if x.sent() != want || !slices.Equal(x.path, []uint32{1, via, 4}) {
			t.Errorf("report %d (want at %v via s%d): %v", i, want, via, x)
		}
	}
}

// TestReportsLatencyJump: a burst of 8 1200-byte packets from another flow
// 100 µs before a probe packet queues the probe at s2 (100 Mb/s towards
// s3) for about 0.7 ms. The sink reports the probe at once, with s2's
// latency in the stack, and again with the next packet when the latency
// is back to normal; the 1 s interval restarts from there.
func TestReportsLatencyJump(t *testing.T) {
	r := newRLab(t, nil, []Flow{udpFlow("probe", 40030, 1000)})
	probe := r.key("probe")
	r.until(2500*ms - 100*us)
	r.addFlow(Flow{Name: "burst", From: "h1", To: "h2", Proto: wire.ProtoUDP, SrcPort: 40031, DstPort: 5001,
		Size: 1200, PPS: 8, Burst: 8, Duration: ms})
	burst := r.key("burst")
	r.until(2500*ms + 900*us) // the probe sent at 2500 ms and the burst have left the sink
	if c := r.flowStats("s3"); c.Generated != 3+1+8 {
		t.Errorf("s3 flow reports %+v, want 3 interval + 1 latency (probe) + 8 (burst)", c)
	}
	r.until(3600 * ms)

	_, rs := r.finish()
	ps := pick(rs, sinkFlow(3, probe))
	want := []time.Duration{0, time.Second, 2 * time.Second, 2500 * ms, 2501 * ms, 3501 * ms}
	if len(ps) != len(want) {
		logReports(t, ps)
		t.Fatalf("%d probe reports, want %d", len(ps), len(want))
	}
	base := ps[0].lat
	for i, w := range want {
		x := &ps[i]
		if x.sent() != w || !slices.Equal(x.path, []uint32{1, 2, 3}) {
			t.Errorf("probe report %d (want at %v): %v", i, w, x)
			continue
		}
		// s1 and s3 see no queue; s2's latency jumps in report 3 only.
		for h := range x.lat {
			jump := i == 3 && h == 1
			if d := int64(x.lat[h]) - int64(base[h]); jump && d < int64(600*us) || !jump && d != 0 {
				t.Errorf("probe report %d hop %d latency %d, base %d", i, h, x.lat[h], base[h])
			}
		}
	}
	// Each burst packet waits ~92 µs longer at s2 than the one before it:
	// new, then a latency change every packet.
	if bs := pick(rs, sinkFlow(3, burst)); len(bs) != 8 {
		logReports(t, bs)
		t.Errorf("%d burst reports, want 8", len(bs))
	}
	if fs := r.stats("s3").Filter; fs != (report.FilterStats{New: 2, Interval: 3, Latency: 2 + 7}) {
		t.Errorf("s3 filter reasons %+v", fs)
	}
}

// TestReportsRouteRemoved: s2 loses its route to h2 at 500.5 ms while
// three 1000 pps flows run. Every packet is dropped there (ROUTING_MISS,
// 29) until the route is back at 3400.5 ms, but the drop filter reports
// each flow once per 1 s interval: at 501, 1501 and 2501 ms, 9 reports
// for 8700 drops. They carry D, F and I (the packets still carry s1's
// INT-MD stack), the drop reason and the flow's packet. Once the route is
// back the sink reports each flow again (its 1 s interval has passed).
func TestReportsRouteRemoved(t *testing.T) {
	flows := []Flow{udpFlow("a", 40041, 1000), udpFlow("b", 40042, 1000), udpFlow("c", 40043, 1000)}
	r := newRLab(t, nil, flows)
	r.until(500*ms + 500*us)
	if err := r.Switch("s2").SetRoutes([]soft.Route{{Prefix: netip.PrefixFrom(h1IP, 32), Ports: []string{"p1"}}}); err != nil {
		t.Fatal(err)
	}
	r.until(3400*ms + 500*us)
	ss, err := r.Switch("s2").Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const drops = 3 * 2900 // packets sent at 501..3400 ms
	if ss.Drops[spec.DropRoutingMiss] != drops || ss.Node.DroppedPackets != drops {
		t.Errorf("s2 drops %v (node %d), want %d routing misses", ss.Drops, ss.Node.DroppedPackets, drops)
	}
	if c := ss.Reports[sai.ReportDrop]; c.Generated != 9 || c.Suppressed != drops-9 {
		t.Errorf("s2 drop reports %+v, want 9 generated, %d suppressed", c, drops-9)
	}
	if c := r.stats("s2").ByType[spec.EventDropReport]; c.Generated != 9 || c.Suppressed != drops-9 {
		t.Errorf("s2 pipeline DROP_REPORT %+v", c)
	}
	if err := r.Reroute(); err != nil {
		t.Fatal(err)
	}
	r.until(3600 * ms)
	if c := r.flowStats("s3"); c.Generated != 3+3 {
		t.Errorf("s3 flow reports %+v, want each flow at 0 s and after the route is back", c)
	}
	if ss, _ := r.Switch("s2").Stats(context.Background()); ss.Node.DroppedPackets != drops {
		t.Errorf("s2 dropped %d after the route came back", ss.Node.DroppedPackets)
	}

	_, rs := r.finish()
	for _, f := range flows {
		k := r.key(f.Name)
		ds := pick(rs, func(x *labReport) bool { return x.flow == k && x.hdr.Dropped })
		if len(ds) != 3 {
			logReports(t, ds)
			t.Errorf("flow %s: %d drop reports, want 3", f.Name, len(ds))
			continue
		}
		for i, w := range []time.Duration{501 * ms, 1501 * ms, 2501 * ms} {
			x := &ds[i]
			// The drop happens on arrival at s2, after s1's hop.
			arrived := w + time.Duration(x.lat[0])
			if x.node != 2 || !x.hdr.TrackedFlow || !x.hdr.Intermediate || x.hdr.Congested ||
				x.hdr.RepMdBits&wire.RepDrop == 0 || x.md.DropReason != uint8(spec.DropRoutingMiss) ||
				!slices.Equal(x.path, []uint32{1}) || x.at() != arrived {
				t.Errorf("flow %s drop report %d (want at %v): %v", f.Name, i, arrived, x)
			}
		}
		if fs := pick(rs, sinkFlow(3, k)); len(fs) != 2 || fs[0].sent() != 0 || fs[1].sent() != 3401*ms {
			logReports(t, fs)
			t.Errorf("flow %s: sink reports, want at 0 and 3401 ms", f.Name)
		}
	}
	if n := len(pick(rs, func(x *labReport) bool { return x.hdr.Dropped })); n != 9 {
		t.Errorf("%d drop reports in all, want 9", n)
	}
}

// TestReportsQueueQuota: s2's queue towards s3 (100 Mb/s) gets a burst of
// 80 1200-byte packets at 500.5 ms and another at 1500.5 ms, while a
// 1000 pps probe runs. s2's queue report (the lab's: 1 ms trigger, reset
// below 0.5 ms, tail drops) is recreated with a quota of 16 through the
// sai.Backend. Each burst packet waits ~92 µs longer than the one before
// it, so packets 10..79 of a burst and the 8 probes caught behind them are
// in breach: 78 packets, 16 reported with Q, 62 suppressed. The queue
// drains in ~8.2 ms; the next probe ends the breach and refills the quota,
// so the second burst is reported exactly like the first.
func TestReportsQueueQuota(t *testing.T) {
	const quota = 16
	r := newRLab(t, nil, []Flow{udpFlow("probe", 40050, 1000)})
	be := r.Switch("s2")
	ss, _ := be.Stats(context.Background())
	for oid := range ss.QueueReports {
		if err := be.Remove(oid); err != nil {
			t.Fatal(err)
		}
	}
	var qr sai.OID
	for _, p := range r.FabricPorts("s2") {
		oid, err := be.Create(sai.QueueReportAttrs{Port: p, LatencyThreshold: QueueLatencyThreshold,
			BreachQuota: quota, TailDrop: true})
		if err != nil {
			t.Fatal(err)
		}
		if p == "p2" {
			qr = oid
		}
	}
	if err := be.ReportError(); err != nil {
		t.Fatal(err)
	}
	r.until(500*ms + 500*us) // between two probes
	r.addFlow(Flow{Name: "burst", From: "h1", To: "h2", Proto: wire.ProtoUDP, SrcPort: 40051, DstPort: 5001,
		Size: 1200, PPS: 80, Burst: 80, Duration: 1500 * ms})

	queue := func(when string, breaches, reports, suppressed uint64) {
		t.Helper()
		st := r.stats("s2")
		var got []report.QueueStats
		for _, q := range st.Queues {
			if q.Breaches != 0 || q.Reports != 0 || q.Suppressed != 0 {
				got = append(got, q)
			}
		}
		want := report.QueueStats{Breaches: breaches, Reports: reports, Suppressed: suppressed, QuotaLeft: quota}
		if len(got) == 1 {
			want.Port = got[0].Port
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: s2 queues %+v, want one %+v", when, got, want)
		}
		if c := st.ByType[spec.EventQueueReportThresholdBreach]; c.Generated != reports || c.Suppressed != suppressed {
			t.Errorf("%s: s2 queue reports %+v", when, c)
		}
		ss, _ := be.Stats(context.Background())
		if q := ss.QueueReports[qr]; q != (sai.QueueReportStats{Breaches: breaches, Reports: reports, QuotaLeft: quota}) {
			t.Errorf("%s: sai queue report stats %+v", when, q)
		}
	}
	r.until(505 * ms) // the first burst is still draining
	if q := r.stats("s2").Queues; !slices.ContainsFunc(q, func(q report.QueueStats) bool {
		return q.Breached && q.QuotaLeft == 0 && q.Reports == quota
	}) {
		t.Errorf("mid-burst: s2 queues %+v, want one in breach with its quota spent", q)
	}
	r.until(1200 * ms)
	queue("after the first burst", 1, quota, 62)
	r.until(2200 * ms)
	queue("after the second burst", 2, 2*quota, 2*62)
	for _, sw := range []string{"s1", "s3"} {
		if c := r.stats(sw).ByType[spec.EventQueueReportThresholdBreach]; c != (report.Counters{}) {
			t.Errorf("%s queue reports %+v", sw, c)
		}
	}
	ss, _ = be.Stats(context.Background())
	if ss.Node.DroppedPackets != 0 {
		t.Errorf("s2 dropped %d", ss.Node.DroppedPackets)
	}

	_, rs := r.finish()
	qs := pick(rs, func(x *labReport) bool { return x.hdr.Congested })
	if len(qs) != 2*quota {
		logReports(t, qs)
		t.Fatalf("%d queue reports, want %d", len(qs), 2*quota)
	}
	burst := r.key("burst")
	for i := range qs {
		x := &qs[i]
		start := 501*ms + 500*us + time.Duration(i/quota)*time.Second // 1 ms after the burst
		// The quota is spent in the first 16 packets of the breach: the
		// burst packets 10..25 (no probe gets ahead of them).
		if x.node != 2 || x.hdr.Dropped || !x.hdr.TrackedFlow || !x.hdr.Intermediate || x.flow != burst ||
			x.md.HopLatency < uint32(QueueLatencyThreshold) || x.at() < start || x.at() > start+3*ms ||
			!slices.Equal(x.path, []uint32{1}) {
			t.Errorf("queue report %d: %v", i, x)
		}
		if i%quota > 0 && x.md.HopLatency <= qs[i-1].md.HopLatency {
			t.Errorf("queue report %d: latency %d after %d", i, x.md.HopLatency, qs[i-1].md.HopLatency)
		}
	}
}

// coalesce sets every switch's report session (the lab creates one per
// switch) to pack up to maxReports reports per packet for up to maxDelay.
func (r *rlab) coalesce(maxReports uint16, maxDelay time.Duration) {
	r.t.Helper()
	dst := netip.MustParseAddrPort(DefaultCollector)
	for i, name := range r.SwitchNames() {
		b := r.Switch(name)
		ss, err := b.Stats(context.Background())
		if err != nil || len(ss.ReportSessions) != 1 {
			r.t.Fatalf("%s: report sessions %v (%v)", name, ss.ReportSessions, err)
		}
		for oid := range ss.ReportSessions {
			a := sai.DefaultReportSessionAttrs()
			a.SrcIP = ReportSource(i)
			a.TruncateSize = ReportTruncateSize
			a.Destinations = []sai.ReportDestination{{IP: dst.Addr(), UDPPort: dst.Port()}}
			a.Coalesce = sai.Coalescing{MaxReports: maxReports, MaxDelay: maxDelay}
			if err := b.Set(oid, a); err != nil {
				r.t.Fatalf("%s: %v", name, err)
			}
		}
		if err := b.ReportError(); err != nil {
			r.t.Fatalf("%s: %v", name, err)
		}
	}
}

// mixedScenario runs two 1000 pps probes through the default lab for 2 s
// with a burst of 80 packets at 500.5 ms (queue reports at s2, latency
// changes at s3) and s2's route to h2 missing from 1500.5 to 1600.5 ms
// (drop reports at s2): every kind of report, fewer than a collector
// queue's 256 packets per switch even uncoalesced, so none is lost.
func mixedScenario(t *testing.T, maxReports uint16, maxDelay time.Duration) (*rlab, []report.Packet, []labReport) {
	r := newRLab(t, nil, []Flow{udpFlow("p1", 40061, 1000), udpFlow("p2", 40062, 1000)})
	if maxReports > 1 {
		r.coalesce(maxReports, maxDelay)
	}
	r.until(500*ms + 500*us)
	r.addFlow(Flow{Name: "burst", From: "h1", To: "h2", Proto: wire.ProtoUDP, SrcPort: 40063, DstPort: 5001,
		Size: 1200, PPS: 80, Burst: 80, Duration: ms})
	r.until(1500*ms + 500*us)
	if err := r.Switch("s2").SetRoutes([]soft.Route{{Prefix: netip.PrefixFrom(h1IP, 32), Ports: []string{"p1"}}}); err != nil {
		t.Fatal(err)
	}
	r.until(1600*ms + 500*us)
	if err := r.Reroute(); err != nil {
		t.Fatal(err)
	}
	r.until(2 * time.Second)
	pkts, rs := r.finish()
	return r, pkts, rs
}

// TestReportsCoalescing runs the same scenario with one report per packet
// and with up to 6 or 8 per packet within 250 µs: the collector decodes the
// same individual reports, byte for byte and in the same order per node,
// from fewer packets. Each packet holds what the exporter's rules allow
// (at most N reports and 1472 bytes, none waiting 250 µs or more) and is
// closed early only when the next report breaks one of them; sequence
// numbers count packets without a gap per (node, collector). Each rule
// closes some packets: s2's queue reports come ~102 µs apart (the delay
// closes packets of 3), the sink's reports of the 16 probes queued behind
// the burst 14 µs apart; a report is ~184 bytes, so 8 never fit (the size
// closes packets of 7) while 6 do (the count closes them).
func TestReportsCoalescing(t *testing.T) {
	const maxDelay = 250 * us
	_, plain, want := mixedScenario(t, 1, 0)
	wantBy := byNode(want)
	// What the scenario yields: sink flow reports at s3, queue and drop
	// reports at s2, nothing at s1. s2's breach (default quota 1024) holds
	// burst packets 10..79 and the 16 probe packets sent while the burst
	// drains; the sink reports every burst packet (new, then 79 latency
	// changes) and each probe 11 times: new, the 8 packets caught by the
	// burst, the first one after it, and the first one after the route is
	// back (1 s after the previous).
	if f, q, d := kinds(wantBy[2]); f != 0 || q != 70+16 || d != 2 {
		t.Errorf("s2: %d flow, %d queue, %d drop reports; want 0, 86, 2 (one per probe)", f, q, d)
	}
	if f, q, d := kinds(wantBy[3]); f != 80+2*11 || q != 0 || d != 0 {
		t.Errorf("s3: %d flow, %d queue, %d drop reports; want 102, 0, 0", f, q, d)
	}
	if len(wantBy[1]) != 0 || len(wantBy) != 2 {
		t.Errorf("reports from nodes %v, want s2 and s3 only", slices.Sorted(maps.Keys(wantBy)))
	}
	if len(plain) != len(want) {
		t.Errorf("uncoalesced: %d packets for %d reports", len(plain), len(want))
	}
	for _, n := range []int{6, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r, pkts, got := mixedScenario(t, uint16(n), maxDelay)
			gotBy := byNode(got)
			for node, ws := range wantBy {
				gs := gotBy[node]
				if len(gs) != len(ws) {
					t.Errorf("node %d: %d reports coalesced, %d not", node, len(gs), len(ws))
					continue
				}
				for i := range ws {
					if !bytes.Equal(gs[i].raw, ws[i].raw) {
						t.Errorf("node %d report %d differs:\n got %v\nwant %v", node, i, &gs[i], &ws[i])
						break
					}
				}
			}
			closed := checkPacking(t, r, pkts, got, n, maxDelay, 1500-20-8)
			if closed[closedDelay] == 0 || n == 6 && (closed[closedCount] == 0 || closed[closedSize] != 0) ||
				n == 8 && (closed[closedSize] == 0 || closed[closedCount] != 0) {
				t.Errorf("packets closed by count, size, delay: %v", closed)
			}
			t.Logf("packets closed by count, size, delay: %v", closed)
		})
	}
}

func byNode(rs []labReport) map[uint32][]labReport {
	m := map[uint32][]labReport{}
	for _, x := range rs {
		m[x.node] = append(m[x.node], x)
	}
	return m
}

func kinds(rs []labReport) (flow, queue, drop int) {
	for _, x := range rs {
		switch {
		case x.hdr.Dropped:
			drop++
		case x.hdr.Congested:
			queue++
		default:
			flow++
		}
	}
	return
}

// Why a coalesced packet was closed before the end of the run.
const (
	closedCount = iota
	closedSize
	closedDelay
)

// checkPacking checks the coalesced packets of every (node, collector):
// sequence numbers 0, 1, 2, ...; at most maxReports reports and maxPayload
// bytes each, all within maxDelay of the packet's first; a packet closed
// only when the next report would break one of these; and the pipeline's
// session counters agree. It returns how many packets each rule closed.
func checkPacking(t *testing.T, r *rlab, pkts []report.Packet, got []labReport, maxReports int,
	maxDelay time.Duration, maxPayload int) (closed [3]int) {
	t.Helper()
	type nd struct {
		node uint32
		dst  netip.AddrPort
	}
	seqs := map[nd][]int{} // packet indexes
	for i, p := range pkts {
		g, _, _ := wire.NewReportReader(p.Payload)
		k := nd{g.NodeID, p.Dst}
		seqs[k] = append(seqs[k], i)
	}
	reportsOf := map[int][]labReport{}
	for _, x := range got {
		reportsOf[x.pkt] = append(reportsOf[x.pkt], x)
	}
	for k, idx := range seqs {
		name := r.nodeIDs[k.node]
		nrep := 0
		for j, pi := range idx {
			p := pkts[pi]
			if p.Seq != uint32(j) {
				t.Errorf("%s: packet %d has sequence number %d", name, j, p.Seq)
			}
			rs := reportsOf[pi]
			nrep += len(rs)
			if len(rs) > maxReports || len(p.Payload) > maxPayload || len(rs) == 0 {
				t.Errorf("%s packet %d: %d reports, %d bytes", name, j, len(rs), len(p.Payload))
			}
			for _, x := range rs {
				if x.at()-rs[0].at() >= maxDelay {
					t.Errorf("%s packet %d: report at %v waited from %v", name, j, x.at(), rs[0].at())
				}
			}
			if j+1 == len(idx) {
				continue
			}
			switch n := reportsOf[idx[j+1]][0]; {
			case len(rs) == maxReports:
				closed[closedCount]++
			case len(p.Payload)+len(n.raw) > maxPayload:
				closed[closedSize]++
			case n.at()-rs[0].at() >= maxDelay:
				closed[closedDelay]++
			default:
				t.Errorf("%s packet %d (%d reports, %d bytes, from %v) closed before %v", name, j, len(rs),
					len(p.Payload), rs[0].at(), &n)
			}
		}
		var sess report.SessionStats
		for _, s := range r.stats(name).Sessions {
			sess = s
		}
		var sent uint64
		for _, c := range sess.ByType {
			sent += c.Sent
		}
		if len(sess.Collectors) != 1 || sess.Collectors[0].Addr != k.dst || sess.Collectors[0].NextSeq != uint32(len(idx)) ||
			sess.Collectors[0].LastSeq != uint32(len(idx)-1) || sess.Packets != uint64(len(idx)) ||
			sent != uint64(nrep) || sess.QueueFull != 0 {
			t.Errorf("%s: %d packets, %d reports; session stats %+v", name, len(idx), nrep, sess)
		}
		if len(idx) >= nrep {
			t.Errorf("%s: %d reports in %d packets: nothing coalesced", name, nrep, len(idx))
		}
		t.Logf("%s: %d reports in %d packets", name, nrep, len(idx))
	}
	return closed
}

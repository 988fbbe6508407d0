package collector

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

var testFlow = wire.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
	SrcPort: 40000, DstPort: 5001, Proto: wire.ProtoUDP}

func TestAggregateMDPath(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 10), 1000)
	c.HandlePacket(testPayload(t, 11), 2000)
	f, ok := c.Flow(testFlow)
	if !ok {
		t.Fatal("flow missing")
	}
	if f.NHops != 4 || f.FirstSeen != 1000 || f.LastSeen != 2000 || f.Reports != 6 || f.PathChanges != 0 {
		t.Fatalf("flow = %+v", f)
	}
	for i, want := range []uint32{1, 2, 3} {
		h := f.Path[i]
		if h.NodeID != want || h.Latency.Last != uint64(want)*1000 || h.Queue.Last != uint64(want)*10 || h.EgressPort != 2 {
			t.Errorf("hop %d = %+v", i, h)
		}
	}
	// The sink (node 4) reported 4000 ns; its intermediate report 50000 ns.
	if h := f.Path[3]; h.NodeID != 4 || h.Latency.Min != 4000 || h.Latency.Max != 50000 || h.Queue.Max != 5000 {
		t.Errorf("sink hop = %+v", h)
	}
	if f.E2E.Min != 10000 {
		t.Errorf("e2e = %+v", f.E2E)
	}
	if f.Drops != 2 || f.DropReasons[0] != (DropCount{71, 2}) || f.Congestion != 2 {
		t.Errorf("drops %d %v congestion %d", f.Drops, f.DropReasons, f.Congestion)
	}
	s := c.Snapshot(0)
	if s.Counters.Reports != 6 || s.Counters.Lost != 0 || s.Counters.DropReasons[71] != 2 || len(s.Sources) != 1 || s.Sources[0].Packets != 2 {
		t.Errorf("counters = %+v sources %+v", s.Counters, s.Sources)
	}
}

func TestPathChange(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 1), 1)
	hops := testHops()
	hops[1].NodeID = 9
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 5, Seq: 2, NodeID: 4})
	h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, RepMdBits: wire.RepHopLatency}
	b, _ = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: 1}, nil, mdFrame(t, hops, testInst, 0))
	c.HandlePacket(b, 2)
	f, _ := c.Flow(testFlow)
	if f.PathChanges != 1 || f.Path[1].NodeID != 9 || f.Path[1].Latency.Count != 1 || f.NHops != 4 {
		t.Errorf("flow = %+v", f)
	}
}

func TestSequenceLoss(t *testing.T) {
	c := New(Config{})
	pkt := func(seq uint32) []byte {
		b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: seq, NodeID: 7})
		b, _ = wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepInnerOnly, InType: spec.InNone}, nil, nil, nil)
		return b
	}
	for _, s := range []uint32{wire.MaxReportSeq - 1, wire.MaxReportSeq, 0, 1, 4, 3, 4, 10} {
		c.HandlePacket(pkt(s), 1)
	}
	s := c.Snapshot(0)
	src := s.Sources[0]
	// Lost: 2, 3 (then 3 arrives late and is counted as reordered, not
	// subtracted), 5..9.
	if src.Lost != 7 || src.Reordered != 2 || src.Packets != 8 || s.Counters.Lost != 7 {
		t.Errorf("source = %+v", src)
	}
}

func TestEviction(t *testing.T) {
	c := New(Config{MaxFlows: 4})
	for i := 0; i < 10; i++ {
		frame := mdFrame(t, testHops(), testInst, 0)
		frame[wire.EthernetLen+wire.IPv4MinLen+1] = byte(i) // source port
		b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(i), NodeID: 4})
		b, _ = wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepInnerOnly, InType: spec.InEthernet}, nil, nil, frame)
		c.HandlePacket(b, int64(i))
	}
	s := c.Snapshot(0)
	if len(s.Flows) != 4 || s.Counters.FlowsEvicted != 6 || s.Counters.FlowsCreated != 10 {
		t.Fatalf("flows %d evicted %d", len(s.Flows), s.Counters.FlowsEvicted)
	}
	for i, f := range s.Flows {
		if want := uint16(40000&0xff00 | (9 - i)); f.Key.SrcPort != want {
			t.Errorf("flow %d port %d want %d", i, f.Key.SrcPort, want)
		}
	}
}

// TestFlowLRUOrder: the flow table's recency order (Snapshot's) and its
// evictions follow a plain most-recent-first list, over random runs of
// reports from more flows than the table holds, one to three per packet.
func TestFlowLRUOrder(t *testing.T) {
	const maxFlows, ports = 5, 12
	c := New(Config{MaxFlows: maxFlows})
	rng := rand.New(rand.NewPCG(3, 4))
	var want []uint16 // most recent first
	evicted := uint64(0)
	for step := 0; step < 2000; step++ {
		b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(step), NodeID: 4})
		for k := rng.IntN(3); k >= 0; k-- {
			port := uint16(rng.IntN(ports))
			frame := mdFrame(t, testHops(), testInst, 0)
			binary.BigEndian.PutUint16(frame[wire.EthernetLen+wire.IPv4MinLen:], port)
			b, _ = wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepInnerOnly, InType: spec.InEthernet}, nil, nil, frame)
			if i := slices.Index(want, port); i >= 0 {
				want = slices.Delete(want, i, i+1)
			}
			want = slices.Insert(want, 0, port)
			if len(want) > maxFlows {
				want, evicted = want[:maxFlows], evicted+1
			}
		}
		c.HandlePacket(b, int64(step))
		s := c.Snapshot(0)
		var got []uint16
		for _, f := range s.Flows {
			got = append(got, f.Key.SrcPort)
		}
		if !slices.Equal(got, want) || s.Counters.FlowsEvicted != evicted {
			t.Fatalf("step %d: order %v evicted %d, want %v evicted %d", step, got, s.Counters.FlowsEvicted, want, evicted)
		}
	}
}

func TestMalformedCounted(t *testing.T) {
	c := New(Config{})
	good := testPayload(t, 1)
	for i := 1; i < len(good); i++ {
		c.HandlePacket(good[:i], 1)
	}
	c.HandlePacket([]byte{0x50}, 1)
	s := c.Snapshot(0)
	if s.Counters.Errors[ErrKindTruncated] == 0 || s.Counters.Errors[ErrKindVersion] != 1 {
		t.Errorf("errors = %v", s.Counters.Errors)
	}
}

// TestAggregates checks the per-node latency histograms, drops by node
// and reason, congestion by queue and the flow count that /metrics
// exports.
func TestAggregates(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 1), 1)
	a := c.Aggregates()
	if a.Flows != 1 || a.FlowCapacity != 65536 || a.Counters.ReportsV2 != 3 {
		t.Fatalf("flows %d of %d, reports %d", a.Flows, a.FlowCapacity, a.Counters.ReportsV2)
	}
	nodes := map[uint32]NodeStats{}
	for _, n := range a.Nodes {
		nodes[n.NodeID] = n
	}
	if len(nodes) != 4 {
		t.Fatalf("nodes %v, want 1 to 4", nodes)
	}
	// Hop latencies 1000, 2000 and 3000 ns from the stack; the sink (node
	// 4) reported 4000 ns in its flow report and 50,000 in its
	// intermediate congestion report.
	for id, want := range map[uint32]struct {
		count, sum uint64
		buckets    map[int]uint64
	}{
		1: {1, 1000, map[int]uint64{0: 1}},
		2: {1, 2000, map[int]uint64{1: 1}},
		3: {1, 3000, map[int]uint64{2: 1}},
		4: {2, 54000, map[int]uint64{2: 1, 5: 1}},
	} {
		h := nodes[id].HopLatency
		if h.Count != want.count || h.Sum != want.sum {
			t.Errorf("node %d hop latency: %d samples, sum %d; want %d, %d", id, h.Count, h.Sum, want.count, want.sum)
		}
		for b, n := range h.Buckets {
			if n != want.buckets[b] {
				t.Errorf("node %d hop latency bucket %d (<= %d ns) = %d, want %d", id, b, bounds[b], n, want.buckets[b])
			}
		}
	}
	// The path's end-to-end latency counts at its sink only.
	if p := nodes[4].PathLatency; p.Count != 1 || p.Sum != 10000 || p.Buckets[3] != 1 {
		t.Errorf("node 4 path latency %+v, want one 10 µs sample", p)
	}
	if p := nodes[1].PathLatency; p.Count != 0 {
		t.Errorf("node 1 path latency %+v, want none", p)
	}
	if d := nodes[4].Drops; d == nil || d[71] != 1 || nodes[1].Drops != nil {
		t.Errorf("drops: node 4 %v, node 1 %v", d, nodes[1].Drops)
	}
	want := QueueStats{QueueKey: QueueKey{NodeID: 4, Port: -1, Queue: 3}, Congestion: 1, Occupancy: 5000}
	if len(a.Queues) != 1 || a.Queues[0] != want {
		t.Errorf("queues %+v, want %+v", a.Queues, want)
	}
}

func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	for _, ns := range []uint64{0, 1, 1000, 1001, 2500, 2501, 1e9, 1e9 + 1, 1 << 63} {
		h.observe(ns)
	}
	want := map[int]uint64{0: 3, 1: 2, 2: 1, len(LatencyBuckets) - 1: 1, len(LatencyBuckets): 2}
	for b, n := range h.Buckets {
		if n != want[b] {
			t.Errorf("bucket %d = %d, want %d", b, n, want[b])
		}
	}
	if h.count(); h.Count != 9 {
		t.Errorf("count %d", h.Count)
	}
	// Every value lands in the first bucket whose bound holds it: a
	// geometric series, every bound and its neighbours, every power of two
	// and its neighbours.
	var vals []uint64
	for ns := uint64(0); ns < 3e9; ns = ns*5/4 + 1 {
		vals = append(vals, ns)
	}
	for _, b := range LatencyBuckets {
		vals = append(vals, b-1, b, b+1)
	}
	for n := 0; n < 64; n++ {
		vals = append(vals, 1<<n-1, 1<<n, 1<<n+1)
	}
	for _, ns := range vals {
		var g Histogram
		g.observe(ns)
		i := slices.Index(g.Buckets[:], 1)
		if i < len(LatencyBuckets) && ns > LatencyBuckets[i] || i > 0 && ns <= LatencyBuckets[i-1] {
			t.Fatalf("%d ns in bucket %d", ns, i)
		}
	}
}

func TestTopFlows(t *testing.T) {
	c := New(Config{})
	// Flow i gets i+1 sink reports.
	for i := 0; i < 6; i++ {
		for n := 0; n <= i; n++ {
			frame := mdFrame(t, testHops(), testInst, 0)
			frame[wire.EthernetLen+wire.IPv4MinLen+1] = byte(i)
			b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(n), NodeID: 4})
			h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true, RepMdBits: wire.RepHopLatency}
			b, _ = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: 1}, nil, frame)
			c.HandlePacket(b, int64(i*10+n))
		}
	}
	top := c.TopFlows(3)
	if len(top) != 3 {
		t.Fatalf("%d flows", len(top))
	}
	for k, want := range []uint64{6, 5, 4} {
		if top[k].Reports != want {
			t.Errorf("top %d: %d reports, want %d", k, top[k].Reports, want)
		}
	}
	if all := c.TopFlows(100); len(all) != 6 || all[5].Reports != 1 {
		t.Errorf("TopFlows(100): %d flows", len(all))
	}
	if c.TopFlows(0) != nil {
		t.Error("TopFlows(0) not empty")
	}
}

// benchPayload is a packet of n coalesced sink reports, each embedding a
// 3-hop INT-MD stack, for n distinct flows.
func benchPayload(b testing.TB, n int, seq uint32) []byte { return benchPayloadFlows(b, n, n, seq) }

// benchPayloadFlows is benchPayload with the reports spread over the given
// number of flows, in turn.
func benchPayloadFlows(b testing.TB, n, flows int, seq uint32) []byte {
	p, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: seq, NodeID: 4})
	for i := 0; i < n; i++ {
		frame := mdFrame(b, testHops(), testInst, 0)
		frame[wire.EthernetLen+wire.IPv4MinLen+1] = byte(i % flows)
		h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true,
			RepMdBits: wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue}
		md := wire.ReportMetadata{IngressPort: 1, EgressPort: 9, HopLatency: 4000, QueueOccupancy: 40}
		p, _ = wire.AppendReport(p, &h, &md, nil, frame)
	}
	return p
}

// BenchmarkDecodeAggregate measures decode plus per-flow aggregation of
// sink reports with an embedded 3-hop INT-MD stack (8 per packet, 8
// flows).
func BenchmarkDecodeAggregate(b *testing.B) { benchDecodeAggregate(b, 8) }

// BenchmarkDecodeAggregateOneFlow is BenchmarkDecodeAggregate with every
// report of one flow, as from a sink reporting each packet of a bulk
// transfer.
func BenchmarkDecodeAggregateOneFlow(b *testing.B) { benchDecodeAggregate(b, 1) }

// BenchmarkDecodeAggregateManyFlows is BenchmarkDecodeAggregate over
// 4096 flows (512 packets of 8 reports, each of its own flow, in turn):
// most lookups miss the recent-flow cache and take the index.
func BenchmarkDecodeAggregateManyFlows(b *testing.B) {
	const per, packets = 8, 512
	c := New(Config{})
	pkts := make([][]byte, packets)
	for j := range pkts {
		pkts[j] = benchPayloadFlows(b, per, per, uint32(j))
		// Source ports j*8+i: rewrite each report's in place.
		for i, at := 0, wire.GroupHeaderLen; i < per; i++ {
			l := wire.ReportHeaderLen + int(pkts[j][at+1])*4
			inner := at + wire.ReportHeaderLen + wire.INTReportFixedLen + int(pkts[j][at+2])*4
			binary.BigEndian.PutUint16(pkts[j][inner+wire.EthernetLen+wire.IPv4MinLen:], uint16(10000+j*per+i))
			at += l
		}
		c.HandlePacket(pkts[j], 0)
	}
	if n := len(c.Snapshot(0).Flows); n != per*packets {
		b.Fatalf("%d flows", n)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.handlePacketLocked(pkts[i%packets], int64(i))
	}
	b.StopTimer()
	reportRate(b, b.N*per, cpuTime()-cpu0)
}

func benchDecodeAggregate(b *testing.B, flows int) {
	const per = 8
	c := New(Config{})
	pkts := [][]byte{benchPayloadFlows(b, per, flows, 0), benchPayloadFlows(b, per, flows, 1)}
	c.HandlePacket(pkts[0], 0)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.handlePacketLocked(pkts[i&1], int64(i))
	}
	b.StopTimer()
	reportRate(b, b.N*per, cpuTime()-cpu0)
}

// cpuTime is the process's user+system CPU time. Benchmarks report rates
// per CPU second as well as per wall second, because the machine is shared.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportRate(b *testing.B, n int, cpu time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "reports/s")
	if cpu > 0 {
		b.ReportMetric(float64(n)/cpu.Seconds(), "reports/cpu-s")
	}
}

// nodeReport builds a one-report v2.0 packet from node with the given
// flags and its own hop latency and queue occupancy, embedding frame.
func nodeReport(t testing.TB, node, seq uint32, d, q, i bool, lat uint32, frame []byte) []byte {
	b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: seq, NodeID: node})
	must(t, err)
	h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: d, Congested: q, Intermediate: i, TrackedFlow: true,
		RepMdBits: wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue}
	md := wire.ReportMetadata{IngressPort: 1, EgressPort: 2, HopLatency: lat, QueueOccupancy: lat / 10}
	if d {
		h.RepMdBits |= wire.RepDrop
		md.DropReason = 71
	}
	b, err = wire.AppendReport(b, &h, &md, nil, frame)
	must(t, err)
	return b
}

func pathNodes(f *FlowState) []uint32 {
	var n []uint32
	for i := 0; i < f.NHops; i++ {
		n = append(n, f.Path[i].NodeID)
	}
	return n
}

// TestTransitReportsKeepPath: queue (Q), drop (D) and intermediate (I)
// reports from transit node 2, whose truncated packets carry only node 1's
// hop, update node 2's hop but neither shrink the sink's path nor count
// path changes.
func TestTransitReportsKeepPath(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 1), 1) // sink (node 4) report: 1, 2, 3, 4
	partial := mdFrame(t, testHops()[2:], testInst, 0)
	c.HandlePacket(nodeReport(t, 2, 1, false, true, false, 900_000, partial), 2)
	c.HandlePacket(nodeReport(t, 2, 2, true, false, false, 0, partial), 3)
	c.HandlePacket(nodeReport(t, 2, 3, false, false, true, 700_000, partial), 4)
	// Node 2 pushed its own hop before reporting: the stack is 2, 1.
	c.HandlePacket(nodeReport(t, 2, 4, false, true, false, 800_000, mdFrame(t, testHops()[1:], testInst, 0)), 5)
	f, _ := c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3, 4}) || f.PathChanges != 0 || !f.PathComplete {
		t.Fatalf("path %v changes %d complete %v", pathNodes(&f), f.PathChanges, f.PathComplete)
	}
	h := f.Path[1]
	// Latency samples: the sink's stack (2000) and the report metadata of
	// the Q, D (0), I and last Q reports.
	if h.Latency.Max != 900_000 || h.Latency.Count != 5 || h.Congestion != 2 || h.Drops != 1 || h.Queue.Max != 90_000 {
		t.Errorf("node 2 hop = %+v", h)
	}
	if h := f.Path[0]; h.Latency.Count != 1 || h.Congestion != 0 {
		t.Errorf("node 1 hop = %+v (the partial stacks must not count)", h)
	}
	if f.E2E.Count != 1 {
		t.Errorf("e2e = %+v: partial paths must not add end-to-end samples", f.E2E)
	}
	c.HandlePacket(testPayload(t, 2), 6)
	f, _ = c.Flow(testFlow)
	if f.NHops != 4 || f.PathChanges != 0 || f.Congestion != 4 || f.Drops != 3 {
		t.Errorf("after the sink's next report: %v changes %d congestion %d drops %d", pathNodes(&f), f.PathChanges, f.Congestion, f.Drops)
	}
}

// TestProvisionalPath: before any sink report, transit reports give a
// provisional path that only grows; the first sink report replaces it
// without counting a change; a transit report that disagrees with the
// complete path does not change it.
func TestProvisionalPath(t *testing.T) {
	c := New(Config{})
	hops := testHops()
	c.HandlePacket(nodeReport(t, 3, 1, false, true, false, 5000, mdFrame(t, hops[1:], testInst, 0)), 1)
	f, _ := c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3}) || f.PathComplete || f.Path[2].Congestion != 1 || f.Path[0].Latency.Count != 0 {
		t.Fatalf("provisional path %+v", f.Path[:f.NHops])
	}
	c.HandlePacket(nodeReport(t, 2, 1, false, true, false, 5000, mdFrame(t, hops[2:], testInst, 0)), 2)
	f, _ = c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3}) || f.Path[1].Congestion != 1 {
		t.Fatalf("a shorter prefix shrank the provisional path: %+v", f.Path[:f.NHops])
	}
	c.HandlePacket(testPayload(t, 1), 3)
	f, _ = c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3, 4}) || !f.PathComplete || f.PathChanges != 0 || f.Path[1].Congestion != 1 {
		t.Fatalf("after the sink report: path %v complete %v changes %d hop 1 %+v", pathNodes(&f), f.PathComplete, f.PathChanges, f.Path[1])
	}
	other := testHops()[2:]
	other[0].NodeID = 9
	c.HandlePacket(nodeReport(t, 2, 2, false, true, false, 5000, mdFrame(t, other, testInst, 0)), 4)
	c.HandlePacket(nodeReport(t, 8, 1, false, true, false, 5000, mdFrame(t, other, testInst, 0)), 5)
	f, _ = c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3, 4}) || f.PathChanges != 0 || f.Path[1].Congestion != 2 {
		t.Fatalf("transit reports changed the complete path: %v changes %d", pathNodes(&f), f.PathChanges)
	}
}

// TestPostcardPath: per-node reports without a stack (INT-MX, postcards)
// are ordered by the inner packet's TTL, then by ingress timestamp,
// whatever order they arrive in.
func TestPostcardPath(t *testing.T) {
	frame := mdFrame(t, nil, testInst, 0)[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen]
	postcard := func(node uint32, ttl uint8, ts uint64) []byte {
		fr := append([]byte(nil), frame...)
		fr[wire.EthernetLen+8] = ttl
		b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, NodeID: node})
		must(t, err)
		h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true,
			RepMdBits: wire.RepHopLatency | wire.RepIngressTimestamp}
		b, err = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: node * 100, IngressTimestamp: ts}, nil, fr)
		must(t, err)
		return b
	}
	c := New(Config{})
	c.HandlePacket(postcard(3, 62, 3000), 1)
	c.HandlePacket(postcard(1, 64, 1000), 2)
	c.HandlePacket(postcard(2, 63, 2000), 3)
	// Same TTL (layer-2 hops): ingress timestamps order 5 before 4.
	c.HandlePacket(postcard(4, 61, 5000), 4)
	c.HandlePacket(postcard(5, 61, 4000), 5)
	c.HandlePacket(postcard(1, 64, 9000), 6)
	f, _ := c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3, 5, 4}) || f.PathChanges != 0 || f.PathComplete || f.Path[0].Latency.Count != 2 {
		t.Fatalf("postcard path %v changes %d", pathNodes(&f), f.PathChanges)
	}
	if f.E2E.Last != 100+200+300+500+400 {
		t.Errorf("e2e = %+v", f.E2E)
	}
}

// TestGTPUFlows: postcards of two user equipments' packets in one GTP-U
// tunnel (with extension headers) and of one in another tunnel are three
// flows, each keyed by its inner 5-tuple and TEID, with its path, and the
// JSON decode shows the TEID, the inner flow and the tunnel's ends.
func TestGTPUFlows(t *testing.T) {
	pkt := func(ue string, teid uint32) []byte {
		inner := wiretest.UDPFrame(ue, "192.0.2.53", 4000, 53, []byte("query"), true)[wire.EthernetLen:]
		return wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: teid, GTPUExt: 1}, "10.0.0.1", "10.0.0.2", 0, inner)
	}
	postcard := func(node uint32, frame []byte) []byte {
		b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, NodeID: node})
		must(t, err)
		h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true, RepMdBits: wire.RepHopLatency}
		b, err = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: node * 100}, nil, frame)
		must(t, err)
		return b
	}
	c := New(Config{})
	ue1, ue2, ue1b := pkt("10.250.0.1", 7), pkt("10.250.0.2", 7), pkt("10.250.0.1", 8)
	for n, f := range [][]byte{ue1, ue2, ue1b} {
		for node := uint32(1); node <= 2; node++ {
			f := bytes.Clone(f)
			f[wire.EthernetLen+8] -= uint8(node) // TTL: node 2 after node 1
			c.HandlePacket(postcard(node, f), int64(10*n+int(node)))
		}
	}
	key := func(ue string) wire.FlowKey {
		return wire.FlowKey{Src: netip.MustParseAddr(ue), Dst: netip.MustParseAddr("192.0.2.53"), SrcPort: 4000, DstPort: 53, Proto: wire.ProtoUDP}
	}
	for _, w := range []struct {
		ue   string
		teid uint32
	}{{"10.250.0.1", 7}, {"10.250.0.2", 7}, {"10.250.0.1", 8}} {
		f, ok := c.TunnelFlow(key(w.ue), wire.TunnelGTPU, w.teid)
		if !ok {
			t.Fatalf("no flow of %s in TEID %d: %+v", w.ue, w.teid, c.Snapshot(0).Flows)
		}
		if !slices.Equal(pathNodes(&f), []uint32{1, 2}) || f.E2E.Last != 300 || f.Outer.Dst != netip.MustParseAddr("10.0.0.2") ||
			f.Outer.DstPort != wire.PortGTPU {
			t.Errorf("%s TEID %d: path %v e2e %+v outer %v", w.ue, w.teid, pathNodes(&f), f.E2E, f.Outer)
		}
	}
	if n := len(c.Snapshot(0).Flows); n != 3 {
		t.Errorf("%d flows, want 3", n)
	}
	var got collect
	if _, err := NewDecoder().Decode(postcard(1, ue2), &got); err != nil {
		t.Fatal(err)
	}
	in := got.reps[0].Inner
	if in == nil || in.Tunnel != "gtpu" || in.TunnelID == nil || *in.TunnelID != 7 || in.Src != "10.250.0.2" || *in.DstPort != 53 ||
		in.OuterSrc != "10.0.0.1" {
		t.Errorf("decoded %+v", in)
	}
}

// TestCutStack: a sink report whose embedded packet was truncated inside
// the INT stack shows the whole hops before the cut (the newest), flagged
// Cut, keeps the flow, and neither shrinks nor changes the known path.
func TestCutStack(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 1), 1) // sink (node 4) report: 1, 2, 3, 4
	hopLen := testInst.Words() * 4
	frame := mdFrame(t, testHops(), testInst, 16)
	cut := frame[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen+wire.ShimLen+wire.MDHeaderLen+hopLen+10]
	payload := nodeReport(t, 4, 2, false, false, false, 4000, cut)

	var got []Report
	d := NewDecoder()
	for _, fast := range []bool{true, false} {
		d.noFast = !fast
		if _, err := d.Decode(payload, handlerFunc(func(r *Report) {
			r2 := *r
			r2.INT.Hops = append([]wire.HopMetadata(nil), r.INT.Hops...)
			got = append(got, r2)
		})); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range got {
		if r.InnerErr != nil || !r.HasFlow || r.Flow != testFlow || !r.INT.Present || !r.INT.Cut ||
			len(r.INT.Hops) != 1 || r.INT.Hops[0].NodeID != 3 || r.INT.Hops[0].HopLatency != 3000 {
			t.Fatalf("cut stack decoded as %+v (error %v)", r.INT, r.InnerErr)
		}
	}
	j := ReportToJSON(&got[0])
	if j.Inner == nil || j.Inner.INT == nil || len(j.Inner.INT.Hops) != 1 || j.Inner.Error != "" {
		t.Fatalf("JSON %+v", j.Inner)
	}

	c.HandlePacket(payload, 2)
	f, _ := c.Flow(testFlow)
	if !slices.Equal(pathNodes(&f), []uint32{1, 2, 3, 4}) || f.PathChanges != 0 || !f.PathComplete || f.Reports != 4 {
		t.Fatalf("path %v changes %d complete %v reports %d", pathNodes(&f), f.PathChanges, f.PathComplete, f.Reports)
	}
}

// TestDropReportNoLatency: a drop report carries an ingress timestamp but
// no egress one nor hop latency: it counts the drop, not a latency of 0.
func TestDropReportNoLatency(t *testing.T) {
	c := New(Config{})
	c.HandlePacket(testPayload(t, 1), 1) // sink (node 4) report: 1, 2, 3, 4
	before, _ := c.Flow(testFlow)
	b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: 1, NodeID: 2})
	must(t, err)
	h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: true, TrackedFlow: true,
		RepMdBits: wire.RepL1Ports | wire.RepIngressTimestamp | wire.RepDrop}
	md := wire.ReportMetadata{IngressPort: 1, EgressPort: 2, IngressTimestamp: 5_000_000, DropReason: 71}
	b, err = wire.AppendReport(b, &h, &md, nil, mdFrame(t, testHops()[2:], testInst, 0))
	must(t, err)
	c.HandlePacket(b, 2)
	f, _ := c.Flow(testFlow)
	if got, was := f.Path[1].Latency, before.Path[1].Latency; got != was || f.Path[1].Drops != before.Path[1].Drops+1 {
		t.Fatalf("node 2 latency %+v (was %+v), drops %d", got, was, f.Path[1].Drops)
	}
}

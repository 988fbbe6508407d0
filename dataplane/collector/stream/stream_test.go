package stream

import (
	"context"
	"encoding/json"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/natstest"
	"github.com/intd-project/intd/internal/reporttest"
	"github.com/intd-project/intd/sai/spec"
)

// sinkFrame is a frame of UDP flow sport with an INT-MD stack of nodes
// (top of stack first) with latency lat each.
func sinkFrame(t testing.TB, sport uint16, nodes []uint32, lat uint32) []byte {
	var hops []reporttest.Hop
	for _, n := range nodes {
		hops = append(hops, reporttest.Hop{Node: n, Latency: lat})
	}
	return reporttest.MDFrame(t, reporttest.Flow{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Proto: wire.ProtoUDP,
		SrcPort: sport, DstPort: 80}, hops...)
}

func report(seq uint32, sink uint32, h wire.ReportHeader, md wire.ReportMetadata, frame []byte) []byte {
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: seq, NodeID: sink})
	b, _ = wire.AppendReport(b, &h, &md, nil, frame)
	return b
}

// TestPublishAndQuery publishes a collector's summaries and events to a
// 3-server JetStream cluster and reads them back: events of every kind
// on their subjects, and the query's flows through node 2 above 1 ms.
func TestPublishAndQuery(t *testing.T) {
	cl := natstest.Start(t, 3)
	c := collector.New(collector.Config{})
	var mu sync.Mutex
	acked := map[string]bool{}
	ctx := context.Background()
	p, err := New(ctx, c, Config{URLs: cl.URLs(), Replicas: 3, CollectorID: "c1", SummaryInterval: time.Hour,
		CongestionWindow: 50 * time.Millisecond, OnAck: func(id string) { mu.Lock(); acked[id] = true; mu.Unlock() }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	sinkH := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, RepMdBits: wire.RepHopLatency}
	seq := uint32(0)
	send := func(b []byte) { c.HandlePacket(b, now); seq++; now += 1e6 }
	// Flow 1000: 1 → 2 → 3, 10 µs hops, then a 5 ms hop at node 2 (an
	// anomaly), then a path change through node 4.
	for i := 0; i < 30; i++ {
		send(report(seq, 3, sinkH, wire.ReportMetadata{HopLatency: 10_000}, sinkFrame(t, 1000, []uint32{2, 1}, 10_000)))
	}
	send(report(seq, 3, sinkH, wire.ReportMetadata{HopLatency: 10_000}, sinkFrame(t, 1000, []uint32{2, 1}, 5_000_000)))
	send(report(seq, 3, sinkH, wire.ReportMetadata{HopLatency: 10_000}, sinkFrame(t, 1000, []uint32{4, 1}, 10_000)))
	// Flow 2000: 1 → 2 → 3, fast throughout.
	for i := 0; i < 5; i++ {
		send(report(seq, 3, sinkH, wire.ReportMetadata{HopLatency: 10_000}, sinkFrame(t, 2000, []uint32{2, 1}, 10_000)))
	}
	// Node 2 drops a packet of flow 2000 and reports flow 1000 congested.
	send(report(seq, 2, wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: true, RepMdBits: wire.RepDrop},
		wire.ReportMetadata{DropQueueID: 3, DropReason: uint8(spec.DropRoutingMiss)}, sinkFrame(t, 2000, []uint32{1}, 10_000)))
	for i := 0; i < 3; i++ {
		send(report(seq, 2, wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Congested: true, Intermediate: true,
			RepMdBits: wire.RepL1Ports | wire.RepQueue}, wire.ReportMetadata{EgressPort: 7, QueueID: 1, QueueOccupancy: uint32(100 + i)},
			sinkFrame(t, 1000, []uint32{1}, 10_000)))
	}
	time.Sleep(100 * time.Millisecond) // a congestion window
	p.Close(5 * time.Second)
	if cn := p.Counters(); cn.Acked != cn.Published || cn.Failed != 0 || cn.Dropped != 0 {
		t.Fatalf("counters %+v", cn)
	}

	nc, js, err := Connect(cl.URLs(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := map[string][]EventMessage{}
	cons, err := js.OrderedConsumer(ctx, DefaultStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"int.event.>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	for m := range batch.Messages() {
		var e EventMessage
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		got[m.Subject()] = append(got[m.Subject()], e)
		if acked[m.Headers().Get(jetstream.MsgIDHeader)] {
			ids++
		}
	}
	t.Logf("events: %v", got)
	if l := got["int.event.latency.3"]; len(l) != 1 || l[0].LatencyNs < 5_000_000 || l[0].Flow.SrcPort != 1000 {
		t.Errorf("latency events %+v", l)
	}
	if pc := got["int.event.path-change.3"]; len(pc) != 1 || len(pc[0].OldPath) != 3 || pc[0].OldPath[1] != 2 || pc[0].Path[1] != 4 {
		t.Errorf("path change events %+v", pc)
	}
	if d := got["int.event.drop.2"]; len(d) != 1 || d[0].DropReasonName != "ROUTING_MISS" || *d[0].Queue != 3 || d[0].Flow.SrcPort != 2000 {
		t.Errorf("drop events %+v", d)
	}
	if cg := got["int.event.congestion.2"]; len(cg) != 1 || cg[0].Reports != 3 || cg[0].Occupancy != 102 || *cg[0].Interface != 7 ||
		len(cg[0].Culprits) != 1 || cg[0].Culprits[0].Flow.SrcPort != 1000 {
		t.Errorf("congestion events %+v", cg)
	}
	if ids != 4 {
		t.Errorf("%d events with an acknowledged message ID, want 4", ids)
	}

	q := Query{Node: 2, Above: 1_000_000, Since: 10 * time.Minute}
	res, err := q.Run(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Flow.SrcPort != 1000 || res[0].MaxLatency < 5_000_000 || res[0].Collectors[0] != "c1" {
		t.Errorf("flows through node 2 above 1 ms: %+v", res)
	}
	q.Above = 0
	if res, err = q.Run(ctx, js); err != nil || len(res) != 2 {
		t.Errorf("flows through node 2: %+v, %v", res, err)
	}
	q.Node = 4
	if res, err = q.Run(ctx, js); err != nil || len(res) != 1 || res[0].Flow.Src != netip.MustParseAddr("10.0.0.1").String() {
		t.Errorf("flows through node 4: %+v, %v", res, err)
	}
}

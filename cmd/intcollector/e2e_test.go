package main

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/cmd/internal/gnmilisten"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/promtest"
	"github.com/intd-project/intd/sai/spec"
)

// TestLabEndToEnd runs the in-process lab (h1 - s1 - s2 - s3 - h2, with a
// slow s2 -> s3 link) sending its telemetry reports to a real
// intcollector over UDP, and reads the 3-hop path, per-hop latency and the
// congestion and drop events back through the collector's flow table, its
// gNMI service and /metrics. The UDP bursts congest s2's queue towards the
// slow link; drops are provoked by removing s2's routes for a while.
func TestLabEndToEnd(t *testing.T) {
	c := collector.New(collector.Config{})
	c.Decoder().Parser.DSCP, c.Decoder().Parser.DSCPMask = lab.DSCPValue, lab.DSCPMask
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", gnmi: gnmilisten.Settings{Addr: "127.0.0.1:0", Insecure: true}, exportFlows: 100, flowMetrics: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	clk := soft.NewManualClock(1_700_000_000_000_000_000)
	// The bursty UDP flow stops after 250ms; the TCP flow goes on through
	// the then idle fabric, so its last reports are the sink's.
	flows := lab.DefaultFlows("h1", "h2")
	flows[1].Duration = 250 * time.Millisecond
	l, err := lab.New(lab.Options{Clock: clk, Collector: s.reports, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	// Reports travel over real UDP: settle waits until they stop arriving.
	settle := func() {
		var last uint64
		for i := 0; i < 100; i++ {
			time.Sleep(20 * time.Millisecond)
			n := c.Snapshot(1).Counters.Packets
			if n != 0 && n == last {
				break
			}
			last = n
		}
	}
	// The lab runs much faster than real time: run it in steps, giving
	// the collector time to read the reports from its socket.
	run := func(d time.Duration) {
		for end := clk.Now() + int64(d); clk.Now() < end; {
			l.RunUntil(min(end, clk.Now()+int64(2*time.Millisecond)))
			time.Sleep(time.Millisecond)
		}
	}
	udp := wire.FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 40002, DstPort: 5001, Proto: wire.ProtoUDP}
	// wholePath checks that the UDP flow's path is s1, s2, s3 and never
	// changed: s2's queue and drop reports (whose truncated packets only
	// carry s1's hop in their INT stack) must not replace it.
	wholePath := func(when string) collector.FlowState {
		t.Helper()
		f, ok := c.Flow(udp)
		if !ok {
			t.Fatalf("%s: udp flow missing", when)
		}
		if f.NHops != 3 || !f.PathComplete || f.PathChanges != 0 {
			t.Fatalf("%s: udp flow path %+v (%d hops, complete %v, %d changes), want s1, s2, s3 unchanged",
				when, f.Path[:f.NHops], f.NHops, f.PathComplete, f.PathChanges)
		}
		for h := 0; h < 3; h++ {
			if f.Path[h].NodeID != uint32(h+1) {
				t.Fatalf("%s: udp flow hop %d is node %d, want %d", when, h, f.Path[h].NodeID, h+1)
			}
		}
		return f
	}
	run(200 * time.Millisecond)
	// s2's queue is congested by the UDP bursts: its queue reports arrive
	// between the sink's flow reports.
	settle()
	if f := wholePath("under congestion"); f.Congestion == 0 || f.Path[1].Congestion == 0 {
		t.Errorf("under congestion: udp flow congestion %d, s2 hop congestion %d", f.Congestion, f.Path[1].Congestion)
	}
	// s2 loses its routes for 20ms: it drops the INT packets (routing
	// miss) and reports them.
	if err := l.Switch("s2").SetRoutes(nil); err != nil {
		t.Fatal(err)
	}
	run(20 * time.Millisecond)
	if err := l.Reroute(); err != nil {
		t.Fatal(err)
	}
	run(150 * time.Millisecond)
	// The UDP flow has ended and s2's queue drained. Reports from
	// different switches may arrive out of order: let these arrive, then
	// run the quiet fabric past the sink's 1s flow report interval so that
	// the TCP flow's latest report is the sink's, with the whole path.
	settle()
	run(1100 * time.Millisecond)
	l.Close()
	settle()
	snap := c.Snapshot(0)
	t.Logf("counters: %+v", snap.Counters)
	f, ok := c.Flow(udp)
	if !ok {
		t.Fatalf("udp flow missing; flows %d", len(snap.Flows))
	}
	t.Logf("udp flow: hops %d path %+v e2e %+v drops %d congestion %d", f.NHops, f.Path[:f.NHops], f.E2E, f.Drops, f.Congestion)
	// Both flows keep the whole path: the sink's flow reports set it; s2's
	// queue and drop reports count against s2's hop.
	f = wholePath("at the end")
	if f.Path[1].Drops == 0 {
		t.Errorf("udp flow: no drops counted at s2's hop: %+v", f.Path[1])
	}
	tcp := udp
	tcp.Proto, tcp.SrcPort, tcp.DstPort = wire.ProtoTCP, 40001, 80
	ft, ok := c.Flow(tcp)
	if !ok {
		t.Fatal("tcp flow missing")
	}
	if ft.NHops != 3 || !ft.PathComplete || ft.PathChanges != 0 {
		t.Fatalf("tcp flow: %d hops known, want 3 (s1, s2, s3): %+v", ft.NHops, ft.Path[:ft.NHops])
	}
	for h := 0; h < 3; h++ {
		if p := ft.Path[h]; p.NodeID != uint32(h+1) || p.Latency.Count == 0 || p.Latency.Max == 0 {
			t.Errorf("tcp flow hop %d: %+v, want node id %d with latency samples", h, p, h+1)
		}
	}
	if f.NHops < 2 || f.Path[0].NodeID != 1 || f.Path[1].NodeID != 2 {
		t.Fatalf("path = %+v", f.Path[:f.NHops])
	}
	if f.Path[1].Latency.Max < 200_000 || f.E2E.Max == 0 {
		t.Errorf("s2 latency %+v e2e %+v", f.Path[1].Latency, f.E2E)
	}
	if snap.Counters.Congestion == 0 {
		t.Errorf("no congestion reports")
	}
	if f.Congestion == 0 {
		t.Errorf("no congestion reports for the udp flow")
	}
	if snap.Counters.Drops == 0 || snap.Counters.DropReasons[spec.DropRoutingMiss] == 0 {
		t.Errorf("no routing-miss drop reports (drops %d)", snap.Counters.Drops)
	}
	if f.Drops == 0 {
		t.Errorf("no drop reports for the udp flow")
	}
	fams := promtest.Parse(t, scrapeText(t, s))
	flow := func(proto string, sport, dport int, kv ...string) map[string]string {
		m := map[string]string{"src": "10.0.1.1", "dst": "10.0.2.1", "protocol": proto, "src_port": strconv.Itoa(sport), "dst_port": strconv.Itoa(dport)}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	positive := func(name string, labels map[string]string) {
		t.Helper()
		if v, ok := promtest.Sample(fams, name, labels); !ok || v <= 0 {
			t.Errorf("metrics: %s%v = %v (found %v), want > 0", name, labels, v, ok)
		}
	}
	for h := 0; h < 3; h++ {
		hop := []string{"hop", strconv.Itoa(h), "node_id", strconv.Itoa(h + 1)}
		positive("intcollector_flow_hop_latency_seconds", flow("udp", 40002, 5001, hop...))
		positive("intcollector_flow_hop_latency_seconds", flow("tcp", 40001, 80, hop...))
		// Every switch's hops are in its latency histogram.
		positive("intcollector_hop_latency_seconds", map[string]string{"node_id": strconv.Itoa(h + 1)})
	}
	positive("intcollector_flow_hop_congestion_reports_total", flow("udp", 40002, 5001, "hop", "1", "node_id", "2"))
	positive("intcollector_flow_drop_reports_total", flow("udp", 40002, 5001, "reason", "ROUTING_MISS"))
	positive("intcollector_flow_congestion_reports_total", flow("udp", 40002, 5001))
	positive("intcollector_drop_reports_total", map[string]string{"node_id": "2", "reason": "ROUTING_MISS"})
	positive("intcollector_queue_congestion_reports_total", map[string]string{"node_id": "2"})
	positive("intcollector_end_to_end_latency_seconds", map[string]string{"node_id": "3"})
	if v, ok := promtest.Sample(fams, "intcollector_flow_path_changes_total", flow("udp", 40002, 5001)); !ok || v != 0 {
		t.Errorf("metrics: udp flow path changes %v (found %v), want 0", v, ok)
	}
	promtest.Check(t, scrapeText(t, s))

	// The same through the collector's gNMI.
	// State is published every --state-interval: publish it now.
	s.gnmi.RefreshState(context.Background())
	conn, err := grpc.NewClient(s.gnmiLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flowElem := func(k wire.FlowKey) *gpb.PathElem {
		return &gpb.PathElem{Name: "flow", Key: map[string]string{"src-address": k.Src.String(), "dst-address": k.Dst.String(),
			"protocol": strconv.Itoa(int(k.Proto)), "src-port": strconv.Itoa(int(k.SrcPort)), "dst-port": strconv.Itoa(int(k.DstPort))}}
	}
	get, err := gpb.NewGNMIClient(conn).Get(ctx, &gpb.GetRequest{Encoding: gpb.Encoding_PROTO, Path: []*gpb.Path{
		{Elem: []*gpb.PathElem{{Name: "collector"}, {Name: "flows"}, flowElem(tcp), {Name: "path"}}},
		{Elem: []*gpb.PathElem{{Name: "collector"}, {Name: "flows"}, flowElem(udp), {Name: "state"}, {Name: "counters"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	nodes, lat := map[string]uint64{}, map[string]uint64{}
	for _, u := range get.Notification[0].Update {
		el := u.Path.Elem
		switch {
		case len(el) == 7 && el[6].Name == "node-id":
			nodes[el[4].Key["index"]] = u.Val.GetUintVal()
		case len(el) == 8 && el[6].Name == "latency" && el[7].Name == "max":
			lat[el[4].Key["index"]] = u.Val.GetUintVal()
		}
	}
	if nodes["0"] != 1 || nodes["1"] != 2 || nodes["2"] != 3 || len(nodes) != 3 {
		t.Errorf("gNMI tcp path node ids %v, want 1, 2, 3", nodes)
	}
	if lat["0"] == 0 || lat["1"] == 0 || lat["2"] == 0 || len(lat) != 3 {
		t.Errorf("gNMI tcp hop latencies (max) %v", lat)
	}
	counters := map[string]uint64{}
	for _, u := range get.Notification[1].Update {
		counters[u.Path.Elem[len(u.Path.Elem)-1].Name] = u.Val.GetUintVal()
	}
	if counters["drops"] == 0 || counters["congestion-events"] == 0 || counters["reports"] == 0 {
		t.Errorf("gNMI udp flow counters %v", counters)
	}
}

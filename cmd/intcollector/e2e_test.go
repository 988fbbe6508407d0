package main

import (
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
)

// TestLabEndToEnd runs the in-process lab (h1 - s1 - s2 - s3 - h2, with a
// slow s2 -> s3 link) sending its telemetry reports to a real
// intcollector over UDP, and reads the 3-hop path, per-hop latency and the
// congestion and drop events back through the collector.
func TestLabEndToEnd(t *testing.T) {
	c := collector.New(collector.Config{})
	c.Decoder().Parser.DSCP, c.Decoder().Parser.DSCPMask = 0x17, 0x3f
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", exportFlows: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	clk := soft.NewManualClock(1_700_000_000_000_000_000)
	l, err := lab.New(lab.Options{Clock: clk, Collector: s.reports})
	if err != nil {
		t.Fatal(err)
	}
	l.RunUntil(clk.Now() + int64(200*time.Millisecond))
	l.Close()
	// Reports travel over real UDP: wait until they stop arriving.
	var last uint64
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		n := c.Snapshot(1).Counters.Packets
		if n != 0 && n == last {
			break
		}
		last = n
	}
	snap := c.Snapshot(0)
	t.Logf("counters: %+v", snap.Counters)
	udp := wire.FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 40002, DstPort: 5001, Proto: wire.ProtoUDP}
	f, ok := c.Flow(udp)
	if !ok {
		t.Fatalf("udp flow missing; flows %d", len(snap.Flows))
	}
	t.Logf("udp flow: hops %d path %+v e2e %+v drops %d congestion %d", f.NHops, f.Path[:f.NHops], f.E2E, f.Drops, f.Congestion)
	// TODO(issue 8): the lab currently delivers only queue (Q) reports
	// from s1 and s2 to the collector, no sink flow report from s3 and no
	// drop report, so the full 3-hop path cannot be asserted yet.
	if f.NHops < 2 || f.Path[0].NodeID != 1 || f.Path[1].NodeID != 2 {
		t.Fatalf("path = %+v", f.Path[:f.NHops])
	}
	if f.NHops < 3 {
		t.Logf("only %d hops known: no sink (s3) flow report received", f.NHops)
	}
	if f.Path[1].Latency.Max < 200_000 || f.E2E.Max == 0 {
		t.Errorf("s2 latency %+v e2e %+v", f.Path[1].Latency, f.E2E)
	}
	if snap.Counters.Congestion == 0 {
		t.Errorf("no congestion reports")
	}
	if snap.Counters.Drops == 0 {
		t.Logf("no drop reports from the default lab")
	}
	resp, err := http.Get("http://" + s.httpLn.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	re := regexp.MustCompile(`intcollector_flow_hop_latency_ns\{src="10.0.1.1",dst="10.0.2.1",proto="17",src_port="40002",dst_port="5001",hop="1",node_id="2"[^}]*\} [1-9]`)
	if !re.Match(body) {
		t.Errorf("metrics lack s2's hop latency for the udp flow")
	}
	if errs := snap.Counters.Errors; errs != [len(errs)]uint64{} {
		t.Errorf("malformed: %v", errs)
	}
}

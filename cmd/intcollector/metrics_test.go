package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/promtest"
	"github.com/intd-project/intd/internal/reporttest"
)

// scrapeText GETs /metrics from the service as Prometheus would.
func scrapeText(t *testing.T, s *service) []byte {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	return b
}

// seriesCount counts the series of an exposition (histograms: one per
// bucket, plus sum and count).
func seriesCount(fams map[string]*dto.MetricFamily) int {
	n := 0
	for _, mf := range fams {
		for _, m := range mf.Metric {
			switch {
			case m.Histogram != nil:
				n += len(m.Histogram.Bucket) + 3 // +Inf, sum, count
			case m.Summary != nil:
				n += len(m.Summary.Quantile) + 2
			default:
				n++
			}
		}
	}
	return n
}

// sendFlows sends one sink report per flow (n flows, 3-hop paths through
// nodes 1 to 3, sink 4; every tenth with a drop and a congestion report)
// and waits until the collector has them all.
func sendFlows(t *testing.T, s *service, c *collector.Collector, n int) {
	t.Helper()
	u, err := net.Dial("udp", s.reports)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	sent := 0
	for i := 0; i < n; i++ {
		b := flowReport(t, uint32(i+1), wire.FlowKey{Proto: wire.ProtoUDP, SrcPort: uint16(1024 + i%60000), DstPort: 53}, byte(i>>8), byte(i), i%10 == 0)
		u.Write(b)
		sent++
		if sent%500 == 0 { // let the collector keep up on a busy machine
			waitPackets(t, c, uint64(sent))
		}
	}
	waitPackets(t, c, uint64(sent))
}

func waitPackets(t *testing.T, c *collector.Collector, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Aggregates().Counters.Packets < n {
		if time.Now().After(deadline) {
			t.Fatalf("collector received %d of %d report packets", c.Aggregates().Counters.Packets, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// flowReport is a v2.0 report packet from sink node 4 for a UDP flow from
// 10.1.a.b: its flow report with a 3-hop INT-MD stack, and with extra a
// drop report (routing miss) and a congestion report (port 2, queue 1).
func flowReport(t *testing.T, seq uint32, k wire.FlowKey, a, b byte, extra bool) []byte {
	var hops []reporttest.Hop
	for _, n := range []uint32{3, 2, 1} {
		hops = append(hops, reporttest.Hop{Node: n, Latency: n*1000 + uint32(b), Queue: n})
	}
	f := reporttest.MDFrame(t, reporttest.Flow{Src: [4]byte{10, 1, a, b}, Dst: [4]byte{10, 2, 0, 1}, Proto: k.Proto, SrcPort: k.SrcPort, DstPort: k.DstPort}, hops...)
	if !extra {
		return reporttest.Group(seq, f, 500)
	}
	return reporttest.Group(seq, f, 500, reporttest.Drop(29),
		reporttest.Congestion(wire.RepL1Ports|wire.RepQueue, wire.ReportMetadata{EgressPort: 2, QueueID: 1, QueueOccupancy: 900}))
}

// TestMetricsScale: 10,000 flows through a running collector keep the
// default scrape under 1,000 series, report the real flow table size,
// and pass promtool's lint; with --flow-metrics the per-flow series are
// bounded by it.
func TestMetricsScale(t *testing.T) {
	c := collector.New(collector.Config{})
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", batch: collector.DefaultBatch})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	const flows = 10000
	sendFlows(t, s, c, flows)
	text := scrapeText(t, s)
	fams := promtest.Parse(t, text)
	n := seriesCount(fams)
	t.Logf("%d flows: %d series, %d bytes per scrape", flows, n, len(text))
	if n >= 1000 {
		t.Errorf("%d series for %d flows, want under 1,000", n, flows)
	}
	if v, _ := promtest.Sample(fams, "intcollector_flows", nil); v != flows {
		t.Errorf("intcollector_flows = %v, want %d", v, flows)
	}
	if v, _ := promtest.Sample(fams, "intcollector_drop_reports_total", map[string]string{"node_id": "4", "reason": "ROUTING_MISS"}); v != flows/10 {
		t.Errorf("routing-miss drops at node 4 = %v, want %d", v, flows/10)
	}
	if v, _ := promtest.Sample(fams, "intcollector_hop_latency_seconds", map[string]string{"node_id": "2"}); v != flows {
		t.Errorf("node 2 hop latency samples = %v, want %d", v, flows)
	}
	for _, name := range []string{"intcollector_build_info", "process_cpu_seconds_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if v, ok := promtest.Sample(fams, "intcollector_build_info", map[string]string{}); !ok || v != 1 {
		t.Errorf("intcollector_build_info = %v", v)
	}
	for name := range fams {
		if strings.HasPrefix(name, "intcollector_flow_") {
			t.Errorf("per-flow series %s without --flow-metrics", name)
		}
	}
	promtest.Check(t, text)

	s2, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", batch: collector.DefaultBatch, flowMetrics: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.stop()
	text = scrapeText(t, s2)
	fams = promtest.Parse(t, text)
	if got := len(fams["intcollector_flow_reports_total"].GetMetric()); got != 100 {
		t.Errorf("--flow-metrics 100: %d flows with series", got)
	}
	t.Logf("--flow-metrics 100: %d series, %d bytes", seriesCount(fams), len(text))
	promtest.Check(t, text)

	if _, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", flowMetrics: 1001}); err == nil ||
		!strings.Contains(err.Error(), "--flow-metrics") {
		t.Errorf("--flow-metrics 1001: %v", err)
	}
}

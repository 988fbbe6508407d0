package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/promtest"
	"github.com/intd-project/intd/internal/reporttest"
)

// report builds a v2.0 report packet from sink node 4: a flow report
// embedding a UDP frame with a 3-hop INT-MD stack (nodes 1, 2, 3 with hop
// latencies of 1, 20 and 300 µs), then a drop report (reason 29, routing
// miss) and a congestion report from egress port 9, queue 2, for the same
// flow.
func report(t testing.TB, seq uint32, srcPort uint16) []byte {
	f := reporttest.MDFrame(t, reporttest.Flow{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Proto: wire.ProtoUDP, SrcPort: srcPort, DstPort: 2222},
		reporttest.Hop{Node: 3, Latency: 300_000, Queue: 7}, reporttest.Hop{Node: 2, Latency: 20_000, Queue: 7}, reporttest.Hop{Node: 1, Latency: 1000, Queue: 7})
	return reporttest.Group(seq, f, 4000, reporttest.Drop(29),
		reporttest.Congestion(wire.RepL1Ports|wire.RepQueue, wire.ReportMetadata{IngressPort: 1, EgressPort: 9, QueueID: 2, QueueOccupancy: 999}))
}

// scrape gathers e and returns the exposition text and its parsed families.
func scrape(t *testing.T, e *Exporter) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String(), promtest.Parse(t, b.Bytes())
}

// value finds the sample of family name with exactly labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Metric, bool) {
	t.Helper()
	mf := fams[name]
	if mf == nil {
		return nil, false
	}
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func TestExporter(t *testing.T) {
	c := collector.New(collector.Config{})
	c.HandlePacket(report(t, 1, 1111), 1)
	c.HandlePacket(report(t, 3, 1111), 2) // seq 2 lost

	e, err := New(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	text, fams := scrape(t, e)
	if strings.Contains(text, "_ns") || strings.Contains(text, "intcollector_flow_") {
		t.Errorf("exposition has nanosecond or per-flow series by default:\n%s", text)
	}
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		m, ok := value(t, fams, name, labels)
		if !ok {
			t.Errorf("no %s%v", name, labels)
			return
		}
		var got float64
		switch {
		case m.Counter != nil:
			got = m.Counter.GetValue()
		case m.Gauge != nil:
			got = m.Gauge.GetValue()
		}
		if got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("intcollector_packets_total", nil, 2)
	check("intcollector_reports_total", map[string]string{"version": "2.0"}, 6)
	check("intcollector_reports_lost_total", nil, 1)
	check("intcollector_flows", nil, 1)
	check("intcollector_drop_reports_total", map[string]string{"node_id": "4", "reason": "ROUTING_MISS"}, 2)
	q := map[string]string{"node_id": "4", "interface": "9", "queue": "2"}
	check("intcollector_queue_congestion_reports_total", q, 2)
	check("intcollector_queue_occupancy", q, 999)
	check("intcollector_source_reports_total", map[string]string{"node_id": "4", "hw_id": "0", "version": "2.0"}, 6)

	// Node 2's hops: two samples of 20 µs, in the 25 µs bucket and up.
	m, ok := value(t, fams, "intcollector_hop_latency_seconds", map[string]string{"node_id": "2"})
	if !ok || m.Histogram == nil {
		t.Fatalf("no hop latency histogram for node 2:\n%s", text)
	}
	h := m.Histogram
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 40e-6 {
		t.Errorf("node 2 hop latency: %d samples, sum %v s", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.Bucket {
		want := uint64(0)
		if b.GetUpperBound() >= 25e-6 {
			want = 2
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("node 2 bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	// End to end: 1+20+300+4 µs, counted at the sink.
	m, ok = value(t, fams, "intcollector_end_to_end_latency_seconds", map[string]string{"node_id": "4"})
	if !ok || m.Histogram.GetSampleCount() != 2 || m.Histogram.GetSampleSum() < 2*325e-6*0.999 || m.Histogram.GetSampleSum() > 2*325e-6*1.001 {
		t.Errorf("end-to-end latency at node 4: %v", m)
	}
	if _, ok := value(t, fams, "intcollector_end_to_end_latency_seconds", map[string]string{"node_id": "1"}); ok {
		t.Error("end-to-end latency counted at node 1, not the sink")
	}

	// Per-flow series when asked for.
	e, _ = New(c, 10)
	_, fams = scrape(t, e)
	fl := map[string]string{"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp", "src_port": "1111", "dst_port": "2222"}
	with := func(kv ...string) map[string]string { return promtest.Labels(fl, kv...) }
	check("intcollector_flow_reports_total", fl, 6)
	check("intcollector_flow_drop_reports_total", with("reason", "ROUTING_MISS"), 2)
	check("intcollector_flow_hop_latency_seconds", with("hop", "1", "node_id", "2", "ingress_interface", "1", "egress_interface", "2"), 20e-6)
	check("intcollector_flow_hop_max_latency_seconds", with("hop", "2", "node_id", "3", "ingress_interface", "1", "egress_interface", "2"), 300e-6)
	check("intcollector_flow_hop_congestion_reports_total", with("hop", "3", "node_id", "4", "egress_interface", "9", "queue", "2"), 2)
}

func TestFlowSeriesBound(t *testing.T) {
	c := collector.New(collector.Config{})
	for _, n := range []int{-1, MaxFlowSeries + 1} {
		if _, err := New(c, n); err == nil {
			t.Errorf("New(%d) accepted", n)
		}
	}
	// 50 flows, flow i with i+1 packets: the top 5 are flows 45 to 49.
	seq := uint32(0)
	for i := 0; i < 50; i++ {
		for k := 0; k <= i; k++ {
			seq++
			c.HandlePacket(report(t, seq, uint16(10000+i)), int64(seq))
		}
	}
	e, _ := New(c, 5)
	_, fams := scrape(t, e)
	got := map[string]bool{}
	for _, m := range fams["intcollector_flow_reports_total"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "src_port" {
				got[l.GetValue()] = true
			}
		}
	}
	if len(got) != 5 || !got["10049"] || !got["10045"] || got["10044"] {
		t.Errorf("flows with series: %v, want src ports 10045-10049", got)
	}
	if n := fams["intcollector_flows"].GetMetric()[0].GetGauge().GetValue(); n != 50 {
		t.Errorf("intcollector_flows = %v, want the table's 50", n)
	}
}

func TestNames(t *testing.T) {
	for r, want := range map[uint8]string{29: "ROUTING_MISS", 71: "TRAFFIC_MANAGER", 0: "UNKNOWN", 200: "200"} {
		if got := DropReason(r); got != want {
			t.Errorf("DropReason(%d) = %q, want %q", r, got, want)
		}
	}
	for p, want := range map[uint8]string{6: "tcp", 17: "udp", 1: "icmp", 58: "ipv6-icmp", 253: "253"} {
		if got := Protocol(p); got != want {
			t.Errorf("Protocol(%d) = %q, want %q", p, got, want)
		}
	}
}

package collector

import (
	"bufio"
	"io"
	"strconv"

	"github.com/intd-project/intd/dataplane/wire"
)

// WriteMetrics writes s in the Prometheus text exposition format (0.0.4).
func WriteMetrics(w io.Writer, s *Snapshot) error {
	b := bufio.NewWriter(w)
	m := metricWriter{b: b}
	c := &s.Counters
	m.head("intcollector_packets_total", "counter", "Telemetry report packets received.")
	m.val("intcollector_packets_total", "", c.Packets)
	m.head("intcollector_reports_total", "counter", "Individual reports decoded, by report format version.")
	m.val("intcollector_reports_total", `version="2.0"`, c.ReportsV2)
	m.val("intcollector_reports_total", `version="0.5"`, c.ReportsV05)
	m.head("intcollector_malformed_total", "counter", "Malformed packets or inner packets, by kind of error.")
	for k, n := range c.Errors {
		m.val("intcollector_malformed_total", `kind="`+ErrorKindNames[k]+`"`, n)
	}
	m.head("intcollector_reports_lost_total", "counter", "Reports missing from (node, hw_id) sequence gaps.")
	m.val("intcollector_reports_lost_total", "", c.Lost)
	m.head("intcollector_drop_reports_total", "counter", "Drop reports, by drop reason.")
	for r, n := range c.DropReasons {
		if n != 0 {
			m.val("intcollector_drop_reports_total", `reason="`+strconv.Itoa(r)+`"`, n)
		}
	}
	m.head("intcollector_congestion_reports_total", "counter", "Reports with the congested-queue (Q) flag.")
	m.val("intcollector_congestion_reports_total", "", c.Congestion)
	m.head("intcollector_flows", "gauge", "Flows in the flow table.")
	m.val("intcollector_flows", "", uint64(len(s.Flows)))
	m.head("intcollector_flows_created_total", "counter", "Flows added to the flow table.")
	m.val("intcollector_flows_created_total", "", c.FlowsCreated)
	m.head("intcollector_flows_evicted_total", "counter", "Flows evicted from the full flow table.")
	m.val("intcollector_flows_evicted_total", "", c.FlowsEvicted)
	m.head("intcollector_reports_without_flow_total", "counter", "Reports whose inner packet gave no flow.")
	m.val("intcollector_reports_without_flow_total", "", c.NoFlow)

	m.head("intcollector_source_reports_total", "counter", "Reports per reporting node and hw_id.")
	for i := range s.Sources {
		src := &s.Sources[i]
		m.val("intcollector_source_reports_total", srcLabels(src), src.Reports)
	}
	m.head("intcollector_source_reports_lost_total", "counter", "Reports lost per reporting node and hw_id.")
	for i := range s.Sources {
		src := &s.Sources[i]
		m.val("intcollector_source_reports_lost_total", srcLabels(src), src.Lost)
	}

	m.head("intcollector_flow_reports_total", "counter", "Reports per flow.")
	for i := range s.Flows {
		m.val("intcollector_flow_reports_total", flowLabels(&s.Flows[i]), s.Flows[i].Reports)
	}
	m.head("intcollector_flow_e2e_latency_ns", "gauge", "Last end-to-end latency of the flow (sum of hop latencies).")
	for i := range s.Flows {
		m.val("intcollector_flow_e2e_latency_ns", flowLabels(&s.Flows[i]), s.Flows[i].E2E.Last)
	}
	m.head("intcollector_flow_drops_total", "counter", "Drop reports per flow and drop reason.")
	for i := range s.Flows {
		f := &s.Flows[i]
		for _, d := range f.DropReasons {
			if d.Count != 0 {
				m.val("intcollector_flow_drops_total", flowLabels(f)+`,reason="`+strconv.Itoa(int(d.Reason))+`"`, d.Count)
			}
		}
		if f.DropOther != 0 {
			m.val("intcollector_flow_drops_total", flowLabels(f)+`,reason="other"`, f.DropOther)
		}
	}
	m.head("intcollector_flow_congestion_total", "counter", "Congested-queue reports per flow.")
	for i := range s.Flows {
		m.val("intcollector_flow_congestion_total", flowLabels(&s.Flows[i]), s.Flows[i].Congestion)
	}
	m.head("intcollector_flow_path_changes_total", "counter", "Path changes seen per flow.")
	for i := range s.Flows {
		m.val("intcollector_flow_path_changes_total", flowLabels(&s.Flows[i]), s.Flows[i].PathChanges)
	}
	m.head("intcollector_flow_hop_latency_ns", "gauge", "Last latency of each hop of the flow's path (hop 0 is the first).")
	for i := range s.Flows {
		f := &s.Flows[i]
		for h := 0; h < f.NHops; h++ {
			m.val("intcollector_flow_hop_latency_ns", hopLabels(f, h), f.Path[h].Latency.Last)
		}
	}
	m.head("intcollector_flow_hop_max_latency_ns", "gauge", "Largest latency of each hop of the flow's path.")
	for i := range s.Flows {
		f := &s.Flows[i]
		for h := 0; h < f.NHops; h++ {
			m.val("intcollector_flow_hop_max_latency_ns", hopLabels(f, h), f.Path[h].Latency.Max)
		}
	}
	m.head("intcollector_flow_hop_queue_occupancy", "gauge", "Last queue occupancy of each hop of the flow's path.")
	for i := range s.Flows {
		f := &s.Flows[i]
		for h := 0; h < f.NHops; h++ {
			if f.Path[h].Queue.Count != 0 {
				m.val("intcollector_flow_hop_queue_occupancy", hopLabels(f, h), f.Path[h].Queue.Last)
			}
		}
	}
	m.head("intcollector_flow_hop_congestion_total", "counter", "Queue-congestion reports of each hop of the flow's path (reports with Q set from that node).")
	for i := range s.Flows {
		f := &s.Flows[i]
		for h := 0; h < f.NHops; h++ {
			m.val("intcollector_flow_hop_congestion_total", hopLabels(f, h), f.Path[h].Congestion)
		}
	}
	m.head("intcollector_flow_hop_drops_total", "counter", "Drop reports of each hop of the flow's path (from that node).")
	for i := range s.Flows {
		f := &s.Flows[i]
		for h := 0; h < f.NHops; h++ {
			m.val("intcollector_flow_hop_drops_total", hopLabels(f, h), f.Path[h].Drops)
		}
	}
	return b.Flush()
}

type metricWriter struct{ b *bufio.Writer }

func (m metricWriter) head(name, typ, help string) {
	m.b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func (m metricWriter) val(name, labels string, v uint64) {
	m.b.WriteString(name)
	if labels != "" {
		m.b.WriteString("{" + labels + "}")
	}
	m.b.WriteByte(' ')
	m.b.WriteString(strconv.FormatUint(v, 10))
	m.b.WriteByte('\n')
}

func srcLabels(s *SourceState) string {
	v := "2.0"
	if s.Version != wire.Version2 {
		v = "0.5"
	}
	return `node_id="` + strconv.FormatUint(uint64(s.NodeID), 10) + `",hw_id="` + strconv.Itoa(int(s.HWID)) + `",version="` + v + `"`
}

// flowLabels are the flow's 5-tuple labels (values need no escaping:
// addresses and numbers only).
func flowLabels(f *FlowState) string {
	k := &f.Key
	return `src="` + k.Src.String() + `",dst="` + k.Dst.String() + `",proto="` + strconv.Itoa(int(k.Proto)) +
		`",src_port="` + strconv.Itoa(int(k.SrcPort)) + `",dst_port="` + strconv.Itoa(int(k.DstPort)) + `"`
}

func hopLabels(f *FlowState, h int) string {
	p := &f.Path[h]
	return flowLabels(f) + `,hop="` + strconv.Itoa(h) + `",node_id="` + strconv.FormatUint(uint64(p.NodeID), 10) +
		`",ingress_if="` + strconv.Itoa(int(p.IngressPort)) + `",egress_if="` + strconv.Itoa(int(p.EgressPort)) + `"`
}

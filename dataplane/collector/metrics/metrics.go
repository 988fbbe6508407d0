// Package metrics exposes a collector.Collector to Prometheus as a
// prometheus.Collector: counters of the reports received, the flow table,
// latency histograms per node (hop latency, and end-to-end latency of the
// paths a node ends), drops by node and reason, congestion by queue, and,
// only when asked for, series for the flows with the most reports.
//
// Each scrape copies the collector's aggregates under its lock; their
// size depends on the number of nodes, sources and queues, not on the
// number of flows, so a busy collector's scrape stays small. Label values
// are names where the number has one (drop reasons from the spec table,
// IP protocols); node, interface and queue IDs are their numbers.
package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// MaxFlowSeries bounds the flows given their own series (about 40 series
// each with a full path).
const MaxFlowSeries = 1000

// Exporter is a prometheus.Collector reading a collector.Collector.
type Exporter struct {
	c      *collector.Collector
	flows  int
	d      descs
	stream func() StreamCounters
}

// StreamCounters count the messages published to NATS JetStream.
type StreamCounters struct {
	Published, Acked, Failed, Retried, Dropped uint64
}

// SetStream exports the counters fn returns (call before registering).
func (e *Exporter) SetStream(fn func() StreamCounters) { e.stream = fn }

type descs struct {
	packets, reports, malformed, lost, noFlow, congestion            *prometheus.Desc
	flows, flowTable, flowsCreated, flowsEvicted                     *prometheus.Desc
	overflow, evicted, seqResets, outOfWindow, rejected              *prometheus.Desc
	srcResets, srcOutOfWindow                                        *prometheus.Desc
	srcReports, srcLost, srcReordered                                *prometheus.Desc
	hopLatency, pathLatency, drops                                   *prometheus.Desc
	queueCongestion, queueOccupancy                                  *prometheus.Desc
	flowReports, flowDrops, flowCongestion, flowChanges, flowLatency *prometheus.Desc
	flowHopLatency, flowHopMaxLatency, flowHopQueue                  *prometheus.Desc
	flowHopCongestion, flowHopDrops                                  *prometheus.Desc
	streamMessages, streamDropped                                    *prometheus.Desc
}

// New returns an exporter of c. flows is how many flows get their own
// series: those with the most reports, at most MaxFlowSeries (0: none).
func New(c *collector.Collector, flows int) (*Exporter, error) {
	if flows < 0 || flows > MaxFlowSeries {
		return nil, fmt.Errorf("per-flow series for %d flows: the range is 0 to %d", flows, MaxFlowSeries)
	}
	const ns = "intcollector_"
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(ns+name, help, labels, nil)
	}
	src := []string{"node_id", "hw_id", "version"}
	flow := []string{"src", "dst", "protocol", "src_port", "dst_port"}
	hop := append(flow[:len(flow):len(flow)], "hop", "node_id")
	e := &Exporter{c: c, flows: flows, d: descs{
		packets:    d("packets_total", "Telemetry report packets received."),
		reports:    d("reports_total", "Individual reports decoded, by report format version.", "version"),
		malformed:  d("malformed_total", "Malformed report packets or embedded packets, by kind of error.", "kind"),
		lost:       d("reports_lost_total", "Report packets missing from gaps in their (node, hw_id) sequence numbers, within the loss window."),
		noFlow:     d("reports_without_flow_total", "Reports whose embedded packet gave no flow."),
		congestion: d("congestion_reports_total", "Reports with the congested-queue (Q) flag."),

		flows:        d("flows", "Flows in the flow table."),
		flowTable:    d("flows_limit", "Size of the flow table: flows beyond it evict the least recently updated."),
		flowsCreated: d("flows_created_total", "Flows added to the flow table."),
		flowsEvicted: d("flows_evicted_total", "Flows evicted from the full flow table."),
		overflow:     d("table_full_total", "Samples not aggregated because a table was full, by table.", "table"),
		evicted:      d("sources_evicted_total", "Sequence trackers of reporting nodes evicted to make room for a new one (new and idle nodes first)."),
		seqResets:    d("sequence_resets_total", "Report sequences that restarted: two numbers in a row beyond the loss window of their node's last one."),
		outOfWindow:  d("sequence_out_of_window_total", "Report packets whose sequence number was beyond the loss window of their node's last one (not counted as loss)."),
		rejected:     d("rejected_packets_total", "Datagrams ignored because their sender is outside the accepted addresses (--allow)."),

		srcReports:     d("source_reports_total", "Reports per reporting node and hardware ID.", src...),
		srcLost:        d("source_reports_lost_total", "Report packets lost per reporting node and hardware ID (sequence gaps within the loss window).", src...),
		srcReordered:   d("source_reports_reordered_total", "Report packets at or behind the last sequence number per reporting node and hardware ID.", src...),
		srcResets:      d("source_sequence_resets_total", "Report sequences that restarted, per reporting node and hardware ID.", src...),
		srcOutOfWindow: d("source_sequence_out_of_window_total", "Report packets with a sequence number beyond the loss window, per reporting node and hardware ID.", src...),

		hopLatency:  d("hop_latency_seconds", "Hop latency reported for the node's hops, all flows.", "node_id"),
		pathLatency: d("end_to_end_latency_seconds", "End-to-end latency of packets (the sum of their hop latencies), by the last node of their path (the sink).", "node_id"),
		drops:       d("drop_reports_total", "Drop reports, by reporting node and drop reason.", "node_id", "reason"),

		queueCongestion: d("queue_congestion_reports_total", "Congested-queue (Q) reports by node, egress interface and queue.", "node_id", "interface", "queue"),
		queueOccupancy:  d("queue_occupancy", "Queue occupancy in the last congested-queue report that carried it, in the node's units.", "node_id", "interface", "queue"),

		streamMessages: d("stream_messages_total", "Summary and event messages published to NATS JetStream, by outcome: published (sent once), acknowledged (stored by JetStream), failed (not stored after the retries), retried (publishes repeated).", "outcome"),
		streamDropped:  d("stream_events_dropped_total", "Events not published because the publisher's queue was full."),

		flowReports:    d("flow_reports_total", "Reports per flow.", flow...),
		flowDrops:      d("flow_drop_reports_total", "Drop reports per flow and drop reason.", append(flow[:len(flow):len(flow)], "reason")...),
		flowCongestion: d("flow_congestion_reports_total", "Congested-queue (Q) reports per flow.", flow...),
		flowChanges:    d("flow_path_changes_total", "Path changes seen per flow.", flow...),
		flowLatency:    d("flow_end_to_end_latency_seconds", "Last end-to-end latency of the flow.", flow...),

		flowHopLatency:    d("flow_hop_latency_seconds", "Last latency of each hop of the flow's path (hop 0 is the first).", append(hop[:len(hop):len(hop)], "ingress_interface", "egress_interface")...),
		flowHopMaxLatency: d("flow_hop_max_latency_seconds", "Largest latency of each hop of the flow's path.", append(hop[:len(hop):len(hop)], "ingress_interface", "egress_interface")...),
		flowHopQueue:      d("flow_hop_queue_occupancy", "Last queue occupancy of each hop of the flow's path, in the node's units.", append(hop[:len(hop):len(hop)], "egress_interface", "queue")...),
		flowHopCongestion: d("flow_hop_congestion_reports_total", "Congested-queue (Q) reports for the flow from each hop of its path.", append(hop[:len(hop):len(hop)], "egress_interface", "queue")...),
		flowHopDrops:      d("flow_hop_drop_reports_total", "Drop reports for the flow from each hop of its path.", hop...),
	}}
	return e, nil
}

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	d := &e.d
	for _, x := range []*prometheus.Desc{d.packets, d.reports, d.malformed, d.lost, d.noFlow, d.congestion,
		d.flows, d.flowTable, d.flowsCreated, d.flowsEvicted, d.overflow,
		d.evicted, d.seqResets, d.outOfWindow, d.rejected, d.srcResets, d.srcOutOfWindow,
		d.srcReports, d.srcLost, d.srcReordered, d.hopLatency, d.pathLatency, d.drops,
		d.queueCongestion, d.queueOccupancy} {
		ch <- x
	}
	if e.stream != nil {
		ch <- d.streamMessages
		ch <- d.streamDropped
	}
	if e.flows > 0 {
		for _, x := range []*prometheus.Desc{d.flowReports, d.flowDrops, d.flowCongestion, d.flowChanges, d.flowLatency,
			d.flowHopLatency, d.flowHopMaxLatency, d.flowHopQueue, d.flowHopCongestion, d.flowHopDrops} {
			ch <- x
		}
	}
}

// Collect implements prometheus.Collector.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	d := &e.d
	a := e.c.Aggregates()
	c := &a.Counters
	counter := func(desc *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(desc *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, lv...)
	}
	counter(d.packets, c.Packets)
	counter(d.reports, c.ReportsV2, "2.0")
	counter(d.reports, c.ReportsV05, "0.5")
	for k, n := range c.Errors {
		counter(d.malformed, n, collector.ErrorKindNames[k])
	}
	counter(d.lost, c.Lost)
	counter(d.noFlow, c.NoFlow)
	counter(d.congestion, c.Congestion)
	gauge(d.flows, float64(a.Flows))
	gauge(d.flowTable, float64(a.FlowCapacity))
	counter(d.flowsCreated, c.FlowsCreated)
	counter(d.flowsEvicted, c.FlowsEvicted)
	counter(d.overflow, c.SourcesOverflow, "sources")
	counter(d.overflow, c.NodesOverflow, "nodes")
	counter(d.overflow, c.QueuesOverflow, "queues")
	counter(d.evicted, c.SourcesEvicted)
	counter(d.seqResets, c.SeqResets)
	counter(d.outOfWindow, c.OutOfWindow)
	counter(d.rejected, c.Rejected)

	for i := range a.Sources {
		s := &a.Sources[i]
		lv := []string{u32(s.NodeID), strconv.Itoa(int(s.HWID)), s.VersionName()}
		counter(d.srcReports, s.Reports, lv...)
		counter(d.srcLost, s.Lost, lv...)
		counter(d.srcReordered, s.Reordered, lv...)
		counter(d.srcResets, s.Resets, lv...)
		counter(d.srcOutOfWindow, s.OutOfWindow, lv...)
	}
	for i := range a.Nodes {
		n := &a.Nodes[i]
		node := u32(n.NodeID)
		if n.HopLatency.Count != 0 {
			ch <- histogram(d.hopLatency, &n.HopLatency, node)
		}
		if n.PathLatency.Count != 0 {
			ch <- histogram(d.pathLatency, &n.PathLatency, node)
		}
		if n.Drops != nil {
			for r, v := range n.Drops {
				if v != 0 {
					counter(d.drops, v, node, DropReason(uint8(r)))
				}
			}
		}
	}
	for i := range a.Queues {
		q := &a.Queues[i]
		lv := []string{u32(q.NodeID), optional(int(q.Port)), optional(int(q.Queue))}
		counter(d.queueCongestion, q.Congestion, lv...)
		if q.Queue >= 0 {
			gauge(d.queueOccupancy, float64(q.Occupancy), lv...)
		}
	}
	if e.stream != nil {
		s := e.stream()
		counter(d.streamMessages, s.Published, "published")
		counter(d.streamMessages, s.Acked, "acknowledged")
		counter(d.streamMessages, s.Failed, "failed")
		counter(d.streamMessages, s.Retried, "retried")
		counter(d.streamDropped, s.Dropped)
	}
	if e.flows > 0 {
		for _, f := range e.c.TopFlows(e.flows) {
			e.collectFlow(ch, &f, counter, gauge)
		}
	}
}

func (e *Exporter) collectFlow(ch chan<- prometheus.Metric, f *collector.FlowState,
	counter func(*prometheus.Desc, uint64, ...string), gauge func(*prometheus.Desc, float64, ...string)) {
	d := &e.d
	k := &f.Key
	fl := []string{k.Src.String(), k.Dst.String(), Protocol(k.Proto), strconv.Itoa(int(k.SrcPort)), strconv.Itoa(int(k.DstPort))}
	with := func(extra ...string) []string { return append(fl[:len(fl):len(fl)], extra...) }
	counter(d.flowReports, f.Reports, fl...)
	counter(d.flowCongestion, f.Congestion, fl...)
	counter(d.flowChanges, f.PathChanges, fl...)
	if f.E2E.Count != 0 {
		gauge(d.flowLatency, seconds(f.E2E.Last), fl...)
	}
	for _, dc := range f.DropReasons {
		if dc.Count != 0 {
			counter(d.flowDrops, dc.Count, with(DropReason(dc.Reason))...)
		}
	}
	if f.DropOther != 0 {
		counter(d.flowDrops, f.DropOther, with("other")...)
	}
	for h := 0; h < f.NHops; h++ {
		p := &f.Path[h]
		hop := with(strconv.Itoa(h), u32(p.NodeID))
		hopWith := func(extra ...string) []string { return append(hop[:len(hop):len(hop)], extra...) }
		egress, queue := strconv.Itoa(int(p.EgressPort)), strconv.Itoa(int(p.QueueID))
		if p.Latency.Count != 0 {
			ports := hopWith(strconv.Itoa(int(p.IngressPort)), egress)
			gauge(d.flowHopLatency, seconds(p.Latency.Last), ports...)
			gauge(d.flowHopMaxLatency, seconds(p.Latency.Max), ports...)
		}
		if p.Queue.Count != 0 {
			gauge(d.flowHopQueue, float64(p.Queue.Last), hopWith(egress, queue)...)
		}
		counter(d.flowHopCongestion, p.Congestion, hopWith(egress, queue)...)
		counter(d.flowHopDrops, p.Drops, hop...)
	}
}

// histogram renders h in seconds: Prometheus buckets are cumulative.
func histogram(desc *prometheus.Desc, h *collector.Histogram, lv ...string) prometheus.Metric {
	b := make(map[float64]uint64, len(collector.LatencyBuckets))
	var cum uint64
	for i, ub := range collector.LatencyBuckets {
		cum += h.Buckets[i]
		b[seconds(ub)] = cum
	}
	return prometheus.MustNewConstHistogram(desc, h.Count, seconds(h.Sum), b, lv...)
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

func u32(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// optional renders an ID that is -1 when unknown.
func optional(v int) string {
	if v < 0 {
		return "unknown"
	}
	return strconv.Itoa(v)
}

// DropReason names a drop reason code (sai/spec's SD-Fabric table), or
// gives its number when it has no name.
func DropReason(r uint8) string {
	if d := spec.DropReason(r); d.Known() {
		return d.String()
	}
	return strconv.Itoa(int(r))
}

// Protocol names an IP protocol number by its IANA keyword (lower case),
// or gives the number.
func Protocol(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 2:
		return "igmp"
	case wire.ProtoTCP:
		return "tcp"
	case wire.ProtoUDP:
		return "udp"
	case wire.ProtoGRE:
		return "gre"
	case 50:
		return "esp"
	case 51:
		return "ah"
	case 58:
		return "ipv6-icmp"
	case 132:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

package stream

import (
	"cmp"
	"slices"
	"time"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// The message schema; docs/stream.md describes every field. Times are
// RFC 3339 with nanoseconds, latencies nanoseconds.

// Flow is a flow's original 5-tuple.
type Flow struct {
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	Proto   uint8  `json:"proto"`
	SrcPort uint16 `json:"src_port"`
	DstPort uint16 `json:"dst_port"`
}

// Latency summarises latency samples in ns.
type Latency struct {
	Last      uint64 `json:"last_ns"`
	Min       uint64 `json:"min_ns"`
	Max       uint64 `json:"max_ns"`
	Avg       uint64 `json:"avg_ns"`
	WindowMax uint64 `json:"window_max_ns"`
	Samples   uint64 `json:"samples"`
}

// FlowSummary is a summary message: one flow, seen from one node of its
// path (the subject's).
type FlowSummary struct {
	Collector    string    `json:"collector"`
	Time         time.Time `json:"time"`
	WindowStart  time.Time `json:"window_start"`
	Node         uint32    `json:"node"`
	Hop          int       `json:"hop"`
	Flow         Flow      `json:"flow"`
	Path         []uint32  `json:"path"`
	PathComplete bool      `json:"path_complete"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	Reports      uint64    `json:"reports"`
	Drops        uint64    `json:"drops"`
	Congestion   uint64    `json:"congestion"`
	PathChanges  uint64    `json:"path_changes"`
	// EndToEnd is the flow's end-to-end latency, HopLatency the latency of
	// its hop at Node; their WindowMax covers WindowStart to Time.
	EndToEnd   Latency `json:"end_to_end"`
	HopLatency Latency `json:"hop_latency"`
}

// EventMessage is an event message.
type EventMessage struct {
	Collector string    `json:"collector"`
	Kind      string    `json:"kind"`
	Time      time.Time `json:"time"`
	Node      uint32    `json:"node"`
	Flow      *Flow     `json:"flow,omitempty"`
	Path      []uint32  `json:"path"`
	// Path changes.
	OldPath []uint32 `json:"old_path,omitempty"`
	// Latency anomalies.
	LatencyNs   uint64 `json:"latency_ns,omitempty"`
	BaselineNs  uint64 `json:"baseline_ns,omitempty"`
	DeviationNs uint64 `json:"deviation_ns,omitempty"`
	// Drops.
	DropReason     *uint8 `json:"drop_reason,omitempty"`
	DropReasonName string `json:"drop_reason_name,omitempty"`
	// Drops and congestion: the queue (absent when not reported).
	Interface *int32 `json:"interface,omitempty"`
	Queue     *int16 `json:"queue,omitempty"`
	// Congestion: the window, its reports, the largest occupancy, and the
	// flows seen most in them.
	WindowStart *time.Time `json:"window_start,omitempty"`
	Reports     uint64     `json:"reports,omitempty"`
	Occupancy   uint32     `json:"occupancy,omitempty"`
	Culprits    []Culprit  `json:"culprits,omitempty"`
}

// Culprit is a flow seen in a congested queue's reports.
type Culprit struct {
	Flow    Flow   `json:"flow"`
	Reports uint64 `json:"reports"`
}

func flowOf(k *wire.FlowKey) Flow {
	return Flow{Src: k.Src.String(), Dst: k.Dst.String(), Proto: k.Proto, SrcPort: k.SrcPort, DstPort: k.DstPort}
}

func latencyOf(s *collector.Stat) Latency {
	return Latency{Last: s.Last, Min: s.Min, Max: s.Max, Avg: s.Avg(), WindowMax: s.WindowMax, Samples: s.Count}
}

func nodes(p []uint32) []uint32 { return append([]uint32{}, p...) }

// summaryMessage is f seen from node, its hop index on the path (-1: a
// node of an earlier path in the window).
func summaryMessage(id string, f *collector.FlowState, hop int, node uint32, since, now int64) *FlowSummary {
	s := &FlowSummary{Collector: id, Time: time.Unix(0, now).UTC(), WindowStart: time.Unix(0, since).UTC(),
		Node: node, Hop: hop, Flow: flowOf(&f.Key), PathComplete: f.PathComplete,
		FirstSeen: time.Unix(0, f.FirstSeen).UTC(), LastSeen: time.Unix(0, f.LastSeen).UTC(),
		Reports: f.Reports, Drops: f.Drops, Congestion: f.Congestion, PathChanges: f.PathChanges,
		EndToEnd: latencyOf(&f.E2E)}
	if hop >= 0 {
		s.HopLatency = latencyOf(&f.Path[hop].Latency)
	}
	for i := 0; i < f.NHops; i++ {
		s.Path = append(s.Path, f.Path[i].NodeID)
	}
	return s
}

func eventMessage(id string, e *collector.Event) *EventMessage {
	fl := flowOf(&e.Flow)
	m := &EventMessage{Collector: id, Kind: e.Kind.String(), Time: time.Unix(0, e.Time).UTC(), Node: e.Node,
		Flow: &fl, Path: nodes(e.Path[:e.NHops])}
	switch e.Kind {
	case collector.EventPathChange:
		m.OldPath = nodes(e.OldPath[:e.OldHops])
	case collector.EventLatency:
		m.LatencyNs, m.BaselineNs, m.DeviationNs = e.Latency, e.Baseline, e.Deviation
	case collector.EventDrop:
		r := e.DropReason
		m.DropReason = &r
		if d := spec.DropReason(r); d.Known() {
			m.DropReasonName = d.String()
		}
		m.setQueue(e.Port, e.Queue)
	}
	return m
}

func (m *EventMessage) setQueue(port int32, queue int16) {
	if port >= 0 {
		m.Interface = &port
	}
	if queue >= 0 {
		m.Queue = &queue
	}
}

func congestionMessage(id string, k queueKey, g *congestion) *EventMessage {
	start := time.Unix(0, g.first).UTC()
	m := &EventMessage{Collector: id, Kind: collector.EventCongestion.String(), Time: time.Unix(0, g.last).UTC(),
		Node: k.node, Path: []uint32{}, WindowStart: &start, Reports: g.reports, Occupancy: g.occupancy}
	m.setQueue(k.port, k.queue)
	for f, n := range g.flows {
		m.Culprits = append(m.Culprits, Culprit{Flow: flowOf(&f), Reports: n})
	}
	slices.SortFunc(m.Culprits, func(a, b Culprit) int {
		return cmp.Or(cmp.Compare(b.Reports, a.Reports), cmp.Compare(a.Flow.Src, b.Flow.Src), cmp.Compare(a.Flow.Dst, b.Flow.Dst),
			cmp.Compare(a.Flow.Proto, b.Flow.Proto), cmp.Compare(a.Flow.SrcPort, b.Flow.SrcPort), cmp.Compare(a.Flow.DstPort, b.Flow.DstPort))
	})
	if len(m.Culprits) > maxCulprits {
		m.Culprits = m.Culprits[:maxCulprits]
	}
	return m
}

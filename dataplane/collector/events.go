package collector

import (
	"slices"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventPathChange: a whole-path (sink) report gave the flow a
	// different node list than the previous whole path.
	EventPathChange EventKind = iota + 1
	// EventLatency: the flow's end-to-end latency left its learnt band.
	EventLatency
	// EventDrop: a node reported dropping a packet of the flow.
	EventDrop
	// EventCongestion: a node reported the flow's packet in a congested
	// queue.
	EventCongestion
)

// EventKindNames name the kinds (message subjects, JSON).
var EventKindNames = [...]string{EventPathChange: "path-change", EventLatency: "latency", EventDrop: "drop", EventCongestion: "congestion"}

func (k EventKind) String() string {
	if int(k) < len(EventKindNames) && EventKindNames[k] != "" {
		return EventKindNames[k]
	}
	return "unknown"
}

// Event is something a flow's reports tell at once, for Collector.OnEvent.
// It is a value without pointers: it can be queued without allocating.
type Event struct {
	Kind EventKind
	Time int64 // unix ns (arrival of the report)
	// Node is the node the event is about: the sink for path changes and
	// latency, the reporting node for drops and congestion.
	Node uint32
	Flow wire.FlowKey
	// Path is the flow's path (node IDs, first hop first) after the event;
	// OldPath the previous one (path changes only).
	NHops, OldHops int
	Path, OldPath  [MaxPathHops]uint32
	// Latency is the end-to-end latency sample (latency events) in ns,
	// Baseline its learnt average and Deviation its mean deviation.
	Latency, Baseline, Deviation uint64
	// DropReason is the drop reason (drop events).
	DropReason uint8
	// Port and Queue are the egress interface and queue (-1 when the
	// report did not carry them), Occupancy the queue occupancy
	// (congestion events; drop events carry the queue too).
	Port      int32
	Queue     int16
	Occupancy uint32
}

// Latency anomaly detection: an exponentially weighted mean and mean
// deviation of the flow's end-to-end latency (weight 1/16); a sample is
// an anomaly when it exceeds the mean by more than anomalyDevs
// deviations and by Config.LatencyFloor, after anomalyWarmup samples. One
// event per excursion: the flow must come back within the band first.
const (
	anomalyWarmup = 16
	anomalyDevs   = 4
	ewmaShift     = 4
)

// latencyBand learns lat and reports whether it starts an anomaly.
func (c *Collector) latencyBand(f *FlowState, lat uint64) {
	if f.ewma == 0 && f.E2E.Count <= 1 {
		f.ewma = lat
		return
	}
	mean, dev := f.ewma, f.dev
	high := mean + max(anomalyDevs*dev, c.cfg.LatencyFloor)
	switch {
	case lat > high && f.E2E.Count > anomalyWarmup && !f.anomalous:
		f.anomalous = true
		if c.OnEvent != nil {
			e := c.flowEvent(EventLatency, f, f.lastNode())
			e.Latency, e.Baseline, e.Deviation = lat, mean, dev
			c.OnEvent(e)
		}
	case lat <= mean+anomalyDevs*dev:
		f.anomalous = false
	}
	// Anomalies are learnt too, slowly: a lasting shift becomes normal.
	d := int64(lat) - int64(mean)
	f.ewma = uint64(int64(mean) + d>>ewmaShift)
	if d < 0 {
		d = -d
	}
	f.dev = uint64(int64(dev) + (d-int64(dev))>>ewmaShift)
}

func (f *FlowState) lastNode() uint32 {
	if f.NHops == 0 {
		return 0
	}
	return f.Path[f.NHops-1].NodeID
}

// flowEvent fills the collector's event scratch for f.
func (c *Collector) flowEvent(k EventKind, f *FlowState, node uint32) *Event {
	e := &c.ev
	*e = Event{Kind: k, Time: c.now, Node: node, Flow: f.Key, NHops: f.NHops, Port: -1, Queue: -1}
	for i := 0; i < f.NHops; i++ {
		e.Path[i] = f.Path[i].NodeID
	}
	return e
}

// pathSnapshot keeps a flow's node list before a whole-path report
// rewrites it, when events are wanted.
type pathSnapshot struct {
	n     int
	nodes [MaxPathHops]uint32
}

// snapshotPath keeps f's node list in c.oldPath (a field, not a variable
// of the caller: nothing to clear per report when events are off).
func (c *Collector) snapshotPath(f *FlowState) {
	if c.OnEvent == nil {
		return
	}
	s := &c.oldPath
	*s = pathSnapshot{n: f.NHops}
	for i := 0; i < f.NHops; i++ {
		s.nodes[i] = f.Path[i].NodeID
	}
}

// pathChanged emits a path change of f reported by sink, from the path
// snapshotPath kept.
func (c *Collector) pathChanged(f *FlowState, sink uint32) {
	if c.OnEvent == nil {
		return
	}
	old := &c.oldPath
	e := c.flowEvent(EventPathChange, f, sink)
	e.OldHops, e.OldPath = old.n, old.nodes
	for _, n := range old.nodes[:old.n] {
		if f.find(n) < 0 && f.NLeft < MaxPathHops && !slices.Contains(f.Left[:f.NLeft], n) {
			f.Left[f.NLeft] = n
			f.NLeft++
		}
	}
	c.OnEvent(e)
}

// reportEvent emits the drop and congestion events of report r.
func (c *Collector) reportEvent(f *FlowState, r *Report, dropped bool) {
	for _, k := range [2]EventKind{EventDrop, EventCongestion} {
		if k == EventDrop && !dropped || k == EventCongestion && !r.Q {
			continue
		}
		e := c.flowEvent(k, f, r.NodeID)
		e.DropReason = r.DropReason
		if r.HasMD && r.MD.Valid&spec.InstL1Interfaces != 0 {
			e.Port = int32(r.MD.EgressPort)
		}
		switch {
		case r.HasMD && r.MD.Valid&spec.InstQueue != 0:
			e.Queue, e.Occupancy = int16(r.MD.QueueID), r.MD.QueueOccupancy
		case r.HasDrop:
			e.Queue = int16(r.DropQueueID)
		}
		c.OnEvent(e)
	}
}

// Summaries calls fn for every flow updated at or after since (unix ns),
// most recently updated first, with the collector locked, then restarts
// the window of their latency maxima (Stat.WindowMax).
func (c *Collector) Summaries(since int64, fn func(f *FlowState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := c.head; i >= 0 && c.flows[i].LastSeen >= since; i = c.lru[i].next {
		f := &c.flows[i]
		fn(f)
		f.NLeft = 0
		f.E2E.WindowMax = 0
		for h := 0; h < f.NHops; h++ {
			f.Path[h].Latency.WindowMax = 0
		}
	}
}

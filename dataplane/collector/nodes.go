package collector

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/intd-project/intd/sai/spec"
)

// LatencyBuckets are the upper bounds, in nanoseconds, of the latency
// histograms: 1 µs to 1 s in 1-2.5-5 steps (an INT hop is microseconds
// when idle, milliseconds behind a congested queue; a path of them stays
// well under a second). Samples above the last bound count only in the
// total.
var LatencyBuckets = [...]uint64{
	1e3, 2.5e3, 5e3, 1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5,
	1e6, 2.5e6, 5e6, 1e7, 2.5e7, 5e7, 1e8, 2.5e8, 5e8,
	1e9,
}

// Histogram counts latency samples (nanoseconds) in LatencyBuckets.
// Buckets are not cumulative: Buckets[i] counts the samples above bound
// i-1 and at most bound i; the last one, those above every bound.
type Histogram struct {
	Buckets [len(LatencyBuckets) + 1]uint64
	// Count is the number of samples: the sum of Buckets, filled in by
	// Collector.Aggregates (kept at read time, one update less per
	// sample).
	Count uint64
	Sum   uint64 // ns
}

func (h *Histogram) observe(ns uint64) {
	h.Sum += ns
	// The sample's bit length n gives the first bucket whose bound is at
	// least 2^(n-1); the next bound is at least twice that, above any
	// n-bit number: one compare, no loop (whose exit mispredicts). The
	// bucket and its bound come from one entry: two independent loads,
	// not a load whose result indexes the next.
	e := &bucketFrom[bits.Len64(ns)]
	i := int(e.i)
	if ns > e.bound {
		i++
	}
	h.Buckets[i]++
}

// count sets Count from the buckets.
func (h *Histogram) count() {
	h.Count = 0
	for _, n := range h.Buckets {
		h.Count += n
	}
}

// bounds is LatencyBuckets followed by a bound no sample exceeds.
var bounds = func() (b [len(LatencyBuckets) + 1]uint64) {
	copy(b[:], LatencyBuckets[:])
	b[len(LatencyBuckets)] = math.MaxUint64
	return b
}()

// bucketFrom[n] is the first bucket whose bound is at least the smallest
// n-bit number (len(LatencyBuckets) when there is none), with its bound.
var bucketFrom = func() (t [65]struct {
	bound uint64
	i     uint8
}) {
	for n := range t {
		lo := uint64(0)
		if n > 0 {
			lo = 1 << (n - 1)
		}
		i := 0
		for i < len(LatencyBuckets) && LatencyBuckets[i] < lo {
			i++
		}
		t[n].i, t[n].bound = uint8(i), bounds[i]
	}
	return t
}()

// NodeStats aggregates what the reports say about one node, over all
// flows: the latency of its hops, the end-to-end latency of the paths it
// ends (as their sink, or last known node), and its drops by reason.
type NodeStats struct {
	NodeID      uint32
	HopLatency  Histogram
	PathLatency Histogram
	// Drops counts drop reports from the node by drop reason (nil until
	// the first).
	Drops *[256]uint64
}

// QueueKey names an egress queue: a node's egress port and queue ID, each
// -1 when the reports did not carry it.
type QueueKey struct {
	NodeID uint32
	Port   int32
	Queue  int16
}

// QueueStats counts the congested-queue (Q) reports of one queue.
type QueueStats struct {
	QueueKey
	Congestion uint64
	// Occupancy is the occupancy in the last Q report that carried it.
	Occupancy uint64
}

// node returns the stats of node id, creating them; nil when the node
// table is full.
func (c *Collector) node(id uint32) *NodeStats {
	if n := c.nodes[id]; n != nil {
		return n
	}
	if len(c.nodes) >= c.cfg.MaxNodes {
		c.c.NodesOverflow++
		return nil
	}
	n := &NodeStats{NodeID: id}
	c.nodes[id] = n
	return n
}

// hopNode is the stats of hop h's node, looked up once per hop.
func (c *Collector) hopNode(h *HopState) *NodeStats {
	if h.node == nil {
		h.node = c.node(h.NodeID)
	}
	return h.node
}

// nodeLatency adds a latency sample of hop h to its node's histogram.
func (c *Collector) nodeLatency(h *HopState, lat uint64) {
	if n := c.hopNode(h); n != nil {
		n.HopLatency.observe(lat)
	}
}

// pathLatency records an end-to-end latency sample of f's path.
func (c *Collector) pathLatency(f *FlowState, lat uint64) {
	f.E2E.add(lat)
	if c.OnEvent != nil { // the band is only for events
		c.latencyBand(f, lat)
	}
	if f.NHops == 0 {
		return
	}
	c.pathNodeLatency(&f.Path[f.NHops-1], lat)
}

// pathNodeLatency adds an end-to-end latency sample to the histogram of
// h's node, the path's last.
func (c *Collector) pathNodeLatency(h *HopState, lat uint64) {
	if n := c.hopNode(h); n != nil {
		n.PathLatency.observe(lat)
	}
}

// nodeDrop counts a drop report of node id.
func (c *Collector) nodeDrop(id uint32, reason uint8) {
	n := c.node(id)
	if n == nil {
		return
	}
	if n.Drops == nil {
		n.Drops = new([256]uint64)
	}
	n.Drops[reason]++
}

// queueCongestion counts a Q report against the queue it names.
func (c *Collector) queueCongestion(r *Report) {
	k := QueueKey{NodeID: r.NodeID, Port: -1, Queue: -1}
	if r.HasMD && r.MD.Valid&spec.InstL1Interfaces != 0 {
		k.Port = int32(r.MD.EgressPort)
	}
	hasQ := r.HasMD && r.MD.Valid&spec.InstQueue != 0
	if hasQ {
		k.Queue = int16(r.MD.QueueID)
	}
	q := c.queues[k]
	if q == nil {
		if len(c.queues) >= c.cfg.MaxQueues {
			c.c.QueuesOverflow++
			return
		}
		q = &QueueStats{QueueKey: k}
		c.queues[k] = q
	}
	q.Congestion++
	if hasQ {
		q.Occupancy = uint64(r.MD.QueueOccupancy)
	}
}

// Aggregates is a copy of the collector's per-node and per-queue state,
// sorted by node (then port and queue).
type Aggregates struct {
	Counters Counters
	// Flows is the number of flows in the table, FlowCapacity its size.
	Flows, FlowCapacity int
	Sources             []SourceState
	Nodes               []NodeStats
	Queues              []QueueStats
}

// Aggregates copies the collector's counters and its per-source, per-node
// and per-queue state; its size does not depend on the number of flows.
func (c *Collector) Aggregates() *Aggregates {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := &Aggregates{Counters: c.counters(), Flows: len(c.flows), FlowCapacity: c.cfg.MaxFlows,
		Sources: c.sources.copy(), Nodes: make([]NodeStats, 0, len(c.nodes)),
		Queues: make([]QueueStats, 0, len(c.queues))}
	for _, n := range c.nodes {
		cp := *n
		cp.HopLatency.count()
		cp.PathLatency.count()
		if n.Drops != nil {
			d := *n.Drops
			cp.Drops = &d
		}
		a.Nodes = append(a.Nodes, cp)
	}
	slices.SortFunc(a.Nodes, func(x, y NodeStats) int { return cmp.Compare(x.NodeID, y.NodeID) })
	for _, q := range c.queues {
		a.Queues = append(a.Queues, *q)
	}
	slices.SortFunc(a.Queues, func(x, y QueueStats) int {
		return cmp.Or(cmp.Compare(x.NodeID, y.NodeID), cmp.Compare(x.Port, y.Port), cmp.Compare(x.Queue, y.Queue))
	})
	return a
}

func sortSources(s []SourceState) {
	slices.SortFunc(s, func(a, b SourceState) int {
		return cmp.Or(cmp.Compare(a.NodeID, b.NodeID), cmp.Compare(a.HWID, b.HWID), cmp.Compare(a.Version, b.Version))
	})
}

// TopFlows copies the n flows with the most reports (ties: the most
// recently updated first), most reports first.
func (c *Collector) TopFlows(n int) []FlowState {
	if n <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A min-heap of the n best so far, by LRU order: walking from the
	// most recently updated flow makes ties keep the more recent one.
	less := func(a, b int32) bool { return c.flows[a].Reports < c.flows[b].Reports }
	h := make([]int32, 0, min(n, len(c.flows)))
	for i := c.head; i >= 0; i = c.lru[i].next {
		if len(h) < n {
			h = append(h, i)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !less(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			continue
		}
		if !less(h[0], i) {
			continue
		}
		h[0] = i
		for j := 0; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if r < len(h) && less(h[r], h[m]) {
				m = r
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
	out := make([]FlowState, len(h))
	for k, i := range h {
		out[k] = c.flows[i]
	}
	slices.SortStableFunc(out, func(a, b FlowState) int { return cmp.Compare(b.Reports, a.Reports) })
	return out
}

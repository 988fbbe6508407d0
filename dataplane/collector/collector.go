package collector

import (
	"errors"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// MaxPathHops is the longest path kept per flow.
const MaxPathHops = 8

// Stat summarises a series of values.
type Stat struct {
	Last, Min, Max uint64
	Sum, Count     uint64
	// WindowMax is the largest value since Collector.Summaries last
	// reset it.
	WindowMax uint64
}

func (s *Stat) add(v uint64) {
	if s.Count == 0 || v < s.Min {
		s.Min = v
	}
	// WindowMax never exceeds Max (Summaries only lowers it): a sample
	// at most WindowMax leaves both alone, one compare.
	if v > s.WindowMax {
		s.WindowMax = v
		if v > s.Max {
			s.Max = v
		}
	}
	s.Last = v
	s.Sum += v
	s.Count++
}

// Avg is the mean value (0 without samples).
func (s *Stat) Avg() uint64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / s.Count
}

// HopState is what a flow's path knows about one hop.
type HopState struct {
	NodeID                  uint32
	IngressPort, EgressPort uint16
	Latency                 Stat // ns (as reported)
	Queue                   Stat // queue occupancy
	QueueID                 uint8
	LastSeen                int64
	// Congestion and Drops count the node's own queue-congestion (Q) and
	// drop (D) reports for the flow.
	Congestion, Drops uint64

	// Order of a hop placed from per-node reports (no INT stack): hops
	// placed from a stack have byStack set and come first; the others are
	// ordered by the inner packet's remaining IP TTL (routers decrement
	// it, so a higher TTL is an earlier hop), then by the first ingress
	// timestamp (or arrival time) seen from the node.
	byStack bool
	ttl     uint8
	first   uint64
	// node caches the node's NodeStats (nil until the first latency).
	node *NodeStats
}

// DropCount is the number of drops with one reason.
type DropCount struct {
	Reason uint8
	Count  uint64
}

// FlowState is the state of one flow.
type FlowState struct {
	// Key is the flow's 5-tuple; for tunnelled packets the inner packet's,
	// in tunnel Tunnel with id TunnelID (the key too), Outer the tunnel's
	// 5-tuple in the latest report.
	Key                 wire.FlowKey
	Tunnel              wire.TunnelKind
	TunnelID            uint32
	Outer               wire.FlowKey
	FirstSeen, LastSeen int64 // unix ns
	Reports             uint64
	// Path holds the hops from the source to the sink. It comes from the
	// reports that describe the whole path: INT-MD reports from the sink
	// (an embedded INT-MD stack, I, D and Q clear); PathComplete is set
	// once one was seen. Until then it is provisional: built from the
	// partial stacks of transit nodes' reports (never shrunk by them) and
	// from per-node reports (INT-MX, postcards, local reports without a
	// stack). PathChanges counts the whole-path reports whose node list
	// differs from the previous whole path.
	NHops        int
	Path         [MaxPathHops]HopState
	PathComplete bool
	PathChanges  uint64
	E2E          Stat // end-to-end latency: the sum of the hop latencies of one packet
	Drops        uint64
	DropReasons  [4]DropCount // first reasons seen; others counted in DropOther
	DropOther    uint64
	Congestion   uint64 // reports with Q set

	// Left holds the nodes of earlier paths that the current one does not
	// go through, since Collector.Summaries last reset it (only tracked
	// while OnEvent is set).
	NLeft int
	Left  [MaxPathHops]uint32

	// Latency band (events.go).
	ewma, dev uint64
	anomalous bool
}

// SourceState tracks report sequence numbers per (node, hw_id).
type SourceState struct {
	NodeID    uint32
	HWID      uint8
	Version   uint8
	LastSeq   uint32
	Packets   uint64
	Reports   uint64
	Lost      uint64 // reports missing from sequence gaps
	Reordered uint64 // sequence numbers at or behind the last one
	Drops     uint64
	Congested uint64
	// OutOfWindow counts sequence numbers too far from the last one to be
	// loss or reordering (Config.SeqWindow); Resets, those of them that
	// the next packet continued (the node restarted its sequence). No
	// loss is counted for either.
	OutOfWindow, Resets uint64
	LastSeen            int64 // unix ns

	jump    uint32 // the last number out of window
	hasJump bool

	// LRU list of the source table (see sources.go).
	prev, next *SourceState
	protected  bool
	key        uint64
}

// VersionName is the report format the source sends, as the YANG model
// and the metrics name it: "2.0" or "0.5".
func (s *SourceState) VersionName() string {
	if s.Version == wire.Version2 {
		return "2.0"
	}
	return "0.5"
}

// Error kinds counted for malformed input.
const (
	ErrKindTruncated = iota
	ErrKindVersion
	ErrKindLength
	ErrKindType
	ErrKindValue
	ErrKindInner
	ErrKindOther
	numErrKinds
)

// ErrorKindNames names the error kinds (metrics labels, YANG keys).
var ErrorKindNames = [numErrKinds]string{"truncated", "bad-version", "bad-length", "bad-type", "bad-value", "inner-packet", "other"}

func errKind(err error) int {
	switch {
	case errors.Is(err, wire.ErrTruncated):
		return ErrKindTruncated
	case errors.Is(err, wire.ErrBadVersion):
		return ErrKindVersion
	case errors.Is(err, wire.ErrBadLength):
		return ErrKindLength
	case errors.Is(err, wire.ErrBadType), errors.Is(err, wire.ErrUnsupported):
		return ErrKindType
	case errors.Is(err, wire.ErrBadValue):
		return ErrKindValue
	}
	return ErrKindOther
}

// Counters are the collector-wide counters.
type Counters struct {
	Packets         uint64
	Reports         uint64
	ReportsV2       uint64
	ReportsV05      uint64
	Errors          [numErrKinds]uint64
	Lost            uint64
	Drops           uint64
	DropReasons     [256]uint64
	Congestion      uint64
	FlowsCreated    uint64
	FlowsEvicted    uint64
	NoFlow          uint64 // reports without a decodable flow
	SourcesOverflow uint64 // reports not tracked per source: table full of established sources
	SourcesEvicted  uint64 // sources evicted to make room for a new one
	SeqResets       uint64 // sequences restarted (see SourceState)
	OutOfWindow     uint64 // sequence numbers beyond the window (see SourceState)
	Rejected        uint64 // datagrams from addresses outside Config.Allow
	NodesOverflow   uint64 // samples not aggregated per node: node table full
	QueuesOverflow  uint64 // Q reports not counted per queue: queue table full
}

// Config bounds the collector's memory.
type Config struct {
	MaxFlows   int // flow table size (default 65536)
	MaxSources int // (node, hw_id) sequence trackers (default 4096)
	MaxNodes   int // per-node aggregates (default 4096)
	MaxQueues  int // per-queue congestion counters (default 16384)
	// SeqWindow is the largest sequence gap counted as loss, and the
	// furthest behind a report is counted as reordered; a jump beyond it
	// is not (default 4096).
	SeqWindow uint32
	// LatencyFloor is the least excess over a flow's learnt end-to-end
	// latency that is an anomaly, in ns (default 100 µs: above the jitter
	// of software forwarding).
	LatencyFloor uint64
	// Allow, when not empty, lists the addresses and prefixes reports are
	// accepted from (Serve); others are counted in Rejected and ignored.
	Allow []netip.Prefix
}

// Collector aggregates decoded reports into per-flow state. Handle* methods
// and readers are safe for concurrent use (one mutex; the receive loop
// takes it once per batch).
type Collector struct {
	mu  sync.Mutex
	cfg Config
	dec *Decoder
	now int64
	// oldPath is the path a whole-path report replaces (events only).
	oldPath pathSnapshot
	flows   []FlowState
	// keys and lru run parallel to flows: what the index compares and
	// the LRU list, kept out of the large FlowState so that a lookup and
	// a touch read and write a few small lines.
	keys  []flowKeyBits
	lru   []lruLinks
	index flowIndex
	// recent holds, by recentHash of a key (its top 8 bits), the position
	// plus one of the flow last found with a key of that slot, under 32
	// more bits of the hash: a lookup that finds its key there skips the
	// index. The tag spares reading keys on a mismatch; a position is
	// checked against keys, so an evicted flow's slot needs no clearing
	// (positions are never removed).
	recent  [256]uint64
	head    int32 // most recently updated
	tail    int32 // least recently updated
	sources sourceTable
	nodes   map[uint32]*NodeStats
	queues  map[QueueKey]*QueueStats
	// lastSrc caches the last sources lookup (key lastSrcKey).
	lastSrc    *SourceState
	lastSrcKey uint64
	c          Counters
	// OnReport, when set, is called for every decoded report (used for
	// JSON output). It runs with the collector locked.
	OnReport func(r *Report)
	// OnEvent, when set, is called for every Event, with the collector
	// locked; e is valid during the call only.
	OnEvent func(e *Event)
	ev      Event
}

// New returns a collector.
func New(cfg Config) *Collector {
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = 65536
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = 4096
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = 4096
	}
	if cfg.MaxQueues <= 0 {
		cfg.MaxQueues = 16384
	}
	if cfg.SeqWindow == 0 {
		cfg.SeqWindow = 4096
	}
	cfg.SeqWindow = min(cfg.SeqWindow, wire.MaxReportSeq/2)
	if cfg.LatencyFloor == 0 {
		cfg.LatencyFloor = 100_000
	}
	return &Collector{
		cfg:     cfg,
		dec:     NewDecoder(),
		index:   newFlowIndex(cfg.MaxFlows, uint64(time.Now().UnixNano())),
		head:    -1,
		tail:    -1,
		sources: newSourceTable(),
		nodes:   make(map[uint32]*NodeStats),
		queues:  make(map[QueueKey]*QueueStats),
	}
}

// Decoder returns the collector's decoder, to configure INT markings
// before use.
func (c *Collector) Decoder() *Decoder { return c.dec }

// Do calls fn while no packet is being handled (OnReport is not
// running), e.g. to flush what OnReport writes.
func (c *Collector) Do(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn()
}

// HandlePacket decodes one report packet (UDP payload) received at now
// (unix ns) and aggregates its reports.
func (c *Collector) HandlePacket(payload []byte, now int64) {
	c.mu.Lock()
	c.handlePacketLocked(payload, now)
	c.mu.Unlock()
}

// HandlePackets is HandlePacket for n packets, packet(i) for i in [0, n),
// taking the lock once.
func (c *Collector) HandlePackets(n int, packet func(i int) []byte, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < n; i++ {
		c.handlePacketLocked(packet(i), now)
	}
}

// handleFrom is HandlePackets for a receiver's batch, dropping the
// datagrams from addresses outside Config.Allow.
func (c *Collector) handleFrom(r *Receiver, n int, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < n; i++ {
		if len(c.cfg.Allow) != 0 && !c.allowed(r.From(i)) {
			c.c.Rejected++
			continue
		}
		c.handlePacketLocked(r.Packet(i), now)
	}
}

// handlePacketLocked is HandlePacket with the collector already locked.
func (c *Collector) handlePacketLocked(payload []byte, now int64) {
	c.now = now
	c.c.Packets++
	_, err := c.dec.decodeRaw(payload, c, c.OnReport == nil)
	if err != nil {
		c.c.Errors[errKind(err)]++
	}
}

// HandleReport implements Handler.
func (c *Collector) HandleReport(r *Report) {
	// Counters.Reports is the sum of the two, taken when read.
	if r.Version == wire.Version2 {
		c.c.ReportsV2++
	} else {
		c.c.ReportsV05++
	}
	if r.Index == 0 {
		c.sequence(r)
	}
	if r.InnerErr != nil {
		c.c.Errors[ErrKindInner]++
	}
	dropped := r.D || r.HasDrop
	if dropped {
		c.c.Drops++
		c.c.DropReasons[r.DropReason]++
		c.nodeDrop(r.NodeID, r.DropReason)
	}
	if r.Q {
		c.c.Congestion++
		c.queueCongestion(r)
	}
	src := c.lastSrc // the reports of a packet share their source
	if src == nil || c.lastSrcKey != sourceKey(r) {
		src = c.source(r)
	}
	if src != nil {
		src.Reports++
		if dropped {
			src.Drops++
		}
		if r.Q {
			src.Congested++
		}
	}
	if c.OnReport != nil {
		c.OnReport(r)
	}
	if !r.HasFlow {
		c.c.NoFlow++
		return
	}
	if !r.hasKey {
		r.key = keyBits(&r.Flow, tunnelTag(r.Tunnel, r.TunnelID))
	}
	k := &r.Flow
	if r.flowInKey {
		k = nil // the key bits hold it (flow makes it for a new flow)
	}
	f := c.flow(&r.key, k, r.Tunnel, r.TunnelID)
	// Only a tunnel's report has an outer flow, and a flow is keyed by
	// its tunnel: a flow outside tunnels keeps its zero Outer (unless
	// OnReport changed the report).
	if r.Tunnel != wire.TunnelNone || c.OnReport != nil {
		f.Outer = r.Outer
	}
	f.Reports++
	f.LastSeen = c.now
	if dropped {
		f.Drops++
		f.countDrop(r.DropReason)
	}
	if r.Q {
		f.Congestion++
	}
	if c.OnEvent != nil && (dropped || r.Q) {
		c.reportEvent(f, r, dropped)
	}
	switch {
	case r.raw.layout != nil:
		c.mdPathRaw(f, r) // the case below, hops decoded in place
	case r.INT.Cut:
		// The truncation left the newest hops only: no path from them.
		c.nodeHop(f, r, dropped)
	case len(r.INT.Hops) > 0 && r.INT.Type == spec.TypeMD && !r.I && !r.D && !r.Q:
		c.mdPath(f, r)
	case len(r.INT.Hops) > 0 && r.INT.Type == spec.TypeMD:
		c.partialPath(f, r, dropped)
	default:
		c.nodeHop(f, r, dropped)
	}
}

func (f *FlowState) countDrop(reason uint8) {
	for i := range f.DropReasons {
		d := &f.DropReasons[i]
		if d.Count != 0 && d.Reason == reason {
			d.Count++
			return
		}
		if d.Count == 0 {
			d.Reason, d.Count = reason, 1
			return
		}
	}
	f.DropOther++
}

// mdPath sets the flow's path from a whole-path report: the INT-MD stack
// (bottom of stack is the first hop) followed by the reporting sink, unless
// it put its own hop on the stack. Hops whose node is unchanged keep their
// statistics; a different node list counts as a path change when the
// previous path was complete too.
func (c *Collector) mdPath(f *FlowState, r *Report) {
	hops := r.INT.Hops
	n := len(hops)
	sinkInStack := hops[0].Valid&spec.InstNodeID != 0 && hops[0].NodeID == r.NodeID
	total := n
	if r.HasMD && !sinkInStack {
		total++
	}
	total = min(total, MaxPathHops)
	changed := total != f.NHops
	c.snapshotPath(f)
	var e2e uint64
	for i := 0; i < total; i++ {
		var node uint32
		var m *wire.HopMetadata
		if i < n {
			m = &hops[n-1-i]
			node = m.NodeID
		} else {
			m, node = &r.MD, r.NodeID
		}
		h := &f.Path[i]
		if i >= f.NHops || h.NodeID != node {
			changed = true
			*h = HopState{NodeID: node}
		}
		h.byStack = true
		lat := hopLatency(m)
		c.updateLat(h, m, lat)
		e2e += lat
	}
	if changed && f.PathComplete && f.NHops != 0 {
		f.PathChanges++
		f.NHops = total
		c.pathChanged(f, r.NodeID)
	}
	f.NHops, f.PathComplete = total, true
	c.pathLatency(f, e2e)
}

// mdPathRaw is mdPath for a report whose hops were left in r.raw: each hop
// is decoded into the path directly (only the fields mdPath uses, with the
// same validity rules as hopLayout.decode).
//
// The decoder sets r.raw only as decodeV21 checks it, once per INT header
// (innerFast's cached header reuses it): n > 0 whole hops of hopLen bytes
// in b, a node ID in the layout and its fields within a hop.
func (c *Collector) mdPathRaw(f *FlowState, r *Report) {
	l, hl := r.raw.layout, r.raw.hopLen
	n := r.raw.n
	p := unsafe.Pointer(unsafe.SliceData(r.raw.b))
	top := be32(p, l.node)
	sinkInStack := top != wire.Unavailable32 && top == r.NodeID
	total := n
	if r.HasMD && !sinkInStack {
		total++
	}
	total = min(total, MaxPathHops)
	changed := total != f.NHops
	c.snapshotPath(f)
	now := c.now
	var e2e uint64
	i := 0
	// The hops bottom of stack first: at walks back from the last one.
	at := n * hl
	stack := min(total, n)
	nh := f.NHops
	path := f.Path[:stack:stack]
	if l.inst&quadInst == quadInst {
		// Node, ports, latency and queue at fixed offsets (0, 4, 8, 12):
		// no per-field layout checks, and no call. A hop that needs one
		// (a new node, an unavailable latency, its node's stats not yet
		// looked up) ends this loop; the general one below takes it and
		// the rest.
		for ; i < len(path); i++ {
			h := &path[i]
			q := unsafe.Add(p, at-hl)
			x, nd := be32(q, 8), h.node
			if i >= nh || h.NodeID != be32(q, 0) || x == wire.Unavailable32 || nd == nil {
				break
			}
			at -= hl
			h.byStack = true
			if y := be32(q, 4); y != wire.Unavailable32 {
				h.IngressPort, h.EgressPort = uint16(y>>16), uint16(y)
			}
			lat := uint64(x)
			h.Latency.add(lat)
			nd.HopLatency.observe(lat)
			if y := be32(q, 12); y != wire.Unavailable32 {
				h.QueueID = uint8(y >> 24)
				h.Queue.add(uint64(y & 0xffffff))
			}
			h.LastSeen = now
			e2e += lat
		}
	}
	for ; i < len(path); i++ {
		h := &path[i]
		at -= hl
		q := unsafe.Add(p, at)
		if node := be32(q, l.node); i >= nh || h.NodeID != node {
			changed = true
			newHop(h, node)
		}
		h.byStack = true
		e2e += c.rawHop(h, l, q, now, true)
	}
	if i < total { // the sink's own hop
		h := &f.Path[i]
		if i >= f.NHops || h.NodeID != r.NodeID {
			changed = true
			*h = HopState{NodeID: r.NodeID}
		}
		h.byStack = true
		if p := r.mdp; p != nil { // the report metadata left in place
			rl := &c.dec.repLayout
			if rl.inst&tripleInst != tripleInst {
				e2e += c.rawHop(h, rl, p, now, false)
			} else {
				// Ports, latency and queue, one word each in a row; every
				// field of report metadata is valid.
				o := rl.l1
				x := be32(p, o)
				h.IngressPort, h.EgressPort = uint16(x>>16), uint16(x)
				lat := uint64(be32(p, o+4))
				h.Latency.add(lat)
				if nd := h.node; nd != nil {
					nd.HopLatency.observe(lat)
				} else {
					c.nodeLatency(h, lat)
				}
				x = be32(p, o+8)
				h.QueueID = uint8(x >> 24)
				h.Queue.add(uint64(x & 0xffffff))
				h.LastSeen = now
				e2e += lat
			}
		} else {
			lat := hopLatency(&r.MD)
			c.updateLat(h, &r.MD, lat)
			e2e += lat
		}
	}
	if changed && f.PathComplete && f.NHops != 0 {
		f.PathChanges++
		f.NHops = total
		c.pathChanged(f, r.NodeID)
	}
	f.NHops, f.PathComplete = total, true
	// pathLatency, in line: total is at least 1.
	f.E2E.add(e2e)
	if c.OnEvent != nil {
		c.latencyBand(f, e2e)
	}
	if h := &f.Path[total-1]; h.node != nil {
		h.node.PathLatency.observe(e2e)
	} else {
		c.pathNodeLatency(h, e2e)
	}
}

// newHop clears h for node, out of line: a path keeps its nodes, so
// the fused path's loop rarely calls it.
//
//go:noinline
func newHop(h *HopState, node uint32) { *h = HopState{NodeID: node} }

// quadInst selects the first four hop fields, which then lie at fixed
// offsets: node ID, ports, hop latency and queue.
const quadInst = spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue

// tripleInst selects ports, hop latency and queue: three words in a row.
const tripleInst = spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue

// rawHop adds the metadata at q (laid out as l) to h and returns its
// latency (0 when it has none), as updateLat with hopLatency: for a stack
// hop (unavail) with the validity rules of hopLayout.decode, for report
// metadata (!unavail) every selected field valid, as decodeReport.
func (c *Collector) rawHop(h *HopState, l *hopLayout, q unsafe.Pointer, now int64, unavail bool) uint64 {
	ok32 := func(x uint32) bool { return !unavail || x != wire.Unavailable32 }
	var lat uint64
	hasLat := false
	if o := l.lat; o >= 0 {
		if x := be32(q, o); ok32(x) {
			lat, hasLat = uint64(x), true
		}
	}
	if !hasLat && (l.its >= 0 || l.ets >= 0) {
		var its, ets uint64
		itsOK, etsOK := false, false
		if o := l.its; o >= 0 {
			its = be64(q, o)
			itsOK = !unavail || its != wire.Unavailable64
		}
		if o := l.ets; o >= 0 {
			ets = be64(q, o)
			etsOK = !unavail || ets != wire.Unavailable64
		}
		if itsOK && etsOK && ets >= its {
			lat = ets - its
		}
		hasLat = itsOK && etsOK // one timestamp alone is no latency
	}
	if o := l.l1; o >= 0 {
		if x := be32(q, o); ok32(x) {
			h.IngressPort, h.EgressPort = uint16(x>>16), uint16(x)
		}
	}
	if hasLat {
		h.Latency.add(lat)
		if nd := h.node; nd != nil {
			nd.HopLatency.observe(lat)
		} else {
			c.nodeLatency(h, lat)
		}
	}
	if o := l.q; o >= 0 {
		if x := be32(q, o); ok32(x) {
			h.QueueID = uint8(x >> 24)
			h.Queue.add(uint64(x & 0xffffff))
		}
	}
	h.LastSeen = now
	return lat
}

// partialPath handles an INT-MD report from a transit node (I set) or a
// queue or drop report, whose stack only holds the hops up to the
// reporting node. The reporting node's hop gets its metadata and event;
// the upstream hops are other nodes' measurements of a packet the sink may
// report too, so they only fill in a provisional path. The path is never
// shrunk: a stack that is a prefix of the known path leaves it alone.
func (c *Collector) partialPath(f *FlowState, r *Report, dropped bool) {
	hops := r.INT.Hops
	n := len(hops)
	pos := n // the reporting node's position
	if hops[0].Valid&spec.InstNodeID != 0 && hops[0].NodeID == r.NodeID {
		pos = n - 1
	}
	if !f.PathComplete {
		for i := 0; i < pos && i < MaxPathHops; i++ {
			m := &hops[n-1-i]
			h := &f.Path[i]
			if i < f.NHops && h.NodeID == m.NodeID {
				continue
			}
			// A different upstream node: the provisional path is replaced
			// from here on.
			*h = HopState{NodeID: m.NodeID, byStack: true, LastSeen: c.now}
			if m.Valid&spec.InstL1Interfaces != 0 {
				h.IngressPort, h.EgressPort = m.IngressPort, m.EgressPort
			}
			f.NHops = i + 1
		}
		if pos < MaxPathHops && (pos >= f.NHops || f.Path[pos].NodeID != r.NodeID) {
			f.Path[pos] = HopState{NodeID: r.NodeID, byStack: true}
			f.NHops = pos + 1
		}
	}
	i := pos
	if i >= f.NHops || f.Path[i].NodeID != r.NodeID {
		if i = f.find(r.NodeID); i < 0 {
			return // not on the known path: the sink's next report will tell
		}
	}
	c.nodeEvent(f, i, r, dropped)
}

// nodeHop handles a report without an INT-MD stack (INT-MX, postcards,
// local, queue and drop reports of a truncated packet): one hop for the
// reporting node. A node not on the path is added to a provisional path,
// in the order described at HopState; a complete path is left alone. Until
// the path is complete, the end-to-end latency is the sum of the hops'
// last latencies.
func (c *Collector) nodeHop(f *FlowState, r *Report, dropped bool) {
	if !r.HasMD {
		return
	}
	i := f.find(r.NodeID)
	if i < 0 {
		if f.PathComplete || f.NHops >= MaxPathHops {
			return
		}
		h := HopState{NodeID: r.NodeID, ttl: r.TTL, first: uint64(c.now)}
		if r.MD.Valid&spec.InstIngressTimestamp != 0 {
			h.first = r.MD.IngressTimestamp
		}
		for i = f.NHops; i > 0; i-- {
			p := &f.Path[i-1]
			if p.byStack || p.ttl > h.ttl || p.ttl == h.ttl && p.first <= h.first {
				break
			}
		}
		copy(f.Path[i+1:f.NHops+1], f.Path[i:f.NHops])
		f.Path[i] = h
		f.NHops++
	}
	c.nodeEvent(f, i, r, dropped)
	if !f.PathComplete && !r.INT.Present && r.MD.Valid&(spec.InstHopLatency|spec.InstEgressTimestamp) != 0 {
		c.pathLatency(f, f.lastHopsLatency())
	}
}

// nodeEvent applies the reporting node's own metadata and its congestion
// and drop flags to hop i.
func (c *Collector) nodeEvent(f *FlowState, i int, r *Report, dropped bool) {
	h := &f.Path[i]
	if r.HasMD {
		c.updateLat(h, &r.MD, hopLatency(&r.MD))
	} else {
		h.LastSeen = c.now
	}
	if r.Q {
		h.Congestion++
	}
	if dropped {
		h.Drops++
	}
}

func (f *FlowState) find(node uint32) int {
	for i := 0; i < f.NHops; i++ {
		if f.Path[i].NodeID == node {
			return i
		}
	}
	return -1
}

// hopLatency is the hop latency field, or the egress minus the ingress
// timestamp when only those are present.
func hopLatency(m *wire.HopMetadata) uint64 {
	if m.Valid&spec.InstHopLatency != 0 {
		return uint64(m.HopLatency)
	}
	if m.Valid&(spec.InstIngressTimestamp|spec.InstEgressTimestamp) == spec.InstIngressTimestamp|spec.InstEgressTimestamp &&
		m.EgressTimestamp >= m.IngressTimestamp {
		return m.EgressTimestamp - m.IngressTimestamp
	}
	return 0
}

// updateLat adds a hop's metadata to its statistics, with its latency
// (hopLatency(m)) known.
func (c *Collector) updateLat(h *HopState, m *wire.HopMetadata, lat uint64) {
	v := m.Valid
	if v&spec.InstL1Interfaces != 0 {
		h.IngressPort, h.EgressPort = m.IngressPort, m.EgressPort
	}
	// A report without hop latency nor both timestamps (a drop report has
	// no egress) says nothing of the hop's latency.
	const ts = spec.InstIngressTimestamp | spec.InstEgressTimestamp
	if v&spec.InstHopLatency != 0 || v&ts == ts { // as in mdPathRaw
		h.Latency.add(lat)
		if nd := h.node; nd != nil {
			nd.HopLatency.observe(lat)
		} else {
			c.nodeLatency(h, lat)
		}
	}
	if v&spec.InstQueue != 0 {
		h.QueueID = m.QueueID
		h.Queue.add(uint64(m.QueueOccupancy))
	}
	h.LastSeen = c.now
}

// lastHopsLatency is the sum of the hops' last latencies.
func (f *FlowState) lastHopsLatency() uint64 {
	var s uint64
	for i := 0; i < f.NHops; i++ {
		s += f.Path[i].Latency.Last
	}
	return s
}

// lruLinks are a flow's neighbours in the LRU list (most recent at the
// head; -1 at the ends).
type lruLinks struct{ prev, next int32 }

// flow returns the state of k (kb its key bits; k nil when kb is an IPv4
// key outside tunnels, which holds it whole) in tunnel tun with id,
// creating it (and evicting the least recently updated flow when the
// table is full).
func (c *Collector) flow(kb *flowKeyBits, k *wire.FlowKey, tun wire.TunnelKind, id uint32) *FlowState {
	// The most recently updated flow first: a sink reporting every packet
	// of a flow sends runs of its reports.
	if i := c.head; i >= 0 && sameKey(c.keys, c.flows, i, kb, k) {
		return &c.flows[i]
	}
	m := recentHash(kb)
	slot, tag := &c.recent[m>>56], m<<8>>32<<32
	if s := *slot; s&^0xffffffff == tag {
		if i := int32(uint32(s)) - 1; i >= 0 && sameKey(c.keys, c.flows, i, kb, k) {
			c.touch(i)
			return &c.flows[i]
		}
	}
	h := c.index.hash(kb, k)
	if i := c.index.find(c.keys, c.flows, kb, k, h); i >= 0 {
		*slot = tag | uint64(i+1)
		c.touch(i)
		return &c.flows[i]
	}
	var i int32
	if len(c.flows) < c.cfg.MaxFlows {
		c.flows = append(c.flows, FlowState{})
		c.keys = append(c.keys, flowKeyBits{})
		c.lru = append(c.lru, lruLinks{})
		i = int32(len(c.flows) - 1)
	} else {
		i = c.tail
		c.unlink(i)
		c.index.remove(c.index.hash(&c.keys[i], &c.flows[i].Key), i)
		c.c.FlowsEvicted++
	}
	c.c.FlowsCreated++
	f := &c.flows[i]
	*f = FlowState{Tunnel: tun, TunnelID: id, FirstSeen: c.now, LastSeen: c.now}
	if k != nil {
		f.Key = *k
	} else {
		f.Key = ipv4Key(kb)
	}
	c.keys[i] = *kb
	c.index.insert(h, i)
	c.pushFront(i)
	*slot = tag | uint64(i+1)
	return f
}

// recentHash is the hash of kb for Collector.recent: one multiply of its
// words. A collision costs a lookup in the index, nothing else.
func recentHash(kb *flowKeyBits) uint64 {
	return (kb.addrs ^ kb.rest<<8 ^ kb.tag) * 0x9e3779b97f4a7c15
}

func (c *Collector) touch(i int32) {
	h := c.head
	if h == i {
		return
	}
	// i is in the list and not its head: it has a previous flow, and the
	// head is another flow. unlink and pushFront, without their checks.
	lru := c.lru
	l := &lru[i]
	prev, next := l.prev, l.next
	lru[prev].next = next
	if next >= 0 {
		lru[next].prev = prev
	} else {
		c.tail = prev
	}
	l.prev, l.next = -1, h
	lru[h].prev = i
	c.head = i
}

func (c *Collector) unlink(i int32) {
	l := c.lru[i]
	if l.prev >= 0 {
		c.lru[l.prev].next = l.next
	} else {
		c.head = l.next
	}
	if l.next >= 0 {
		c.lru[l.next].prev = l.prev
	} else {
		c.tail = l.prev
	}
}

func (c *Collector) pushFront(i int32) {
	c.lru[i] = lruLinks{-1, c.head}
	if c.head >= 0 {
		c.lru[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

// counters is a copy of the counters, with Reports summed.
func (c *Collector) counters() Counters {
	k := c.c
	k.Reports = k.ReportsV2 + k.ReportsV05
	return k
}

// Snapshot is a consistent copy of the collector's state.
type Snapshot struct {
	Counters Counters
	Sources  []SourceState
	Flows    []FlowState // most recently updated first
	// TableFlows is the number of flows in the table (Flows may hold
	// fewer).
	TableFlows int
}

// Snapshot copies the state (at most maxFlows flows, all when <= 0).
func (c *Collector) Snapshot(maxFlows int) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &Snapshot{Counters: c.counters(), TableFlows: len(c.flows)}
	s.Sources = c.sources.copy()
	sortSources(s.Sources)
	for i := c.head; i >= 0 && (maxFlows <= 0 || len(s.Flows) < maxFlows); i = c.lru[i].next {
		s.Flows = append(s.Flows, c.flows[i])
	}
	return s
}

// Flow returns a copy of the state of k (not tunnelled).
func (c *Collector) Flow(k wire.FlowKey) (FlowState, bool) {
	return c.TunnelFlow(k, wire.TunnelNone, 0)
}

// TunnelFlow returns a copy of the state of inner flow k in tunnel kind
// with id.
func (c *Collector) TunnelFlow(k wire.FlowKey, kind wire.TunnelKind, id uint32) (FlowState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kb := keyBits(&k, tunnelTag(kind, id))
	if i := c.index.find(c.keys, c.flows, &kb, &k, c.index.hash(&kb, &k)); i >= 0 {
		return c.flows[i], true
	}
	return FlowState{}, false
}

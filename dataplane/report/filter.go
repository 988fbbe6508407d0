package report

import (
	"encoding/binary"
	"math/bits"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// Reason says why the smart filter let a report through (a bit set).
type Reason uint8

const (
	ReasonNew       Reason = 1 << iota // first packet of the flow (or state cleared/evicted)
	ReasonInterval                     // the report interval elapsed
	ReasonPort                         // ingress or egress port changed
	ReasonPath                         // node ids in the INT stack changed
	ReasonLatency                      // a hop's latency moved by the threshold
	ReasonQueue                        // the egress queue changed
	ReasonDropCause                    // the drop reason changed (drop filter)
	numReasons      = 7
)

// MaxTrackedHops is how many hop latencies per flow the filter compares:
// this node's plus the top MaxTrackedHops-1 of the INT-MD stack. Deeper
// hops still count for the path (their node ids are hashed).
const MaxTrackedHops = 8

// flowState is what the filter extracts from one event.
type flowState struct {
	path  uint64
	ports uint32
	queue uint8
	nlat  uint8
	drop  uint8
	// judged: the dataplane's pre-filter already ran the adaptive latency
	// band (with every packet, not only those it passed on); anomaly is its
	// verdict.
	judged, anomaly bool
	lat             [MaxTrackedHops]uint32
}

// band is the learned latency of a flow's hops for the adaptive filter:
// an EWMA of latency (gain 1/8) and of its absolute deviation (gain 1/64
// rising, 1/32 for a latency that left the band; falling by 1/256 per
// decayStep of time), in ns, in integer arithmetic the BPF pre-filter
// repeats exactly.
type band struct {
	n    uint8 // hops learned; 0: nothing yet
	mean [MaxTrackedHops]uint32
	dev  [MaxTrackedHops]uint32
	// decayed is when the deviation last decayed.
	decayed int64
}

// decayStep is how often a flow's learned deviation decays, by 1/256 of
// its excess over the packet's: the band's memory is time (256 steps,
// about 2 s), not packets, so a flow of 2,000 packets per second
// remembers a swing that recurs every second (a burst sharing its queue)
// as one of 100 does, instead of forgetting it in a tenth of a second.
const (
	decayShift = 23
	decayStep  = 1 << decayShift // ns, about 8.4 ms
)

// flowEntry is one slot of the flow table. It holds no pointers, so the
// table is invisible to the garbage collector.
type flowEntry struct {
	key        uint64 // flow hash | 1; 0 is empty
	gen        uint32 // clear-cycle generation
	lastSeen   int64
	lastReport int64
	st         flowState
	band       band
}

const ways = 4 // set associativity

// flowTable is a fixed-size, 4-way set-associative table of flow state.
type flowTable struct {
	entries []flowEntry
	mask    uint64 // bucket index mask
	seed    uint64
	gen     uint32
	epoch   int64 // clear-cycle epoch of gen
	live    int   // slots holding a flow of generation gen
}

func newFlowTable(size int, seed uint64) *flowTable {
	if size < minTableSize {
		size = minTableSize
	}
	size = 1 << bits.Len(uint(size-1))
	return &flowTable{entries: make([]flowEntry, size), mask: uint64(size/ways - 1), seed: seed, gen: 1}
}

// lookup returns the entry of flow hash h, claiming a slot when the flow
// is not present (fresh): each flow has two candidate buckets of 4 ways
// (two-choice hashing keeps overflow negligible at high load); an empty or
// stale slot is preferred, else the least recently seen flow is evicted
// (it will look new, so it is reported: eviction never hides a change).
func (t *flowTable) lookup(h uint64) (e *flowEntry, fresh bool) {
	h |= 1
	b1 := int((h>>32)&t.mask) * ways
	b2 := int((h>>8)&t.mask) * ways
	s1 := t.entries[b1 : b1+ways : b1+ways]
	s2 := t.entries[b2 : b2+ways : b2+ways]
	for i := range s1 {
		if s1[i].key == h && s1[i].gen == t.gen {
			return &s1[i], false
		}
	}
	for i := range s2 {
		if s2[i].key == h && s2[i].gen == t.gen {
			return &s2[i], false
		}
	}
	e = t.victim(s1, nil)
	if e.key != 0 && e.gen == t.gen {
		e = t.victim(s2, e)
	}
	if e.key == 0 || e.gen != t.gen {
		t.live++ // else a tracked flow is evicted for this one
	}
	*e = flowEntry{key: h, gen: t.gen}
	return e, true
}

// victim returns a free or stale slot of s, else the least recently seen
// of s and best.
func (t *flowTable) victim(s []flowEntry, best *flowEntry) *flowEntry {
	for i := range s {
		x := &s[i]
		if x.key == 0 || x.gen != t.gen {
			return x
		}
		if best == nil || x.lastSeen < best.lastSeen {
			best = x
		}
	}
	return best
}

// clear applies the flow-state clear cycle: all state is dropped at every
// multiple of cycle ns (O(1): a generation bump).
func (t *flowTable) clear(now, cycle int64) {
	if cycle <= 0 {
		return
	}
	if ep := now / cycle; ep != t.epoch {
		t.epoch = ep
		t.live = 0
		t.gen++
		if t.gen == 0 {
			t.gen = 1
		}
	}
}

// filter is the compiled smart filter.
type filter struct {
	interval   int64
	latChange  uint32
	adaptive   bool
	factor     uint32
	floor      uint32
	sens       uint8
	onPort     bool
	onPath     bool
	onQueue    bool
	clearCycle int64
}

func compileFilter(f Filter) filter {
	c := filter{
		interval: int64(f.Interval), latChange: f.HopLatencyChange, sens: f.LatencySensitivity,
		onPort: f.OnPortChange, onPath: f.OnPathChange, onQueue: f.OnQueueChange, clearCycle: int64(f.ClearCycle),
		adaptive: f.Adaptive, factor: f.LatencyFactor, floor: f.LatencyFloor,
	}
	if c.interval == 0 {
		c.interval = int64(defaultInterval)
	}
	return c
}

// decide runs the filter for a flow whose state is st at time now and
// records the outcome. It returns the reasons to report (0: suppress).
func (f *filter) decide(t *flowTable, h uint64, now int64, st *flowState, drop bool) Reason {
	t.clear(now, f.clearCycle)
	e, fresh := t.lookup(h)
	e.lastSeen = now
	var r Reason
	anomaly := false
	if f.adaptive && !drop {
		anomaly = st.anomaly
		if !st.judged {
			anomaly = learn(&e.band, st.lat[:st.nlat], f.factor, f.floor, now)
		}
	}
	if fresh {
		r = ReasonNew
	} else {
		o := &e.st
		if now-e.lastReport >= f.interval {
			r |= ReasonInterval
		}
		if f.onPort && o.ports != st.ports {
			r |= ReasonPort
		}
		if f.onPath && o.path != st.path {
			r |= ReasonPath
		}
		if f.onQueue && o.queue != st.queue {
			r |= ReasonQueue
		}
		if drop && o.drop != st.drop {
			r |= ReasonDropCause
		}
		if !drop && (anomaly || !f.adaptive && f.latencyMoved(o, st)) {
			r |= ReasonLatency
		}
	}
	if r != 0 {
		// Latencies are compared with those of the last report, so a
		// slow drift adds up to a report too.
		e.lastReport = now
		e.st = *st
	}
	return r
}

// learn updates b with one packet's hop latencies and says whether any of
// them left the learned band: moved from the mean by more than factor
// times the deviation and by more than floor ns. A latency that leaves the
// band becomes the new mean (a step is one report, not one per packet
// until the average catches up); a change in the number of hops restarts
// learning and counts as a change. Both dataplanes' filters use it (the
// BPF pre-filter repeats it in C), so they agree packet for packet.
func learn(b *band, lat []uint32, factor, floor uint32, now int64) bool {
	if int(b.n) != len(lat) {
		changed := b.n != 0
		b.n, b.decayed = uint8(len(lat)), now
		for i, x := range lat {
			b.mean[i], b.dev[i] = x, x/4
		}
		return changed
	}
	// Decay steps due since the last (at most 128: half the excess).
	steps := int64(0)
	if el := now - b.decayed; el < 0 || el >= 128*decayStep {
		steps, b.decayed = min(max(el, 0)>>decayShift, 128), now
	} else if el >= decayStep {
		steps = el >> decayShift
		b.decayed += steps << decayShift // the rest of a step counts next time
	}
	out := false
	for i, x := range lat {
		d := int64(x) - int64(b.mean[i])
		ad := d
		if ad < 0 {
			ad = -ad
		}
		lim := int64(factor) * int64(b.dev[i])
		if lim < int64(floor) {
			lim = int64(floor)
		}
		if ad > lim {
			// Reported; it widens the band a little, so a recurring
			// swing soon stops counting while a rare jump still does.
			out = true
			b.mean[i] = x
			b.dev[i] = uint32(int64(b.dev[i]) + (ad-int64(b.dev[i]))>>5)
			continue
		}
		b.mean[i] = uint32(int64(b.mean[i]) + d>>3)
		// The deviation rises slowly (a fast rise lets a heavy tail inflate
		// the band without bound) and decays slower still, in time: the
		// band remembers a flow's recurring swings (bursts sharing its
		// queue).
		if dv := int64(b.dev[i]); ad > dv {
			b.dev[i] = uint32(dv + (ad-dv)>>6)
		} else {
			b.dev[i] = uint32(dv - (dv-ad)*steps>>8)
		}
	}
	return out
}

func (f *filter) latencyMoved(o, st *flowState) bool {
	if o.nlat != st.nlat {
		return true
	}
	for i := 0; i < int(st.nlat); i++ {
		a, b := o.lat[i]>>f.sens, st.lat[i]>>f.sens
		var d uint32
		if a > b {
			d = a - b
		} else {
			d = b - a
		}
		if d<<f.sens >= f.latChange && d != 0 {
			return true
		}
	}
	return false
}

// extract fills st from ev: this node's ports, queue and latency, and the
// INT-MD stack's node ids and latencies. It never allocates.
func extract(ev *Event, st *flowState) {
	*st = flowState{}
	h := &ev.Hop
	if h.Valid&spec.InstL1Interfaces != 0 {
		st.ports = uint32(h.IngressPort)<<16 | uint32(h.EgressPort)
	}
	if h.Valid&spec.InstQueue != 0 {
		st.queue = h.QueueID
	}
	st.drop = ev.DropReason
	st.judged, st.anomaly = ev.LatencyJudged, ev.LatencyAnomaly
	st.nlat = 1
	if h.Valid&spec.InstHopLatency != 0 {
		st.lat[0] = h.HopLatency
	}
	st.path = 0xcbf29ce484222325
	typ, hdr, ok := intHeader(ev)
	if !ok || typ != spec.TypeMD {
		return
	}
	md, err := wire.DecodeMDHeader(hdr)
	if err != nil || md.HopML == 0 {
		return
	}
	hopLen := int(md.HopML) * 4
	stack := hdr[wire.MDHeaderLen:]
	n := len(stack) / hopLen
	inst := md.Instructions
	latOff := -1
	if inst&spec.InstHopLatency != 0 {
		latOff = 4 * (bits.OnesCount16(uint16(inst & (spec.InstNodeID | spec.InstL1Interfaces))))
	}
	hasNode := inst&spec.InstNodeID != 0
	p := st.path
	for i := 0; i < n; i++ {
		hop := stack[i*hopLen : (i+1)*hopLen]
		if hasNode && len(hop) >= 4 {
			p = (p ^ uint64(binary.BigEndian.Uint32(hop))) * 0x100000001b3
		}
		if latOff >= 0 && latOff+4 <= len(hop) && int(st.nlat) < MaxTrackedHops {
			st.lat[st.nlat] = binary.BigEndian.Uint32(hop[latOff:])
			st.nlat++
		}
	}
	st.path = p ^ uint64(n)<<56
}

// intHeader returns the INT header type and the bytes of the INT header and
// stack of ev's packet.
func intHeader(ev *Event) (spec.HeaderType, []byte, bool) {
	off := ev.INT
	if off < 0 || off >= len(ev.Packet) || len(ev.Packet)-off < wire.MDHeaderLen {
		return 0, nil, false
	}
	typ, n := ev.INTType, ev.INTLen
	if (typ == 0 || n == 0) && off >= wire.ShimLen {
		shim := ev.Packet[off-wire.ShimLen:]
		if typ == 0 {
			typ = spec.HeaderType(shim[0] >> 4)
		}
		if n == 0 {
			n = int(shim[1]) * 4
		}
	}
	if n > len(ev.Packet)-off || n < wire.MDHeaderLen {
		n = len(ev.Packet) - off // truncated frame: use what is there
	}
	return typ, ev.Packet[off : off+n], true
}

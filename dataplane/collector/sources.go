package collector

import (
	"net/netip"

	"github.com/intd-project/intd/dataplane/wire"
)

// sourceIdle is how long an established source may stay silent before a
// new source may take its place in a full table.
const sourceIdle = int64(10 * 60 * 1e9)

// sourceTable holds the (node, hw_id, version) sequence trackers in two
// LRU lists, so that datagrams that are not reports (random node IDs,
// each seen once) cannot push out the nodes that really report: a new
// source starts on probation and is promoted once a second packet
// continues its sequence. A full table evicts the least recently seen
// source on probation, else an established one silent for sourceIdle;
// otherwise the new source is not tracked (Counters.SourcesOverflow).
type sourceTable struct {
	m         map[uint64]*SourceState
	probation lruList
	protected lruList
}

type lruList struct{ head, tail *SourceState }

func (l *lruList) pushFront(s *SourceState) {
	s.prev, s.next = nil, l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
	if l.tail == nil {
		l.tail = s
	}
}

func (l *lruList) remove(s *SourceState) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

func newSourceTable() sourceTable { return sourceTable{m: make(map[uint64]*SourceState)} }

func (t *sourceTable) list(s *SourceState) *lruList {
	if s.protected {
		return &t.protected
	}
	return &t.probation
}

// copy returns the sources sorted by node, hw_id and version.
func (t *sourceTable) copy() []SourceState {
	out := make([]SourceState, 0, len(t.m))
	for _, s := range t.m {
		cp := *s
		cp.prev, cp.next = nil, nil
		out = append(out, cp)
	}
	sortSources(out)
	return out
}

// sourceKey is the sources table's key of r's source.
func sourceKey(r *Report) uint64 {
	return uint64(r.NodeID)<<8 | uint64(r.HWID)<<1 | uint64(r.Version&1)
}

// source returns the tracker of r's source, creating it (and evicting
// another) when needed; nil when the table is full of established
// sources.
func (c *Collector) source(r *Report) *SourceState {
	k := sourceKey(r)
	if c.lastSrc != nil && c.lastSrcKey == k {
		return c.lastSrc // the reports of a packet share their source
	}
	t := &c.sources
	if s, ok := t.m[k]; ok {
		l := t.list(s)
		if l.head != s {
			l.remove(s)
			l.pushFront(s)
		}
		s.LastSeen = c.now
		c.lastSrc, c.lastSrcKey = s, k
		return s
	}
	if len(t.m) >= c.cfg.MaxSources {
		victim := t.probation.tail
		if victim == nil && t.protected.tail != nil && c.now-t.protected.tail.LastSeen > sourceIdle {
			victim = t.protected.tail
		}
		if victim == nil {
			c.c.SourcesOverflow++
			return nil
		}
		t.list(victim).remove(victim)
		delete(t.m, victim.key)
		if c.lastSrc == victim {
			c.lastSrc = nil
		}
		c.c.SourcesEvicted++
	}
	s := &SourceState{NodeID: r.NodeID, HWID: r.HWID, Version: r.Version, LastSeen: c.now, key: k}
	t.m[k] = s
	t.probation.pushFront(s)
	c.lastSrc, c.lastSrcKey = s, k
	return s
}

// sequence detects report loss from gaps in the (node, hw_id) sequence:
// a gap within the window is loss, a number up to the window behind the
// last one is reordered (or duplicated). A number beyond the window is
// counted out of window and ignored, unless the next one continues it: the
// node then restarted its sequence (a reset, no loss counted).
func (c *Collector) sequence(r *Report) {
	s := c.source(r)
	if s == nil {
		return
	}
	s.Packets++
	if s.Packets == 1 {
		s.LastSeq = r.Seq
		return
	}
	mask := uint32(wire.MaxReportSeq)
	if r.Version != wire.Version2 {
		mask = 0xffffffff
	}
	w := c.cfg.SeqWindow
	gap := (r.Seq - s.LastSeq - 1) & mask
	behind := (s.LastSeq - r.Seq) & mask
	switch {
	case gap < w:
		s.Lost += uint64(gap)
		c.c.Lost += uint64(gap)
		s.hasJump = false
		if !s.protected {
			c.sources.probation.remove(s)
			s.protected = true
			c.sources.protected.pushFront(s)
		}
	case behind < w:
		s.Reordered++
		return
	case s.hasJump && (r.Seq-s.jump-1)&mask < w:
		// The second number in a row beyond the window, continuing the
		// first: the node started a new sequence.
		s.Resets++
		c.c.SeqResets++
		s.hasJump = false
	default:
		// A stray number (or the first of a new sequence): the last
		// number stays until the next one tells which.
		s.OutOfWindow++
		c.c.OutOfWindow++
		s.jump, s.hasJump = r.Seq, true
		return
	}
	s.LastSeq = r.Seq
}

// allowed reports whether reports from addr are accepted.
func (c *Collector) allowed(addr netip.Addr) bool {
	if len(c.cfg.Allow) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range c.cfg.Allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

package report

import (
	"net/netip"
	"sort"

	"github.com/intd-project/intd/sai/spec"
)

// Counters count individual reports of one event type. Generated reports
// passed the filters; Suppressed were filtered out (smart filter, spent
// queue quota); Sent and Dropped count deliveries to collectors (a report
// to a session with two collectors counts twice): dropped by the rate
// limit, a full collector queue or a send error.
type Counters struct {
	Generated, Suppressed, Sent, Dropped uint64
}

// CollectorStats describes one collector (shared by the sessions that
// list it).
type CollectorStats struct {
	Addr       netip.AddrPort
	Packets    uint64 // sent
	Bytes      uint64 // UDP payload bytes sent
	LastSeq    uint32 // sequence number of the last packet sent
	NextSeq    uint32 // sequence number of the next packet
	QueueFull  uint64 // packets dropped because the queue was full
	SendErrors uint64 // packets the Sender failed to send, or sent and then refused
	Refused    uint64 // packets refused after they were sent (ICMP unreachable), in SendErrors too
	Queued     int    // packets waiting now
}

// SessionStats describes one report session.
type SessionStats struct {
	ByType      [spec.NumEventTypes]Counters
	Packets     uint64
	Bytes       uint64
	RateLimited uint64 // reports dropped by the rate limit
	QueueFull   uint64 // packets (per collector) dropped on a full queue
	SendErrors  uint64
	Truncated   uint64 // reports whose packet was cut shorter to fit the MTU
	Collectors  []CollectorStats
}

// QueueStats describes one queue with congestion reporting.
type QueueStats struct {
	Port       uint16
	Queue      uint8
	Breached   bool
	Breaches   uint64
	Reports    uint64
	Suppressed uint64 // packets over the quota
	QuotaLeft  uint32
}

// FilterStats counts why the flow and drop filters let reports through (a
// report may have several reasons; DropCause comes from the drop filter).
type FilterStats struct {
	New, Interval, Port, Path, Latency, Queue, DropCause uint64
}

// Stats is a snapshot of the pipeline's counters.
type Stats struct {
	ByType   [spec.NumEventTypes]Counters
	Sessions map[string]SessionStats
	Queues   []QueueStats
	Filter   FilterStats
	// Unrouted counts reports of event types without a session.
	Unrouted uint64
	// TrackedFlows is the number of flows the flow filter holds now.
	TrackedFlows uint64
}

// Total sums the counters of every event type.
func (s *Stats) Total() Counters {
	var t Counters
	for _, c := range s.ByType {
		t.Generated += c.Generated
		t.Suppressed += c.Suppressed
		t.Sent += c.Sent
		t.Dropped += c.Dropped
	}
	return t
}

func (c *counters) snapshot() Counters {
	return Counters{c.generated.Load(), c.suppressed.Load(), c.sent.Load(), c.dropped.Load()}
}

// Stats returns a snapshot of the counters.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Sessions: map[string]SessionStats{}, Unrouted: p.unrouted.Load()}
	if p.flows != nil {
		st.TrackedFlows = uint64(p.flows.live)
	}
	for i := range p.byType {
		st.ByType[i] = p.byType[i].snapshot()
	}
	r := &p.reasons
	st.Filter = FilterStats{r[0].Load(), r[1].Load(), r[2].Load(), r[3].Load(), r[4].Load(), r[5].Load(), r[6].Load()}
	for name, s := range p.sessions {
		c := s.ctr
		ss := SessionStats{Packets: c.packets.Load(), Bytes: c.bytes.Load(), RateLimited: c.rateLimited.Load(),
			QueueFull: c.queueFull.Load(), SendErrors: c.sendErr.Load(), Truncated: c.trunc.Load()}
		for i := range c.byType {
			ss.ByType[i] = c.byType[i].snapshot()
		}
		for _, d := range s.dests {
			ss.Collectors = append(ss.Collectors, CollectorStats{Addr: d.addr, Packets: d.packets.Load(),
				Bytes: d.bytes.Load(), LastSeq: d.lastSeq.Load(), NextSeq: d.seq, QueueFull: d.full.Load(),
				SendErrors: d.sendErr.Load(), Refused: d.refusedN.Load(), Queued: len(d.queue)})
		}
		st.Sessions[name] = ss
	}
	for _, q := range p.queues {
		st.Queues = append(st.Queues, QueueStats{Port: q.cfg.Port, Queue: q.cfg.Queue, Breached: q.breached,
			Breaches: q.breaches, Reports: q.reports, Suppressed: q.suppressed, QuotaLeft: q.quotaLeft})
	}
	sort.Slice(st.Queues, func(i, j int) bool {
		return queueKey(st.Queues[i].Port, st.Queues[i].Queue) < queueKey(st.Queues[j].Port, st.Queues[j].Queue)
	})
	return st
}

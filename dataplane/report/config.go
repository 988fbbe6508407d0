package report

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

// EventType is a DTel event type, as in sai.
type EventType = spec.EventType

// Format is the telemetry report encapsulation of a session, as in sai.
type Format = spec.ReportFormat

// Collector is one destination of a report session.
type Collector struct {
	Addr netip.AddrPort
}

// Session is a report session (SAI DTel report session): where and how
// reports are sent.
type Session struct {
	// Name identifies the session across Configure calls: a session whose
	// name persists keeps its pending reports (and its collectors their
	// sequence numbers).
	Name       string
	Src        netip.Addr
	Collectors []Collector
	// VRF is the VRF device reports are routed in ("" default).
	VRF string
	// TruncateSize is how many bytes of the packet a report carries (0:
	// none). It is further reduced so that a report fits the MTU.
	TruncateSize int
	Format       Format
	// MTU of the path to the collectors (IP packet size); 0 means 1500.
	MTU int
	// MaxReports per packet (coalescing, v2.0 only); 0 or 1 disables it.
	MaxReports int
	// MaxDelay bounds how long a report waits for company in a packet.
	MaxDelay time.Duration
	// RateLimit caps individual reports per second (token bucket with a
	// burst of RateLimit/10, at least 1); 0 is unlimited.
	RateLimit uint32
	// DSCP of the session's report packets, for the event types whose
	// Route leaves it at 0.
	DSCP uint8
	// DistributeByFlow sends each report to one of the collectors, picked
	// by a hash of the flow's 5-tuple that every node computes alike (the
	// collectors in address order), instead of to all of them: each
	// collector sees every hop's reports of its flows.
	DistributeByFlow bool
	// SrcPort, when non-zero, is the UDP source port of every report
	// packet. Otherwise SrcPortMax, when non-zero, asks for flow entropy:
	// each packet's source port is its flow's wire.FlowKey.EntropyPortIn
	// SrcPortMin..SrcPortMax (a packet coalesces one flow's reports
	// only). Otherwise the kernel picks one per collector.
	SrcPort, SrcPortMin, SrcPortMax uint16
}

// Route sends the reports of one event type to a session with a DSCP
// (0: the session's).
type Route struct {
	Session string
	DSCP    uint8
}

// QueueReport enables congestion reports for one egress queue.
type QueueReport struct {
	Port  uint16 // egress port as in Hop.EgressPort
	Queue uint8  // queue id as in Hop.QueueID
	// LatencyThreshold triggers a breach when a packet's hop (queueing)
	// latency reaches it, in ns; 0 disables the latency trigger.
	LatencyThreshold uint32
	// DepthThreshold triggers a breach when the queue occupancy reaches
	// it; 0 disables the depth trigger.
	DepthThreshold uint32
	// ResetThreshold: latency (ns) below which a breach ends and the quota
	// refills; 0 means LatencyThreshold/2.
	ResetThreshold uint32
	// Quota is the number of reports per breach; 0 means 1024.
	Quota uint32
	// TailDrop reports every packet tail-dropped at this queue.
	TailDrop bool
	// RateLimit caps congestion reports per one second window (the
	// window starts with its first report); 0 is no limit.
	RateLimit uint32
}

// Filter holds the smart-filter parameters for flow and drop reports.
type Filter struct {
	// Interval between reports of an unchanged flow; 0 means 1s.
	Interval time.Duration
	// HopLatencyChange is the latency change of any hop (ns) that triggers
	// an immediate report; 0 reports every change.
	HopLatencyChange uint32
	// Adaptive replaces HopLatencyChange with a learned band per flow and
	// hop (see Learn): a latency is a change when it leaves the learned
	// mean by more than LatencyFactor times the learned deviation and by
	// more than LatencyFloor ns.
	Adaptive      bool
	LatencyFactor uint32
	LatencyFloor  uint32
	// LatencySensitivity quantises latencies to 2^n ns before comparing
	// (SAI_DTEL_ATTR_LATENCY_SENSITIVITY); 0 compares exact values.
	LatencySensitivity uint8
	OnPortChange       bool // a new ingress or egress port triggers a report
	OnPathChange       bool // new node ids in the INT stack trigger a report
	OnQueueChange      bool // a new egress queue triggers a report
	// ClearCycle flushes all flow state this often (flow-state clear
	// cycle); 0 never.
	ClearCycle time.Duration
	// TableSize is the number of flows tracked (rounded up to a power of
	// two, at least 64); 0 means 65536. The drop table is a quarter of it.
	TableSize int
}

// Config is the whole reporting configuration, applied atomically by
// Pipeline.Configure.
type Config struct {
	NodeID uint32
	HWID   uint8 // 6 bits
	// DropReports and QueueReports are the node-wide enables
	// (SAI_DTEL_ATTR_DROP_REPORT_ENABLE, _QUEUE_REPORT_ENABLE).
	DropReports  bool
	QueueReports bool
	Filter       Filter
	Sessions     []Session
	// Events maps event types to sessions; an event type without a route
	// is not reported (FLOW_REPORT_ALL_PACKETS falls back to FLOW_STATE's).
	Events map[EventType]Route
	Queues []QueueReport
	// DSValues are the node's values of domain-specific fields.
	DSValues []DSValue
}

// DSValue is the node's value of one domain-specific field: reports
// answering a DS instruction with the bit in the domain carry it,
// right-justified in Words words.
type DSValue struct {
	DomainID uint16
	Bit      uint8 // 0 = most significant
	Words    uint8 // 1..8
	Value    uint64
}

// DefaultFilter returns SD-Fabric's filter: 1 s, 256 ns, every change.
func DefaultFilter() Filter {
	return Filter{Interval: time.Second, HopLatencyChange: 256, OnPortChange: true, OnPathChange: true, OnQueueChange: true}
}

const (
	defaultMTU        = 1500
	defaultQuota      = 1024
	defaultTableSize  = 1 << 16
	minTableSize      = 64
	maxTableSize      = 1 << 24
	udpHeaderLen      = 8
	maxDSCP           = 63
	maxTruncate       = 9000
	minMTU            = 576
	maxMTU            = 65535
	defaultInterval   = time.Second
	maxReportsPerPkt  = 255
	maxCoalesceDelay  = time.Second
	defaultBurstRatio = 10
)

// Validate checks cfg.
func (cfg *Config) Validate() error {
	if cfg.HWID > 0x3f {
		return fmt.Errorf("report: hw id %d exceeds 63", cfg.HWID)
	}
	f := cfg.Filter
	if f.Interval < 0 || f.ClearCycle < 0 {
		return errors.New("report: negative filter interval or clear cycle")
	}
	if f.LatencySensitivity > 31 {
		return fmt.Errorf("report: latency sensitivity %d exceeds 31", f.LatencySensitivity)
	}
	if f.TableSize < 0 || f.TableSize > maxTableSize {
		return fmt.Errorf("report: table size %d out of range", f.TableSize)
	}
	names := map[string]bool{}
	for i := range cfg.Sessions {
		s := &cfg.Sessions[i]
		if s.Name == "" {
			return fmt.Errorf("report: session %d has no name", i)
		}
		if names[s.Name] {
			return fmt.Errorf("report: session %q listed twice", s.Name)
		}
		names[s.Name] = true
		if err := s.validate(); err != nil {
			return err
		}
	}
	for e, r := range cfg.Events {
		if e == 0 || e >= spec.NumEventTypes {
			return fmt.Errorf("report: invalid event type %d", e)
		}
		if !names[r.Session] {
			return fmt.Errorf("report: event %v: unknown session %q", e, r.Session)
		}
		if r.DSCP > maxDSCP {
			return fmt.Errorf("report: event %v: DSCP %d exceeds 63", e, r.DSCP)
		}
	}
	for _, v := range cfg.DSValues {
		if v.DomainID == 0 || v.Bit > 15 || v.Words < 1 || v.Words > 8 {
			return fmt.Errorf("report: domain-specific value %+v out of range", v)
		}
	}
	qs := map[uint32]bool{}
	for _, q := range cfg.Queues {
		k := queueKey(q.Port, q.Queue)
		if qs[k] {
			return fmt.Errorf("report: queue report for port %d queue %d listed twice", q.Port, q.Queue)
		}
		qs[k] = true
		if q.LatencyThreshold == 0 && q.DepthThreshold == 0 && !q.TailDrop {
			return fmt.Errorf("report: queue report for port %d queue %d has no trigger", q.Port, q.Queue)
		}
		if q.ResetThreshold > q.LatencyThreshold && q.LatencyThreshold != 0 {
			return fmt.Errorf("report: queue report for port %d queue %d: reset threshold above trigger", q.Port, q.Queue)
		}
	}
	return nil
}

// validate checks one session's settings.
func (s *Session) validate() error {
	if !s.Src.IsValid() {
		return fmt.Errorf("report: session %q: invalid source %v", s.Name, s.Src)
	}
	if len(s.Collectors) == 0 {
		return fmt.Errorf("report: session %q has no collector", s.Name)
	}
	seen := map[netip.AddrPort]bool{}
	for _, c := range s.Collectors {
		if !c.Addr.IsValid() || c.Addr.Port() == 0 {
			return fmt.Errorf("report: session %q: invalid collector %v", s.Name, c.Addr)
		}
		if c.Addr.Addr().Unmap().Is4() != s.Src.Unmap().Is4() {
			return fmt.Errorf("report: session %q: collector %v and source %v differ in family", s.Name, c.Addr, s.Src)
		}
		if seen[c.Addr] {
			return fmt.Errorf("report: session %q: collector %v listed twice", s.Name, c.Addr)
		}
		seen[c.Addr] = true
	}
	if s.TruncateSize < 0 || s.TruncateSize > maxTruncate {
		return fmt.Errorf("report: session %q: truncate size %d out of range", s.Name, s.TruncateSize)
	}
	if s.MTU != 0 && (s.MTU < minMTU || s.MTU > maxMTU) {
		return fmt.Errorf("report: session %q: MTU %d out of range %d..%d", s.Name, s.MTU, minMTU, maxMTU)
	}
	if !s.Format.Valid() {
		return fmt.Errorf("report: session %q: bad format %d", s.Name, s.Format)
	}
	if s.SrcPort == 0 && s.SrcPortMax != 0 && (s.SrcPortMin == 0 || s.SrcPortMin > s.SrcPortMax) {
		return fmt.Errorf("report: session %q: source port range %d..%d is empty", s.Name, s.SrcPortMin, s.SrcPortMax)
	}
	if !s.Format.Coalescing() && s.MaxReports > 1 {
		return fmt.Errorf("report: session %q: coalescing needs format 2.0", s.Name)
	}
	if s.MaxReports < 0 || s.MaxReports > maxReportsPerPkt {
		return fmt.Errorf("report: session %q: max reports %d out of range", s.Name, s.MaxReports)
	}
	if s.DSCP > maxDSCP {
		return fmt.Errorf("report: session %q: DSCP %d exceeds 63", s.Name, s.DSCP)
	}
	if s.MaxDelay < 0 || s.MaxDelay > maxCoalesceDelay {
		return fmt.Errorf("report: session %q: max delay %v out of range", s.Name, s.MaxDelay)
	}
	return nil
}

func queueKey(port uint16, queue uint8) uint32 { return uint32(port)<<8 | uint32(queue) }

func (s *Session) mtu() int {
	if s.MTU == 0 {
		return defaultMTU
	}
	return s.MTU
}

// maxPayload is the largest UDP payload that fits the MTU.
func (s *Session) maxPayload() int {
	ip := 20
	if !s.Src.Unmap().Is4() {
		ip = 40
	}
	return s.mtu() - ip - udpHeaderLen
}

package sai

import (
	"context"
	"net/netip"
	"time"
)

// Backend is a DTel dataplane. Both intd dataplanes implement it; so does
// saitest.Backend.
//
// Every call is atomic: when it fails, the backend is as it was before the
// call. That is what lets the orchestrator roll back by replaying inverse
// operations. Backends must be safe for concurrent use (Stats runs while
// configuration changes).
type Backend interface {
	// Create makes a new object and returns its OID. Attributes are
	// checked with CheckCreate and against Capabilities; referenced OIDs
	// must name live objects (ErrNotFound). ErrExists for a second DTel
	// object, a second queue report for the same port and queue, or a
	// second event of the same type.
	Create(a Attrs) (OID, error)
	// Set replaces all attributes of oid with a. It fails with
	// ErrCreateOnly when a create-only attribute differs (see
	// Attrs.SettableFrom), and ErrNotFound for unknown OIDs.
	Set(oid OID, a Attrs) error
	// Remove deletes oid. It fails with ErrInUse while another object
	// references it, and ErrNotFound for unknown OIDs.
	Remove(oid OID) error
	// Stats reads the counters of the node and every live object.
	Stats(ctx context.Context) (Stats, error)
	// Capabilities describes what the backend supports and the units of
	// the metadata it produces. It does not change while running.
	Capabilities() Capabilities
}

// Deferrer is implemented by backends that can program their dataplane
// once for a run of operations instead of after each one. After Defer,
// Create, Set and Remove check and record objects as usual (and fail as
// they would) but may leave the dataplane as it was until Flush programs
// all of them. Flush ends the deferral; when it fails the dataplane keeps
// what it had and the records stay as they are: undo the operations
// (deferred again) and Flush once more. The orchestrator brackets every
// configuration change with them.
type Deferrer interface {
	Defer()
	Flush() error
}

// Counters counts packets and INT processing for the node or one interface.
type Counters struct {
	InPackets        uint64
	OutPackets       uint64
	DroppedPackets   uint64 // for any reason; see Stats.Drops
	IntInserted      uint64 // packets this node initiated INT on (source)
	IntTransited     uint64 // INT packets this node added transit metadata to
	IntStripped      uint64 // INT packets stripped at a sink interface
	EBitSet          uint64 // packets on which this node set E (hop count exceeded)
	MBitSet          uint64 // packets on which this node set M (MTU exceeded)
	IntMalformedDrop uint64 // packets dropped for malformed INT headers
	// IntMalformedForward counts marked packets that did not parse as INT
	// and were forwarded unchanged (MalformedForward).
	IntMalformedForward uint64
	// DSCPRemarked counts user packets entering the domain whose DSCP
	// collided with the INT marking and was rewritten (IntL4DSCPRemark).
	DSCPRemarked uint64
	Postcards    uint64 // postcards (INT-XD reports) generated
	// IntDiscarded counts INT packets a sink discarded after reporting
	// them because their D bit was set (neither sent nor dropped).
	IntDiscarded uint64
	// EventsLost counts observations the dataplane could not hand to
	// userspace (eBPF: ring buffer full); their reports are lost.
	EventsLost uint64
	// DetourLost counts GSO segments that left without INT because their
	// detour record was reused (eBPF: too many super-packets in flight).
	DetourLost uint64
}

// ReportType is the kind of telemetry report, for Stats.Reports.
type ReportType uint8

const (
	ReportFlow  ReportType = iota + 1 // flow reports and postcards
	ReportDrop                        // drop reports
	ReportQueue                       // queue congestion reports
)

func (r ReportType) String() string {
	switch r {
	case ReportFlow:
		return "FLOW"
	case ReportDrop:
		return "DROP"
	case ReportQueue:
		return "QUEUE"
	}
	return "ReportType(" + itoa(int(r)) + ")"
}

// ReportCounters follows one kind of report from trigger to wire.
type ReportCounters struct {
	Generated  uint64 // reports triggered
	Suppressed uint64 // suppressed by the flow report filter or a quota
	Sent       uint64 // handed to the exporter and sent
	Dropped    uint64 // lost: exporter full or rate-limited
}

// WatchlistEntryStats counts traffic matching a watchlist entry.
type WatchlistEntryStats struct {
	MatchedPackets uint64
	MatchedBytes   uint64
	// UnsampledPackets are matched packets FlowOp left alone because of
	// WatchlistAction.PacketInterval.
	UnsampledPackets uint64
}

// IntSessionStats counts INT initiation under a session.
type IntSessionStats struct {
	PacketsInitiated uint64
	// Watched packets left without INT, by reason.
	NotInitiatedNoRoom      uint64 // headers would exceed the egress MTU
	NotInitiatedUnsupported uint64 // cannot carry INT: fragment, no L4 header, no marking for it
	NotInitiatedSampled     uint64 // skipped by WatchlistAction.PacketInterval
}

// NotInitiated is the number of watched packets left without INT.
func (s IntSessionStats) NotInitiated() uint64 {
	return s.NotInitiatedNoRoom + s.NotInitiatedUnsupported + s.NotInitiatedSampled
}

// ReportSessionStats counts telemetry reports sent through a session.
type ReportSessionStats struct {
	Reports uint64 // individual reports
	Packets uint64 // report packets (fewer than Reports when coalescing)
	Bytes   uint64 // report packet bytes on the wire
	Dropped uint64 // reports dropped by the exporter
	// LastSequence is the sequence number of the last report packet sent
	// (22 bits in Telemetry Report v2.0).
	LastSequence uint32
	RateLimited  uint64 // reports dropped by the session's rate limit
	QueueFull    uint64 // report packets lost on a full collector queue
	SendErrors   uint64 // report packets that failed to send
	Truncated    uint64 // reports whose packet copy was cut to fit the MTU
	// Collectors are the counters of each destination, by address and
	// port.
	Collectors map[netip.AddrPort]CollectorStats
}

// CollectorStats counts the report packets sent to one collector.
type CollectorStats struct {
	Packets, Bytes        uint64
	LastSequence          uint32
	QueueFull, SendErrors uint64
}

// FilterReasons count the reports the flow and drop report filters let
// through, by reason (a report may have several).
type FilterReasons struct {
	NewFlow, Interval, PortChange, PathChange, LatencyChange, QueueChange, DropReasonChange uint64
}

// PortInfo is how the dataplane knows an interface: its kernel index (0
// when it has none) and the INT interface ids it puts in metadata.
type PortInfo struct {
	Ifindex uint32
	L1ID    uint16
	L2ID    uint32
}

// QueueReportStats describes the congestion state of a reported queue.
type QueueReportStats struct {
	Breaches  uint64 // times the queue crossed its threshold
	Reports   uint64 // queue reports generated
	QuotaLeft uint32 // reports left in the current breach
}

// QueueStats is the state of an egress queue, numbered as INT queue
// metadata numbers it.
type QueueStats struct {
	Occupancy uint32        // bytes queued, as INT queue occupancy counts them
	Delay     time.Duration // queueing delay a packet joining now would see; 0 when empty
}

// Stats is a snapshot of a backend's counters. Object maps are keyed by OID
// and hold every live object, zero counters included.
type Stats struct {
	Node       Counters
	Interfaces map[string]Counters // by interface name
	// Queues holds each interface's egress queues, by interface name and
	// queue id.
	Queues       map[string][]QueueStats
	Drops        map[DropReason]uint64
	Reports      map[ReportType]ReportCounters
	TrackedFlows uint64 // flows currently held by the flow report filter
	// Events counts reports by DTel event type (Reports groups them).
	Events        map[EventType]ReportCounters
	FilterReasons FilterReasons
	// Ports are the dataplane's interfaces by name.
	Ports map[string]PortInfo

	Watchlist      map[OID]WatchlistEntryStats
	IntSessions    map[OID]IntSessionStats
	ReportSessions map[OID]ReportSessionStats
	QueueReports   map[OID]QueueReportStats
}

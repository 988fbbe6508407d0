package sai

import "context"

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

// IntCounters counts INT processing for the node or one interface.
type IntCounters struct {
	Inserted         uint64 // packets this node added INT to (source)
	Transited        uint64 // packets this node added transit metadata to
	Stripped         uint64 // packets this node removed INT from (sink)
	EBitSet          uint64 // packets on which this node set E (hop count exceeded)
	MBitSet          uint64 // packets on which this node set M (MTU exceeded)
	MalformedDropped uint64 // packets dropped for malformed INT headers
}

// WatchlistEntryStats counts traffic matching a watchlist entry.
type WatchlistEntryStats struct {
	MatchedPackets uint64
	MatchedBytes   uint64
}

// IntSessionStats counts packets INT was inserted into under a session.
type IntSessionStats struct {
	Packets uint64
	Bytes   uint64
}

// ReportSessionStats counts telemetry reports sent through a session.
type ReportSessionStats struct {
	Reports uint64 // individual reports
	Packets uint64 // report packets (fewer than Reports when coalescing)
	Bytes   uint64 // report packet bytes on the wire
	Dropped uint64 // reports not sent: rate limit, no route, queue full
	// LastSequence is the sequence number of the most recent report
	// packet (22 bits in Telemetry Report v2.0).
	LastSequence uint32
}

// QueueReportStats describes the congestion state of a reported queue.
type QueueReportStats struct {
	Breaches  uint64 // threshold breaches since creation
	QuotaLeft uint32 // reports left in the current breach
}

// Stats is a snapshot of a backend's counters. Maps are keyed by interface
// name or by OID and hold every live object, zero counters included.
type Stats struct {
	Node           IntCounters
	Interfaces     map[string]IntCounters
	Drops          map[DropReason]uint64 // packets dropped, by reason
	Watchlist      map[OID]WatchlistEntryStats
	IntSessions    map[OID]IntSessionStats
	ReportSessions map[OID]ReportSessionStats
	QueueReports   map[OID]QueueReportStats
}

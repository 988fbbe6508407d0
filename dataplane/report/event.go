package report

import (
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// Kind is what an Event reports.
type Kind uint8

const (
	// KindFlow is a tracked flow: the INT-MD sink's stack, an INT-MX hop's
	// own metadata, or a postcard.
	KindFlow Kind = iota + 1
	// KindDrop is a watched packet the node dropped.
	KindDrop
	// KindQueue is a packet entering a queue that breached its threshold.
	KindQueue
)

// Event is one report-worthy observation. The pipeline fills a reused
// Event and calls Reporter.Report synchronously; the reporter copies what
// it keeps and never retains the slices, so the hot path allocates nothing.
type Event struct {
	Kind Kind
	// Now is the observation time in nanoseconds (the dataplane's clock).
	Now int64
	// Flow is the packet's original 5-tuple (inner for tunnels: Tunnel
	// and TunnelID say which, and are part of the flow's identity).
	Flow     wire.FlowKey
	Tunnel   wire.TunnelKind
	TunnelID uint32
	// Hop is this node's metadata; Hop.Valid says which fields are real.
	Hop wire.HopMetadata
	// Packet is the frame to embed (truncated by the report session): for
	// an INT-MD sink the frame as received, INT headers included, so the
	// collector sees the stack; otherwise the frame as it left or died.
	Packet []byte
	// INT locates the INT header in Packet when it carries one (offset of
	// the INT-MD/MX header, -1 when none); the filter reads the path and
	// per-hop latencies from it.
	INT int
	// DropReason is the SD-Fabric drop reason code, for KindDrop.
	DropReason uint8
	// TailDrop marks a drop by a full egress queue.
	TailDrop bool
	// ReportAll bypasses the flow filter (watchlist report-all-packets).
	ReportAll bool
	// TCPFlags are the flags of a TCP packet, for FLOW_TCPFLAG events.
	TCPFlags uint8

	// Fields below were added after the first contract; their zero values
	// keep the original meaning.

	// INTType is the type of the INT header at INT (spec.TypeMD or
	// spec.TypeMX). Zero: read it from the 4-byte shim before the header
	// (right for INT over TCP/UDP, GRE and VXLAN-GPE; set it for Geneve).
	INTType spec.HeaderType
	// INTLen is the length of the INT header and stack in bytes
	// (wire.Packet.INTLen). Zero: read it from the shim as for INTType.
	INTLen int
	// Unwatched marks a packet that matched no watchlist entry. Only
	// KindQueue events and tail drops at a queue with tail-drop reporting
	// are reported for such packets; their reports have F clear.
	Unwatched bool
	// TailDropReport is the watchlist entry's TAIL_DROP_REPORT_ENABLE:
	// a watched packet's tail drop (TailDrop set) is reported as a drop
	// report only when it is set (or when its queue reports tail drops).
	TailDropReport bool
	// Instructions is the instruction bitmap a report of a packet without
	// INT answers, when HasInstructions is set: the session of the
	// watchlist entry an INT-XD postcard follows (INT v2.1 §3.1). The
	// bitmap of a packet carrying INT is read from its header.
	Instructions    wire.Instructions
	HasInstructions bool
	// DomainID and DSInstructions are the session's domain and DS
	// instruction bitmap, with HasInstructions.
	DomainID       uint16
	DSInstructions uint16
	// LatencyJudged says the dataplane ran the adaptive filter's latency
	// band itself over every packet of the flow (the BPF pre-filter, which
	// passes only some packets on); LatencyAnomaly is then its verdict.
	LatencyJudged, LatencyAnomaly bool
}

// Reporter receives the dataplane's observations.
type Reporter interface {
	Report(ev *Event)
}

// tunnelSeed makes the same inner 5-tuple in two tunnels two flows.
func (ev *Event) tunnelSeed() uint64 {
	return (uint64(ev.Tunnel)<<32 | uint64(ev.TunnelID)) * 0x9e3779b97f4a7c15
}

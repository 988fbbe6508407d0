package sai

import (
	"net/netip"
	"slices"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

// ReportFormat is the telemetry report encapsulation; the formats are
// spec.ReportFormatTable.
type ReportFormat = spec.ReportFormat

// ReportDestination is one collector.
type ReportDestination struct {
	IP netip.Addr
	// UDPPort is the collector's port; 0 inherits the session's UDPDstPort.
	UDPPort uint16
}

// Coalescing groups several individual reports into one report packet
// (Telemetry Report v2.0 only).
type Coalescing struct {
	// MaxReports per packet; 0 or 1 disables coalescing.
	MaxReports uint16
	// MaxDelay bounds how long a report may wait for company; 0 only
	// coalesces reports that are ready together. Ignored without
	// coalescing.
	MaxDelay time.Duration
}

// Enabled reports whether more than one report may share a packet.
func (c Coalescing) Enabled() bool { return c.MaxReports > 1 }

// Truncation bounds for ReportSessionAttrs.TruncateSize: a fragment must
// hold Ethernet+IPv6+L4 headers to identify the flow, and a report must fit
// a jumbo frame.
const (
	MinTruncateSize     = 64
	MaxTruncateSize     = 9000
	DefaultTruncateSize = 128
)

// MaxCoalesceDelay bounds Coalescing.MaxDelay: reports are for near-real-time
// monitoring.
const MaxCoalesceDelay = time.Second

// ReportSessionAttrs mirrors SAI_OBJECT_TYPE_DTEL_REPORT_SESSION
// (sai_dtel_report_session_attr_t): where and how telemetry reports are
// sent. Every attribute is CREATE_AND_SET.
type ReportSessionAttrs struct {
	SrcIP        netip.Addr          // SAI_DTEL_REPORT_SESSION_ATTR_SRC_IP
	Destinations []ReportDestination // SAI_DTEL_REPORT_SESSION_ATTR_DST_IP_LIST, with a port each
	// VirtualRouter (SAI_DTEL_REPORT_SESSION_ATTR_VIRTUAL_ROUTER_ID) is the
	// VRF device name reports are routed in; "" is the default VRF (map
	// YANG's "default" to "").
	VirtualRouter string
	// TruncateSize (SAI_DTEL_REPORT_SESSION_ATTR_TRUNCATE_SIZE) is how many
	// bytes of the original packet a report carries: 0 (none) or
	// MinTruncateSize..MaxTruncateSize.
	TruncateSize uint16
	// UDPDstPort (SAI_DTEL_REPORT_SESSION_ATTR_UDP_DST_PORT) is the port
	// for destinations that do not set their own.
	UDPDstPort uint16

	Format   ReportFormat
	DSCP     uint8 // of report packets
	Coalesce Coalescing
	// RateLimit caps reports per second for the session; 0 is unlimited.
	RateLimit uint32
	// DistributeByFlow (intd extension) sends each report to one
	// destination, picked by a hash of the flow that every node computes
	// alike, instead of to every destination.
	DistributeByFlow bool
	// MTU of the path to the collectors (IP packet size), 0 or
	// MinReportMTU..; 0 means 1500.
	MTU uint16
	// SrcPort is how report packets' UDP source port is chosen (intd
	// extension; SAI leaves it to the implementation).
	SrcPort SrcPorts
}

// SrcPortMode is how report packets' UDP source port is chosen.
type SrcPortMode uint8

const (
	SrcPortKernel   SrcPortMode = iota // one ephemeral port per collector, the kernel's
	SrcPortFixed                       // SrcPorts.Port
	SrcPortFlowHash                    // a hash of the flow into SrcPorts.Min..Max
)

// SrcPorts is a report session's UDP source port policy.
type SrcPorts struct {
	Mode     SrcPortMode
	Port     uint16 // SrcPortFixed: the port, non-zero
	Min, Max uint16 // SrcPortFlowHash: the range, 0 < Min <= Max
}

// DefaultReportMTU is the report path MTU when none is configured (the
// YANG default).
const DefaultReportMTU = 1500

// MinReportMTU is the smallest report path MTU (IPv4's minimum datagram).
const MinReportMTU = 576

// DefaultReportSessionAttrs returns a v2.0 session with the default truncate
// size; the caller fills in addresses and ports.
func DefaultReportSessionAttrs() ReportSessionAttrs {
	return ReportSessionAttrs{TruncateSize: DefaultTruncateSize, Format: spec.ReportFormatV2, MTU: DefaultReportMTU}
}

// ObjectType implements Attrs.
func (ReportSessionAttrs) ObjectType() ObjectType { return ObjectTypeReportSession }

// References implements Attrs.
func (ReportSessionAttrs) References() []OID { return nil }

// SettableFrom implements Attrs: all report session attributes are settable.
func (ReportSessionAttrs) SettableFrom(old Attrs) bool {
	_, ok := old.(ReportSessionAttrs)
	return ok
}

// Clone returns a deep copy.
func (a ReportSessionAttrs) Clone() ReportSessionAttrs {
	a.Destinations = slices.Clone(a.Destinations)
	return a
}

// DstPort is the effective UDP port of destination i.
func (a ReportSessionAttrs) DstPort(i int) uint16 {
	if p := a.Destinations[i].UDPPort; p != 0 {
		return p
	}
	return a.UDPDstPort
}

// Validate implements Attrs. Destination indexes in errors are 0-based.
func (a ReportSessionAttrs) Validate() error {
	const t = ObjectTypeReportSession
	if a.MTU != 0 && a.MTU < MinReportMTU {
		return invalid(t, AttrReportSessionMTU, "path MTU %d is below %d", a.MTU, MinReportMTU)
	}
	if err := a.SrcPort.validate(); err != nil {
		return err
	}
	if !a.SrcIP.IsValid() || a.SrcIP.IsUnspecified() {
		return invalid(t, AttrReportSessionSrcIP, "source IP %v is invalid", a.SrcIP)
	}
	if a.SrcIP.Is4In6() {
		return invalid(t, AttrReportSessionSrcIP, "source IP %v is IPv4-mapped; use the IPv4 form", a.SrcIP)
	}
	if len(a.Destinations) == 0 {
		return invalid(t, AttrReportSessionDestinations, "at least one destination is required")
	}
	type key struct {
		ip   netip.Addr
		port uint16
	}
	seen := make(map[key]int, len(a.Destinations))
	for i, d := range a.Destinations {
		switch {
		case !d.IP.IsValid() || d.IP.IsUnspecified():
			return invalidEntry(t, AttrReportSessionDestinationIP, i, "destination %d: IP %v is invalid", i, d.IP)
		case d.IP.IsMulticast() || d.IP == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			// Reports carry packet contents: they go to one collector.
			return invalidEntry(t, AttrReportSessionDestinationIP, i, "destination %d: %v is a multicast or broadcast address; reports go to unicast collectors", i, d.IP)
		case d.IP.Is4() != a.SrcIP.Is4():
			return invalidEntry(t, AttrReportSessionDestinationIP, i, "destination %d: IP %v and source IP %v differ in family", i, d.IP, a.SrcIP)
		case a.DstPort(i) == 0:
			return invalidEntry(t, AttrReportSessionDestinationUDPPort, i, "destination %d: UDP port 0 is invalid", i)
		}
		k := key{d.IP, a.DstPort(i)}
		if j, dup := seen[k]; dup {
			return invalidEntry(t, AttrReportSessionDestinations, i, "destination %d: duplicates destination %d", i, j)
		}
		seen[k] = i
	}
	if a.VirtualRouter != "" {
		if err := validateIfName(t, AttrReportSessionVirtualRouter, -1, "virtual router", a.VirtualRouter); err != nil {
			return err
		}
	}
	if a.TruncateSize != 0 && (a.TruncateSize < MinTruncateSize || a.TruncateSize > MaxTruncateSize) {
		return invalid(t, AttrReportSessionTruncateSize, "truncate size %d is out of range %d..%d (or 0)", a.TruncateSize, MinTruncateSize, MaxTruncateSize)
	}
	if !a.Format.Valid() {
		return invalid(t, AttrReportSessionFormat, "report format %d is invalid", a.Format)
	}
	if a.DSCP > MaxDSCP {
		return invalid(t, AttrReportSessionDSCP, "DSCP %d exceeds %d", a.DSCP, MaxDSCP)
	}
	c := a.Coalesce
	switch {
	case c.Enabled() && !a.Format.Coalescing():
		return invalid(t, AttrReportSessionCoalesceMaxReports, "coalescing needs report format 2.0, not %v", a.Format)
	case c.Enabled() && (c.MaxDelay < 0 || c.MaxDelay > MaxCoalesceDelay):
		return invalid(t, AttrReportSessionCoalesceMaxDelay, "coalescing max delay %v is out of range 0s..%v", c.MaxDelay, MaxCoalesceDelay)
	}
	return nil
}

func (s SrcPorts) validate() error {
	const t = ObjectTypeReportSession
	switch s.Mode {
	case SrcPortKernel:
	case SrcPortFixed:
		if s.Port == 0 {
			return invalid(t, AttrReportSessionSrcPort, "a fixed UDP source port needs a port (not 0)")
		}
	case SrcPortFlowHash:
		if s.Min == 0 {
			return invalid(t, AttrReportSessionSrcPortMin, "UDP source port range from 0: the lowest port is 1")
		}
		if s.Max < s.Min {
			return invalid(t, AttrReportSessionSrcPortMax, "UDP source port range %d..%d is empty", s.Min, s.Max)
		}
	default:
		return invalid(t, AttrReportSessionSrcPortMode, "UDP source port mode %d is invalid", s.Mode)
	}
	return nil
}

package sai

import (
	"net/netip"
	"slices"

	"github.com/intd-project/intd/sai/spec"
)

// The unit enums follow the p4-dtel-metadata-semantics YANG identities; the
// zero value means "not reported".

// TimeUnit is the unit of a time metadata (METADATA_TIME_UNITS), either a
// duration unit or an absolute timestamp format.
type TimeUnit uint8

const (
	TimeNanoseconds           TimeUnit = iota + 1 // METADATA_TIME_NANOSECONDS
	TimeMicroseconds                              // METADATA_TIME_MICROSECONDS
	TimeFractionalSeconds                         // METADATA_TIME_FRACTIONAL_SECONDS: 2^-32 s
	TimestampPOSIXNanoseconds                     // METADATA_TIMESTAMP_POSIX_NANOSECONDS: 64-bit ns since 1970 UTC
	TimestampPTP                                  // METADATA_TIMESTAMP_PTP: 32-bit s + 32-bit ns, TAI
	TimestampNTP                                  // METADATA_TIMESTAMP_NTP: 32-bit s since 1900 + 32-bit fraction
)

// SizeUnit is the unit of an occupancy metadata (METADATA_SIZE_UNITS).
type SizeUnit uint8

const (
	SizeBytes   SizeUnit = iota + 1 // METADATA_BYTES
	SizeCells                       // METADATA_CELLS
	SizePackets                     // METADATA_PACKETS
)

// UtilUnit is the unit of egress tx utilisation (METADATA_UTILIZATION_UNITS).
type UtilUnit uint8

const (
	UtilPercent             UtilUnit = iota + 1 // METADATA_PERCENT
	UtilTenthsOfPercent                         // METADATA_TENTHS_OF_PERCENT
	UtilHundredthsOfPercent                     // METADATA_HUNDREDTHS_OF_PERCENT
)

// QueueTiming says when queue metadata is sampled (queue-md-timing).
type QueueTiming uint8

const (
	QueueTimingEnqueue QueueTiming = iota + 1 // ENQUEUE_TIME
	QueueTimingDequeue                        // DEQUEUE_TIME
)

// InterfaceIDKind says what an interface id in metadata identifies
// (INTERFACE_TYPE identities).
type InterfaceIDKind uint8

const (
	InterfacePhysicalPort   InterfaceIDKind = iota + 1 // PHYSICAL_PORT
	InterfaceFrontPanelPort                            // FRONT_PANEL_PORT
	InterfaceLogical                                   // LOGICAL_INTERFACE (e.g. a Linux ifindex)
	InterfaceL2Logical                                 // L2_LOGICAL_INTERFACE (VLAN or VNI)
	InterfaceVTEP                                      // VTEP_LOGICAL_INTERFACE
)

// LastHopReport says where an INT sink puts its own metadata
// (int-last-hop-md-report-position).
type LastHopReport uint8

const (
	LastHopEmbeddedInt    LastHopReport = iota + 1 // pushed onto the INT stack
	LastHopSameReport                              // report header, same report
	LastHopSeparateReport                          // report header, separate report
)

// OccupancySemantics describes queue or buffer occupancy metadata.
type OccupancySemantics struct {
	Unit     SizeUnit
	CellSize uint16 // bytes per cell, for SizeCells
	Timing   QueueTiming
}

// Capabilities is what a backend can do and how its metadata is encoded. It
// feeds the INT metadata-semantics state in YANG and lets Check reject
// configuration early with ErrUnsupported.
type Capabilities struct {
	IntEndpoint, IntTransit, Postcard, DropReport, QueueReport bool

	Modes        []IntMode
	Instructions Instruction // instruction bits this node fills in INT metadata
	// ReportMetadata is the bits this node can put in telemetry reports
	// (RepMdBits), e.g. for INT-MX and postcards.
	ReportMetadata Instruction
	Encaps         []spec.Encap
	ReportFormats  []ReportFormat
	Coalescing     bool
	EventTypes     []EventType
	// InnerMatch: the watchlist can match the tunnel and inner headers of
	// VXLAN, VXLAN-GPE, Geneve, GRE and GTP-U traffic.
	InnerMatch bool
	// PacketInterval: the backend honours WatchlistAction.PacketInterval.
	PacketInterval bool
	// SessionTunnel: an INT source can add the VXLAN-GPE tunnel of
	// SessionEncapVXLANGPE and a sink remove it (DTelAttrs.TunnelAddress).
	SessionTunnel bool

	HopLatency       TimeUnit
	IngressTimestamp TimeUnit
	EgressTimestamp  TimeUnit
	QueueOccupancy   OccupancySemantics
	BufferOccupancy  OccupancySemantics
	TxUtilization    UtilUnit
	L1InterfaceID    InterfaceIDKind
	L2InterfaceID    InterfaceIDKind
	LastHopReport    LastHopReport
	// DropReasonReference is a URL defining the drop reason codes.
	DropReasonReference string

	// Limits; 0 means unlimited. Backends enforce them in Create.
	MaxWatchlistEntries   int
	MaxReportDestinations int
	MaxQueueReports       int
}

// SDFabricDropReasonsURL documents the DropReason codes.
const SDFabricDropReasonsURL = "https://docs.sd-fabric.org/master/advanced/int.html#drop-reasons"

// FullCapabilities claims every feature, with nanosecond latency, 64-bit
// POSIX nanosecond timestamps, byte occupancies sampled at dequeue and Linux
// ifindex interface ids. It is saitest's default and a starting point for
// real backends.
func FullCapabilities() Capabilities {
	bytes := OccupancySemantics{Unit: SizeBytes, Timing: QueueTimingDequeue}
	return Capabilities{
		IntEndpoint: true, IntTransit: true, Postcard: true, DropReport: true, QueueReport: true,
		Modes:               []IntMode{IntModeMD, IntModeMX},
		Instructions:        spec.InstAll,
		ReportMetadata:      spec.InstReportable,
		Encaps:              spec.Encaps(),
		ReportFormats:       []ReportFormat{spec.ReportFormatV2, spec.ReportFormatV05},
		Coalescing:          true,
		EventTypes:          spec.EventTypes(),
		InnerMatch:          true,
		PacketInterval:      true,
		SessionTunnel:       true,
		HopLatency:          TimeNanoseconds,
		IngressTimestamp:    TimestampPOSIXNanoseconds,
		EgressTimestamp:     TimestampPOSIXNanoseconds,
		QueueOccupancy:      bytes,
		BufferOccupancy:     bytes,
		TxUtilization:       UtilPercent,
		L1InterfaceID:       InterfacePhysicalPort,
		L2InterfaceID:       InterfaceLogical,
		LastHopReport:       LastHopEmbeddedInt,
		DropReasonReference: SDFabricDropReasonsURL,
	}
}

// Produced is the baseline metadata (instruction bits 0-8) the backend
// writes with real values, as its semantics above say: every field with a
// unit. Fields outside it are written, when asked for, as the reserved
// all-ones value (INT v2.1, INT-MD Metadata Header Format); a supported
// field may still be all ones for a packet that has no value for it.
func (c Capabilities) Produced() Instruction {
	p := spec.InstNodeID | spec.InstL1Interfaces | spec.InstL2Interfaces
	for _, f := range []struct {
		ok  bool
		bit Instruction
	}{
		{c.HopLatency != 0, spec.InstHopLatency},
		{c.QueueOccupancy.Unit != 0, spec.InstQueue},
		{c.IngressTimestamp != 0, spec.InstIngressTimestamp},
		{c.EgressTimestamp != 0, spec.InstEgressTimestamp},
		{c.TxUtilization != 0, spec.InstEgressTxUtil},
		{c.BufferOccupancy.Unit != 0, spec.InstBuffer},
	} {
		if f.ok {
			p |= f.bit
		}
	}
	return p
}

// Check reports, as an *AttrError wrapping ErrUnsupported, the first
// attribute in a that these capabilities cannot honour. It does not
// validate a (see Attrs.Validate) and does not check count limits.
func (c Capabilities) Check(a Attrs) error {
	switch a := a.(type) {
	case DTelAttrs:
		return c.checkDTel(a)
	case IntSessionAttrs:
		const t = ObjectTypeIntSession
		if !slices.Contains(c.Modes, a.Mode) {
			return unsupported(t, AttrIntSessionMode, "mode %v is not supported", a.Mode)
		}
		have := c.Instructions
		if a.Mode == IntModeMX {
			have = c.ReportMetadata // MX metadata travels in reports
		}
		if u := a.Instructions &^ have; u != 0 {
			return unsupported(t, AttrIntSessionInstructions, "instructions %v are not supported in %v mode", u, a.Mode)
		}
		if a.Encapsulation != SessionEncapNone && !c.SessionTunnel {
			return unsupported(t, AttrIntSessionEncapsulation, "encapsulation %v is not supported", a.Encapsulation)
		}
	case ReportSessionAttrs:
		const t = ObjectTypeReportSession
		switch {
		case !slices.Contains(c.ReportFormats, a.Format):
			return unsupported(t, AttrReportSessionFormat, "report format %v is not supported", a.Format)
		case a.Coalesce.Enabled() && !c.Coalescing:
			return unsupported(t, AttrReportSessionCoalesceMaxReports, "coalescing is not supported")
		case c.MaxReportDestinations > 0 && len(a.Destinations) > c.MaxReportDestinations:
			return unsupported(t, AttrReportSessionDestinations, "%d destinations exceed the limit of %d", len(a.Destinations), c.MaxReportDestinations)
		}
	case QueueReportAttrs:
		if !c.QueueReport {
			return unsupported(ObjectTypeQueueReport, AttrQueueReportPort, "queue reports are not supported")
		}
	case EventAttrs:
		if !slices.Contains(c.EventTypes, a.Type) {
			return unsupported(ObjectTypeEvent, AttrEventType, "%v events are not supported", a.Type)
		}
	case WatchlistEntryAttrs:
		const t = ObjectTypeWatchlistEntry
		switch {
		case a.Action.FlowOp == FlowOpInt && !c.IntEndpoint:
			return unsupported(t, AttrWatchlistActionFlowOp, "flow op INT needs INT endpoint support")
		case a.Action.FlowOp == FlowOpPostcard && !c.Postcard:
			return unsupported(t, AttrWatchlistActionFlowOp, "flow op POSTCARD is not supported")
		case (a.Action.DropReportEnable || a.Action.TailDropReportEnable) && !c.DropReport:
			return unsupported(t, AttrWatchlistActionDropReportEnable, "drop reports are not supported")
		case a.Match.Inner.Enabled && !c.InnerMatch:
			return unsupported(t, AttrWatchlistMatchInnerEnabled, "tunnel inner header match is not supported")
		case a.Action.PacketInterval != 0 && !c.PacketInterval:
			return unsupported(t, AttrWatchlistActionPacketInterval, "per-flow packet interval is not supported")
		}
	}
	return nil
}

func (c Capabilities) checkDTel(a DTelAttrs) error {
	const t = ObjectTypeDTel
	for _, f := range []struct {
		on, ok bool
		attr   AttrID
		name   string
	}{
		{a.IntEndpointEnable, c.IntEndpoint, AttrDTelIntEndpointEnable, "INT endpoint"},
		{a.IntTransitEnable, c.IntTransit, AttrDTelIntTransitEnable, "INT transit"},
		{a.PostcardEnable, c.Postcard, AttrDTelPostcardEnable, "postcard"},
		{a.DropReportEnable, c.DropReport, AttrDTelDropReportEnable, "drop report"},
		{a.QueueReportEnable, c.QueueReport, AttrDTelQueueReportEnable, "queue report"},
	} {
		if f.on && !f.ok {
			return unsupported(t, f.attr, "%s is not supported", f.name)
		}
	}
	for _, tun := range []struct {
		a    netip.Addr
		attr AttrID
	}{{a.TunnelAddress, AttrDTelTunnelAddress}, {a.TunnelAddress6, AttrDTelTunnelAddress6}} {
		if tun.a.IsValid() && !c.SessionTunnel {
			return unsupported(t, tun.attr, "INT session tunnels (VXLAN-GPE added by the source) are not supported")
		}
	}
	for _, e := range []struct {
		on   bool
		enc  spec.Encap
		attr AttrID
	}{
		{a.IntL4DSCP.Mask != 0, spec.EncapDSCP, AttrDTelIntL4DSCP},
		{a.IntUDPDstPort != 0, spec.EncapUDPPort, AttrDTelIntUDPDstPort},
		{a.ProbeMarker != 0, spec.EncapProbeMarker, AttrDTelProbeMarker},
		{a.VXLANGPENextProtocol != 0, spec.EncapVXLANGPE, AttrDTelVXLANGPENextProtocol},
		{a.GeneveOptionClass != 0, spec.EncapGeneve, AttrDTelGeneveOptionClass},
		{a.GREProtocolType != 0, spec.EncapGRE, AttrDTelGREProtocolType},
	} {
		if e.on && !slices.Contains(c.Encaps, e.enc) {
			return unsupported(t, e.attr, "INT encapsulation %v is not supported", e.enc)
		}
	}
	return nil
}

package sai

import (
	"net/netip"
	"slices"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

// FlowReportFilter holds the "smart filter" parameters that limit flow
// reports (SD-Fabric style): one report per interval per flow, plus an
// immediate report when the flow's hop latency or path changes.
type FlowReportFilter struct {
	// Interval between periodic reports of the same flow. Default 1s.
	Interval time.Duration
	// HopLatencyChange is the minimum hop-latency delta that triggers an
	// immediate report. Default 256ns; 0 reports on every change.
	HopLatencyChange time.Duration
	// Adaptive replaces the fixed HopLatencyChange with a band learned per
	// flow and hop (EWMA of latency and of its absolute deviation): a hop
	// latency is a change when it leaves the learned mean by more than
	// LatencyFactor times the deviation and by more than LatencyFloor.
	// Default true, with DefaultLatencyFactor and DefaultLatencyFloor;
	// false is SD-Fabric's fixed threshold.
	Adaptive      bool
	LatencyFactor uint32
	LatencyFloor  time.Duration
	// OnPortChange: a change of the flow's ingress or egress interface
	// triggers a report. Default true.
	OnPortChange bool
	// OnPathChange: a change of the node ids along the flow's path (seen
	// in its INT stack) triggers a report. Default true.
	OnPathChange bool
	// OnQueueChange: a change of the flow's egress queue triggers a
	// report. Default true.
	OnQueueChange bool
}

// MalformedAction is what a node does with a packet that carries the INT
// marking but does not parse as INT.
type MalformedAction uint8

const (
	MalformedForward MalformedAction = iota // forward unchanged, counted
	MalformedDrop                           // drop, counted
)

func (m MalformedAction) String() string {
	switch m {
	case MalformedForward:
		return "FORWARD"
	case MalformedDrop:
		return "DROP"
	}
	return "MalformedAction(" + itoa(int(m)) + ")"
}

// DTelAttrs mirrors SAI_OBJECT_TYPE_DTEL, the node-wide telemetry object
// (sai_dtel_attr_t). There is at most one per backend. Every attribute is
// CREATE_AND_SET.
type DTelAttrs struct {
	IntEndpointEnable bool   // SAI_DTEL_ATTR_INT_ENDPOINT_ENABLE: act as INT source and sink
	IntTransitEnable  bool   // SAI_DTEL_ATTR_INT_TRANSIT_ENABLE
	PostcardEnable    bool   // SAI_DTEL_ATTR_POSTCARD_ENABLE (INT-XD)
	DropReportEnable  bool   // SAI_DTEL_ATTR_DROP_REPORT_ENABLE
	QueueReportEnable bool   // SAI_DTEL_ATTR_QUEUE_REPORT_ENABLE
	SwitchID          uint32 // SAI_DTEL_ATTR_SWITCH_ID: INT node id and report Node ID
	// HWID is the reports' hw_id (Telemetry Report v2.0 group header,
	// v0.5 header), 0..MaxHWID; SAI has no attribute for it.
	HWID uint8

	// FlowStateClearCycle (SAI_DTEL_ATTR_FLOW_STATE_CLEAR_CYCLE) is how
	// often flow state (used for change detection) is flushed; 0 never.
	FlowStateClearCycle time.Duration
	// LatencySensitivity (SAI_DTEL_ATTR_LATENCY_SENSITIVITY): hop latency
	// is quantised to 2^n ns before flow-state change detection. 0..31.
	LatencySensitivity uint8
	// SinkPortList (SAI_DTEL_ATTR_SINK_PORT_LIST): interfaces facing
	// outside the INT domain; INT is stripped on egress through them.
	SinkPortList []string

	// INT markings: how INT is signalled in packets (INT v2.1 §"INT over
	// TCP/UDP"). At most one of IntL4DSCP, IntUDPDstPort and ProbeMarker
	// may be enabled: the spec forbids mixing them in a domain.

	// IntL4DSCP (SAI_DTEL_ATTR_INT_L4_DSCP) marks INT by DSCP value/bit.
	// Mask 0 disables DSCP marking.
	IntL4DSCP DSCPMatch
	// IntL4DSCPRemark is the DSCP an INT source writes into user packets
	// entering the domain (through a sink port, or sent by the host)
	// whose DSCP matches IntL4DSCP, so that no user packet is taken for
	// INT downstream (INT v2.1, DSCP marking). Must not match IntL4DSCP.
	IntL4DSCPRemark uint8
	// MalformedAction is what the node does with a packet received on a
	// fabric port that carries the INT marking but does not parse as INT.
	// Packets from outside the domain are never parsed as INT.
	MalformedAction MalformedAction
	// IntUDPDstPort marks INT by UDP destination port; 0 disables.
	IntUDPDstPort uint16
	// IntUDPNPT is how a source marks UDP traffic when IntUDPDstPort is
	// set (1 or 2; ignored otherwise); non-UDP traffic always gets NPT 2.
	IntUDPNPT spec.NPT
	// ProbeMarker is the 64-bit marker after the L4 header (Probe Marker
	// (1) in the high 32 bits); 0 disables.
	ProbeMarker uint64

	// Tunnel encapsulations (0 disables each).
	VXLANGPENextProtocol uint8  // VXLAN-GPE next protocol for INT (spec: 0x82)
	GeneveOptionClass    uint16 // Geneve option class for INT (spec: 0x0103)
	GREProtocolType      uint16 // GRE protocol type for INT (TBD_INT in the spec)

	// TunnelAddress is this node's end of the VXLAN-GPE tunnels that
	// sessions with SessionEncapVXLANGPE add: their outer source here as
	// a source, and the destination at which arriving ones end. IPv4,
	// for IPv4 packets; TunnelAddress6 is the IPv6 one, for IPv6
	// packets. The zero Addr: none.
	TunnelAddress, TunnelAddress6 netip.Addr

	FlowReport FlowReportFilter

	// DSValues are this node's values of domain-specific fields: reports
	// answering a DS instruction with their bit carry them (DSMdBits).
	DSValues []DSValue
}

// DSValue is a node's value of one domain-specific field.
type DSValue struct {
	DomainID uint16 // 1..65535: domain 0 has no domain-specific fields
	Bit      uint8  // DS instruction bit, 0 = most significant
	Words    uint8  // field size, 1..8 words; Value is right-justified in it
	Value    uint64
}

// DefaultDTelAttrs returns a DTel object with every function disabled and
// the defaults of SAI, the INT spec and SD-Fabric elsewhere: latency
// sensitivity 8 (256ns), the tentative VXLAN-GPE and Geneve INT code points,
// and a flow report filter of 1s reporting every kind of change, latency
// changes by the adaptive band (256ns in the fixed mode).
func DefaultDTelAttrs() DTelAttrs {
	return DTelAttrs{
		LatencySensitivity:   8,
		VXLANGPENextProtocol: spec.VXLANGPENextProtoINT,
		GeneveOptionClass:    spec.GeneveClassINT,
		FlowReport: FlowReportFilter{
			Interval:         time.Second,
			HopLatencyChange: 256 * time.Nanosecond,
			Adaptive:         true,
			LatencyFactor:    DefaultLatencyFactor,
			LatencyFloor:     DefaultLatencyFloor,
			OnPortChange:     true,
			OnPathChange:     true,
			OnQueueChange:    true,
		},
	}
}

// ObjectType implements Attrs.
func (DTelAttrs) ObjectType() ObjectType { return ObjectTypeDTel }

// References implements Attrs.
func (DTelAttrs) References() []OID { return nil }

// SettableFrom implements Attrs: all DTel attributes are settable.
func (DTelAttrs) SettableFrom(old Attrs) bool {
	_, ok := old.(DTelAttrs)
	return ok
}

// Clone returns a deep copy.
func (a DTelAttrs) Clone() DTelAttrs {
	a.SinkPortList = slices.Clone(a.SinkPortList)
	return a
}

// MaxLatencySensitivity bounds DTelAttrs.LatencySensitivity: hop latency
// is a 32-bit quantity.
const MaxLatencySensitivity = 31

// MaxHWID bounds DTelAttrs.HWID: the report headers' hw_id has 6 bits.
const MaxHWID = 63

// Validate implements Attrs.
func (a DTelAttrs) Validate() error {
	const t = ObjectTypeDTel
	if a.HWID > MaxHWID {
		return invalid(t, AttrDTelHWID, "hw_id %d exceeds %d", a.HWID, MaxHWID)
	}
	if err := validateDuration(t, AttrDTelFlowStateClearCycle, "flow-state clear cycle", a.FlowStateClearCycle); err != nil {
		return err
	}
	if a.LatencySensitivity > MaxLatencySensitivity {
		return invalid(t, AttrDTelLatencySensitivity, "latency sensitivity %d exceeds %d", a.LatencySensitivity, MaxLatencySensitivity)
	}
	seen := make(map[string]bool, len(a.SinkPortList))
	for i, p := range a.SinkPortList {
		if err := validateIfName(t, AttrDTelSinkPortList, i, "sink port "+itoa(i), p); err != nil {
			return err
		}
		if seen[p] {
			return invalidEntry(t, AttrDTelSinkPortList, i, "sink port %d: %q is listed twice", i, p)
		}
		seen[p] = true
	}
	if err := a.IntL4DSCP.validate(t, AttrDTelIntL4DSCPValue, AttrDTelIntL4DSCPMask, "INT L4 DSCP"); err != nil {
		return err
	}
	if err := validateDSValues(a.DSValues); err != nil {
		return err
	}
	if a.TunnelAddress.IsValid() && !validTunnelAddr(a.TunnelAddress, false) {
		return invalid(t, AttrDTelTunnelAddress, "tunnel address %v is not a unicast IPv4 address", a.TunnelAddress)
	}
	if a.TunnelAddress6.IsValid() && !validTunnelAddr(a.TunnelAddress6, true) {
		return invalid(t, AttrDTelTunnelAddress6, "tunnel address %v is not a unicast IPv6 address", a.TunnelAddress6)
	}
	switch {
	case a.IntL4DSCPRemark > MaxDSCP:
		return invalid(t, AttrDTelIntL4DSCPRemark, "remark DSCP %d exceeds %d", a.IntL4DSCPRemark, MaxDSCP)
	case a.IntL4DSCP.Mask != 0 && a.IntL4DSCP.Matches(a.IntL4DSCPRemark):
		return invalid(t, AttrDTelIntL4DSCPRemark, "remark DSCP %d itself carries the INT marking %#x/%#x: choose a value user traffic may keep", a.IntL4DSCPRemark, a.IntL4DSCP.Value, a.IntL4DSCP.Mask)
	case a.MalformedAction > MalformedDrop:
		return invalid(t, AttrDTelMalformedAction, "malformed INT action %d is invalid", a.MalformedAction)
	}
	if a.IntUDPDstPort != 0 && a.IntUDPNPT != spec.NPTUDPPort && a.IntUDPNPT != spec.NPTIPProto {
		return invalid(t, AttrDTelIntUDPNPT, "INT UDP NPT %d is invalid (want 1 or 2)", a.IntUDPNPT)
	}
	var marks []string
	if a.IntL4DSCP.Mask != 0 {
		marks = append(marks, "DSCP")
	}
	if a.IntUDPDstPort != 0 {
		marks = append(marks, "UDP destination port")
	}
	if a.ProbeMarker != 0 {
		marks = append(marks, "probe marker")
	}
	if len(marks) > 1 {
		return invalid(t, AttrDTelIntL4DSCP, "INT marked by both %s and %s; use one marking per domain", marks[0], marks[1])
	}
	f := a.FlowReport
	if f.Interval <= 0 {
		return invalid(t, AttrDTelFlowReportInterval, "flow report interval %v must be positive", f.Interval)
	}
	if f.Adaptive && f.LatencyFactor == 0 && f.LatencyFloor == 0 {
		return invalid(t, AttrDTelFlowReportLatencyFactor, "adaptive flow report filter with latency factor 0 and floor 0 reports every latency change")
	}
	if f.LatencyFloor > time.Duration(1<<32-1) {
		return invalid(t, AttrDTelFlowReportLatencyFloor, "flow report latency floor %v is above 4.29s", f.LatencyFloor)
	}
	if err := validateDuration(t, AttrDTelFlowReportLatencyFloor, "flow report latency floor", f.LatencyFloor); err != nil {
		return err
	}
	return validateDuration(t, AttrDTelFlowReportHopLatencyChange, "flow report hop-latency change threshold", f.HopLatencyChange)
}

func validateDSValues(vs []DSValue) error {
	const t = ObjectTypeDTel
	seen := map[[2]uint16]bool{}
	const attr = AttrDTelDSValues
	for i, v := range vs {
		k := [2]uint16{v.DomainID, uint16(v.Bit)}
		switch {
		case v.DomainID == 0:
			return invalidEntry(t, attr, i, "domain-specific value in domain 0, which has no domain-specific fields")
		case v.Bit > 15:
			return invalidEntry(t, attr, i, "domain-specific bit %d exceeds 15", v.Bit)
		case v.Words < 1 || v.Words > 8:
			return invalidEntry(t, attr, i, "domain-specific field size %d words is outside 1..8", v.Words)
		case v.Words == 1 && v.Value > 0xffffffff:
			return invalidEntry(t, attr, i, "value %#x of domain %d bit %d does not fit its 1 word", v.Value, v.DomainID, v.Bit)
		case seen[k]:
			return invalidEntry(t, attr, i, "domain %d bit %d has two values", v.DomainID, v.Bit)
		}
		seen[k] = true
	}
	return nil
}

// The adaptive flow filter's defaults: a latency 32 learned deviations
// from its mean, and at least 20µs, is a change. Software forwarding
// jitter is microseconds, heavy tailed (packet to packet on a loaded
// host: median 9µs, 99th percentile 100µs, 99.9th 400µs), an ASIC's
// nanoseconds; the learned band covers the first, the floor keeps a quiet
// flow's scheduling noise from counting.
const (
	DefaultLatencyFactor = 32
	DefaultLatencyFloor  = 20 * time.Microsecond
)

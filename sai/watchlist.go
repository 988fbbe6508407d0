package sai

import (
	"net/netip"
	"time"
)

// IP protocol numbers the watchlist needs to reason about.
const (
	IPProtocolICMP   = 1
	IPProtocolTCP    = 6
	IPProtocolUDP    = 17
	IPProtocolICMPv6 = 58
	IPProtocolSCTP   = 132
)

// EtherTypes an EtherType match can meet on IP traffic, the only traffic
// the watchlist classifies.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
)

// MaxVNI is the largest 24-bit VXLAN network identifier.
const MaxVNI = 1<<24 - 1

// TunnelType is the encapsulation an inner match looks inside.
type TunnelType uint8

const (
	TunnelAny      TunnelType = iota // any of the tunnels below
	TunnelVXLAN                      // VXLAN, UDP 4789 (RFC 7348)
	TunnelVXLANGPE                   // VXLAN-GPE, UDP 4790
	TunnelGeneve                     // Geneve, UDP 6081 (RFC 8926)
	TunnelGRE                        // GRE, IP protocol 47 (RFC 2784, 2890)
	TunnelGTPU                       // GTP-U G-PDU, UDP 2152 (3GPP TS 29.281)
	NumTunnelTypes
)

func (t TunnelType) String() string {
	switch t {
	case TunnelAny:
		return "ANY"
	case TunnelVXLAN:
		return "VXLAN"
	case TunnelVXLANGPE:
		return "VXLAN_GPE"
	case TunnelGeneve:
		return "GENEVE"
	case TunnelGRE:
		return "GRE"
	case TunnelGTPU:
		return "GTPU"
	}
	return "TunnelType(" + itoa(int(t)) + ")"
}

// HasVNI reports whether t's tunnel id is a 24-bit VNI.
func (t TunnelType) HasVNI() bool {
	return t == TunnelVXLAN || t == TunnelVXLANGPE || t == TunnelGeneve
}

// TCPFlagsMatch matches the 8 TCP flag bits (CWR..FIN) under a mask; a zero
// Mask matches any flags.
type TCPFlagsMatch struct {
	Value uint8
	Mask  uint8
}

// InnerMatch matches tunnelled traffic by its tunnel and inner headers
// (SAI_ACL_ENTRY_ATTR_FIELD_TUNNEL_VNI, FIELD_INNER_*). With Enabled false
// the entry looks at outer headers only and every other field must be
// zero; with Enabled true it matches only packets of such a tunnel whose
// inner packet is IPv4 or IPv6.
type InnerMatch struct {
	Enabled bool
	Tunnel  TunnelType
	// TunnelID is the VNI (VXLAN, VXLAN-GPE, Geneve), the key (GRE with
	// the K bit; 0 without) or the TEID (GTP-U); 0 matches any.
	TunnelID             uint32
	EtherType            uint16       // FIELD_INNER_ETHER_TYPE: 0 any
	SrcPrefix, DstPrefix netip.Prefix // zero Prefix matches any
	IPProtocol           uint8        // 0 matches any
	L4SrcPort, L4DstPort PortRange
}

// ICMPMatch matches the ICMP or ICMPv6 type and code under masks
// (FIELD_ICMP_TYPE/CODE, FIELD_ICMPV6_TYPE/CODE); zero masks match any.
type ICMPMatch struct {
	Type, TypeMask uint8
	Code, CodeMask uint8
}

// WatchlistMatch holds an entry's match fields (SAI_ACL_ENTRY_ATTR_FIELD_*).
// Zero values match anything.
type WatchlistMatch struct {
	SrcPrefix  netip.Prefix // FIELD_SRC_IP / FIELD_SRC_IPV6
	DstPrefix  netip.Prefix // FIELD_DST_IP / FIELD_DST_IPV6
	IPProtocol uint8        // FIELD_IP_PROTOCOL; required for port and TCP flag matches
	L4SrcPort  PortRange    // FIELD_ACL_RANGE_TYPE L4_SRC_PORT_RANGE
	L4DstPort  PortRange    // FIELD_ACL_RANGE_TYPE L4_DST_PORT_RANGE
	DSCP       DSCPMatch    // FIELD_DSCP
	TCPFlags   TCPFlagsMatch
	InPort     string    // FIELD_IN_PORT: ingress interface, "" any
	EtherType  uint16    // FIELD_ETHER_TYPE: 0 any
	ICMP       ICMPMatch // needs IPProtocol ICMP or ICMPv6
	Inner      InnerMatch
}

// FlowOp mirrors sai_acl_dtel_flow_op_t.
type FlowOp uint8

const (
	FlowOpNop      FlowOp = iota // SAI_ACL_DTEL_FLOW_OP_NOP
	FlowOpInt                    // SAI_ACL_DTEL_FLOW_OP_INT
	FlowOpPostcard               // SAI_ACL_DTEL_FLOW_OP_POSTCARD
)

func (f FlowOp) String() string {
	switch f {
	case FlowOpNop:
		return "NOP"
	case FlowOpInt:
		return "INT"
	case FlowOpPostcard:
		return "POSTCARD"
	}
	return "FlowOp(" + itoa(int(f)) + ")"
}

// WatchlistAction holds an entry's DTel actions (SAI_ACL_ENTRY_ATTR_ACTION_DTEL_*).
// The zero value (NOP, no reports) excludes matching traffic from telemetry,
// which is how a higher-priority entry carves a hole in a broader one.
type WatchlistAction struct {
	FlowOp FlowOp // ACTION_DTEL_FLOW_OP
	// IntSession (ACTION_DTEL_INT_SESSION) is required for FlowOpInt,
	// optional for FlowOpPostcard (what to collect) and must be null for NOP.
	IntSession           OID
	DropReportEnable     bool  // ACTION_DTEL_DROP_REPORT_ENABLE
	TailDropReportEnable bool  // ACTION_DTEL_TAIL_DROP_REPORT_ENABLE
	FlowSamplePercent    uint8 // ACTION_DTEL_FLOW_SAMPLE_PERCENT: 0..100 of flows get FlowOp
	ReportAllPackets     bool  // ACTION_DTEL_REPORT_ALL_PACKETS: bypass flow-state filtering
	// PacketInterval (no SAI counterpart) makes FlowOp act on at most one
	// packet of each flow per interval: the first, then the first at least
	// PacketInterval after the last one acted on. Other packets pass
	// untouched, counted in WatchlistEntryStats.UnsampledPackets. 0 acts
	// on every packet. Bounds INT's cost where instrumenting every packet
	// would defeat TSO/GSO.
	PacketInterval time.Duration
}

// MaxPacketInterval bounds WatchlistAction.PacketInterval.
const MaxPacketInterval = time.Hour

// WatchlistEntryAttrs mirrors a SAI_OBJECT_TYPE_ACL_ENTRY in a DTel
// watchlist table: a prioritised match selecting traffic for telemetry.
//
// Priority and Match are create-only (backends compile them into
// classifiers; change them by make-before-break recreation), Action is
// settable. Entries with equal priority may coexist, in unspecified order.
type WatchlistEntryAttrs struct {
	// Priority orders entries: the highest matching priority wins, as in
	// SAI_ACL_ENTRY_ATTR_PRIORITY.
	Priority uint16
	Match    WatchlistMatch
	Action   WatchlistAction
}

// ObjectType implements Attrs.
func (WatchlistEntryAttrs) ObjectType() ObjectType { return ObjectTypeWatchlistEntry }

// References implements Attrs.
func (a WatchlistEntryAttrs) References() []OID {
	if a.Action.IntSession.IsNull() {
		return nil
	}
	return []OID{a.Action.IntSession}
}

// SettableFrom implements Attrs: Priority and Match are create-only.
func (a WatchlistEntryAttrs) SettableFrom(old Attrs) bool {
	o, ok := old.(WatchlistEntryAttrs)
	return ok && o.Priority == a.Priority && o.Match == a.Match
}

// Validate implements Attrs.
func (a WatchlistEntryAttrs) Validate() error {
	if err := a.Match.validate(); err != nil {
		return err
	}
	return a.Action.validate()
}

const tw = ObjectTypeWatchlistEntry

// headerAttrs are the attributes of one header match, outer or inner.
type headerAttrs struct {
	src, dst, proto, l4src, l4dst AttrID
}

var (
	outerAttrs = headerAttrs{AttrWatchlistMatchSrcPrefix, AttrWatchlistMatchDstPrefix, AttrWatchlistMatchIPProtocol, AttrWatchlistMatchL4SrcPort, AttrWatchlistMatchL4DstPort}
	innerAttrs = headerAttrs{AttrWatchlistMatchInnerSrcPrefix, AttrWatchlistMatchInnerDstPrefix, AttrWatchlistMatchInnerIPProtocol, AttrWatchlistMatchInnerL4SrcPort, AttrWatchlistMatchInnerL4DstPort}
)

func validatePrefixPair(attr headerAttrs, name string, src, dst netip.Prefix) error {
	for _, p := range []struct {
		attr AttrID
		name string
		p    netip.Prefix
	}{{attr.src, name + "source prefix", src}, {attr.dst, name + "destination prefix", dst}} {
		if p.p == (netip.Prefix{}) {
			continue
		}
		switch {
		case !p.p.IsValid():
			return invalid(tw, p.attr, "%s %v is invalid", p.name, p.p)
		case p.p.Addr().Is4In6():
			return invalid(tw, p.attr, "%s %v is IPv4-mapped; use the IPv4 form", p.name, p.p)
		case p.p.Masked() != p.p:
			return invalid(tw, p.attr, "%s %v has host bits set (want %v)", p.name, p.p, p.p.Masked())
		}
	}
	if src.IsValid() && dst.IsValid() && src.Addr().Is4() != dst.Addr().Is4() {
		return invalid(tw, attr.dst, "%ssource prefix %v and destination prefix %v differ in family", name, src, dst)
	}
	return nil
}

func validateL4(attr headerAttrs, name string, proto uint8, src, dst PortRange) error {
	if err := src.validate(tw, attr.l4src, name+"L4 source port"); err != nil {
		return err
	}
	if err := dst.validate(tw, attr.l4dst, name+"L4 destination port"); err != nil {
		return err
	}
	if (!src.IsAny() || !dst.IsAny()) && proto != IPProtocolTCP && proto != IPProtocolUDP && proto != IPProtocolSCTP {
		return invalid(tw, attr.proto, "%sL4 port match needs IP protocol TCP, UDP or SCTP, not %d", name, proto)
	}
	return nil
}

func (m WatchlistMatch) validate() error {
	if err := validatePrefixPair(outerAttrs, "", m.SrcPrefix, m.DstPrefix); err != nil {
		return err
	}
	if err := validateL4(outerAttrs, "", m.IPProtocol, m.L4SrcPort, m.L4DstPort); err != nil {
		return err
	}
	if err := m.DSCP.validate(tw, AttrWatchlistMatchDSCPValue, AttrWatchlistMatchDSCPMask, "DSCP"); err != nil {
		return err
	}
	switch {
	case m.TCPFlags.Value&^m.TCPFlags.Mask != 0:
		return invalid(tw, AttrWatchlistMatchTCPFlagsValue, "TCP flags value %#x has bits outside mask %#x", m.TCPFlags.Value, m.TCPFlags.Mask)
	case m.TCPFlags.Mask != 0 && m.IPProtocol != IPProtocolTCP:
		return invalid(tw, AttrWatchlistMatchIPProtocol, "TCP flags match needs IP protocol TCP, not %d", m.IPProtocol)
	}
	if m.InPort != "" {
		if err := validateIfName(tw, AttrWatchlistMatchInPort, -1, "ingress port", m.InPort); err != nil {
			return err
		}
	}
	if err := validateEtherType(AttrWatchlistMatchEtherType, "", m.EtherType, m.SrcPrefix, m.DstPrefix); err != nil {
		return err
	}
	switch c := m.ICMP; {
	case c.Type&^c.TypeMask != 0:
		return invalid(tw, AttrWatchlistMatchICMPType, "ICMP type %d has bits outside mask %#x", c.Type, c.TypeMask)
	case c.Code&^c.CodeMask != 0:
		return invalid(tw, AttrWatchlistMatchICMPCode, "ICMP code %d has bits outside mask %#x", c.Code, c.CodeMask)
	case (c.TypeMask != 0 || c.CodeMask != 0) && m.IPProtocol != IPProtocolICMP && m.IPProtocol != IPProtocolICMPv6:
		return invalid(tw, AttrWatchlistMatchIPProtocol, "ICMP type or code match needs IP protocol ICMP (1) or ICMPv6 (58), not %d", m.IPProtocol)
	}
	in := m.Inner
	if !in.Enabled {
		if in != (InnerMatch{}) {
			return invalid(tw, AttrWatchlistMatchInnerEnabled, "inner header match is set without a tunnel match")
		}
		return nil
	}
	switch {
	case in.Tunnel >= NumTunnelTypes:
		return invalid(tw, AttrWatchlistMatchInnerTunnel, "tunnel type %d is invalid", in.Tunnel)
	case in.Tunnel.HasVNI() && in.TunnelID > MaxVNI:
		return invalid(tw, AttrWatchlistMatchInnerTunnelID, "%v VNI %d exceeds %d", in.Tunnel, in.TunnelID, MaxVNI)
	}
	if err := validatePrefixPair(innerAttrs, "inner ", in.SrcPrefix, in.DstPrefix); err != nil {
		return err
	}
	if err := validateEtherType(AttrWatchlistMatchInnerEtherType, "inner ", in.EtherType, in.SrcPrefix, in.DstPrefix); err != nil {
		return err
	}
	return validateL4(innerAttrs, "inner ", in.IPProtocol, in.L4SrcPort, in.L4DstPort)
}

// validateEtherType refuses an EtherType that contradicts the prefixes'
// family: no packet could match.
func validateEtherType(attr AttrID, name string, et uint16, src, dst netip.Prefix) error {
	p := src
	if !p.IsValid() {
		p = dst
	}
	if et == 0 || !p.IsValid() {
		return nil
	}
	if want := FamilyEtherType(p.Addr()); et != want {
		return invalid(tw, attr, "%sEtherType %#04x contradicts %sprefix %v (EtherType %#04x)", name, et, name, p, want)
	}
	return nil
}

// FamilyEtherType is the EtherType of packets addressed to a.
func FamilyEtherType(a netip.Addr) uint16 {
	if a.Is4() {
		return EtherTypeIPv4
	}
	return EtherTypeIPv6
}

func (a WatchlistAction) validate() error {
	switch a.FlowOp {
	case FlowOpNop:
		switch {
		case !a.IntSession.IsNull():
			return invalid(tw, AttrWatchlistActionIntSession, "flow op NOP takes no INT session")
		case a.FlowSamplePercent != 0:
			return invalid(tw, AttrWatchlistActionFlowSamplePercent, "flow sample percent %d is set with flow op NOP", a.FlowSamplePercent)
		case a.ReportAllPackets:
			return invalid(tw, AttrWatchlistActionReportAllPackets, "report all packets needs flow op INT or POSTCARD")
		case a.PacketInterval < 0:
			return invalid(tw, AttrWatchlistActionPacketInterval, "packet interval %v is negative", a.PacketInterval)
		case a.PacketInterval != 0:
			return invalid(tw, AttrWatchlistActionPacketInterval, "packet interval needs flow op INT or POSTCARD")
		}
		return nil
	case FlowOpInt:
		if a.IntSession.IsNull() {
			return invalid(tw, AttrWatchlistActionIntSession, "flow op INT needs an INT session")
		}
	case FlowOpPostcard:
	default:
		return invalid(tw, AttrWatchlistActionFlowOp, "flow op %d is invalid", a.FlowOp)
	}
	if !a.IntSession.IsNull() && a.IntSession.Type() != ObjectTypeIntSession {
		return invalid(tw, AttrWatchlistActionIntSession, "INT session %v is not an INT session", a.IntSession)
	}
	switch {
	case a.FlowSamplePercent > 100:
		return invalid(tw, AttrWatchlistActionFlowSamplePercent, "flow sample percent %d exceeds 100", a.FlowSamplePercent)
	case a.FlowSamplePercent == 0:
		return invalid(tw, AttrWatchlistActionFlowSamplePercent, "flow sample percent 0 with flow op %v acts on no flow", a.FlowOp)
	case a.PacketInterval < 0:
		return invalid(tw, AttrWatchlistActionPacketInterval, "packet interval %v is negative", a.PacketInterval)
	case a.PacketInterval > MaxPacketInterval:
		return invalid(tw, AttrWatchlistActionPacketInterval, "packet interval %v exceeds %v", a.PacketInterval, MaxPacketInterval)
	}
	return nil
}

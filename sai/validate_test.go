package sai

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

func validReportSession() ReportSessionAttrs {
	a := DefaultReportSessionAttrs()
	a.SrcIP = netip.MustParseAddr("10.0.0.1")
	a.UDPDstPort = 32766
	a.Destinations = []ReportDestination{{IP: netip.MustParseAddr("10.0.1.1")}}
	return a
}

func validQueueReport() QueueReportAttrs {
	a := DefaultQueueReportAttrs("eth0", 0)
	a.LatencyThreshold = 2 * time.Microsecond
	return a
}

func validEntry() WatchlistEntryAttrs {
	return WatchlistEntryAttrs{
		Priority: 10,
		Match: WatchlistMatch{
			SrcPrefix:  netip.MustParsePrefix("10.0.0.0/8"),
			IPProtocol: IPProtocolTCP,
			L4DstPort:  PortRange{80, 80},
		},
		Action: WatchlistAction{FlowOp: FlowOpInt, IntSession: MakeOID(ObjectTypeIntSession, 1), FlowSamplePercent: 100},
	}
}

// mod applies f to a copy of base, so each case states only what it breaks.
func mod[A Attrs](base A, f func(*A)) A {
	f(&base)
	return base
}

func TestValidateValid(t *testing.T) {
	for _, a := range []Attrs{
		DefaultDTelAttrs(),
		DefaultIntSessionAttrs(),
		validReportSession(),
		validQueueReport(),
		EventAttrs{Type: spec.EventDropReport, ReportSession: MakeOID(ObjectTypeReportSession, 1), DSCP: 63},
		validEntry(),
		WatchlistEntryAttrs{}, // exclusion entry: matches everything, does nothing
		mod(DefaultDTelAttrs(), func(a *DTelAttrs) {
			a.IntEndpointEnable, a.SinkPortList = true, []string{"eth0", "eth1"}
			a.IntL4DSCP = DSCPMatch{Value: 0x20, Mask: 0x20}
		}),
		mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTIPProto }),
		mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntUDPNPT = spec.NPTUDPPort }), // ignored without a port
		mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Mode, a.MaxHopCount = IntModeMX, 8 }),
		mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Instructions = spec.InstAll }),
		mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Instructions, a.DomainSpecificID, a.DSInstruction = 0, 7, 0x8000 }),
		mod(validReportSession(), func(a *ReportSessionAttrs) { a.TruncateSize = 0 }),
		mod(validReportSession(), func(a *ReportSessionAttrs) { a.Coalesce = Coalescing{MaxReports: 8} }),
		mod(validReportSession(), func(a *ReportSessionAttrs) {
			a.SrcIP = netip.MustParseAddr("2001:db8::1")
			a.Destinations = []ReportDestination{{IP: netip.MustParseAddr("2001:db8::2"), UDPPort: 1}, {IP: netip.MustParseAddr("2001:db8::2"), UDPPort: 2}}
		}),
		mod(validQueueReport(), func(a *QueueReportAttrs) { a.LatencyThreshold, a.DepthThreshold = 0, 1500 }),
		mod(validQueueReport(), func(a *QueueReportAttrs) { a.ResetThreshold = a.LatencyThreshold - 1 }),
		mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, TunnelID: MaxVNI, DstPrefix: netip.MustParsePrefix("192.168.0.0/16"), IPProtocol: IPProtocolUDP, L4SrcPort: PortRange{1000, 2000}}
			a.Action = WatchlistAction{FlowOp: FlowOpPostcard, FlowSamplePercent: 1, ReportAllPackets: true}
		}),
		mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, Tunnel: TunnelGTPU, TunnelID: 0xffffffff, EtherType: EtherTypeIPv4,
				SrcPrefix: netip.MustParsePrefix("10.250.0.0/16")}
		}),
		mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.IPProtocol, a.Match.L4SrcPort, a.Match.L4DstPort, a.Match.TCPFlags = IPProtocolICMPv6, PortRange{}, PortRange{}, TCPFlagsMatch{}
			a.Match.ICMP, a.Match.EtherType, a.Match.SrcPrefix = ICMPMatch{Type: 128, TypeMask: 0xff}, EtherTypeIPv6, netip.MustParsePrefix("2001:db8::/32")
		}),
		mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.PacketInterval = time.Microsecond }),
		mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Action = WatchlistAction{FlowOp: FlowOpPostcard, FlowSamplePercent: 100, PacketInterval: MaxPacketInterval}
		}),
	} {
		if err := a.Validate(); err != nil {
			t.Errorf("%T %+v: unexpected error: %v", a, a, err)
		}
	}
}

func TestValidateRules(t *testing.T) {
	v4 := netip.MustParseAddr("10.9.9.9")
	tests := []struct {
		name string
		a    Attrs
		attr string // AttrError.Field()
		msg  string // substring of Error()
	}{
		// DTel.
		{"negative clear cycle", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.FlowStateClearCycle = -time.Second }), "FlowStateClearCycle", "sai: dtel: flow-state clear cycle -1s is negative"},
		{"latency sensitivity", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.LatencySensitivity = 32 }), "LatencySensitivity", "latency sensitivity 32 exceeds 31"},
		{"hw id", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.HWID = 64 }), "HWID", "hw_id 64 exceeds 63"},
		{"empty sink port", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.SinkPortList = []string{"eth0", ""} }), "SinkPortList[1]", "sink port 1 is empty"},
		{"long sink port", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.SinkPortList = []string{"0123456789abcdef"} }), "SinkPortList[0]", "longer than 15"},
		{"bad sink port", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.SinkPortList = []string{"eth0/1"} }), "SinkPortList[0]", "not a valid interface name"},
		{"dup sink port", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.SinkPortList = []string{"eth0", "eth0"} }), "SinkPortList[1]", `"eth0" is listed twice`},
		{"dscp value", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntL4DSCP = DSCPMatch{Value: 64, Mask: 63} }), "IntL4DSCP.Value", "INT L4 DSCP value 64 exceeds 63"},
		{"dscp mask", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntL4DSCP = DSCPMatch{Mask: 0x40} }), "IntL4DSCP.Mask", "mask 0x40 exceeds 0x3f"},
		{"remark carries the marking", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntL4DSCP, a.IntL4DSCPRemark = DSCPMatch{Value: 0x20, Mask: 0x20}, 46 }), "IntL4DSCPRemark", "remark DSCP 46 itself carries the INT marking"},
		{"remark too large", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntL4DSCPRemark = 64 }), "IntL4DSCPRemark", "remark DSCP 64 exceeds 63"},
		{"malformed action", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.MalformedAction = 7 }), "MalformedAction", "malformed INT action 7 is invalid"},
		{"dscp outside mask", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntL4DSCP = DSCPMatch{Value: 3, Mask: 1} }), "IntL4DSCP.Value", "bits outside mask"},
		{"npt", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntUDPDstPort = 5000 }), "IntUDPNPT", "INT UDP NPT 0 is invalid"},
		{"two markings", mod(DefaultDTelAttrs(), func(a *DTelAttrs) {
			a.IntL4DSCP, a.ProbeMarker = DSCPMatch{Value: 1, Mask: 1}, 0xdeadbeef
		}), "IntL4DSCP", "both DSCP and probe marker"},
		{"udp and probe", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT, a.ProbeMarker = 1, 1, 1 }), "IntL4DSCP", "both UDP destination port and probe marker"},
		{"interval", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.FlowReport.Interval = 0 }), "FlowReport.Interval", "flow report interval 0s must be positive"},
		{"hop latency change", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.FlowReport.HopLatencyChange = -1 }), "FlowReport.HopLatencyChange", "is negative"},
		{"adaptive without band", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.FlowReport.LatencyFactor, a.FlowReport.LatencyFloor = 0, 0 }), "FlowReport.LatencyFactor", "reports every latency change"},
		{"latency floor negative", mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.FlowReport.LatencyFloor = -1 }), "FlowReport.LatencyFloor", "is negative"},

		// INT session.
		{"hop count 0", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.MaxHopCount = 0 }), "MaxHopCount", "sai: int session: max hop count 0 is invalid (want 1..255)"},
		{"mode", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Mode = 2 }), "Mode", "mode 2 is invalid"},
		{"mx checksum", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) {
			a.Mode, a.Instructions = IntModeMX, spec.InstNodeID|spec.InstChecksumComplement
		}), "Instructions", "checksum complement (bit 15) is not applicable in MX mode"},
		{"reserved bits", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Instructions |= spec.InstructionBit(9) | spec.InstructionBit(14) }), "Instructions", "sets reserved bits bit9|bit14"},
		{"ds without domain", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.DSInstruction = 1 }), "DSInstruction", "needs a non-zero domain specific id"},
		{"nothing to collect", mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Instructions = spec.InstChecksumComplement }), "Instructions", "requests no metadata"},

		// Report session.
		{"no src", mod(validReportSession(), func(a *ReportSessionAttrs) { a.SrcIP = netip.Addr{} }), "SrcIP", "source IP invalid IP is invalid"},
		{"unspecified src", mod(validReportSession(), func(a *ReportSessionAttrs) { a.SrcIP = netip.IPv4Unspecified() }), "SrcIP", "source IP 0.0.0.0 is invalid"},
		{"mapped src", mod(validReportSession(), func(a *ReportSessionAttrs) { a.SrcIP = netip.MustParseAddr("::ffff:10.0.0.1") }), "SrcIP", "IPv4-mapped"},
		{"no destinations", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Destinations = nil }), "Destinations", "at least one destination is required"},
		{"dst port 0", mod(validReportSession(), func(a *ReportSessionAttrs) {
			a.UDPDstPort = 0
			a.Destinations = []ReportDestination{{v4, 1}, {v4, 2}, {IP: v4}}
		}), "Destinations[2].UDPPort", "sai: report session: destination 2: UDP port 0 is invalid"},
		{"dst multicast", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Destinations[0].IP = netip.MustParseAddr("224.0.0.1") }), "Destinations[0].IP", "destination 0: 224.0.0.1 is a multicast or broadcast address"},
		{"dst broadcast", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Destinations[0].IP = netip.MustParseAddr("255.255.255.255") }), "Destinations[0].IP", "destination 0: 255.255.255.255 is a multicast or broadcast address"},
		{"dst family", mod(validReportSession(), func(a *ReportSessionAttrs) {
			a.Destinations = []ReportDestination{{IP: netip.MustParseAddr("2001:db8::1")}}
		}), "Destinations[0].IP", "differ in family"},
		{"dst dup", mod(validReportSession(), func(a *ReportSessionAttrs) {
			a.Destinations = []ReportDestination{{IP: v4}, {IP: v4, UDPPort: 32766}}
		}), "Destinations[1]", "destination 1: duplicates destination 0"},
		{"vrf", mod(validReportSession(), func(a *ReportSessionAttrs) { a.VirtualRouter = "a b" }), "VirtualRouter", `virtual router "a b" is not a valid interface name`},
		{"truncate small", mod(validReportSession(), func(a *ReportSessionAttrs) { a.TruncateSize = 63 }), "TruncateSize", "truncate size 63 is out of range 64..9000"},
		{"truncate big", mod(validReportSession(), func(a *ReportSessionAttrs) { a.TruncateSize = 9001 }), "TruncateSize", "truncate size 9001"},
		{"format", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Format = 7 }), "Format", "report format 7 is invalid"},
		{"dscp", mod(validReportSession(), func(a *ReportSessionAttrs) { a.DSCP = 64 }), "DSCP", "DSCP 64 exceeds 63"},
		{"coalesce v0.5", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Format, a.Coalesce.MaxReports = spec.ReportFormatV05, 2 }), "Coalesce.MaxReports", "coalescing needs report format 2.0"},
		{"coalesce delay", mod(validReportSession(), func(a *ReportSessionAttrs) { a.Coalesce = Coalescing{MaxReports: 2, MaxDelay: 2 * time.Second} }), "Coalesce.MaxDelay", "out of range"},

		// Queue report.
		{"no port", mod(validQueueReport(), func(a *QueueReportAttrs) { a.Port = "" }), "Port", "sai: queue report: port is empty"},
		{"no trigger", mod(validQueueReport(), func(a *QueueReportAttrs) { a.LatencyThreshold = 0 }), "", "no depth threshold, latency threshold or tail drop"},
		{"negative latency", mod(validQueueReport(), func(a *QueueReportAttrs) { a.LatencyThreshold = -1 }), "LatencyThreshold", "negative"},
		{"reset without latency", mod(validQueueReport(), func(a *QueueReportAttrs) { a.LatencyThreshold, a.DepthThreshold, a.ResetThreshold = 0, 100, 1 }), "ResetThreshold", "without a latency threshold"},
		{"reset above latency", mod(validQueueReport(), func(a *QueueReportAttrs) { a.ResetThreshold = 3 * time.Microsecond }), "ResetThreshold", "reset threshold 3µs must be below latency threshold 2µs"},
		{"reset at latency", mod(validQueueReport(), func(a *QueueReportAttrs) { a.ResetThreshold = 2 * time.Microsecond }), "ResetThreshold", "reset threshold 2µs must be below latency threshold 2µs"},
		{"quota", mod(validQueueReport(), func(a *QueueReportAttrs) { a.BreachQuota = 0 }), "BreachQuota", "breach quota 0"},

		// Event.
		{"event type", EventAttrs{ReportSession: MakeOID(ObjectTypeReportSession, 1)}, "Type", "sai: event: event type 0 is invalid"},
		{"event session", EventAttrs{Type: spec.EventFlowState}, "ReportSession", "FLOW_STATE event: report session is required"},
		{"event session type", EventAttrs{Type: spec.EventFlowState, ReportSession: MakeOID(ObjectTypeIntSession, 1)}, "ReportSession", "int-session:1 is not a report session"},
		{"event dscp", EventAttrs{Type: spec.EventFlowState, ReportSession: MakeOID(ObjectTypeReportSession, 1), DSCP: 64}, "DSCP", "DSCP 64 exceeds 63"},

		// Watchlist entry.
		{"host bits", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.SrcPrefix = netip.MustParsePrefix("10.0.0.1/8") }), "Match.SrcPrefix", "sai: watchlist entry: source prefix 10.0.0.1/8 has host bits set (want 10.0.0.0/8)"},
		{"prefix family", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.DstPrefix = netip.MustParsePrefix("2001:db8::/32") }), "Match.DstPrefix", "differ in family"},
		{"port range", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.L4SrcPort = PortRange{10, 9} }), "Match.L4SrcPort", "L4 source port range 10-9 has lo > hi"},
		{"ports without proto", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.IPProtocol = 0 }), "Match.IPProtocol", "L4 port match needs IP protocol TCP, UDP or SCTP, not 0"},
		{"dscp match", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.DSCP = DSCPMatch{Value: 64, Mask: 63} }), "Match.DSCP.Value", "DSCP value 64 exceeds 63"},
		{"tcp flags mask", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.TCPFlags = TCPFlagsMatch{Value: 3, Mask: 1} }), "Match.TCPFlags.Value", "TCP flags value 0x3 has bits outside mask 0x1"},
		{"tcp flags udp", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.IPProtocol, a.Match.TCPFlags = IPProtocolUDP, TCPFlagsMatch{Value: 2, Mask: 2}
		}), "Match.IPProtocol", "TCP flags match needs IP protocol TCP, not 17"},
		{"in port", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.InPort = "x:y" }), "Match.InPort", "ingress port"},
		{"inner without vxlan", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.Inner.TunnelID = 5 }), "Match.Inner.Enabled", "inner header match is set without a tunnel match"},
		{"vni", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, Tunnel: TunnelGeneve, TunnelID: 1 << 24}
		}), "Match.Inner.TunnelID", "GENEVE VNI 16777216 exceeds 16777215"},
		{"tunnel type", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Match.Inner = InnerMatch{Enabled: true, Tunnel: NumTunnelTypes} }),
			"Match.Inner.Tunnel", "tunnel type 6 is invalid"},
		{"inner ethertype", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, EtherType: EtherTypeIPv6, SrcPrefix: netip.MustParsePrefix("10.0.0.0/8")}
		}), "Match.Inner.EtherType", "inner EtherType 0x86dd contradicts inner prefix 10.0.0.0/8"},
		{"ethertype", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.EtherType, a.Match.SrcPrefix = EtherTypeIPv6, netip.MustParsePrefix("10.0.0.0/8")
		}), "Match.EtherType", "EtherType 0x86dd contradicts prefix 10.0.0.0/8"},
		{"icmp proto", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.IPProtocol, a.Match.L4SrcPort, a.Match.L4DstPort, a.Match.TCPFlags = IPProtocolUDP, PortRange{}, PortRange{}, TCPFlagsMatch{}
			a.Match.ICMP = ICMPMatch{Type: 8, TypeMask: 0xff}
		}), "Match.IPProtocol", "ICMP type or code match needs IP protocol ICMP (1) or ICMPv6 (58), not 17"},
		{"icmp mask", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.IPProtocol, a.Match.L4SrcPort, a.Match.L4DstPort, a.Match.TCPFlags = IPProtocolICMP, PortRange{}, PortRange{}, TCPFlagsMatch{}
			a.Match.ICMP = ICMPMatch{Code: 3, CodeMask: 1}
		}), "Match.ICMP.Code", "ICMP code 3 has bits outside mask 0x1"},
		{"inner prefix", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, SrcPrefix: netip.MustParsePrefix("192.168.1.1/24")}
		}), "Match.Inner.SrcPrefix", "inner source prefix 192.168.1.1/24 has host bits set"},
		{"inner ports", mod(validEntry(), func(a *WatchlistEntryAttrs) {
			a.Match.Inner = InnerMatch{Enabled: true, L4DstPort: PortRange{5, 5}}
		}), "Match.Inner.IPProtocol", "inner L4 port match needs IP protocol"},
		{"flow op", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.FlowOp = 9 }), "Action.FlowOp", "flow op 9 is invalid"},
		{"int without session", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.IntSession = NullOID }), "Action.IntSession", "flow op INT needs an INT session"},
		{"session wrong type", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.IntSession = MakeOID(ObjectTypeEvent, 1) }), "Action.IntSession", "event:1 is not an INT session"},
		{"nop with session", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.FlowOp = FlowOpNop }), "Action.IntSession", "flow op NOP takes no INT session"},
		{"nop with percent", WatchlistEntryAttrs{Action: WatchlistAction{FlowSamplePercent: 50}}, "Action.FlowSamplePercent", "flow sample percent 50 is set with flow op NOP"},
		{"nop report all", WatchlistEntryAttrs{Action: WatchlistAction{ReportAllPackets: true}}, "Action.ReportAllPackets", "needs flow op INT or POSTCARD"},
		{"percent 101", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.FlowSamplePercent = 101 }), "Action.FlowSamplePercent", "flow sample percent 101 exceeds 100"},
		{"percent 0", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.FlowSamplePercent = 0 }), "Action.FlowSamplePercent", "flow sample percent 0 with flow op INT acts on no flow"},
		{"nop packet interval", WatchlistEntryAttrs{Action: WatchlistAction{PacketInterval: time.Millisecond}}, "Action.PacketInterval", "packet interval needs flow op INT or POSTCARD"},
		{"nop negative packet interval", WatchlistEntryAttrs{Action: WatchlistAction{PacketInterval: -1}}, "Action.PacketInterval", "packet interval -1ns is negative"},
		{"negative packet interval", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.PacketInterval = -time.Millisecond }), "Action.PacketInterval", "packet interval -1ms is negative"},
		{"packet interval over an hour", mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.PacketInterval = time.Hour + 1 }), "Action.PacketInterval", "packet interval 1h0m0.000000001s exceeds 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want error on %s", tt.attr)
			}
			var ae *AttrError
			if !errors.As(err, &ae) {
				t.Fatalf("Validate() = %T %v, want *AttrError", err, err)
			}
			if ae.Object != tt.a.ObjectType() || ae.Field() != tt.attr {
				t.Errorf("error names %v %q, want %v %q", ae.Object, ae.Field(), tt.a.ObjectType(), tt.attr)
			}
			if !attrExists(reflect.TypeOf(tt.a), ae.Field()) {
				t.Errorf("error names attribute %q, which %T does not have", ae.Field(), tt.a)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Error() = %q, want it to contain %q", err, tt.msg)
			}
			if prefix := "sai: " + tt.a.ObjectType().String() + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Error() = %q, want prefix %q", err, prefix)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
		})
	}
}

// attrExists reports whether attr ("Destinations[2].UDPPort", or "" for
// the object as a whole) names a field of t.
func attrExists(t reflect.Type, attr string) bool {
	if attr == "" {
		return true
	}
	for _, name := range strings.Split(attr, ".") {
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		f, ok := t.FieldByName(name)
		if !ok {
			return false
		}
		t = f.Type
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	return true
}

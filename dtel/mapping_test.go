package dtel

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/sai/spec"
)

var (
	kDTel      = key{t: sai.ObjectTypeDTel}
	kMD5       = key{sai.ObjectTypeIntSession, "md-5"}
	kMXProbe   = key{sai.ObjectTypeIntSession, "mx-probe"}
	kCollector = key{sai.ObjectTypeReportSession, "collector"}
	kLegacy    = key{sai.ObjectTypeReportSession, "legacy"}
	kEntry10   = key{sai.ObjectTypeWatchlistEntry, "10"}
	kEntry20   = key{sai.ObjectTypeWatchlistEntry, "20"}
	kEntry30   = key{sai.ObjectTypeWatchlistEntry, "30"}
	kQueue     = key{sai.ObjectTypeQueueReport, "eth1/0"}
)

func kEvent(t string) key { return key{sai.ObjectTypeEvent, t} }

// fullObjects is what full() maps to.
func fullObjects() (map[key]sai.Attrs, map[key]key) {
	objs := map[key]sai.Attrs{
		kDTel: sai.DTelAttrs{
			IntEndpointEnable: true, IntTransitEnable: true, DropReportEnable: true, QueueReportEnable: true,
			SwitchID:             1,
			HWID:                 5,
			FlowStateClearCycle:  10 * time.Second,
			LatencySensitivity:   8,
			SinkPortList:         []string{"eth1"},
			IntL4DSCP:            sai.DSCPMatch{Value: 32, Mask: 32},
			VXLANGPENextProtocol: 130,
			GeneveOptionClass:    259,
			GREProtocolType:      34887,
			FlowReport: sai.FlowReportFilter{Interval: time.Second, HopLatencyChange: 256, OnPortChange: true, OnPathChange: true, OnQueueChange: true,
				Adaptive: true, LatencyFactor: sai.DefaultLatencyFactor, LatencyFloor: sai.DefaultLatencyFloor},
		},
		kMD5: sai.IntSessionAttrs{
			Mode: sai.IntModeMD, MaxHopCount: 8,
			Instructions: spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstIngressTimestamp |
				spec.InstEgressTimestamp | spec.InstL2Interfaces | spec.InstEgressTxUtil | spec.InstBuffer | spec.InstChecksumComplement,
			ClampTCPMSS: true,
		},
		kMXProbe: sai.IntSessionAttrs{
			Mode: sai.IntModeMX, Instructions: spec.InstNodeID | spec.InstHopLatency,
			DomainSpecificID: 4660, DSInstruction: 0x8000, DSFlags: 1, Discard: true, ClampTCPMSS: true,
		},
		kCollector: sai.ReportSessionAttrs{
			SrcIP: netip.MustParseAddr("192.0.2.1"),
			Destinations: []sai.ReportDestination{
				{IP: netip.MustParseAddr("192.0.2.100"), UDPPort: 32766},
				{IP: netip.MustParseAddr("192.0.2.101"), UDPPort: 32766},
			},
			TruncateSize: 128, DSCP: 46, Format: spec.ReportFormatV2,
			Coalesce:  sai.Coalescing{MaxReports: 8, MaxDelay: 100 * time.Microsecond},
			RateLimit: 100000, MTU: 1500,
		},
		kLegacy: sai.ReportSessionAttrs{
			SrcIP:        netip.MustParseAddr("2001:db8::1"),
			Destinations: []sai.ReportDestination{{IP: netip.MustParseAddr("2001:db8::7"), UDPPort: 9555}},
			TruncateSize: 128, Format: spec.ReportFormatV05, MTU: 9000,
			SrcPort: sai.SrcPorts{Mode: sai.SrcPortFixed, Port: 4000},
		},
		kEntry10: sai.WatchlistEntryAttrs{
			Priority: 65535 - 10,
			Match: sai.WatchlistMatch{
				SrcPrefix: netip.MustParsePrefix("10.0.1.0/24"), DstPrefix: netip.MustParsePrefix("10.0.2.0/24"),
				IPProtocol: 6, L4SrcPort: sai.PortRange{Lo: 1024, Hi: 65535}, L4DstPort: sai.PortRange{Lo: 80, Hi: 443},
				DSCP: sai.DSCPMatch{Value: 0, Mask: 63}, TCPFlags: sai.TCPFlagsMatch{Value: 2, Mask: 2}, InPort: "eth0",
			},
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, DropReportEnable: true, TailDropReportEnable: true, FlowSamplePercent: 100,
				PacketInterval: time.Millisecond},
		},
		kEntry20: sai.WatchlistEntryAttrs{
			Priority: 65535 - 20,
			Match: sai.WatchlistMatch{
				IPProtocol: 17, L4DstPort: sai.PortRange{Lo: 4789, Hi: 4789},
				Inner: sai.InnerMatch{
					Enabled: true, TunnelID: 5001,
					SrcPrefix: netip.MustParsePrefix("2001:db8:a::/48"), DstPrefix: netip.MustParsePrefix("2001:db8:b::/48"),
					IPProtocol: 17, L4DstPort: sai.PortRange{Lo: 53, Hi: 53},
				},
			},
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpPostcard, ReportAllPackets: true, FlowSamplePercent: 50},
		},
		kEntry30: sai.WatchlistEntryAttrs{
			Priority: 65535 - 30,
			Match:    sai.WatchlistMatch{SrcPrefix: netip.MustParsePrefix("0.0.0.0/0")},
			Action:   sai.WatchlistAction{FlowOp: sai.FlowOpNop, DropReportEnable: true},
		},
		kQueue: sai.QueueReportAttrs{
			Port: "eth1", Queue: 0, DepthThreshold: 65536, LatencyThreshold: 100 * time.Microsecond,
			ResetThreshold: 50 * time.Microsecond, BreachQuota: 1024, TailDrop: true,
		},
		kEvent("FLOW_STATE"):                    sai.EventAttrs{Type: spec.EventFlowState, DSCP: 46},
		kEvent("FLOW_REPORT_ALL_PACKETS"):       sai.EventAttrs{Type: spec.EventFlowReportAllPackets, DSCP: 46},
		kEvent("FLOW_TCPFLAG"):                  sai.EventAttrs{Type: spec.EventFlowTCPFlag, DSCP: 46},
		kEvent("QUEUE_REPORT_THRESHOLD_BREACH"): sai.EventAttrs{Type: spec.EventQueueReportThresholdBreach, DSCP: 34},
		kEvent("QUEUE_REPORT_TAIL_DROP"):        sai.EventAttrs{Type: spec.EventQueueReportTailDrop, DSCP: 34},
		kEvent("DROP_REPORT"):                   sai.EventAttrs{Type: spec.EventDropReport, DSCP: 26},
	}
	refs := map[key]key{
		kEntry10:                                kMD5,
		kEvent("FLOW_STATE"):                    kCollector,
		kEvent("FLOW_REPORT_ALL_PACKETS"):       kCollector,
		kEvent("FLOW_TCPFLAG"):                  kCollector,
		kEvent("QUEUE_REPORT_THRESHOLD_BREACH"): kCollector,
		kEvent("QUEUE_REPORT_TAIL_DROP"):        kCollector,
		kEvent("DROP_REPORT"):                   kLegacy,
	}
	return objs, refs
}

func modify[T sai.Attrs](objs map[key]sai.Attrs, k key, f func(*T)) {
	a := sai.Clone(objs[k]).(T)
	f(&a)
	objs[k] = a
}

// TestMapping applies the example configuration and variations of it to an
// empty backend and checks every object and attribute.
func TestMapping(t *testing.T) {
	i := func(d *gen.Device) *gen.IntdInt_Int { return d.Int }
	entry := func(d *gen.Device, seq uint32) *gen.IntdInt_Int_Watchlist_Entries_Entry {
		return d.Int.Watchlist.Entries.Entry[seq]
	}
	tests := []struct {
		name   string
		mutate func(d *gen.Device)
		want   func(objs map[key]sai.Attrs, refs map[key]key)
	}{
		{name: "full-config", mutate: func(*gen.Device) {}, want: func(map[key]sai.Attrs, map[key]key) {}},
		{
			name:   "node disabled clears every function",
			mutate: func(d *gen.Device) { i(d).Node.Config.Enabled = ptrTo(false) },
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.IntEndpointEnable, a.IntTransitEnable, a.DropReportEnable, a.QueueReportEnable = false, false, false, false
				})
			},
		},
		{
			name: "remark-dscp, malformed-int-action and clamp-tcp-mss",
			mutate: func(d *gen.Device) {
				i(d).Marking.Config.RemarkDscp = ptrTo(uint8(8))
				i(d).Node.Config.MalformedIntAction = gen.IntdInt_MalformedIntAction_DROP
				i(d).IntSessions.IntSession["md-5"].Config.ClampTcpMss = ptrTo(false)
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) { a.IntL4DSCPRemark, a.MalformedAction = 8, sai.MalformedDrop })
				modify(objs, kMD5, func(a *sai.IntSessionAttrs) { a.ClampTCPMSS = false })
			},
		},
		{
			name: "node with no role needs no node-id",
			mutate: func(d *gen.Device) {
				c := i(d).Node.Config
				c.NodeId, c.IntEndpoint, c.IntTransit, c.DropReport, c.QueueReport = nil, ptrTo(false), ptrTo(false), ptrTo(false), ptrTo(false)
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.SwitchID, a.IntEndpointEnable, a.IntTransitEnable, a.DropReportEnable, a.QueueReportEnable = 0, false, false, false, false
				})
			},
		},
		{
			name: "node functions and timers",
			mutate: func(d *gen.Device) {
				c := i(d).Node.Config
				c.NodeId, c.Postcard, c.IntTransit, c.FlowStateClearCycle, c.LatencySensitivity = ptrTo(uint32(77)), ptrTo(true), ptrTo(false), ptrTo(uint16(0)), ptrTo(uint8(31))
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.SwitchID, a.PostcardEnable, a.IntTransitEnable, a.FlowStateClearCycle, a.LatencySensitivity = 77, true, false, 0, 31
				})
			},
		},
		{
			name: "udp marking with NPT 2",
			mutate: func(d *gen.Device) {
				m := i(d).Marking.Config
				m.L4Marking, m.UdpNpt = gen.IntdInt_L4Marking_UDP_DESTINATION_PORT, gen.IntdInt_UdpNpt_NEW_UDP_HEADER
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.IntL4DSCP, a.IntUDPDstPort, a.IntUDPNPT = sai.DSCPMatch{}, 5900, spec.NPTIPProto
				})
			},
		},
		{
			name:   "udp marking with NPT 1",
			mutate: func(d *gen.Device) { i(d).Marking.Config.L4Marking = gen.IntdInt_L4Marking_UDP_DESTINATION_PORT },
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.IntL4DSCP, a.IntUDPDstPort, a.IntUDPNPT = sai.DSCPMatch{}, 5900, spec.NPTUDPPort
				})
			},
		},
		{
			name: "probe marker and tunnel code points",
			mutate: func(d *gen.Device) {
				m := i(d).Marking.Config
				m.L4Marking, m.VxlanGpeNextProtocol, m.GeneveOptionClass, m.GreProtocolType = gen.IntdInt_L4Marking_PROBE_MARKER, nil, ptrTo(uint16(0)), nil
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.IntL4DSCP, a.ProbeMarker = sai.DSCPMatch{}, 0xaabbccddeeff00ff
					a.VXLANGPENextProtocol, a.GeneveOptionClass, a.GREProtocolType = 130, 0, 0
				})
			},
		},
		{
			name: "flow report filter",
			mutate: func(d *gen.Device) {
				f := i(d).FlowReportFilter.Config
				f.ReportInterval, f.HopLatencyThreshold, f.ReportOnPortChange, f.ReportOnPathChange, f.ReportOnQueueChange = ptrTo(uint32(250)), ptrTo(uint32(0)), ptrTo(false), ptrTo(true), ptrTo(false)
				f.LatencyFilterMode = gen.IntdInt_Int_FlowReportFilter_Config_LatencyFilterMode_fixed
				f.LatencyDeviationFactor, f.LatencyFloor = ptrTo(uint32(4)), ptrTo(uint32(5000))
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) {
					a.FlowReport = sai.FlowReportFilter{Interval: 250 * time.Millisecond, OnPathChange: true, LatencyFactor: 4, LatencyFloor: 5 * time.Microsecond}
				})
			},
		},
		{
			name: "sink interfaces sorted",
			mutate: func(d *gen.Device) {
				i(d).Interfaces.Interface["eth0"].Config.IntSink = ptrTo(true)
				c := i(d).Interfaces.GetOrCreateInterface("a0").GetOrCreateConfig()
				c.Name, c.IntSink = ptrTo("a0"), ptrTo(true)
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kDTel, func(a *sai.DTelAttrs) { a.SinkPortList = []string{"a0", "eth0", "eth1"} })
			},
		},
		{
			name: "int session defaults and instructions",
			mutate: func(d *gen.Device) {
				c := i(d).IntSessions.IntSession["md-5"].Config
				c.RemainingHopCount = nil
				c.Instructions = c.Instructions[:1]
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kMD5, func(a *sai.IntSessionAttrs) { a.MaxHopCount, a.Instructions = 8, spec.InstNodeID })
			},
		},
		{
			name: "report session defaults",
			mutate: func(d *gen.Device) {
				c := i(d).ReportSessions.ReportSession["collector"].Config
				c.Vrf, c.TruncateSize, c.Dscp, c.MaxReportsPerPacket, c.MaxDelay, c.RateLimit = ptrTo("mgmt"), nil, nil, nil, nil, nil
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kCollector, func(a *sai.ReportSessionAttrs) {
					a.VirtualRouter, a.TruncateSize, a.DSCP, a.Coalesce, a.RateLimit = "mgmt", 128, 0, sai.Coalescing{}, 0
				})
			},
		},
		{
			name: "watchlist match variations",
			mutate: func(d *gen.Device) {
				m := entry(d, 10).Match.Config
				m.SourcePortMax, m.DestinationPortMin, m.Dscp, m.TcpFlagsMask, m.SourcePrefix = nil, nil, ptrTo(uint8(46)), nil, nil
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kEntry10, func(a *sai.WatchlistEntryAttrs) {
					a.Match.SrcPrefix = netip.Prefix{}
					a.Match.L4SrcPort = sai.PortRange{Lo: 1024, Hi: 65535}
					a.Match.L4DstPort = sai.PortRange{Lo: 0, Hi: 443}
					a.Match.DSCP = sai.DSCPMatch{Value: 46, Mask: 63}
					a.Match.TCPFlags = sai.TCPFlagsMatch{Value: 2, Mask: 2}
				})
			},
		},
		{
			name: "ether-type, icmp, dscp-mask and gtpu-inner",
			mutate: func(d *gen.Device) {
				m := entry(d, 10).Match.Config
				m.Dscp, m.DscpMask, m.EtherType = ptrTo(uint8(8)), ptrTo(uint8(0x38)), ptrTo(uint16(0x0800))
				m.GtpuInner, m.TcpFlags, m.TcpFlagsMask = ptrTo(true), nil, nil
				c := entry(d, 30).Match.Config
				c.Protocol, c.IcmpType, c.IcmpCode = ptrTo(uint8(1)), ptrTo(uint8(8)), ptrTo(uint8(0))
				v := entry(d, 20).VxlanMatch.Config
				v.Vni, v.TunnelId, v.TunnelType, v.InnerEtherType = nil, ptrTo(uint32(0x80000001)), gen.IntdInt_TunnelType_GTPU, ptrTo(uint16(0x86dd))
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kEntry10, func(a *sai.WatchlistEntryAttrs) {
					m := &a.Match
					m.Inner = sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelGTPU, SrcPrefix: m.SrcPrefix, DstPrefix: m.DstPrefix,
						IPProtocol: m.IPProtocol, L4SrcPort: m.L4SrcPort, L4DstPort: m.L4DstPort}
					m.SrcPrefix, m.DstPrefix, m.IPProtocol, m.L4SrcPort, m.L4DstPort = netip.Prefix{}, netip.Prefix{}, 0, sai.PortRange{}, sai.PortRange{}
					m.DSCP, m.EtherType, m.TCPFlags = sai.DSCPMatch{Value: 8, Mask: 0x38}, 0x0800, sai.TCPFlagsMatch{}
				})
				modify(objs, kEntry30, func(a *sai.WatchlistEntryAttrs) {
					a.Match.IPProtocol, a.Match.ICMP = 1, sai.ICMPMatch{Type: 8, TypeMask: 0xff, CodeMask: 0xff}
				})
				modify(objs, kEntry20, func(a *sai.WatchlistEntryAttrs) {
					a.Match.Inner.Tunnel, a.Match.Inner.TunnelID, a.Match.Inner.EtherType = sai.TunnelGTPU, 0x80000001, 0x86dd
				})
			},
		},
		{
			name: "postcard with int session, sampled",
			mutate: func(d *gen.Device) {
				a := entry(d, 20).Actions.Config
				a.IntSession, a.SamplePercent, a.DropReport, a.TailDropReport = ptrTo("mx-probe"), ptrTo(uint8(1)), ptrTo(true), ptrTo(true)
			},
			want: func(objs map[key]sai.Attrs, refs map[key]key) {
				modify(objs, kEntry20, func(a *sai.WatchlistEntryAttrs) {
					a.Action.FlowSamplePercent, a.Action.DropReportEnable, a.Action.TailDropReportEnable = 1, true, true
				})
				refs[kEntry20] = kMXProbe
			},
		},
		{
			name: "packet-interval in microseconds, default 0, postcard",
			mutate: func(d *gen.Device) {
				entry(d, 10).Actions.Config.PacketInterval = nil
				entry(d, 20).Actions.Config.PacketInterval = ptrTo(uint32(250))
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kEntry10, func(a *sai.WatchlistEntryAttrs) { a.Action.PacketInterval = 0 })
				modify(objs, kEntry20, func(a *sai.WatchlistEntryAttrs) { a.Action.PacketInterval = 250 * time.Microsecond })
			},
		},
		{
			name: "queue report defaults",
			mutate: func(d *gen.Device) {
				c := i(d).QueueReports.QueueReport[gen.IntdInt_Int_QueueReports_QueueReport_Key{Interface: "eth1", QueueId: 0}].Config
				c.LatencyResetThreshold, c.BreachQuota, c.DepthThreshold, c.TailDrop = nil, nil, nil, nil
			},
			want: func(objs map[key]sai.Attrs, _ map[key]key) {
				modify(objs, kQueue, func(a *sai.QueueReportAttrs) {
					a.ResetThreshold, a.BreachQuota, a.DepthThreshold, a.TailDrop = 50*time.Microsecond, 1024, 0, false
				})
			},
		},
		{
			name: "event on another session",
			mutate: func(d *gen.Device) {
				c := i(d).Events.Event[gen.IntdInt_DtelEventType_FLOW_STATE].Config
				c.ReportSession, c.Dscp = ptrTo("legacy"), nil
			},
			want: func(objs map[key]sai.Attrs, refs map[key]key) {
				modify(objs, kEvent("FLOW_STATE"), func(a *sai.EventAttrs) { a.DSCP = 0 })
				refs[kEvent("FLOW_STATE")] = kLegacy
			},
		},
		{
			name:   "no int container: nothing",
			mutate: func(d *gen.Device) { d.Int = nil },
			want: func(objs map[key]sai.Attrs, refs map[key]key) {
				clear(objs)
				clear(refs)
			},
		},
		{
			name: "node id from defaults is not needed when disabled",
			mutate: func(d *gen.Device) {
				d.Int = &gen.IntdInt_Int{Node: &gen.IntdInt_Int_Node{Config: &gen.IntdInt_Int_Node_Config{Enabled: ptrTo(false)}}}
			},
			want: func(objs map[key]sai.Attrs, refs map[key]key) {
				clear(objs)
				clear(refs)
				d := sai.DefaultDTelAttrs()
				d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f} // YANG's default marking
				objs[kDTel] = d
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, b := newTest(t)
			d := full(t)
			tc.mutate(d)
			mustApply(t, o, d)
			wantObjs, wantRefs := fullObjects()
			tc.want(wantObjs, wantRefs)
			gotObjs, gotRefs := applied(t, o, b)
			for _, k := range keysOf(wantObjs) {
				if !reflect.DeepEqual(gotObjs[k], wantObjs[k]) {
					t.Errorf("%v:\n got %+v\nwant %+v", k, gotObjs[k], wantObjs[k])
				}
			}
			for _, k := range keysOf(gotObjs) {
				if _, ok := wantObjs[k]; !ok {
					t.Errorf("unexpected object %v: %+v", k, gotObjs[k])
				}
			}
			if !maps.Equal(gotRefs, wantRefs) {
				t.Errorf("references:\n got %v\nwant %v", gotRefs, wantRefs)
			}
		})
	}
}

// TestFullConfigMixedFamilies: a report session cannot send to a collector
// of the other address family than its source address.
func TestFullConfigMixedFamilies(t *testing.T) {
	o, b := newTest(t)
	d, err := gen.ParseConfig([]byte(fullJSONRaw(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = o.Apply(context.Background(), d)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply = %v, want ErrInvalid", err)
	}
	const want = "/int/report-sessions/report-session[name=collector]/collectors/collector[address=2001:db8::100][port=32766]/config: destination 1: IP 2001:db8::100 and source IP 192.0.2.1 differ in family"
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
	if len(b.Log()) != 0 {
		t.Errorf("backend was called: %v", b.Log())
	}
}

// fullJSONRaw is the example with an IPv6 collector in an IPv4 session.
func fullJSONRaw(t *testing.T) string {
	return strings.Replace(fullConfigText(t), `192.0.2.101`, `2001:db8::100`, 2)
}

// TestValidation checks the semantic validation YANG cannot express:
// ErrInvalid, InvalidArgument, the data path, and no backend call.
func TestValidation(t *testing.T) {
	entry := func(d *gen.Device, seq uint32) *gen.IntdInt_Int_Watchlist_Entries_Entry {
		return d.Int.Watchlist.Entries.Entry[seq]
	}
	qr := func(d *gen.Device) *gen.IntdInt_Int_QueueReports_QueueReport_Config {
		return d.Int.QueueReports.QueueReport[gen.IntdInt_Int_QueueReports_QueueReport_Key{Interface: "eth1", QueueId: 0}].Config
	}
	tests := []struct {
		name   string
		caps   func(*sai.Capabilities)
		mutate func(d *gen.Device)
		want   string // full error text
	}{
		{"FIXED source port without source-port", nil, func(d *gen.Device) {
			d.Int.ReportSessions.ReportSession["collector"].Config.SourcePortMode = gen.IntdInt_SourcePortMode_FIXED
		}, "/int/report-sessions/report-session[name=collector]/config/source-port: source-port-mode FIXED needs a source-port"},
		{"FLOW_HASH source ports min > max", nil, func(d *gen.Device) {
			c := d.Int.ReportSessions.ReportSession["collector"].Config
			c.SourcePortMode, c.SourcePortMin, c.SourcePortMax = gen.IntdInt_SourcePortMode_FLOW_HASH, ptrTo(uint16(5000)), ptrTo(uint16(4000))
		}, "/int/report-sessions/report-session[name=collector]/config/source-port-max: UDP source port range 5000..4000 is empty"},
		{"flow-op INT without int-session", nil, func(d *gen.Device) { entry(d, 10).Actions.Config.IntSession = nil },
			"/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session: flow op INT needs an INT session"},
		{"int-session that does not exist", nil, func(d *gen.Device) { entry(d, 10).Actions.Config.IntSession = ptrTo("nope") },
			`/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session: int-session "nope" does not exist`},
		{"NOP with int-session", nil, func(d *gen.Device) { entry(d, 30).Actions.Config.IntSession = ptrTo("md-5") },
			"/int/watchlist/entries/entry[sequence-id=30]/actions/config/int-session: flow op NOP takes no INT session"},
		{"NOP reporting all packets", nil, func(d *gen.Device) { entry(d, 30).Actions.Config.ReportAllPackets = ptrTo(true) },
			"/int/watchlist/entries/entry[sequence-id=30]/actions/config/report-all-packets: report all packets needs flow op INT or POSTCARD"},
		{"NOP with packet-interval", nil, func(d *gen.Device) { entry(d, 30).Actions.Config.PacketInterval = ptrTo(uint32(1000)) },
			"/int/watchlist/entries/entry[sequence-id=30]/actions/config/packet-interval: packet interval needs flow op INT or POSTCARD"},
		{"packet-interval over an hour", nil, func(d *gen.Device) { entry(d, 10).Actions.Config.PacketInterval = ptrTo(uint32(3600_000_001)) },
			"/int/watchlist/entries/entry[sequence-id=10]/actions/config/packet-interval: packet interval 1h0m0.000001s exceeds 1h0m0s"},
		{"packet-interval the backend cannot honour", func(c *sai.Capabilities) { c.PacketInterval = false }, nil,
			"/int/watchlist/entries/entry[sequence-id=10]/actions/config/packet-interval: per-flow packet interval is not supported by the dataplane"},
		{"sample-percent 0", nil, func(d *gen.Device) { entry(d, 10).Actions.Config.SamplePercent = ptrTo(uint8(0)) },
			"/int/watchlist/entries/entry[sequence-id=10]/actions/config/sample-percent: flow sample percent 0 with flow op INT acts on no flow"},
		{"source port min > max", nil, func(d *gen.Device) { entry(d, 10).Match.Config.SourcePortMax = ptrTo(uint16(1000)) },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/source-port-min: port range 1024-1000: min is greater than max"},
		{"inner port min > max", nil, func(d *gen.Device) { entry(d, 20).VxlanMatch.Config.InnerDestinationPortMin = ptrTo(uint16(54)) },
			"/int/watchlist/entries/entry[sequence-id=20]/vxlan-match/config/inner-destination-port-min: port range 54-53: min is greater than max"},
		{"gtpu-inner with vxlan-match", nil, func(d *gen.Device) { entry(d, 20).Match.GetOrCreateConfig().GtpuInner = ptrTo(true) },
			"/int/watchlist/entries/entry[sequence-id=20]/match/config/gtpu-inner: gtpu-inner and vxlan-match are exclusive"},
		{"vni and tunnel-id differ", nil, func(d *gen.Device) { entry(d, 20).VxlanMatch.Config.TunnelId = ptrTo(uint32(7)) },
			"/int/watchlist/entries/entry[sequence-id=20]/vxlan-match/config/tunnel-id: tunnel-id 7 and vni 5001 differ; give one"},
		{"dscp-mask without dscp", nil, func(d *gen.Device) { entry(d, 30).Match.Config.DscpMask = ptrTo(uint8(7)) },
			"/int/watchlist/entries/entry[sequence-id=30]/match/config/dscp-mask: dscp-mask needs dscp"},
		{"icmp type on tcp", nil, func(d *gen.Device) { entry(d, 10).Match.Config.IcmpType = ptrTo(uint8(8)) },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/protocol: ICMP type or code match needs IP protocol ICMP (1) or ICMPv6 (58), not 6"},
		{"ether-type against prefix", nil, func(d *gen.Device) { entry(d, 10).Match.Config.EtherType = ptrTo(uint16(0x86dd)) },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/ether-type: EtherType 0x86dd contradicts prefix 10.0.1.0/24 (EtherType 0x0800)"},
		{"inner match the backend cannot do", func(c *sai.Capabilities) { c.InnerMatch = false }, nil,
			"/int/watchlist/entries/entry[sequence-id=20]/vxlan-match/config: tunnel inner header match is not supported by the dataplane"},
		{"prefix with host bits", nil, func(d *gen.Device) { entry(d, 10).Match.Config.SourcePrefix = ptrTo("10.0.1.1/24") },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/source-prefix: prefix 10.0.1.1/24 has host bits set (want 10.0.1.0/24)"},
		{"prefix families differ", nil, func(d *gen.Device) { entry(d, 10).Match.Config.DestinationPrefix = ptrTo("2001:db8::/32") },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/destination-prefix: source prefix 10.0.1.0/24 and destination prefix 2001:db8::/32 differ in family"},
		{"port match without L4 protocol", nil, func(d *gen.Device) { entry(d, 10).Match.Config.Protocol = ptrTo(uint8(1)) },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/protocol: L4 port match needs IP protocol TCP, UDP or SCTP, not 1"},
		{"tcp flags outside mask", nil, func(d *gen.Device) { entry(d, 10).Match.Config.TcpFlags = ptrTo(uint8(3)) },
			"/int/watchlist/entries/entry[sequence-id=10]/match/config/tcp-flags: tcp-flags 0x3 has bits outside tcp-flags-mask 0x2"},
		{"sequence-id too large", nil, func(d *gen.Device) {
			e := d.Int.Watchlist.Entries.Entry[30]
			delete(d.Int.Watchlist.Entries.Entry, 30)
			e.SequenceId, e.Config.SequenceId = ptrTo(uint32(70000)), ptrTo(uint32(70000))
			d.Int.Watchlist.Entries.Entry[70000] = e
		}, "/int/watchlist/entries/entry[sequence-id=70000]/config/sequence-id: sequence-id 70000 exceeds 65535"},
		{"INT-MX with checksum complement", nil, func(d *gen.Device) {
			c := d.Int.IntSessions.IntSession["mx-probe"].Config
			c.Instructions = append(c.Instructions, gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_CHECKSUM_COMPLEMENT)
		}, "/int/int-sessions/int-session[name=mx-probe]/config/instructions: checksum complement (bit 15) is not applicable in MX mode: remove it"},
		{"drop reason is no instruction", nil, func(d *gen.Device) {
			c := d.Int.IntSessions.IntSession["md-5"].Config
			c.Instructions = append(c.Instructions, gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_DROP_REASON)
		}, "/int/int-sessions/int-session[name=md-5]/config/instructions: METADATA_FIELD_DROP_REASON is not an INT instruction"},
		{"no instructions", nil, func(d *gen.Device) { d.Int.IntSessions.IntSession["md-5"].Config.Instructions = nil },
			"/int/int-sessions/int-session[name=md-5]/config/instructions: instruction bitmap requests no metadata"},
		{"only checksum complement", nil, func(d *gen.Device) {
			d.Int.IntSessions.IntSession["md-5"].Config.Instructions = []gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD{gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_CHECKSUM_COMPLEMENT}
		}, "/int/int-sessions/int-session[name=md-5]/config/instructions: instruction bitmap requests no metadata"},
		{"ds-instruction in the default domain", nil, func(d *gen.Device) { d.Int.IntSessions.IntSession["md-5"].Config.DsInstruction = ptrTo(uint16(1)) },
			"/int/int-sessions/int-session[name=md-5]/config/ds-instruction: DS instruction 0x0001 needs a non-zero domain specific id"},
		{"ds-instruction bit without a field", nil, func(d *gen.Device) {
			d.Int.IntSessions.IntSession["mx-probe"].Config.DsInstruction = ptrTo(uint16(0x2000))
		}, "/int/int-sessions/int-session[name=mx-probe]/config/ds-instruction: ds-instruction bit 2 has no field in domain 4660"},
		{"instructions the backend cannot provide", func(c *sai.Capabilities) { c.Instructions &^= spec.InstBuffer }, nil,
			"/int/int-sessions/int-session[name=md-5]/config/instructions: instructions buffer are not supported in MD mode by the dataplane"},
		{"session tunnel the backend cannot add", func(c *sai.Capabilities) { c.SessionTunnel = false },
			tunnelSession("md-5", "192.0.2.1", "", "192.0.2.9", ""),
			"/int/node/config/tunnel-address: INT session tunnels (VXLAN-GPE added by the source) are not supported by the dataplane"},
		{"session tunnel without tunnel-destination", nil, tunnelSession("md-5", "192.0.2.1", "", "", ""),
			"/int/int-sessions/int-session[name=md-5]/config/tunnel-destination: encapsulation VXLAN_GPE needs a tunnel destination, IPv4 or IPv6"},
		{"session tunnel without the node's tunnel-address", nil, tunnelSession("md-5", "", "", "192.0.2.9", ""),
			"/int/int-sessions/int-session[name=md-5]/config/tunnel-destination: tunnel-destination needs the node's tunnel-address (/int/node/config/tunnel-address), the tunnels' outer source"},
		{"IPv6 session tunnel without the node's tunnel-address-ipv6", nil, tunnelSession("md-5", "192.0.2.1", "", "", "2001:db8::9"),
			"/int/int-sessions/int-session[name=md-5]/config/tunnel-destination-ipv6: tunnel-destination-ipv6 needs the node's tunnel-address-ipv6 (/int/node/config/tunnel-address-ipv6), the tunnels' outer source"},
		{"IPv4-mapped tunnel-destination-ipv6", nil, tunnelSession("md-5", "", "2001:db8::1", "", "::ffff:192.0.2.9"),
			"/int/int-sessions/int-session[name=md-5]/config/tunnel-destination-ipv6: tunnel destination ::ffff:192.0.2.9 is not a unicast IPv6 address"},
		{"session tunnel of INT-MX", nil, tunnelSession("mx-probe", "192.0.2.1", "", "192.0.2.9", ""),
			"/int/int-sessions/int-session[name=mx-probe]/config/encapsulation: encapsulation VXLAN_GPE carries INT-MD; mode MX has no metadata stack to carry"},
		{"multicast tunnel-address", nil, func(d *gen.Device) { d.Int.Node.Config.TunnelAddress = ptrTo("224.0.0.9") },
			"/int/node/config/tunnel-address: tunnel address 224.0.0.9 is not a unicast IPv4 address"},
		{"mode the backend cannot provide", func(c *sai.Capabilities) { c.Modes = []sai.IntMode{sai.IntModeMD} }, nil,
			"/int/int-sessions/int-session[name=mx-probe]/config/mode: mode MX is not supported by the dataplane"},
		{"udp marking without udp-port", nil, func(d *gen.Device) {
			m := d.Int.Marking.Config
			m.L4Marking, m.UdpPort = gen.IntdInt_L4Marking_UDP_DESTINATION_PORT, nil
		}, "/int/marking/config/udp-port: l4-marking UDP_DESTINATION_PORT needs a udp-port"},
		{"probe marking without probe-marker", nil, func(d *gen.Device) {
			m := d.Int.Marking.Config
			m.L4Marking, m.ProbeMarker = gen.IntdInt_L4Marking_PROBE_MARKER, nil
		}, "/int/marking/config/probe-marker: l4-marking PROBE_MARKER needs a non-zero probe-marker"},
		{"dscp value outside mask", nil, func(d *gen.Device) { d.Int.Marking.Config.DscpValue = ptrTo(uint8(33)) },
			"/int/marking/config/dscp-value: INT L4 DSCP value 0x21 has bits outside mask 0x20"},
		{"encapsulation the backend cannot do", func(c *sai.Capabilities) { c.Encaps = c.Encaps[:3] }, nil,
			"/int/marking/config/vxlan-gpe-next-protocol: INT encapsulation vxlan-gpe is not supported by the dataplane"},
		{"node enabled without node-id", nil, func(d *gen.Device) { d.Int.Node.Config.NodeId = nil },
			"/int/node/config/node-id: int-endpoint is enabled but node-id is not set: give this node an INT node-id unique in its domain"},
		{"postcard without node-id", nil, func(d *gen.Device) {
			c := d.Int.Node.Config
			c.NodeId, c.IntEndpoint, c.IntTransit, c.DropReport, c.QueueReport, c.Postcard = nil, ptrTo(false), ptrTo(false), ptrTo(false), ptrTo(false), ptrTo(true)
		}, "/int/node/config/node-id: postcard is enabled but node-id is not set: give this node an INT node-id unique in its domain"},
		{"remark-dscp that carries the marking", nil, func(d *gen.Device) { d.Int.Marking.Config.RemarkDscp = ptrTo(uint8(46)) },
			"/int/marking/config/remark-dscp: remark DSCP 46 itself carries the INT marking 0x20/0x20: choose a value user traffic may keep"},
		{"queue report reset = trigger", nil, func(d *gen.Device) { qr(d).LatencyResetThreshold = ptrTo(uint32(100000)) },
			"/int/queue-reports/queue-report[interface=eth1][queue-id=0]/config/latency-reset-threshold: reset threshold 100µs must be below latency threshold 100µs"},
		{"queue report reset without trigger", nil, func(d *gen.Device) { qr(d).LatencyThreshold = nil },
			"/int/queue-reports/queue-report[interface=eth1][queue-id=0]/config/latency-reset-threshold: reset threshold 50µs is set without a latency threshold"},
		{"queue report that never triggers", nil, func(d *gen.Device) {
			c := qr(d)
			c.LatencyThreshold, c.LatencyResetThreshold, c.DepthThreshold, c.TailDrop = nil, nil, nil, nil
		}, "/int/queue-reports/queue-report[interface=eth1][queue-id=0]/config: no depth threshold, latency threshold or tail drop is set"},
		{"queue report bad interface name", nil, func(d *gen.Device) {
			q := d.Int.QueueReports.QueueReport
			for k, v := range q {
				delete(q, k)
				k.Interface = "a/b"
				q[k] = v
			}
		}, `/int/queue-reports/queue-report[interface=a/b][queue-id=0]/config/interface: port "a/b" is not a valid interface name`},
		{"event without report-session", nil, func(d *gen.Device) {
			d.Int.Events.Event[gen.IntdInt_DtelEventType_DROP_REPORT].Config.ReportSession = nil
		},
			"/int/events/event[type=DROP_REPORT]/config/report-session: DROP_REPORT event: report session is required"},
		{"event type the backend lacks", func(c *sai.Capabilities) { c.EventTypes = c.EventTypes[:5] }, nil,
			"/int/events/event[type=DROP_REPORT]/config/type: DROP_REPORT events are not supported by the dataplane"},
		{"report session without collectors", nil, func(d *gen.Device) { d.Int.ReportSessions.ReportSession["legacy"].Collectors = nil },
			"/int/report-sessions/report-session[name=legacy]/collectors: at least one destination is required"},
		{"coalescing in v0.5", nil, func(d *gen.Device) {
			d.Int.ReportSessions.ReportSession["legacy"].Config.MaxReportsPerPacket = ptrTo(uint8(4))
		}, "/int/report-sessions/report-session[name=legacy]/config/max-reports-per-packet: coalescing needs report format 2.0, not 0.5"},
		{"truncate size too small", nil, func(d *gen.Device) {
			d.Int.ReportSessions.ReportSession["legacy"].Config.TruncateSize = ptrTo(uint16(10))
		},
			"/int/report-sessions/report-session[name=legacy]/config/truncate-size: truncate size 10 is out of range 64..9000 (or 0)"},
		{"too many watchlist entries", func(c *sai.Capabilities) { c.MaxWatchlistEntries = 2 }, nil,
			"/int/watchlist/entries: 3 entries exceed the dataplane's limit of 2"},
		{"units the backend cannot produce", nil, func(d *gen.Device) {
			d.MetadataSemantics.MetadataField[fieldHopLatency].Config.Units = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIME_MICROSECONDS
		}, "/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_HOP_LATENCY]/config/units: the dataplane encodes METADATA_FIELD_HOP_LATENCY in METADATA_TIME_NANOSECONDS, not METADATA_TIME_MICROSECONDS"},
		{"queue occupancy in bytes", func(c *sai.Capabilities) { *c = sai.FullCapabilities() }, nil,
			"/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_QUEUE_OCCUPANCY]/config/units: the dataplane encodes METADATA_FIELD_QUEUE_OCCUPANCY in METADATA_SIZE_BYTES, not METADATA_SIZE_CELLS"},
		{"cell size", func(c *sai.Capabilities) { c.QueueOccupancy.CellSize = 256 }, nil,
			"/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_QUEUE_OCCUPANCY]/config/cell-size: the dataplane's cells are 256 bytes, not 80"},
		{"packet timing", func(c *sai.Capabilities) { c.QueueOccupancy.Timing = sai.QueueTimingDequeue }, nil,
			"/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_QUEUE_OCCUPANCY]/config/packet-timing: the dataplane samples METADATA_FIELD_QUEUE_OCCUPANCY at DEQUEUE_TIME, not ENQUEUE_TIME"},
		{"last hop position", func(c *sai.Capabilities) { c.LastHopReport = sai.LastHopSeparateReport }, nil,
			"/report-properties/int-last-hop-report-properties/config/int-last-hop-metadata-report: the dataplane's last hop reports its metadata as SEPARATE_TELEMETRY_REPORT, not EMBEDDED_INT"},
		{"node-value larger than its field", nil, func(d *gen.Device) {
			f := d.DomainSpecificMetadata.Domain[4660].Fields.Field[1].Config
			f.NodeValue = ptrTo(uint64(1) << 32)
		}, "/domain-specific-metadata/domain[domain-specific-id=4660]/fields/field[domain-metadata-bit-position=1]/config/node-value: node-value 0x100000000 does not fit the field's size of 1 word"},
		{"metadata node-id differs", nil, func(d *gen.Device) {
			d.MetadataSemantics.GetOrCreateMetadataField(fieldNodeID).GetOrCreateConfig().NodeId = ptrTo(uint32(9))
		}, "/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_NODE_ID]/config/node-id: node-id 9 differs from /int/node/config/node-id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			caps := testCaps()
			if tc.caps != nil {
				tc.caps(&caps)
			}
			b := saitest.New(saitest.WithCapabilities(caps))
			o := New(b)
			d := full(t)
			if tc.mutate != nil {
				tc.mutate(d)
			}
			err := o.Apply(context.Background(), d)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Apply = %v, want ErrInvalid", err)
			}
			var ia interface{ InvalidArgument() bool }
			if !errors.As(err, &ia) || !ia.InvalidArgument() {
				t.Errorf("%v does not implement InvalidArgument", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "/") {
				t.Errorf("error does not start with a data path: %v", err)
			}
			if len(b.Log()) != 0 {
				t.Errorf("backend was called: %v", b.Log())
			}
		})
	}
}

// TestDSValues: the node-values of domain-specific fields reach the DTel
// object, by domain and bit, with their sizes.
func TestDSValues(t *testing.T) {
	o, b := newTest(t)
	d := full(t)
	flds := d.DomainSpecificMetadata.Domain[4660].Fields.Field
	flds[0].Config.NodeValue = ptrTo(uint64(0x0102030405060708))
	flds[1].Config.NodeValue = ptrTo(uint64(42))
	mustApply(t, o, d)
	var got []sai.DSValue
	for _, oid := range b.Objects(sai.ObjectTypeDTel) {
		a, _ := b.Get(oid)
		got = a.(sai.DTelAttrs).DSValues
	}
	want := []sai.DSValue{{DomainID: 4660, Bit: 0, Words: 2, Value: 0x0102030405060708}, {DomainID: 4660, Bit: 1, Words: 1, Value: 42}}
	if !slices.Equal(got, want) {
		t.Fatalf("DSValues %+v, want %+v", got, want)
	}
}

// tunnelSession puts session name in a VXLAN-GPE tunnel to dst4 and dst6
// and gives the node the tunnel addresses node4 and node6 ("": unset).
func tunnelSession(name, node4, node6, dst4, dst6 string) func(d *gen.Device) {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return ptrTo(v)
	}
	return func(d *gen.Device) {
		n := d.Int.Node.Config
		n.TunnelAddress, n.TunnelAddressIpv6 = opt(node4), opt(node6)
		c := d.Int.IntSessions.IntSession[name].Config
		c.Encapsulation = gen.IntdInt_Int_IntSessions_IntSession_Config_Encapsulation_VXLAN_GPE
		c.TunnelDestination, c.TunnelDestinationIpv6 = opt(dst4), opt(dst6)
	}
}

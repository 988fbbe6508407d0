package dtel

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// The generated struct each object type is translated from; attribute
// paths are relative to it.
var attrRoots = map[sai.ObjectType]reflect.Type{
	sai.ObjectTypeDTel:           reflect.TypeFor[gen.IntdInt_Int](),
	sai.ObjectTypeIntSession:     reflect.TypeFor[gen.IntdInt_Int_IntSessions_IntSession](),
	sai.ObjectTypeReportSession:  reflect.TypeFor[gen.IntdInt_Int_ReportSessions_ReportSession](),
	sai.ObjectTypeQueueReport:    reflect.TypeFor[gen.IntdInt_Int_QueueReports_QueueReport](),
	sai.ObjectTypeEvent:          reflect.TypeFor[gen.IntdInt_Int_Events_Event](),
	sai.ObjectTypeWatchlistEntry: reflect.TypeFor[gen.IntdInt_Int_Watchlist_Entries_Entry](),
}

type (
	dtelCfg    = gen.IntdInt_Int
	intCfg     = gen.IntdInt_Int_IntSessions_IntSession
	reportCfg  = gen.IntdInt_Int_ReportSessions_ReportSession
	queueCfg   = gen.IntdInt_Int_QueueReports_QueueReport
	eventCfg   = gen.IntdInt_Int_Events_Event
	entryCfg   = gen.IntdInt_Int_Watchlist_Entries_Entry
	sinkCfg    = gen.IntdInt_Int_Interfaces_Interface
	collectCfg = gen.IntdInt_Int_ReportSessions_ReportSession_Collectors_Collector
)

// attrPaths binds each sai attribute to the configuration field it is
// translated from; the YANG path comes from that field's schema tag, so a
// renamed leaf or attribute breaks the build, not an error message.
var attrPaths = bindAttrs(
	at(sai.AttrDTelIntEndpointEnable, func(c *dtelCfg) any { return &c.Node.Config.IntEndpoint }),
	at(sai.AttrDTelIntTransitEnable, func(c *dtelCfg) any { return &c.Node.Config.IntTransit }),
	at(sai.AttrDTelPostcardEnable, func(c *dtelCfg) any { return &c.Node.Config.Postcard }),
	at(sai.AttrDTelDropReportEnable, func(c *dtelCfg) any { return &c.Node.Config.DropReport }),
	at(sai.AttrDTelQueueReportEnable, func(c *dtelCfg) any { return &c.Node.Config.QueueReport }),
	at(sai.AttrDTelSwitchID, func(c *dtelCfg) any { return &c.Node.Config.NodeId }),
	at(sai.AttrDTelHWID, func(c *dtelCfg) any { return &c.Node.Config.HwId }),
	at(sai.AttrDTelFlowStateClearCycle, func(c *dtelCfg) any { return &c.Node.Config.FlowStateClearCycle }),
	at(sai.AttrDTelLatencySensitivity, func(c *dtelCfg) any { return &c.Node.Config.LatencySensitivity }),
	at(sai.AttrDTelMalformedAction, func(c *dtelCfg) any { return &c.Node.Config.MalformedIntAction }),
	at(sai.AttrDTelSinkPortList, func(c *dtelCfg) any { return &c.Interfaces }),
	at(sai.AttrDTelIntL4DSCP, func(c *dtelCfg) any { return &c.Marking.Config.DscpValue }),
	at(sai.AttrDTelIntL4DSCPValue, func(c *dtelCfg) any { return &c.Marking.Config.DscpValue }),
	at(sai.AttrDTelIntL4DSCPMask, func(c *dtelCfg) any { return &c.Marking.Config.DscpValue }),
	at(sai.AttrDTelIntL4DSCPRemark, func(c *dtelCfg) any { return &c.Marking.Config.RemarkDscp }),
	at(sai.AttrDTelIntUDPDstPort, func(c *dtelCfg) any { return &c.Marking.Config.UdpPort }),
	at(sai.AttrDTelIntUDPNPT, func(c *dtelCfg) any { return &c.Marking.Config.UdpNpt }),
	at(sai.AttrDTelProbeMarker, func(c *dtelCfg) any { return &c.Marking.Config.ProbeMarker }),
	at(sai.AttrDTelVXLANGPENextProtocol, func(c *dtelCfg) any { return &c.Marking.Config.VxlanGpeNextProtocol }),
	at(sai.AttrDTelGeneveOptionClass, func(c *dtelCfg) any { return &c.Marking.Config.GeneveOptionClass }),
	at(sai.AttrDTelGREProtocolType, func(c *dtelCfg) any { return &c.Marking.Config.GreProtocolType }),
	at(sai.AttrDTelFlowReportInterval, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.ReportInterval }),
	at(sai.AttrDTelFlowReportHopLatencyChange, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.HopLatencyThreshold }),
	at(sai.AttrDTelFlowReportOnPortChange, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.ReportOnPortChange }),
	at(sai.AttrDTelFlowReportOnPathChange, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.ReportOnPathChange }),
	at(sai.AttrDTelFlowReportOnQueueChange, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.ReportOnQueueChange }),
	at(sai.AttrDTelFlowReportAdaptive, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.LatencyFilterMode }),
	at(sai.AttrDTelFlowReportLatencyFactor, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.LatencyDeviationFactor }),
	at(sai.AttrDTelFlowReportLatencyFloor, func(c *dtelCfg) any { return &c.FlowReportFilter.Config.LatencyFloor }),
	at(sai.AttrDTelTunnelAddress, func(c *dtelCfg) any { return &c.Node.Config.TunnelAddress }),
	at(sai.AttrDTelTunnelAddress6, func(c *dtelCfg) any { return &c.Node.Config.TunnelAddressIpv6 }),
	// From /domain-specific-metadata, outside /int: dsValues checks them
	// there first, so sai never names them.
	at(sai.AttrDTelDSValues, func(c *dtelCfg) any { return &c.Node }),

	at(sai.AttrIntSessionMode, func(c *intCfg) any { return &c.Config.Mode }),
	at(sai.AttrIntSessionMaxHopCount, func(c *intCfg) any { return &c.Config.RemainingHopCount }),
	at(sai.AttrIntSessionInstructions, func(c *intCfg) any { return &c.Config.Instructions }),
	at(sai.AttrIntSessionDomainSpecificID, func(c *intCfg) any { return &c.Config.DomainSpecificId }),
	at(sai.AttrIntSessionDSInstruction, func(c *intCfg) any { return &c.Config.DsInstruction }),
	at(sai.AttrIntSessionDSFlags, func(c *intCfg) any { return &c.Config.DsFlags }),
	at(sai.AttrIntSessionDiscard, func(c *intCfg) any { return &c.Config.Discard }),
	at(sai.AttrIntSessionClampTCPMSS, func(c *intCfg) any { return &c.Config.ClampTcpMss }),
	at(sai.AttrIntSessionEncapsulation, func(c *intCfg) any { return &c.Config.Encapsulation }),
	at(sai.AttrIntSessionTunnelDestination, func(c *intCfg) any { return &c.Config.TunnelDestination }),
	at(sai.AttrIntSessionTunnelDestination6, func(c *intCfg) any { return &c.Config.TunnelDestinationIpv6 }),

	at(sai.AttrReportSessionSrcIP, func(c *reportCfg) any { return &c.Config.SourceAddress }),
	at(sai.AttrReportSessionDestinations, func(c *reportCfg) any { return &c.Collectors }),
	at(sai.AttrReportSessionDestinationIP, func(c *reportCfg) any { return &c.Collectors }),
	at(sai.AttrReportSessionDestinationUDPPort, func(c *reportCfg) any { return &c.Collectors }),
	at(sai.AttrReportSessionUDPDstPort, func(c *reportCfg) any { return &c.Collectors }),
	at(sai.AttrReportSessionVirtualRouter, func(c *reportCfg) any { return &c.Config.Vrf }),
	at(sai.AttrReportSessionTruncateSize, func(c *reportCfg) any { return &c.Config.TruncateSize }),
	at(sai.AttrReportSessionFormat, func(c *reportCfg) any { return &c.Config.ReportFormat }),
	at(sai.AttrReportSessionDSCP, func(c *reportCfg) any { return &c.Config.Dscp }),
	at(sai.AttrReportSessionCoalesceMaxReports, func(c *reportCfg) any { return &c.Config.MaxReportsPerPacket }),
	at(sai.AttrReportSessionCoalesceMaxDelay, func(c *reportCfg) any { return &c.Config.MaxDelay }),
	at(sai.AttrReportSessionRateLimit, func(c *reportCfg) any { return &c.Config.RateLimit }),
	at(sai.AttrReportSessionDistributeByFlow, func(c *reportCfg) any { return &c.Config.CollectorSelection }),
	at(sai.AttrReportSessionMTU, func(c *reportCfg) any { return &c.Config.PathMtu }),
	at(sai.AttrReportSessionSrcPortMode, func(c *reportCfg) any { return &c.Config.SourcePortMode }),
	at(sai.AttrReportSessionSrcPort, func(c *reportCfg) any { return &c.Config.SourcePort }),
	at(sai.AttrReportSessionSrcPortMin, func(c *reportCfg) any { return &c.Config.SourcePortMin }),
	at(sai.AttrReportSessionSrcPortMax, func(c *reportCfg) any { return &c.Config.SourcePortMax }),

	at(sai.AttrQueueReportPort, func(c *queueCfg) any { return &c.Config.Interface }),
	at(sai.AttrQueueReportQueue, func(c *queueCfg) any { return &c.Config.QueueId }),
	at(sai.AttrQueueReportDepthThreshold, func(c *queueCfg) any { return &c.Config.DepthThreshold }),
	at(sai.AttrQueueReportLatencyThreshold, func(c *queueCfg) any { return &c.Config.LatencyThreshold }),
	at(sai.AttrQueueReportResetThreshold, func(c *queueCfg) any { return &c.Config.LatencyResetThreshold }),
	at(sai.AttrQueueReportBreachQuota, func(c *queueCfg) any { return &c.Config.BreachQuota }),
	at(sai.AttrQueueReportTailDrop, func(c *queueCfg) any { return &c.Config.TailDrop }),
	at(sai.AttrQueueReportRateLimit, func(c *queueCfg) any { return &c.Config.RateLimit }),

	at(sai.AttrEventType, func(c *eventCfg) any { return &c.Config.Type }),
	at(sai.AttrEventReportSession, func(c *eventCfg) any { return &c.Config.ReportSession }),
	at(sai.AttrEventDSCP, func(c *eventCfg) any { return &c.Config.Dscp }),

	at(sai.AttrWatchlistPriority, func(c *entryCfg) any { return &c.Config.SequenceId }),
	at(sai.AttrWatchlistMatchSrcPrefix, func(c *entryCfg) any { return &c.Match.Config.SourcePrefix }),
	at(sai.AttrWatchlistMatchDstPrefix, func(c *entryCfg) any { return &c.Match.Config.DestinationPrefix }),
	at(sai.AttrWatchlistMatchIPProtocol, func(c *entryCfg) any { return &c.Match.Config.Protocol }),
	at(sai.AttrWatchlistMatchL4SrcPort, func(c *entryCfg) any { return &c.Match.Config.SourcePortMin }),
	at(sai.AttrWatchlistMatchL4DstPort, func(c *entryCfg) any { return &c.Match.Config.DestinationPortMin }),
	at(sai.AttrWatchlistMatchDSCPValue, func(c *entryCfg) any { return &c.Match.Config.Dscp }),
	at(sai.AttrWatchlistMatchDSCPMask, func(c *entryCfg) any { return &c.Match.Config.DscpMask }),
	at(sai.AttrWatchlistMatchTCPFlagsValue, func(c *entryCfg) any { return &c.Match.Config.TcpFlags }),
	at(sai.AttrWatchlistMatchTCPFlagsMask, func(c *entryCfg) any { return &c.Match.Config.TcpFlags }),
	at(sai.AttrWatchlistMatchInPort, func(c *entryCfg) any { return &c.Match.Config.IngressInterface }),
	at(sai.AttrWatchlistMatchEtherType, func(c *entryCfg) any { return &c.Match.Config.EtherType }),
	at(sai.AttrWatchlistMatchICMPType, func(c *entryCfg) any { return &c.Match.Config.IcmpType }),
	at(sai.AttrWatchlistMatchICMPTypeMask, func(c *entryCfg) any { return &c.Match.Config.IcmpType }),
	at(sai.AttrWatchlistMatchICMPCode, func(c *entryCfg) any { return &c.Match.Config.IcmpCode }),
	at(sai.AttrWatchlistMatchICMPCodeMask, func(c *entryCfg) any { return &c.Match.Config.IcmpCode }),
	at(sai.AttrWatchlistMatchInnerEnabled, func(c *entryCfg) any { return &c.VxlanMatch.Config }),
	at(sai.AttrWatchlistMatchInnerTunnel, func(c *entryCfg) any { return &c.VxlanMatch.Config.TunnelType }),
	at(sai.AttrWatchlistMatchInnerTunnelID, func(c *entryCfg) any { return &c.VxlanMatch.Config.TunnelId }),
	at(sai.AttrWatchlistMatchInnerEtherType, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerEtherType }),
	at(sai.AttrWatchlistMatchInnerSrcPrefix, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerSourcePrefix }),
	at(sai.AttrWatchlistMatchInnerDstPrefix, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerDestinationPrefix }),
	at(sai.AttrWatchlistMatchInnerIPProtocol, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerProtocol }),
	at(sai.AttrWatchlistMatchInnerL4SrcPort, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerSourcePortMin }),
	at(sai.AttrWatchlistMatchInnerL4DstPort, func(c *entryCfg) any { return &c.VxlanMatch.Config.InnerDestinationPortMin }),
	at(sai.AttrWatchlistActionFlowOp, func(c *entryCfg) any { return &c.Actions.Config.FlowOp }),
	at(sai.AttrWatchlistActionIntSession, func(c *entryCfg) any { return &c.Actions.Config.IntSession }),
	at(sai.AttrWatchlistActionDropReportEnable, func(c *entryCfg) any { return &c.Actions.Config.DropReport }),
	at(sai.AttrWatchlistActionTailDropReportEnable, func(c *entryCfg) any { return &c.Actions.Config.TailDropReport }),
	at(sai.AttrWatchlistActionFlowSamplePercent, func(c *entryCfg) any { return &c.Actions.Config.SamplePercent }),
	at(sai.AttrWatchlistActionReportAllPackets, func(c *entryCfg) any { return &c.Actions.Config.ReportAllPackets }),
	at(sai.AttrWatchlistActionPacketInterval, func(c *entryCfg) any { return &c.Actions.Config.PacketInterval }),
)

// Paths for errors about an object as a whole, where it is not the
// object's path itself (a queue report is all configuration).
var wholePaths = map[sai.ObjectType]string{
	sai.ObjectTypeQueueReport: fieldPath(func(c *queueCfg) any { return &c.Config }),
}

// Paths of list entries: a sink port and a report destination.
var (
	sinkListPath    = fieldPath(func(c *dtelCfg) any { return &c.Interfaces.Interface })
	sinkLeafPath    = fieldPath(func(c *sinkCfg) any { return &c.Config.IntSink })
	collectListPath = fieldPath(func(c *reportCfg) any { return &c.Collectors.Collector })
	collectConfPath = fieldPath(func(c *collectCfg) any { return &c.Config })
)

type attrBinding struct {
	id   sai.AttrID
	root reflect.Type
	path string
}

// at binds id to the field of T that sel returns the address of.
func at[T any](id sai.AttrID, sel func(*T) any) attrBinding {
	return attrBinding{id, reflect.TypeFor[T](), fieldPath(sel)}
}

func bindAttrs(bs ...attrBinding) map[sai.AttrID]string {
	m := make(map[sai.AttrID]string, len(bs))
	for _, b := range bs {
		if want := attrRoots[b.id.Object()]; b.root != want {
			panic(fmt.Sprintf("dtel: %v bound to a field of %v, want %v", b.id, b.root, want))
		}
		if _, dup := m[b.id]; dup {
			panic(fmt.Sprintf("dtel: %v bound twice", b.id))
		}
		m[b.id] = b.path
	}
	return m
}

// fieldPath is the schema path, relative to T, of the field that sel
// returns the address of. It calls sel on a T with every container
// allocated, then finds the field by address and joins the ygot path
// tags on the way down.
func fieldPath[T any](sel func(*T) any) string {
	root := reflect.New(reflect.TypeFor[T]())
	allocContainers(root.Elem())
	target := reflect.ValueOf(sel(root.Interface().(*T)))
	if target.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("dtel: selector on %v returns %v, not a field's address", root.Type(), target.Type()))
	}
	p, ok := findField(root.Elem(), target.Pointer())
	if !ok {
		panic(fmt.Sprintf("dtel: selector on %v returns no field of it", root.Type()))
	}
	return p
}

func allocContainers(v reflect.Value) {
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct {
			f.Set(reflect.New(f.Type().Elem()))
			allocContainers(f.Elem())
		}
	}
}

func findField(v reflect.Value, addr uintptr) (string, bool) {
	for i := range v.NumField() {
		f := v.Field(i)
		tag := "/" + v.Type().Field(i).Tag.Get("path")
		if f.Addr().Pointer() == addr {
			return tag, true
		}
		if f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct {
			if p, ok := findField(f.Elem(), addr); ok {
				return tag + p, true
			}
		}
	}
	return "", false
}

// listKeys renders the key predicates of a list entry ("[name=eth0]") in
// the schema's key order.
func listKeys(entry ygot.KeyHelperGoStruct) string {
	keys, err := entry.ΛListKeyMap()
	if err != nil {
		return ""
	}
	e := gen.SchemaTree[reflect.TypeOf(entry).Elem().Name()]
	if e == nil {
		return ""
	}
	var b strings.Builder
	for _, k := range strings.Fields(e.Key) {
		fmt.Fprintf(&b, "[%s=%v]", k, keys[k])
	}
	return b.String()
}

// attrError turns a sai validation or capability error about obj into an
// *InvalidError naming the configuration leaf.
func (o *Orchestrator) attrError(obj *object, err error) error {
	path := obj.path
	msg := err.Error()
	var ae *sai.AttrError
	if errors.As(err, &ae) {
		msg = ae.Msg
		if errors.Is(err, sai.ErrUnsupported) {
			msg += " by the dataplane"
		}
		path += subPath(obj, ae)
	}
	return &InvalidError{Path: path, Msg: msg, Err: err}
}

func subPath(obj *object, ae *sai.AttrError) string {
	if ae.Attr == sai.AttrNone {
		return wholePaths[obj.key.t]
	}
	// Name list entries for indexed attributes.
	switch a := obj.attrs.(type) {
	case sai.DTelAttrs:
		if ae.Attr == sai.AttrDTelSinkPortList && ae.Index >= 0 && ae.Index < len(a.SinkPortList) {
			name := a.SinkPortList[ae.Index]
			return sinkListPath + listKeys(&sinkCfg{Name: &name}) + sinkLeafPath
		}
	case sai.ReportSessionAttrs:
		isDest := slices.Contains([]sai.AttrID{sai.AttrReportSessionDestinations, sai.AttrReportSessionDestinationIP, sai.AttrReportSessionDestinationUDPPort}, ae.Attr)
		if isDest && ae.Index >= 0 && ae.Index < len(a.Destinations) {
			d := a.Destinations[ae.Index]
			addr, port := d.IP.String(), d.UDPPort
			return collectListPath + listKeys(&collectCfg{Address: &addr, Port: &port}) + collectConfPath
		}
	}
	return attrPaths[ae.Attr]
}

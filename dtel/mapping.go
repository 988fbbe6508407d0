package dtel

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// intent is a configuration translated to sai objects.
type intent struct {
	objects map[key]*object
}

// The YANG data paths used in error messages and as object paths.
const (
	pathNode       = "/int/node/config"
	pathMarking    = "/int/marking/config"
	pathFilter     = "/int/flow-report-filter/config"
	pathInterfaces = "/int/interfaces"
)

func eventPath(t gen.E_IntdInt_DtelEventType) string {
	return "/int/events/event[type=" + enumName(t) + "]"
}

// enumName is the YANG name of a generated enum or identity value.
func enumName(e fmt.Stringer) string { return e.String() }

// translate maps a configuration to sai objects and runs the checks YANG
// cannot express. Errors are *InvalidError. Maps are walked in key order so
// that the same configuration always reports the same first error.
func (o *Orchestrator) translate(cfg *gen.Device) (*intent, error) {
	in := &intent{objects: map[key]*object{}}
	if err := o.checkMetadataSemantics(cfg); err != nil {
		return nil, err
	}
	root := cfg.GetInt()
	if root == nil {
		return in, nil
	}
	// In creation order, so that references resolve to objects already
	// translated.
	for _, f := range []func(*intent, *gen.Device) error{
		o.translateNode,
		translateIntSessions,
		translateReportSessions,
		translateWatchlist,
		translateQueueReports,
		translateEvents,
	} {
		if err := f(in, cfg); err != nil {
			return nil, err
		}
	}
	if err := o.checkObjects(in); err != nil {
		return nil, err
	}
	return in, nil
}

func (in *intent) add(obj *object) { in.objects[obj.key] = obj }

func (in *intent) has(t sai.ObjectType, name string) bool {
	return in.objects[key{t, name}] != nil
}

// translateNode maps the node, its marking, flow report filter and sink
// interfaces: the one DTel switch object.
func (o *Orchestrator) translateNode(in *intent, cfg *gen.Device) error {
	root := cfg.GetInt()
	nc := root.GetNode().GetConfig()
	if nc == nil {
		nc = &gen.IntdInt_Int_Node_Config{}
	}
	enabled := nc.GetEnabled()
	id, err := nodeID(nc)
	if err != nil {
		return err
	}
	d := sai.DTelAttrs{
		IntEndpointEnable:   enabled && nc.GetIntEndpoint(),
		IntTransitEnable:    enabled && nc.GetIntTransit(),
		PostcardEnable:      enabled && nc.GetPostcard(),
		DropReportEnable:    enabled && nc.GetDropReport(),
		QueueReportEnable:   enabled && nc.GetQueueReport(),
		SwitchID:            id,
		HWID:                nc.GetHwId(),
		FlowStateClearCycle: time.Duration(nc.GetFlowStateClearCycle()) * time.Second,
		LatencySensitivity:  nc.GetLatencySensitivity(),
	}
	if nc.GetMalformedIntAction() == gen.IntdInt_MalformedIntAction_DROP {
		d.MalformedAction = sai.MalformedDrop
	}
	if nc.TunnelAddress != nil {
		if d.TunnelAddress, err = netip.ParseAddr(nc.GetTunnelAddress()); err != nil {
			return invalidf(pathNode+"/tunnel-address", "%v", err)
		}
	}
	if nc.TunnelAddressIpv6 != nil {
		if d.TunnelAddress6, err = netip.ParseAddr(nc.GetTunnelAddressIpv6()); err != nil {
			return invalidf(pathNode+"/tunnel-address-ipv6", "%v", err)
		}
	}
	if err := o.translateMarking(&d, root.GetMarking().GetConfig()); err != nil {
		return err
	}
	fc := root.GetFlowReportFilter().GetConfig()
	d.FlowReport = sai.FlowReportFilter{
		Interval:         time.Duration(fc.GetReportInterval()) * time.Millisecond,
		HopLatencyChange: time.Duration(fc.GetHopLatencyThreshold()) * time.Nanosecond,
		OnPortChange:     fc.GetReportOnPortChange(),
		OnPathChange:     fc.GetReportOnPathChange(),
		OnQueueChange:    fc.GetReportOnQueueChange(),
		Adaptive:         fc.GetLatencyFilterMode() == gen.IntdInt_Int_FlowReportFilter_Config_LatencyFilterMode_adaptive,
		LatencyFactor:    fc.GetLatencyDeviationFactor(),
		LatencyFloor:     time.Duration(fc.GetLatencyFloor()) * time.Nanosecond,
	}
	var ifaces map[string]*gen.IntdInt_Int_Interfaces_Interface
	if root.Interfaces != nil {
		ifaces = root.Interfaces.Interface
	}
	for _, name := range sortedKeys(ifaces) {
		if ifaces[name].GetConfig().GetIntSink() {
			d.SinkPortList = append(d.SinkPortList, name)
		}
	}
	if d.DSValues, err = dsValues(cfg); err != nil {
		return err
	}
	in.add(&object{key: key{t: sai.ObjectTypeDTel}, path: "/int", attrs: d})
	return nil
}

// dsValues lists the node-values of the configured domain-specific
// fields, by domain and bit.
func dsValues(cfg *gen.Device) ([]sai.DSValue, error) {
	var out []sai.DSValue
	var doms map[uint16]*gen.IntdIntMetadataSemantics_DomainSpecificMetadata_Domain
	if d := cfg.GetDomainSpecificMetadata(); d != nil {
		doms = d.Domain
	}
	for _, id := range sortedKeys(doms) {
		var fields map[uint8]*gen.IntdIntMetadataSemantics_DomainSpecificMetadata_Domain_Fields_Field
		if f := doms[id].GetFields(); f != nil {
			fields = f.Field
		}
		for _, pos := range sortedKeys(fields) {
			c := fields[pos].GetConfig()
			if c.NodeValue == nil {
				continue
			}
			p := fmt.Sprintf("/domain-specific-metadata/domain[domain-specific-id=%d]/fields/field[domain-metadata-bit-position=%d]/config/node-value", id, pos)
			switch {
			case id == 0:
				return nil, invalidf(p, "domain 0 has no domain-specific fields")
			case c.GetSize() == 1 && c.GetNodeValue() > 0xffffffff:
				return nil, invalidf(p, "node-value %#x does not fit the field's size of 1 word", c.GetNodeValue())
			}
			out = append(out, sai.DSValue{DomainID: id, Bit: pos, Words: c.GetSize(), Value: c.GetNodeValue()})
		}
	}
	return out, nil
}

// nodeID is the configured node-id; a node that originates INT or reports
// must have one.
func nodeID(nc *gen.IntdInt_Int_Node_Config) (uint32, error) {
	switch {
	case nc.NodeId != nil:
		return *nc.NodeId, nil
	case !nc.GetEnabled():
		return 0, nil
	}
	// Every node of a domain would otherwise report the same id.
	for _, r := range []struct {
		on   bool
		leaf string
	}{{nc.GetIntEndpoint(), "int-endpoint"}, {nc.GetIntTransit(), "int-transit"}, {nc.GetPostcard(), "postcard"},
		{nc.GetDropReport(), "drop-report"}, {nc.GetQueueReport(), "queue-report"}} {
		if r.on {
			return 0, invalidf(pathNode+"/node-id", "%s is enabled but node-id is not set: give this node an INT node-id unique in its domain", r.leaf)
		}
	}
	return 0, nil
}

// translateMarking fills in how INT packets are recognised.
func (o *Orchestrator) translateMarking(d *sai.DTelAttrs, mc *gen.IntdInt_Int_Marking_Config) error {
	switch mc.GetL4Marking() {
	case gen.IntdInt_L4Marking_DSCP:
		d.IntL4DSCP = sai.DSCPMatch{Value: mc.GetDscpValue(), Mask: mc.GetDscpMask()}
		d.IntL4DSCPRemark = mc.GetRemarkDscp()
	case gen.IntdInt_L4Marking_UDP_DESTINATION_PORT:
		if mc.GetUdpPort() == 0 {
			return invalidf(pathMarking+"/udp-port", "l4-marking UDP_DESTINATION_PORT needs a udp-port")
		}
		d.IntUDPDstPort = mc.GetUdpPort()
		d.IntUDPNPT = spec.NPTUDPPort
		if mc.GetUdpNpt() == gen.IntdInt_UdpNpt_NEW_UDP_HEADER {
			d.IntUDPNPT = spec.NPTIPProto
		}
	case gen.IntdInt_L4Marking_PROBE_MARKER:
		if mc.GetProbeMarker() == 0 {
			return invalidf(pathMarking+"/probe-marker", "l4-marking PROBE_MARKER needs a non-zero probe-marker")
		}
		d.ProbeMarker = mc.GetProbeMarker()
	}
	// Tunnel code points say how INT is recognised inside tunnels. A
	// YANG default for a tunnel the dataplane cannot parse is dropped
	// (it simply won't see INT there); an explicit value is passed on, so
	// the dataplane refuses it with a clear error.
	tunnel := func(set bool, enc spec.Encap) bool { return set || slices.Contains(o.caps.Encaps, enc) }
	if tunnel(mc != nil && mc.VxlanGpeNextProtocol != nil, spec.EncapVXLANGPE) {
		d.VXLANGPENextProtocol = mc.GetVxlanGpeNextProtocol()
	}
	if tunnel(mc != nil && mc.GeneveOptionClass != nil, spec.EncapGeneve) {
		d.GeneveOptionClass = mc.GetGeneveOptionClass()
	}
	d.GREProtocolType = mc.GetGreProtocolType()
	return nil
}

func translateIntSessions(in *intent, cfg *gen.Device) error {
	var sessions map[string]*gen.IntdInt_Int_IntSessions_IntSession
	if s := cfg.GetInt().IntSessions; s != nil {
		sessions = s.IntSession
	}
	for _, name := range sortedKeys(sessions) {
		p := gen.IntSessionPath(name)
		a, err := intSession(cfg, p, sessions[name].GetConfig())
		if err != nil {
			return err
		}
		in.add(&object{key: key{sai.ObjectTypeIntSession, name}, path: p, attrs: a})
	}
	return nil
}

func intSession(cfg *gen.Device, p string, c *gen.IntdInt_Int_IntSessions_IntSession_Config) (sai.IntSessionAttrs, error) {
	a := sai.IntSessionAttrs{
		MaxHopCount:      c.GetRemainingHopCount(),
		DomainSpecificID: c.GetDomainSpecificId(),
		DSInstruction:    c.GetDsInstruction(),
		DSFlags:          c.GetDsFlags(),
		Discard:          c.GetDiscard(),
		ClampTCPMSS:      c.GetClampTcpMss(),
	}
	if c.GetMode() == gen.IntdInt_IntMode_INT_MX {
		a.Mode = sai.IntModeMX
		a.MaxHopCount = 0 // MX headers carry no hop count
	}
	if c.GetEncapsulation() == gen.IntdInt_Int_IntSessions_IntSession_Config_Encapsulation_VXLAN_GPE {
		a.Encapsulation = sai.SessionEncapVXLANGPE
	}
	// Each tunnel destination needs the node's address of its family.
	nc := cfg.GetInt().GetNode().GetConfig()
	for _, d := range []struct {
		dst, src  *string
		to        *netip.Addr
		leaf, own string
	}{
		{c.TunnelDestination, tunnelAddr(nc, false), &a.TunnelDestination, "tunnel-destination", "tunnel-address"},
		{c.TunnelDestinationIpv6, tunnelAddr(nc, true), &a.TunnelDestination6, "tunnel-destination-ipv6", "tunnel-address-ipv6"},
	} {
		if d.dst == nil {
			continue
		}
		var err error
		if *d.to, err = netip.ParseAddr(*d.dst); err != nil {
			return a, invalidf(p+"/config/"+d.leaf, "%v", err)
		}
		if d.src == nil && a.Encapsulation != sai.SessionEncapNone {
			return a, invalidf(p+"/config/"+d.leaf, "%s needs the node's %s (%s/%s), the tunnels' outer source", d.leaf, d.own, pathNode, d.own)
		}
	}
	for _, id := range c.GetInstructions() {
		bit, ok := instructionBits[id]
		if !ok {
			return a, invalidf(p+"/config/instructions", "%s is not an INT instruction", enumName(id))
		}
		a.Instructions |= bit
	}
	// sai validates the session; a domain's fields are configuration.
	if a.DSInstruction == 0 || a.DomainSpecificID == 0 {
		return a, nil
	}
	if dom := cfg.GetDomainSpecificMetadata().GetDomain(a.DomainSpecificID); dom != nil {
		for pos := 0; pos < 16; pos++ {
			if a.DSInstruction&(1<<(15-pos)) != 0 && dom.GetFields().GetField(uint8(pos)) == nil {
				return a, invalidf(p+"/config/ds-instruction", "ds-instruction bit %d has no field in domain %d", pos, a.DomainSpecificID)
			}
		}
	}
	return a, nil
}

func translateReportSessions(in *intent, cfg *gen.Device) error {
	var reports map[string]*gen.IntdInt_Int_ReportSessions_ReportSession
	if r := cfg.GetInt().ReportSessions; r != nil {
		reports = r.ReportSession
	}
	for _, name := range sortedKeys(reports) {
		p := gen.ReportSessionPath(name)
		a, err := reportSession(p, reports[name])
		if err != nil {
			return err
		}
		in.add(&object{key: key{sai.ObjectTypeReportSession, name}, path: p, attrs: a})
	}
	return nil
}

func reportSession(p string, rs *gen.IntdInt_Int_ReportSessions_ReportSession) (sai.ReportSessionAttrs, error) {
	c := rs.GetConfig()
	if c == nil {
		c = &gen.IntdInt_Int_ReportSessions_ReportSession_Config{}
	}
	a := sai.ReportSessionAttrs{
		TruncateSize: c.GetTruncateSize(),
		DSCP:         c.GetDscp(),
		RateLimit:    c.GetRateLimit(),

		DistributeByFlow: c.GetCollectorSelection() == gen.IntdInt_CollectorSelection_FLOW_HASH,
		MTU:              c.GetPathMtu(),
	}
	switch c.GetSourcePortMode() {
	case gen.IntdInt_SourcePortMode_FIXED:
		if c.SourcePort == nil {
			return a, invalidf(p+"/config/source-port", "source-port-mode FIXED needs a source-port")
		}
		a.SrcPort = sai.SrcPorts{Mode: sai.SrcPortFixed, Port: c.GetSourcePort()}
	case gen.IntdInt_SourcePortMode_FLOW_HASH:
		a.SrcPort = sai.SrcPorts{Mode: sai.SrcPortFlowHash, Min: c.GetSourcePortMin(), Max: c.GetSourcePortMax()}
	}
	if c.SourceAddress == nil {
		return a, invalidf(p+"/config/source-address", "a report session needs a source-address")
	}
	src, err := netip.ParseAddr(c.GetSourceAddress())
	if err != nil {
		return a, invalidf(p+"/config/source-address", "%v", err)
	}
	a.SrcIP = src
	if vrf := c.GetVrf(); vrf != "default" {
		a.VirtualRouter = vrf
	}
	if c.GetReportFormat() == gen.IntdInt_ReportFormat_TELEMETRY_REPORT_V0_5 {
		a.Format = spec.ReportFormatV05
	}
	if n := c.GetMaxReportsPerPacket(); n > 1 {
		a.Coalesce = sai.Coalescing{MaxReports: uint16(n), MaxDelay: time.Duration(c.GetMaxDelay()) * time.Microsecond}
	}
	var cols map[gen.IntdInt_Int_ReportSessions_ReportSession_Collectors_Collector_Key]*gen.IntdInt_Int_ReportSessions_ReportSession_Collectors_Collector
	if rs.Collectors != nil {
		cols = rs.Collectors.Collector
	}
	for k := range cols {
		ip, err := netip.ParseAddr(k.Address)
		if err != nil {
			return a, invalidf(collectorPath(p, k.Address, k.Port)+"/config/address", "%v", err)
		}
		a.Destinations = append(a.Destinations, sai.ReportDestination{IP: ip, UDPPort: k.Port})
	}
	slices.SortFunc(a.Destinations, func(x, y sai.ReportDestination) int {
		return cmp.Or(x.IP.Compare(y.IP), cmp.Compare(x.UDPPort, y.UDPPort))
	})
	return a, nil
}

func translateWatchlist(in *intent, cfg *gen.Device) error {
	var entries map[uint32]*gen.IntdInt_Int_Watchlist_Entries_Entry
	if e := cfg.GetInt().GetWatchlist().GetEntries(); e != nil {
		entries = e.Entry
	}
	for _, seq := range sortedKeys(entries) {
		p := gen.EntryPath(seq)
		if seq > math.MaxUint16 {
			return invalidf(p+"/config/sequence-id", "sequence-id %d exceeds %d", seq, math.MaxUint16)
		}
		// The first matching entry, in ascending sequence-id, wins; in
		// SAI the highest priority wins.
		a := sai.WatchlistEntryAttrs{Priority: uint16(math.MaxUint16 - seq)}
		e := entries[seq]
		var err error
		if a.Match, err = watchMatch(p, e.GetMatch().GetConfig()); err != nil {
			return err
		}
		if v := e.GetVxlanMatch().GetConfig(); v != nil {
			if e.GetMatch().GetConfig().GetGtpuInner() {
				return invalidf(p+"/match/config/gtpu-inner", "gtpu-inner and vxlan-match are exclusive")
			}
			if a.Match.Inner, err = innerMatch(p+"/vxlan-match/config/", v); err != nil {
				return err
			}
		}
		obj := &object{key: key{sai.ObjectTypeWatchlistEntry, strconv.FormatUint(uint64(seq), 10)}, path: p}
		ac := e.GetActions().GetConfig()
		if ac == nil {
			ac = &gen.IntdInt_Int_Watchlist_Entries_Entry_Actions_Config{}
		}
		a.Action = watchAction(ac)
		if ac.IntSession != nil {
			if !in.has(sai.ObjectTypeIntSession, ac.GetIntSession()) {
				return invalidf(p+"/actions/config/int-session", "int-session %q does not exist", ac.GetIntSession())
			}
			obj.refs = []key{{sai.ObjectTypeIntSession, ac.GetIntSession()}}
		}
		obj.attrs = a
		in.add(obj)
	}
	return nil
}

func watchMatch(p string, m *gen.IntdInt_Int_Watchlist_Entries_Entry_Match_Config) (sai.WatchlistMatch, error) {
	if m == nil {
		m = &gen.IntdInt_Int_Watchlist_Entries_Entry_Match_Config{}
	}
	mp := p + "/match/config/"
	var a sai.WatchlistMatch
	var err error
	if a.SrcPrefix, err = prefix(m.SourcePrefix, mp+"source-prefix"); err != nil {
		return a, err
	}
	if a.DstPrefix, err = prefix(m.DestinationPrefix, mp+"destination-prefix"); err != nil {
		return a, err
	}
	a.IPProtocol = m.GetProtocol()
	if a.L4SrcPort, err = portRange(m.SourcePortMin, m.SourcePortMax, mp+"source-port"); err != nil {
		return a, err
	}
	if a.L4DstPort, err = portRange(m.DestinationPortMin, m.DestinationPortMax, mp+"destination-port"); err != nil {
		return a, err
	}
	if m.Dscp != nil {
		a.DSCP = sai.DSCPMatch{Value: *m.Dscp, Mask: sai.MaxDSCP}
		if m.DscpMask != nil {
			a.DSCP.Mask = *m.DscpMask
			if a.DSCP.Value&^a.DSCP.Mask != 0 {
				return a, invalidf(mp+"dscp", "dscp %#x has bits outside dscp-mask %#x", a.DSCP.Value, a.DSCP.Mask)
			}
		}
	} else if m.DscpMask != nil {
		return a, invalidf(mp+"dscp-mask", "dscp-mask needs dscp")
	}
	a.EtherType = m.GetEtherType()
	if m.IcmpType != nil {
		a.ICMP.Type, a.ICMP.TypeMask = *m.IcmpType, 0xff
	}
	if m.IcmpCode != nil {
		a.ICMP.Code, a.ICMP.CodeMask = *m.IcmpCode, 0xff
	}
	if m.TcpFlags != nil || m.TcpFlagsMask != nil {
		mask := m.GetTcpFlagsMask()
		if m.TcpFlagsMask == nil {
			mask = m.GetTcpFlags() // the flags that must be set
		}
		a.TCPFlags = sai.TCPFlagsMatch{Value: m.GetTcpFlags(), Mask: mask}
		if a.TCPFlags.Value&^mask != 0 {
			return a, invalidf(mp+"tcp-flags", "tcp-flags %#x has bits outside tcp-flags-mask %#x", a.TCPFlags.Value, mask)
		}
	}
	a.InPort = m.GetIngressInterface()
	if m.GetGtpuInner() {
		// SD-Fabric: the 5-tuple applies to the UE's packet inside GTP-U.
		a.Inner = sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelGTPU, SrcPrefix: a.SrcPrefix, DstPrefix: a.DstPrefix,
			IPProtocol: a.IPProtocol, L4SrcPort: a.L4SrcPort, L4DstPort: a.L4DstPort}
		a.SrcPrefix, a.DstPrefix, a.IPProtocol, a.L4SrcPort, a.L4DstPort = netip.Prefix{}, netip.Prefix{}, 0, sai.PortRange{}, sai.PortRange{}
		if a.TCPFlags.Mask != 0 || a.ICMP != (sai.ICMPMatch{}) {
			return a, invalidf(mp+"gtpu-inner", "gtpu-inner matches the inner 5-tuple; tcp-flags and icmp-type/code apply to outer headers")
		}
	}
	return a, nil
}

func innerMatch(vp string, v *gen.IntdInt_Int_Watchlist_Entries_Entry_VxlanMatch_Config) (sai.InnerMatch, error) {
	in := sai.InnerMatch{Enabled: true, TunnelID: v.GetVni(), IPProtocol: v.GetInnerProtocol(), EtherType: v.GetInnerEtherType()}
	switch v.GetTunnelType() {
	case gen.IntdInt_TunnelType_VXLAN:
		in.Tunnel = sai.TunnelVXLAN
	case gen.IntdInt_TunnelType_VXLAN_GPE:
		in.Tunnel = sai.TunnelVXLANGPE
	case gen.IntdInt_TunnelType_GENEVE:
		in.Tunnel = sai.TunnelGeneve
	case gen.IntdInt_TunnelType_GRE:
		in.Tunnel = sai.TunnelGRE
	case gen.IntdInt_TunnelType_GTPU:
		in.Tunnel = sai.TunnelGTPU
	}
	if id := v.GetTunnelId(); id != 0 {
		if in.TunnelID != 0 && in.TunnelID != id {
			return in, invalidf(vp+"tunnel-id", "tunnel-id %d and vni %d differ; give one", id, in.TunnelID)
		}
		in.TunnelID = id
	}
	var err error
	if in.SrcPrefix, err = prefix(v.InnerSourcePrefix, vp+"inner-source-prefix"); err != nil {
		return in, err
	}
	if in.DstPrefix, err = prefix(v.InnerDestinationPrefix, vp+"inner-destination-prefix"); err != nil {
		return in, err
	}
	if in.L4SrcPort, err = portRange(v.InnerSourcePortMin, v.InnerSourcePortMax, vp+"inner-source-port"); err != nil {
		return in, err
	}
	if in.L4DstPort, err = portRange(v.InnerDestinationPortMin, v.InnerDestinationPortMax, vp+"inner-destination-port"); err != nil {
		return in, err
	}
	return in, nil
}

func watchAction(ac *gen.IntdInt_Int_Watchlist_Entries_Entry_Actions_Config) sai.WatchlistAction {
	a := sai.WatchlistAction{
		DropReportEnable:     ac.GetDropReport(),
		TailDropReportEnable: ac.GetTailDropReport(),
		ReportAllPackets:     ac.GetReportAllPackets(),
		PacketInterval:       time.Duration(ac.GetPacketInterval()) * time.Microsecond,
	}
	switch ac.GetFlowOp() {
	case gen.IntdInt_FlowOp_INT:
		a.FlowOp = sai.FlowOpInt
	case gen.IntdInt_FlowOp_POSTCARD:
		a.FlowOp = sai.FlowOpPostcard
	}
	// sample-percent has a default, meaningless without a flow-op.
	if a.FlowOp != sai.FlowOpNop {
		a.FlowSamplePercent = ac.GetSamplePercent()
	}
	return a
}

func translateQueueReports(in *intent, cfg *gen.Device) error {
	var queues map[gen.IntdInt_Int_QueueReports_QueueReport_Key]*gen.IntdInt_Int_QueueReports_QueueReport
	if q := cfg.GetInt().QueueReports; q != nil {
		queues = q.QueueReport
	}
	qkeys := sortedFunc(queues, func(x, y gen.IntdInt_Int_QueueReports_QueueReport_Key) int {
		return cmp.Or(cmp.Compare(x.Interface, y.Interface), cmp.Compare(x.QueueId, y.QueueId))
	})
	for _, k := range qkeys {
		p := gen.QueueReportPath(k.Interface, k.QueueId)
		a := queueReport(k, queues[k].GetConfig())
		in.add(&object{key: key{sai.ObjectTypeQueueReport, k.Interface + "/" + strconv.Itoa(int(k.QueueId))}, path: p, attrs: a})
	}
	return nil
}

func queueReport(k gen.IntdInt_Int_QueueReports_QueueReport_Key, c *gen.IntdInt_Int_QueueReports_QueueReport_Config) sai.QueueReportAttrs {
	if c == nil {
		c = &gen.IntdInt_Int_QueueReports_QueueReport_Config{}
	}
	a := sai.QueueReportAttrs{
		Port:             k.Interface,
		Queue:            k.QueueId,
		DepthThreshold:   c.GetDepthThreshold(),
		LatencyThreshold: time.Duration(c.GetLatencyThreshold()) * time.Nanosecond,
		BreachQuota:      c.GetBreachQuota(),
		TailDrop:         c.GetTailDrop(),
		RateLimit:        c.GetRateLimit(),
	}
	// sai validates the thresholds; YANG's default is half the trigger.
	a.ResetThreshold = a.LatencyThreshold / 2
	if c.LatencyResetThreshold != nil {
		a.ResetThreshold = time.Duration(*c.LatencyResetThreshold) * time.Nanosecond
	}
	return a
}

func translateEvents(in *intent, cfg *gen.Device) error {
	var events map[gen.E_IntdInt_DtelEventType]*gen.IntdInt_Int_Events_Event
	if e := cfg.GetInt().Events; e != nil {
		events = e.Event
	}
	for _, t := range sortedKeys(events) {
		c := events[t].GetConfig()
		if c == nil {
			c = &gen.IntdInt_Int_Events_Event_Config{}
		}
		p := eventPath(t)
		et, ok := eventTypes[t]
		if !ok {
			return invalidf(p+"/config/type", "unknown event type %v", t)
		}
		obj := &object{key: key{sai.ObjectTypeEvent, enumName(t)}, path: p, attrs: sai.EventAttrs{Type: et, DSCP: c.GetDscp()}}
		if c.ReportSession != nil {
			if !in.has(sai.ObjectTypeReportSession, c.GetReportSession()) {
				return invalidf(p+"/config/report-session", "report-session %q does not exist", c.GetReportSession())
			}
			obj.refs = []key{{sai.ObjectTypeReportSession, c.GetReportSession()}}
		}
		in.add(obj)
	}
	return nil
}

// checkObjects runs what sai and the backend say about each object, mapped
// back to the configuration path, and the backend's capacities.
func (o *Orchestrator) checkObjects(in *intent) error {
	caps := o.caps
	for _, k := range sortedFunc(in.objects, compareKeys) {
		obj := in.objects[k]
		a := resolve(obj.attrs, placeholderOIDs(obj.refs))
		if err := a.Validate(); err != nil {
			return o.attrError(obj, err)
		}
		if err := caps.Check(a); err != nil {
			return o.attrError(obj, err)
		}
	}
	count := func(t sai.ObjectType) (n int) {
		for k := range in.objects {
			if k.t == t {
				n++
			}
		}
		return n
	}
	if n := count(sai.ObjectTypeWatchlistEntry); caps.MaxWatchlistEntries > 0 && n > caps.MaxWatchlistEntries {
		return invalidf("/int/watchlist/entries", "%d entries exceed the dataplane's limit of %d", n, caps.MaxWatchlistEntries)
	}
	if n := count(sai.ObjectTypeQueueReport); caps.MaxQueueReports > 0 && n > caps.MaxQueueReports {
		return invalidf("/int/queue-reports", "%d queue reports exceed the dataplane's limit of %d", n, caps.MaxQueueReports)
	}
	return nil
}

func collectorPath(session, addr string, port uint16) string {
	return fmt.Sprintf("%s/collectors/collector[address=%s][port=%d]", session, addr, port)
}

func prefix(s *string, path string) (netip.Prefix, error) {
	if s == nil {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(*s)
	if err != nil {
		return p, invalidf(path, "%v", err)
	}
	if p.Masked() != p {
		return p, invalidf(path, "prefix %v has host bits set (want %v)", p, p.Masked())
	}
	return p, nil
}

// portRange maps a min/max pair; an absent bound is open. The range
// matching every port is canonically the zero PortRange, so that spelling
// 0..65535 out does not count as a change of a create-only match.
func portRange(lo, hi *uint16, path string) (sai.PortRange, error) {
	if lo == nil && hi == nil {
		return sai.PortRange{}, nil
	}
	r := sai.PortRange{Lo: 0, Hi: math.MaxUint16}
	if lo != nil {
		r.Lo = *lo
	}
	if hi != nil {
		r.Hi = *hi
	}
	if r.Lo > r.Hi {
		return r, invalidf(path+"-min", "port range %d-%d: min is greater than max", r.Lo, r.Hi)
	}
	if r.IsAny() {
		return sai.PortRange{}, nil
	}
	return r, nil
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedFunc[K comparable, V any](m map[K]V, f func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, f)
	return out
}

// tunnelAddr is the node's tunnel address of a family, nil when unset.
func tunnelAddr(nc *gen.IntdInt_Int_Node_Config, v6 bool) *string {
	if nc == nil {
		return nil
	}
	if v6 {
		return nc.TunnelAddressIpv6
	}
	return nc.TunnelAddress
}

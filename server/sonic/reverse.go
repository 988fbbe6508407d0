package sonic

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/intd-project/intd/gen"
)

// ToConfigDB renders an intd configuration as the CONFIG_DB tables that
// translate back to it, for migration and review. What CONFIG_DB cannot
// say (INT-MX, report formats, intd's own marking and filter settings,
// ...) is left out, each omission described in the returned notes.
func ToConfigDB(dev *gen.Device) (Config, []string) {
	cfg := Config{}
	root := dev.GetInt()
	if root == nil {
		return cfg, nil
	}
	var n notes
	nodeToConfigDB(root.GetNode().GetConfig(), cfg, &n)
	markingToConfigDB(root.GetMarking().GetConfig(), cfg, &n)
	if root.GetFlowReportFilter().GetConfig() != nil {
		n.add("/int/flow-report-filter/config", "no CONFIG_DB table (intd's defaults apply)")
	}
	sinksToConfigDB(root.GetInterfaces(), cfg)
	intSessionsToConfigDB(root.GetIntSessions(), cfg, &n)
	reportSessionsToConfigDB(root.GetReportSessions(), cfg, &n)
	queueReportsToConfigDB(root.GetQueueReports(), cfg, &n)
	eventsToConfigDB(root.GetEvents(), cfg)
	n = append(n, watchlistToConfigDB(root, cfg)...)
	slices.Sort(n)
	return cfg, n
}

// notes collects what ToConfigDB leaves out, each as "path: why".
type notes []string

func (n *notes) add(path, format string, args ...any) {
	*n = append(*n, path+": "+fmt.Sprintf(format, args...))
}

// tf is a boolean as CONFIG_DB spells it.
func tf(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

func setDTel(cfg Config, attr, v string) { cfg.set(Key{TableDTel, attr}, Fields{attr: v}) }

func nodeToConfigDB(nc *gen.IntdInt_Int_Node_Config, cfg Config, n *notes) {
	if nc == nil {
		return
	}
	if nc.Enabled != nil && !*nc.Enabled {
		n.add("/int/node/config/enabled", "CONFIG_DB has no switch for DTel as a whole; set the features FALSE instead")
	}
	if nc.MalformedIntAction != gen.IntdInt_MalformedIntAction_UNSET {
		n.add("/int/node/config/malformed-int-action", "no CONFIG_DB field")
	}
	if nc.GetHwId() != 0 {
		n.add("/int/node/config/hw-id", "no CONFIG_DB field")
	}
	if nc.NodeId != nil {
		setDTel(cfg, "SWITCH_ID", strconv.FormatUint(uint64(*nc.NodeId), 10))
	}
	for attr, b := range dtelBools {
		if v := b.get(nc); v != nil {
			setDTel(cfg, attr, tf(*v))
		}
	}
	if nc.FlowStateClearCycle != nil {
		setDTel(cfg, "FLOW_STATE_CLEAR_CYCLE", strconv.Itoa(int(*nc.FlowStateClearCycle)))
	}
	if nc.LatencySensitivity != nil {
		setDTel(cfg, "LATENCY_SENSITIVITY", strconv.Itoa(int(*nc.LatencySensitivity)))
	}
}

func markingToConfigDB(mc *gen.IntdInt_Int_Marking_Config, cfg Config, n *notes) {
	if mc == nil {
		return
	}
	switch {
	case mc.L4Marking != gen.IntdInt_L4Marking_UNSET && mc.L4Marking != gen.IntdInt_L4Marking_DSCP:
		n.add("/int/marking/config/l4-marking", "%s: CONFIG_DB marks INT by DSCP only", mc.L4Marking)
	case mc.GetDscpValue() != 0 && mc.GetDscpMask() != 0:
		cfg.set(Key{TableDTel, "INT_L4_DSCP"}, Fields{
			"INT_L4_DSCP_VALUE": strconv.Itoa(int(mc.GetDscpValue())),
			"INT_L4_DSCP_MASK":  strconv.Itoa(int(mc.GetDscpMask())),
		})
	case mc.DscpValue != nil || mc.DscpMask != nil:
		n.add("/int/marking/config/dscp-value", "INT_L4_DSCP needs a non-zero value and mask")
	}
	for leaf, set := range map[string]bool{
		"udp-port": mc.UdpPort != nil, "udp-npt": mc.UdpNpt != gen.IntdInt_UdpNpt_UNSET, "probe-marker": mc.ProbeMarker != nil,
		"vxlan-gpe-next-protocol": mc.VxlanGpeNextProtocol != nil, "geneve-option-class": mc.GeneveOptionClass != nil,
		"gre-protocol-type": mc.GreProtocolType != nil, "remark-dscp": mc.RemarkDscp != nil,
	} {
		if set {
			n.add("/int/marking/config/"+leaf, "no CONFIG_DB field")
		}
	}
}

func sinksToConfigDB(ifs *gen.IntdInt_Int_Interfaces, cfg Config) {
	if ifs == nil {
		return
	}
	sinks := Fields{}
	for name, i := range ifs.Interface {
		if i.GetConfig().GetIntSink() {
			sinks[name] = name
		}
	}
	if len(sinks) > 0 {
		cfg.set(Key{TableDTel, "SINK_PORT_LIST"}, sinks)
	}
}

func intSessionsToConfigDB(ss *gen.IntdInt_Int_IntSessions, cfg Config, n *notes) {
	if ss == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(ss.IntSession)) {
		c := ss.IntSession[name].GetConfig()
		p := gen.IntSessionPath(name)
		f := Fields{}
		if c.GetMode() == gen.IntdInt_IntMode_INT_MX {
			n.add(p, "INT-MX: CONFIG_DB sessions are INT-MD")
		}
		if c.RemainingHopCount != nil {
			f["MAX_HOP_COUNT"] = strconv.Itoa(int(*c.RemainingHopCount))
		}
		for _, inst := range c.GetInstructions() {
			i := instOrder(inst)
			if i == len(collectFields) {
				n.add(p+"/config/instructions", "%s: no COLLECT_* field", inst)
				continue
			}
			f[collectFields[i].field] = "TRUE"
		}
		if c.GetDomainSpecificId() != 0 || c.GetDsInstruction() != 0 || c.GetDsFlags() != 0 || c.GetDiscard() {
			n.add(p, "domain-specific metadata and the discard flag are not in CONFIG_DB")
		}
		if c.ClampTcpMss != nil {
			n.add(p+"/config/clamp-tcp-mss", "no CONFIG_DB field")
		}
		cfg.set(Key{TableIntSession, name}, f)
	}
}

func reportSessionsToConfigDB(rss *gen.IntdInt_Int_ReportSessions, cfg Config, n *notes) {
	if rss == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(rss.ReportSession)) {
		rs := rss.ReportSession[name]
		c := rs.GetConfig()
		p := gen.ReportSessionPath(name)
		f := Fields{}
		if c.SourceAddress != nil {
			f["SRC_IP"] = *c.SourceAddress
		}
		if c.Vrf != nil {
			f["VRF"] = *c.Vrf
		}
		if c.TruncateSize != nil {
			f["TRUNCATE_SIZE"] = strconv.Itoa(int(*c.TruncateSize))
		}
		if c.GetDscp() != 0 || c.GetReportFormat() == gen.IntdInt_ReportFormat_TELEMETRY_REPORT_V0_5 ||
			c.GetMaxReportsPerPacket() > 1 || c.GetRateLimit() != 0 ||
			c.GetCollectorSelection() == gen.IntdInt_CollectorSelection_FLOW_HASH ||
			c.GetSourcePortMode() != gen.IntdInt_SourcePortMode_KERNEL {
			n.add(p+"/config", "DSCP, report format, coalescing, rate limit, collector-selection and source-port-mode are not in CONFIG_DB")
		}
		collectorsToConfigDB(rs.GetCollectors(), p, f, n)
		cfg.set(Key{TableReportSession, name}, f)
	}
}

// collectorsToConfigDB renders a report session's collectors as
// DST_IP_LIST and the one UDP_DEST_PORT CONFIG_DB has for them all.
func collectorsToConfigDB(cs *gen.IntdInt_Int_ReportSessions_ReportSession_Collectors, p string, f Fields, n *notes) {
	var addrs []netip.Addr
	ports := map[uint16]bool{}
	if cs != nil {
		for k := range cs.Collector {
			if a, err := netip.ParseAddr(k.Address); err == nil {
				addrs = append(addrs, a)
			}
			ports[k.Port] = true
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) > 0 {
		s := make([]string, len(addrs))
		for i, a := range addrs {
			s[i] = a.String()
		}
		f["DST_IP_LIST"] = strings.Join(s, ";")
	}
	if len(ports) > 0 {
		ps := slices.Sorted(maps.Keys(ports))
		f["UDP_DEST_PORT"] = strconv.Itoa(int(ps[0]))
		if len(ps) > 1 {
			n.add(p+"/collectors", "CONFIG_DB has one UDP_DEST_PORT for all collectors: %d used, %v dropped", ps[0], ps[1:])
		}
	}
}

func queueReportsToConfigDB(qs *gen.IntdInt_Int_QueueReports, cfg Config, n *notes) {
	if qs == nil {
		return
	}
	for k, q := range qs.QueueReport {
		c := q.GetConfig()
		f := Fields{}
		if c.DepthThreshold != nil {
			f["QUEUE_DEPTH_THRESHOLD"] = strconv.FormatUint(uint64(*c.DepthThreshold), 10)
		}
		if c.LatencyThreshold != nil {
			f["QUEUE_LATENCY_THRESHOLD"] = strconv.FormatUint(uint64(*c.LatencyThreshold), 10)
		}
		if c.BreachQuota != nil {
			f["THRESHOLD_BREACH_QUOTA"] = strconv.FormatUint(uint64(*c.BreachQuota), 10)
		}
		if c.TailDrop != nil {
			f["REPORT_TAIL_DROP"] = tf(*c.TailDrop)
		}
		if c.LatencyResetThreshold != nil {
			n.add(gen.QueueReportPath(k.Interface, k.QueueId)+"/config/latency-reset-threshold", "no CONFIG_DB field")
		}
		cfg.set(Key{TableQueueReport, k.Interface + "|" + strconv.Itoa(int(k.QueueId))}, f)
	}
}

func eventsToConfigDB(es *gen.IntdInt_Int_Events, cfg Config) {
	if es == nil {
		return
	}
	for t, ev := range es.Event {
		c := ev.GetConfig()
		f := Fields{}
		if c.ReportSession != nil {
			f["EVENT_REPORT_SESSION"] = *c.ReportSession
		}
		if c.Dscp != nil {
			f["EVENT_DSCP_VALUE"] = strconv.Itoa(int(*c.Dscp))
		}
		cfg.set(Key{TableEvent, "EVENT_TYPE_" + t.String()}, f)
	}
}

// watchlistToConfigDB renders the watchlist as ACL rules: entries that
// came from a rule (their description names it) go back to it, the two
// halves of a rule without IP_PROTOCOL merged; other entries become rules
// of the DTEL_FLOW_WATCHLIST table named after their sequence-id.
func watchlistToConfigDB(root *gen.IntdInt_Int, cfg Config) []string {
	es := root.GetWatchlist().GetEntries()
	if es == nil {
		return nil
	}
	var notes []string
	type ruleOut struct {
		key    Key
		fields Fields
		seq    uint32
	}
	var rules []*ruleOut
	byName := map[Key]*ruleOut{}
	used := map[uint32]Key{} // priorities taken
	for _, seq := range slices.Sorted(maps.Keys(es.Entry)) {
		en := es.Entry[seq]
		p := gen.EntryPath(seq)
		if seq > 2*MaxPriority+1 {
			notes = append(notes, p+": sequence-id above "+strconv.Itoa(2*MaxPriority+1)+" has no ACL priority")
			continue
		}
		prio := MaxPriority - seq/2
		f, ns := entryFields(en, p)
		notes = append(notes, ns...)
		f["PRIORITY"] = strconv.Itoa(int(prio))

		var key Key
		if d := en.GetConfig().GetDescription(); strings.HasPrefix(d, TableACLRule+"|") {
			t, r, ok := strings.Cut(strings.TrimPrefix(d, TableACLRule+"|"), "|")
			if ok && t != "" && r != "" {
				key = Key{TableACLRule, t + "|" + r}
			}
		}
		if key == (Key{}) {
			key = Key{TableACLRule, WatchlistType + "|RULE_" + strconv.FormatUint(uint64(seq), 10)}
		}
		// The UDP half of a rule matching ports without IP_PROTOCOL.
		if prev := byName[key]; prev != nil {
			if seq == prev.seq+1 && prev.seq%2 == 0 && prev.fields["IP_PROTOCOL"] == "6" && f["IP_PROTOCOL"] == "17" {
				a, b := maps.Clone(prev.fields), maps.Clone(f)
				delete(a, "IP_PROTOCOL")
				delete(b, "IP_PROTOCOL")
				if maps.Equal(a, b) {
					delete(prev.fields, "IP_PROTOCOL")
					continue
				}
			}
			notes = append(notes, fmt.Sprintf("%s: %s is also entry %d; left out", p, key, prev.seq))
			continue
		}
		if other, ok := used[prio]; ok {
			notes = append(notes, fmt.Sprintf("%s: PRIORITY %d is also %s's; left out", p, prio, other))
			continue
		}
		used[prio] = key
		r := &ruleOut{key: key, fields: f, seq: seq}
		byName[key] = r
		rules = append(rules, r)
	}
	for _, r := range rules {
		cfg.set(r.key, r.fields)
		t, _, _ := strings.Cut(r.key.Name, "|")
		if t != WatchlistType {
			cfg.set(Key{TableACLTable, t}, Fields{"type": WatchlistType})
		}
	}
	return notes
}

// entryFields renders one watchlist entry's match and actions as ACL rule
// fields.
func entryFields(en *gen.IntdInt_Int_Watchlist_Entries_Entry, p string) (Fields, []string) {
	f := Fields{}
	var n notes
	switch matchFields(en.GetMatch().GetConfig(), p, f, &n) {
	case 4:
		f["ETHER_TYPE"] = "0x0800"
	case 6:
		f["ETHER_TYPE"] = "0x86DD"
	}
	vxlanFields(en.GetVxlanMatch().GetConfig(), p, f, &n)
	if len(f) == 0 {
		f["IP_TYPE"] = "ANY"
	}
	actionFields(en.GetActions().GetConfig(), p, f, &n)
	if !hasAction(f) {
		f["FLOW_OP"] = "NOP"
	}
	return f, n
}

// matchFields renders an entry's match as ACL rule fields, and returns
// the IP version of its prefixes (0 for none).
func matchFields(m *gen.IntdInt_Int_Watchlist_Entries_Entry_Match_Config, p string, f Fields, n *notes) int {
	if m == nil {
		return 0
	}
	family := 0
	for _, x := range []struct {
		s      *string
		v4, v6 string
	}{{m.SourcePrefix, "SRC_IP", "SRC_IPV6"}, {m.DestinationPrefix, "DST_IP", "DST_IPV6"}} {
		if fam := prefixField(x.s, x.v4, x.v6, f); fam != 0 {
			family = fam
		}
	}
	if m.Protocol != nil {
		f["IP_PROTOCOL"] = strconv.Itoa(int(*m.Protocol))
	}
	portFields(m.SourcePortMin, m.SourcePortMax, "L4_SRC_PORT", "L4_SRC_PORT_RANGE", f)
	portFields(m.DestinationPortMin, m.DestinationPortMax, "L4_DST_PORT", "L4_DST_PORT_RANGE", f)
	if m.Dscp != nil {
		f["DSCP"] = strconv.Itoa(int(*m.Dscp))
		if m.DscpMask != nil && *m.DscpMask != 63 {
			f["DSCP"] = fmt.Sprintf("%d/0x%02x", *m.Dscp, *m.DscpMask)
		}
	}
	for _, x := range []struct {
		v           *uint8
		name, name6 string
	}{{m.IcmpType, "ICMP_TYPE", "ICMPV6_TYPE"}, {m.IcmpCode, "ICMP_CODE", "ICMPV6_CODE"}} {
		if x.v == nil {
			continue
		}
		name := x.name
		if m.GetProtocol() == 58 {
			name = x.name6
		}
		f[name] = strconv.Itoa(int(*x.v))
	}
	if m.GetGtpuInner() {
		*n = append(*n, p+"/match/config/gtpu-inner: matching inside GTP-U is not in CONFIG_DB; the rule matches outer headers")
	}
	if m.TcpFlags != nil || m.TcpFlagsMask != nil {
		v, mask := m.GetTcpFlags(), m.GetTcpFlags()
		if m.TcpFlagsMask != nil {
			mask = *m.TcpFlagsMask
		}
		if mask > 0x3f {
			*n = append(*n, p+"/match/config/tcp-flags-mask: CONFIG_DB matches the six flags URG..FIN only")
			mask &= 0x3f
			v &= 0x3f
		}
		f["TCP_FLAGS"] = fmt.Sprintf("0x%02x/0x%02x", v, mask)
	}
	if m.IngressInterface != nil {
		f["IN_PORTS"] = *m.IngressInterface
	}
	return family
}

// prefixField sets field v4 or v6 to prefix s, unless s is the whole
// address space, and returns its IP version (0 when s is unset or bad).
func prefixField(s *string, v4, v6 string, f Fields) int {
	if s == nil {
		return 0
	}
	pf, err := netip.ParsePrefix(*s)
	if err != nil {
		return 0
	}
	field, fam := v4, 4
	if !pf.Addr().Is4() {
		field, fam = v6, 6
	}
	if pf.Bits() > 0 {
		f[field] = pf.String()
	}
	return fam
}

// portFields sets field single to a single port, field rng to a range.
func portFields(lo, hi *uint16, single, rng string, f Fields) {
	if lo == nil && hi == nil {
		return
	}
	a, b := uint16(0), uint16(65535)
	if lo != nil {
		a = *lo
	}
	if hi != nil {
		b = *hi
	}
	if a == b {
		f[single] = strconv.Itoa(int(a))
	} else {
		f[rng] = fmt.Sprintf("%d-%d", a, b)
	}
}

// vxlanFields renders an entry's VXLAN match as the TUNNEL_VNI and
// INNER_* fields.
func vxlanFields(v *gen.IntdInt_Int_Watchlist_Entries_Entry_VxlanMatch_Config, p string, f Fields, n *notes) {
	if v == nil {
		return
	}
	given := false
	if v.Vni != nil {
		f["TUNNEL_VNI"] = strconv.FormatUint(uint64(*v.Vni), 10)
		given = true
	}
	for _, x := range []struct {
		s      *string
		v4, v6 string
	}{{v.InnerSourcePrefix, "INNER_SRC_IP", "INNER_SRC_IPV6"}, {v.InnerDestinationPrefix, "INNER_DST_IP", "INNER_DST_IPV6"}} {
		if x.s == nil {
			continue
		}
		if pf, err := netip.ParsePrefix(*x.s); err == nil {
			given = true
			if pf.Addr().Is4() {
				f[x.v4] = pf.String()
			} else {
				f[x.v6] = pf.String()
			}
		}
	}
	if v.InnerProtocol != nil {
		f["INNER_IP_PROTOCOL"] = strconv.Itoa(int(*v.InnerProtocol))
		given = true
	}
	if v.InnerEtherType != nil {
		f["INNER_ETHER_TYPE"] = fmt.Sprintf("0x%04X", *v.InnerEtherType)
		given = true
	}
	if v.TunnelType != gen.IntdInt_TunnelType_UNSET && v.TunnelType != gen.IntdInt_TunnelType_ANY {
		*n = append(*n, p+"/vxlan-match/config/tunnel-type: the tunnel type is not in CONFIG_DB; the rule matches any tunnel")
	}
	if v.TunnelId != nil && *v.TunnelId != 0 {
		if *v.TunnelId <= 1<<24-1 && v.Vni == nil {
			f["TUNNEL_VNI"] = strconv.FormatUint(uint64(*v.TunnelId), 10)
			given = true
		} else if v.Vni == nil {
			*n = append(*n, p+"/vxlan-match/config/tunnel-id: CONFIG_DB's TUNNEL_VNI holds 24 bits; left out")
		}
	}
	for _, x := range []struct {
		lo, hi *uint16
		field  string
	}{{v.InnerSourcePortMin, v.InnerSourcePortMax, "INNER_L4_SRC_PORT"}, {v.InnerDestinationPortMin, v.InnerDestinationPortMax, "INNER_L4_DST_PORT"}} {
		if (x.lo == nil || *x.lo == 0) && (x.hi == nil || *x.hi == 65535) {
			continue // any port
		}
		given = true
		if x.lo != nil && x.hi != nil && *x.lo == *x.hi {
			f[x.field] = strconv.Itoa(int(*x.lo))
		} else {
			*n = append(*n, p+"/vxlan-match/config: CONFIG_DB matches one inner port, not a range; "+x.field+" left out")
		}
	}
	if !given {
		*n = append(*n, p+"/vxlan-match/config: matching any VXLAN traffic is not in CONFIG_DB")
	}
}

// actionFields renders an entry's actions as the DTel action fields.
func actionFields(a *gen.IntdInt_Int_Watchlist_Entries_Entry_Actions_Config, p string, f Fields, n *notes) {
	if a == nil {
		return
	}
	switch a.FlowOp {
	case gen.IntdInt_FlowOp_NOP, gen.IntdInt_FlowOp_INT, gen.IntdInt_FlowOp_POSTCARD:
		f["FLOW_OP"] = a.FlowOp.String()
	}
	if a.IntSession != nil {
		f["INT_SESSION"] = *a.IntSession
	}
	for field, b := range map[string]*bool{"DROP_REPORT_ENABLE": a.DropReport, "TAIL_DROP_REPORT_ENABLE": a.TailDropReport, "REPORT_ALL_PACKETS": a.ReportAllPackets} {
		if b != nil {
			f[field] = strings.ToUpper(strconv.FormatBool(*b))
		}
	}
	if a.SamplePercent != nil {
		f["FLOW_SAMPLE_PERCENT"] = strconv.Itoa(int(*a.SamplePercent))
	}
	if a.GetPacketInterval() != 0 {
		*n = append(*n, p+"/actions/config/packet-interval: no CONFIG_DB field")
	}
}

func hasAction(f Fields) bool {
	for _, a := range []string{"FLOW_OP", "INT_SESSION", "DROP_REPORT_ENABLE", "TAIL_DROP_REPORT_ENABLE", "REPORT_ALL_PACKETS", "FLOW_SAMPLE_PERCENT"} {
		if _, ok := f[a]; ok {
			return true
		}
	}
	return false
}

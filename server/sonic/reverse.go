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
	var notes []string
	note := func(path, format string, args ...any) {
		notes = append(notes, path+": "+fmt.Sprintf(format, args...))
	}
	root := dev.GetInt()
	if root == nil {
		return cfg, nil
	}
	dtel := func(attr, v string) { cfg.set(Key{TableDTel, attr}, Fields{attr: v}) }
	tf := func(b bool) string {
		if b {
			return "TRUE"
		}
		return "FALSE"
	}

	if nc := root.GetNode().GetConfig(); nc != nil {
		if nc.Enabled != nil && !*nc.Enabled {
			note("/int/node/config/enabled", "CONFIG_DB has no switch for DTel as a whole; set the features FALSE instead")
		}
		if nc.MalformedIntAction != gen.IntdInt_MalformedIntAction_UNSET {
			note("/int/node/config/malformed-int-action", "no CONFIG_DB field")
		}
		if nc.NodeId != nil {
			dtel("SWITCH_ID", strconv.FormatUint(uint64(*nc.NodeId), 10))
		}
		for attr, b := range dtelBools {
			var v *bool
			switch b.leaf {
			case "int-endpoint":
				v = nc.IntEndpoint
			case "int-transit":
				v = nc.IntTransit
			case "postcard":
				v = nc.Postcard
			case "drop-report":
				v = nc.DropReport
			case "queue-report":
				v = nc.QueueReport
			}
			if v != nil {
				dtel(attr, tf(*v))
			}
		}
		if nc.FlowStateClearCycle != nil {
			dtel("FLOW_STATE_CLEAR_CYCLE", strconv.Itoa(int(*nc.FlowStateClearCycle)))
		}
		if nc.LatencySensitivity != nil {
			dtel("LATENCY_SENSITIVITY", strconv.Itoa(int(*nc.LatencySensitivity)))
		}
	}
	if mc := root.GetMarking().GetConfig(); mc != nil {
		switch {
		case mc.L4Marking != gen.IntdInt_L4Marking_UNSET && mc.L4Marking != gen.IntdInt_L4Marking_DSCP:
			note("/int/marking/config/l4-marking", "%s: CONFIG_DB marks INT by DSCP only", mc.L4Marking)
		case mc.GetDscpValue() != 0 && mc.GetDscpMask() != 0:
			cfg.set(Key{TableDTel, "INT_L4_DSCP"}, Fields{
				"INT_L4_DSCP_VALUE": strconv.Itoa(int(mc.GetDscpValue())),
				"INT_L4_DSCP_MASK":  strconv.Itoa(int(mc.GetDscpMask())),
			})
		case mc.DscpValue != nil || mc.DscpMask != nil:
			note("/int/marking/config/dscp-value", "INT_L4_DSCP needs a non-zero value and mask")
		}
		for leaf, set := range map[string]bool{
			"udp-port": mc.UdpPort != nil, "udp-npt": mc.UdpNpt != gen.IntdInt_UdpNpt_UNSET, "probe-marker": mc.ProbeMarker != nil,
			"vxlan-gpe-next-protocol": mc.VxlanGpeNextProtocol != nil, "geneve-option-class": mc.GeneveOptionClass != nil,
			"gre-protocol-type": mc.GreProtocolType != nil, "remark-dscp": mc.RemarkDscp != nil,
		} {
			if set {
				note("/int/marking/config/"+leaf, "no CONFIG_DB field")
			}
		}
	}
	if root.GetFlowReportFilter().GetConfig() != nil {
		note("/int/flow-report-filter/config", "no CONFIG_DB table (intd's defaults apply)")
	}
	if ifs := root.GetInterfaces(); ifs != nil {
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

	if ss := root.GetIntSessions(); ss != nil {
		for _, name := range slices.Sorted(maps.Keys(ss.IntSession)) {
			c := ss.IntSession[name].GetConfig()
			p := intSessionPath(name)
			f := Fields{}
			if c.GetMode() == gen.IntdInt_IntMode_INT_MX {
				note(p, "INT-MX: CONFIG_DB sessions are INT-MD")
			}
			if c.RemainingHopCount != nil {
				f["MAX_HOP_COUNT"] = strconv.Itoa(int(*c.RemainingHopCount))
			}
			for _, inst := range c.GetInstructions() {
				i := instOrder(inst)
				if i == len(collectFields) {
					note(p+"/config/instructions", "%s: no COLLECT_* field", inst)
					continue
				}
				f[collectFields[i].field] = "TRUE"
			}
			if c.GetDomainSpecificId() != 0 || c.GetDsInstruction() != 0 || c.GetDsFlags() != 0 || c.GetDiscard() {
				note(p, "domain-specific metadata and the discard flag are not in CONFIG_DB")
			}
			if c.ClampTcpMss != nil {
				note(p+"/config/clamp-tcp-mss", "no CONFIG_DB field")
			}
			cfg.set(Key{TableIntSession, name}, f)
		}
	}

	if rss := root.GetReportSessions(); rss != nil {
		for _, name := range slices.Sorted(maps.Keys(rss.ReportSession)) {
			rs := rss.ReportSession[name]
			c := rs.GetConfig()
			p := reportSessionPath(name)
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
				c.GetMaxReportsPerPacket() > 1 || c.GetRateLimit() != 0 {
				note(p+"/config", "DSCP, report format, coalescing and rate limit are not in CONFIG_DB")
			}
			var addrs []netip.Addr
			ports := map[uint16]bool{}
			if rs.GetCollectors() != nil {
				for k := range rs.GetCollectors().Collector {
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
					note(p+"/collectors", "CONFIG_DB has one UDP_DEST_PORT for all collectors: %d used, %v dropped", ps[0], ps[1:])
				}
			}
			cfg.set(Key{TableReportSession, name}, f)
		}
	}

	if qs := root.GetQueueReports(); qs != nil {
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
				note(queueReportPath(k.Interface, k.QueueId)+"/config/latency-reset-threshold", "no CONFIG_DB field")
			}
			cfg.set(Key{TableQueueReport, k.Interface + "|" + strconv.Itoa(int(k.QueueId))}, f)
		}
	}

	if es := root.GetEvents(); es != nil {
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

	notes = append(notes, watchlistToConfigDB(root, cfg)...)
	slices.Sort(notes)
	return cfg, notes
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
		p := entryPath(seq)
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
	var notes []string
	m := en.GetMatch().GetConfig()
	family := 0
	prefix := func(s *string, v4, v6 string) {
		if s == nil {
			return
		}
		pf, err := netip.ParsePrefix(*s)
		if err != nil {
			return
		}
		if pf.Addr().Is4() {
			family = 4
			if pf.Bits() > 0 {
				f[v4] = pf.String()
			}
		} else {
			family = 6
			if pf.Bits() > 0 {
				f[v6] = pf.String()
			}
		}
	}
	ports := func(lo, hi *uint16, single, rng string) {
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
	if m != nil {
		prefix(m.SourcePrefix, "SRC_IP", "SRC_IPV6")
		prefix(m.DestinationPrefix, "DST_IP", "DST_IPV6")
		if m.Protocol != nil {
			f["IP_PROTOCOL"] = strconv.Itoa(int(*m.Protocol))
		}
		ports(m.SourcePortMin, m.SourcePortMax, "L4_SRC_PORT", "L4_SRC_PORT_RANGE")
		ports(m.DestinationPortMin, m.DestinationPortMax, "L4_DST_PORT", "L4_DST_PORT_RANGE")
		if m.Dscp != nil {
			f["DSCP"] = strconv.Itoa(int(*m.Dscp))
		}
		if m.TcpFlags != nil || m.TcpFlagsMask != nil {
			v, mask := m.GetTcpFlags(), m.GetTcpFlags()
			if m.TcpFlagsMask != nil {
				mask = *m.TcpFlagsMask
			}
			if mask > 0x3f {
				notes = append(notes, p+"/match/config/tcp-flags-mask: CONFIG_DB matches the six flags URG..FIN only")
				mask &= 0x3f
				v &= 0x3f
			}
			f["TCP_FLAGS"] = fmt.Sprintf("0x%02x/0x%02x", v, mask)
		}
		if m.IngressInterface != nil {
			f["IN_PORTS"] = *m.IngressInterface
		}
	}
	switch family {
	case 4:
		f["ETHER_TYPE"] = "0x0800"
	case 6:
		f["ETHER_TYPE"] = "0x86DD"
	}
	if v := en.GetVxlanMatch().GetConfig(); v != nil {
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
				notes = append(notes, p+"/vxlan-match/config: CONFIG_DB matches one inner port, not a range; "+x.field+" left out")
			}
		}
		if !given {
			notes = append(notes, p+"/vxlan-match/config: matching any VXLAN traffic is not in CONFIG_DB")
		}
	}
	matched := len(f) > 0
	if !matched {
		f["IP_TYPE"] = "ANY"
	}
	a := en.GetActions().GetConfig()
	if a != nil {
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
			notes = append(notes, p+"/actions/config/packet-interval: no CONFIG_DB field")
		}
	}
	if !hasAction(f) {
		f["FLOW_OP"] = "NOP"
	}
	return f, notes
}

func hasAction(f Fields) bool {
	for _, a := range []string{"FLOW_OP", "INT_SESSION", "DROP_REPORT_ENABLE", "TAIL_DROP_REPORT_ENABLE", "REPORT_ALL_PACKETS", "FLOW_SAMPLE_PERCENT"} {
		if _, ok := f[a]; ok {
			return true
		}
	}
	return false
}

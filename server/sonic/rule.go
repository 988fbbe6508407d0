package sonic

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

// Fields of ACL rules orchagent knows that intd's watchlist cannot match
// (yet), and actions of other ACL table types.
var unsupportedRuleFields = map[string]string{
	"INNER_ETHER_TYPE": "intd does not match the inner EtherType",
	"ICMP_TYPE":        "intd does not match ICMP types",
	"ICMP_CODE":        "intd does not match ICMP codes",
	"ICMPV6_TYPE":      "intd does not match ICMPv6 types",
	"ICMPV6_CODE":      "intd does not match ICMPv6 codes",
	"VLAN_ID":          "intd does not match VLAN IDs",
	"PCP":              "intd does not match VLAN priorities",
	"DEI":              "intd does not match VLAN DEI",
	"TC":               "intd does not match traffic classes",
	"OUT_PORT":         "intd's watchlist matches at ingress",
	"OUT_PORTS":        "intd's watchlist matches at ingress",
	"SRC_IP_MASK":      "give SRC_IP as a prefix",
	"DST_IP_MASK":      "give DST_IP as a prefix",
	"SRC_IPV6_MASK":    "give SRC_IPV6 as a prefix",
	"DST_IPV6_MASK":    "give DST_IPV6 as a prefix",
	"SRC_MAC":          "intd does not match MAC addresses",
	"DST_MAC":          "intd does not match MAC addresses",
	"INNER_SRC_MAC":    "intd does not match MAC addresses",
	"INNER_DST_MAC":    "intd does not match MAC addresses",
	"BTH_OPCODE":       "intd does not match RoCE headers",
	"AETH_SYNDROME":    "intd does not match RoCE headers",
	"TUNNEL_TERM":      "intd does not match tunnel termination",
	"META_DATA":        "intd does not match ACL metadata",

	"PACKET_ACTION":                "not a DTel watchlist action",
	"REDIRECT_ACTION":              "not a DTel watchlist action",
	"MIRROR_ACTION":                "not a DTel watchlist action",
	"MIRROR_INGRESS_ACTION":        "not a DTel watchlist action",
	"MIRROR_EGRESS_ACTION":         "not a DTel watchlist action",
	"DO_NOT_NAT_ACTION":            "not a DTel watchlist action",
	"DISABLE_TRIM_ACTION":          "not a DTel watchlist action",
	"COUNTER":                      "not a DTel watchlist action",
	"META_DATA_ACTION":             "not a DTel watchlist action",
	"DSCP_ACTION":                  "not a DTel watchlist action",
	"INNER_SRC_MAC_REWRITE_ACTION": "not a DTel watchlist action",
	"POLICER_ACTION":               "not a DTel watchlist action",
}

// rule is an ACL_RULE of a watchlist table, parsed.
type rule struct {
	priority uint32
	family   int // 0 any, 4 or 6
	famField string
	src, dst netip.Prefix
	proto    *uint8
	sport    *[2]uint16
	dport    *[2]uint16
	dscp     *uint8
	flags    *[2]uint8
	inPort   string
	vni      *uint32
	isrc     netip.Prefix
	idst     netip.Prefix
	iproto   *uint8
	isport   *uint16
	idport   *uint16

	flowOp        gen.E_IntdInt_FlowOp
	intSession    *string
	dropReport    *bool
	tailDrop      *bool
	reportAll     *bool
	samplePercent *uint8

	// fields maps intd leaves (relative to the entry) to the fields they
	// came from.
	fields map[string]string
}

func (tr *translation) ruleEntry(name string, raw Fields) (*entry, *refusal) {
	table, rname, ok := strings.Cut(name, "|")
	if !ok || table == "" || rname == "" {
		return nil, refuse("", "the key is not TABLE|RULE")
	}
	if _, ok := tr.watchTables[table]; !ok {
		return nil, refuse("", "%s", tr.missing(TableACLTable, table))
	}
	f := Fields{}
	for k, v := range raw {
		u := strings.ToUpper(k)
		if _, dup := f[u]; dup {
			return nil, refuse(u, "given twice, in different cases")
		}
		f[u] = v
	}
	r, rf := tr.parseRule(f)
	if rf != nil {
		return nil, rf
	}
	seq := SeqOf(r.priority)
	if other, ok := tr.seqs[seq]; ok {
		return nil, refuse("PRIORITY", "%d is also the priority of %s: intd orders rules by priority and needs them distinct", r.priority, other)
	}

	// A port match without IP_PROTOCOL matches TCP and UDP ports, as an
	// ACL does: two entries, TCP then UDP.
	protos := []*uint8{r.proto}
	if r.proto == nil && (r.sport != nil || r.dport != nil) {
		protos = []*uint8{ygot.Uint8(6), ygot.Uint8(17)}
	}
	e := newEntry()
	desc := Key{TableACLRule, name}.String()
	var ents []*gen.IntdInt_Int_Watchlist_Entries_Entry
	for i, proto := range protos {
		s := seq + uint32(i)
		e.seqs = append(e.seqs, s)
		p := entryPath(s)
		e.path(p, "")
		e.base = append(e.base, p)
		for leaf, field := range r.fields {
			e.path(p+leaf, field)
		}
		ents = append(ents, r.build(s, desc, proto))
	}
	e.add = func(d *gen.Device) {
		es := d.GetOrCreateInt().GetOrCreateWatchlist().GetOrCreateEntries()
		if es.Entry == nil {
			es.Entry = map[uint32]*gen.IntdInt_Int_Watchlist_Entries_Entry{}
		}
		for _, en := range ents {
			es.Entry[*en.SequenceId] = en
		}
	}
	return e, nil
}

func (tr *translation) parseRule(f Fields) (*rule, *refusal) {
	const mc, vc, ac = "/match/config/", "/vxlan-match/config/", "/actions/config/"
	// Errors about leaves the rule leaves out name the field that would
	// set them; those given below name the field that did.
	r := &rule{fields: map[string]string{
		mc + "source-prefix": "SRC_IP", mc + "destination-prefix": "DST_IP", mc + "protocol": "IP_PROTOCOL",
		mc + "source-port-min": "L4_SRC_PORT", mc + "source-port-max": "L4_SRC_PORT",
		mc + "destination-port-min": "L4_DST_PORT", mc + "destination-port-max": "L4_DST_PORT",
		mc + "dscp": "DSCP", mc + "tcp-flags": "TCP_FLAGS", mc + "tcp-flags-mask": "TCP_FLAGS", mc + "ingress-interface": "IN_PORTS",
		vc + "vni": "TUNNEL_VNI", vc + "inner-source-prefix": "INNER_SRC_IP", vc + "inner-destination-prefix": "INNER_DST_IP",
		vc + "inner-protocol":        "INNER_IP_PROTOCOL",
		vc + "inner-source-port-min": "INNER_L4_SRC_PORT", vc + "inner-source-port-max": "INNER_L4_SRC_PORT",
		vc + "inner-destination-port-min": "INNER_L4_DST_PORT", vc + "inner-destination-port-max": "INNER_L4_DST_PORT",
		ac + "flow-op": "FLOW_OP", ac + "int-session": "INT_SESSION", ac + "report-all-packets": "REPORT_ALL_PACKETS",
		ac + "drop-report": "DROP_REPORT_ENABLE", ac + "tail-drop-report": "TAIL_DROP_REPORT_ENABLE",
		ac + "sample-percent": "FLOW_SAMPLE_PERCENT", "/config/sequence-id": "PRIORITY",
	}}
	var prio *uint32
	matches, actions := 0, 0
	family := func(field string, fam int) *refusal {
		if r.family != 0 && r.family != fam {
			return refuse(field, "IPv%d contradicts %s (IPv%d)", fam, r.famField, r.family)
		}
		if r.family == 0 {
			r.family, r.famField = fam, field
		}
		return nil
	}
	u8 := func(field, v string, lo, hi uint64) (*uint8, *refusal) {
		n, rf := parseUint(field, v, lo, hi)
		if rf != nil {
			return nil, rf
		}
		return ygot.Uint8(uint8(n)), nil
	}
	port := func(field, v string) (*[2]uint16, *refusal) {
		if strings.HasSuffix(field, "_RANGE") {
			rg, rf := parseRange(field, v)
			return &rg, rf
		}
		n, rf := parseUint(field, v, 0, 65535)
		return &[2]uint16{uint16(n), uint16(n)}, rf
	}
	for _, field := range slices.Sorted(maps.Keys(f)) {
		v := f[field]
		var rf *refusal
		switch field {
		case "PRIORITY":
			var n uint64
			if n, rf = parseUint(field, v, 0, 999999); rf == nil && n > MaxPriority {
				rf = refuse(field, "%d is above %d, the highest priority intd orders", n, MaxPriority)
			}
			p := uint32(n)
			prio = &p
			r.fields["/config/sequence-id"] = field
		case "ETHER_TYPE":
			matches++
			var n uint64
			if n, rf = parseUint(field, v, 0, 0xffff); rf == nil {
				switch n {
				case 0x0800:
					rf = family(field, 4)
				case 0x86dd:
					rf = family(field, 6)
				default:
					rf = refuse(field, "%#04x: intd watches IPv4 (0x0800) and IPv6 (0x86DD) traffic only", n)
				}
			}
		case "IP_TYPE":
			matches++
			switch strings.ToUpper(v) {
			case "ANY", "IP":
			case "IPV4ANY", "IPV4":
				rf = family(field, 4)
			case "IPV6ANY", "IPV6":
				rf = family(field, 6)
			default:
				rf = refuse(field, "%q: intd watches IP traffic (ANY, IP, IPV4ANY, IPV6ANY)", v)
			}
		case "SRC_IP", "SRC_IPV6", "DST_IP", "DST_IPV6":
			matches++
			fam := 4
			if strings.HasSuffix(field, "V6") {
				fam = 6
			}
			var p netip.Prefix
			if p, rf = parsePrefix(field, v, fam); rf == nil {
				rf = family(field, fam)
			}
			leaf := "source-prefix"
			dst := &r.src
			if strings.HasPrefix(field, "DST") {
				leaf, dst = "destination-prefix", &r.dst
			}
			if rf == nil && dst.IsValid() {
				rf = refuse(field, "a second %s", leaf)
			}
			*dst = p
			r.fields[mc+leaf] = field
		case "IP_PROTOCOL", "NEXT_HEADER":
			matches++
			if r.proto != nil {
				rf = refuse(field, "IP_PROTOCOL and NEXT_HEADER are the same match; give one")
				break
			}
			r.proto, rf = u8(field, v, 0, 255)
			r.fields[mc+"protocol"] = field
		case "L4_SRC_PORT", "L4_SRC_PORT_RANGE":
			matches++
			if r.sport != nil {
				rf = refuse(field, "L4_SRC_PORT and L4_SRC_PORT_RANGE are the same match; give one")
				break
			}
			r.sport, rf = port(field, v)
			r.fields[mc+"source-port-min"], r.fields[mc+"source-port-max"] = field, field
		case "L4_DST_PORT", "L4_DST_PORT_RANGE":
			matches++
			if r.dport != nil {
				rf = refuse(field, "L4_DST_PORT and L4_DST_PORT_RANGE are the same match; give one")
				break
			}
			r.dport, rf = port(field, v)
			r.fields[mc+"destination-port-min"], r.fields[mc+"destination-port-max"] = field, field
		case "DSCP":
			matches++
			var val, mask uint8
			if val, mask, rf = parseMasked(field, v, 63); rf == nil && mask != 63 {
				rf = refuse(field, "intd matches a DSCP exactly (mask 0x3f), not under mask %#x", mask)
			}
			r.dscp = &val
			r.fields[mc+"dscp"] = field
		case "TCP_FLAGS":
			matches++
			var val, mask uint8
			val, mask, rf = parseMasked(field, v, 0x3f)
			r.flags = &[2]uint8{val, mask}
			r.fields[mc+"tcp-flags"], r.fields[mc+"tcp-flags-mask"] = field, field
		case "IN_PORTS":
			matches++
			ports := strings.Split(v, ",")
			if len(ports) != 1 {
				rf = refuse(field, "intd matches one ingress port per rule, not %d", len(ports))
				break
			}
			r.inPort = strings.TrimSpace(ports[0])
			rf = validPortName(field, r.inPort)
			r.fields[mc+"ingress-interface"] = field
		case "TUNNEL_VNI":
			matches++
			var n uint64
			n, rf = parseUint(field, v, 0, 1<<24-1)
			r.vni = ygot.Uint32(uint32(n))
			r.fields[vc+"vni"] = field
		case "INNER_SRC_IP", "INNER_SRC_IPV6", "INNER_DST_IP", "INNER_DST_IPV6":
			matches++
			fam := 4
			if strings.HasSuffix(field, "V6") {
				fam = 6
			}
			var p netip.Prefix
			p, rf = parsePrefix(field, v, fam)
			leaf, dst := "inner-source-prefix", &r.isrc
			if strings.HasPrefix(field, "INNER_DST") {
				leaf, dst = "inner-destination-prefix", &r.idst
			}
			if rf == nil && dst.IsValid() {
				rf = refuse(field, "a second %s", leaf)
			}
			*dst = p
			r.fields[vc+leaf] = field
		case "INNER_IP_PROTOCOL":
			matches++
			r.iproto, rf = u8(field, v, 0, 255)
			r.fields[vc+"inner-protocol"] = field
		case "INNER_L4_SRC_PORT", "INNER_L4_DST_PORT":
			matches++
			var n uint64
			n, rf = parseUint(field, v, 0, 65535)
			if field == "INNER_L4_SRC_PORT" {
				r.isport = ygot.Uint16(uint16(n))
				r.fields[vc+"inner-source-port-min"], r.fields[vc+"inner-source-port-max"] = field, field
			} else {
				r.idport = ygot.Uint16(uint16(n))
				r.fields[vc+"inner-destination-port-min"], r.fields[vc+"inner-destination-port-max"] = field, field
			}
		case "FLOW_OP":
			actions++
			switch strings.ToUpper(strings.TrimSpace(v)) {
			case "NOP":
				r.flowOp = gen.IntdInt_FlowOp_NOP
			case "INT":
				r.flowOp = gen.IntdInt_FlowOp_INT
			case "POSTCARD":
				r.flowOp = gen.IntdInt_FlowOp_POSTCARD
			case "IOAM":
				rf = refuse(field, "intd does not do IOAM")
			default:
				rf = refuse(field, "%q is not NOP, INT or POSTCARD", v)
			}
			r.fields[ac+"flow-op"] = field
		case "INT_SESSION":
			actions++
			if _, ok := tr.intSessions[v]; !ok {
				rf = refuse(field, "%s", tr.missing(TableIntSession, v))
			}
			r.intSession = ygot.String(v)
			r.fields[ac+"int-session"] = field
		case "DROP_REPORT_ENABLE", "TAIL_DROP_REPORT_ENABLE", "REPORT_ALL_PACKETS":
			actions++
			var b bool
			b, rf = parseBool(field, v)
			switch field {
			case "DROP_REPORT_ENABLE":
				r.dropReport = &b
				r.fields[ac+"drop-report"] = field
			case "TAIL_DROP_REPORT_ENABLE":
				r.tailDrop = &b
				r.fields[ac+"tail-drop-report"] = field
			default:
				r.reportAll = &b
				r.fields[ac+"report-all-packets"] = field
			}
		case "FLOW_SAMPLE_PERCENT":
			actions++
			r.samplePercent, rf = u8(field, v, 0, 100)
			r.fields[ac+"sample-percent"] = field
		default:
			if why, ok := unsupportedRuleFields[field]; ok {
				rf = refuse(field, "not supported: %s", why)
			} else {
				rf = refuse(field, "unknown field")
			}
		}
		if rf != nil {
			return nil, rf
		}
	}
	if prio == nil {
		return nil, refuse("PRIORITY", "missing")
	}
	r.priority = *prio
	switch {
	case matches == 0:
		return nil, refuse("", "a rule needs a match field")
	case actions == 0:
		return nil, refuse("", "a rule needs a DTel action (FLOW_OP, INT_SESSION, DROP_REPORT_ENABLE, ...)")
	}
	// What an ACL matches implicitly, intd needs said.
	if r.flags != nil {
		switch {
		case r.proto == nil:
			r.proto = ygot.Uint8(6)
		case *r.proto != 6:
			return nil, refuse("TCP_FLAGS", "TCP flags need IP_PROTOCOL 6, not %d", *r.proto)
		}
	}
	if r.proto != nil && (r.sport != nil || r.dport != nil) && *r.proto != 6 && *r.proto != 17 && *r.proto != 132 {
		return nil, refuse(r.fields[mc+"protocol"], "L4 ports need protocol TCP (6), UDP (17) or SCTP (132), not %d", *r.proto)
	}
	if (r.isport != nil || r.idport != nil) && (r.iproto == nil || (*r.iproto != 6 && *r.iproto != 17 && *r.iproto != 132)) {
		return nil, refuse("INNER_IP_PROTOCOL", "inner L4 ports need INNER_IP_PROTOCOL 6, 17 or 132")
	}
	if r.isrc.IsValid() && r.idst.IsValid() && r.isrc.Addr().Is4() != r.idst.Addr().Is4() {
		return nil, refuse(r.fields[vc+"inner-destination-prefix"], "inner source and destination differ in IP version")
	}
	// An IP version with no prefix to carry it: the whole address space
	// of that version.
	if r.family != 0 && !r.src.IsValid() && !r.dst.IsValid() {
		r.src = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.family == 6 {
			r.src = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		r.fields[mc+"source-prefix"] = r.famField
	}
	return r, nil
}

// build makes the watchlist entry seq of the rule, with protocol proto.
func (r *rule) build(seq uint32, desc string, proto *uint8) *gen.IntdInt_Int_Watchlist_Entries_Entry {
	en := &gen.IntdInt_Int_Watchlist_Entries_Entry{SequenceId: ygot.Uint32(seq)}
	en.GetOrCreateConfig().SequenceId = ygot.Uint32(seq)
	en.Config.Description = ygot.String(desc)
	m := &gen.IntdInt_Int_Watchlist_Entries_Entry_Match_Config{Protocol: proto, Dscp: r.dscp}
	if r.src.IsValid() {
		m.SourcePrefix = ygot.String(r.src.String())
	}
	if r.dst.IsValid() {
		m.DestinationPrefix = ygot.String(r.dst.String())
	}
	if r.sport != nil {
		m.SourcePortMin, m.SourcePortMax = ygot.Uint16(r.sport[0]), ygot.Uint16(r.sport[1])
	}
	if r.dport != nil {
		m.DestinationPortMin, m.DestinationPortMax = ygot.Uint16(r.dport[0]), ygot.Uint16(r.dport[1])
	}
	if r.flags != nil {
		m.TcpFlags, m.TcpFlagsMask = ygot.Uint8(r.flags[0]), ygot.Uint8(r.flags[1])
	}
	if r.inPort != "" {
		m.IngressInterface = ygot.String(r.inPort)
	}
	en.GetOrCreateMatch().Config = m
	if r.vni != nil || r.isrc.IsValid() || r.idst.IsValid() || r.iproto != nil || r.isport != nil || r.idport != nil {
		v := &gen.IntdInt_Int_Watchlist_Entries_Entry_VxlanMatch_Config{Vni: r.vni, InnerProtocol: r.iproto}
		if r.isrc.IsValid() {
			v.InnerSourcePrefix = ygot.String(r.isrc.String())
		}
		if r.idst.IsValid() {
			v.InnerDestinationPrefix = ygot.String(r.idst.String())
		}
		if r.isport != nil {
			v.InnerSourcePortMin, v.InnerSourcePortMax = r.isport, r.isport
		}
		if r.idport != nil {
			v.InnerDestinationPortMin, v.InnerDestinationPortMax = r.idport, r.idport
		}
		en.GetOrCreateVxlanMatch().Config = v
	}
	en.GetOrCreateActions().Config = &gen.IntdInt_Int_Watchlist_Entries_Entry_Actions_Config{
		FlowOp:           r.flowOp,
		IntSession:       r.intSession,
		DropReport:       r.dropReport,
		TailDropReport:   r.tailDrop,
		ReportAllPackets: r.reportAll,
		SamplePercent:    r.samplePercent,
	}
	return en
}

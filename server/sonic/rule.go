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
	"VLAN_ID":       "intd does not match VLAN IDs",
	"PCP":           "intd does not match VLAN priorities",
	"DEI":           "intd does not match VLAN DEI",
	"TC":            "intd does not match traffic classes",
	"OUT_PORT":      "intd's watchlist matches at ingress",
	"OUT_PORTS":     "intd's watchlist matches at ingress",
	"SRC_IP_MASK":   "give SRC_IP as a prefix",
	"DST_IP_MASK":   "give DST_IP as a prefix",
	"SRC_IPV6_MASK": "give SRC_IPV6 as a prefix",
	"DST_IPV6_MASK": "give DST_IPV6 as a prefix",
	"SRC_MAC":       "intd does not match MAC addresses",
	"DST_MAC":       "intd does not match MAC addresses",
	"INNER_SRC_MAC": "intd does not match MAC addresses",
	"INNER_DST_MAC": "intd does not match MAC addresses",
	"BTH_OPCODE":    "intd does not match RoCE headers",
	"AETH_SYNDROME": "intd does not match RoCE headers",
	"TUNNEL_TERM":   "intd does not match tunnel termination",
	"META_DATA":     "intd does not match ACL metadata",

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
	priority  uint32
	family    int // 0 any, 4 or 6
	famField  string
	src, dst  netip.Prefix
	proto     *uint8
	sport     *[2]uint16
	dport     *[2]uint16
	dscp      *uint8
	dscpMask  *uint8 // nil: all six bits
	flags     *[2]uint8
	icmp      [2]*uint8 // type, code
	icmpV6    bool
	icmpField string
	iether    *uint16
	inPort    string
	vni       *uint32
	isrc      netip.Prefix
	idst      netip.Prefix
	iproto    *uint8
	isport    *uint16
	idport    *uint16

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
		p := gen.EntryPath(s)
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

// Leaf prefixes of a watchlist entry, relative to the entry.
const (
	matchConf   = "/match/config/"
	vxlanConf   = "/vxlan-match/config/"
	actionsConf = "/actions/config/"
)

// ruleFieldLeaves maps intd leaves (relative to the entry) to the field
// that would set them: errors about leaves a rule leaves out name it.
var ruleFieldLeaves = map[string]string{
	matchConf + "source-prefix": "SRC_IP", matchConf + "destination-prefix": "DST_IP", matchConf + "protocol": "IP_PROTOCOL",
	matchConf + "source-port-min": "L4_SRC_PORT", matchConf + "source-port-max": "L4_SRC_PORT",
	matchConf + "destination-port-min": "L4_DST_PORT", matchConf + "destination-port-max": "L4_DST_PORT",
	matchConf + "dscp": "DSCP", matchConf + "tcp-flags": "TCP_FLAGS", matchConf + "tcp-flags-mask": "TCP_FLAGS",
	matchConf + "ingress-interface": "IN_PORTS", matchConf + "dscp-mask": "DSCP",
	matchConf + "icmp-type": "ICMP_TYPE", matchConf + "icmp-code": "ICMP_CODE", vxlanConf + "inner-ether-type": "INNER_ETHER_TYPE",
	vxlanConf + "vni": "TUNNEL_VNI", vxlanConf + "inner-source-prefix": "INNER_SRC_IP",
	vxlanConf + "inner-destination-prefix": "INNER_DST_IP", vxlanConf + "inner-protocol": "INNER_IP_PROTOCOL",
	vxlanConf + "inner-source-port-min": "INNER_L4_SRC_PORT", vxlanConf + "inner-source-port-max": "INNER_L4_SRC_PORT",
	vxlanConf + "inner-destination-port-min": "INNER_L4_DST_PORT", vxlanConf + "inner-destination-port-max": "INNER_L4_DST_PORT",
	actionsConf + "flow-op": "FLOW_OP", actionsConf + "int-session": "INT_SESSION", actionsConf + "report-all-packets": "REPORT_ALL_PACKETS",
	actionsConf + "drop-report": "DROP_REPORT_ENABLE", actionsConf + "tail-drop-report": "TAIL_DROP_REPORT_ENABLE",
	actionsConf + "sample-percent": "FLOW_SAMPLE_PERCENT", "/config/sequence-id": "PRIORITY",
}

// ruleFieldKind says what a rule field is: a rule needs at least one
// match and one action.
type ruleFieldKind int

const (
	kindPriority ruleFieldKind = iota
	kindMatch
	kindAction
)

// ruleParser holds a rule while its fields are parsed one by one.
type ruleParser struct {
	tr   *translation
	r    *rule
	prio *uint32
}

// ruleFields are the ACL rule fields intd translates, each with its parser.
var ruleFields = map[string]struct {
	kind  ruleFieldKind
	parse func(p *ruleParser, field, v string) *refusal
}{
	"PRIORITY":                {kindPriority, (*ruleParser).priority},
	"ETHER_TYPE":              {kindMatch, (*ruleParser).etherType},
	"IP_TYPE":                 {kindMatch, (*ruleParser).ipType},
	"SRC_IP":                  {kindMatch, (*ruleParser).prefix},
	"SRC_IPV6":                {kindMatch, (*ruleParser).prefix},
	"DST_IP":                  {kindMatch, (*ruleParser).prefix},
	"DST_IPV6":                {kindMatch, (*ruleParser).prefix},
	"IP_PROTOCOL":             {kindMatch, (*ruleParser).protocol},
	"NEXT_HEADER":             {kindMatch, (*ruleParser).protocol},
	"L4_SRC_PORT":             {kindMatch, (*ruleParser).srcPort},
	"L4_SRC_PORT_RANGE":       {kindMatch, (*ruleParser).srcPort},
	"L4_DST_PORT":             {kindMatch, (*ruleParser).dstPort},
	"L4_DST_PORT_RANGE":       {kindMatch, (*ruleParser).dstPort},
	"DSCP":                    {kindMatch, (*ruleParser).dscp},
	"TCP_FLAGS":               {kindMatch, (*ruleParser).tcpFlags},
	"IN_PORTS":                {kindMatch, (*ruleParser).inPorts},
	"ICMP_TYPE":               {kindMatch, (*ruleParser).icmp},
	"ICMP_CODE":               {kindMatch, (*ruleParser).icmp},
	"ICMPV6_TYPE":             {kindMatch, (*ruleParser).icmp},
	"ICMPV6_CODE":             {kindMatch, (*ruleParser).icmp},
	"INNER_ETHER_TYPE":        {kindMatch, (*ruleParser).innerEtherType},
	"TUNNEL_VNI":              {kindMatch, (*ruleParser).vni},
	"INNER_SRC_IP":            {kindMatch, (*ruleParser).innerPrefix},
	"INNER_SRC_IPV6":          {kindMatch, (*ruleParser).innerPrefix},
	"INNER_DST_IP":            {kindMatch, (*ruleParser).innerPrefix},
	"INNER_DST_IPV6":          {kindMatch, (*ruleParser).innerPrefix},
	"INNER_IP_PROTOCOL":       {kindMatch, (*ruleParser).innerProtocol},
	"INNER_L4_SRC_PORT":       {kindMatch, (*ruleParser).innerPort},
	"INNER_L4_DST_PORT":       {kindMatch, (*ruleParser).innerPort},
	"FLOW_OP":                 {kindAction, (*ruleParser).flowOp},
	"INT_SESSION":             {kindAction, (*ruleParser).intSession},
	"DROP_REPORT_ENABLE":      {kindAction, (*ruleParser).flag},
	"TAIL_DROP_REPORT_ENABLE": {kindAction, (*ruleParser).flag},
	"REPORT_ALL_PACKETS":      {kindAction, (*ruleParser).flag},
	"FLOW_SAMPLE_PERCENT":     {kindAction, (*ruleParser).samplePercent},
}

func (tr *translation) parseRule(f Fields) (*rule, *refusal) {
	p := &ruleParser{tr: tr, r: &rule{fields: maps.Clone(ruleFieldLeaves)}}
	matches, actions := 0, 0
	for _, field := range slices.Sorted(maps.Keys(f)) {
		rf, ok := ruleFields[field]
		if !ok {
			if why, ok := unsupportedRuleFields[field]; ok {
				return nil, refuse(field, "not supported: %s", why)
			}
			return nil, refuse(field, "unknown field")
		}
		switch rf.kind {
		case kindMatch:
			matches++
		case kindAction:
			actions++
		}
		if rf := rf.parse(p, field, f[field]); rf != nil {
			return nil, rf
		}
	}
	switch {
	case p.prio == nil:
		return nil, refuse("PRIORITY", "missing")
	case matches == 0:
		return nil, refuse("", "a rule needs a match field")
	case actions == 0:
		return nil, refuse("", "a rule needs a DTel action (FLOW_OP, INT_SESSION, DROP_REPORT_ENABLE, ...)")
	}
	p.r.priority = *p.prio
	if rf := p.r.complete(); rf != nil {
		return nil, rf
	}
	return p.r, nil
}

// complete checks the fields of a rule against each other and says what
// an ACL matches implicitly and intd needs said.
func (r *rule) complete() *refusal {
	if r.flags != nil {
		switch {
		case r.proto == nil:
			r.proto = ygot.Uint8(6)
		case *r.proto != 6:
			return refuse("TCP_FLAGS", "TCP flags need IP_PROTOCOL 6, not %d", *r.proto)
		}
	}
	if r.icmpField != "" {
		want := uint8(1)
		if r.icmpV6 {
			want = 58
		}
		switch {
		case r.proto == nil:
			r.proto = ygot.Uint8(want)
		case *r.proto != want:
			return refuse(r.icmpField, "needs IP_PROTOCOL %d, not %d", want, *r.proto)
		}
	}
	if r.proto != nil && (r.sport != nil || r.dport != nil) && !portProtocol(*r.proto) {
		return refuse(r.fields[matchConf+"protocol"], "L4 ports need protocol TCP (6), UDP (17) or SCTP (132), not %d", *r.proto)
	}
	if (r.isport != nil || r.idport != nil) && (r.iproto == nil || !portProtocol(*r.iproto)) {
		return refuse("INNER_IP_PROTOCOL", "inner L4 ports need INNER_IP_PROTOCOL 6, 17 or 132")
	}
	if r.isrc.IsValid() && r.idst.IsValid() && r.isrc.Addr().Is4() != r.idst.Addr().Is4() {
		return refuse(r.fields[vxlanConf+"inner-destination-prefix"], "inner source and destination differ in IP version")
	}
	// An IP version with no prefix to carry it: the whole address space
	// of that version.
	if r.family != 0 && !r.src.IsValid() && !r.dst.IsValid() {
		r.src = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.family == 6 {
			r.src = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		r.fields[matchConf+"source-prefix"] = r.famField
	}
	return nil
}

// portProtocol says whether IP protocol n has L4 ports: TCP, UDP or SCTP.
func portProtocol(n uint8) bool { return n == 6 || n == 17 || n == 132 }

// family records the IP version field implies, refusing a second,
// different one.
func (p *ruleParser) family(field string, fam int) *refusal {
	r := p.r
	if r.family != 0 && r.family != fam {
		return refuse(field, "IPv%d contradicts %s (IPv%d)", fam, r.famField, r.family)
	}
	if r.family == 0 {
		r.family, r.famField = fam, field
	}
	return nil
}

func parseU8(field, v string, lo, hi uint64) (*uint8, *refusal) {
	n, rf := parseUint(field, v, lo, hi)
	if rf != nil {
		return nil, rf
	}
	return ygot.Uint8(uint8(n)), nil
}

// parsePort parses a port or, for a _RANGE field, a range of ports.
func parsePort(field, v string) (*[2]uint16, *refusal) {
	if strings.HasSuffix(field, "_RANGE") {
		rg, rf := parseRange(field, v)
		return &rg, rf
	}
	n, rf := parseUint(field, v, 0, 65535)
	return &[2]uint16{uint16(n), uint16(n)}, rf
}

// fieldFamily is the IP version of an address field: 6 for the _IPV6 ones.
func fieldFamily(field string) int {
	if strings.HasSuffix(field, "V6") {
		return 6
	}
	return 4
}

func (p *ruleParser) priority(field, v string) *refusal {
	n, rf := parseUint(field, v, 0, 999999)
	if rf == nil && n > MaxPriority {
		rf = refuse(field, "%d is above %d, the highest priority intd orders", n, MaxPriority)
	}
	prio := uint32(n)
	p.prio = &prio
	p.r.fields["/config/sequence-id"] = field
	return rf
}

func (p *ruleParser) etherType(field, v string) *refusal {
	n, rf := parseUint(field, v, 0, 0xffff)
	if rf != nil {
		return rf
	}
	switch n {
	case 0x0800:
		return p.family(field, 4)
	case 0x86dd:
		return p.family(field, 6)
	}
	return refuse(field, "%#04x: intd watches IPv4 (0x0800) and IPv6 (0x86DD) traffic only", n)
}

func (p *ruleParser) ipType(field, v string) *refusal {
	switch strings.ToUpper(v) {
	case "ANY", "IP":
		return nil
	case "IPV4ANY", "IPV4":
		return p.family(field, 4)
	case "IPV6ANY", "IPV6":
		return p.family(field, 6)
	}
	return refuse(field, "%q: intd watches IP traffic (ANY, IP, IPV4ANY, IPV6ANY)", v)
}

func (p *ruleParser) prefix(field, v string) *refusal {
	fam := fieldFamily(field)
	pf, rf := parsePrefix(field, v, fam)
	if rf == nil {
		rf = p.family(field, fam)
	}
	leaf, dst := "source-prefix", &p.r.src
	if strings.HasPrefix(field, "DST") {
		leaf, dst = "destination-prefix", &p.r.dst
	}
	if rf == nil && dst.IsValid() {
		rf = refuse(field, "a second %s", leaf)
	}
	*dst = pf
	p.r.fields[matchConf+leaf] = field
	return rf
}

func (p *ruleParser) protocol(field, v string) *refusal {
	if p.r.proto != nil {
		return refuse(field, "IP_PROTOCOL and NEXT_HEADER are the same match; give one")
	}
	var rf *refusal
	p.r.proto, rf = parseU8(field, v, 0, 255)
	p.r.fields[matchConf+"protocol"] = field
	return rf
}

func (p *ruleParser) srcPort(field, v string) *refusal {
	return p.ports(field, v, &p.r.sport, "L4_SRC_PORT", "source-port")
}

func (p *ruleParser) dstPort(field, v string) *refusal {
	return p.ports(field, v, &p.r.dport, "L4_DST_PORT", "destination-port")
}

// ports parses a port or port range into *dst, the match leaves
// leaf-min and leaf-max; name and name_RANGE are one match.
func (p *ruleParser) ports(field, v string, dst **[2]uint16, name, leaf string) *refusal {
	if *dst != nil {
		return refuse(field, "%s and %s_RANGE are the same match; give one", name, name)
	}
	var rf *refusal
	*dst, rf = parsePort(field, v)
	p.r.fields[matchConf+leaf+"-min"], p.r.fields[matchConf+leaf+"-max"] = field, field
	return rf
}

func (p *ruleParser) dscp(field, v string) *refusal {
	val, mask, rf := parseMasked(field, v, 63)
	if rf == nil && mask == 0 {
		rf = refuse(field, "mask 0 matches every packet; leave DSCP out")
	}
	p.r.dscp = &val
	if mask != 63 {
		p.r.dscpMask = &mask
	}
	p.r.fields[matchConf+"dscp"], p.r.fields[matchConf+"dscp-mask"] = field, field
	return rf
}

// icmp parses ICMP_TYPE, ICMP_CODE (protocol 1) and ICMPV6_TYPE,
// ICMPV6_CODE (protocol 58): exact values.
func (p *ruleParser) icmp(field, v string) *refusal {
	v6 := strings.HasPrefix(field, "ICMPV6")
	if p.r.icmpField != "" && p.r.icmpV6 != v6 {
		return refuse(field, "ICMP and ICMPv6 fields in one rule (%s)", p.r.icmpField)
	}
	p.r.icmpV6, p.r.icmpField = v6, field
	val, mask, rf := parseMasked(field, v, 255)
	if rf == nil && mask != 255 {
		rf = refuse(field, "intd matches an ICMP type or code exactly, not under mask %#x", mask)
	}
	i, leaf := 0, "icmp-type"
	if strings.HasSuffix(field, "_CODE") {
		i, leaf = 1, "icmp-code"
	}
	p.r.icmp[i] = &val
	p.r.fields[matchConf+leaf] = field
	return rf
}

func (p *ruleParser) innerEtherType(field, v string) *refusal {
	n, rf := parseUint(field, v, 0, 0xffff)
	if rf == nil && n != 0x0800 && n != 0x86dd {
		rf = refuse(field, "%#04x: intd watches inner IPv4 (0x0800) and IPv6 (0x86DD) traffic only", n)
	}
	p.r.iether = ygot.Uint16(uint16(n))
	p.r.fields[vxlanConf+"inner-ether-type"] = field
	return rf
}

func (p *ruleParser) tcpFlags(field, v string) *refusal {
	val, mask, rf := parseMasked(field, v, 0x3f)
	p.r.flags = &[2]uint8{val, mask}
	p.r.fields[matchConf+"tcp-flags"], p.r.fields[matchConf+"tcp-flags-mask"] = field, field
	return rf
}

func (p *ruleParser) inPorts(field, v string) *refusal {
	ports := strings.Split(v, ",")
	if len(ports) != 1 {
		return refuse(field, "intd matches one ingress port per rule, not %d", len(ports))
	}
	p.r.inPort = strings.TrimSpace(ports[0])
	p.r.fields[matchConf+"ingress-interface"] = field
	return validPortName(field, p.r.inPort)
}

func (p *ruleParser) vni(field, v string) *refusal {
	n, rf := parseUint(field, v, 0, 1<<24-1)
	p.r.vni = ygot.Uint32(uint32(n))
	p.r.fields[vxlanConf+"vni"] = field
	return rf
}

func (p *ruleParser) innerPrefix(field, v string) *refusal {
	pf, rf := parsePrefix(field, v, fieldFamily(field))
	leaf, dst := "inner-source-prefix", &p.r.isrc
	if strings.HasPrefix(field, "INNER_DST") {
		leaf, dst = "inner-destination-prefix", &p.r.idst
	}
	if rf == nil && dst.IsValid() {
		rf = refuse(field, "a second %s", leaf)
	}
	*dst = pf
	p.r.fields[vxlanConf+leaf] = field
	return rf
}

func (p *ruleParser) innerProtocol(field, v string) *refusal {
	var rf *refusal
	p.r.iproto, rf = parseU8(field, v, 0, 255)
	p.r.fields[vxlanConf+"inner-protocol"] = field
	return rf
}

func (p *ruleParser) innerPort(field, v string) *refusal {
	n, rf := parseUint(field, v, 0, 65535)
	port, leaf := &p.r.idport, "inner-destination-port"
	if field == "INNER_L4_SRC_PORT" {
		port, leaf = &p.r.isport, "inner-source-port"
	}
	*port = ygot.Uint16(uint16(n))
	p.r.fields[vxlanConf+leaf+"-min"], p.r.fields[vxlanConf+leaf+"-max"] = field, field
	return rf
}

func (p *ruleParser) flowOp(field, v string) *refusal {
	p.r.fields[actionsConf+"flow-op"] = field
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "NOP":
		p.r.flowOp = gen.IntdInt_FlowOp_NOP
	case "INT":
		p.r.flowOp = gen.IntdInt_FlowOp_INT
	case "POSTCARD":
		p.r.flowOp = gen.IntdInt_FlowOp_POSTCARD
	case "IOAM":
		return refuse(field, "intd does not do IOAM")
	default:
		return refuse(field, "%q is not NOP, INT or POSTCARD", v)
	}
	return nil
}

func (p *ruleParser) intSession(field, v string) *refusal {
	p.r.intSession = ygot.String(v)
	p.r.fields[actionsConf+"int-session"] = field
	if _, ok := p.tr.intSessions[v]; !ok {
		return refuse(field, "%s", p.tr.missing(TableIntSession, v))
	}
	return nil
}

// flag parses the boolean actions: DROP_REPORT_ENABLE,
// TAIL_DROP_REPORT_ENABLE and REPORT_ALL_PACKETS.
func (p *ruleParser) flag(field, v string) *refusal {
	b, rf := parseBool(field, v)
	dst, leaf := &p.r.reportAll, "report-all-packets"
	switch field {
	case "DROP_REPORT_ENABLE":
		dst, leaf = &p.r.dropReport, "drop-report"
	case "TAIL_DROP_REPORT_ENABLE":
		dst, leaf = &p.r.tailDrop, "tail-drop-report"
	}
	*dst = &b
	p.r.fields[actionsConf+leaf] = field
	return rf
}

func (p *ruleParser) samplePercent(field, v string) *refusal {
	var rf *refusal
	p.r.samplePercent, rf = parseU8(field, v, 0, 100)
	p.r.fields[actionsConf+"sample-percent"] = field
	return rf
}

// build makes the watchlist entry seq of the rule, with protocol proto.
func (r *rule) build(seq uint32, desc string, proto *uint8) *gen.IntdInt_Int_Watchlist_Entries_Entry {
	en := &gen.IntdInt_Int_Watchlist_Entries_Entry{SequenceId: ygot.Uint32(seq)}
	en.GetOrCreateConfig().SequenceId = ygot.Uint32(seq)
	en.Config.Description = ygot.String(desc)
	m := &gen.IntdInt_Int_Watchlist_Entries_Entry_Match_Config{Protocol: proto, Dscp: r.dscp, DscpMask: r.dscpMask,
		IcmpType: r.icmp[0], IcmpCode: r.icmp[1]}
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
	if r.vni != nil || r.isrc.IsValid() || r.idst.IsValid() || r.iproto != nil || r.isport != nil || r.idport != nil || r.iether != nil {
		v := &gen.IntdInt_Int_Watchlist_Entries_Entry_VxlanMatch_Config{Vni: r.vni, InnerProtocol: r.iproto, InnerEtherType: r.iether}
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

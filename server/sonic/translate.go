package sonic

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

// MaxPriority is the highest ACL_RULE PRIORITY intd orders: a rule of
// priority P becomes watchlist entry 2*(MaxPriority-P) (and the next one,
// for the UDP half of a rule that matches L4 ports without IP_PROTOCOL),
// so that intd's ascending sequence-id order is SONiC's descending
// priority order and both fit the dataplane's 16-bit priorities.
const MaxPriority = 32767

// SeqOf is the sequence-id of the first watchlist entry of a rule of
// priority p.
func SeqOf(priority uint32) uint32 { return 2 * (MaxPriority - priority) }

// TranslateOptions tunes the translation.
type TranslateOptions struct {
	// NodeID is the node-id used when CONFIG_DB has no DTEL|SWITCH_ID.
	NodeID uint32
}

// Status is what became of one CONFIG_DB entry.
type Status struct {
	Key Key
	// Applied is true when the entry as it stands in CONFIG_DB is in
	// effect.
	Applied bool
	// Previous is true when the entry is refused but the version applied
	// before it stays in effect.
	Previous bool
	// Field is the refused field ("" for the entry as a whole); Reason
	// says why; Path is intd's YANG path named by the error, if any.
	Field, Reason, Path string
	// Paths are the intd YANG paths the entry in effect became.
	Paths []string
}

// State is "applied" or "refused".
func (s *Status) State() string {
	if s.Applied {
		return "applied"
	}
	return "refused"
}

// InEffect says which version of the entry runs: "current", "previous"
// or "none".
func (s *Status) InEffect() string {
	switch {
	case s.Applied:
		return "current"
	case s.Previous:
		return "previous"
	}
	return "none"
}

// source ties a YANG path to the CONFIG_DB entry and field it came from.
type source struct {
	key   Key
	field string
}

// entry is a translated CONFIG_DB entry, ready to be added to a Device.
type entry struct {
	add   func(*gen.Device)
	paths map[string]string // YANG path -> CONFIG_DB field ("" for the entry)
	base  []string          // the entry's own paths, for its status
	// What other entries may refer to.
	intSession, reportSession, watchTable string
	seqs                                  []uint32
}

func newEntry() *entry { return &entry{paths: map[string]string{}} }

func (e *entry) path(p, field string) { e.paths[p] = field }

// input is what one translation works from.
type input struct {
	cfg      Config
	previous map[Key]Fields   // the versions last applied
	refused  map[Key]*refusal // current versions apply refused
	dropPrev map[Key]bool     // previous versions apply refused
	opts     TranslateOptions
}

// translation is a Config turned into a Device, with where everything
// came from.
type translation struct {
	dev    *gen.Device
	status map[Key]*Status
	used   map[Key]Fields // the version in effect of every entry
	prev   map[Key]bool   // entries whose version in effect is the previous
	srcs   map[string]source
	// seqs maps watchlist sequence-ids to their ACL_RULE.
	seqs map[uint32]Key
	// sinkPorts are DTEL|SINK_PORT_LIST's ports.
	sinkPorts []string

	intSessions, reportSessions, watchTables map[string]Key
}

// Owned reports whether a CONFIG_DB entry is DTel configuration: every
// entry of the DTEL tables, ACL tables of type DTEL_FLOW_WATCHLIST and the
// rules of such tables (and of the table named DTEL_FLOW_WATCHLIST, which
// orchagent creates by itself).
func (c Config) Owned(k Key) bool {
	switch k.Table {
	case TableACLTable:
		return strings.EqualFold(lookup(c.Get(k), "type"), WatchlistType)
	case TableACLRule:
		t, _, _ := strings.Cut(k.Name, "|")
		return c.isWatchTable(t)
	}
	return relevant(k.Table)
}

func (c Config) isWatchTable(t string) bool {
	f, ok := c[TableACLTable][t]
	if !ok {
		return t == WatchlistType
	}
	return strings.EqualFold(lookup(f, "type"), WatchlistType)
}

// lookup finds a field by name in any case (ACL tables' field names are
// case-insensitive in SONiC).
func lookup(f Fields, name string) string {
	if v, ok := f[name]; ok {
		return v
	}
	for k, v := range f {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// translate turns in.cfg into a Device, entry by entry: an entry that
// cannot be taken is refused (with its previous version kept when that
// one still can be), and entries referring to refused ones are refused in
// turn.
func translate(in input) *translation {
	tr := &translation{
		dev:            &gen.Device{},
		status:         map[Key]*Status{},
		used:           map[Key]Fields{},
		prev:           map[Key]bool{},
		srcs:           map[string]source{},
		seqs:           map[uint32]Key{},
		intSessions:    map[string]Key{},
		reportSessions: map[string]Key{},
		watchTables:    map[string]Key{},
	}
	root := tr.dev.GetOrCreateInt()
	nc := root.GetOrCreateNode().GetOrCreateConfig()
	nc.NodeId = ygot.Uint32(in.opts.NodeID)
	tr.srcs["/int/node/config/node-id"] = source{Key{TableDTel, "SWITCH_ID"}, "SWITCH_ID"}

	// The implicit watchlist table, when rules use it without an
	// ACL_TABLE entry.
	if _, ok := in.cfg[TableACLTable][WatchlistType]; !ok {
		tr.watchTables[WatchlistType] = Key{}
	}
	for _, k := range in.cfg.Keys() {
		if !in.cfg.Owned(k) {
			continue
		}
		cur := in.cfg.Get(k)
		st := &Status{Key: k}
		tr.status[k] = st
		var e *entry
		r := in.refused[k]
		if r == nil {
			e, r = tr.entry(k, cur)
		}
		if r == nil {
			st.Applied = true
			tr.accept(k, e, cur)
			continue
		}
		st.Field, st.Reason, st.Path = r.Field, r.Reason, r.path()
		if prev, ok := in.previous[k]; ok && !in.dropPrev[k] && !maps.Equal(prev, cur) {
			if e, r := tr.entry(k, prev); r == nil {
				st.Previous = true
				tr.prev[k] = true
				tr.accept(k, e, prev)
			}
		}
	}
	return tr
}

func (r *refusal) path() string {
	if r == nil {
		return ""
	}
	return r.yangPath
}

func (tr *translation) accept(k Key, e *entry, f Fields) {
	e.add(tr.dev)
	tr.used[k] = f
	for p, field := range e.paths {
		tr.srcs[p] = source{k, field}
	}
	st := tr.status[k]
	st.Paths = append(st.Paths, e.base...)
	if e.intSession != "" {
		tr.intSessions[e.intSession] = k
	}
	if e.reportSession != "" {
		tr.reportSessions[e.reportSession] = k
	}
	if e.watchTable != "" {
		tr.watchTables[e.watchTable] = k
	}
	for _, s := range e.seqs {
		tr.seqs[s] = k
	}
	if k == (Key{TableDTel, "SINK_PORT_LIST"}) {
		tr.sinkPorts = slices.Sorted(maps.Keys(f))
	}
}

// entry translates one entry in the context of those taken before it.
func (tr *translation) entry(k Key, f Fields) (*entry, *refusal) {
	switch k.Table {
	case TableDTel:
		return dtelEntry(k.Name, f)
	case TableIntSession:
		return intSessionEntry(k.Name, f)
	case TableReportSession:
		return reportSessionEntry(k.Name, f)
	case TableQueueReport:
		return queueReportEntry(k.Name, f)
	case TableEvent:
		return tr.eventEntry(k.Name, f)
	case TableACLTable:
		return aclTableEntry(k.Name, f)
	case TableACLRule:
		return tr.ruleEntry(k.Name, f)
	}
	return nil, refuse("", "table %s is not DTel configuration", k.Table)
}

func eventPath(t string) string { return "/int/events/event[type=" + t + "]" }

func interfacePath(name string) string { return "/int/interfaces/interface[name=" + name + "]" }

// single takes an entry whose one field is named like its key (the DTEL
// table's attributes: DTEL|SWITCH_ID holds SWITCH_ID).
func single(attr string, f Fields) (string, *refusal) {
	for name := range f {
		if name != attr {
			return "", refuse(name, "unknown field: DTEL|%s holds only the field %s", attr, attr)
		}
	}
	v, ok := f[attr]
	if !ok {
		return "", refuse(attr, "missing")
	}
	return v, nil
}

// dtelBools are the DTEL attributes that switch a feature on or off.
var dtelBools = map[string]struct {
	leaf string
	set  func(*gen.IntdInt_Int_Node_Config, bool)
	get  func(*gen.IntdInt_Int_Node_Config) *bool
}{
	"INT_ENDPOINT": {"int-endpoint",
		func(c *gen.IntdInt_Int_Node_Config, v bool) { c.IntEndpoint = ygot.Bool(v) },
		func(c *gen.IntdInt_Int_Node_Config) *bool { return c.IntEndpoint }},
	"INT_TRANSIT": {"int-transit",
		func(c *gen.IntdInt_Int_Node_Config, v bool) { c.IntTransit = ygot.Bool(v) },
		func(c *gen.IntdInt_Int_Node_Config) *bool { return c.IntTransit }},
	"POSTCARD": {"postcard",
		func(c *gen.IntdInt_Int_Node_Config, v bool) { c.Postcard = ygot.Bool(v) },
		func(c *gen.IntdInt_Int_Node_Config) *bool { return c.Postcard }},
	"DROP_REPORT": {"drop-report",
		func(c *gen.IntdInt_Int_Node_Config, v bool) { c.DropReport = ygot.Bool(v) },
		func(c *gen.IntdInt_Int_Node_Config) *bool { return c.DropReport }},
	"QUEUE_REPORT": {"queue-report",
		func(c *gen.IntdInt_Int_Node_Config, v bool) { c.QueueReport = ygot.Bool(v) },
		func(c *gen.IntdInt_Int_Node_Config) *bool { return c.QueueReport }},
}

func nodeConfig(d *gen.Device) *gen.IntdInt_Int_Node_Config {
	return d.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig()
}

func dtelEntry(attr string, f Fields) (*entry, *refusal) {
	e := newEntry()
	leaf := func(name string) {
		p := "/int/node/config/" + name
		e.path(p, attr)
		e.base = append(e.base, p)
	}
	if b, ok := dtelBools[attr]; ok {
		s, r := single(attr, f)
		if r != nil {
			return nil, r
		}
		v, r := parseBool(attr, s)
		if r != nil {
			return nil, r
		}
		e.add = func(d *gen.Device) { b.set(nodeConfig(d), v) }
		leaf(b.leaf)
		return e, nil
	}
	switch attr {
	case "SWITCH_ID", "FLOW_STATE_CLEAR_CYCLE", "LATENCY_SENSITIVITY":
		s, r := single(attr, f)
		if r != nil {
			return nil, r
		}
		switch attr {
		case "SWITCH_ID":
			v, r := parseUint(attr, s, 0, 1<<32-1)
			if r != nil {
				return nil, r
			}
			e.add = func(d *gen.Device) { nodeConfig(d).NodeId = ygot.Uint32(uint32(v)) }
			leaf("node-id")
		case "FLOW_STATE_CLEAR_CYCLE":
			v, r := parseUint(attr, s, 0, 65535)
			if r != nil {
				return nil, r
			}
			e.add = func(d *gen.Device) { nodeConfig(d).FlowStateClearCycle = ygot.Uint16(uint16(v)) }
			leaf("flow-state-clear-cycle")
		default:
			// SAI counts hop latency changes in powers of two of
			// nanoseconds; intd's dataplanes take exponents up to 31.
			v, r := parseUint(attr, s, 0, 31)
			if r != nil {
				return nil, r
			}
			e.add = func(d *gen.Device) { nodeConfig(d).LatencySensitivity = ygot.Uint8(uint8(v)) }
			leaf("latency-sensitivity")
		}
		return e, nil
	case "SINK_PORT_LIST":
		if len(f) == 0 {
			return nil, refuse("", "no ports")
		}
		ports := slices.Sorted(maps.Keys(f))
		for _, p := range ports {
			if r := validPortName(p, p); r != nil {
				return nil, r
			}
		}
		e.add = func(d *gen.Device) {
			ifs := d.GetOrCreateInt().GetOrCreateInterfaces()
			for _, p := range ports {
				c := ifs.GetOrCreateInterface(p).GetOrCreateConfig()
				c.Name = ygot.String(p)
				c.IntSink = ygot.Bool(true)
			}
		}
		e.path("/int/interfaces", "")
		for _, p := range ports {
			e.path(interfacePath(p), p)
			e.path(interfacePath(p)+"/config/int-sink", p)
			e.base = append(e.base, interfacePath(p)+"/config/int-sink")
		}
		return e, nil
	case "INT_L4_DSCP":
		for name := range f {
			if name != "INT_L4_DSCP_VALUE" && name != "INT_L4_DSCP_MASK" {
				return nil, refuse(name, "unknown field: DTEL|INT_L4_DSCP holds INT_L4_DSCP_VALUE and INT_L4_DSCP_MASK")
			}
		}
		var vm [2]uint8
		for i, name := range []string{"INT_L4_DSCP_VALUE", "INT_L4_DSCP_MASK"} {
			s, ok := f[name]
			if !ok {
				return nil, refuse(name, "missing (INT_L4_DSCP needs a value and a mask)")
			}
			// A DSCP is 6 bits; 0 would mark nothing.
			v, r := parseUint(name, s, 1, 63)
			if r != nil {
				return nil, r
			}
			vm[i] = uint8(v)
		}
		if vm[0]&^vm[1] != 0 {
			return nil, refuse("INT_L4_DSCP_VALUE", "value %#x has bits outside INT_L4_DSCP_MASK %#x", vm[0], vm[1])
		}
		e.add = func(d *gen.Device) {
			mc := d.GetOrCreateInt().GetOrCreateMarking().GetOrCreateConfig()
			mc.L4Marking = gen.IntdInt_L4Marking_DSCP
			mc.DscpValue = ygot.Uint8(vm[0])
			mc.DscpMask = ygot.Uint8(vm[1])
		}
		e.path("/int/marking/config/l4-marking", "")
		e.path("/int/marking/config/dscp-value", "INT_L4_DSCP_VALUE")
		e.path("/int/marking/config/dscp-mask", "INT_L4_DSCP_MASK")
		e.base = append(e.base, "/int/marking/config/dscp-value", "/int/marking/config/dscp-mask")
		return e, nil
	}
	return nil, refuse("", "unknown DTEL attribute %s", attr)
}

// collectFields map DTEL_INT_SESSION's COLLECT_* fields to INT
// instructions. COLLECT_HOP_LATENCY is intd's own: SAI has no hop latency
// flag.
var collectFields = []struct {
	field string
	inst  gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD
}{
	{"COLLECT_SWITCH_ID", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_NODE_ID},
	{"COLLECT_SWITCH_PORTS", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_LEVEL_1_INTERFACE_IDS},
	{"COLLECT_HOP_LATENCY", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_HOP_LATENCY},
	{"COLLECT_QUEUE_INFO", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_QUEUE_OCCUPANCY},
	{"COLLECT_INGRESS_TIMESTAMP", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_INGRESS_TIMESTAMP},
	{"COLLECT_EGRESS_TIMESTAMP", gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_EGRESS_TIMESTAMP},
}

func intSessionEntry(name string, f Fields) (*entry, *refusal) {
	if r := validName(name); r != nil {
		return nil, r
	}
	p := gen.IntSessionPath(name)
	e := newEntry()
	e.path(p, "")
	e.base = []string{p}
	var insts []gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD
	var hops *uint8
	for _, field := range slices.Sorted(maps.Keys(f)) {
		v := f[field]
		if field == "MAX_HOP_COUNT" {
			n, r := parseUint(field, v, 1, 255)
			if r != nil {
				return nil, r
			}
			hops = ygot.Uint8(uint8(n))
			e.path(p+"/config/remaining-hop-count", field)
			continue
		}
		i := slices.IndexFunc(collectFields, func(c struct {
			field string
			inst  gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD
		}) bool {
			return c.field == field
		})
		if i < 0 {
			return nil, refuse(field, "unknown field")
		}
		on, r := parseBool(field, v)
		if r != nil {
			return nil, r
		}
		if on {
			insts = append(insts, collectFields[i].inst)
		}
	}
	if len(insts) == 0 {
		return nil, refuse("", "the session collects nothing: set a COLLECT_* field to TRUE")
	}
	// Instruction bit order, as INT headers list the metadata.
	slices.SortFunc(insts, func(a, b gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD) int {
		return instOrder(a) - instOrder(b)
	})
	e.path(p+"/config/instructions", "")
	e.intSession = name
	e.add = func(d *gen.Device) {
		c := d.GetOrCreateInt().GetOrCreateIntSessions().GetOrCreateIntSession(name).GetOrCreateConfig()
		c.Name = ygot.String(name)
		c.Instructions = insts
		c.RemainingHopCount = hops
	}
	return e, nil
}

func instOrder(i gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD) int {
	for n, c := range collectFields {
		if c.inst == i {
			return n
		}
	}
	return len(collectFields)
}

// validName checks a CONFIG_DB key used as an intd name.
func validName(name string) *refusal {
	if name == "" || strings.TrimSpace(name) != name {
		return refuse("", "the key %q is not a usable name", name)
	}
	return nil
}

func reportSessionEntry(name string, f Fields) (*entry, *refusal) {
	if r := validName(name); r != nil {
		return nil, r
	}
	p := gen.ReportSessionPath(name)
	e := newEntry()
	e.path(p, "")
	e.base = []string{p}
	c := &gen.IntdInt_Int_ReportSessions_ReportSession_Config{Name: ygot.String(name)}
	var dsts []netip.Addr
	var port uint16
	for _, field := range slices.Sorted(maps.Keys(f)) {
		v := f[field]
		switch field {
		case "SRC_IP":
			a, err := netip.ParseAddr(strings.TrimSpace(v))
			if err != nil || a.Zone() != "" {
				return nil, refuse(field, "%q is not an IP address", v)
			}
			c.SourceAddress = ygot.String(a.Unmap().String())
			e.path(p+"/config/source-address", field)
		case "DST_IP_LIST":
			for _, s := range strings.Split(v, ";") {
				a, err := netip.ParseAddr(strings.TrimSpace(s))
				if err != nil || a.Zone() != "" {
					return nil, refuse(field, "%q is not an IP address", s)
				}
				a = a.Unmap()
				if slices.Contains(dsts, a) {
					return nil, refuse(field, "%v is listed twice", a)
				}
				dsts = append(dsts, a)
			}
		case "VRF":
			if strings.TrimSpace(v) == "" {
				return nil, refuse(field, "empty")
			}
			c.Vrf = ygot.String(v)
			e.path(p+"/config/vrf", field)
		case "TRUNCATE_SIZE":
			n, r := parseUint(field, v, 0, 9000)
			if r != nil {
				return nil, r
			}
			c.TruncateSize = ygot.Uint16(uint16(n))
			e.path(p+"/config/truncate-size", field)
		case "UDP_DEST_PORT":
			n, r := parseUint(field, v, 1, 65535)
			if r != nil {
				return nil, r
			}
			port = uint16(n)
		default:
			return nil, refuse(field, "unknown field")
		}
	}
	switch {
	case c.SourceAddress == nil:
		return nil, refuse("SRC_IP", "missing: reports need a source address")
	case len(dsts) == 0:
		return nil, refuse("DST_IP_LIST", "missing: reports need a collector")
	case port == 0:
		return nil, refuse("UDP_DEST_PORT", "missing: the collectors' UDP port is needed")
	}
	e.path(p+"/collectors", "DST_IP_LIST")
	for _, a := range dsts {
		e.path(fmt.Sprintf("%s/collectors/collector[address=%s][port=%d]", p, a, port), "DST_IP_LIST")
	}
	e.reportSession = name
	e.add = func(d *gen.Device) {
		rs := d.GetOrCreateInt().GetOrCreateReportSessions().GetOrCreateReportSession(name)
		rs.Config = c
		cs := rs.GetOrCreateCollectors()
		for _, a := range dsts {
			cc := cs.GetOrCreateCollector(a.String(), port).GetOrCreateConfig()
			cc.Address = ygot.String(a.String())
			cc.Port = ygot.Uint16(port)
		}
	}
	return e, nil
}

func queueReportEntry(name string, f Fields) (*entry, *refusal) {
	port, q, ok := strings.Cut(name, "|")
	if !ok {
		return nil, refuse("", "the key is not PORT|QUEUE")
	}
	if r := validPortName("", port); r != nil {
		return nil, r
	}
	qid, r := parseUint("", q, 0, 255)
	if r != nil {
		r.Reason = "queue " + r.Reason
		return nil, r
	}
	p := gen.QueueReportPath(port, uint8(qid))
	e := newEntry()
	e.path(p, "")
	e.base = []string{p}
	c := &gen.IntdInt_Int_QueueReports_QueueReport_Config{Interface: ygot.String(port), QueueId: ygot.Uint8(uint8(qid))}
	for _, field := range slices.Sorted(maps.Keys(f)) {
		v := f[field]
		switch field {
		case "QUEUE_DEPTH_THRESHOLD", "QUEUE_LATENCY_THRESHOLD", "THRESHOLD_BREACH_QUOTA":
			lo := uint64(0)
			if field == "THRESHOLD_BREACH_QUOTA" {
				lo = 1 // 0 would never report
			}
			n, r := parseUint(field, v, lo, 1<<32-1)
			if r != nil {
				return nil, r
			}
			switch field {
			case "QUEUE_DEPTH_THRESHOLD":
				c.DepthThreshold = ygot.Uint32(uint32(n))
				e.path(p+"/config/depth-threshold", field)
			case "QUEUE_LATENCY_THRESHOLD":
				c.LatencyThreshold = ygot.Uint32(uint32(n))
				e.path(p+"/config/latency-threshold", field)
			default:
				c.BreachQuota = ygot.Uint32(uint32(n))
				e.path(p+"/config/breach-quota", field)
			}
		case "REPORT_TAIL_DROP":
			b, r := parseBool(field, v)
			if r != nil {
				return nil, r
			}
			c.TailDrop = ygot.Bool(b)
			e.path(p+"/config/tail-drop", field)
		default:
			return nil, refuse(field, "unknown field")
		}
	}
	if c.GetDepthThreshold() == 0 && c.GetLatencyThreshold() == 0 && !c.GetTailDrop() {
		return nil, refuse("", "nothing to report: set QUEUE_DEPTH_THRESHOLD, QUEUE_LATENCY_THRESHOLD or REPORT_TAIL_DROP")
	}
	e.add = func(d *gen.Device) {
		d.GetOrCreateInt().GetOrCreateQueueReports().GetOrCreateQueueReport(port, uint8(qid)).Config = c
	}
	return e, nil
}

// eventTypes maps DTEL_EVENT keys to intd's event types.
var eventTypes = map[string]gen.E_IntdInt_DtelEventType{
	"EVENT_TYPE_FLOW_STATE":                    gen.IntdInt_DtelEventType_FLOW_STATE,
	"EVENT_TYPE_FLOW_REPORT_ALL_PACKETS":       gen.IntdInt_DtelEventType_FLOW_REPORT_ALL_PACKETS,
	"EVENT_TYPE_FLOW_TCPFLAG":                  gen.IntdInt_DtelEventType_FLOW_TCPFLAG,
	"EVENT_TYPE_QUEUE_REPORT_THRESHOLD_BREACH": gen.IntdInt_DtelEventType_QUEUE_REPORT_THRESHOLD_BREACH,
	"EVENT_TYPE_QUEUE_REPORT_TAIL_DROP":        gen.IntdInt_DtelEventType_QUEUE_REPORT_TAIL_DROP,
	"EVENT_TYPE_DROP_REPORT":                   gen.IntdInt_DtelEventType_DROP_REPORT,
}

func (tr *translation) eventEntry(name string, f Fields) (*entry, *refusal) {
	et, ok := eventTypes[name]
	if !ok {
		return nil, refuse("", "unknown event type %s", name)
	}
	p := eventPath(et.String())
	e := newEntry()
	e.path(p, "")
	e.base = []string{p}
	c := &gen.IntdInt_Int_Events_Event_Config{Type: et}
	for _, field := range slices.Sorted(maps.Keys(f)) {
		v := f[field]
		switch field {
		case "EVENT_REPORT_SESSION":
			if _, ok := tr.reportSessions[v]; !ok {
				return nil, refuse(field, "%s", tr.missing(TableReportSession, v))
			}
			c.ReportSession = ygot.String(v)
			e.path(p+"/config/report-session", field)
		case "EVENT_DSCP_VALUE":
			n, r := parseUint(field, v, 0, 63)
			if r != nil {
				return nil, r
			}
			c.Dscp = ygot.Uint8(uint8(n))
			e.path(p+"/config/dscp", field)
		default:
			return nil, refuse(field, "unknown field")
		}
	}
	if c.ReportSession == nil {
		return nil, refuse("EVENT_REPORT_SESSION", "missing: an event needs a report session")
	}
	e.add = func(d *gen.Device) {
		d.GetOrCreateInt().GetOrCreateEvents().GetOrCreateEvent(et).Config = c
	}
	return e, nil
}

// missing explains a reference to an entry that is not in effect.
func (tr *translation) missing(table, name string) string {
	k := Key{table, name}
	if st, ok := tr.status[k]; ok && !st.Applied && !st.Previous {
		return fmt.Sprintf("%s is refused", k)
	}
	return fmt.Sprintf("%s does not exist", k)
}

func aclTableEntry(name string, f Fields) (*entry, *refusal) {
	for field, v := range f {
		switch strings.ToLower(field) {
		case "type", "policy_desc":
		case "stage":
			if !strings.EqualFold(v, "ingress") {
				return nil, refuse(field, "a DTel watchlist is an ingress table, not %q", v)
			}
		case "ports":
			if strings.TrimSpace(v) != "" {
				return nil, refuse(field, "intd's watchlist is switch-wide: bind a DTEL_FLOW_WATCHLIST table to no ports (match IN_PORTS in rules instead)")
			}
		default:
			return nil, refuse(field, "unknown field")
		}
	}
	e := newEntry()
	e.watchTable = name
	e.add = func(*gen.Device) {}
	return e, nil
}

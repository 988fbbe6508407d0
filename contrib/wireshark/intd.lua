-- intd.lua: Wireshark dissector for In-band Network Telemetry.
--
--   INT v2.1: INT-MD and INT-MX headers and the INT-MD metadata stack
--   (decoded by instruction bitmap), carried over TCP/UDP (marked by
--   DSCP, by an INT UDP destination port with NPT 0/1/2, or by a probe
--   marker), in VXLAN-GPE (next protocol 0x82), as a Geneve option
--   (class 0x0103) and after GRE (protocol type configurable).
--   INT 0.5 over TCP/UDP as Host-INT sends it (DSCP or UDP extension).
--   Telemetry Report v2.0 (group header, individual reports, metadata,
--   embedded packets) and Telemetry Report 0.5, on UDP port 32766.
--
-- Install: copy to ~/.local/lib/wireshark/plugins/ (Wireshark 4.x), or
-- run   tshark -X lua_script:intd.lua ...
-- The markings are preferences (Edit > Preferences > Protocols > INT, or
-- -o int.dscp:0x17 -o int.udp_port:5000 ...). INT over TCP/UDP is found
-- by a heuristic dissector: to see it on ports other dissectors claim
-- (80, 53...), enable tcp.try_heuristic_first and udp.try_heuristic_first.
--
-- Field names follow `intcollector decode`'s JSON where they overlap
-- (int.hop.node_id, int_report.md.hop_latency, ...). Hop metadata a node
-- could not provide (all ones) is shown as unavailable, without a field.

local int_proto = Proto("int", "In-band Network Telemetry")
local rep_proto = Proto("int_report", "INT Telemetry Report")
local geneve_proto = Proto("int_geneve", "Geneve (with INT options)")
local gre_entry = Proto("int_gre", "INT over GRE")
local gpe_entry = Proto("int_gpe", "INT over VXLAN-GPE")

-- Lua 5.2's bit32 where the build has it, else Wireshark's bit library.
local bitlib = bit32 or bit
local band, rshift = bitlib.band, bitlib.rshift

-- Preferences ----------------------------------------------------------

int_proto.prefs.dscp = Pref.uint("INT DSCP value", 0x17, "DSCP value marking INT v2.1 over TCP/UDP")
int_proto.prefs.dscp_mask = Pref.uint("INT DSCP mask", 0x3f, "DSCP bits compared with the value (0: DSCP marking off)")
int_proto.prefs.udp_port = Pref.uint("INT UDP port", 0, "UDP destination port marking INT v2.1 (0: off)")
int_proto.prefs.probe_marker = Pref.string("Probe marker", "", "64-bit probe marker before the INT shim, e.g. 0xaaaaaaaabbbbbbbb (empty: off)")
int_proto.prefs.gre_proto = Pref.uint("GRE protocol type", 0, "GRE protocol type announcing INT (TBD_INT; 0: off)")
int_proto.prefs.geneve_port = Pref.uint("Geneve UDP port", 6081, "UDP port of Geneve, dissected here for its INT options (0: off)")
int_proto.prefs.detect = Pref.bool("Detect unmarked INT", true, "Take a consistent INT v2.1 shim and header after TCP/UDP for INT")
int_proto.prefs.int05_port = Pref.uint("INT 0.5 UDP port", 33122, "Host-INT UDP-extension destination port (0: off)")
int_proto.prefs.int05_dscp = Pref.uint("INT 0.5 DSCP value", 0x01, "DSCP value marking INT 0.5")
int_proto.prefs.int05_dscp_mask = Pref.uint("INT 0.5 DSCP mask", 0x01, "DSCP mask for INT 0.5 (0: off)")
rep_proto.prefs.udp_port = Pref.uint("Report UDP port", 32766, "UDP destination port of telemetry reports")

-- Value strings --------------------------------------------------------

local header_types = { [1] = "INT-MD", [2] = "INT-Destination", [3] = "INT-MX" }
local npt_names = { [0] = "none (original DSCP)", [1] = "UDP port", [2] = "IP protocol" }
local rep_types = { [0] = "Inner packet only", [1] = "INT", [2] = "IOAM" }
local in_types = { [0] = "None", [1] = "TLV", [2] = "Domain-specific extension", [3] = "Ethernet", [4] = "IPv4", [5] = "IPv6" }
local tr05_next = { [0] = "Ethernet", [1] = "Drop report", [2] = "Switch local", [3] = "Host drop", [4] = "IPv4 (Host-INT)" }
local int05_types = { [1] = "Hop-by-hop", [2] = "Destination", [3] = "Hop-by-hop with sequence number (Host-INT)" }
-- SD-Fabric drop reasons, as intd reports them.
local drop_reasons = {
	[0] = "UNKNOWN", [26] = "IP_TTL_ZERO", [29] = "ROUTING_MISS", [55] = "PORT_VLAN_MAPPING_MISS",
	[71] = "TRAFFIC_MANAGER", [80] = "ACL_DENY", [89] = "BRIDGING_MISS", [128] = "NEXT_ID_MISS",
	[129] = "MPLS_MISS", [130] = "EGRESS_NEXT_MISS", [131] = "MPLS_TTL_ZERO",
	[132] = "UPF_DL_PDR_MISS", [133] = "UPF_UL_PDR_MISS", [134] = "UPF_FAR_MISS",
}

-- Fields ---------------------------------------------------------------

-- INT v2.1 and 0.5 (proto int).
local fi = {
	encap = ProtoField.string("int.encap", "Encapsulation"),
	probe_marker = ProtoField.uint64("int.probe_marker", "Probe marker", base.HEX),
	shim = ProtoField.none("int.shim", "Shim"),
	shim_type = ProtoField.uint8("int.shim.type", "Type", base.DEC, header_types, 0xf0),
	shim_npt = ProtoField.uint8("int.shim.npt", "Next protocol type (NPT)", base.DEC, npt_names, 0x0c),
	shim_length = ProtoField.uint8("int.shim.length", "Length (words)", base.DEC),
	shim_dscp = ProtoField.uint8("int.shim.dscp", "Original DSCP", base.HEX, nil, 0xfc),
	shim_udp_port = ProtoField.uint16("int.shim.udp_port", "Original UDP destination port", base.DEC),
	shim_ip_proto = ProtoField.uint8("int.shim.ip_proto", "Original IP protocol", base.DEC),
	gre_g = ProtoField.bool("int.gre.g", "G (GRE added by the INT source)", 8, nil, 0x08),
	gre_next = ProtoField.uint16("int.gre.next_proto", "Next protocol (EtherType)", base.HEX),
	gpe_g = ProtoField.bool("int.gpe.g", "G (original packet was VXLAN)", 8, nil, 0x80),
	gpe_next = ProtoField.uint8("int.gpe.next_proto", "Next protocol", base.HEX),
	geneve_class = ProtoField.uint16("int.geneve.class", "Option class", base.HEX),
	geneve_type = ProtoField.uint8("int.geneve.type", "Option type", base.DEC, header_types, 0x7f),
	geneve_critical = ProtoField.bool("int.geneve.critical", "Critical", 8, nil, 0x80),
	geneve_length = ProtoField.uint8("int.geneve.length", "Option length (words)", base.DEC, nil, 0x1f),
	type = ProtoField.string("int.type", "Header type"),
	version = ProtoField.uint8("int.version", "Version", base.DEC, nil, 0xf0),
	d = ProtoField.bool("int.d", "D (discard)", 8, nil, 0x08),
	e = ProtoField.bool("int.e", "E (max hop count exceeded)", 8, nil, 0x04),
	m = ProtoField.bool("int.m", "M (MTU exceeded)", 8, nil, 0x02),
	hop_ml = ProtoField.uint8("int.hop_ml", "Per-hop metadata length (words)", base.DEC, nil, 0x1f),
	remaining = ProtoField.uint8("int.remaining_hop_count", "Remaining hop count", base.DEC),
	bitmap = ProtoField.uint16("int.instruction_bitmap", "Instruction bitmap", base.HEX),
	domain_id = ProtoField.uint16("int.domain_id", "Domain specific ID", base.DEC),
	ds_instruction = ProtoField.uint16("int.ds_instruction", "DS instruction", base.HEX),
	ds_flags = ProtoField.uint16("int.ds_flags", "DS flags", base.HEX),
	hop = ProtoField.none("int.hop", "Hop"),
	source_only = ProtoField.bytes("int.source_only", "Source-only metadata"),
	sequence = ProtoField.uint32("int.sequence", "Flow sequence number"),
	-- INT 0.5
	v05_type = ProtoField.uint8("int.v05.type", "Type", base.DEC, int05_types),
	v05_shim_dscp = ProtoField.uint8("int.v05.shim_dscp", "Reserved / DSCP", base.HEX),
	v05_rep = ProtoField.uint8("int.v05.rep", "Rep", base.DEC, nil, 0x0c),
	v05_c = ProtoField.bool("int.v05.c", "C (copy)", 8, nil, 0x02),
	v05_e = ProtoField.bool("int.v05.e", "E (max hop count exceeded)", 8, nil, 0x01),
	v05_inst_count = ProtoField.uint8("int.v05.inst_count", "Instruction count", base.DEC, nil, 0x1f),
	v05_max_hops = ProtoField.uint8("int.v05.max_hops", "Max hop count", base.DEC),
	v05_total_hops = ProtoField.uint8("int.v05.total_hops", "Total hop count", base.DEC),
	v05_congestion = ProtoField.uint32("int.hop.queue_congestion", "Queue congestion status", base.HEX),
	v05_tail = ProtoField.none("int.v05.tail", "Tail"),
	v05_tail_proto = ProtoField.uint8("int.v05.tail.proto", "Original IP protocol", base.DEC),
	v05_tail_port = ProtoField.uint16("int.v05.tail.dst_port", "Original destination port", base.DEC),
	v05_tail_dscp = ProtoField.uint8("int.v05.tail.dscp", "Original DSCP", base.HEX),
}
-- Instruction bits (bit 0 is the most significant).
local inst_names = {
	[0] = "Node ID", "Level 1 ingress and egress interface IDs", "Hop latency", "Queue ID and occupancy",
	"Ingress timestamp", "Egress timestamp", "Level 2 ingress and egress interface IDs", "Egress interface Tx utilization",
	"Buffer ID and occupancy", "Reserved (9)", "Reserved (10)", "Reserved (11)", "Reserved (12)", "Reserved (13)",
	"Reserved (14)", "Checksum complement",
}
local inst_bits = {}
for b = 0, 15 do
	inst_bits[b] = ProtoField.bool("int.inst.b" .. b, inst_names[b], 16, nil, rshift(0x8000, b))
	fi["inst_b" .. b] = inst_bits[b]
end
-- Hop (and report) metadata, named like the JSON of `intcollector decode`.
local function md_fields(prefix, t)
	t.node_id = ProtoField.uint32(prefix .. "node_id", "Node ID")
	t.ingress_if = ProtoField.uint16(prefix .. "ingress_if", "Level 1 ingress interface ID")
	t.egress_if = ProtoField.uint16(prefix .. "egress_if", "Level 1 egress interface ID")
	t.hop_latency = ProtoField.uint32(prefix .. "hop_latency", "Hop latency")
	t.queue_id = ProtoField.uint8(prefix .. "queue_id", "Queue ID")
	t.queue_occupancy = ProtoField.uint24(prefix .. "queue_occupancy", "Queue occupancy")
	t.ingress_timestamp = ProtoField.uint64(prefix .. "ingress_timestamp", "Ingress timestamp")
	t.egress_timestamp = ProtoField.uint64(prefix .. "egress_timestamp", "Egress timestamp")
	t.ingress_if_l2 = ProtoField.uint32(prefix .. "ingress_if_l2", "Level 2 ingress interface ID")
	t.egress_if_l2 = ProtoField.uint32(prefix .. "egress_if_l2", "Level 2 egress interface ID")
	t.tx_utilization = ProtoField.uint32(prefix .. "tx_utilization", "Egress interface Tx utilization")
	t.buffer_id = ProtoField.uint8(prefix .. "buffer_id", "Buffer ID")
	t.buffer_occupancy = ProtoField.uint24(prefix .. "buffer_occupancy", "Buffer occupancy")
	t.reserved = ProtoField.uint32(prefix .. "reserved", "Reserved instruction", base.HEX)
	t.domain_specific = ProtoField.bytes(prefix .. "domain_specific", "Domain-specific metadata")
	t.checksum_complement = ProtoField.uint32(prefix .. "checksum_complement", "Checksum complement", base.HEX)
	return t
end
local fh = md_fields("int.hop.", {})
for k, v in pairs(fh) do fi["hop_" .. k] = v end
local pf = {}
for _, v in pairs(fi) do pf[#pf + 1] = v end
int_proto.fields = pf

-- Telemetry reports (proto int_report).
local fr = {
	version = ProtoField.uint8("int_report.version", "Version", base.DEC, nil, 0xf0),
	hw_id = ProtoField.uint16("int_report.hw_id", "Hardware ID", base.DEC, nil, 0x0fc0),
	sequence = ProtoField.uint32("int_report.sequence", "Sequence number", base.DEC, nil, 0x003fffff),
	node_id = ProtoField.uint32("int_report.node_id", "Node ID"),
	report = ProtoField.none("int_report.report", "Individual report"),
	rep_type = ProtoField.uint8("int_report.rep_type", "Report type", base.DEC, rep_types, 0xf0),
	in_type = ProtoField.uint8("int_report.in_type", "Inner type", base.DEC, in_types, 0x0f),
	report_length = ProtoField.uint8("int_report.report_length", "Report length (words)"),
	md_length = ProtoField.uint8("int_report.md_length", "Metadata length (words)"),
	d = ProtoField.bool("int_report.d", "D (dropped)", 8, nil, 0x80),
	q = ProtoField.bool("int_report.q", "Q (congested queue)", 8, nil, 0x40),
	f = ProtoField.bool("int_report.f", "F (tracked flow)", 8, nil, 0x20),
	i = ProtoField.bool("int_report.i", "I (intermediate)", 8, nil, 0x10),
	rep_md_bits = ProtoField.uint16("int_report.rep_md_bits", "RepMdBits", base.HEX),
	domain_id = ProtoField.uint16("int_report.domain_id", "Domain specific ID"),
	ds_md_bits = ProtoField.uint16("int_report.ds_md_bits", "DS MD bits", base.HEX),
	ds_md_status = ProtoField.uint16("int_report.ds_md_status", "DS MD status", base.HEX),
	md = ProtoField.none("int_report.md", "Metadata"),
	drop_queue_id = ProtoField.uint8("int_report.md.drop_queue_id", "Queue ID of the drop"),
	drop_reason = ProtoField.uint8("int_report.drop_reason", "Drop reason", base.DEC, drop_reasons),
	ds_md = ProtoField.bytes("int_report.ds_md", "Domain-specific metadata"),
	inner_length = ProtoField.uint32("int_report.inner_length", "Inner contents length"),
	inner = ProtoField.bytes("int_report.inner", "Inner contents"),
	-- 0.5
	v05_next = ProtoField.uint8("int_report.v05.next_proto", "Next protocol", base.DEC, tr05_next, 0x0f),
	v05_hw_id = ProtoField.uint8("int_report.v05.hw_id", "Hardware ID", base.DEC, nil, 0x3f),
	v05_sequence = ProtoField.uint32("int_report.v05.sequence", "Sequence number"),
	v05_ingress_ts = ProtoField.uint32("int_report.v05.ingress_timestamp", "Ingress timestamp"),
	v05_switch = ProtoField.none("int_report.v05.switch", "Switch header"),
	v05_switch_id = ProtoField.uint32("int_report.v05.switch_id", "Switch ID"),
	v05_drop_queue = ProtoField.uint8("int_report.v05.drop_queue_id", "Queue ID"),
	v05_egress_ts = ProtoField.uint32("int_report.v05.egress_timestamp", "Egress timestamp"),
	v05_reporter = ProtoField.uint32("int_report.v05.reporter_id", "Reporter node ID"),
}
local rep_bits = {}
for b = 0, 15 do
	local name = inst_names[b]
	if b == 0 then name = "Reserved (node ID is in the group header)" end
	if b == 15 then name = "Queue ID and drop reason" end
	rep_bits[b] = ProtoField.bool("int_report.md_bit.b" .. b, name, 16, nil, rshift(0x8000, b))
	fr["rep_bit" .. b] = rep_bits[b]
end
local fm = md_fields("int_report.md.", {})
for k, v in pairs(fm) do fr["md_" .. k] = v end
pf = {}
for _, v in pairs(fr) do pf[#pf + 1] = v end
rep_proto.fields = pf

-- Geneve (proto int_geneve).
local fg = {
	version = ProtoField.uint8("int_geneve.version", "Version", base.DEC, nil, 0xc0),
	opt_len = ProtoField.uint8("int_geneve.opt_len", "Options length (words)", base.DEC, nil, 0x3f),
	oam = ProtoField.bool("int_geneve.oam", "O (OAM)", 8, nil, 0x80),
	critical = ProtoField.bool("int_geneve.critical", "C (critical options)", 8, nil, 0x40),
	protocol = ProtoField.uint16("int_geneve.protocol", "Protocol type", base.HEX),
	vni = ProtoField.uint24("int_geneve.vni", "VNI", base.HEX),
	option = ProtoField.bytes("int_geneve.option", "Option"),
}
pf = {}
for _, v in pairs(fg) do pf[#pf + 1] = v end
geneve_proto.fields = pf

local ef_malformed = ProtoExpert.new("int.malformed", "Malformed INT", expert.group.MALFORMED, expert.severity.ERROR)
local ef_truncated = ProtoExpert.new("int.truncated", "INT stack truncated (embedded packet cut short)", expert.group.MALFORMED, expert.severity.WARN)
int_proto.experts = { ef_malformed, ef_truncated }
local ef_rep_malformed = ProtoExpert.new("int_report.malformed", "Malformed telemetry report", expert.group.MALFORMED, expert.severity.ERROR)
rep_proto.experts = { ef_rep_malformed }

-- Fields of enclosing layers read by the heuristic.
local x_ip_dscp = Field.new("ip.dsfield.dscp")
local x_ipv6_dscp = Field.new("ipv6.tclass.dscp")
local x_ip_version = Field.new("ip.version")
local x_ipv6_version = Field.new("ipv6.version")
local x_udp_dstport = Field.new("udp.dstport")

-- Helpers --------------------------------------------------------------

-- last returns the value of the most recent instance of a field, or nil.
local function last(f)
	local all = { f() }
	if #all == 0 then return nil end
	return all[#all].value
end

local function last_offset(f)
	local all = { f() }
	if #all == 0 then return -1 end
	return all[#all].offset
end

-- Words of one hop's baseline metadata for a bitmap: bits 4-6 take two
-- words, every other set bit one (reserved bits included).
local function inst_words(bm)
	local n = 0
	for b = 0, 15 do
		if band(bm, rshift(0x8000, b)) ~= 0 then
			n = n + ((b >= 4 and b <= 6) and 2 or 1)
		end
	end
	return n
end

local function all_ones32(r) return r:uint() == 0xffffffff end
local function all_ones64(r) return r:uint64() == UInt64(0xffffffff, 0xffffffff) end

-- The probe marker preference as two 32-bit halves, or nil.
local function probe_marker()
	local s = int_proto.prefs.probe_marker
	if s == nil or s == "" then return nil end
	s = s:gsub("^0[xX]", ""):gsub("[%s:]", "")
	if #s == 0 or #s > 16 or s:find("[^%x]") then return nil end
	s = string.rep("0", 16 - #s) .. s
	local hi, lo = tonumber(s:sub(1, 8), 16), tonumber(s:sub(9, 16), 16)
	if hi == 0 and lo == 0 then return nil end
	return hi, lo
end

-- Set while the embedded packet of a report is dissected: INT 0.5 blocks
-- there have no tail header, and INT goes into the report's tree (UDP
-- hands its payload to the tree's root).
local in_report = false
local report_tree = nil
local report_inner = nil -- the embedded packet's bytes, padding included

-- in_report_tree: where INT found in a report's embedded packet goes.
local function in_report_tree(tree)
	if in_report and report_tree then return report_tree end
	return tree
end

-- INT v2.1 header and stack -------------------------------------------

-- add_md adds the metadata fields of bits 0-14 of bm found at tvb(off):
-- to a hop (unavail: all-ones values are "unavailable") or a report.
-- It returns the offset after them.
local function add_md(tree, f, tvb, off, bm, unavail)
	local function word(b) return band(bm, rshift(0x8000, b)) ~= 0 end
	local function na(name, r)
		tree:add(r, name .. ": unavailable (all ones)")
	end
	if word(0) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Node ID", r) else tree:add(f.node_id, r) end
		off = off + 4
	end
	if word(1) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Level 1 interface IDs", r) else
			tree:add(f.ingress_if, tvb(off, 2))
			tree:add(f.egress_if, tvb(off + 2, 2))
		end
		off = off + 4
	end
	if word(2) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Hop latency", r) else tree:add(f.hop_latency, r) end
		off = off + 4
	end
	if word(3) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Queue ID and occupancy", r) else
			tree:add(f.queue_id, tvb(off, 1))
			tree:add(f.queue_occupancy, tvb(off + 1, 3))
		end
		off = off + 4
	end
	if word(4) then
		local r = tvb(off, 8)
		if unavail and all_ones64(r) then na("Ingress timestamp", r) else tree:add(f.ingress_timestamp, r) end
		off = off + 8
	end
	if word(5) then
		local r = tvb(off, 8)
		if unavail and all_ones64(r) then na("Egress timestamp", r) else tree:add(f.egress_timestamp, r) end
		off = off + 8
	end
	if word(6) then
		local r = tvb(off, 8)
		if unavail and all_ones64(r) then na("Level 2 interface IDs", r) else
			tree:add(f.ingress_if_l2, tvb(off, 4))
			tree:add(f.egress_if_l2, tvb(off + 4, 4))
		end
		off = off + 8
	end
	if word(7) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Tx utilization", r) else tree:add(f.tx_utilization, r) end
		off = off + 4
	end
	if word(8) then
		local r = tvb(off, 4)
		if unavail and all_ones32(r) then na("Buffer ID and occupancy", r) else
			tree:add(f.buffer_id, tvb(off, 1))
			tree:add(f.buffer_occupancy, tvb(off + 1, 3))
		end
		off = off + 4
	end
	for b = 9, 14 do
		if word(b) then
			tree:add(f.reserved, tvb(off, 4)):append_text(" (bit " .. b .. ")")
			off = off + 4
		end
	end
	return off
end

local function add_bitmap(tree, field, bits, tvb, off)
	local bt = tree:add(field, tvb(off, 2))
	local bm = tvb(off, 2):uint()
	for b = 0, 15 do
		if band(bm, rshift(0x8000, b)) ~= 0 then bt:add(bits[b], tvb(off, 2)) end
	end
	return bm
end

-- dissect_header dissects an INT-MD or INT-MX header and what follows it
-- in tvb(off, len) (the bytes the shim length counts).
local function dissect_header(tvb, pinfo, tree, off, len, htype)
	local avail = tvb:len() - off
	if avail < 12 or len < 12 then
		tree:add_proto_expert_info(ef_malformed, "INT header shorter than 12 bytes")
		return
	end
	tree:add(fi.type, header_types[htype] or ("type " .. htype))
	tree:add(fi.version, tvb(off, 1))
	tree:add(fi.d, tvb(off, 1))
	if htype == 1 then
		tree:add(fi.e, tvb(off, 1))
		tree:add(fi.m, tvb(off, 1))
		tree:add(fi.hop_ml, tvb(off + 2, 1))
		tree:add(fi.remaining, tvb(off + 3, 1))
	end
	local bm = add_bitmap(tree, fi.bitmap, inst_bits, tvb, off + 4)
	tree:add(fi.domain_id, tvb(off + 6, 2))
	tree:add(fi.ds_instruction, tvb(off + 8, 2))
	tree:add(fi.ds_flags, tvb(off + 10, 2))
	if tvb(off, 1):uint() < 0x20 or tvb(off, 1):uint() >= 0x30 then
		tree:add_proto_expert_info(ef_malformed, "INT version is not 2")
		return
	end
	local body = math.min(len, avail) - 12
	local at = off + 12
	if htype ~= 1 then
		if body > 0 then tree:add(fi.source_only, tvb(at, body)):set_text("Source-inserted metadata (" .. body .. " bytes)") end
		return
	end
	local hl = band(tvb(off + 2, 1):uint(), 0x1f) * 4
	if inst_words(bm) * 4 > hl then
		tree:add_proto_expert_info(ef_malformed, "Instruction bitmap needs more words than Hop ML")
		return
	end
	if len > avail then
		tree:add_proto_expert_info(ef_truncated)
	end
	if hl == 0 then
		if body > 0 then tree:add(fi.source_only, tvb(at, body)) end
		return
	end
	local n = math.floor(body / hl)
	for i = 0, n - 1 do
		local ht = tree:add(fi.hop, tvb(at, hl))
		local e = add_md(ht, fh, tvb, at, bm, true)
		local cc = band(bm, 1) ~= 0
		local hend = at + hl - (cc and 4 or 0)
		if hend > e then ht:add(fh.domain_specific, tvb(e, hend - e)) end
		if cc then
			local r = tvb(hend, 4)
			if all_ones32(r) then ht:add(r, "Checksum complement: unavailable (all ones)") else ht:add(fh.checksum_complement, r) end
		end
		ht:set_text(string.format("Hop %d (from the top of the stack)", i))
		at = at + hl
	end
	if body - n * hl > 0 then tree:add(fi.source_only, tvb(at, body - n * hl)) end
	pinfo.cols.info:append(string.format(" [INT-MD %d hops]", n))
end

-- looks_v21_shim: an INT v2.1 TCP/UDP shim followed by an MD or MX header
-- of version 2 that fits the shim length.
local function looks_v21_shim(tvb, off)
	if tvb:len() - off < 16 then return false end
	local b0 = tvb(off, 1):uint()
	local t, npt = rshift(b0, 4), band(rshift(b0, 2), 3)
	if (t ~= 1 and t ~= 3) or npt > 2 or band(b0, 3) ~= 0 then return false end
	local l = tvb(off + 1, 1):uint() * 4
	if l < 12 or tvb:len() - off < 4 + l or rshift(tvb(off + 4, 1):uint(), 4) ~= 2 then return false end
	if t == 1 then
		local ml = band(tvb(off + 6, 1):uint(), 0x1f)
		if ml == 0 or inst_words(tvb(off + 8, 2):uint()) > ml or (l - 12) % (ml * 4) ~= 0 then return false end
	end
	return true
end

-- INT over TCP/UDP --------------------------------------------------------

-- dissect_l4 dissects INT v2.1 at tvb(off) after a TCP/UDP header (or the
-- new UDP header of NPT 2), then hands on what follows.
local function dissect_l4(tvb, pinfo, tree, off, encap, pre)
	local len = tvb(off + 1, 1):uint() * 4
	local t = tree:add(int_proto, tvb(off - pre, math.min(pre + 4 + len, tvb:len() - off + pre)))
	t:add(fi.encap, encap)
	if pre > 0 then t:add(fi.probe_marker, tvb(off - pre, 8)) end
	local st = t:add(fi.shim, tvb(off, 4))
	st:add(fi.shim_type, tvb(off, 1))
	st:add(fi.shim_npt, tvb(off, 1))
	st:add(fi.shim_length, tvb(off + 1, 1))
	local npt = band(rshift(tvb(off, 1):uint(), 2), 3)
	if npt == 0 then st:add(fi.shim_dscp, tvb(off + 3, 1))
	elseif npt == 1 then st:add(fi.shim_udp_port, tvb(off + 2, 2))
	elseif npt == 2 then st:add(fi.shim_ip_proto, tvb(off + 3, 1)) end
	local htype = rshift(tvb(off, 1):uint(), 4)
	dissect_header(tvb, pinfo, t, off + 4, len, htype)
	pinfo.cols.protocol = "INT"
	local next = off + 4 + len
	if next < tvb:len() then
		if npt == 2 and not DissectorTable.get("ip.proto"):try(tvb(off + 3, 1):uint(), tvb(next):tvb(), pinfo, tree) then
			Dissector.get("data"):call(tvb(next):tvb(), pinfo, tree)
		elseif npt ~= 2 and last(x_udp_dstport) == 2152 then
			-- GTP-U behind INT over UDP (the port kept): Wireshark's GTP
			-- dissector shows the TEID and the user's packet.
			DissectorTable.get("udp.port"):try(2152, tvb(next):tvb(), pinfo, tree)
		elseif npt ~= 2 then
			Dissector.get("data"):call(tvb(next):tvb(), pinfo, tree)
		end
	end
	return tvb:len()
end

-- INT 0.5 over TCP/UDP (Host-INT) ------------------------------------------

local function looks_int05(tvb, off)
	if tvb:len() - off < 12 then return false end
	local t = tvb(off, 1):uint()
	return t >= 1 and t <= 3 and tvb(off + 2, 1):uint() * 4 >= 12 and rshift(tvb(off + 4, 1):uint(), 4) == 0
end

local function dissect_int05(tvb, pinfo, tree, off, encap)
	local typ, len = tvb(off, 1):uint(), tvb(off + 2, 1):uint() * 4
	local avail = tvb:len() - off
	local t = tree:add(int_proto, tvb(off, math.min(len, avail)))
	t:set_text("In-band Network Telemetry 0.5")
	t:add(fi.encap, encap)
	local st = t:add(fi.shim, tvb(off, 4))
	st:add(fi.v05_type, tvb(off, 1))
	st:add(fi.shim_length, tvb(off + 2, 1)):append_text(" (shim included)")
	st:add(fi.v05_shim_dscp, tvb(off + 3, 1))
	if len > avail or len < 12 then
		t:add_proto_expert_info(ef_malformed, "INT 0.5 length beyond the packet")
		return tvb:len()
	end
	local h = off + 4
	t:add(fi.type, typ == 2 and "INT-Destination" or "INT-MD")
	t:add(fi.version, tvb(h, 1))
	t:add(fi.v05_rep, tvb(h, 1))
	t:add(fi.v05_c, tvb(h, 1))
	t:add(fi.v05_e, tvb(h, 1))
	t:add(fi.v05_inst_count, tvb(h + 1, 1))
	t:add(fi.v05_max_hops, tvb(h + 2, 1))
	t:add(fi.v05_total_hops, tvb(h + 3, 1))
	local maxh, total = tvb(h + 2, 1):uint(), tvb(h + 3, 1):uint()
	local rem = 0
	if maxh > total then rem = maxh - total end
	t:add(fi.remaining, tvb(h + 2, 2), rem):set_generated()
	local bm = add_bitmap(t, fi.bitmap, inst_bits, tvb, h + 4)
	local ic = band(tvb(h + 1, 1):uint(), 0x1f)
	local stack = ic * 4 * total
	local at = h + 8
	if at + stack > off + len then
		t:add_proto_expert_info(ef_malformed, "INT 0.5 stack beyond the shim length")
		return tvb:len()
	end
	for i = 0, total - 1 do
		local ht = t:add(fi.hop, tvb(at, ic * 4))
		ht:set_text(string.format("Hop %d (from the top of the stack)", i))
		local k = 0
		for b = 0, 15 do
			if band(bm, rshift(0x8000, b)) ~= 0 and k < ic then
				local r = tvb(at + 4 * k, 4)
				if b == 0 then ht:add(fh.node_id, r)
				elseif b == 1 then ht:add(fh.ingress_if, tvb(at + 4 * k, 2)); ht:add(fh.egress_if, tvb(at + 4 * k + 2, 2))
				elseif b == 2 then ht:add(fh.hop_latency, r)
				elseif b == 3 then ht:add(fh.queue_id, tvb(at + 4 * k, 1)); ht:add(fh.queue_occupancy, tvb(at + 4 * k + 1, 3))
				elseif b == 4 then ht:add(fh.ingress_timestamp, r, UInt64(r:uint()))
				elseif b == 5 then ht:add(fh.egress_timestamp, r, UInt64(r:uint()))
				elseif b == 6 then ht:add(fi.v05_congestion, r)
				elseif b == 7 then ht:add(fh.tx_utilization, r)
				else ht:add(r, "Value of instruction bit " .. b) end
				k = k + 1
			end
		end
		at = at + ic * 4
	end
	if typ == 3 and at + 4 <= off + len then
		t:add(fi.sequence, tvb(at, 4))
		at = at + 4
	end
	if at + 4 == off + len then
		local tt = t:add(fi.v05_tail, tvb(at, 4))
		tt:add(fi.v05_tail_proto, tvb(at, 1))
		tt:add(fi.v05_tail_port, tvb(at + 1, 2))
		tt:add(fi.v05_tail_dscp, tvb(at + 3, 1))
		-- The UDP-extension variant keeps the original L4 header after it.
		if encap == "udp-port" and off + len < tvb:len() then
			if DissectorTable.get("ip.proto"):try(tvb(at, 1):uint(), tvb(off + len):tvb(), pinfo, tree) then
				return tvb:len()
			end
		end
	end
	pinfo.cols.protocol = "INT 0.5"
	if off + len < tvb:len() then Dissector.get("data"):call(tvb(off + len):tvb(), pinfo, tree) end
	return tvb:len()
end

-- The TCP/UDP heuristic: the configured markings first, as a parser would,
-- then INT 0.5, then an unmarked but consistent INT v2.1 shim.
local function heuristic(tvb, pinfo, tree, proto)
	local p = int_proto.prefs
	tree = in_report_tree(tree)
	local dscp
	if last_offset(x_ipv6_version) > last_offset(x_ip_version) then dscp = last(x_ipv6_dscp) else dscp = last(x_ip_dscp) end
	dscp = dscp or 0
	if proto == "udp" then
		local dport = last(x_udp_dstport)
		if p.udp_port ~= 0 and dport == p.udp_port then
			if tvb:len() < 16 then return false end
			return dissect_l4(tvb, pinfo, tree, 0, "udp-port", 0) > 0
		end
	end
	local off = 0
	if p.dscp_mask ~= 0 and band(dscp, p.dscp_mask) == p.dscp then
		if tvb:len() < 16 then return false end
		return dissect_l4(tvb, pinfo, tree, off, "dscp", 0) > 0
	end
	local hi, lo = probe_marker()
	if hi and tvb:len() >= 8 + 16 and tvb(0, 4):uint() == hi and tvb(4, 4):uint() == lo then
		return dissect_l4(tvb, pinfo, tree, 8, "probe-marker", 8) > 0
	end
	if proto == "udp" then
		local dport = last(x_udp_dstport)
		if p.int05_port ~= 0 and dport == p.int05_port and tvb:len() >= 4 then
			return dissect_int05(tvb, pinfo, tree, 0, "udp-port") > 0
		end
	end
	-- Unmarked INT is read up to the end of a report's embedded packet,
	-- past the IP length: some hosts' reports leave it short of the stack.
	local ext = tvb
	if in_report and report_inner then
		local start = tvb:offset() - report_inner:offset()
		if start >= 0 and start < report_inner:len() and report_inner:len() - start > tvb:len() then
			ext = report_inner(start):tvb()
		end
	end
	if p.int05_dscp_mask ~= 0 and band(dscp, p.int05_dscp_mask) == p.int05_dscp and looks_int05(ext, 0) then
		return dissect_int05(ext, pinfo, tree, 0, "dscp") > 0
	end
	if p.detect and looks_v21_shim(ext, 0) then
		local npt = band(rshift(ext(0, 1):uint(), 2), 3)
		return dissect_l4(ext, pinfo, tree, 0, npt ~= 0 and "udp-port" or "dscp", 0) > 0
	end
	return false
end

int_proto:register_heuristic("udp", function(tvb, pinfo, tree) return heuristic(tvb, pinfo, tree, "udp") end)
int_proto:register_heuristic("tcp", function(tvb, pinfo, tree) return heuristic(tvb, pinfo, tree, "tcp") end)

-- INT after GRE --------------------------------------------------------------

function gre_entry.dissector(tvb, pinfo, tree)
	if tvb:len() < 4 then return 0 end
	tree = in_report_tree(tree)
	local len = tvb(1, 1):uint() * 4
	local t = tree:add(int_proto, tvb(0, math.min(4 + len, tvb:len())))
	t:add(fi.encap, "gre")
	local st = t:add(fi.shim, tvb(0, 4))
	st:add(fi.shim_type, tvb(0, 1))
	st:add(fi.gre_g, tvb(0, 1))
	st:add(fi.shim_length, tvb(1, 1))
	st:add(fi.gre_next, tvb(2, 2))
	dissect_header(tvb, pinfo, t, 4, len, rshift(tvb(0, 1):uint(), 4))
	pinfo.cols.protocol = "INT"
	if 4 + len < tvb:len() and not DissectorTable.get("ethertype"):try(tvb(2, 2):uint(), tvb(4 + len):tvb(), pinfo, tree) then
		Dissector.get("data"):call(tvb(4 + len):tvb(), pinfo, tree)
	end
	return tvb:len()
end

-- INT in VXLAN-GPE (next protocol 0x82) ----------------------------------------

function gpe_entry.dissector(tvb, pinfo, tree)
	local at, next = 0, 0x82
	tree = in_report_tree(tree)
	-- The chain of INT shims; each names the protocol after it.
	while next == 0x82 and at + 4 <= tvb:len() do
		local len = tvb(at + 1, 1):uint() * 4
		local t = tree:add(int_proto, tvb(at, math.min(4 + len, tvb:len() - at)))
		t:add(fi.encap, "vxlan-gpe")
		local st = t:add(fi.shim, tvb(at, 4))
		st:add(fi.shim_type, tvb(at, 1))
		st:add(fi.shim_length, tvb(at + 1, 1))
		st:add(fi.gpe_g, tvb(at + 2, 1))
		st:add(fi.gpe_next, tvb(at + 3, 1))
		local htype = rshift(tvb(at, 1):uint(), 4)
		if htype == 1 or htype == 3 then
			dissect_header(tvb, pinfo, t, at + 4, len, htype)
		else
			t:add(fi.type, header_types[htype] or ("type " .. htype))
		end
		next = tvb(at + 3, 1):uint()
		at = at + 4 + len
	end
	pinfo.cols.protocol = "INT"
	if at < tvb:len() and not DissectorTable.get("vxlan.next_proto"):try(next, tvb(at):tvb(), pinfo, tree) then
		Dissector.get("data"):call(tvb(at):tvb(), pinfo, tree)
	end
	return tvb:len()
end

-- Geneve, for its INT options -------------------------------------------------

function geneve_proto.dissector(tvb, pinfo, tree)
	if tvb:len() < 8 then return 0 end
	tree = in_report_tree(tree)
	local t = tree:add(geneve_proto, tvb(0, 8))
	t:add(fg.version, tvb(0, 1))
	t:add(fg.opt_len, tvb(0, 1))
	t:add(fg.oam, tvb(1, 1))
	t:add(fg.critical, tvb(1, 1))
	t:add(fg.protocol, tvb(2, 2))
	t:add(fg.vni, tvb(4, 3))
	local optend = 8 + band(tvb(0, 1):uint(), 0x3f) * 4
	if optend > tvb:len() then
		t:add_proto_expert_info(ef_malformed, "Geneve options beyond the packet")
		return tvb:len()
	end
	t:set_len(optend)
	local at = 8
	while at + 4 <= optend do
		local class, otype, olen = tvb(at, 2):uint(), tvb(at + 2, 1):uint(), band(tvb(at + 3, 1):uint(), 0x1f) * 4
		if at + 4 + olen > optend then
			t:add_proto_expert_info(ef_malformed, "Geneve option beyond the options")
			break
		end
		local htype = band(otype, 0x7f)
		if class == 0x0103 and (htype == 1 or htype == 3) then
			local it = tree:add(int_proto, tvb(at, 4 + olen))
			it:add(fi.encap, "geneve")
			local st = it:add(fi.shim, tvb(at, 4)):set_text("Geneve option header")
			st:add(fi.geneve_class, tvb(at, 2))
			st:add(fi.geneve_critical, tvb(at + 2, 1))
			st:add(fi.geneve_type, tvb(at + 2, 1))
			st:add(fi.geneve_length, tvb(at + 3, 1))
			dissect_header(tvb(0, optend):tvb(), pinfo, it, at + 4, olen, htype)
			pinfo.cols.protocol = "INT"
		else
			t:add(fg.option, tvb(at, 4 + olen)):set_text(string.format("Option class 0x%04x type %d (%d bytes)", class, otype, olen))
		end
		at = at + 4 + olen
	end
	if optend < tvb:len() and not DissectorTable.get("ethertype"):try(tvb(2, 2):uint(), tvb(optend):tvb(), pinfo, tree) then
		Dissector.get("data"):call(tvb(optend):tvb(), pinfo, tree)
	end
	return tvb:len()
end

-- Telemetry Report v2.0 --------------------------------------------------------

local function dissect_inner(tvb, pinfo, tree, in_type)
	local d
	if in_type == 3 then d = Dissector.get("eth_withoutfcs")
	elseif in_type == 4 then d = Dissector.get("ip")
	elseif in_type == 5 then d = Dissector.get("ipv6") end
	if d == nil then
		tree:add(fr.inner, tvb())
		return
	end
	local saved, saved_tree, saved_inner = in_report, report_tree, report_inner
	in_report, report_tree, report_inner = true, tree, tvb
	-- A cut embedded packet makes the dissectors below throw; the report
	-- tree stays.
	-- (A subset of its own: IP trims the buffer it gets to its length.)
	pcall(function() d:call(tvb(0):tvb(), pinfo, tree) end)
	in_report, report_tree, report_inner = saved, saved_tree, saved_inner
end

local function dissect_v2(tvb, pinfo, tree)
	local t = tree:add(rep_proto, tvb())
	t:add(fr.version, tvb(0, 1))
	t:add(fr.hw_id, tvb(0, 2))
	t:add(fr.sequence, tvb(0, 4))
	t:add(fr.node_id, tvb(4, 4))
	local at, n = 8, 0
	while at < tvb:len() do
		if tvb:len() - at < 4 then
			t:add_proto_expert_info(ef_rep_malformed, "Individual report header truncated")
			break
		end
		local b0, words, mdw = tvb(at, 1):uint(), tvb(at + 1, 1):uint(), tvb(at + 2, 1):uint()
		local rtype, itype = rshift(b0, 4), band(b0, 0x0f)
		local endp = tvb:len()
		if words ~= 255 then endp = at + 4 + words * 4 end
		if endp > tvb:len() then
			t:add_proto_expert_info(ef_rep_malformed, "Individual report beyond the packet")
			break
		end
		local rt = t:add(fr.report, tvb(at, endp - at))
		rt:set_text(string.format("Report %d: %s, inner %s", n, rep_types[rtype] or rtype, in_types[itype] or itype))
		rt:add(fr.rep_type, tvb(at, 1))
		rt:add(fr.in_type, tvb(at, 1))
		rt:add(fr.report_length, tvb(at + 1, 1))
		rt:add(fr.md_length, tvb(at + 2, 1))
		rt:add(fr.d, tvb(at + 3, 1))
		rt:add(fr.q, tvb(at + 3, 1))
		rt:add(fr.f, tvb(at + 3, 1))
		rt:add(fr.i, tvb(at + 3, 1))
		local body = at + 4
		if rtype == 1 then
			if endp - body < 8 + mdw * 4 then
				rt:add_proto_expert_info(ef_rep_malformed, "Metadata beyond the report")
				break
			end
			local bits = add_bitmap(rt, fr.rep_md_bits, rep_bits, tvb, body)
			rt:add(fr.domain_id, tvb(body + 2, 2))
			rt:add(fr.ds_md_bits, tvb(body + 4, 2))
			rt:add(fr.ds_md_status, tvb(body + 6, 2))
			local md = body + 8
			local mt = rt:add(fr.md, tvb(md, mdw * 4))
			local e = add_md(mt, fm, tvb, md, band(bits, 0x7ffe), false)
			if band(bits, 1) ~= 0 then
				mt:add(fr.drop_queue_id, tvb(e, 1))
				mt:add(fr.drop_reason, tvb(e + 1, 1))
				e = e + 4
			end
			if md + mdw * 4 > e then rt:add(fr.ds_md, tvb(e, md + mdw * 4 - e)) end
			body = md + mdw * 4
		end
		if endp > body then
			rt:add(fr.inner_length, tvb(body, endp - body), endp - body)
			dissect_inner(tvb(body, endp - body):tvb(), pinfo, rt, itype)
		end
		n = n + 1
		at = endp
	end
	pinfo.cols.info = string.format("INT report v2.0, node %d, %d report%s", tvb(4, 4):uint(), n, n == 1 and "" or "s")
end

-- Telemetry Report 0.5 ------------------------------------------------------

local function dissect_v05(tvb, pinfo, tree)
	local t = tree:add(rep_proto, tvb())
	t:set_text("INT Telemetry Report 0.5")
	t:add(fr.version, tvb(0, 1))
	t:add(fr.v05_next, tvb(0, 1))
	t:add(fr.d, tvb(1, 1))
	t:add(fr.q, tvb(1, 1))
	t:add(fr.f, tvb(1, 1))
	t:add(fr.v05_hw_id, tvb(3, 1))
	t:add(fr.v05_sequence, tvb(4, 4))
	t:add(fr.v05_ingress_ts, tvb(8, 4))
	local np = band(tvb(0, 1):uint(), 0x0f)
	local at = 12
	local node = ""
	if np == 1 or np == 2 then
		local n = (np == 2) and 16 or 12
		if tvb:len() - at < n then
			t:add_proto_expert_info(ef_rep_malformed, "Switch header truncated")
			return
		end
		local st = t:add(fr.v05_switch, tvb(at, n)):set_text(np == 2 and "Switch local header" or "Drop header")
		st:add(fr.v05_switch_id, tvb(at, 4))
		st:add(fm.ingress_if, tvb(at + 4, 2))
		st:add(fm.egress_if, tvb(at + 6, 2))
		if np == 2 then
			st:add(fm.queue_id, tvb(at + 8, 1))
			st:add(fm.queue_occupancy, tvb(at + 9, 3))
			st:add(fr.v05_egress_ts, tvb(at + 12, 4))
			local lat = (tvb(at + 12, 4):uint() - tvb(8, 4):uint()) % 4294967296
			st:add(fm.hop_latency, tvb(at + 12, 4), lat):set_generated():append_text(" (egress - ingress timestamp)")
		else
			st:add(fr.v05_drop_queue, tvb(at + 8, 1))
			st:add(fr.drop_reason, tvb(at + 9, 1))
		end
		node = " switch " .. tvb(at, 4):uint()
		at = at + n
	elseif np == 4 then
		if tvb:len() - at >= 4 and rshift(tvb(at, 1):uint(), 4) ~= 4 then
			t:add(fr.v05_reporter, tvb(at, 4))
			node = " node " .. tvb(at, 4):uint()
			at = at + 4
		end
	end
	if at < tvb:len() then
		t:add(fr.inner_length, tvb(at), tvb:len() - at)
		local itype = 3
		if np == 4 then itype = 4 elseif np == 3 then itype = 0 end
		dissect_inner(tvb(at):tvb(), pinfo, t, itype)
	end
	pinfo.cols.info = string.format("INT report 0.5 (%s)%s", tr05_next[np] or np, node)
end

function rep_proto.dissector(tvb, pinfo, tree)
	if tvb:len() < 8 then return 0 end
	local v = rshift(tvb(0, 1):uint(), 4)
	pinfo.cols.protocol = "INT-TR"
	if v == 2 then
		dissect_v2(tvb, pinfo, tree)
	elseif v == 0 and tvb:len() >= 12 then
		dissect_v05(tvb, pinfo, tree)
	else
		return 0
	end
	return tvb:len()
end

-- Registration -------------------------------------------------------------

local registered = {}
local function register()
	local udp = DissectorTable.get("udp.port")
	for _, r in ipairs(registered) do r[1]:remove(r[2], r[3]) end
	registered = {}
	local function add(tbl, key, p)
		if key ~= 0 then
			tbl:add(key, p)
			registered[#registered + 1] = { tbl, key, p }
		end
	end
	add(udp, rep_proto.prefs.udp_port, rep_proto)
	add(udp, int_proto.prefs.geneve_port, geneve_proto)
	add(DissectorTable.get("gre.proto"), int_proto.prefs.gre_proto, gre_entry)
end
DissectorTable.get("vxlan.next_proto"):add(0x82, gpe_entry)
int_proto.prefs_changed = register
rep_proto.prefs_changed = register
register()

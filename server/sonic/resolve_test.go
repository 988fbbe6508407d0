package sonic_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/server/sonic"
)

// orchApply applies through intd's orchestrator on an in-memory dataplane,
// as the server's Set would (schema validation, then Apply).
func orchApply(t *testing.T) sonic.ApplyFunc {
	orch := dtel.New(saitest.New(), dtel.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	return func(ctx context.Context, d *gen.Device) error {
		if err := d.ΛValidate(); err != nil {
			return err
		}
		return orch.Apply(ctx, d)
	}
}

func parse(t *testing.T, js string) sonic.Config {
	t.Helper()
	cfg, err := sonic.ParseConfigDB([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func statusOf(res *sonic.Result, key string) *sonic.Status {
	for _, s := range res.Statuses {
		if s.Key.String() == key {
			return s
		}
	}
	return nil
}

// Entries intd refuses, each with the field and reason, alone in a
// configuration whose other entries apply.
func TestRefusals(t *testing.T) {
	base := `"DTEL_INT_SESSION": {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
	  "DTEL_REPORT_SESSION": {"RS": {"SRC_IP": "10.0.0.1", "DST_IP_LIST": "10.0.0.2", "UDP_DEST_PORT": "32766"}},
	  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|GOOD": {"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "INT", "INT_SESSION": "MD"}`
	for _, tc := range []struct {
		name, entry, key, field, reason string
	}{
		{"unknown DTEL attribute", `"DTEL": {"FOO": {"FOO": "1"}}`, "DTEL|FOO", "", "unknown DTEL attribute FOO"},
		{"DTEL field named otherwise", `"DTEL": {"SWITCH_ID": {"ID": "1"}}`, "DTEL|SWITCH_ID", "ID", "holds only the field SWITCH_ID"},
		{"bad bool", `"DTEL": {"POSTCARD": {"POSTCARD": "yes"}}`, "DTEL|POSTCARD", "POSTCARD", `"yes" is not TRUE or FALSE`},
		{"bad number", `"DTEL": {"SWITCH_ID": {"SWITCH_ID": "one"}}`, "DTEL|SWITCH_ID", "SWITCH_ID", `"one" is not a number`},
		{"DSCP value outside mask", `"DTEL": {"INT_L4_DSCP": {"INT_L4_DSCP_VALUE": "3", "INT_L4_DSCP_MASK": "2"}}`, "DTEL|INT_L4_DSCP", "INT_L4_DSCP_VALUE", "outside INT_L4_DSCP_MASK"},
		{"DSCP mask missing", `"DTEL": {"INT_L4_DSCP": {"INT_L4_DSCP_VALUE": "32"}}`, "DTEL|INT_L4_DSCP", "INT_L4_DSCP_MASK", "missing"},
		{"bad sink port", `"DTEL": {"SINK_PORT_LIST": {"a/b": "a/b"}}`, "DTEL|SINK_PORT_LIST", "a/b", "not a valid port name"},
		{"report session without port", `"DTEL_REPORT_SESSION": {"R2": {"SRC_IP": "10.0.0.1", "DST_IP_LIST": "10.0.0.2"}}`, "DTEL_REPORT_SESSION|R2", "UDP_DEST_PORT", "missing"},
		{"bad collector", `"DTEL_REPORT_SESSION": {"R2": {"SRC_IP": "10.0.0.1", "DST_IP_LIST": "10.0.0.2;x", "UDP_DEST_PORT": "1"}}`, "DTEL_REPORT_SESSION|R2", "DST_IP_LIST", `"x" is not an IP address`},
		{"queue report unknown field", `"DTEL_QUEUE_REPORT": {"Ethernet0|1": {"REPORT_TAIL_DROP": "TRUE", "COLOUR": "red"}}`, "DTEL_QUEUE_REPORT|Ethernet0|1", "COLOUR", "unknown field"},
		{"queue report without trigger", `"DTEL_QUEUE_REPORT": {"Ethernet0|1": {"THRESHOLD_BREACH_QUOTA": "5"}}`, "DTEL_QUEUE_REPORT|Ethernet0|1", "", "nothing to report"},
		{"queue report bad key", `"DTEL_QUEUE_REPORT": {"Ethernet0": {"REPORT_TAIL_DROP": "TRUE"}}`, "DTEL_QUEUE_REPORT|Ethernet0", "", "PORT|QUEUE"},
		{"unknown event", `"DTEL_EVENT": {"EVENT_TYPE_NOPE": {"EVENT_REPORT_SESSION": "RS"}}`, "DTEL_EVENT|EVENT_TYPE_NOPE", "", "unknown event type"},
		{"egress watchlist", `"ACL_TABLE": {"W": {"type": "DTEL_FLOW_WATCHLIST", "stage": "egress"}}`, "ACL_TABLE|W", "stage", "ingress"},
		{"watchlist bound to ports", `"ACL_TABLE": {"W": {"type": "DTEL_FLOW_WATCHLIST", "ports": ["Ethernet0"]}}`, "ACL_TABLE|W", "ports", "switch-wide"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := "{" + base + "}, " + tc.entry + "}"
			if strings.HasPrefix(tc.entry, `"ACL_RULE"`) {
				t.Fatal("use rule cases")
			}
			res, err := sonic.Resolve(context.Background(), parse(t, js), nil, sonic.TranslateOptions{NodeID: 1}, orchApply(t))
			if err != nil {
				t.Fatal(err)
			}
			st := statusOf(res, tc.key)
			if st == nil || st.Applied || st.Field != tc.field || !strings.Contains(st.Reason, tc.reason) {
				t.Errorf("status %+v, want field %q reason ~%q", st, tc.field, tc.reason)
			}
			if good := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|GOOD"); good == nil || !good.Applied {
				t.Errorf("the good rule: %+v", good)
			}
		})
	}
}

// Rules intd refuses, with the field and reason.
func TestRuleRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, fields, field, reason string
	}{
		{"no priority", `"FLOW_OP": "NOP", "IP_TYPE": "ANY"`, "PRIORITY", "missing"},
		{"priority too high", `"PRIORITY": "40000", "FLOW_OP": "NOP", "IP_TYPE": "ANY"`, "PRIORITY", "above 32767"},
		{"no match", `"PRIORITY": "1", "FLOW_OP": "NOP"`, "", "needs a match field"},
		{"no action", `"PRIORITY": "1", "IP_TYPE": "ANY"`, "", "needs a DTel action"},
		{"ARP", `"PRIORITY": "1", "ETHER_TYPE": "0x0806", "FLOW_OP": "NOP"`, "ETHER_TYPE", "IPv4 (0x0800) and IPv6"},
		{"families", `"PRIORITY": "1", "ETHER_TYPE": "0x86DD", "SRC_IP": "10.0.0.0/8", "FLOW_OP": "NOP"`, "SRC_IP", "IPv4 contradicts ETHER_TYPE"},
		{"v6 in SRC_IP", `"PRIORITY": "1", "SRC_IP": "2001:db8::/32", "FLOW_OP": "NOP"`, "SRC_IP", "not an IPv4 prefix"},
		{"ICMP of TCP", `"PRIORITY": "1", "IP_PROTOCOL": "6", "ICMP_TYPE": "8", "FLOW_OP": "NOP"`, "ICMP_TYPE", "needs IP_PROTOCOL 1, not 6"},
		{"ICMP and ICMPv6", `"PRIORITY": "1", "ICMPV6_TYPE": "128", "ICMP_TYPE": "8", "FLOW_OP": "NOP"`, "ICMP_TYPE", "ICMP and ICMPv6 fields"},
		{"ICMP type under mask", `"PRIORITY": "1", "ICMP_TYPE": "8/0x0f", "FLOW_OP": "NOP"`, "ICMP_TYPE", "exactly"},
		{"VLAN", `"PRIORITY": "1", "VLAN_ID": "8", "FLOW_OP": "NOP"`, "VLAN_ID", "not supported"},
		{"inner ARP", `"PRIORITY": "1", "INNER_ETHER_TYPE": "0x0806", "FLOW_OP": "NOP"`, "INNER_ETHER_TYPE", "inner IPv4 (0x0800) and IPv6"},
		{"packet action", `"PRIORITY": "1", "IP_TYPE": "ANY", "PACKET_ACTION": "DROP"`, "PACKET_ACTION", "not a DTel watchlist action"},
		{"unknown", `"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "NOP", "COLOUR": "red"`, "COLOUR", "unknown field"},
		{"IOAM", `"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "IOAM"`, "FLOW_OP", "IOAM"},
		{"ports of ICMP", `"PRIORITY": "1", "IP_PROTOCOL": "1", "L4_DST_PORT": "80", "FLOW_OP": "NOP"`, "IP_PROTOCOL", "L4 ports need protocol"},
		{"TCP flags of UDP", `"PRIORITY": "1", "IP_PROTOCOL": "17", "TCP_FLAGS": "0x02", "FLOW_OP": "NOP"`, "TCP_FLAGS", "need IP_PROTOCOL 6"},
		{"TCP flags beyond 6 bits", `"PRIORITY": "1", "TCP_FLAGS": "0x80", "FLOW_OP": "NOP"`, "TCP_FLAGS", "out of range"},
		{"DSCP under mask 0", `"PRIORITY": "1", "DSCP": "0/0", "FLOW_OP": "NOP"`, "DSCP", "matches every packet"},
		{"bad range", `"PRIORITY": "1", "IP_PROTOCOL": "6", "L4_DST_PORT_RANGE": "90-80", "FLOW_OP": "NOP"`, "L4_DST_PORT_RANGE", "low is above high"},
		{"port and range", `"PRIORITY": "1", "IP_PROTOCOL": "6", "L4_DST_PORT": "80", "L4_DST_PORT_RANGE": "80-90", "FLOW_OP": "NOP"`, "L4_DST_PORT_RANGE", "give one"},
		{"two ingress ports", `"PRIORITY": "1", "IN_PORTS": "Ethernet0,Ethernet4", "FLOW_OP": "NOP"`, "IN_PORTS", "one ingress port"},
		{"inner port without protocol", `"PRIORITY": "1", "INNER_L4_DST_PORT": "80", "FLOW_OP": "NOP"`, "INNER_IP_PROTOCOL", "inner L4 ports"},
		{"dangling INT session", `"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "INT", "INT_SESSION": "NOPE"`, "INT_SESSION", "DTEL_INT_SESSION|NOPE does not exist"},
		{"INT without session", `"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "INT"`, "INT_SESSION", "needs an INT session"},
		{"sample 0", `"PRIORITY": "1", "IP_TYPE": "ANY", "FLOW_OP": "POSTCARD", "FLOW_SAMPLE_PERCENT": "0"`, "FLOW_SAMPLE_PERCENT", "acts on no flow"},
		{"same priority", `"PRIORITY": "7", "IP_TYPE": "ANY", "FLOW_OP": "NOP"`, "PRIORITY", "also the priority of ACL_RULE|DTEL_FLOW_WATCHLIST|A"},
		{"case twice", `"PRIORITY": "1", "priority": "2", "IP_TYPE": "ANY", "FLOW_OP": "NOP"`, "PRIORITY", "different cases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := `{"DTEL_INT_SESSION": {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
			  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|A": {"PRIORITY": "7", "IP_TYPE": "ANY", "FLOW_OP": "INT", "INT_SESSION": "MD"},
			  "DTEL_FLOW_WATCHLIST|Z": {` + tc.fields + `}}}`
			res, err := sonic.Resolve(context.Background(), parse(t, js), nil, sonic.TranslateOptions{NodeID: 1}, orchApply(t))
			if err != nil {
				t.Fatal(err)
			}
			st := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|Z")
			if st == nil || st.Applied || st.Field != tc.field || !strings.Contains(st.Reason, tc.reason) {
				t.Errorf("status %+v, want field %q reason ~%q", st, tc.field, tc.reason)
			}
			if a := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|A"); a == nil || !a.Applied {
				t.Errorf("rule A: %+v", a)
			}
		})
	}
}

// A refused edit keeps the previous version until that one cannot stand
// either (its INT session deleted): then the rule is out.
func TestPreviousVersion(t *testing.T) {
	ctx := context.Background()
	apply := orchApply(t)
	v1 := parse(t, `{"DTEL_INT_SESSION": {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
	  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|R": {"PRIORITY": "7", "ETHER_TYPE": "0x0800", "FLOW_OP": "INT", "INT_SESSION": "MD"}}}`)
	res, err := sonic.Resolve(ctx, v1, nil, sonic.TranslateOptions{NodeID: 1}, apply)
	if err != nil || res.Refused() != 0 {
		t.Fatalf("v1: %v %+v", err, res)
	}
	v2 := parse(t, `{"DTEL_INT_SESSION": {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
	  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|R": {"PRIORITY": "7", "ETHER_TYPE": "0x0800", "FLOW_OP": "INT", "INT_SESSION": "MD", "VLAN_ID": "5"}}}`)
	res, err = sonic.Resolve(ctx, v2, res.Used, sonic.TranslateOptions{NodeID: 1}, apply)
	if err != nil {
		t.Fatal(err)
	}
	st := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|R")
	if st.Applied || !st.Previous || st.InEffect() != "previous" || st.Field != "VLAN_ID" {
		t.Errorf("v2 status %+v", st)
	}
	if res.Device.GetInt().GetWatchlist().GetEntries().GetEntry(sonic.SeqOf(7)) == nil {
		t.Error("v2: the previous version of R is not in the configuration")
	}
	// The session goes, and the previous R with it.
	v3 := parse(t, `{"ACL_RULE": {"DTEL_FLOW_WATCHLIST|R": {"PRIORITY": "7", "ETHER_TYPE": "0x0800", "FLOW_OP": "INT", "INT_SESSION": "MD", "VLAN_ID": "5"}}}`)
	res, err = sonic.Resolve(ctx, v3, res.Used, sonic.TranslateOptions{NodeID: 1}, apply)
	if err != nil {
		t.Fatal(err)
	}
	if st := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|R"); st.InEffect() != "none" || st.Field != "INT_SESSION" {
		t.Errorf("v3 status %+v", st)
	}
	if res.Device.GetInt().GetWatchlist() != nil {
		t.Error("v3: R is still in the configuration")
	}
}

// A rule the orchestrator refuses (reporting all packets without a flow
// operation) is tied back to its entry and field by the YANG path of the
// error; the second attempt applies the rest.
func TestApplyErrorAttribution(t *testing.T) {
	ctx := context.Background()
	apply := orchApply(t)
	cfg := parse(t, `{"DTEL_INT_SESSION": {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
	  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|R": {"PRIORITY": "7", "IP_TYPE": "ANY", "REPORT_ALL_PACKETS": "TRUE"},
	    "DTEL_FLOW_WATCHLIST|S": {"PRIORITY": "8", "IP_TYPE": "ANY", "FLOW_OP": "INT", "INT_SESSION": "MD"}}}`)
	res, err := sonic.Resolve(ctx, cfg, nil, sonic.TranslateOptions{NodeID: 1}, apply)
	if err != nil {
		t.Fatal(err)
	}
	st := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|R")
	if st.Applied || st.Field != "REPORT_ALL_PACKETS" || st.Path != "/int/watchlist/entries/entry[sequence-id=65520]/actions/config/report-all-packets" ||
		st.Reason != "report all packets needs flow op INT or POSTCARD" {
		t.Errorf("status %+v", st)
	}
	if res.Attempts != 2 {
		t.Errorf("%d attempts, want 2", res.Attempts)
	}
	if s := statusOf(res, "ACL_RULE|DTEL_FLOW_WATCHLIST|S"); !s.Applied {
		t.Errorf("S: %+v", s)
	}
}

// database_config.json: numbers, separators and servers, with the
// unix socket of an instance when it exists; --sonic-config-db overrides
// CONFIG_DB's instance.
func TestLocate(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	os.WriteFile(sock, nil, 0o600)
	f := filepath.Join(dir, "database_config.json")
	os.WriteFile(f, []byte(`{"INSTANCES": {"redis": {"hostname": "127.0.0.1", "port": 6379, "unix_socket_path": "`+sock+`"},
	  "other": {"hostname": "10.0.0.9", "port": 6380, "unix_socket_path": "/nonexistent/redis.sock"}},
	  "DATABASES": {"CONFIG_DB": {"id": 14, "separator": "|", "instance": "redis"},
	    "STATE_DB": {"id": 16, "separator": "|", "instance": "other"},
	    "COUNTERS_DB": {"id": 12, "separator": ":", "instance": "redis"}}}`), 0o600)
	dbs, err := sonic.Locate("", f)
	if err != nil {
		t.Fatal(err)
	}
	if dbs.Config.Network != "unix" || dbs.Config.Addr != sock || dbs.Config.ID != 14 ||
		dbs.State.Network != "tcp" || dbs.State.Addr != "10.0.0.9:6380" || dbs.State.ID != 16 ||
		dbs.Counters.ID != 12 || dbs.Counters.Sep != ":" {
		t.Errorf("%+v", dbs)
	}
	dbs, err = sonic.Locate("127.0.0.1:7000", f)
	if err != nil || dbs.Config.Addr != "127.0.0.1:7000" || dbs.Counters.Addr != "127.0.0.1:7000" || dbs.State.Addr != "10.0.0.9:6380" {
		t.Errorf("override: %+v %v", dbs, err)
	}
	dbs, err = sonic.Locate("/var/run/redis/redis.sock", "")
	if err != nil || dbs.Config.ID != 4 || dbs.State.ID != 6 || dbs.Counters.ID != 2 || dbs.Config.Network != "unix" {
		t.Errorf("defaults: %+v %v", dbs, err)
	}
	if _, err := sonic.Locate("localhost", ""); err == nil {
		t.Error(`Locate("localhost") accepted an address without port`)
	}
	if _, err := sonic.Locate("", filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing database_config.json accepted")
	}
}

// ICMP and ICMPv6 type and code, DSCP under a mask and the inner EtherType
// reach the watchlist entries; ICMP_TYPE implies protocol 1, ICMPV6_CODE
// protocol 58.
func TestRuleICMPDSCPInnerEtherType(t *testing.T) {
	cfg := parse(t, `{"ACL_RULE": {
	  "DTEL_FLOW_WATCHLIST|PING": {"PRIORITY": "9", "ICMP_TYPE": "8", "ICMP_CODE": "0", "DSCP": "8/0x38", "FLOW_OP": "NOP", "DROP_REPORT_ENABLE": "TRUE"},
	  "DTEL_FLOW_WATCHLIST|ND": {"PRIORITY": "8", "ICMPV6_CODE": "0", "FLOW_OP": "NOP", "DROP_REPORT_ENABLE": "TRUE"},
	  "DTEL_FLOW_WATCHLIST|V6IN": {"PRIORITY": "7", "TUNNEL_VNI": "5001", "INNER_ETHER_TYPE": "0x86DD", "FLOW_OP": "NOP", "DROP_REPORT_ENABLE": "TRUE"}}}`)
	res, err := sonic.Resolve(context.Background(), cfg, nil, sonic.TranslateOptions{NodeID: 1}, orchApply(t))
	if err != nil || res.Refused() != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	es := res.Device.GetInt().GetWatchlist().GetEntries()
	ping := es.GetEntry(sonic.SeqOf(9)).GetMatch().GetConfig()
	if ping.GetProtocol() != 1 || ping.GetIcmpType() != 8 || ping.IcmpCode == nil || ping.GetIcmpCode() != 0 ||
		ping.GetDscp() != 8 || ping.GetDscpMask() != 0x38 {
		t.Errorf("PING: %+v", ping)
	}
	if nd := es.GetEntry(sonic.SeqOf(8)).GetMatch().GetConfig(); nd.GetProtocol() != 58 || nd.IcmpType != nil || nd.IcmpCode == nil {
		t.Errorf("ND: %+v", nd)
	}
	if v := es.GetEntry(sonic.SeqOf(7)).GetVxlanMatch().GetConfig(); v.GetVni() != 5001 || v.GetInnerEtherType() != 0x86dd {
		t.Errorf("V6IN: %+v", v)
	}
}

package sonic_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/sai/spec"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
	"github.com/intd-project/intd/server/sonic"
	"github.com/intd-project/intd/server/sonic/sonictest"
)

const (
	configDB   = 4
	countersDB = 2
	stateDB    = 6
)

// env is intd on an in-memory dataplane (saitest), served over real gRPC,
// its configuration owned by a private redis-server's CONFIG_DB.
type env struct {
	t      *testing.T
	redis  *sonictest.Redis
	b      *saitest.Backend
	srv    *server.Server
	client gpb.GNMIClient
	cancel context.CancelFunc
	done   chan struct{}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, sonictest.Start(t))
}

func newEnvOn(t *testing.T, r *sonictest.Redis) *env {
	t.Helper()
	e := &env{t: t, redis: r, b: saitest.New()}
	log := testLogger(t)
	dbs, err := sonic.Locate("unix:"+r.Socket, "")
	if err != nil {
		t.Fatal(err)
	}
	src, err := sonic.New(sonic.Options{DBs: dbs, Target: "intd", NodeID: 7, StateInterval: 100 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	e.srv, err = intdmodel.New(server.WithLogger(log), server.WithStatePollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	orch := dtel.New(e.b, dtel.WithLogger(log), dtel.WithDataplaneName("saitest"))
	if err := e.srv.AddTarget(context.Background(), "intd", intdmodel.Target(orch), server.TargetOptions{
		Initial: &gen.Device{}, Owner: src.Owner(), InvalidErr: dtel.ErrInvalid}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.client = gpb.NewGNMIClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go func() { src.Run(ctx, e.srv); close(e.done) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		conn.Close()
		e.srv.Close()
	})
	return e
}

// get returns the configuration at path as JSON, "" when there is none.
func (e *env) get(path string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := &gpb.Path{}
	for _, el := range strings.Split(strings.Trim(path, "/"), "/") {
		pe := &gpb.PathElem{Name: el}
		if i := strings.IndexByte(el, '['); i >= 0 {
			pe.Name = el[:i]
			pe.Key = map[string]string{}
			for _, kv := range strings.Split(strings.Trim(el[i:], "[]"), "][") {
				k, v, _ := strings.Cut(kv, "=")
				pe.Key[k] = v
			}
		}
		p.Elem = append(p.Elem, pe)
	}
	resp, err := e.client.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "intd"}, Path: []*gpb.Path{p}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON})
	if status.Code(err) == codes.NotFound {
		return ""
	}
	if err != nil {
		e.t.Fatalf("gNMI Get %s: %v", path, err)
	}
	return string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonVal())
}

// eventually polls cond every 20ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		ok, s := cond()
		if ok {
			return time.Since(start)
		}
		last = s
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v (last: %s)", what, d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor waits until the JSON at path contains every want string.
func (e *env) waitFor(path string, want ...string) time.Duration {
	e.t.Helper()
	return eventually(e.t, 5*time.Second, "gNMI "+path, func() (bool, string) {
		got := e.get(path)
		for _, w := range want {
			if !strings.Contains(got, w) {
				return false, got
			}
		}
		return true, ""
	})
}

// status returns the STATE_DB status of a CONFIG_DB entry.
func (e *env) status(key string) map[string]string {
	return e.redis.HGetAll(stateDB, sonic.StatusTable+"|"+key)
}

func (e *env) waitStatus(key string, want map[string]string) map[string]string {
	e.t.Helper()
	var st map[string]string
	eventually(e.t, 5*time.Second, "STATE_DB status of "+key, func() (bool, string) {
		st = e.status(key)
		for k, v := range want {
			if k == "reason" {
				if !strings.Contains(st[k], v) {
					return false, fmt.Sprint(st)
				}
			} else if st[k] != v {
				return false, fmt.Sprint(st)
			}
		}
		return true, ""
	})
	return st
}

// objects returns the dataplane's objects of type t.
func (e *env) objects(t sai.ObjectType) []sai.Attrs {
	var out []sai.Attrs
	for _, oid := range e.b.Objects(t) {
		if a, ok := e.b.Get(oid); ok {
			out = append(out, a)
		}
	}
	return out
}

func (e *env) dtelObject() sai.DTelAttrs {
	e.t.Helper()
	objs := e.objects(sai.ObjectTypeDTel)
	if len(objs) != 1 {
		e.t.Fatalf("%d DTel objects", len(objs))
	}
	return objs[0].(sai.DTelAttrs)
}

// The DTEL table of sonic-swss's test_dtel.py, written attribute by
// attribute: what intd takes becomes the DTel switch object; a latency
// sensitivity of 100 and an INT L4 DSCP of 128 (beyond 6 bits) are
// refused with their STATE_DB status while the rest applies; fixing one
// applies it; deleting the keys returns the defaults.
func TestDTelGlobalAttribs(t *testing.T) {
	e := newEnv(t)
	r := e.redis
	r.HSet(configDB, "DTEL|SWITCH_ID", "SWITCH_ID", "1")
	r.HSet(configDB, "DTEL|FLOW_STATE_CLEAR_CYCLE", "FLOW_STATE_CLEAR_CYCLE", "10")
	r.HSet(configDB, "DTEL|LATENCY_SENSITIVITY", "LATENCY_SENSITIVITY", "100")
	for _, a := range []string{"INT_ENDPOINT", "INT_TRANSIT", "POSTCARD", "DROP_REPORT", "QUEUE_REPORT"} {
		r.HSet(configDB, "DTEL|"+a, a, "TRUE")
	}
	r.HSet(configDB, "DTEL|SINK_PORT_LIST", "Ethernet0", "Ethernet0", "Ethernet4", "Ethernet4")
	r.HSet(configDB, "DTEL|INT_L4_DSCP", "INT_L4_DSCP_VALUE", "128", "INT_L4_DSCP_MASK", "255")

	e.waitFor("/int/node/config", `"node-id":1`, `"flow-state-clear-cycle":10`, `"int-endpoint":true`,
		`"int-transit":true`, `"postcard":true`, `"drop-report":true`, `"queue-report":true`)
	e.waitFor("/int/interfaces", `"name":"Ethernet0"`, `"name":"Ethernet4"`)
	e.waitStatus("DTEL|LATENCY_SENSITIVITY", map[string]string{"status": "refused", "in_effect": "none",
		"field": "LATENCY_SENSITIVITY", "reason": "100 is out of range 0..31"})
	e.waitStatus("DTEL|INT_L4_DSCP", map[string]string{"status": "refused", "field": "INT_L4_DSCP_VALUE", "reason": "out of range 1..63"})
	e.waitStatus("DTEL|SWITCH_ID", map[string]string{"status": "applied", "in_effect": "current", "paths": "/int/node/config/node-id"})
	d := e.dtelObject()
	if !d.IntEndpointEnable || !d.IntTransitEnable || !d.PostcardEnable || !d.DropReportEnable || !d.QueueReportEnable ||
		d.SwitchID != 1 || d.FlowStateClearCycle != 10*time.Second || d.LatencySensitivity != 8 ||
		!slices.Equal(d.SinkPortList, []string{"Ethernet0", "Ethernet4"}) || d.IntL4DSCP.Value > 63 {
		t.Errorf("DTel object %+v: want the features on, switch ID 1, clear cycle 10s, latency sensitivity 8 (the default), sinks Ethernet0 and Ethernet4, intd's default INT DSCP", d)
	}
	// The model's default DSCP stays in use (a Get shows it), not 128.
	if got := e.get("/int/marking/config"); strings.Contains(got, `"dscp-value":128`) || strings.Contains(got, `"dscp-mask":255`) {
		t.Errorf("refused INT_L4_DSCP applied: %s", got)
	}

	// Fixed, they apply.
	r.HSet(configDB, "DTEL|LATENCY_SENSITIVITY", "LATENCY_SENSITIVITY", "10")
	r.HSet(configDB, "DTEL|INT_L4_DSCP", "INT_L4_DSCP_VALUE", "32", "INT_L4_DSCP_MASK", "32")
	e.waitFor("/int/node/config", `"latency-sensitivity":10`)
	e.waitFor("/int/marking/config", `"dscp-value":32`, `"dscp-mask":32`)
	e.waitStatus("DTEL|LATENCY_SENSITIVITY", map[string]string{"status": "applied", "reason": ""})
	if d := e.dtelObject(); d.LatencySensitivity != 10 || d.IntL4DSCP != (sai.DSCPMatch{Value: 32, Mask: 32}) {
		t.Errorf("DTel object after the fix: %+v", d)
	}

	// Deleted, the defaults return (node-id: intd's --node-id).
	r.Del(configDB, "DTEL|SWITCH_ID", "DTEL|FLOW_STATE_CLEAR_CYCLE", "DTEL|LATENCY_SENSITIVITY", "DTEL|INT_ENDPOINT",
		"DTEL|INT_TRANSIT", "DTEL|POSTCARD", "DTEL|DROP_REPORT", "DTEL|QUEUE_REPORT", "DTEL|SINK_PORT_LIST")
	e.waitFor("/int/node/config", `"node-id":7`)
	eventually(t, 5*time.Second, "status of deleted entries gone", func() (bool, string) {
		st := e.status("DTEL|SWITCH_ID")
		return len(st) == 0, fmt.Sprint(st)
	})
	if d := e.dtelObject(); d.IntEndpointEnable || d.SwitchID != 7 || len(d.SinkPortList) != 0 {
		t.Errorf("DTel object after the deletes: %+v", d)
	}
}

// test_dtel.py's report session RS-1.
func TestDTelReportSessionAttribs(t *testing.T) {
	e := newEnv(t)
	e.redis.HSet(configDB, "DTEL_REPORT_SESSION|RS-1", "SRC_IP", "10.10.10.1", "DST_IP_LIST", "20.20.20.1;20.20.20.2;20.20.20.3",
		"VRF", "default", "TRUNCATE_SIZE", "256", "UDP_DEST_PORT", "2000")
	e.waitFor("/int/report-sessions/report-session[name=RS-1]", `"source-address":"10.10.10.1"`, `"truncate-size":256`,
		`"address":"20.20.20.1","port":2000`, `"address":"20.20.20.2","port":2000`, `"address":"20.20.20.3","port":2000`)
	objs := e.objects(sai.ObjectTypeReportSession)
	if len(objs) != 1 {
		t.Fatalf("%d report sessions", len(objs))
	}
	rs := objs[0].(sai.ReportSessionAttrs)
	var dsts []string
	for _, d := range rs.Destinations {
		dsts = append(dsts, fmt.Sprintf("%v:%d", d.IP, d.UDPPort))
	}
	if rs.SrcIP != netip.MustParseAddr("10.10.10.1") || rs.TruncateSize != 256 || rs.VirtualRouter != "" ||
		!slices.Equal(dsts, []string{"20.20.20.1:2000", "20.20.20.2:2000", "20.20.20.3:2000"}) {
		t.Errorf("report session %+v", rs)
	}
	e.redis.Del(configDB, "DTEL_REPORT_SESSION|RS-1")
	eventually(t, 5*time.Second, "report session removed", func() (bool, string) {
		n := len(e.objects(sai.ObjectTypeReportSession))
		return n == 0, fmt.Sprint(n)
	})
}

// test_dtel.py's INT session INT-1.
func TestDTelINTSessionAttribs(t *testing.T) {
	e := newEnv(t)
	e.redis.HSet(configDB, "DTEL_INT_SESSION|INT-1", "MAX_HOP_COUNT", "50", "COLLECT_SWITCH_ID", "TRUE",
		"COLLECT_INGRESS_TIMESTAMP", "TRUE", "COLLECT_EGRESS_TIMESTAMP", "TRUE", "COLLECT_SWITCH_PORTS", "TRUE", "COLLECT_QUEUE_INFO", "TRUE")
	e.waitFor("/int/int-sessions/int-session[name=INT-1]", `"remaining-hop-count":50`, "METADATA_FIELD_NODE_ID",
		"METADATA_FIELD_LEVEL_1_INTERFACE_IDS", "METADATA_FIELD_QUEUE_OCCUPANCY", "METADATA_FIELD_INGRESS_TIMESTAMP",
		"METADATA_FIELD_EGRESS_TIMESTAMP")
	objs := e.objects(sai.ObjectTypeIntSession)
	if len(objs) != 1 {
		t.Fatalf("%d INT sessions", len(objs))
	}
	is := objs[0].(sai.IntSessionAttrs)
	want := spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstIngressTimestamp | spec.InstEgressTimestamp
	if is.MaxHopCount != 50 || is.Instructions != want || is.Mode != sai.IntModeMD {
		t.Errorf("INT session %+v, want hop count 50, instructions %v", is, want)
	}
	// A session collecting nothing is refused; the previous one stays.
	e.redis.HSet(configDB, "DTEL_INT_SESSION|INT-1", "COLLECT_SWITCH_ID", "FALSE", "COLLECT_INGRESS_TIMESTAMP", "FALSE",
		"COLLECT_EGRESS_TIMESTAMP", "FALSE", "COLLECT_SWITCH_PORTS", "FALSE", "COLLECT_QUEUE_INFO", "FALSE")
	e.waitStatus("DTEL_INT_SESSION|INT-1", map[string]string{"status": "refused", "in_effect": "previous", "reason": "collects nothing"})
	if got := e.get("/int/int-sessions/int-session[name=INT-1]"); !strings.Contains(got, "METADATA_FIELD_NODE_ID") {
		t.Errorf("the previous INT-1 is not kept: %s", got)
	}
}

// test_dtel.py's queue report on Ethernet0 queue 0.
func TestDTelQueueReportAttribs(t *testing.T) {
	e := newEnv(t)
	e.redis.HSet(configDB, "DTEL_QUEUE_REPORT|Ethernet0|0", "QUEUE_DEPTH_THRESHOLD", "1000", "QUEUE_LATENCY_THRESHOLD", "2000",
		"THRESHOLD_BREACH_QUOTA", "3000", "REPORT_TAIL_DROP", "TRUE")
	e.waitFor("/int/queue-reports/queue-report[interface=Ethernet0][queue-id=0]", `"depth-threshold":1000`,
		`"latency-threshold":2000`, `"breach-quota":3000`, `"tail-drop":true`)
	objs := e.objects(sai.ObjectTypeQueueReport)
	if len(objs) != 1 {
		t.Fatalf("%d queue reports", len(objs))
	}
	q := objs[0].(sai.QueueReportAttrs)
	if q.Port != "Ethernet0" || q.Queue != 0 || q.DepthThreshold != 1000 || q.LatencyThreshold != 2000 ||
		q.BreachQuota != 3000 || !q.TailDrop {
		t.Errorf("queue report %+v", q)
	}
}

// test_dtel.py's events on RS-1: DSCP 65 and 64 are beyond 6 bits and
// refused, 63..60 apply.
func TestDTelEventAttribs(t *testing.T) {
	e := newEnv(t)
	r := e.redis
	r.HSet(configDB, "DTEL_REPORT_SESSION|RS-1", "SRC_IP", "10.10.10.1", "DST_IP_LIST", "20.20.20.1;20.20.20.2;20.20.20.3",
		"VRF", "default", "TRUNCATE_SIZE", "256", "UDP_DEST_PORT", "2000")
	events := []struct {
		key, dscp string
		typ       sai.EventType
	}{
		{"EVENT_TYPE_FLOW_STATE", "65", spec.EventFlowState},
		{"EVENT_TYPE_FLOW_REPORT_ALL_PACKETS", "64", spec.EventFlowReportAllPackets},
		{"EVENT_TYPE_FLOW_TCPFLAG", "63", spec.EventFlowTCPFlag},
		{"EVENT_TYPE_QUEUE_REPORT_THRESHOLD_BREACH", "62", spec.EventQueueReportThresholdBreach},
		{"EVENT_TYPE_QUEUE_REPORT_TAIL_DROP", "61", spec.EventQueueReportTailDrop},
		{"EVENT_TYPE_DROP_REPORT", "60", spec.EventDropReport},
	}
	for _, ev := range events {
		r.HSet(configDB, "DTEL_EVENT|"+ev.key, "EVENT_REPORT_SESSION", "RS-1", "EVENT_DSCP_VALUE", ev.dscp)
	}
	e.waitFor("/int/events", `"type":"DROP_REPORT"`, `"type":"QUEUE_REPORT_TAIL_DROP"`,
		`"type":"QUEUE_REPORT_THRESHOLD_BREACH"`, `"type":"FLOW_TCPFLAG"`)
	for _, ev := range events[:2] {
		e.waitStatus("DTEL_EVENT|"+ev.key, map[string]string{"status": "refused", "field": "EVENT_DSCP_VALUE",
			"reason": ev.dscp + " is out of range 0..63"})
	}
	got := map[sai.EventType]uint8{}
	for _, a := range e.objects(sai.ObjectTypeEvent) {
		ev := a.(sai.EventAttrs)
		if ev.ReportSession.IsNull() {
			t.Errorf("event %v without report session", ev.Type)
		}
		got[ev.Type] = ev.DSCP
	}
	want := map[sai.EventType]uint8{spec.EventFlowTCPFlag: 63, spec.EventQueueReportThresholdBreach: 62,
		spec.EventQueueReportTailDrop: 61, spec.EventDropReport: 60}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Without their report session, events are refused (dependents of a
	// missing entry), and come back with it.
	r.Del(configDB, "DTEL_REPORT_SESSION|RS-1")
	e.waitStatus("DTEL_EVENT|EVENT_TYPE_DROP_REPORT", map[string]string{"status": "refused", "field": "EVENT_REPORT_SESSION",
		"reason": "DTEL_REPORT_SESSION|RS-1 does not exist"})
	if n := len(e.objects(sai.ObjectTypeEvent)) + len(e.objects(sai.ObjectTypeReportSession)); n != 0 {
		t.Errorf("%d events and report sessions left", n)
	}
}

// watchlistRules are test_dtel.py's five DTEL_FLOW_WATCHLIST rules.
var watchlistRules = [][]string{
	{"PRIORITY", "30", "ETHER_TYPE", "0x800", "L4_DST_PORT", "1674", "FLOW_OP", "POSTCARD", "REPORT_ALL_PACKETS", "FALSE",
		"DROP_REPORT_ENABLE", "TRUE", "TAIL_DROP_REPORT_ENABLE", "TRUE"},
	{"PRIORITY", "40", "ETHER_TYPE", "0x800", "L4_DST_PORT", "1674", "FLOW_OP", "POSTCARD", "REPORT_ALL_PACKETS", "TRUE",
		"DROP_REPORT_ENABLE", "FALSE", "TAIL_DROP_REPORT_ENABLE", "FALSE"},
	{"PRIORITY", "50", "ETHER_TYPE", "0x800", "L4_DST_PORT", "1674", "FLOW_OP", "POSTCARD", "REPORT_ALL_PACKETS", "TRUE"},
	{"PRIORITY", "60", "ETHER_TYPE", "0x800", "L4_DST_PORT", "1674", "REPORT_ALL_PACKETS", "TRUE",
		"DROP_REPORT_ENABLE", "TRUE", "TAIL_DROP_REPORT_ENABLE", "TRUE"},
	{"PRIORITY", "70", "ETHER_TYPE", "0x800", "L4_DST_PORT", "1674", "FLOW_OP", "NOP", "REPORT_ALL_PACKETS", "FALSE",
		"DROP_REPORT_ENABLE", "TRUE", "TAIL_DROP_REPORT_ENABLE", "TRUE"},
}

// test_dtel.py's watchlist, rule by rule (created, checked, removed): each
// rule matches IPv4 (ETHER_TYPE 0x800) L4 destination port 1674, of TCP
// and of UDP as an ACL would, so it becomes two watchlist entries at the
// rule's priority. RULE-3 reports all packets without a flow operation,
// which intd's orchestrator refuses: its status names the field.
func TestDTelFlowWatchlist(t *testing.T) {
	e := newEnv(t)
	want := []sai.WatchlistAction{
		{FlowOp: sai.FlowOpPostcard, DropReportEnable: true, TailDropReportEnable: true, FlowSamplePercent: 100},
		{FlowOp: sai.FlowOpPostcard, ReportAllPackets: true, FlowSamplePercent: 100},
		{FlowOp: sai.FlowOpPostcard, ReportAllPackets: true, FlowSamplePercent: 100},
		{}, // refused
		{FlowOp: sai.FlowOpNop, DropReportEnable: true, TailDropReportEnable: true},
	}
	for i, fields := range watchlistRules {
		key := fmt.Sprintf("ACL_RULE|DTEL_FLOW_WATCHLIST|RULE-%d", i)
		e.redis.HSet(configDB, key, fields...)
		if i == 3 {
			e.waitStatus(key, map[string]string{"status": "refused", "in_effect": "none",
				"field": "REPORT_ALL_PACKETS", "reason": "report all packets needs flow op INT or POSTCARD"})
			if n := len(e.objects(sai.ObjectTypeWatchlistEntry)); n != 0 {
				t.Errorf("RULE-3: %d watchlist entries", n)
			}
		} else {
			prio := uint16(30 + 10*i)
			seq := sonic.SeqOf(uint32(prio))
			e.waitFor(fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", seq), `"destination-port-min":1674`, `"protocol":6`)
			e.waitStatus(key, map[string]string{"status": "applied",
				"paths": fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d] /int/watchlist/entries/entry[sequence-id=%d]", seq, seq+1)})
			// The rule is written one field at a time, so a sync may
			// apply part of it first: wait for the whole rule.
			eventually(t, 5*time.Second, fmt.Sprintf("RULE-%d applied with all its fields", i), func() (bool, string) {
				ws := e.objects(sai.ObjectTypeWatchlistEntry)
				for _, a := range ws {
					if a.(sai.WatchlistEntryAttrs).Action != want[i] {
						return false, fmt.Sprintf("%+v", ws)
					}
				}
				return len(ws) == 2, fmt.Sprintf("%+v", ws)
			})
			var protos []uint8
			for _, a := range e.objects(sai.ObjectTypeWatchlistEntry) {
				w := a.(sai.WatchlistEntryAttrs)
				protos = append(protos, w.Match.IPProtocol)
				if w.Match.L4DstPort != (sai.PortRange{Lo: 1674, Hi: 1674}) || w.Match.SrcPrefix != netip.MustParsePrefix("0.0.0.0/0") ||
					w.Action != want[i] {
					t.Errorf("RULE-%d: entry %+v, want port 1674 of IPv4 and actions %+v", i, w, want[i])
				}
				// Entry priorities keep SONiC's order: priority P
				// becomes 65535 - 2*(32767-P) and one below.
				if w.Priority != 65535-uint16(seq) && w.Priority != 65535-uint16(seq)-1 {
					t.Errorf("RULE-%d: priority %d", i, w.Priority)
				}
			}
			slices.Sort(protos)
			if !slices.Equal(protos, []uint8{6, 17}) {
				t.Errorf("RULE-%d: entries of protocols %v, want TCP and UDP", i, protos)
			}
		}
		e.redis.Del(configDB, key)
		eventually(t, 5*time.Second, "rule removed", func() (bool, string) {
			n := len(e.objects(sai.ObjectTypeWatchlistEntry))
			return n == 0 && len(e.status(key)) == 0, fmt.Sprint(n)
		})
	}
}

// An edit of a rule takes effect within a second; a bad field is refused
// with its status while the previous version of the rule and every other
// entry stay applied; a gNMI Set is refused since CONFIG_DB owns the
// configuration.
func TestRuleEditAndRefusal(t *testing.T) {
	e := newEnv(t)
	r := e.redis
	r.HSet(configDB, "DTEL_INT_SESSION|INT-1", "COLLECT_SWITCH_ID", "TRUE", "COLLECT_HOP_LATENCY", "TRUE")
	r.HSet(configDB, "ACL_TABLE|WATCH", "type", "DTEL_FLOW_WATCHLIST", "policy_desc", "watched flows", "stage", "ingress")
	r.HSet(configDB, "ACL_RULE|WATCH|WEB", "PRIORITY", "100", "ETHER_TYPE", "0x0800", "DST_IP", "10.0.2.0/24",
		"IP_PROTOCOL", "6", "L4_DST_PORT_RANGE", "80-443", "FLOW_OP", "INT", "INT_SESSION", "INT-1")
	r.HSet(configDB, "ACL_RULE|WATCH|DNS", "PRIORITY", "90", "ETHER_TYPE", "0x0800", "IP_PROTOCOL", "17",
		"L4_DST_PORT", "53", "FLOW_OP", "POSTCARD")
	web := sonic.SeqOf(100)
	e.waitFor(fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", web), `"destination-port-max":443`, `"int-session":"INT-1"`)
	e.waitFor(fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", sonic.SeqOf(90)), `"destination-port-min":53`)

	// The edit, timed from the write to the gNMI Get that shows it.
	start := time.Now()
	r.HSet(configDB, "ACL_RULE|WATCH|WEB", "L4_DST_PORT_RANGE", "8000-8080")
	took := e.waitFor(fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", web), `"destination-port-min":8000`)
	t.Logf("rule edit in effect %v after the HSET", time.Since(start).Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("rule edit took %v, more than 1s", took)
	}
	var found bool
	for _, a := range e.objects(sai.ObjectTypeWatchlistEntry) {
		if w := a.(sai.WatchlistEntryAttrs); w.Match.L4DstPort == (sai.PortRange{Lo: 8000, Hi: 8080}) && w.Action.FlowOp == sai.FlowOpInt {
			found = true
		}
	}
	if !found {
		t.Errorf("no dataplane entry for ports 8000-8080: %v", e.b.Snapshot())
	}

	// A field intd cannot take: refused, the rule's previous version stays.
	r.HSet(configDB, "ACL_RULE|WATCH|WEB", "VLAN_ID", "8")
	e.waitStatus("ACL_RULE|WATCH|WEB", map[string]string{"status": "refused", "in_effect": "previous", "field": "VLAN_ID",
		"reason": "not supported"})
	if got := e.get(fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", web)); !strings.Contains(got, `"destination-port-min":8000`) {
		t.Errorf("previous version of WEB not kept: %s", got)
	}
	e.waitStatus("ACL_RULE|WATCH|DNS", map[string]string{"status": "applied"})
	// A dangling INT session on a new rule: refused, the rest applied.
	r.HSet(configDB, "ACL_RULE|WATCH|SSH", "PRIORITY", "80", "ETHER_TYPE", "0x0800", "IP_PROTOCOL", "6", "L4_DST_PORT", "22",
		"FLOW_OP", "INT", "INT_SESSION", "NOPE")
	e.waitStatus("ACL_RULE|WATCH|SSH", map[string]string{"status": "refused", "in_effect": "none", "field": "INT_SESSION",
		"reason": "DTEL_INT_SESSION|NOPE does not exist"})
	// The status of the sync as a whole.
	st := r.HGetAll(stateDB, sonic.SyncTable+"|intd")
	if st["state"] != "in-sync" || st["refused"] != "2" {
		t.Errorf("sync state %v", st)
	}
	// Fixed: applied again.
	r.Del(configDB, "ACL_RULE|WATCH|SSH")
	c := r.Client(configDB)
	defer c.Close()
	if err := c.HDel(context.Background(), "ACL_RULE|WATCH|WEB", "VLAN_ID").Err(); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ACL_RULE|WATCH|WEB", map[string]string{"status": "applied", "in_effect": "current"})

	// gNMI Set is refused: CONFIG_DB owns the configuration.
	_, err := e.client.Set(context.Background(), &gpb.SetRequest{Prefix: &gpb.Path{Target: "intd"},
		Delete: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}}}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "CONFIG_DB") {
		t.Errorf("gNMI Set: %v, want FAILED_PRECONDITION naming CONFIG_DB", err)
	}
}

// Redis killed mid-run: the running configuration stays; Redis restarted
// on the same socket (with its saved data set): intd reconnects,
// resynchronises, and a rule changed afterwards is applied.
func TestRedisRestart(t *testing.T) {
	e := newEnv(t)
	r := e.redis
	r.HSet(configDB, "DTEL|SWITCH_ID", "SWITCH_ID", "3")
	r.HSet(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|R1", "PRIORITY", "10", "ETHER_TYPE", "0x0800", "IP_PROTOCOL", "17",
		"L4_DST_PORT", "5001", "FLOW_OP", "POSTCARD")
	seq := sonic.SeqOf(10)
	path := fmt.Sprintf("/int/watchlist/entries/entry[sequence-id=%d]", seq)
	e.waitFor(path, `"destination-port-min":5001`)
	e.waitStatus("DTEL|SWITCH_ID", map[string]string{"status": "applied"})
	// Redis comes back with CONFIG_DB but without intd's STATE_DB.
	c := r.Client(stateDB)
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	r.Save()
	r.Kill()
	time.Sleep(500 * time.Millisecond) // intd notices, keeps running
	e.waitFor(path, `"destination-port-min":5001`)
	e.waitFor("/int/node/config", `"node-id":3`)
	if n := len(e.objects(sai.ObjectTypeWatchlistEntry)); n != 1 {
		t.Errorf("%d watchlist entries while Redis is away", n)
	}
	r.Restart()
	r.HSet(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|R1", "L4_DST_PORT", "5002")
	e.waitFor(path, `"destination-port-min":5002`)
	// STATE_DB came back empty: every status is written again.
	e.waitStatus("ACL_RULE|DTEL_FLOW_WATCHLIST|R1", map[string]string{"status": "applied"})
	e.waitStatus("DTEL|SWITCH_ID", map[string]string{"status": "applied"})
}

// Counters reach COUNTERS_DB at the state interval, equal to the gNMI
// state, under the documented keys.
func TestCounters(t *testing.T) {
	e := newEnv(t)
	r := e.redis
	r.HSet(configDB, "DTEL_INT_SESSION|INT-1", "COLLECT_SWITCH_ID", "TRUE")
	r.HSet(configDB, "DTEL_REPORT_SESSION|RS-1", "SRC_IP", "10.0.0.1", "DST_IP_LIST", "10.0.0.9", "UDP_DEST_PORT", "32766")
	r.HSet(configDB, "DTEL_QUEUE_REPORT|Ethernet8|3", "QUEUE_LATENCY_THRESHOLD", "1000")
	r.HSet(configDB, "DTEL_EVENT|EVENT_TYPE_DROP_REPORT", "EVENT_REPORT_SESSION", "RS-1")
	r.HSet(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|ALL", "PRIORITY", "5", "ETHER_TYPE", "0x0800", "L4_DST_PORT", "9", "FLOW_OP", "INT", "INT_SESSION", "INT-1")
	// CONFIG_DB is read table by table, so the entries may land over
	// more than one sync: wait for each.
	e.waitFor("/int/watchlist", "ALL")
	e.waitFor("/int/int-sessions", "INT-1")
	e.waitFor("/int/report-sessions", "RS-1")
	e.waitFor("/int/queue-reports", "Ethernet8")
	e.waitFor("/int/events", "DROP_REPORT")
	oid := func(t sai.ObjectType) sai.OID { return e.b.Objects(t)[0] }
	wl := map[sai.OID]sai.WatchlistEntryStats{}
	for i, o := range e.b.Objects(sai.ObjectTypeWatchlistEntry) {
		wl[o] = sai.WatchlistEntryStats{MatchedPackets: uint64(10 + i), MatchedBytes: uint64(1000 * (i + 1))}
	}
	e.b.SetStats(sai.Stats{
		Node:           sai.Counters{InPackets: 99},
		Reports:        map[sai.ReportType]sai.ReportCounters{sai.ReportDrop: {Generated: 3}},
		Watchlist:      wl,
		IntSessions:    map[sai.OID]sai.IntSessionStats{oid(sai.ObjectTypeIntSession): {PacketsInitiated: 21}},
		ReportSessions: map[sai.OID]sai.ReportSessionStats{oid(sai.ObjectTypeReportSession): {Reports: 5, Packets: 4, Bytes: 400}},
		QueueReports:   map[sai.OID]sai.QueueReportStats{oid(sai.ObjectTypeQueueReport): {Breaches: 2, Reports: 6}},
	})
	e.srv.RefreshState(context.Background())
	want := map[string]map[string]string{
		"COUNTERS:DTEL_INT_SESSION:INT-1":        {"PACKETS_INITIATED": "21"},
		"COUNTERS:DTEL_REPORT_SESSION:RS-1":      {"REPORTS": "5", "PACKETS": "4", "BYTES": "400"},
		"COUNTERS:DTEL_QUEUE_REPORT:Ethernet8:3": {"BREACHES": "2", "REPORTS": "6"},
		"COUNTERS:DTEL_FLOW_WATCHLIST:ALL":       {"Packets": "21", "Bytes": "3000"}, // both entries of the rule
		"COUNTERS:DTEL:SWITCH":                   {"IN_PACKETS": "99"},
		"COUNTERS:DTEL:REPORTS:DROP":             {"GENERATED": "3"},
	}
	for k, fields := range want {
		eventually(t, 5*time.Second, k, func() (bool, string) {
			got := r.HGetAll(countersDB, k)
			for f, v := range fields {
				if got[f] != v {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
	}
	// The same as gNMI says.
	resp, err := e.client.Get(context.Background(), &gpb.GetRequest{Prefix: &gpb.Path{Target: "intd"}, Encoding: gpb.Encoding_JSON_IETF,
		Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "int-sessions"}, {Name: "int-session", Key: map[string]string{"name": "INT-1"}},
			{Name: "state"}, {Name: "counters"}, {Name: "packets-initiated"}}}}})
	if err != nil || string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()) != `"21"` {
		t.Errorf("gNMI packets-initiated: %v %v", resp, err)
	}
	// A rule gone: its counters go too.
	r.Del(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|ALL")
	eventually(t, 5*time.Second, "counters of the deleted rule removed", func() (bool, string) {
		got := r.HGetAll(countersDB, "COUNTERS:DTEL_FLOW_WATCHLIST:ALL")
		return len(got) == 0, fmt.Sprint(got)
	})
}

// CONFIG_DB_INITIALIZED other than 1 holds the configuration back until
// SONiC has loaded CONFIG_DB.
func TestWaitsForConfigLoaded(t *testing.T) {
	r := sonictest.Start(t)
	c := r.Client(configDB)
	defer c.Close()
	if err := c.Set(context.Background(), "CONFIG_DB_INITIALIZED", "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.HSet(configDB, "DTEL|SWITCH_ID", "SWITCH_ID", "9")
	e := newEnvOn(t, r)
	time.Sleep(400 * time.Millisecond)
	if got := e.get("/int/node/config"); strings.Contains(got, `"node-id":9`) {
		t.Fatalf("configuration applied before CONFIG_DB_INITIALIZED: %s", got)
	}
	if st := r.HGetAll(stateDB, sonic.SyncTable+"|intd"); st["state"] != "waiting" {
		t.Errorf("sync state %v, want waiting", st)
	}
	if err := c.Set(context.Background(), "CONFIG_DB_INITIALIZED", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("/int/node/config", `"node-id":9`)
}

// Where CONFIG SET is not allowed (and keyspace notifications are off),
// intd polls CONFIG_DB every second instead.
func TestPollingWithoutConfigCommand(t *testing.T) {
	e := newEnvOn(t, sonictest.Start(t, "--rename-command", "CONFIG", ""))
	eventually(t, 5*time.Second, "first sync", func() (bool, string) {
		st := e.redis.HGetAll(stateDB, sonic.SyncTable+"|intd")
		return st["state"] == "in-sync" && st["entries"] == "0", fmt.Sprint(st)
	})
	time.Sleep(500 * time.Millisecond) // the syncs of the subscriptions are done
	e.redis.HSet(configDB, "DTEL|SWITCH_ID", "SWITCH_ID", "12")
	took := eventually(t, 5*time.Second, "node-id 12 by polling", func() (bool, string) {
		got := e.get("/int/node/config")
		return strings.Contains(got, `"node-id":12`), got
	})
	t.Logf("applied %v after the write, by polling", took.Round(time.Millisecond))
}

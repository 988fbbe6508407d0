package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/server/sonic"
	"github.com/intd-project/intd/server/sonic/sonictest"
)

const configDB, stateDB, countersDB = 4, 6, 2

// sonicConfig writes switch n's DTel configuration into its CONFIG_DB the
// way SONiC's tools do, table entry by table entry: the soft test's
// configuration (INT source at s1 for h2's subnet, transit everywhere,
// sink port towards h2 at s3, reports to the collector in c).
func sonicConfig(r *sonictest.Redis, n int) {
	s := switches[n-1]
	r.HSet(configDB, "DTEL|SWITCH_ID", "SWITCH_ID", strconv.Itoa(n))
	r.HSet(configDB, "DTEL|INT_TRANSIT", "INT_TRANSIT", "TRUE")
	r.HSet(configDB, "DTEL|INT_ENDPOINT", "INT_ENDPOINT", strings.ToUpper(strconv.FormatBool(s != "s2")))
	r.HSet(configDB, "DTEL|DROP_REPORT", "DROP_REPORT", "TRUE")
	r.HSet(configDB, "DTEL|QUEUE_REPORT", "QUEUE_REPORT", "TRUE")
	r.HSet(configDB, "DTEL|INT_L4_DSCP", "INT_L4_DSCP_VALUE", "32", "INT_L4_DSCP_MASK", "32")
	r.HSet(configDB, "DTEL_REPORT_SESSION|RS-1", "SRC_IP", fmt.Sprintf("10.100.0.%d", n), "DST_IP_LIST", "10.100.0.100",
		"UDP_DEST_PORT", "32766", "TRUNCATE_SIZE", "256")
	for _, ev := range []string{"EVENT_TYPE_FLOW_STATE", "EVENT_TYPE_DROP_REPORT", "EVENT_TYPE_QUEUE_REPORT_THRESHOLD_BREACH"} {
		r.HSet(configDB, "DTEL_EVENT|"+ev, "EVENT_REPORT_SESSION", "RS-1")
	}
	switch s {
	case "s1":
		r.HSet(configDB, "DTEL_INT_SESSION|MD", "MAX_HOP_COUNT", "8", "COLLECT_SWITCH_ID", "TRUE", "COLLECT_SWITCH_PORTS", "TRUE",
			"COLLECT_HOP_LATENCY", "TRUE", "COLLECT_QUEUE_INFO", "TRUE", "COLLECT_INGRESS_TIMESTAMP", "TRUE", "COLLECT_EGRESS_TIMESTAMP", "TRUE")
		r.HSet(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|TO_H2", "PRIORITY", "100", "ETHER_TYPE", "0x0800", "DST_IP", "10.0.2.0/24",
			"FLOW_OP", "INT", "INT_SESSION", "MD", "DROP_REPORT_ENABLE", "TRUE")
	case "s3":
		r.HSet(configDB, "DTEL|SINK_PORT_LIST", "p2", "p2")
	}
}

// TestSonicEndToEnd runs three `intd run --dataplane soft
// --sonic-config-db` switches in network namespaces, each with its own
// redis-server as CONFIG_DB and no gNMI configuration at all: UDP from h1
// to h2 is instrumented at s1, carries s1's and s2's metadata to the sink
// s3, whose report reaches the collector; the rule's counters reach s1's
// COUNTERS_DB and the entries' statuses its STATE_DB; gNMI Set is refused.
func TestSonicEndToEnd(t *testing.T) {
	start := time.Now()
	f := buildFabric(t, false, 0)
	redis := map[string]*sonictest.Redis{}
	f.nodeArgs = map[string][]string{}
	for i, s := range switches {
		redis[s] = sonictest.Start(t)
		f.nodeArgs[s] = []string{"--sonic-config-db", redis[s].Socket}
		if i == 0 {
			// s1 starts with its CONFIG_DB filled, the others get theirs
			// while running.
			sonicConfig(redis[s], i+1)
		}
	}
	f.startNodes(t, "soft")
	for i, s := range switches[1:] {
		sonicConfig(redis[s], i+2)
	}
	t.Logf("fabric up and configured in %v", time.Since(start))

	seq := sonic.SeqOf(100)
	eventually(t, 10*time.Second, "s1's watchlist entry over gNMI", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := f.sw["s1"].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "s1"}, Encoding: gpb.Encoding_JSON,
			Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "watchlist"}, {Name: "entries"},
				{Name: "entry", Key: map[string]string{"sequence-id": strconv.Itoa(int(seq))}}, {Name: "match"}, {Name: "config"}}}}})
		if err != nil {
			return false, err.Error()
		}
		v := string(r.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonVal())
		return strings.Contains(v, "10.0.2.0/24"), v
	})
	for _, s := range switches {
		eventually(t, 10*time.Second, s+" in sync", func() (bool, string) {
			st := redis[s].HGetAll(stateDB, sonic.SyncTable+"|"+s)
			return st["state"] == "in-sync" && st["refused"] == "0", fmt.Sprint(st)
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, tx := f.warmUp(t, ctx, 20*time.Second)
	// A flow report of the sink whose INT stack holds s2's then s1's
	// metadata (below the sink's own), hop latency included.
	sinkReport := func(r *collector.IndividualJSON) bool {
		if !r.F || r.Inner == nil || r.Inner.INT == nil {
			return false
		}
		var ids []uint32
		for _, h := range r.Inner.INT.Hops {
			if h.NodeID == nil || h.HopLatency == nil {
				return false
			}
			ids = append(ids, *h.NodeID)
		}
		return len(ids) >= 2 && ids[len(ids)-2] == 2 && ids[len(ids)-1] == 1
	}
	eventually(t, 10*time.Second, "sink report from node 3 with the metadata of s1 and s2", func() (bool, string) {
		tx.Write(payload(1<<40, 200))
		return f.reports.count(3, sinkReport) > 0, f.reports.summary()
	})

	// State back in Redis: the rule's counters in s1's COUNTERS_DB, the
	// report session's at s3, statuses in STATE_DB.
	eventually(t, 5*time.Second, "s1 COUNTERS_DB", func() (bool, string) {
		rule := redis["s1"].HGetAll(countersDB, "COUNTERS:DTEL_FLOW_WATCHLIST:TO_H2")
		is := redis["s1"].HGetAll(countersDB, "COUNTERS:DTEL_INT_SESSION:MD")
		p, _ := strconv.Atoi(rule["Packets"])
		n, _ := strconv.Atoi(is["PACKETS_INITIATED"])
		return p > 0 && n > 0, fmt.Sprint(rule, is)
	})
	eventually(t, 5*time.Second, "s3 COUNTERS_DB", func() (bool, string) {
		rs := redis["s3"].HGetAll(countersDB, "COUNTERS:DTEL_REPORT_SESSION:RS-1")
		n, _ := strconv.Atoi(rs["REPORTS"])
		return n > 0, fmt.Sprint(rs)
	})
	if st := redis["s1"].HGetAll(stateDB, sonic.StatusTable+"|ACL_RULE|DTEL_FLOW_WATCHLIST|TO_H2"); st["status"] != "applied" {
		t.Errorf("status of s1's rule: %v", st)
	}

	// CONFIG_DB owns the configuration: gNMI Set is refused.
	_, err := f.sw["s2"].Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: "s2"}, Delete: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}}}}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("gNMI Set on s2: %v, want FAILED_PRECONDITION", err)
	}

	// The rule edited in CONFIG_DB to NOP: s1 stops initiating INT.
	redis["s1"].HSet(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|TO_H2", "FLOW_OP", "NOP")
	redis["s1"].Del(configDB, "ACL_RULE|DTEL_FLOW_WATCHLIST|TO_H2") // ...and then removed
	eventually(t, 5*time.Second, "rule removed from s1", func() (bool, string) {
		st := redis["s1"].HGetAll(stateDB, sonic.StatusTable+"|ACL_RULE|DTEL_FLOW_WATCHLIST|TO_H2")
		return len(st) == 0, fmt.Sprint(st)
	})
	time.Sleep(300 * time.Millisecond) // reports of packets already in flight
	before := f.reports.count(3, sinkReport)
	for i := 0; i < 20; i++ {
		tx.Write(payload(1<<41+uint64(i), 200))
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if after := f.reports.count(3, sinkReport); after != before {
		t.Errorf("sink reports went from %d to %d after the rule was removed", before, after)
	}
	t.Logf("total %v", time.Since(start))
}

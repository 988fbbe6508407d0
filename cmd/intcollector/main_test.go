package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/cmd/internal/gnmilisten"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/gnmitest"
	"github.com/intd-project/intd/internal/promtest"
	"github.com/intd-project/intd/internal/reporttest"
)

// sinkReport builds a v2.0 report from sink node 4 embedding a frame with
// a 3-hop INT-MD stack (nodes 3, 2, 1 on top-of-stack order), plus a drop
// report and a congestion report for the same flow.
func sinkReport(t *testing.T, seq uint32) []byte { return sinkReportPort(t, seq, 1111) }

// sinkReportPort is sinkReport for the flow from UDP source port sport.
func sinkReportPort(t *testing.T, seq uint32, sport uint16) []byte {
	f := reporttest.MDFrame(t, reporttest.Flow{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Proto: wire.ProtoUDP, SrcPort: sport, DstPort: 2222},
		reporttest.Hop{Node: 3, Latency: 300, Queue: 3}, reporttest.Hop{Node: 2, Latency: 200, Queue: 2}, reporttest.Hop{Node: 1, Latency: 100, Queue: 1})
	return reporttest.Group(seq, f, 400, reporttest.Drop(132), reporttest.Congestion(wire.RepQueue, wire.ReportMetadata{QueueOccupancy: 999}))
}

func TestServe(t *testing.T) {
	c := collector.New(collector.Config{})
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", metrics: "127.0.0.1:0", gnmi: gnmilisten.Settings{Addr: "127.0.0.1:0", Insecure: true}, exportFlows: 10, flowMetrics: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	u, _ := net.Dial("udp", s.reports)
	defer u.Close()
	u.Write(sinkReport(t, 1))
	u.Write(sinkReport(t, 3)) // seq 2 lost
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}

	fams := promtest.Parse(t, scrapeText(t, s))
	fl := map[string]string{"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp", "src_port": "1111", "dst_port": "2222"}
	with := func(kv ...string) map[string]string { return promtest.Labels(fl, kv...) }
	for _, want := range []struct {
		name   string
		labels map[string]string
		v      float64
	}{
		{"intcollector_flow_hop_latency_seconds", with("hop", "0", "node_id", "1", "ingress_interface", "1", "egress_interface", "2"), 100e-9},
		{"intcollector_flow_hop_latency_seconds", with("hop", "2", "node_id", "3", "ingress_interface", "1", "egress_interface", "2"), 300e-9},
		{"intcollector_flow_hop_latency_seconds", with("hop", "3", "node_id", "4", "ingress_interface", "0", "egress_interface", "0"), 400e-9},
		{"intcollector_flow_drop_reports_total", with("reason", "UPF_DL_PDR_MISS"), 2},
		{"intcollector_flow_congestion_reports_total", fl, 2},
		{"intcollector_drop_reports_total", map[string]string{"node_id": "4", "reason": "UPF_DL_PDR_MISS"}, 2},
		{"intcollector_reports_lost_total", nil, 1},
	} {
		if v, ok := promtest.Sample(fams, want.name, want.labels); !ok || v != want.v {
			t.Errorf("metrics: %s%v = %v (found %v), want %v", want.name, want.labels, v, ok, want.v)
		}
	}

	// State is published every --state-interval: publish it now.
	s.gnmi.RefreshState(context.Background())
	conn, err := grpc.NewClient(s.gnmiLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := gpb.NewGNMIClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flow := &gpb.PathElem{Name: "flow", Key: map[string]string{"src-address": "10.0.0.1", "dst-address": "10.0.0.2",
		"protocol": "17", "src-port": "1111", "dst-port": "2222"}}
	get, err := cl.Get(ctx, &gpb.GetRequest{Encoding: gpb.Encoding_PROTO, Path: []*gpb.Path{{Elem: []*gpb.PathElem{
		{Name: "collector"}, {Name: "flows"}, flow, {Name: "path"}, {Name: "hop", Key: map[string]string{"index": "*"}},
		{Name: "state"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lat := map[string]uint64{}
	for _, u := range get.Notification[0].Update {
		el := u.Path.Elem
		if el[len(el)-2].Name == "latency" && el[len(el)-1].Name == "last" {
			lat[el[4].Key["index"]] = u.Val.GetUintVal()
		}
	}
	if lat["0"] != 100 || lat["1"] != 200 || lat["2"] != 300 || lat["3"] != 400 {
		t.Errorf("gNMI hop latencies = %v", lat)
	}

	sub, err := cl.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{
			{Name: "collector"}, {Name: "flows"}, flow, {Name: "state"}, {Name: "counters"}}}}}}}})
	got := map[string]uint64{}
	for _, n := range gnmitest.UntilSync(t, sub) {
		for _, u := range n.GetUpdate() {
			got[u.Path.Elem[len(u.Path.Elem)-1].Name] = u.Val.GetUintVal()
		}
	}
	if got["drops"] != 2 || got["congestion-events"] != 2 || got["reports"] != 6 {
		t.Errorf("subscribe counters = %v", got)
	}
}

// TestServeLogs runs the intcollector binary with --log-format json: it
// logs where it listens and that it stopped, or why it could not start,
// every line on standard error a JSON record.
func TestServeLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the intcollector binary")
	}
	bin := filepath.Join(t.TempDir(), "intcollector")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	records := func(out string) []map[string]any {
		var rs []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Errorf("line is not JSON: %q", line)
			}
			rs = append(rs, r)
		}
		return rs
	}
	cmd := exec.Command(bin, "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--gnmi", "127.0.0.1:0", "--state-dir", t.TempDir())
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var stderr strings.Builder
	select {
	case l := <-lines:
		stderr.WriteString(l + "\n")
	case <-time.After(10 * time.Second):
		t.Fatal("no log line within 10 s")
	}
	cmd.Process.Signal(os.Interrupt)
	for l := range lines {
		stderr.WriteString(l + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, stderr.String())
	}
	rs := records(stderr.String())
	// The listening line follows the TLS certificate's.
	for len(rs) > 0 && rs[0]["msg"] != "intcollector listening" {
		rs = rs[1:]
	}
	if len(rs) < 2 || rs[len(rs)-1]["msg"] != "intcollector stopped" {
		t.Fatalf("log records %v", rs)
	}
	for _, k := range []string{"reports", "metrics", "gnmi"} {
		if !strings.Contains(fmt.Sprint(rs[0][k]), "127.0.0.1:") {
			t.Errorf("listening line lacks the %s address: %v", k, rs[0])
		}
	}
	if rs[0]["udp_gro"] != true {
		t.Errorf("listening line: udp_gro %v, want true (UDP GRO on the report socket)", rs[0]["udp_gro"])
	}

	// An address it cannot use: an error record, exit status 1.
	out, err := exec.Command(bin, "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics", "", "--gnmi", "256.0.0.1:1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("bad --gnmi: %v", err)
	}
	rs = records(string(out))
	if len(rs) != 1 || rs[0]["level"] != "ERROR" || !strings.Contains(fmt.Sprint(rs[0]["err"]), "--gnmi") {
		t.Errorf("bad --gnmi logged %v", rs)
	}
}

// TestServeReceivers: with --receivers 2 the reports of every sender are
// aggregated, whichever of the sockets sharing the port reads them.
func TestServeReceivers(t *testing.T) {
	c := collector.New(collector.Config{})
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", receivers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	if len(s.recv) != 2 {
		t.Fatalf("%d receivers", len(s.recv))
	}
	const senders = 8
	for i := 0; i < senders; i++ {
		u, err := net.Dial("udp", s.reports)
		if err != nil {
			t.Fatal(err)
		}
		u.Write(sinkReportPort(t, 1, uint16(1000+i)))
		u.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets < senders && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := c.Snapshot(0); st.Counters.Packets != senders || st.TableFlows != senders {
		t.Errorf("packets %d, flows %d; want %d each", st.Counters.Packets, st.TableFlows, senders)
	}
}

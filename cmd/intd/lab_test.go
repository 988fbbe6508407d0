package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/internal/logtest"
)

func TestLabArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "10.1.2.3:9339"}, "only allowed on a loopback"},
		{[]string{"--addr", ":9339"}, "only allowed on a loopback"},
		{[]string{"--tls-cert", "c.pem"}, "go together"},
		{[]string{"--rate", "0"}, "--rate"},
		{[]string{"--burst", "-1"}, "--burst"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseLabArgs(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	o, err := parseLabArgs(nil, io.Discard)
	if err != nil || o.Addr != "127.0.0.1:9339" || o.Collector != "127.0.0.1:32766" || o.SummaryEvery != 2*time.Second {
		t.Fatalf("defaults %+v %v", o, err)
	}
}

// TestLab starts `intd lab` in-process on 127.0.0.1:0 and drives it over
// real gRPC: Capabilities, Get of each switch's state and default
// configuration, a SAMPLE subscription to s2's counters, a Set that
// changes the INT packets, and a refused Set that changes nothing.
func TestLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A collector socket so the reports have somewhere to go.
	col, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	var reports sync.WaitGroup
	var nreports int
	reports.Add(1)
	go func() {
		defer reports.Done()
		buf := make([]byte, 65536)
		for {
			if _, _, err := col.ReadFrom(buf); err != nil {
				return
			}
			nreports++
		}
	}()

	o := &labOptions{Addr: "127.0.0.1:0", Collector: col.LocalAddr().String(), Rate: 4000, Burst: 40,
		StateInterval: 100 * time.Millisecond, SaveDir: t.TempDir()}
	li, err := startLab(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var out logtest.Buffer
	li.banner(&out, o.Collector)
	addr := li.lis.Addr().String()
	if !strings.Contains(out.String(), "gnmic -a "+addr+" --insecure --target s1 get --path /int/node/state") {
		t.Errorf("banner: %s", out.String())
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- li.run(runCtx, &out, 200*time.Millisecond) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("lab run: %v", err)
		}
		col.Close()
		reports.Wait()
		if nreports == 0 {
			t.Error("the collector got no report")
		}
		if t.Failed() {
			t.Logf("lab output:\n%s", out.String())
		}
	}()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)

	caps, err := c.Capabilities(ctx, &gpb.CapabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, m := range caps.GetSupportedModels() {
		models = append(models, m.GetName())
	}
	if !strings.Contains(strings.Join(models, " "), "intd-int") {
		t.Errorf("capabilities models %v", models)
	}

	path := func(s string) *gpb.Path {
		t.Helper()
		p, err := ygot.StringToStructuredPath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// get returns the leaves under p of target as path -> value.
	get := func(target, p string, typ gpb.GetRequest_DataType) (map[string]*gpb.TypedValue, error) {
		t.Helper()
		resp, err := c.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: target}, Path: []*gpb.Path{path(p)},
			Type: typ, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			return nil, err
		}
		leaves := map[string]*gpb.TypedValue{}
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				s, err := ygot.PathToString(u.GetPath())
				if err != nil {
					t.Fatal(err)
				}
				leaves[s] = u.GetVal()
			}
		}
		return leaves, nil
	}
	mustGet := func(target, p string, typ gpb.GetRequest_DataType) map[string]*gpb.TypedValue {
		t.Helper()
		l, err := get(target, p, typ)
		if err != nil {
			t.Fatalf("Get %s %s: %v", target, p, err)
		}
		return l
	}

	// Each switch's node state.
	for i, sw := range []string{"s1", "s2", "s3"} {
		st := mustGet(sw, "/int/node/state", gpb.GetRequest_ALL)
		if id := st["/int/node/state/node-id"].GetUintVal(); id != uint64(i+1) {
			t.Errorf("%s node-id %d, want %d (state %v)", sw, id, i+1, st)
		}
		if !st["/int/node/state/enabled"].GetBoolVal() {
			t.Errorf("%s not enabled", sw)
		}
	}
	// The default configuration, as YANG.
	cfg := mustGet("s1", "/int", gpb.GetRequest_CONFIG)
	for p, want := range map[string]any{
		"/int/int-sessions/int-session[name=md]/config/remaining-hop-count":                  uint64(8),
		"/int/interfaces/interface[name=h1]/config/int-sink":                                 true,
		"/int/watchlist/entries/entry[sequence-id=10]/match/config/ingress-interface":        "h1",
		"/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session":            "md",
		"/int/queue-reports/queue-report[interface=p2][queue-id=0]/config/latency-threshold": uint64(1_000_000),
		"/int/marking/config/dscp-value":                                                     uint64(lab.DSCPValue),
		"/int/events/event[type=DROP_REPORT]/config/report-session":                          "collector",
	} {
		v := cfg[p]
		var got any
		switch v.GetValue().(type) {
		case *gpb.TypedValue_UintVal:
			got = v.GetUintVal()
		case *gpb.TypedValue_BoolVal:
			got = v.GetBoolVal()
		case *gpb.TypedValue_StringVal:
			got = v.GetStringVal()
		}
		if got != want {
			t.Errorf("s1 config %s = %v, want %v", p, v, want)
		}
	}
	if _, err := get("s2", "/int/int-sessions", gpb.GetRequest_CONFIG); status.Code(err) != codes.NotFound {
		t.Errorf("s2 (transit only) has an INT session: %v", err)
	}
	if v := mustGet("s3", "/int/interfaces/interface[name=h2]/config/int-sink", gpb.GetRequest_CONFIG); len(v) != 1 {
		t.Errorf("s3 sink interface: %v", v)
	}

	// s2's counters move.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sub, err := c.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Prefix: &gpb.Path{Target: "s2"}, Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: path("/int/node/state/counters"), Mode: gpb.SubscriptionMode_SAMPLE,
			SampleInterval: uint64(200 * time.Millisecond)}},
	}}}); err != nil {
		t.Fatal(err)
	}
	var transited []uint64
	for len(transited) < 3 || transited[len(transited)-1] <= transited[0] {
		r, err := sub.Recv()
		if err != nil {
			t.Fatalf("subscription: %v (int-transited so far %v)", err, transited)
		}
		for _, u := range r.GetUpdate().GetUpdate() {
			full := &gpb.Path{Elem: append(append([]*gpb.PathElem{}, r.GetUpdate().GetPrefix().GetElem()...), u.GetPath().GetElem()...)}
			if s, _ := ygot.PathToString(full); s == "/int/node/state/counters/int-transited" {
				transited = append(transited, u.GetVal().GetUintVal())
			}
		}
	}
	scancel()
	t.Logf("s2 int-transited samples %v", transited)

	// The lab's view of the TCP flow: three hops, then two after the Set.
	tcp, ok := li.lab.FlowKey("tcp")
	if !ok {
		t.Fatal("no tcp flow")
	}
	waitView := func(what string, cond func(lab.FlowView) bool) lab.FlowView {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, _ := li.lab.View(tcp)
			if cond(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: view %+v", what, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	threeHops := func(v lab.FlowView) bool {
		return len(v.Path) == 3 && v.Path[0] == 1 && v.Path[1] == 2 && v.Path[2] == 3 && !v.HopCountExceeded
	}
	waitView("default path", threeHops)

	rhc := "/int/int-sessions/int-session[name=md]/config/remaining-hop-count"
	set := func(target string, ups ...*gpb.Update) error {
		_, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: target}, Update: ups})
		return err
	}
	uintUpdate := func(p string, v uint64) *gpb.Update {
		return &gpb.Update{Path: path(p), Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: v}}}
	}
	// A JSON_IETF value, as `gnmic -e json_ietf set --update-value 2`
	// sends it (the README's example).
	if err := set("s1", &gpb.Update{Path: path(rhc), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("2")}}}); err != nil {
		t.Fatalf("Set remaining-hop-count 2: %v", err)
	}
	twoHops := func(v lab.FlowView) bool {
		return len(v.Path) == 2 && v.Path[0] == 1 && v.Path[1] == 2 && v.HopCountExceeded
	}
	v := waitView("after remaining-hop-count 2", twoHops)
	t.Logf("after the Set: %+v", v)
	if got := mustGet("s1", rhc, gpb.GetRequest_CONFIG)[rhc].GetUintVal(); got != 2 {
		t.Errorf("remaining-hop-count %d after the Set", got)
	}

	// A Set with one valid and one refused change (breach-quota 0) is
	// refused whole: configuration, state and packets stay as they are.
	before := mustGet("s1", "/int", gpb.GetRequest_CONFIG)
	err = set("s1", uintUpdate(rhc, 5),
		uintUpdate("/int/queue-reports/queue-report[interface=p2][queue-id=0]/config/breach-quota", 0))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "breach-quota") {
		t.Fatalf("invalid Set: %v", err)
	}
	after := mustGet("s1", "/int", gpb.GetRequest_CONFIG)
	if len(after) != len(before) {
		t.Errorf("config changed by a refused Set: %d leaves, was %d", len(after), len(before))
	}
	for p, bv := range before {
		if av := after[p]; av.String() != bv.String() {
			t.Errorf("refused Set changed %s: %v -> %v", p, bv, av)
		}
	}
	li.srv.RefreshState(ctx)
	if st := mustGet("s1", "/int/int-sessions/int-session[name=md]/state/remaining-hop-count", gpb.GetRequest_STATE); len(st) != 1 {
		t.Errorf("session state: %v", st)
	} else {
		for _, v := range st {
			if v.GetUintVal() != 2 {
				t.Errorf("applied remaining-hop-count %v after a refused Set", v)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	if v, _ := li.lab.View(tcp); !twoHops(v) {
		t.Errorf("packets changed by a refused Set: %+v", v)
	}

	// Back to 8: three hops again. The Set was saved.
	if err := set("s1", uintUpdate(rhc, 8)); err != nil {
		t.Fatal(err)
	}
	waitView("after remaining-hop-count 8", threeHops)
	if data, err := os.ReadFile(filepath.Join(o.SaveDir, "s1.json")); err != nil || !strings.Contains(string(data), `"remaining-hop-count": 8`) {
		t.Errorf("saved s1 configuration (%v):\n%s", err, data)
	}
	if !strings.Contains(out.String(), "path s1 -> s2 -> s3") {
		t.Errorf("summary lacks the path:\n%s", out.String())
	}
}

package tests

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The gNMI conformance requirements that server/conformance_test.go
// checks in-process, checked here again against `intd lab` run as an
// operator runs it: a subprocess serving three soft switches, reached by a
// gNMI client over gRPC with target s1 in every request.
func TestGNMIConformanceLab(t *testing.T) {
	bin := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "intd"), "lab", "--addr", "127.0.0.1:0", "--collector", "",
		"--summary-every", "0", "--state-interval", "100ms", "--save-dir", t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		re := regexp.MustCompile(`gNMI on (\S+),`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, out)
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("intd lab printed no address")
	}
	conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)
	pre := &gpb.Path{Target: "s1"}
	p := func(s string) *gpb.Path {
		t.Helper()
		x, err := ygot.StringToStructuredPath(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	wantCode := func(t *testing.T, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("got %v, want %v", err, want)
		}
	}
	getVal := func(t *testing.T, path string, enc gpb.Encoding) *gpb.TypedValue {
		t.Helper()
		resp, err := c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p(path)}, Encoding: enc})
		if err != nil {
			t.Fatalf("Get %s: %v", path, err)
		}
		return resp.GetNotification()[0].GetUpdate()[0].GetVal()
	}
	subscribe := func(t *testing.T, sl *gpb.SubscriptionList, ext ...*gnmi_ext.Extension) gpb.GNMI_SubscribeClient {
		t.Helper()
		sl.Prefix = pre
		st, err := c.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}, Extension: ext}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// untilSync returns path -> value text of the updates before the sync.
	untilSync := func(t *testing.T, st gpb.GNMI_SubscribeClient) map[string]string {
		t.Helper()
		got := map[string]string{}
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatalf("before sync_response: %v", err)
			}
			if r.GetSyncResponse() {
				return got
			}
			if r.GetUpdate().GetPrefix().GetTarget() != "s1" {
				t.Errorf("target not echoed: %v", r.GetUpdate().GetPrefix())
			}
			for _, u := range r.GetUpdate().GetUpdate() {
				s, _ := ygot.PathToString(u.GetPath())
				v := u.GetVal()
				got[s] = string(append(v.GetJsonVal(), v.GetJsonIetfVal()...))
				if got[s] == "" {
					got[s] = v.String()
				}
			}
		}
	}
	sub := func(path string, mode gpb.SubscriptionMode, interval time.Duration) *gpb.Subscription {
		return &gpb.Subscription{Path: p(path), Mode: mode, SampleInterval: uint64(interval)}
	}

	t.Run("3.2 Capabilities", func(t *testing.T) {
		caps, err := c.Capabilities(ctx, &gpb.CapabilityRequest{})
		if err != nil || caps.GetGNMIVersion() == "" || len(caps.GetSupportedModels()) < 2 || !strings.Contains(caps.String(), "JSON_IETF") {
			t.Errorf("capabilities %v %v", caps, err)
		}
	})
	t.Run("3.3.1 JSON by default, target echoed", func(t *testing.T) {
		resp, err := c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int/node/config/node-id")}})
		if err != nil || string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonVal()) != "1" || resp.GetNotification()[0].GetPrefix().GetTarget() != "s1" {
			t.Errorf("Get without encoding: %v %v", resp, err)
		}
	})
	t.Run("2.3.1 JSON_IETF is RFC 7951, the same in Subscribe as in Get", func(t *testing.T) {
		got := untilSync(t, subscribe(t, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_JSON_IETF, Subscription: []*gpb.Subscription{sub("/int", gpb.SubscriptionMode_TARGET_DEFINED, 0)}}))
		if len(got) < 20 {
			t.Fatalf("%d leaves", len(got))
		}
		n := 0
		for path, v := range got {
			if strings.Contains(path, "/counters/") {
				continue // they move between the two reads
			}
			if want := string(getVal(t, path, gpb.Encoding_JSON_IETF).GetJsonIetfVal()); v != want {
				t.Errorf("%s: Subscribe %s, Get %s", path, v, want)
			}
			n++
		}
		t.Logf("%d leaves compared", n)
	})
	t.Run("3.3.4 defaults in use, NOT_FOUND, INVALID_ARGUMENT, UNIMPLEMENTED", func(t *testing.T) {
		if v := getVal(t, "/int/node/config/postcard", gpb.Encoding_JSON_IETF); string(v.GetJsonIetfVal()) != "false" {
			t.Errorf("postcard (default false): %v", v)
		}
		_, err := c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int/watchlist/entries/entry[sequence-id=999]")}})
		wantCode(t, err, codes.NotFound)
		_, err = c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int/no-such")}})
		wantCode(t, err, codes.InvalidArgument)
		_, err = c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int")}, Encoding: gpb.Encoding_ASCII})
		wantCode(t, err, codes.Unimplemented)
	})
	t.Run("3.5.1.5.1 ONCE ends after its sync_response", func(t *testing.T) {
		st := subscribe(t, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Subscription: []*gpb.Subscription{sub("/int/node", gpb.SubscriptionMode_ON_CHANGE, 0)}})
		untilSync(t, st)
		if _, err := st.Recv(); err != io.EOF {
			t.Errorf("after sync: %v", err)
		}
	})
	t.Run("3.5.1.1 a half-closed STREAM goes on; a second SubscriptionList is INVALID_ARGUMENT", func(t *testing.T) {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		sl := &gpb.SubscriptionList{Prefix: pre, Subscription: []*gpb.Subscription{sub("/int/node/state/counters", gpb.SubscriptionMode_SAMPLE, 100*time.Millisecond)}}
		st, err := c.Subscribe(sctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}})
		st.CloseSend()
		untilSync(t, st)
		for i := 0; i < 3; i++ {
			if r, err := st.Recv(); err != nil || len(r.GetUpdate().GetUpdate()) == 0 {
				t.Fatalf("sample %d after the half-close: %v %v", i, r, err)
			}
		}
		st2 := subscribe(t, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_POLL, Subscription: []*gpb.Subscription{sub("/int/node", gpb.SubscriptionMode_ON_CHANGE, 0)}})
		untilSync(t, st2)
		st2.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}})
		_, err = st2.Recv()
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("3.5.1.5.2 sample intervals", func(t *testing.T) {
		_, err := subscribe(t, &gpb.SubscriptionList{Subscription: []*gpb.Subscription{sub("/int/node", gpb.SubscriptionMode_SAMPLE, time.Nanosecond)}}).Recv()
		wantCode(t, err, codes.InvalidArgument)
		_, err = subscribe(t, &gpb.SubscriptionList{Subscription: []*gpb.Subscription{sub("/int/node", gpb.SubscriptionMode_TARGET_DEFINED, time.Second)}}).Recv()
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("2.8 extensions are not ignored", func(t *testing.T) {
		history := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: 1}}}}
		_, err := c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int")}, Extension: []*gnmi_ext.Extension{history}})
		wantCode(t, err, codes.Unimplemented)
		depth := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Depth{Depth: &gnmi_ext.Depth{Level: 2}}}
		got := untilSync(t, subscribe(t, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Subscription: []*gpb.Subscription{sub("/int/node", gpb.SubscriptionMode_ON_CHANGE, 0)}}, depth))
		for path := range got {
			if strings.Contains(path, "/counters/") {
				t.Errorf("depth 2: %s", path)
			}
		}
	})
	t.Run("2.3.1 Set with JSON on a leaf; 3.4.4 and 3.4.7 refused Sets change nothing", func(t *testing.T) {
		leaf := "/int/watchlist/entries/entry[sequence-id=10]/config/description"
		if _, err := c.Set(ctx, &gpb.SetRequest{Prefix: pre, Update: []*gpb.Update{{Path: p(leaf), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`"set as JSON"`)}}}}}); err != nil {
			t.Fatal(err)
		}
		if v := getVal(t, leaf, gpb.Encoding_JSON); string(v.GetJsonVal()) != `"set as JSON"` {
			t.Errorf("%s = %v", leaf, v)
		}
		config := func() string {
			t.Helper()
			resp, err := c.Get(ctx, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{p("/int")}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF})
			if err != nil {
				t.Fatal(err)
			}
			return string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal())
		}
		before := config() // counters move: the configuration must not
		for _, req := range []*gpb.SetRequest{
			{Prefix: pre, Replace: []*gpb.Update{{Path: p("/int/watchlist/entries/entry[sequence-id=10]"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{}`)}}}}},
			{Prefix: pre, Update: []*gpb.Update{{Path: p("/int/node/config/node-id"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`1.5`)}}}}},
			{Prefix: pre, Delete: []*gpb.Path{p("/int/int-sessions/int-session[name=md]")}},
		} {
			_, err := c.Set(ctx, req)
			wantCode(t, err, codes.InvalidArgument)
		}
		if after := config(); after != before {
			t.Error("a refused Set changed s1")
		}
	})
}

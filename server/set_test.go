package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func jsonIETF(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

func uintVal(v uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: v}}
}

// snapshotAll returns the whole tree (config and state) as JSON_IETF.
func snapshotAll(t testing.TB, c gpb.GNMIClient) string {
	t.Helper()
	resp := get(t, c, &gpb.GetRequest{Encoding: gpb.Encoding_JSON_IETF})
	return string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal())
}

func leafVal(t testing.TB, c gpb.GNMIClient, path string) string {
	t.Helper()
	resp := get(t, c, &gpb.GetRequest{Path: []*gpb.Path{gp(t, path)}, Encoding: gpb.Encoding_JSON_IETF})
	return valText(resp.GetNotification()[0].GetUpdate()[0].GetVal())
}

func TestSetOrderAndResults(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	// delete, replace, update on the same leaf: update must win, and the
	// replace of the container must drop its other leaves.
	resp, err := env.client.Set(ctx, &gpb.SetRequest{
		Prefix:  &gpb.Path{Target: "dut"},
		Update:  []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(7)}},
		Replace: []*gpb.Update{{Path: gp(t, "/int/node/config"), Val: jsonIETF(`{"node-id": 5, "int-transit": true}`)}},
		Delete:  []*gpb.Path{gp(t, "/int/node/config/node-id")},
	})
	if err != nil {
		t.Fatal(err)
	}
	ops := []gpb.UpdateResult_Operation{gpb.UpdateResult_DELETE, gpb.UpdateResult_REPLACE, gpb.UpdateResult_UPDATE}
	if len(resp.GetResponse()) != 3 || resp.GetTimestamp() == 0 || resp.GetPrefix().GetTarget() != "dut" {
		t.Fatalf("response %v", resp)
	}
	for i, r := range resp.GetResponse() {
		if r.GetOp() != ops[i] {
			t.Errorf("result %d op %v, want %v", i, r.GetOp(), ops[i])
		}
	}
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "7" {
		t.Errorf("node-id %s, want 7 (update after replace after delete)", got)
	}
	// Removed by the replace: back to its YANG default.
	if got := leafVal(t, env.client, "/int/node/config/drop-report"); got != "false" {
		t.Errorf("drop-report %s after the replace, want its default false", got)
	}
	if env.fake.applyCount() != 2 {
		t.Errorf("%d applies, want 2 (start, one Set)", env.fake.applyCount())
	}
	// The state mirror comes from the applier.
	env.srv.RefreshState(ctx)
	if got := leafVal(t, env.client, "/int/node/state/node-id"); got != "7" {
		t.Errorf("state node-id %s", got)
	}
}

func TestSetValueEncodings(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	cases := []struct {
		name string
		upd  *gpb.Update
		path string
		want string
	}{
		{"scalar", &gpb.Update{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(42)}, "/int/node/config/node-id", "42"},
		{"scalar-bool", &gpb.Update{Path: gp(t, "/int/node/config/postcard"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}}, "/int/node/config/postcard", "true"},
		{"scalar-enum", &gpb.Update{Path: gp(t, "/int/marking/config/l4-marking"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "PROBE_MARKER"}}}, "/int/marking/config/l4-marking", `"PROBE_MARKER"`},
		{"json-ietf-leaf", &gpb.Update{Path: gp(t, "/int/marking/config/probe-marker"), Val: jsonIETF(`"17"`)}, "/int/marking/config/probe-marker", `"17"`},
		{"json-container", &gpb.Update{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=40]"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`{"config": {"sequence-id": 40, "description": "via json"}, "actions": {"config": {"flow-op": "NOP"}}}`)}}}, "/int/watchlist/entries/entry[sequence-id=40]/config/description", `"via json"`},
		{"json-ietf-container", &gpb.Update{Path: gp(t, "/int/interfaces"), Val: jsonIETF(`{"intd-int:interface": [{"name": "eth9", "config": {"name": "eth9", "int-sink": true}}]}`)}, "/int/interfaces/interface[name=eth9]/config/int-sink", "true"},
		{"leaf-creates-entry", &gpb.Update{Path: gp(t, "/int/interfaces/interface[name=eth7]/config/int-sink"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}}, "/int/interfaces/interface[name=eth7]/config/name", `"eth7"`},
		{"leaf-list-json", &gpb.Update{Path: gp(t, "/int/int-sessions/int-session[name=mx-probe]/config/instructions"), Val: jsonIETF(`["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"]`)}, "/int/int-sessions/int-session[name=mx-probe]/config/instructions", `["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{tc.upd}}); err != nil {
				t.Fatal(err)
			}
			if got := leafVal(t, env.client, tc.path); got != tc.want {
				t.Errorf("%s = %s, want %s", tc.path, got, tc.want)
			}
		})
	}
}

// Every refused Set leaves configuration, state and the dataplane exactly
// as they were.
func TestSetFailuresChangeNothing(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	before := snapshotAll(t, env.client)
	applies := env.fake.applyCount()
	cases := []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
	}{
		{"pattern", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=10]/match/config/source-prefix"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "not-a-prefix"}}}}}, codes.InvalidArgument},
		{"range", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/marking/config/dscp-value"), Val: uintVal(99)}}}, codes.InvalidArgument},
		{"leafref", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "no-such-session"}}}}}, codes.InvalidArgument},
		{"dangling-after-delete", &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/int-sessions/int-session[name=md-5]")}}, codes.InvalidArgument},
		{"wrong-type", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "one"}}}}}, codes.InvalidArgument},
		{"bad-enum-json", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/marking/config"), Val: jsonIETF(`{"l4-marking": "SMOKE"}`)}}}, codes.InvalidArgument},
		{"unknown-json-member", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/marking/config"), Val: jsonIETF(`{"colour": "red"}`)}}}, codes.InvalidArgument},
		{"state-path", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/state/counters/in-packets"), Val: uintVal(1)}}}, codes.InvalidArgument},
		{"state-in-json", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node"), Val: jsonIETF(`{"state": {"node-id": 3}}`)}}}, codes.InvalidArgument},
		{"delete-state", &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/node/state")}}, codes.InvalidArgument},
		{"unknown-path", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/nodes/config/node-id"), Val: uintVal(1)}}}, codes.NotFound},
		{"missing-key", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry/config/description"), Val: jsonIETF(`"x"`)}}}, codes.InvalidArgument},
		{"wildcard-update", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/*/config/node-id"), Val: uintVal(1)}}}, codes.InvalidArgument},
		{"ascii", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "1"}}}}}, codes.Unimplemented},
		{"scalar-on-container", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config"), Val: uintVal(1)}}}, codes.InvalidArgument},
		{"not-json", &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config"), Val: jsonIETF(`{`)}}}, codes.InvalidArgument},
		{"good-then-bad", &gpb.SetRequest{
			Update: []*gpb.Update{
				{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(9)},
				{Path: gp(t, "/int/marking/config/dscp-value"), Val: uintVal(64)},
			}}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.client.Set(ctx, tc.req)
			wantCode(t, err, tc.code)
			if after := snapshotAll(t, env.client); after != before {
				t.Errorf("tree changed by a failed Set")
			}
			if env.fake.applyCount() != applies {
				t.Errorf("applier called by a refused Set")
			}
		})
	}

	// Applier failures: ABORTED (rolled back), or INVALID_ARGUMENT when it
	// refuses the configuration.
	upd := &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(77)}}}
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{errBoom, codes.Aborted},
		{fmt.Errorf("dtel: %w", refused{"no such port"}), codes.InvalidArgument},
	} {
		env.fake.setFail(tc.err)
		_, err := env.client.Set(ctx, upd)
		wantCode(t, err, tc.code)
		env.srv.RefreshState(ctx)
		if after := snapshotAll(t, env.client); after != before {
			t.Errorf("tree changed by a Set the applier failed")
		}
	}
	env.fake.setFail(nil)
	if _, err := env.client.Set(ctx, upd); err != nil {
		t.Fatal(err)
	}
}

func TestSetInvalidErrSentinel(t *testing.T) {
	sentinel := fmt.Errorf("invalid")
	env := startServer(t, TargetOptions{InvalidErr: sentinel})
	env.fake.setFail(fmt.Errorf("watchlist: %w", sentinel))
	_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(3)}}})
	wantCode(t, err, codes.InvalidArgument)
}

func TestSetDeleteWildcardAndAbsent(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	// Absent paths are deleted silently.
	if _, err := env.client.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/queue-reports/queue-report[interface=eth5][queue-id=3]")}}); err != nil {
		t.Fatal(err)
	}
	// A wildcard with a partial key set deletes every match.
	if _, err := env.client.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/report-sessions/report-session[name=collector]/collectors/collector[port=*]")}}); err != nil {
		t.Fatal(err)
	}
	_, err := env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/report-sessions/report-session[name=collector]/collectors/collector")}})
	wantCode(t, err, codes.NotFound)
	// Deleting the root clears the configuration: only defaults remain.
	if _, err := env.client.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{{}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/int/watchlist/entries/entry", "/int/node/config/node-id", "/int/int-sessions"} {
		_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, p)}, Type: gpb.GetRequest_CONFIG})
		wantCode(t, err, codes.NotFound)
	}
	if got := leafVal(t, env.client, "/int/node/config/enabled"); got != "true" {
		t.Errorf("enabled %s after deleting everything, want its default true", got)
	}
}

func TestSetPersistence(t *testing.T) {
	dir := t.TempDir()
	save := filepath.Join(dir, "sub", "running.json")
	env := startServer(t, TargetOptions{SavePath: save})
	if _, err := os.Stat(save); !os.IsNotExist(err) {
		t.Fatalf("config saved before any Set: %v", err)
	}
	_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(1234)}}})
	if err != nil {
		t.Fatal(err)
	}
	before := get(t, env.client, &gpb.GetRequest{Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF})
	env.conn.Close()
	env.srv.Close()
	entries, _ := os.ReadDir(filepath.Dir(save))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}

	// A new server on the same file starts from the saved configuration,
	// not the initial one.
	env2 := startServer(t, TargetOptions{SavePath: save})
	if got := leafVal(t, env2.client, "/int/node/config/node-id"); got != "1234" {
		t.Errorf("node-id after restart %s, want 1234", got)
	}
	after := get(t, env2.client, &gpb.GetRequest{Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF})
	if valText(before.Notification[0].Update[0].Val) != valText(after.Notification[0].Update[0].Val) {
		t.Errorf("configuration differs after restart")
	}

	// A failed save rolls the transaction back.
	if err := os.Chmod(filepath.Dir(save), 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Dir(save), 0o700)
	if os.Getuid() == 0 {
		return // root writes anyway
	}
	_, err = env2.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(5)}}})
	wantCode(t, err, codes.Internal)
	if got := leafVal(t, env2.client, "/int/node/config/node-id"); got != "1234" {
		t.Errorf("node-id after failed save %s", got)
	}
}

// A target whose configuration an external store owns refuses gNMI Set
// and changes only through OwnerSet; OwnerSet on an unowned target fails.
func TestOwnerSet(t *testing.T) {
	env := startServer(t, TargetOptions{Owner: "SONiC CONFIG_DB"})
	ctx := context.Background()
	req := &gpb.SetRequest{Prefix: &gpb.Path{Target: "dut"},
		Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(42)}}}
	_, err := env.client.Set(ctx, req)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "owned by SONiC CONFIG_DB") {
		t.Fatalf("gNMI Set on an owned target: %v, want FAILED_PRECONDITION naming the owner", err)
	}
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got == "42" {
		t.Fatal("the refused Set changed node-id")
	}
	if _, err := env.srv.OwnerSet(ctx, req); err != nil {
		t.Fatalf("OwnerSet: %v", err)
	}
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "42" {
		t.Errorf("node-id %s after OwnerSet, want 42", got)
	}
	// The same validation as Set.
	bad := &gpb.SetRequest{Prefix: &gpb.Path{Target: "dut"},
		Update: []*gpb.Update{{Path: gp(t, "/int/node/config/latency-sensitivity"), Val: uintVal(99)}}}
	if _, err := env.srv.OwnerSet(ctx, bad); status.Code(err) != codes.InvalidArgument {
		t.Errorf("OwnerSet of an out-of-range value: %v, want INVALID_ARGUMENT", err)
	}

	plain := startServer(t, TargetOptions{})
	if _, err := plain.srv.OwnerSet(ctx, req); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("OwnerSet on a target without owner: %v, want FAILED_PRECONDITION", err)
	}
}

// TestPollDoesNotUndoSet: a state poll that read the applier's state
// before a Set committed must not publish it over the state the Set
// published, or the Set's new watchlist entry has no state (a Get of its
// counters is NotFound) until the next poll.
func TestPollDoesNotUndoSet(t *testing.T) {
	env := startServer(t, TargetOptions{})
	read, release := make(chan struct{}), make(chan struct{})
	env.fake.mu.Lock()
	env.fake.hold = func() {
		close(read)
		<-release
	}
	env.fake.mu.Unlock()
	polled := make(chan struct{})
	go func() {
		env.srv.RefreshState(context.Background())
		close(polled)
	}()
	<-read // the poll has the state of the configuration before the Set
	env.fake.mu.Lock()
	env.fake.hold = nil
	env.fake.mu.Unlock()
	entry := `{"sequence-id": 77, "config": {"sequence-id": 77, "description": "added"},
		"match": {"config": {"protocol": 17}}, "actions": {"config": {"flow-op": "INT", "int-session": "md-5"}}}`
	if _, err := env.client.Set(context.Background(), &gpb.SetRequest{Prefix: &gpb.Path{Target: "dut"},
		Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=77]"), Val: jsonIETF(entry)}}}); err != nil {
		t.Fatal(err)
	}
	const leaf = "/int/watchlist/entries/entry[sequence-id=77]/state/counters/matched-packets"
	if got := leafVal(t, env.client, leaf); got != `"100"` {
		t.Fatalf("after the Set: %s = %q, want 100", leaf, got)
	}
	close(release)
	<-polled
	resp, err := env.client.Get(context.Background(), &gpb.GetRequest{Prefix: &gpb.Path{Target: "dut"},
		Path: []*gpb.Path{gp(t, leaf)}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("after the poll that read the state before the Set: Get %s: %v", leaf, err)
	}
	if got := valText(resp.GetNotification()[0].GetUpdate()[0].GetVal()); got != `"100"` {
		t.Fatalf("after the poll: %s = %q, want 100", leaf, got)
	}
}

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/intd-project/intd/gen"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// gp parses a gNMI path string.
func gp(t testing.TB, s string) *gpb.Path {
	t.Helper()
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	return p
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %v (%v), want %v", got, err, want)
	}
}

// leaves flattens a PROTO Get response into path -> value text.
func leaves(resp *gpb.GetResponse) map[string]string {
	out := map[string]string{}
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			out[pathString(append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), u.GetPath().GetElem()...))] = valText(u.GetVal())
		}
	}
	return out
}

func valText(v *gpb.TypedValue) string {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonIetfVal:
		return string(x.JsonIetfVal)
	case *gpb.TypedValue_JsonVal:
		return string(x.JsonVal)
	case *gpb.TypedValue_LeaflistVal:
		var parts []string
		for _, e := range x.LeaflistVal.GetElement() {
			parts = append(parts, valText(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	s, _ := gpbScalar(v)
	return s
}

// gpbScalar renders a scalar as JSON text, without schema: numbers as
// numbers.
func gpbScalar(v *gpb.TypedValue) (string, error) {
	var x any
	switch s := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		x = s.StringVal
	case *gpb.TypedValue_BoolVal:
		x = s.BoolVal
	case *gpb.TypedValue_UintVal:
		x = s.UintVal
	case *gpb.TypedValue_IntVal:
		x = s.IntVal
	case *gpb.TypedValue_DoubleVal:
		x = s.DoubleVal
	default:
		return fmt.Sprint(v), nil
	}
	b, err := json.Marshal(x)
	return string(b), err
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func get(t testing.TB, c gpb.GNMIClient, req *gpb.GetRequest) *gpb.GetResponse {
	t.Helper()
	resp, err := c.Get(context.Background(), req)
	if err != nil {
		t.Fatalf("Get(%v): %v", req, err)
	}
	return resp
}

func TestCapabilities(t *testing.T) {
	env := startServer(t, TargetOptions{})
	resp, err := env.client.Capabilities(context.Background(), &gpb.CapabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGNMIVersion() != "0.10.0" {
		t.Errorf("gNMI version %q, want 0.10.0 (from the proto package)", resp.GetGNMIVersion())
	}
	models := map[string]*gpb.ModelData{}
	for _, m := range resp.GetSupportedModels() {
		models[m.GetName()] = m
	}
	for _, name := range []string{"intd-int", "intd-int-metadata-semantics"} {
		m := models[name]
		if m == nil {
			t.Errorf("model %s not listed", name)
			continue
		}
		if m.GetOrganization() != "The intd project" || m.GetVersion() != gen.ModelVersions[name] || m.GetVersion() == "" {
			t.Errorf("model %s = %v", name, m)
		}
	}
	encs := map[gpb.Encoding]bool{}
	for _, e := range resp.GetSupportedEncodings() {
		encs[e] = true
	}
	for _, e := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO} {
		if !encs[e] {
			t.Errorf("encoding %v not listed", e)
		}
	}
}

func TestGetDataTypes(t *testing.T) {
	env := startServer(t, TargetOptions{})
	env.fake.setDrops(3)
	env.srv.RefreshState(context.Background())
	const (
		cfgLeaf   = "/int/node/config/node-id"
		echoLeaf  = "/int/node/state/node-id"
		ctrLeaf   = "/int/node/state/counters/in-packets"
		opLeaf    = "/int/node/state/dataplane"
		dropLeaf  = "/int/node/drops/drop[reason=3]/state/packets"
		dropKey   = "/int/node/drops/drop[reason=3]/reason"
		entryKey  = "/int/watchlist/entries/entry[sequence-id=10]/sequence-id"
		entryCtr  = "/int/watchlist/entries/entry[sequence-id=10]/state/counters/matched-packets"
		entryDesc = "/int/watchlist/entries/entry[sequence-id=10]/config/description"
	)
	cases := []struct {
		typ     gpb.GetRequest_DataType
		want    []string
		notWant []string
	}{
		{gpb.GetRequest_ALL, []string{cfgLeaf, echoLeaf, ctrLeaf, opLeaf, dropLeaf, entryKey, entryCtr, entryDesc}, nil},
		{gpb.GetRequest_CONFIG, []string{cfgLeaf, entryKey, entryDesc}, []string{echoLeaf, ctrLeaf, opLeaf, dropLeaf, entryCtr}},
		{gpb.GetRequest_STATE, []string{echoLeaf, ctrLeaf, opLeaf, dropLeaf, dropKey, entryKey, entryCtr}, []string{cfgLeaf, entryDesc}},
		{gpb.GetRequest_OPERATIONAL, []string{ctrLeaf, opLeaf, dropLeaf, entryCtr}, []string{cfgLeaf, echoLeaf, entryDesc}},
	}
	for _, tc := range cases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int")}, Type: tc.typ, Encoding: gpb.Encoding_PROTO})
			got := leaves(resp)
			for _, w := range tc.want {
				if _, ok := got[w]; !ok {
					t.Errorf("%s missing from %v", w, tc.typ)
				}
			}
			for _, w := range tc.notWant {
				if _, ok := got[w]; ok {
					t.Errorf("%s present in %v", w, tc.typ)
				}
			}
		})
	}
}

func TestGetEncodings(t *testing.T) {
	env := startServer(t, TargetOptions{})
	// PROTO: scalar values, one update per leaf.
	resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/marking/config")}, Encoding: gpb.Encoding_PROTO})
	got := leaves(resp)
	if got["/int/marking/config/dscp-value"] != "32" || got["/int/marking/config/l4-marking"] != `"DSCP"` {
		t.Errorf("PROTO leaves: %v", got)
	}
	for _, u := range resp.GetNotification()[0].GetUpdate() {
		if u.GetVal().GetJsonVal() != nil || u.GetVal().GetJsonIetfVal() != nil {
			t.Errorf("PROTO update %v is JSON", u)
		}
	}
	// One per leaf set or defaulted: as many as the JSON object has members.
	mc := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/marking/config")}, Encoding: gpb.Encoding_JSON})
	var members map[string]any
	if err := json.Unmarshal(mc.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonVal(), &members); err != nil {
		t.Fatal(err)
	}
	if v := resp.GetNotification()[0].GetUpdate(); len(v) != len(members) || len(v) < 9 {
		t.Errorf("%d updates for marking/config, want one per leaf (%d)", len(v), len(members))
	}
	// uint64 as a number in a UintVal.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/marking/config/probe-marker")}, Encoding: gpb.Encoding_PROTO})
	if v := resp.GetNotification()[0].GetUpdate()[0].GetVal().GetUintVal(); v != 12302652060662169855 {
		t.Errorf("probe-marker = %v", resp)
	}

	// JSON_IETF: RFC 7951, module-qualified names, 64-bit as strings.
	resp = get(t, env.client, &gpb.GetRequest{Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF})
	js := resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"intd-int:int", "intd-int-metadata-semantics:metadata-semantics"} {
		if doc[k] == nil {
			t.Errorf("JSON_IETF root lacks %s: %s", k, js)
		}
	}
	if !strings.Contains(string(js), `"probe-marker": "12302652060662169855"`) && !strings.Contains(string(js), `"probe-marker":"12302652060662169855"`) {
		t.Errorf("uint64 not a string in JSON_IETF")
	}
	if !strings.Contains(string(js), `"intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"`) {
		t.Errorf("identityref not module-qualified in JSON_IETF")
	}
	// The whole config round-trips through the config parser.
	if _, err := gen.ParseConfig(js); err != nil {
		t.Errorf("JSON_IETF config does not parse back: %v", err)
	}

	// JSON: unqualified names.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config")}, Encoding: gpb.Encoding_JSON})
	js = resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonVal()
	if err := json.Unmarshal(js, &doc); err != nil || doc["node-id"] != float64(1) {
		t.Errorf("JSON node config: %s", js)
	}
	// A leaf in JSON is a bare value.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}, Encoding: gpb.Encoding_JSON_IETF})
	if js := string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()); js != "1" {
		t.Errorf("leaf JSON_IETF = %s", js)
	}

	for _, e := range []gpb.Encoding{gpb.Encoding_ASCII, gpb.Encoding_BYTES} {
		_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int")}, Encoding: e})
		wantCode(t, err, codes.Unimplemented)
	}
}

func TestGetOriginsAndPrefix(t *testing.T) {
	env := startServer(t, TargetOptions{})
	for _, origin := range []string{"", "openconfig", "intd-int"} {
		p := gp(t, "/int/node/config/node-id")
		p.Origin = origin
		resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_PROTO})
		if got := leaves(resp)["/int/node/config/node-id"]; got != "1" {
			t.Errorf("origin %q: %v", origin, resp)
		}
	}
	p := gp(t, "/metadata-semantics")
	p.Origin = "intd-int-metadata-semantics"
	get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_PROTO})
	// Module-qualified element names.
	get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/intd-int:int/node")}, Encoding: gpb.Encoding_PROTO})

	bad := gp(t, "/int")
	bad.Origin = "cli"
	_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: []*gpb.Path{bad}})
	wantCode(t, err, codes.InvalidArgument)
	wrong := gp(t, "/int")
	wrong.Origin = "intd-int-metadata-semantics"
	_, err = env.client.Get(context.Background(), &gpb.GetRequest{Path: []*gpb.Path{wrong}})
	wantCode(t, err, codes.InvalidArgument)

	// Prefix and path are joined.
	pre := gp(t, "/int/watchlist")
	pre.Origin = "openconfig"
	resp := get(t, env.client, &gpb.GetRequest{Prefix: pre, Path: []*gpb.Path{gp(t, "entries/entry[sequence-id=20]/config/description")}, Encoding: gpb.Encoding_PROTO})
	if got := leaves(resp)["/int/watchlist/entries/entry[sequence-id=20]/config/description"]; got != `"tenant overlay"` {
		t.Errorf("prefix+path: %v", leaves(resp))
	}
}

func TestGetWildcards(t *testing.T) {
	env := startServer(t, TargetOptions{})
	for _, p := range []string{
		"/int/watchlist/entries/entry[sequence-id=*]/config/sequence-id",
		"/int/watchlist/entries/entry/config/sequence-id", // keys omitted
		"/int/watchlist/entries/*/config/sequence-id",
		"/int/.../entry/config/sequence-id",
	} {
		resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, p)}, Encoding: gpb.Encoding_PROTO})
		got := leaves(resp)
		want := []string{
			"/int/watchlist/entries/entry[sequence-id=10]/config/sequence-id",
			"/int/watchlist/entries/entry[sequence-id=20]/config/sequence-id",
			"/int/watchlist/entries/entry[sequence-id=30]/config/sequence-id",
		}
		if strings.Join(keys(got), " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %v", p, keys(got))
		}
	}
	// "*" as an element name among containers.
	resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/*/config/report-interval")}, Encoding: gpb.Encoding_PROTO})
	if got := leaves(resp); got["/int/flow-report-filter/config/report-interval"] != "1000" || len(got) != 1 {
		t.Errorf("element wildcard: %v", got)
	}
	// A partial key of a two-key list.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/report-sessions/report-session[name=collector]/collectors/collector[port=32766]/config/address")}, Encoding: gpb.Encoding_PROTO})
	if got := leaves(resp); len(got) != 2 {
		t.Errorf("partial keys: %v", got)
	}
	// JSON with wildcards: one update per matched node, with its own path.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[sequence-id=*]/config")}, Encoding: gpb.Encoding_JSON_IETF})
	if n := len(resp.GetNotification()[0].GetUpdate()); n != 3 {
		t.Errorf("%d JSON updates, want 3", n)
	}
}

func TestGetErrorsAndTarget(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	_, err := env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[sequence-id=99]")}})
	wantCode(t, err, codes.NotFound)
	// A path the schema does not have is not a valid path (§3.3.1).
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/no-such-node")}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}, Type: gpb.GetRequest_STATE})
	wantCode(t, err, codes.NotFound)
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[seq=10]")}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node[name=x]")}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{{Element: []string{"int[x"}}}})
	wantCode(t, err, codes.InvalidArgument)
	// The deprecated element form is still understood.
	get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{{Element: []string{"int", "watchlist", "entries", "entry[sequence-id=10]", "config"}}}})
	_, err = env.client.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "nope"}, Path: []*gpb.Path{gp(t, "/int")}})
	wantCode(t, err, codes.NotFound)

	// Target echo, one timestamped notification per path.
	paths := []*gpb.Path{gp(t, "/int/node/config/node-id"), gp(t, "/int/marking/config/dscp-value")}
	resp := get(t, env.client, &gpb.GetRequest{Prefix: &gpb.Path{Target: "dut"}, Path: paths, Encoding: gpb.Encoding_PROTO})
	if len(resp.GetNotification()) != 2 {
		t.Fatalf("%d notifications, want 2", len(resp.GetNotification()))
	}
	for _, n := range resp.GetNotification() {
		if n.GetPrefix().GetTarget() != "dut" || n.GetTimestamp() == 0 {
			t.Errorf("notification %v: want target dut and a timestamp", n)
		}
	}
	resp = get(t, env.client, &gpb.GetRequest{Path: paths, Encoding: gpb.Encoding_PROTO})
	for _, n := range resp.GetNotification() {
		if n.GetPrefix().GetTarget() != "" {
			t.Errorf("target echoed though none was sent: %v", n)
		}
	}
}

func TestMultiTarget(t *testing.T) {
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	fakes := map[string]*fakeApplier{}
	for i, name := range []string{"s1", "s2", "s3"} {
		cfg := &gen.Device{}
		cfg.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig().NodeId = ygot.Uint32(uint32(i + 1))
		fakes[name] = &fakeApplier{}
		if err := srv.AddTarget(context.Background(), name, fakes[name], TargetOptions{Initial: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	env := serve(t, srv, nil)
	ctx := context.Background()
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int")}})
	wantCode(t, err, codes.InvalidArgument) // three targets, none named
	for i, name := range []string{"s1", "s2", "s3"} {
		resp := get(t, env.client, &gpb.GetRequest{Prefix: &gpb.Path{Target: name}, Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}, Encoding: gpb.Encoding_PROTO})
		if got := leaves(resp)["/int/node/config/node-id"]; got != string(rune('1'+i)) {
			t.Errorf("%s node-id %s", name, got)
		}
	}
	_, err = env.client.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: "s2"}, Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 22}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if fakes["s2"].applyCount() != 2 || fakes["s1"].applyCount() != 1 {
		t.Errorf("applies s1=%d s2=%d", fakes["s1"].applyCount(), fakes["s2"].applyCount())
	}
	if proto.Size(&gpb.Path{}) != 0 {
		t.Fatal("unreachable")
	}
}

func TestDefaultTargetOption(t *testing.T) {
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(quietLogger()), WithDefaultTarget("s2"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"s1", "s2"} {
		cfg := &gen.Device{}
		cfg.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig().NodeId = ygot.Uint32(uint32(i + 1))
		if err := srv.AddTarget(context.Background(), name, &fakeApplier{}, TargetOptions{Initial: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.AddTarget(context.Background(), "s1", &fakeApplier{}, TargetOptions{}); err == nil {
		t.Error("duplicate target accepted")
	}
	env := serve(t, srv, nil)
	resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}, Encoding: gpb.Encoding_PROTO})
	if got := leaves(resp)["/int/node/config/node-id"]; got != "2" {
		t.Errorf("default target answered node-id %s, want s2's 2", got)
	}
}

// A leaf whose YANG default is in use has that value (§3.3.4): in Get,
// and for subscribers a leaf falling back to its default is an update to
// the default, never only a delete (§3.5.2.3). The save file keeps only
// what clients set.
func TestDefaultsInUse(t *testing.T) {
	save := t.TempDir() + "/running.json"
	env := startServer(t, TargetOptions{SavePath: save})
	ctx := context.Background()
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/postcard"), onChange(t, "/int/watchlist/entries/entry[sequence-id=40]")))
	s.untilSync()
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/postcard"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}}}})
	s.until("postcard true", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/node/config/postcard"] == "true"
	})
	set(t, env.client, &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/node/config/postcard")}})
	r, err := s.next()
	if err != nil {
		t.Fatal(err)
	}
	if n := r.GetUpdate(); len(n.GetDelete()) != 0 || len(n.GetUpdate()) != 1 || n.GetUpdate()[0].GetVal().GetBoolVal() != false || pathString(n.GetUpdate()[0].GetPath().GetElem()) != "/int/node/config/postcard" {
		t.Fatalf("postcard back to its default: %v, want one update to false", r)
	}
	if got := leafVal(t, env.client, "/int/node/config/postcard"); got != "false" {
		t.Errorf("Get postcard %s, want its default false", got)
	}
	// A new list entry: its defaults are in use with it.
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=40]/config/description"), Val: jsonIETF(`"forty"`)}}})
	for p, want := range map[string]string{
		"/int/watchlist/entries/entry[sequence-id=40]/actions/config/flow-op":     `"NOP"`,
		"/int/watchlist/entries/entry[sequence-id=40]/actions/config/drop-report": "false",
	} {
		if got := leafVal(t, env.client, p); got != want {
			t.Errorf("%s = %s, want its default %s", p, got, want)
		}
	}
	s.until("entry 40's default flow-op", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/watchlist/entries/entry[sequence-id=40]/actions/config/flow-op"] == `"NOP"`
	})
	// The Get of a whole subtree has them too.
	resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config")}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_PROTO})
	if got := leaves(resp)["/int/node/config/postcard"]; got != "false" {
		t.Errorf("postcard in a Get of its container: %q", got)
	}
	// Saved as set: no defaults written.
	data, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"postcard"`) {
		t.Errorf("defaults saved: %s", data)
	}
	_ = ctx
}

package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
)

func jsonVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(s)}}
}

// Set with the JSON encoding (gnmic's default) works on leaves and
// leaf-lists of every type of the model, as JSON_IETF does (§2.3.1: JSON
// MUST be supported).
func TestSetJSONLeaves(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	cases := []struct {
		name, path, val, want string
	}{
		{"uint8", "/int/node/config/latency-sensitivity", `3`, `3`},
		{"uint16", "/int/marking/config/udp-port", `6000`, `6000`},
		{"uint32", "/int/node/config/node-id", `5`, `5`},
		{"uint64-number", "/int/marking/config/probe-marker", `12345`, `"12345"`},
		{"uint64-string", "/int/marking/config/probe-marker", `"18446744073709551615"`, `"18446744073709551615"`},
		{"uint32-string", "/int/node/config/node-id", `"6"`, `6`},
		{"boolean", "/int/node/config/postcard", `true`, `true`},
		{"enumeration", "/int/marking/config/l4-marking", `"PROBE_MARKER"`, `"PROBE_MARKER"`},
		{"identityref", "/domain-specific-metadata/domain[domain-specific-id=4660]/fields/field[domain-metadata-bit-position=0]/config/domain-specific-metadata-field-id", `"METADATA_FIELD_SEQUENCE_NUMBER"`, `"intd-int-metadata-semantics:METADATA_FIELD_SEQUENCE_NUMBER"`},
		{"identityref-leaf-list", "/int/int-sessions/int-session[name=mx-probe]/config/instructions", `["METADATA_FIELD_NODE_ID", "intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"]`, `["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID","intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"]`},
		{"string", "/int/watchlist/entries/entry[sequence-id=10]/config/description", `"via plain JSON"`, `"via plain JSON"`},
		{"union", "/int/report-sessions/report-session[name=collector]/config/source-address", `"2001:db8::1"`, `"2001:db8::1"`},
		{"leafref", "/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session", `"mx-probe"`, `"mx-probe"`},
	}
	for _, enc := range []string{"JSON", "JSON_IETF"} {
		for _, tc := range cases {
			t.Run(enc+"/"+tc.name, func(t *testing.T) {
				val := jsonVal(tc.val)
				if enc == "JSON_IETF" {
					if tc.name == "uint32-string" {
						t.Skip("RFC 7951: integers of up to 32 bits are numbers")
					}
					val = jsonIETF(tc.val)
				}
				p := gp(t, tc.path)
				if _, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: p, Val: val}}}); err != nil {
					t.Fatalf("Set %s = %s: %v", tc.path, tc.val, err)
				}
				if tc.want == "" {
					return
				}
				if got := leafVal(t, env.client, tc.path); got != tc.want {
					t.Errorf("%s = %s, want %s", tc.path, got, tc.want)
				}
			})
		}
	}
}

// Values that are not what the leaf's type allows are refused, with the
// data path and the type in the message; integers are never truncated.
func TestSetRefusesBadScalars(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	before := snapshotAll(t, env.client)
	cases := []struct {
		name, path string
		val        *gpb.TypedValue
	}{
		{"fraction-json", "/int/node/config/node-id", jsonVal(`1.5`)},
		{"fraction-json-ietf", "/int/node/config/node-id", jsonIETF(`1.5`)},
		{"fraction-double", "/int/node/config/node-id", &gpb.TypedValue{Value: &gpb.TypedValue_DoubleVal{DoubleVal: 1.5}}},
		{"fraction-in-container", "/int/node/config", jsonIETF(`{"node-id": 2.5}`)},
		{"exponent", "/int/node/config/node-id", jsonVal(`1e3`)},
		{"fraction-uint64", "/int/marking/config/probe-marker", jsonVal(`"1.5"`)},
		{"negative-uint", "/int/node/config/node-id", jsonVal(`-1`)},
		{"too-big-uint8", "/int/node/config/latency-sensitivity", jsonVal(`256`)},
		{"string-uint32-ietf", "/int/node/config/node-id", jsonIETF(`"6"`)},
		{"null-leaf", "/int/node/config/node-id", jsonIETF(`null`)},
		{"bool-as-string", "/int/node/config/postcard", jsonVal(`"yes"`)},
		{"identity-wrong-module", "/int/int-sessions/int-session[name=mx-probe]/config/instructions", jsonIETF(`["intd-int:METADATA_FIELD_NODE_ID"]`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, tc.path), Val: tc.val}}})
			wantCode(t, err, codes.InvalidArgument)
			if after := snapshotAll(t, env.client); after != before {
				t.Errorf("a refused Set changed the tree")
			}
		})
	}
}

// A keyed list entry cannot be replaced with {} (§3.4.4), and key values
// in a value must agree with the path's (§3.4.5): INVALID_ARGUMENT,
// nothing changed.
func TestSetListEntryKeys(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	before := snapshotAll(t, env.client)
	entry := gp(t, "/int/watchlist/entries/entry[sequence-id=10]")
	for name, req := range map[string]*gpb.SetRequest{
		"replace-empty":       {Replace: []*gpb.Update{{Path: entry, Val: jsonIETF(`{}`)}}},
		"replace-empty-json":  {Replace: []*gpb.Update{{Path: entry, Val: jsonVal(`{}`)}}},
		"replace-null":        {Replace: []*gpb.Update{{Path: entry, Val: jsonIETF(`null`)}}},
		"key-conflict":        {Update: []*gpb.Update{{Path: entry, Val: jsonIETF(`{"sequence-id": 11}`)}}},
		"config-key-conflict": {Replace: []*gpb.Update{{Path: entry, Val: jsonIETF(`{"config": {"sequence-id": 11, "description": "x"}}`)}}},
		"two-key-conflict": {Update: []*gpb.Update{{Path: gp(t, "/int/report-sessions/report-session[name=collector]/collectors/collector[address=192.0.2.101][port=32766]"),
			Val: jsonIETF(`{"port": 32767}`)}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.Set(ctx, req)
			wantCode(t, err, codes.InvalidArgument)
			if after := snapshotAll(t, env.client); after != before {
				t.Errorf("a refused Set changed the tree")
			}
		})
	}
	// Keys that agree are fine, and {} as an update creates nothing new.
	set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: entry, Val: jsonIETF(`{"sequence-id": 10, "config": {"sequence-id": 10, "description": "kept"}}`)}}})
	if got := leafVal(t, env.client, "/int/watchlist/entries/entry[sequence-id=10]/config/description"); got != `"kept"` {
		t.Errorf("description %s", got)
	}
}

// A Set honours its deadline: past it nothing is committed (the
// dataplane is put back), and a Set waiting behind another gives up at
// its deadline; what happened is what the client was told.
func TestSetDeadline(t *testing.T) {
	save := t.TempDir() + "/running.json"
	env := startServer(t, TargetOptions{SavePath: save})
	before := snapshotAll(t, env.client)
	first := env.fake.applied()
	upd := func(v uint64) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(v)}}}
	}

	// The dataplane takes longer than the client allows.
	env.fake.setDelay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := env.client.Set(ctx, upd(77))
	cancel()
	wantCode(t, err, codes.DeadlineExceeded)
	time.Sleep(800 * time.Millisecond) // the Apply and its undo finish
	env.fake.setDelay(0)
	if after := snapshotAll(t, env.client); after != before {
		t.Error("a Set past its deadline changed the configuration")
	}
	if got := env.fake.applied().GetInt().GetNode().GetConfig().GetNodeId(); got != first.GetInt().GetNode().GetConfig().GetNodeId() {
		t.Errorf("the dataplane was left with node-id %d", got)
	}
	if _, err := os.Stat(save); !os.IsNotExist(err) {
		t.Errorf("a Set past its deadline was saved: %v", err)
	}

	// A Set waiting for another one gives up at its deadline.
	env.fake.setDelay(500 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := env.client.Set(context.Background(), upd(5)); err != nil {
			t.Errorf("the slow Set: %v", err)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = env.client.Set(ctx, upd(6))
	cancel()
	wantCode(t, err, codes.DeadlineExceeded)
	wg.Wait()
	env.fake.setDelay(0)
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "5" {
		t.Errorf("node-id %s, want the slow Set's 5", got)
	}
}

// Lists hold at most what the dataplanes can (max-elements): a bigger
// list is refused early with its path, whether it comes in one value or
// from what a Set adds to the running configuration.
func TestSetMaxElements(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	entries := gp(t, "/int/watchlist/entries")
	_, err := env.client.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: entries, Val: watchlistBatch(1, 1025)}}})
	wantCode(t, err, codes.InvalidArgument)
	if msg := err.Error(); !strings.Contains(msg, "/int/watchlist/entries/entry: 1025 entries") || !strings.Contains(msg, "1024") {
		t.Errorf("message: %v", err)
	}
	set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: entries, Val: watchlistBatch(1, 1024)}}})
	_, err = env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=5000]/config/description"), Val: jsonIETF(`"one too many"`)}}})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "1025 entries") {
		t.Errorf("message: %v", err)
	}
	var sessions strings.Builder
	sessions.WriteString(`{"int-session": [`)
	for i := 0; i < 65; i++ {
		if i > 0 {
			sessions.WriteString(",")
		}
		fmt.Fprintf(&sessions, `{"name": "s%d", "config": {"name": "s%d"}}`, i, i)
	}
	sessions.WriteString("]}")
	_, err = env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/int-sessions"), Val: jsonIETF(sessions.String())}}})
	wantCode(t, err, codes.InvalidArgument)
}

// hw-id takes the 6 bits of the report headers' hw_id: 64 is refused
// naming the leaf, and changes nothing.
func TestSetHWIDRange(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	const p = "/int/node/config/hw-id"
	if _, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, p), Val: jsonIETF(`63`)}}}); err != nil {
		t.Fatalf("Set %s 63: %v", p, err)
	}
	before := snapshotAll(t, env.client)
	_, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, p), Val: jsonIETF(`64`)}}})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), p+": 64 is outside the range 0..63") {
		t.Errorf("the refusal does not name hw-id: %v", err)
	}
	if after := snapshotAll(t, env.client); after != before {
		t.Errorf("a refused Set changed the tree")
	}
	if got := leafVal(t, env.client, p); got != "63" {
		t.Errorf("%s = %s after the refused Set, want 63", p, got)
	}
}

package gen_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

const examplePath = "../yang/examples/full-config.json"

func loadExample(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatalf("reading example: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("example is not JSON: %v", err)
	}
	return doc
}

func unmarshalValidate(doc map[string]any) (*gen.Device, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return gen.ParseConfig(raw)
}

func TestExampleConfigIsValid(t *testing.T) {
	dev, err := unmarshalValidate(loadExample(t))
	if err != nil {
		t.Fatalf("example config rejected: %v", err)
	}
	i := dev.GetInt()
	if got := i.GetNode().GetConfig().GetNodeId(); got != 1 {
		t.Errorf("node-id = %d, want 1", got)
	}
	if got := len(i.GetIntSessions().GetIntSession("md-5").GetConfig().GetInstructions()); got != 10 {
		t.Errorf("md-5 has %d instructions, want 10", got)
	}
	if got := i.GetMarking().GetConfig().GetProbeMarker(); got != 0xaabbccddeeff00ff {
		t.Errorf("probe-marker = %#x", got)
	}
	if got := len(i.GetEvents().Event); got != 6 {
		t.Errorf("%d events, want one per DTel event type (6)", got)
	}
	rs := i.GetReportSessions().GetReportSession("collector")
	if got := len(rs.GetCollectors().Collector); got != 2 {
		t.Errorf("%d collectors, want 2", got)
	}
	e := i.GetWatchlist().GetEntries().GetEntry(20)
	if got := e.GetVxlanMatch().GetConfig().GetVni(); got != 5001 {
		t.Errorf("vni = %d, want 5001", got)
	}
	if got := e.GetActions().GetConfig().GetFlowOp(); got != gen.IntdInt_FlowOp_POSTCARD {
		t.Errorf("flow-op = %v, want POSTCARD", got)
	}
	qr := i.GetQueueReports().GetQueueReport("eth1", 0)
	if got := qr.GetConfig().GetLatencyThreshold(); got != 100000 {
		t.Errorf("latency-threshold = %d", got)
	}
	dom := dev.GetDomainSpecificMetadata().GetDomain(4660)
	if got := dom.GetFields().GetField(0).GetConfig().GetDsInstructionMode(); got != gen.IntdIntMetadataSemantics_IntDsInstructionMode_SOURCE_INSERTED {
		t.Errorf("ds-instruction-mode = %v", got)
	}

	// The example must survive a round trip through RFC 7951 JSON.
	out, err := ygot.EmitJSON(dev, &ygot.EmitJSONConfig{Format: ygot.RFC7951, RFC7951Config: &ygot.RFC7951JSONConfig{AppendModuleName: true}})
	if err != nil {
		t.Fatalf("EmitJSON: %v", err)
	}
	again := &gen.Device{}
	if err := gen.Unmarshal([]byte(out), again); err != nil {
		t.Fatalf("re-reading emitted JSON: %v", err)
	}
	diff, err := ygot.Diff(dev, again)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	if len(diff.GetUpdate())+len(diff.GetDelete()) != 0 {
		t.Errorf("round trip changed the config: %v", diff)
	}
}

// set walks doc along path and sets the last element to v; numeric path
// elements index lists.
func set(t *testing.T, doc map[string]any, path string, v any) {
	t.Helper()
	var cur any = doc
	parts := strings.Split(path, "/")
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return
			}
			cur = c[p]
		case []any:
			var idx int
			if _, err := fmt.Sscan(p, &idx); err != nil {
				t.Fatalf("bad index %q in %s", p, path)
			}
			cur = c[idx]
		default:
			t.Fatalf("cannot walk %s at %q", path, p)
		}
	}
}

func TestInvalidConfigsNameThePath(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		value    any
		wantPath string
	}{
		{"out of range", "intd-int:int/int-sessions/int-session/0/config/remaining-hop-count", 0, "remaining-hop-count"},
		{"dscp out of range", "intd-int:int/report-sessions/report-session/0/config/dscp", 64, "dscp"},
		{"vni out of range", "intd-int:int/watchlist/entries/entry/1/vxlan-match/config/vni", 16777216, "vni"},
		{"dangling leafref", "intd-int:int/events/event/0/config/report-session", "no-such-session", "report-session"},
		{"dangling int-session leafref", "intd-int:int/watchlist/entries/entry/0/actions/config/int-session", "missing", "int-session"},
		{"unknown leaf", "intd-int:int/node/config/turbo-mode", true, "/intd-int:int/node/config/turbo-mode"},
		{"wrong type", "intd-int:int/node/config/node-id", "one", "/intd-int:int/node/config/node-id"},
		{"wrong type in list", "intd-int:int/report-sessions/report-session/0/collectors/collector/1/config/port", true, "/intd-int:int/report-sessions/report-session[name=collector]/collectors/collector[address=192.0.2.101][port=32766]/config/port"},
		{"bad enum", "intd-int:int/int-sessions/int-session/0/config/mode", "INT_XX", "/intd-int:int/int-sessions/int-session[name=md-5]/config/mode"},
		{"bad pattern", "intd-int:int/report-sessions/report-session/0/config/source-address", "192.0.2.256", "source-address"},
		{"bad prefix", "intd-int:int/watchlist/entries/entry/0/match/config/source-prefix", "10.0.1.0/33", "source-prefix"},
		{"bad identity", "intd-int:int/int-sessions/int-session/1/config/instructions", []any{"intd-int-metadata-semantics:METADATA_TIME_NANOSECONDS"}, "/intd-int:int/int-sessions/int-session[name=mx-probe]/config/instructions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := loadExample(t)
			set(t, doc, tc.path, tc.value)
			_, err := unmarshalValidate(doc)
			if err == nil {
				t.Fatalf("config with %s = %v was accepted", tc.path, tc.value)
			}
			if !strings.Contains(err.Error(), tc.wantPath) {
				t.Errorf("error does not name %q: %v", tc.wantPath, err)
			}
			if testing.Verbose() {
				t.Logf("%v", err)
			}
		})
	}
}

func TestSchemaAndModelData(t *testing.T) {
	schema, err := gen.Schema()
	if err != nil {
		t.Fatalf("Schema: %v", err)
	}
	if schema.RootSchema() == nil {
		t.Fatal("no root schema")
	}
	names := map[string]bool{}
	for _, m := range gen.ΓModelData {
		names[m.GetName()] = true
	}
	for _, want := range []string{"intd-int", "intd-int-metadata-semantics"} {
		if !names[want] {
			t.Errorf("model data lacks %s", want)
		}
	}
}

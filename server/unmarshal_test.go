package server

import (
	"os"
	"reflect"
	"testing"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/gen/yangjson"
)

// unmarshalJSON fills a tree exactly as ygot's unmarshalling does, over
// every node type of the example configuration, and merges list entries.
func TestUnmarshalJSONMatchesYgot(t *testing.T) {
	data, err := os.ReadFile("../yang/examples/full-config.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := gen.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yangjson.DecodeJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	norm, _, err := gen.Model().NormalizeJSON(theSchemaRoot(t), doc, "", yangjson.RFC7951)
	if err != nil {
		t.Fatal(err)
	}
	got := &gen.Device{}
	if err := unmarshalJSON(reflect.ValueOf(got).Elem(), theSchemaRoot(t), norm.(map[string]any)); err != nil {
		t.Fatal(err)
	}
	diff, err := ygot.Diff(want, got)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.GetUpdate())+len(diff.GetDelete()) != 0 {
		t.Errorf("unmarshalJSON differs from ygot: %v", diff)
	}

	// Merging: an entry given again keeps what the new value does not set.
	more, _ := yangjson.DecodeJSON([]byte(`{"intd-int:int": {"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10, "description": "merged"}}]}}}}`))
	norm, _, err = gen.Model().NormalizeJSON(theSchemaRoot(t), more, "", yangjson.RFC7951)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshalJSON(reflect.ValueOf(got).Elem(), theSchemaRoot(t), norm.(map[string]any)); err != nil {
		t.Fatal(err)
	}
	e := got.GetInt().GetWatchlist().GetEntries().GetEntry(10)
	if e.GetConfig().GetDescription() != "merged" || e.GetMatch().GetConfig().GetSourcePrefix() != want.GetInt().GetWatchlist().GetEntries().GetEntry(10).GetMatch().GetConfig().GetSourcePrefix() {
		t.Errorf("merged entry 10: %+v", e)
	}
}

package yangjson_test

import (
	"strings"
	"testing"

	"github.com/openconfig/goyang/pkg/yang"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/gen/yangjson"
)

// instructions is the schema entry of an INT session's instructions, a
// leaf-list of identities defined in intd-int-metadata-semantics.
func instructions(t *testing.T) *yang.Entry {
	t.Helper()
	root, err := gen.RootEntry()
	if err != nil {
		t.Fatal(err)
	}
	e := root
	for _, n := range []string{"int", "int-sessions", "int-session", "config", "instructions"} {
		if e = e.Dir[n]; e == nil {
			t.Fatalf("no %s in the schema", n)
		}
	}
	return e
}

// TestIdentityModules: a model names the module defining each identity
// from its generated enumerations, and values qualified by another
// module are refused; a model without them cannot tell, and takes any.
func TestIdentityModules(t *testing.T) {
	e := instructions(t)
	m := gen.Model()
	for _, v := range []string{"METADATA_FIELD_NODE_ID", "intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"} {
		if _, _, err := m.NormalizeJSON(e, []any{v}, "/i", yangjson.RFC7951); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}
	bad := "intd-int:METADATA_FIELD_NODE_ID"
	_, _, err := m.NormalizeJSON(e, []any{bad}, "/i", yangjson.RFC7951)
	if err == nil || !strings.Contains(err.Error(), "not an identity derived from") {
		t.Errorf("%s: %v, want a refusal naming the base", bad, err)
	}
	if _, _, err := yangjson.NewModel(nil).NormalizeJSON(e, []any{bad}, "/i", yangjson.RFC7951); err != nil {
		t.Errorf("a model without enumerations refused %s: %v", bad, err)
	}
	if _, _, err := m.NormalizeJSON(e, []any{"NO_SUCH_FIELD"}, "/i", yangjson.RFC7951); err == nil {
		t.Error("an undefined identity was taken")
	}
}

// TestLegacyNumbers: gNMI's legacy JSON takes a 64-bit integer as a
// string or a number; RFC 7951 wants it as a string, and normalizing
// writes that form.
func TestLegacyNumbers(t *testing.T) {
	root, err := gen.RootEntry()
	if err != nil {
		t.Fatal(err)
	}
	pm := root.Dir["int"].Dir["marking"].Dir["config"].Dir["probe-marker"]
	if pm == nil {
		t.Fatal("no probe-marker in the schema")
	}
	doc, err := yangjson.DecodeJSON([]byte(`12345678901234`))
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := gen.Model().NormalizeJSON(pm, doc, "/pm", yangjson.LegacyJSON)
	if err != nil || !changed || out != "12345678901234" {
		t.Errorf("legacy number: %v %v %v, want the string form", out, changed, err)
	}
}

package metrics

import (
	"sort"
	"strings"
	"testing"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intd-project/intd/gen"
)

// counterPaths lists the schema paths of every counter leaf.
func counterPaths(t *testing.T) (*yang.Entry, [][]string) {
	root, err := gen.RootEntry()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	var walk func(e *yang.Entry, p []string)
	walk = func(e *yang.Entry, p []string) {
		if !e.IsDir() {
			if familyOf(root, p, false) != nil {
				out = append(out, append([]string(nil), p...))
			}
			return
		}
		ks := make([]string, 0, len(e.Dir))
		for k := range e.Dir {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			walk(e.Dir[k], append(p, k))
		}
	}
	walk(root, nil)
	return root, out
}

// TestSchemaNames derives the metric of every counter in the models:
// names are unique and valid, counters' end in _total.
func TestSchemaNames(t *testing.T) {
	root, paths := counterPaths(t)
	if len(paths) < 20 {
		t.Fatalf("only %d counters in the schema", len(paths))
	}
	seen := map[string]string{}
	for _, p := range paths {
		f := familyOf(root, p, true)
		path := "/" + strings.Join(p, "/")
		if prev, dup := seen[f.name]; dup {
			t.Errorf("%s and %s both export %s", prev, path, f.name)
		}
		seen[f.name] = path
		if !strings.HasPrefix(f.name, "intd_") || strings.HasSuffix(f.name, "_total") != (f.typ == prometheus.CounterValue) || strings.ContainsAny(f.name, "-/") {
			t.Errorf("%s: bad name %s", path, f.name)
		}
		var labels []string
		for _, k := range f.keys {
			labels = append(labels, k.label)
		}
		t.Logf("%-90s %s%v", path, f.name, labels)
	}
}

package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/intd-project/intd/"

// allowed lists, per layer, the project packages a package there may
// import. Data flows down (server -> dtel -> sai -> dataplane) and state
// flows up; no package imports one above it, and the wire codecs know
// nothing of config.
var allowed = map[string][]string{
	"gen": {"gen/"},
	// The generic YANG JSON checks know no generated model.
	"gen/yangjson": {},
	// The spec vocabulary (instruction bits, event types, drop reasons)
	// is a leaf: it imports nothing of the module, every layer may use it.
	"sai/spec": {},
	// The gNMI server serves whatever schema it is given: it imports no
	// generated model, only the generic YANG JSON checks.
	"server": {"gen/yangjson", "sai/spec"},
	// intd's model and typed API over the server, and its Prometheus
	// exporter.
	"server/intdmodel": {"gen", "server", "sai/spec"},
	"server/metrics":   {"gen", "server/metrics", "sai/spec"},
	// The SONiC CONFIG_DB source speaks YANG and Redis and configures
	// through the gNMI server, like any northbound client: no dtel, sai
	// or dataplane.
	"server/sonic": {"gen", "server/sonic", "sai/spec"},
	// The collector's state as its YANG model: a read-only gNMI target
	// over the report collector.
	"server/collector":    {"gen", "server", "server/collector", "dataplane/collector", "dataplane/wire", "sai/spec"},
	"dtel":                {"gen", "sai", "sai/spec"},
	"sai":                 {"sai", "sai/spec"},
	"dataplane/wire":      {"dataplane/wire", "sai/spec"},
	"dataplane/report":    {"dataplane/wire", "sai/spec"},
	"dataplane/collector": {"dataplane/wire", "sai/spec"},
	// The collector's Prometheus exporter names drop reasons by the spec
	// table; the collector itself stays free of sai and Prometheus.
	"dataplane/collector/metrics": {"dataplane/collector", "dataplane/wire", "sai/spec"},
	// The collector's publisher to NATS JetStream: the collector's
	// events and summaries, free of sai and Prometheus too.
	"dataplane/collector/stream": {"dataplane/collector", "dataplane/wire", "sai/spec"},
	// Backends implement sai.Backend, so they see sai's types.
	"dataplane/": {"sai", "sai/spec", "dataplane/"},
	// Build information and the /metrics server shared by the commands,
	// and the build tools of deploy/, stand apart from the node.
	"cmd/internal/": {"cmd/internal/"},
	// The gNMI listener settings both commands share configure the server.
	"cmd/internal/gnmilisten": {"cmd/internal/", "server"},
	"deploy/":                 {},
}

// forbidden lists, per package, outside imports it must not have: the
// packet codecs and the collector's report path stay free of Prometheus
// (the collector's exporter is its own package).
var forbidden = map[string][]string{
	"dataplane/wire": {"github.com/prometheus/"},
	// Only the collector's publisher (dataplane/collector/stream) speaks
	// NATS.
	"dataplane/collector": {"github.com/prometheus/", "github.com/nats-io/"},
}

func layerOf(pkg string) (string, []string) {
	best := ""
	for l := range allowed {
		if (pkg == l || strings.HasPrefix(pkg, strings.TrimSuffix(l, "/")+"/")) && len(l) > len(best) {
			best = l
		}
	}
	return best, allowed[best]
}

func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"...")
	cmd.Dir = ".."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(out)
	checked := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(p.ImportPath, module)
		// internal/ holds test helpers: no program or library links them.
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"internal/") && !strings.HasPrefix(pkg, "internal/") {
				t.Errorf("%s imports the test helper %s", pkg, strings.TrimPrefix(imp, module))
			}
		}
		layer, ok := layerOf(pkg)
		if layer == "" {
			continue // cmd/ and tests/ may wire anything together
		}
		checked++
		for _, imp := range p.Imports {
			for _, f := range forbidden[pkg] {
				if strings.HasPrefix(imp, f) {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			fine := false
			for _, a := range ok {
				if dep == strings.TrimSuffix(a, "/") || strings.HasPrefix(dep, strings.TrimSuffix(a, "/")+"/") {
					fine = true
				}
			}
			if !fine {
				t.Errorf("%s imports %s: layer %q may only import %v", pkg, dep, layer, ok)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if checked < 8 {
		t.Fatalf("only %d packages checked", checked)
	}
}

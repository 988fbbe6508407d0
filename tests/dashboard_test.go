package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// dashboardQueries returns every PromQL expression of a Grafana dashboard
// (panel targets, template variable queries), by where it is.
func dashboardQueries(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard without title or uid")
	}
	out := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q target %s: empty expression", p.Title, tg.RefID)
			}
			out["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		// label_values(SELECTOR, LABEL) is Grafana's, not PromQL: its
		// selector is.
		m := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`).FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: unexpected query %q", v.Name, q.Query)
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

// grafanaVars replaces Grafana's variables by values PromQL accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$node", ".*")

// metricNames parses expr and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// exposedNames scrapes a /metrics endpoint and returns the sample names
// it exposes (histograms as their _bucket, _sum and _count series).
func exposedNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string]bool{}
	for name, mf := range fams {
		if len(mf.Metric) == 0 {
			continue
		}
		out[name] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = true
			}
		}
	}
	return out
}

func freeAddr(t *testing.T, network string) string {
	t.Helper()
	var addr string
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = c.LocalAddr().String()
		c.Close()
	} else {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr().String()
		l.Close()
	}
	return addr
}

// TestDashboard parses the Grafana dashboard and every PromQL expression
// in it with Prometheus' parser, then runs `intd lab` sending its reports
// to intcollector (both real binaries, loopback only) and checks that
// every metric the dashboard names is exposed by one of their /metrics.
func TestDashboard(t *testing.T) {
	queries := dashboardQueries(t, filepath.Join("..", "deploy", "grafana", "intd.json"))
	if len(queries) < 15 {
		t.Fatalf("only %d queries in the dashboard", len(queries))
	}
	used := map[string][]string{}
	for where, q := range queries {
		names, err := metricNames(q)
		if err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, q)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}

	bin := buildBinaries(t)
	reports, colMetrics, labMetrics, gnmi := freeAddr(t, "udp"), freeAddr(t, "tcp"), freeAddr(t, "tcp"), freeAddr(t, "tcp")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs bytes.Buffer
	col := exec.CommandContext(ctx, filepath.Join(bin, "intcollector"), "--listen", reports, "--metrics", colMetrics, "--gnmi", "",
		"--flow-metrics", "100", "--int-dscp", "0x17", "--int-dscp-mask", "0x3f")
	col.Stdout, col.Stderr = io.Discard, &logs
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { col.Process.Kill(); col.Wait() }()
	// A burst beyond s2's queue: queue reports and tail drops as well.
	lab := exec.CommandContext(ctx, filepath.Join(bin, "intd"), "lab", "--addr", gnmi, "--collector", reports,
		"--metrics", labMetrics, "--burst", "300", "--summary-every", "0")
	lab.Stdout, lab.Stderr = &logs, &logs
	if err := lab.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { lab.Process.Kill(); lab.Wait() }()

	var exposed map[string]bool
	var missing []string
	eventually(t, 20*time.Second, "every dashboard metric exposed", func() (bool, string) {
		exposed = map[string]bool{}
		for _, u := range []string{"http://" + colMetrics + "/metrics", "http://" + labMetrics + "/metrics"} {
			if _, err := http.Get(u); err != nil {
				return false, err.Error()
			}
			for n := range exposedNames(t, u) {
				exposed[n] = true
			}
		}
		missing = missing[:0]
		for n := range used {
			if !exposed[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, strings.Join(missing, ", ")
	})
	if t.Failed() {
		for _, n := range missing {
			t.Errorf("%s (used by %v) is not exposed", n, used[n])
		}
		t.Logf("logs:\n%s", logs.String())
	}
	t.Logf("%d queries name %d metrics, all exposed", len(queries), len(used))
}

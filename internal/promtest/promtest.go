// Package promtest reads and lints Prometheus expositions in tests.
package promtest

import (
	"bytes"
	"maps"
	"os/exec"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Check runs `promtool check metrics` (Prometheus' linter) on a scrape,
// as a subtest that skips when promtool is not installed.
func Check(t *testing.T, text []byte) {
	t.Helper()
	t.Run("promtool", func(t *testing.T) {
		path, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool not installed (Debian package prometheus): the exposition lint is skipped")
		}
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = bytes.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}

// Families parses a text exposition into its metric families.
func Families(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(text))
}

// Parse is Families, failing the test on a malformed exposition.
func Parse(t testing.TB, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := Families(text)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// Sample is the value of the first sample of family name whose labels
// include labels (a histogram's sample count).
func Sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if w, ok := have[k]; !ok || w != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// Value is Sample over a text exposition; false when it does not parse.
func Value(text, name string, labels map[string]string) (float64, bool) {
	fams, err := Families([]byte(text))
	if err != nil {
		return 0, false
	}
	return Sample(fams, name, labels)
}

// Labels is base with the label pairs kv (name, value, ...) added.
func Labels(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Package promtest lints Prometheus expositions in tests.
package promtest

import (
	"bytes"
	"os/exec"
	"testing"
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

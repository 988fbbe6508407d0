package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpAndVersion runs the built command as an operator would: -h
// names every mode and exits 0, --version prints the build.
func TestHelpAndVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "intcollector")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"-h"}, 0, []string{"intcollector decode", "intcollector query", "intcollector version", "-listen", "-nats", "-allow", "-receivers"}},
		{[]string{"--receivers", "0"}, 2, []string{"--receivers: the range is 1 to 64"}},
		{[]string{"--batch", "1025"}, 2, []string{"--batch: the range is 1 to 1024"}},
		{[]string{"--help"}, 0, []string{"intcollector decode"}},
		{[]string{"decode", "-h"}, 0, []string{"FILE.pcap", "-int-geneve-option-class"}},
		{[]string{"query", "-h"}, 0, []string{"-latency-above", "-node"}},
		{[]string{"query"}, 2, []string{"usage: intcollector query"}},
		{[]string{"--version"}, 0, []string{"intcollector ", "\ncommit: ", "\ngo:     go"}},
		{[]string{"version"}, 0, []string{"intcollector "}},
		{[]string{"version", "extra"}, 2, []string{"unexpected arguments"}},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code {
			t.Errorf("intcollector %v exited %d, want %d\n%s", tc.args, code, tc.code, out)
		}
		for _, want := range tc.contains {
			if !strings.Contains(string(out), want) {
				t.Errorf("intcollector %v does not print %q:\n%s", tc.args, want, out)
			}
		}
	}
}

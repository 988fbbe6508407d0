package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/cmd/intd/internal/placeholder"
	"github.com/intd-project/intd/gen"
)

func TestDefaultConfig(t *testing.T) {
	cfg, err := initialConfig(7)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetInt().GetNode().GetConfig().GetNodeId(); got != 7 {
		t.Errorf("node-id %d, want 7 from --node-id", got)
	}
	if !cfg.GetInt().GetNode().GetConfig().GetEnabled() {
		t.Error("node not enabled")
	}
	if cfg.GetInt().GetWatchlist().GetEntries().GetEntry(10) == nil || cfg.GetInt().GetIntSessions().GetIntSession("default") == nil || cfg.GetInt().GetReportSessions().GetReportSession("collector") == nil {
		t.Error("default configuration lacks its INT session, report session or watchlist entry")
	}
	a := placeholder.New()
	if err := a.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	st, _ := a.State(context.Background())
	if st.GetInt().GetNode().GetState().GetNodeId() != 7 || st.GetInt().GetNode().GetState().GetDataplane() != placeholder.Name {
		t.Errorf("placeholder state does not echo the configuration: %+v", st.GetInt().GetNode().GetState())
	}
	// State alone has no config containers for the list keys to refer
	// to; merged with the configuration it must be valid.
	merged, err := ygot.MergeStructs(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := merged.(*gen.Device).ΛValidate(); err != nil {
		t.Errorf("placeholder state invalid: %v", err)
	}
}

func TestRunRefusals(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dataplane", "warp-drive", "--save", ""}, `unknown --dataplane "warp-drive"`},
		{[]string{"run", "--insecure", "--addr", ":9339", "--save", ""}, "only allowed on a loopback"},
		{[]string{"run", "--insecure", "--addr", "10.1.2.3:9339", "--save", ""}, "only allowed on a loopback"},
		{[]string{"run", "--tls-cert", "x.pem", "--save", ""}, "both a certificate and a key"},
		{[]string{"run", "--state-interval", "soon"}, "bad --state-interval"},
		{[]string{"frobnicate"}, "unknown subcommand"},
	} {
		err := dispatch(ctx, tc.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestSettingsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "intd.json")
	os.WriteFile(f, []byte(`{"addr": "127.0.0.1:1", "node-id": 9, "insecure": true, "state-interval": "250ms"}`), 0o600)
	o, err := parseRunArgs([]string{"--config", f, "--node-id", "11"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "127.0.0.1:1" || o.NodeID != 11 || !o.Insecure || o.StateInterval != 250*time.Millisecond || o.Save != "/var/lib/intd/running.json" {
		t.Errorf("settings %+v", o)
	}
	os.WriteFile(f, []byte(`{"adress": "x"}`), 0o600)
	if _, err := parseRunArgs([]string{"--config", f}, os.Stderr); err == nil {
		t.Error("unknown setting accepted")
	}
}

// gnmiCli finds the gnmi_cli binary (go install
// github.com/openconfig/gnmi/cmd/gnmi_cli@v0.14.1) or skips.
func gnmiCli(t *testing.T) string {
	if p, err := exec.LookPath("gnmi_cli"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gnmi_cli")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("gnmi_cli not found on PATH or in $(go env GOPATH)/bin; install it with: go install github.com/openconfig/gnmi/cmd/gnmi_cli@v0.14.1")
	return ""
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestGnmiCli runs the real intd binary (TLS with its self-signed
// certificate) and drives it with gnmi_cli as a separate process.
func TestGnmiCli(t *testing.T) {
	cli := gnmiCli(t)
	if testing.Short() {
		t.Skip("builds the intd binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "intd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := freePort(t)
	save := filepath.Join(dir, "running.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	intd := exec.CommandContext(ctx, bin, "run", "--addr", addr, "--save", save, "--target", "node1", "--node-id", "3", "--state-interval", "100ms")
	intd.Stdout, intd.Stderr = &logs, &logs
	if err := intd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		intd.Process.Signal(os.Interrupt)
		intd.Wait()
		if t.Failed() {
			t.Logf("intd logs:\n%s", logs.String())
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("intd did not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"-address", addr, "-tls_skip_verify", "-timeout", "10s"}, args...)
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gnmi_cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	out := run("-capabilities")
	for _, w := range []string{"intd-int", "intd-int-metadata-semantics", "JSON_IETF", "0.10.0"} {
		if !strings.Contains(out, w) {
			t.Errorf("capabilities output lacks %q:\n%s", w, out)
		}
	}

	out = run("-get", "-proto", `path: <elem: <name: "int"> elem: <name: "node"> elem: <name: "config"> elem: <name: "node-id">> encoding: JSON_IETF`)
	if !strings.Contains(out, "3") || !strings.Contains(out, "node-id") {
		t.Errorf("get output:\n%s", out)
	}

	// A streaming subscription in the background sees the Set below.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	var subOut bytes.Buffer
	sub := exec.CommandContext(sctx, cli, "-address", addr, "-tls_skip_verify", "-qt", "s", "-dt", "s",
		"-q", "/int/node/config/node-id", "-t", "node1", "-sd", "8s")
	sub.Stdout, sub.Stderr = &subOut, &subOut
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // let the subscription sync first

	out = run("-set", "-proto", `update: <path: <elem: <name: "int"> elem: <name: "node"> elem: <name: "config"> elem: <name: "node-id">> val: <uint_val: 42>>`)
	if !strings.Contains(out, "UPDATE") {
		t.Errorf("set output:\n%s", out)
	}
	if err := sub.Wait(); err != nil {
		t.Logf("subscription ended: %v", err)
	}
	t.Logf("subscription output:\n%s", subOut.String())
	if s := subOut.String(); !strings.Contains(s, "/int/node/config/node-id, {") || !strings.Contains(s, " 42}") {
		t.Errorf("streaming subscription did not report the Set:\n%s", s)
	}

	// The Set was saved.
	data, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gen.ParseConfig(data)
	if err != nil || cfg.GetInt().GetNode().GetConfig().GetNodeId() != 42 {
		var pretty bytes.Buffer
		json.Indent(&pretty, data, "", " ")
		t.Errorf("saved config (%v):\n%s", err, pretty.String())
	}
}

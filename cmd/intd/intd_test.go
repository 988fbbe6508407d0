package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
)

// TestInitialConfig checks what a node starts with when nothing is saved:
// an empty configuration (INT idle, --node-id alone enables nothing), or
// the --startup-config file with --node-id set in it.
func TestInitialConfig(t *testing.T) {
	cfg, err := initialConfig("", 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetInt().GetNode().GetConfig().GetNodeId(); got != 7 {
		t.Errorf("node-id %d, want 7 from --node-id", got)
	}
	if roles := intdmodel.Roles(cfg); len(roles) > 0 {
		t.Errorf("empty configuration with a node-id enables %v", roles)
	}
	js, err := ygot.EmitJSON(cfg, &ygot.EmitJSONConfig{Format: ygot.RFC7951, SkipValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	json.Compact(&compact, []byte(js))
	if compact.String() != `{"int":{"node":{"config":{"node-id":7}}}}` {
		t.Errorf("initial configuration holds more than the node-id: %s", js)
	}
	if cfg, err := initialConfig("", 0); err != nil || !reflect.DeepEqual(cfg, &gen.Device{}) {
		t.Errorf("no startup file, no node-id: %v, %v", cfg, err)
	}

	const example = "../../yang/examples/startup-router.json"
	cfg, err = initialConfig(example, 9)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetInt().GetNode().GetConfig().GetNodeId(); got != 9 {
		t.Errorf("node-id %d, want 9: --node-id overrides the file", got)
	}
	if roles := intdmodel.Roles(cfg); !slices.Contains(roles, "int-endpoint") || !slices.Contains(roles, "int-transit") {
		t.Errorf("startup example roles %v", roles)
	}
	if cfg.GetInt().GetWatchlist().GetEntries().GetEntry(10) == nil || !cfg.GetInt().GetInterfaces().GetInterface("eth0").GetConfig().GetIntSink() {
		t.Error("startup example lacks its watchlist entry or its sink interface")
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"intd-int:int": {"node": {"config": {"node-id": 1, "frobnicate": true}}}}`), 0o600)
	if _, err := initialConfig(bad, 0); err == nil || !strings.Contains(err.Error(), "frobnicate") || !strings.Contains(err.Error(), bad) {
		t.Errorf("invalid startup file: %v", err)
	}
	if _, err := initialConfig(filepath.Join(t.TempDir(), "missing.json"), 0); err == nil {
		t.Error("missing startup file accepted")
	}
}

func TestRunRefusals(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	creds := filepath.Join(dir, "users")
	h, _ := server.HashPassword("pw")
	os.WriteFile(creds, []byte("alice read-write "+h+"\n"), 0o644)
	badStartup := filepath.Join(dir, "startup.json")
	os.WriteFile(badStartup, []byte(`{"intd-int:int": {"node": {"config": {"node-id": "one"}}}}`), 0o600)
	for _, tc := range []struct {
		args []string
		want []string
		root bool // gets past the privilege check only as root
	}{
		{[]string{"run", "--dataplane", "warp-drive", "--save", ""}, []string{`unknown --dataplane "warp-drive"`, "ebpf", "soft"}, false},
		{[]string{"run", "--insecure", "--addr", ":9339", "--save", ""}, []string{"only allowed on a loopback"}, false},
		{[]string{"run", "--insecure", "--addr", "10.1.2.3:9339", "--save", ""}, []string{"only allowed on a loopback"}, false},
		{[]string{"run", "--tls-cert", "x.pem", "--save", ""}, []string{"both a certificate and a key"}, false},
		{[]string{"run", "--state-interval", "soon"}, []string{"bad --state-interval"}, false},
		{[]string{"frobnicate"}, []string{"unknown subcommand"}, false},
		// Beyond loopback without authentication.
		{[]string{"run", "--addr", ":9339", "--interfaces", "lo"}, []string{"not authenticated", "--credentials", "--tls-client-ca", "--allow-unauthenticated"}, false},
		{[]string{"run", "--addr", "0.0.0.0:9339", "--interfaces", "lo"}, []string{"not authenticated"}, false},
		{[]string{"run", "--addr", "192.0.2.1:9339", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, []string{"not authenticated"}, false},
		// Interfaces, checked before any dataplane is touched.
		{[]string{"run", "--dataplane", "soft"}, []string{"--interfaces is required"}, false},
		{[]string{"run", "--dataplane", "ebpf", "--interfaces", "lo,nosuch0"}, []string{"nosuch0"}, false},
		// Files, checked before the dataplane is set up.
		{[]string{"run", "--dataplane", "soft", "--interfaces", "lo", "--state-dir", state, "--save", "/nonexistent-intd-dir/running.json"}, []string{"/nonexistent-intd-dir"}, true},
		{[]string{"run", "--dataplane", "soft", "--interfaces", "lo", "--state-dir", "/proc/intd-state"}, []string{"/proc/intd-state", "--state-dir"}, true},
		{[]string{"run", "--dataplane", "soft", "--interfaces", "lo", "--state-dir", state, "--credentials", creds}, []string{creds, "chmod 600"}, true},
		{[]string{"run", "--dataplane", "soft", "--interfaces", "lo", "--state-dir", state, "--startup-config", badStartup}, []string{"--startup-config", badStartup}, true},
	} {
		if tc.root && os.Geteuid() != 0 {
			continue
		}
		err := dispatch(ctx, tc.args, &out, &out)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want it to say %q", tc.args, err, w)
			}
		}
	}
}

// TestRunHelp checks that `intd run -h` lists the dataplanes.
func TestRunHelp(t *testing.T) {
	var out bytes.Buffer
	if err := dispatch(context.Background(), []string{"run", "-h"}, &out, &out); err != nil {
		t.Fatalf("run -h: %v", err)
	}
	for _, w := range []string{"-dataplane", "ebpf: tc/eBPF", "soft: software switch", "(default \"ebpf\")", "-startup-config", "-allow-unauthenticated", "-state-dir"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("run -h lacks %q:\n%s", w, out.String())
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

	// Defaults that follow other settings.
	for _, tc := range []struct {
		args       []string
		addr, save string
	}{
		{nil, "127.0.0.1:9339", "/var/lib/intd/running.json"},
		{[]string{"--state-dir", "/srv/intd"}, "127.0.0.1:9339", "/srv/intd/running.json"},
		{[]string{"--save", ""}, "127.0.0.1:9339", ""},
		{[]string{"--credentials", "users"}, ":9339", "/var/lib/intd/running.json"},
		{[]string{"--tls-client-ca", "ca.pem", "--addr", "10.0.0.1:830"}, "10.0.0.1:830", "/var/lib/intd/running.json"},
	} {
		o, err := parseRunArgs(tc.args, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		if o.Addr != tc.addr || o.Save != tc.save || o.Dataplane != "ebpf" {
			t.Errorf("%v: addr %q save %q dataplane %q; want %q %q ebpf", tc.args, o.Addr, o.Save, o.Dataplane, tc.addr, tc.save)
		}
	}
	os.WriteFile(f, []byte(`{"state-dir": "/srv/intd", "save": ""}`), 0o600)
	if o, err := parseRunArgs([]string{"--config", f}, os.Stderr); err != nil || o.Save != "" || o.StateDir != "/srv/intd" {
		t.Errorf("settings file save \"\": %+v, %v", o, err)
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

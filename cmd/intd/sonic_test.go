package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/server/sonic"
)

// owned keeps the DTel entries of cfg.
func owned(cfg sonic.Config) sonic.Config {
	out := sonic.Config{}
	for _, k := range cfg.Keys() {
		if cfg.Owned(k) {
			if out[k.Table] == nil {
				out[k.Table] = map[string]sonic.Fields{}
			}
			out[k.Table][k.Name] = cfg.Get(k)
		}
	}
	return out
}

// Every example config_db.json goes through `intd sonic translate` with
// nothing refused, and `intd sonic translate --to-sonic` brings back its
// DTel tables exactly, with nothing left out.
func TestSonicTranslateRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../yang/examples/sonic/*.json")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".yang.json") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			var out, errs bytes.Buffer
			if err := dispatch(context.Background(), []string{"sonic", "translate", f}, &out, &errs); err != nil {
				t.Fatalf("translate: %v\n%s", err, errs.String())
			}
			if errs.Len() > 0 {
				t.Errorf("translate wrote to stderr:\n%s", errs.String())
			}
			dev, err := gen.ParseConfig(out.Bytes())
			if err != nil {
				t.Fatalf("translate printed invalid intd YANG JSON: %v\n%s", err, out.String())
			}
			if dev.GetInt().GetNode().GetConfig() == nil {
				t.Errorf("no node configuration:\n%s", out.String())
			}
			tmp := filepath.Join(t.TempDir(), "intd.json")
			if err := os.WriteFile(tmp, out.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			if err := dispatch(context.Background(), []string{"sonic", "translate", "--to-sonic", tmp}, &out, &errs); err != nil {
				t.Fatalf("translate --to-sonic: %v", err)
			}
			if errs.Len() > 0 {
				t.Errorf("translate --to-sonic left out:\n%s", errs.String())
			}
			back, err := sonic.ParseConfigDB(out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			orig, err := sonic.ParseConfigDB(raw)
			if err != nil {
				t.Fatal(err)
			}
			if want := owned(orig); !back.Equal(want) {
				w, _ := sonic.MarshalConfigDB(want)
				t.Errorf("round trip differs:\n--- got\n%s--- want\n%s", out.String(), w)
			}
		})
	}
}

// Refused entries are listed with key, field and reason, and fail the
// command; what CONFIG_DB cannot say is listed by --to-sonic.
func TestSonicTranslateRefusals(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "config_db.json")
	os.WriteFile(in, []byte(`{"DTEL": {"LATENCY_SENSITIVITY": {"LATENCY_SENSITIVITY": "100"}, "SWITCH_ID": {"SWITCH_ID": "1"}},
	  "ACL_RULE": {"DTEL_FLOW_WATCHLIST|R": {"PRIORITY": "5", "VLAN_ID": "8", "FLOW_OP": "NOP"}}}`), 0o600)
	var out, errs bytes.Buffer
	err := dispatch(context.Background(), []string{"sonic", "translate", in}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "2 entries refused") {
		t.Errorf("translate: %v, want 2 entries refused", err)
	}
	for _, want := range []string{
		"refused DTEL|LATENCY_SENSITIVITY field LATENCY_SENSITIVITY: 100 is out of range 0..31",
		"refused ACL_RULE|DTEL_FLOW_WATCHLIST|R field VLAN_ID: not supported",
	} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs.String())
		}
	}
	if !strings.Contains(out.String(), `"node-id": 1`) {
		t.Errorf("the accepted entries are not printed:\n%s", out.String())
	}

	out.Reset()
	errs.Reset()
	if err := dispatch(context.Background(), []string{"sonic", "translate", "--to-sonic", "../../yang/examples/full-config.json"}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INT-MX", "not in CONFIG_DB: /int/marking/config/udp-port: no CONFIG_DB field", "/int/node/config/hw-id: no CONFIG_DB field", "packet-interval"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("--to-sonic notes lack %q:\n%s", want, errs.String())
		}
	}
	cfg, err := sonic.ParseConfigDB(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Get(sonic.Key{Table: sonic.TableReportSession, Name: "collector"})["DST_IP_LIST"] != "192.0.2.100;192.0.2.101" {
		t.Errorf("report session collector: %v", cfg[sonic.TableReportSession])
	}
}

// Bad SONiC database settings stop `intd run` before anything starts.
func TestRunSonicRefusals(t *testing.T) {
	var out bytes.Buffer
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--sonic-config-db", "localhost", "--save", ""}, `redis address "localhost": want host:port or a unix socket path`},
		{[]string{"run", "--sonic-db-config", "/nonexistent/database_config.json", "--save", ""}, "SONiC database config"},
		{[]string{"run", "--sonic-config-db", "/var/run/redis/redis.sock", "--startup-config", "x.json", "--save", ""}, "--startup-config conflicts with --sonic-config-db"},
	} {
		err := dispatch(context.Background(), tc.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

package sonic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// yanglint validates data against the sonic-dtel module.
func yanglint(t *testing.T, data []byte) error {
	t.Helper()
	f := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("yanglint", "-p", "../../yang", "-t", "config", "../../yang/sonic-dtel.yang", f).CombinedOutput()
	if err != nil {
		return &yangError{string(out)}
	}
	return nil
}

type yangError struct{ out string }

func (e *yangError) Error() string { return e.out }

// The example config_db.json files are valid sonic-dtel instance data,
// and values intd refuses are refused by the module too.
func TestSonicDTelYANG(t *testing.T) {
	if _, err := exec.LookPath("yanglint"); err != nil {
		t.Skip("yanglint (Debian package libyang2-tools) is not installed")
	}
	files, _ := filepath.Glob("../../yang/examples/sonic/*.json")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfigDB(raw)
		if err != nil {
			t.Fatal(err)
		}
		data, err := YANGInstance(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := yanglint(t, data); err != nil {
			t.Errorf("%s: %v\n%s", f, err, data)
		}
	}
	for _, bad := range []struct {
		k    Key
		f    Fields
		want string
	}{
		{Key{TableDTel, "LATENCY_SENSITIVITY"}, Fields{"LATENCY_SENSITIVITY": "100"}, "100"},
		{Key{TableEvent, "EVENT_TYPE_FLOW_STATE"}, Fields{"EVENT_REPORT_SESSION": "NOPE"}, "NOPE"},
		{Key{TableACLRule, "DTEL_FLOW_WATCHLIST|R"}, Fields{"PRIORITY": "40000", "FLOW_OP": "INT"}, "40000"},
	} {
		cfg := Config{}
		cfg.set(bad.k, bad.f)
		data, _ := YANGInstance(cfg)
		err := yanglint(t, data)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s %v: yanglint %v, want a complaint about %s", bad.k, bad.f, err, bad.want)
		}
	}
}

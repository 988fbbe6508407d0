//go:build linux

package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/intd-project/intd/internal/netnstest"
)

// TestEBPFInitialConfig applies the initial configurations of `intd run`
// (empty with a node-id; the startup example) to the ebpf dataplane on
// veth interfaces in a scratch network namespace.
func TestEBPFInitialConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (loads BPF programs, creates a network namespace)")
	}
	ns, h := netnstest.New(t)
	netnstest.Veth(t, h, [2]string{"d0", "p0"}, [2]string{"d1", "p1"})
	netnstest.Enter(t, ns)
	l, _ := netlink.LinkByName("d0")
	dp := dataplanes["ebpf"]
	if err := dp.check(); err != nil {
		t.Fatalf("this system cannot run the ebpf dataplane: %v", err)
	}
	if _, err := dp.open(context.Background(), dataplaneOptions{}); err == nil {
		t.Error("no error without --interfaces")
	}
	a, err := dp.open(context.Background(), dataplaneOptions{Interfaces: []string{"d0", "d1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := a.(io.Closer)
	if !ok {
		t.Fatal("the ebpf applier is not an io.Closer")
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if qs, _ := netlink.QdiscList(l); len(qs) > 0 {
			for _, q := range qs {
				if q.Type() == "clsact" {
					t.Errorf("clsact qdisc left on d0 after Close")
				}
			}
		}
	}()
	cfg, err := initialConfig("", 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("empty configuration refused by the ebpf dataplane: %v", err)
	}
	st, err := a.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetInt().GetNode().GetState().GetDataplane(); got != "ebpf" {
		t.Errorf("state dataplane %q, want ebpf", got)
	}
	if got := st.GetInt().GetNode().GetState().GetNodeId(); got != 5 {
		t.Errorf("state node-id %d, want 5", got)
	}
	if st.GetInt().GetNode().GetState().GetIntEndpoint() || st.GetInt().GetNode().GetState().GetIntTransit() {
		t.Error("an empty configuration enabled an INT role")
	}

	// The startup example, on this namespace's interfaces.
	data, err := os.ReadFile("../../yang/examples/startup-router.json")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "startup.json")
	os.WriteFile(f, []byte(strings.NewReplacer(`"eth0"`, `"d0"`, `"eth1"`, `"d1"`).Replace(string(data))), 0o600)
	if cfg, err = initialConfig(f, 6); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("startup example refused by the ebpf dataplane: %v", err)
	}
	if st, err = a.State(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !st.GetInt().GetNode().GetState().GetIntEndpoint() || st.GetInt().GetNode().GetState().GetNodeId() != 6 {
		t.Errorf("startup example state: %+v", st.GetInt().GetNode().GetState())
	}
}

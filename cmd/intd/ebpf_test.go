//go:build linux

package main

import (
	"context"
	"io"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestEBPFDefaultConfig applies the embedded default configuration to the
// ebpf dataplane on a veth interface in a scratch network namespace.
func TestEBPFDefaultConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (loads BPF programs, creates a network namespace)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // switches this thread into it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { netns.Set(orig); ns.Close() }()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "d0"}, PeerName: "d1"}); err != nil {
		t.Fatal(err)
	}
	l, _ := netlink.LinkByName("d0")
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	if _, err := dataplanes["ebpf"](nil); err == nil {
		t.Error("no error without --interfaces")
	}
	a, err := dataplanes["ebpf"]([]string{"d0"})
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
	cfg, err := initialConfig(5)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("default configuration refused by the ebpf dataplane: %v", err)
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
}

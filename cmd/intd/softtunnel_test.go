//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// TestRunSoftTunnelOutput: `intd run --dataplane soft` makes no session
// tunnel TAP at start, INT idle; a gNMI Set of the node's tunnel-address
// (after intd dropped its capabilities but CAP_NET_ADMIN) makes one per
// interface, up and redirected to it by tc, logged; deleting the leaf
// removes them, logged; and exit leaves none.
func TestRunSoftTunnelOutput(t *testing.T) {
	needRoot(t)
	ns := intdNS(t, "softtnl")
	state := t.TempDir()
	n := startIntd(t, ns, "--interfaces", "d0,d1", "--dataplane", "soft", "--state-dir", state, "--log-format", "json")
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	n.waitLog(t, "INT is idle", 5*time.Second)
	ip := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	taps := func() []string {
		var names []string
		for _, l := range strings.Split(ip("-o", "link"), "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "intd-tnl") {
				names = append(names, strings.TrimSuffix(f[1], ":"))
			}
		}
		return names
	}
	if got := taps(); len(got) != 0 {
		t.Fatalf("idle, not configured: session tunnel devices %v", got)
	}
	if q, err := exec.Command("tc", "-n", ns, "qdisc", "show").CombinedOutput(); err != nil || strings.Contains(string(q), "clsact") {
		t.Fatalf("idle: tc qdiscs %s (%v), want no clsact", q, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := gnmiIn(t, ns, "127.0.0.1:9339", state)
	node := `{"intd-int:enabled": true, "intd-int:node-id": 1, "intd-int:int-endpoint": true, "intd-int:tunnel-address": "192.0.2.1"}`
	if _, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: pathOf("int", "node", "config"),
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(node)}}}}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, port := range []string{"d0", "d1"} {
		var idx int
		fmt.Sscanf(ip("-o", "link", "show", "dev", port), "%d:", &idx)
		tap := fmt.Sprintf("intd-tnl%d", idx)
		want = append(want, tap)
		if !strings.Contains(ip("link", "show", "dev", tap), ",UP") {
			t.Errorf("%s is not up", tap)
		}
		f, err := exec.Command("tc", "-n", ns, "filter", "show", "dev", tap, "ingress").CombinedOutput()
		if err != nil || !strings.Contains(string(f), "Redirect to device "+port) {
			t.Errorf("%s ingress filters: %s (%v); want a redirect to %s", tap, f, err, port)
		}
		if !n.hasLog("host setting changed", map[string]string{"interface": port, "setting": "session tunnel output", "added": "TAP " + tap}) {
			t.Errorf("%s: the change is not logged", tap)
		}
	}
	if got := taps(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tunnel-address set: session tunnel devices %v, want %v", got, want)
	}

	if _, err := c.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{pathOf("int", "node", "config", "tunnel-address")}}); err != nil {
		t.Fatal(err)
	}
	if got := taps(); len(got) != 0 {
		t.Fatalf("tunnel-address deleted: session tunnel devices %v", got)
	}
	for i, port := range []string{"d0", "d1"} {
		if !n.hasLog("host setting restored", map[string]string{"interface": port, "setting": "session tunnel output", "removed": "TAP " + want[i]}) {
			t.Errorf("%s: the restoration is not logged", want[i])
		}
	}
	// Set again, then stop: exit removes them.
	if _, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: pathOf("int", "node", "config", "tunnel-address"),
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "192.0.2.1"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := taps(); len(got) != 2 {
		t.Fatalf("tunnel-address set again: session tunnel devices %v", got)
	}
	n.stop(t)
	if got := taps(); len(got) != 0 {
		t.Fatalf("after exit: session tunnel devices %v", got)
	}
}

//go:build linux

package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/internal/logtest"
	"github.com/intd-project/intd/internal/netnstest"
	"github.com/intd-project/intd/server"
)

// Capability bit numbers (linux/capability.h).
const (
	bitNetAdmin = 12
	bitBPF      = 39
)

// TestRunIdleByDefault starts `intd run` with no configuration, saved or
// given, on each dataplane (ebpf as the default): it programs nothing,
// says INT is idle, listens on loopback only with a warning, keeps its
// certificate (0600 key, reused with the same fingerprint at the next
// start), drops the capabilities it no longer needs, audits a Set, and
// every line it prints is JSON with --log-format json.
func TestRunIdleByDefault(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		dp   string
		args []string
		caps uint64
	}{
		{"ebpf", nil, 1<<bitNetAdmin | 1<<bitBPF},
		{"soft", []string{"--dataplane", "soft"}, 1 << bitNetAdmin},
	} {
		t.Run(tc.dp, func(t *testing.T) {
			ns := intdNS(t, "idle-"+tc.dp)
			state := t.TempDir()
			args := append([]string{"--interfaces", "d0,d1", "--state-dir", state, "--log-format", "json", "--state-interval", "100ms"}, tc.args...)
			n := startIntd(t, ns, args...)
			lis := n.waitLog(t, "gNMI server listening", 20*time.Second)
			if lis["addr"] != "127.0.0.1:9339" {
				t.Errorf("listening on %v, want 127.0.0.1:9339 (loopback only without authentication)", lis["addr"])
			}
			if lis["level"] != "WARN" {
				t.Errorf("unauthenticated server announced at %v, want WARN", lis["level"])
			}
			n.waitLog(t, "INT is idle", 5*time.Second)

			caps := procCaps(t, n.cmd.Process.Pid)
			for _, set := range []string{"CapEff", "CapPrm", "CapBnd"} {
				if caps[set] != tc.caps {
					t.Errorf("%s %#x, want %#x", set, caps[set], tc.caps)
				}
			}
			if caps["CapInh"] != 0 || caps["CapAmb"] != 0 {
				t.Errorf("inheritable %#x, ambient %#x; want none", caps["CapInh"], caps["CapAmb"])
			}
			if !n.hasLog("capabilities dropped", map[string]string{"kept": "CAP_NET_ADMIN"}) {
				t.Error("kept capabilities not logged")
			}

			// The certificate: kept, key 0600, end-entity, for this host.
			certFile, keyFile := filepath.Join(state, "gnmi-cert.pem"), filepath.Join(state, "gnmi-key.pem")
			if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file: %v, mode %v", err, fi.Mode())
			}
			fp := certFingerprint(t, certFile)
			if !n.hasLog("made a self-signed TLS certificate", map[string]string{"sha256-fingerprint": fp}) {
				t.Error("the new certificate's fingerprint is not logged")
			}
			data, _ := os.ReadFile(certFile)
			blk, _ := pem.Decode(data)
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			host, _ := os.Hostname()
			if cert.IsCA || cert.VerifyHostname(host) != nil || cert.VerifyHostname("127.0.0.1") != nil {
				t.Errorf("certificate: CA %v, DNS %v, IP %v; want an end-entity for %s and loopback", cert.IsCA, cert.DNSNames, cert.IPAddresses, host)
			}

			// Nothing configured: no configuration but what the schema
			// implies, no INT role in state.
			ctx := context.Background()
			c := gnmiIn(t, ns, "127.0.0.1:9339", state)
			cfg, err := getJSON(ctx, c, gpb.GetRequest_CONFIG, "int")
			if err != nil && status.Code(err) != codes.NotFound {
				t.Fatal(err)
			}
			if strings.Contains(cfg, "watchlist") || strings.Contains(cfg, "session") || strings.Contains(cfg, "node-id") {
				t.Errorf("default configuration: %s", cfg)
			}
			st, err := getJSON(ctx, c, gpb.GetRequest_STATE, "int", "node", "state")
			if err != nil {
				t.Fatal(err)
			}
			st = strings.ReplaceAll(st, " ", "")
			if !strings.Contains(st, `"intd-int:dataplane":"`+tc.dp+`"`) || strings.Contains(st, "true") {
				t.Errorf("node state: %s; want dataplane %s and no role enabled", st, tc.dp)
			}

			// A Set from loopback, audited.
			if err := setNodeID(ctx, c, 5); err != nil {
				t.Fatal(err)
			}
			if !n.hasLog("Set applied", map[string]string{"user": "anonymous", "peer": "127.0.0.1:", "changes": "update /int/node/config/node-id = 5"}) {
				t.Error("no audit line for the Set")
			}
			n.stop(t)
			n.records(t) // every line JSON
			if !n.hasLog("shutting down", nil) {
				t.Error("no shutdown line")
			}

			// The next start: the same certificate, the saved configuration.
			n2 := startIntd(t, ns, args...)
			n2.waitLog(t, "gNMI server listening", 20*time.Second)
			if !n2.hasLog("self-signed TLS certificate", map[string]string{"sha256-fingerprint": fp}) || n2.logged("made a self-signed", nil) {
				t.Error("the certificate was not reused")
			}
			if got := certFingerprint(t, certFile); got != fp {
				t.Errorf("certificate file changed: %s, was %s", got, fp)
			}
			c2 := gnmiIn(t, ns, "127.0.0.1:9339", state)
			id, err := getJSON(ctx, c2, gpb.GetRequest_CONFIG, "int", "node", "config", "node-id")
			if err != nil || id != "5" {
				t.Errorf("node-id after restart %q (%v), want 5 from the saved configuration", id, err)
			}
			n2.stop(t)
			n2.records(t)
		})
	}
}

// TestRunLoopbackOnly: a default `intd run` cannot be reached, let alone
// configured, from another network namespace; with credentials it listens
// on every address and wants a login; an address beyond loopback without
// authentication is refused unless explicitly allowed.
func TestRunLoopbackOnly(t *testing.T) {
	needRoot(t)
	a := intdNS(t, "lbA")
	b := newNS(t, "lbB")
	netnstest.IP(t, "link", "add", "a0", "netns", a, "type", "veth", "peer", "name", "b0", "netns", b)
	netnstest.IP(t, "-n", a, "link", "set", "a0", "up")
	netnstest.IP(t, "-n", b, "link", "set", "b0", "up")
	netnstest.IP(t, "-n", a, "addr", "add", "10.99.0.1/24", "dev", "a0")
	netnstest.IP(t, "-n", b, "addr", "add", "10.99.0.2/24", "dev", "b0")
	state := t.TempDir()
	base := []string{"--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", state, "--log-format", "json"}
	ctx := context.Background()

	// B reaches A: a listener on A's address answers.
	ha, _ := netns.GetFromName(a)
	defer ha.Close()
	var probe net.Listener
	if err := afpacket.InNamespace(ha, func() (err error) { probe, err = net.Listen("tcp", "10.99.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	hb, _ := netns.GetFromName(b)
	defer hb.Close()
	dialB := func(addr string) error {
		return afpacket.InNamespace(hb, func() error {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	if err := dialB(probe.Addr().String()); err != nil {
		t.Fatalf("B cannot reach A at all: %v", err)
	}

	n := startIntd(t, a, base...)
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	if _, err := gnmiIn(t, a, "127.0.0.1:9339", state).Capabilities(ctx, &gpb.CapabilityRequest{}); err != nil {
		t.Fatalf("gNMI from A's loopback: %v", err)
	}
	if err := dialB("10.99.0.1:9339"); err == nil {
		t.Error("a default intd accepts connections from another namespace")
	}
	if err := setNodeID(ctx, gnmiIn(t, b, "10.99.0.1:9339", state), 66); err == nil {
		t.Error("a client in another namespace configured a default intd")
	}
	n.stop(t)

	// With credentials the default is every address; a login is needed.
	h, err := server.HashPassword("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users")
	os.WriteFile(users, []byte("admin read-write "+h+"\n"), 0o600)
	n = startIntd(t, a, append(base, "--credentials", users)...)
	lis := n.waitLog(t, "gNMI server listening", 20*time.Second)
	if lis["addr"] != "[::]:9339" || lis["level"] != "INFO" {
		t.Errorf("with credentials: listening on %v at %v, want [::]:9339 at INFO", lis["addr"], lis["level"])
	}
	cb := gnmiIn(t, b, "10.99.0.1:9339", state)
	if err := setNodeID(ctx, cb, 66); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Set without a login: %v, want Unauthenticated", err)
	}
	if err := setNodeID(metadata.AppendToOutgoingContext(ctx, "username", "admin", "password", "guess"), cb, 66); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Set with a bad password: %v, want Unauthenticated", err)
	}
	if err := setNodeID(metadata.AppendToOutgoingContext(ctx, "username", "admin", "password", "s3cret"), cb, 66); err != nil {
		t.Errorf("Set with the password: %v", err)
	}
	for _, w := range []map[string]string{
		{"peer": "10.99.0.2:", "reason": "no username"},
		{"peer": "10.99.0.2:", "reason": "bad password", "user": "admin"},
	} {
		if !n.hasLog("authentication failed", w) {
			t.Errorf("failed login %v not logged", w)
		}
	}
	if !n.hasLog("Set applied", map[string]string{"user": "admin", "peer": "10.99.0.2:", "changes": "node-id = 66"}) {
		t.Error("Set from B not audited")
	}
	n.stop(t)

	// Beyond loopback without authentication: refused...
	n = startIntd(t, a, append(base, "--addr", ":9339")...)
	if !n.exited(10 * time.Second) {
		t.Fatal("intd --addr :9339 without authentication did not stop")
	}
	if n.state.Success() || !n.hasLog("intd stopped", map[string]string{"err": "--credentials"}) {
		t.Errorf("unauthenticated --addr :9339: exit %v", n.state)
	}
	// ...unless allowed, loudly.
	n = startIntd(t, a, append(base, "--addr", ":9339", "--allow-unauthenticated")...)
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	if !n.hasLog("UNAUTHENTICATED", map[string]string{"level": "WARN"}) {
		t.Error("--allow-unauthenticated not warned about")
	}
	if err := setNodeID(ctx, gnmiIn(t, b, "10.99.0.1:9339", state), 67); err != nil {
		t.Errorf("Set from B with --allow-unauthenticated: %v", err)
	}
	n.stop(t)
}

// TestRunFailsFast: a mistyped interface, an unwritable --save and
// missing privileges stop intd within seconds, non-zero, naming the cause,
// on both dataplanes.
func TestRunFailsFast(t *testing.T) {
	needRoot(t)
	bin := intdBinary(t)
	ns := intdNS(t, "fast")
	// The gNMI port taken.
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var taken net.Listener
	if err := afpacket.InNamespace(h, func() (err error) { taken, err = net.Listen("tcp", "127.0.0.1:9339"); return err }); err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, dp := range []string{"soft", "ebpf"} {
		for _, tc := range []struct {
			what string
			args []string
			want []string
		}{
			{"missing interface", []string{"--interfaces", "d0,nosuch0"}, []string{"nosuch0"}},
			{"unwritable save", []string{"--interfaces", "d0,d1", "--save", "/nonexistent-intd-dir/running.json"}, []string{"/nonexistent-intd-dir"}},
			{"port in use", []string{"--interfaces", "d0,d1"}, []string{"--addr", "address already in use"}},
		} {
			start := time.Now()
			n := startIntd(t, ns, append([]string{"--dataplane", dp, "--state-dir", t.TempDir(), "--log-format", "json"}, tc.args...)...)
			if !n.exited(10 * time.Second) {
				t.Fatalf("%s, %s: intd still running after 10 s", dp, tc.what)
			}
			t.Logf("%s, %s: exited %v in %v", dp, tc.what, n.state, time.Since(start).Round(time.Millisecond))
			if n.state.Success() {
				t.Errorf("%s, %s: exit status 0", dp, tc.what)
			}
			for _, w := range tc.want {
				if !n.hasLog("intd stopped", map[string]string{"err": w}) {
					t.Errorf("%s, %s: the error does not name %q", dp, tc.what, w)
				}
			}
			n.records(t)
		}
	}
	// No leftovers of the refused starts.
	if out, _ := exec.Command("ip", "-n", ns, "-o", "link").Output(); strings.Contains(string(out), "intd-") {
		t.Errorf("links left behind:\n%s", out)
	}

	// Without privileges (an unprivileged user).
	dir, err := os.MkdirTemp("", "intd-nobody")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	for _, tc := range []struct {
		dp   string
		want []string
	}{
		{"soft", []string{"CAP_NET_RAW", "CAP_NET_ADMIN", "root"}},
		{"ebpf", []string{"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "--dataplane soft"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, bin, "run", "--dataplane", tc.dp, "--interfaces", "lo", "--state-dir", dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("unprivileged %s: still running after 10 s:\n%s", tc.dp, out)
		}
		if err == nil {
			t.Errorf("unprivileged %s: exit status 0", tc.dp)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("unprivileged %s: output does not say %q:\n%s", tc.dp, w, out)
			}
		}
	}
}

// TestStartupConfig: --startup-config is applied at the first start
// (with --node-id set in it), the saved configuration afterwards; a file
// the schema or the dataplane refuses stops intd with the error.
func TestStartupConfig(t *testing.T) {
	needRoot(t)
	ns := intdNS(t, "startup")
	data, err := os.ReadFile("../../yang/examples/startup-router.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	startup := filepath.Join(dir, "startup.json")
	os.WriteFile(startup, []byte(strings.NewReplacer(`"eth0"`, `"d0"`, `"eth1"`, `"d1"`).Replace(string(data))), 0o600)
	state := t.TempDir()
	args := []string{"--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", state, "--log-format", "json", "--startup-config", startup, "--node-id", "7"}
	n := startIntd(t, ns, args...)
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	if !n.hasLog("INT active", map[string]string{"roles": "int-endpoint", "node-id": "7"}) {
		t.Error("INT roles of the startup configuration not logged")
	}
	ctx := context.Background()
	c := gnmiIn(t, ns, "127.0.0.1:9339", state)
	if id, err := getJSON(ctx, c, gpb.GetRequest_CONFIG, "int", "node", "config", "node-id"); err != nil || id != "7" {
		t.Errorf("node-id %q (%v), want 7 (--node-id over the file's 1)", id, err)
	}
	if wl, err := getJSON(ctx, c, gpb.GetRequest_CONFIG, "int", "watchlist"); err != nil || !strings.Contains(wl, "198.51.100.0/24") {
		t.Errorf("watchlist %s (%v)", wl, err)
	}
	if err := setNodeID(ctx, c, 8); err != nil {
		t.Fatal(err)
	}
	n.stop(t)
	n = startIntd(t, ns, args...)
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	if !n.hasLog("a saved configuration exists", nil) {
		t.Error("not said that the saved configuration wins over --startup-config")
	}
	if id, _ := getJSON(ctx, gnmiIn(t, ns, "127.0.0.1:9339", state), gpb.GetRequest_CONFIG, "int", "node", "config", "node-id"); id != "8" {
		t.Errorf("node-id %q after restart, want 8 (saved)", id)
	}
	n.stop(t)

	for _, tc := range []struct {
		what, file string
		args       []string
		want       string
	}{
		{"not the schema", `{"intd-int:int": {"node": {"config": {"node-id": "seven"}}}}`, nil, "node-id: want a JSON number"},
		{"dangling reference", strings.Replace(string(data), `"int-session": "md"`, `"int-session": "nope"`, 1), []string{"--node-id", "3"}, "nope"},
		// Valid for the schema, refused when applied, as a Set would be.
		{"role without node-id", `{"intd-int:int": {"node": {"config": {"int-transit": true}}}}`, nil, "node-id"},
	} {
		f := filepath.Join(dir, "bad.json")
		os.WriteFile(f, []byte(tc.file), 0o600)
		start := time.Now()
		n := startIntd(t, ns, append([]string{"--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", t.TempDir(), "--log-format", "json", "--startup-config", f}, tc.args...)...)
		if !n.exited(10 * time.Second) {
			t.Fatalf("%s: intd still running", tc.what)
		}
		if n.state.Success() || !n.hasLog("intd stopped", map[string]string{"err": tc.want}) {
			t.Errorf("%s: exit %v, want a failure naming %q", tc.what, n.state, tc.want)
		}
		t.Logf("%s: refused in %v", tc.what, time.Since(start).Round(time.Millisecond))
	}
}

// TestGnmiCli drives a running intd with gnmi_cli, a separate client,
// verifying the server against the certificate intd keeps.
func TestGnmiCli(t *testing.T) {
	cli := gnmiCli(t)
	needRoot(t)
	ns := intdNS(t, "gnmicli")
	state := t.TempDir()
	n := startIntd(t, ns, "--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", state, "--target", "node1", "--node-id", "3",
		"--state-interval", "100ms", "--log-format", "json")
	n.waitLog(t, "gNMI server listening", 20*time.Second)
	ca := filepath.Join(state, "gnmi-cert.pem")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"netns", "exec", ns, cli, "-address", "127.0.0.1:9339", "-ca_crt", ca, "-timeout", "10s"}, args...)
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		out, err := exec.CommandContext(cctx, "ip", args...).CombinedOutput()
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
	var subOut logtest.Buffer
	sub := exec.CommandContext(sctx, "ip", "netns", "exec", ns, cli, "-address", "127.0.0.1:9339", "-ca_crt", ca, "-qt", "s", "-dt", "s",
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
	if s := subOut.String(); !strings.Contains(s, "/int/node/config/node-id, {") || !strings.Contains(s, " 42}") {
		t.Errorf("streaming subscription did not report the Set:\n%s", s)
	}
	n.stop(t)

	// The Set was saved.
	saved, err := os.ReadFile(filepath.Join(state, "running.json"))
	if err != nil || !strings.Contains(string(saved), `"node-id": 42`) {
		t.Errorf("saved configuration (%v):\n%s", err, saved)
	}
}

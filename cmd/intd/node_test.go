//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/internal/logtest"
	"github.com/intd-project/intd/internal/netnstest"
)

// These tests run the intd binary as an operator would, as a separate
// process in private network namespaces (a full `intd run` drops the
// capabilities of its process, so it never runs inside the test binary).

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// intdBinary builds intd once, in a directory any user may read (one
// test runs it unprivileged).
func intdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the intd binary")
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "intd-bin"); binErr != nil {
			return
		}
		if binErr = os.Chmod(binDir, 0o755); binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "intd"), ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "intd")
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs intd in network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
}

// newNS makes a network namespace named after the test process, with
// loopback up and IPv6 off (no autoconfiguration traffic), deleted at
// cleanup.
func newNS(t *testing.T, name string) string {
	t.Helper()
	ns := fmt.Sprintf("intd%d-%s", os.Getpid(), name)
	netnstest.Named(t, ns)
	return ns
}

// addVeth adds a veth pair inside ns, both ends up.
func addVeth(t *testing.T, ns, a, b string) {
	t.Helper()
	netnstest.IP(t, "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b)
	netnstest.IP(t, "-n", ns, "link", "set", a, "up")
	netnstest.IP(t, "-n", ns, "link", "set", b, "up")
}

// intdNS is a namespace with two veth pairs for a dataplane: d0/p0, d1/p1.
func intdNS(t *testing.T, name string) string {
	ns := newNS(t, name)
	addVeth(t, ns, "d0", "p0")
	addVeth(t, ns, "d1", "p1")
	return ns
}

// node is an intd process.
type node struct {
	cmd   *exec.Cmd
	out   *logtest.Buffer // stdout and stderr
	done  chan struct{}
	state *os.ProcessState
}

// startIntd runs `intd run args...` inside ns (the root namespace when ns
// is ""); it is killed at cleanup and its output shown if the test failed.
func startIntd(t *testing.T, ns string, args ...string) *node {
	t.Helper()
	bin := intdBinary(t)
	argv := append([]string{bin, "run"}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	n := &node{cmd: exec.Command(argv[0], argv[1:]...), out: &logtest.Buffer{}, done: make(chan struct{})}
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.cmd.Wait(); n.state = n.cmd.ProcessState; close(n.done) }()
	t.Cleanup(func() {
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
		if t.Failed() {
			t.Logf("intd %s output:\n%s", strings.Join(args, " "), n.out)
		}
	})
	return n
}

// exited waits up to d for the process to end.
func (n *node) exited(d time.Duration) bool {
	select {
	case <-n.done:
		return true
	case <-time.After(d):
		return false
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop(t *testing.T) {
	t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	if !n.exited(10 * time.Second) {
		t.Fatal("intd did not stop within 10 s of SIGTERM")
	}
	if !n.state.Success() {
		t.Errorf("intd exited with %v after SIGTERM", n.state)
	}
}

// records parses every output line as a JSON log record, failing the
// test on a line that is not one.
func (n *node) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(n.out.String()))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("output line is not JSON: %q", sc.Text())
			continue
		}
		out = append(out, r)
	}
	return out
}

// waitLog waits for a JSON log record whose message starts with msg.
func (n *node) waitLog(t *testing.T, msg string, d time.Duration) map[string]any {
	t.Helper()
	end := time.Now().Add(d)
	for {
		sc := bufio.NewScanner(strings.NewReader(n.out.String()))
		for sc.Scan() {
			var r map[string]any
			if json.Unmarshal(sc.Bytes(), &r) == nil && strings.HasPrefix(fmt.Sprint(r["msg"]), msg) {
				return r
			}
		}
		select {
		case <-n.done:
			t.Fatalf("intd exited (%v) before logging %q", n.state, msg)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("intd did not log %q within %v", msg, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasLog reports whether a record with message prefix msg and attributes
// containing want is logged within a few seconds (output reaches the test
// through a pipe, after the client may have had its answer).
func (n *node) hasLog(msg string, want map[string]string) bool {
	end := time.Now().Add(3 * time.Second)
	for !n.logged(msg, want) {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// logged reports whether such a record is in the output read so far.
func (n *node) logged(msg string, want map[string]string) bool {
	sc := bufio.NewScanner(strings.NewReader(n.out.String()))
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) != nil || !strings.HasPrefix(fmt.Sprint(r["msg"]), msg) {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && strings.Contains(fmt.Sprint(r[k]), v)
		}
		if ok {
			return true
		}
	}
	return false
}

// gnmiIn connects to a gNMI server from inside namespace ns, trusting the
// certificate intd keeps in stateDir (verification on: no skipping).
func gnmiIn(t *testing.T, ns, addr, stateDir string) gpb.GNMIClient {
	t.Helper()
	pemData, err := os.ReadFile(filepath.Join(stateDir, "gnmi-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("no certificate in the state directory's PEM file")
	}
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	dial := func(ctx context.Context, a string) (c net.Conn, err error) {
		err = afpacket.InNamespace(h, func() error {
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", a)
			return err
		})
		return c, err
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gpb.NewGNMIClient(conn)
}

func pathOf(elems ...string) *gpb.Path {
	p := &gpb.Path{}
	for _, e := range elems {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: e})
	}
	return p
}

// getJSON reads one path as JSON_IETF ("" when there is no data).
func getJSON(ctx context.Context, c gpb.GNMIClient, typ gpb.GetRequest_DataType, elems ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{pathOf(elems...)}, Type: typ, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range r.GetNotification() {
		for _, u := range n.GetUpdate() {
			b.Write(u.GetVal().GetJsonIetfVal())
		}
	}
	return b.String(), nil
}

func setNodeID(ctx context.Context, c gpb.GNMIClient, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: pathOf("int", "node", "config", "node-id"),
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: id}}}}})
	return err
}

// procCaps reads the capability sets (hex masks) of every thread of a
// process from /proc, failing the test when threads differ: the drop must
// reach them all.
func procCaps(t *testing.T, pid int) map[string]uint64 {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var first map[string]uint64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		caps := map[string]uint64{}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.HasPrefix(k, "Cap") {
				caps[k], _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			}
		}
		if first == nil {
			first = caps
		} else if fmt.Sprint(caps) != fmt.Sprint(first) {
			t.Errorf("thread %s has capabilities %v, another %v", f, caps, first)
		}
	}
	return first
}

// certFingerprint is the SHA-256 fingerprint of the PEM certificate file.
func certFingerprint(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		t.Fatalf("%s: no PEM", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, b := range sha256.Sum256(c.Raw) {
		parts = append(parts, fmt.Sprintf("%02X", b))
	}
	return strings.Join(parts, ":")
}

package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/internal/netnstest"
	"github.com/intd-project/intd/internal/promtest"
)

// lab is a set of network namespaces with a unique prefix, removed with
// everything started in them when the test ends.
type lab struct {
	t      *testing.T
	prefix string
	names  []string
	bin    string
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("end-to-end tests need root (network namespaces, AF_PACKET); run as root, as CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("end-to-end tests need iproute2's ip command")
	}
}

func newLab(t *testing.T) *lab {
	needRoot(t)
	b := make([]byte, 3)
	rand.Read(b)
	l := &lab{t: t, prefix: "intd" + hex.EncodeToString(b) + "-", bin: buildBinaries(t)}
	return l
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildBinaries builds intd and intcollector once per test binary.
func buildBinaries(t *testing.T) string {
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "intd-e2e-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", buildDir, "github.com/intd-project/intd/cmd/intd",
			"github.com/intd-project/intd/cmd/intcollector").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func (l *lab) ns(name string) string { return l.prefix + name }

// addNS creates namespaces with loopback up, deleted at cleanup.
func (l *lab) addNS(names ...string) {
	for _, n := range names {
		netnstest.Named(l.t, l.ns(n))
		l.names = append(l.names, n)
	}
}

func (l *lab) ip(args ...string) {
	l.t.Helper()
	netnstest.IP(l.t, args...)
}

// sh runs a shell command inside namespace n.
func (l *lab) sh(n, script string) string {
	l.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", l.ns(n), "sh", "-c", script).CombinedOutput()
	if err != nil {
		l.t.Fatalf("in %s: %s: %v\n%s", n, script, err, out)
	}
	return string(out)
}

// veth links namespace a's interface ai with b's bi.
func (l *lab) veth(a, ai, b, bi string) {
	l.ip("link", "add", ai, "netns", l.ns(a), "type", "veth", "peer", "name", bi, "netns", l.ns(b))
	l.ip("-n", l.ns(a), "link", "set", ai, "up")
	l.ip("-n", l.ns(b), "link", "set", bi, "up")
}

func (l *lab) addr(n, dev, cidr string) { l.ip("-n", l.ns(n), "addr", "add", cidr, "dev", dev) }

// handle returns a handle on namespace n.
func (l *lab) handle(n string) netns.NsHandle {
	h, err := netns.GetFromName(l.ns(n))
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { h.Close() })
	return h
}

// in runs fn on a thread inside namespace n (sockets opened stay there).
func (l *lab) in(n string, fn func() error) {
	l.t.Helper()
	h := l.handle(n)
	if err := afpacket.InNamespace(h, fn); err != nil {
		l.t.Fatal(err)
	}
}

// dialer dials addresses inside namespace n.
func (l *lab) dialer(n string) func(ctx context.Context, addr string) (net.Conn, error) {
	h := l.handle(n)
	return func(ctx context.Context, addr string) (c net.Conn, err error) {
		err = afpacket.InNamespace(h, func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
}

// httpClient speaks HTTP to addresses inside namespace n.
func (l *lab) httpClient(n string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return l.dialer(n)(ctx, addr)
	}}, Timeout: 5 * time.Second}
}

// scrapeCollector reads the collector's /metrics (127.0.0.1:23266 in its
// namespace) through c; "" while it does not answer, for callers that poll.
func scrapeCollector(c *http.Client) string {
	resp, err := c.Get("http://127.0.0.1:23266/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// proc is a process started in a namespace, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs a built binary in namespace n; lines of its stdout go to
// onLine when set. It is killed (with its process group) at cleanup, and
// its log is printed if the test failed.
func (l *lab) start(n, bin string, onLine func(string), args ...string) *proc {
	l.t.Helper()
	logPath := filepath.Join(l.t.TempDir(), n+"-"+filepath.Base(bin)+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		l.t.Fatal(err)
	}
	path := bin
	if !filepath.IsAbs(bin) {
		path = filepath.Join(l.bin, bin)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.ns(n), path}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = lf
	var stdout io.ReadCloser
	if onLine != nil {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			l.t.Fatal(err)
		}
	} else {
		cmd.Stdout = lf
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	p := &proc{name: n + "/" + bin, cmd: cmd, log: logPath, done: make(chan struct{})}
	if stdout != nil {
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				onLine(sc.Text())
			}
		}()
	}
	go func() { cmd.Wait(); lf.Close(); close(p.done) }()
	l.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		if l.t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			l.t.Logf("---- log of %s (%v) ----\n%s", p.name, cmd.ProcessState, b)
		}
	})
	return p
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	var last string
	for {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v (last: %s)", what, d, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// receiveAll accepts one connection on ln and sends what it reads until
// EOF (or timeout) on the returned channel, nil when Accept fails.
func receiveAll(ln net.Listener, timeout time.Duration) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	return got
}

// flowLabels are the collector's per-flow labels of a flow from h1 to h2
// (10.0.1.1 to 10.0.2.1), with extra label pairs.
func flowLabels(proto string, srcPort, dstPort int, kv ...string) map[string]string {
	return promtest.Labels(map[string]string{"src": "10.0.1.1", "dst": "10.0.2.1", "protocol": proto,
		"src_port": strconv.Itoa(srcPort), "dst_port": strconv.Itoa(dstPort)}, kv...)
}

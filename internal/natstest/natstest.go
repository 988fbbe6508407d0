// Package natstest runs real nats-server processes for tests: a
// JetStream cluster on free loopback ports with temporary stores, each
// server killed when the test ends.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Server is one nats-server process.
type Server struct {
	Name string
	URL  string
	// Log is the server's log file.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a set of clustered servers.
type Cluster struct {
	Servers []*Server
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start starts an n-server JetStream cluster (n 1 runs a single server
// without clustering) and waits until JetStream answers. It skips the
// test when nats-server is not installed.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("nats-server not installed (apt-get install nats-server):", err)
	}
	client, route := make([]int, n), make([]int, n)
	for i := range client {
		client[i], route[i] = freePort(t), freePort(t)
	}
	dir := t.TempDir()
	c := &Cluster{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d-%d", i+1, os.Getpid())
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\n",
			name, client[i], filepath.Join(dir, name))
		if n > 1 {
			var routes []string
			for j := range route {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", route[j]))
				}
			}
			conf += fmt.Sprintf("cluster {\n  name: intc%d\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
				os.Getpid(), route[i], strings.Join(routes, ", "))
		}
		cf := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", cf)
		cmd.Stdout, cmd.Stderr = logf, logf
		// Killed with the test process too, should it die (a timeout's
		// panic runs no cleanup).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		logf.Close() // the server has its own descriptor
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Name: name, URL: fmt.Sprintf("nats://127.0.0.1:%d", client[i]), Log: logf.Name(), cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(s.done) }()
		c.Servers = append(c.Servers, s)
	}
	t.Cleanup(func() {
		for _, s := range c.Servers {
			s.Kill()
		}
		if t.Failed() {
			c.logTails(t)
		}
	})
	c.waitReady(t)
	return c
}

// URLs lists every server's URL, comma-separated (a NATS client URL).
func (c *Cluster) URLs() string {
	var u []string
	for _, s := range c.Servers {
		u = append(u, s.URL)
	}
	return strings.Join(u, ",")
}

// waitReady waits until every server answers JetStream requests and a
// stream replicated on every server can be placed (the cluster is whole).
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a loaded 2-core machine elects slowly
	for _, s := range c.Servers {
		for {
			err := jsReady(s.URL, len(c.Servers))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats-server %s not ready: %v", s.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func jsReady(url string, replicas int) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(2 * time.Second))
	if err != nil {
		return err
	}
	if _, err = js.AccountInfo(); err != nil {
		return err
	}
	name := "natstest_ready"
	if _, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{"natstest.ready"}, Replicas: replicas, Storage: nats.MemoryStorage}); err != nil {
		return err
	}
	return js.DeleteStream(name)
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

// logTails logs the last lines of every server's log: what the cluster
// did (elections, placements) when a test failed.
func (c *Cluster) logTails(t testing.TB) {
	for _, s := range c.Servers {
		b, err := os.ReadFile(s.Log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("nats-server %s, last lines of its log:\n%s", s.Name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// Server returns the server named name, or nil.
func (c *Cluster) Server(name string) *Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Package sonictest runs a private redis-server for tests of the SONiC
// integration: on a unix socket in a temporary directory, with no
// persistence unless asked (Save), killed when the test ends.
package sonictest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server started by a test.
type Redis struct {
	t      testing.TB
	dir    string
	Socket string
	args   []string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start starts redis-server with extra arguments (e.g. "--rename-command",
// "CONFIG", ""), or skips the test when it is not installed.
func Start(t testing.TB, args ...string) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (Debian package redis-server): SONiC CONFIG_DB tests skipped")
	}
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "intd-redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &Redis{t: t, dir: dir, Socket: filepath.Join(dir, "redis.sock"), args: args}
	r.start()
	t.Cleanup(r.Kill)
	return r
}

func (r *Redis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", append([]string{"--port", "0", "--unixsocket", r.Socket, "--unixsocketperm", "700",
		"--dir", r.dir, "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no", "--databases", "16"}, r.args...)...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log, err := os.OpenFile(filepath.Join(r.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		log.Close()
		r.t.Fatalf("starting redis-server: %v", err)
	}
	done := make(chan struct{})
	r.done = done
	go func() { r.cmd.Wait(); log.Close(); close(done) }()
	c := r.Client(0)
	defer c.Close()
	end := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			r.t.Fatalf("redis-server exited: %s", b)
		default:
		}
		if time.Now().After(end) {
			r.t.Fatalf("redis-server not answering on %s: %v", r.Socket, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client opens a client on database db (the test closes it).
func (r *Redis) Client(db int) *redis.Client {
	return redis.NewClient(&redis.Options{Network: "unix", Addr: r.Socket, DB: db, Protocol: 2, DisableIdentity: true})
}

// Save writes the data set to disk, for the next start to load.
func (r *Redis) Save() {
	r.t.Helper()
	c := r.Client(0)
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		r.t.Fatalf("SAVE: %v", err)
	}
}

// Kill stops redis-server at once (SIGKILL), as a crash would.
func (r *Redis) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.cmd.Process.Kill()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	os.Remove(r.Socket)
}

// Restart starts redis-server again on the same socket, loading what
// Save wrote.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Kill()
	r.start()
}

// HSet writes fields of a CONFIG_DB-style hash in database db, one HSET
// per field as SONiC's tools may.
func (r *Redis) HSet(db int, key string, fields ...string) {
	r.t.Helper()
	if len(fields)%2 != 0 {
		r.t.Fatalf("HSet %s: odd field list", key)
	}
	c := r.Client(db)
	defer c.Close()
	for i := 0; i < len(fields); i += 2 {
		if err := c.HSet(context.Background(), key, fields[i], fields[i+1]).Err(); err != nil {
			r.t.Fatalf("HSET %s %s: %v", key, fields[i], err)
		}
	}
}

// Del deletes keys in database db.
func (r *Redis) Del(db int, keys ...string) {
	r.t.Helper()
	c := r.Client(db)
	defer c.Close()
	if err := c.Del(context.Background(), keys...).Err(); err != nil {
		r.t.Fatalf("DEL %s: %v", strings.Join(keys, " "), err)
	}
}

// HGetAll reads a hash in database db.
func (r *Redis) HGetAll(db int, key string) map[string]string {
	r.t.Helper()
	c := r.Client(db)
	defer c.Close()
	m, err := c.HGetAll(context.Background(), key).Result()
	if err != nil {
		r.t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

func (r *Redis) String() string { return fmt.Sprintf("redis-server on %s", r.Socket) }

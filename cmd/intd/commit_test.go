package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/intd-project/intd/dataplane/lab"
)

// labRun is a running `intd lab` for a test, with a gNMI client.
type labRun struct {
	li   *labInstance
	c    gpb.GNMIClient
	stop func()
}

func startLabRun(t *testing.T, ctx context.Context, saveDir string) *labRun {
	t.Helper()
	o := &labOptions{Addr: "127.0.0.1:0", Rate: 1000, Burst: 10, StateInterval: 100 * time.Millisecond, SaveDir: saveDir}
	li, err := startLab(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- li.run(runCtx, io.Discard, 0) }()
	conn, err := grpc.NewClient(li.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r := &labRun{li: li, c: gpb.NewGNMIClient(conn)}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("lab run: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

// Commit confirmed end to end: gRPC to `intd lab`'s gNMI server, its dtel
// orchestrator and soft dataplane, seen in the packets of the lab's TCP
// flow (remaining-hop-count 2 stops INT after two hops, 8 lets all three
// switches add theirs). Cancel, expiry, confirm, and a restart while a
// commit is pending each put the packets and the save file where they
// belong.
func TestLabCommitConfirmed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	saved := func() string {
		d, _ := os.ReadFile(filepath.Join(dir, "s1.json"))
		return string(d)
	}
	rollbackFile := func() bool {
		_, err := os.Stat(filepath.Join(dir, "s1.json.rollback"))
		return err == nil
	}
	r := startLabRun(t, ctx, dir)
	tcp, ok := r.li.lab.FlowKey("tcp")
	if !ok {
		t.Fatal("no tcp flow")
	}
	waitView := func(r *labRun, what string, cond func(lab.FlowView) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, _ := r.li.lab.View(tcp)
			if cond(v) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: view %+v", what, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	threeHops := func(v lab.FlowView) bool { return len(v.Path) == 3 && !v.HopCountExceeded }
	twoHops := func(v lab.FlowView) bool { return len(v.Path) == 2 && v.HopCountExceeded }
	rhc, err := ygot.StringToStructuredPath("/int/int-sessions/int-session[name=md]/config/remaining-hop-count")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(r *labRun, v uint64, c *gnmi_ext.Commit) {
		t.Helper()
		req := &gpb.SetRequest{Prefix: &gpb.Path{Target: "s1"}, Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: c}}}}
		if v > 0 {
			req.Update = []*gpb.Update{{Path: rhc, Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: v}}}}
		}
		if _, err := r.c.Set(ctx, req); err != nil {
			t.Fatalf("Set %v: %v", c, err)
		}
	}
	request := func(id string, d time.Duration) *gnmi_ext.Commit {
		return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(d)}}}
	}
	confirm := func(id string) *gnmi_ext.Commit {
		return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}}
	}
	cancelC := func(id string) *gnmi_ext.Commit {
		return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_Cancel{Cancel: &gnmi_ext.CommitCancel{}}}
	}
	waitView(r, "default", threeHops)

	// Apply, then cancel.
	commit(r, 2, request("c1", time.Hour))
	waitView(r, "commit c1 applied", twoHops)
	if !rollbackFile() || !strings.Contains(saved(), `"remaining-hop-count": 2`) {
		t.Errorf("commit c1: rollback file %v, saved:\n%s", rollbackFile(), saved())
	}
	commit(r, 0, cancelC("c1"))
	waitView(r, "commit c1 cancelled", threeHops)
	if rollbackFile() || !strings.Contains(saved(), `"remaining-hop-count": 8`) {
		t.Errorf("cancelled c1: rollback file %v, saved:\n%s", rollbackFile(), saved())
	}

	// Apply, then let the timer expire.
	commit(r, 2, request("c2", 300*time.Millisecond))
	waitView(r, "commit c2 applied", twoHops)
	waitView(r, "commit c2 expired", threeHops)
	// The timer's rollback saves after it applies: wait for it to finish.
	deadline := time.Now().Add(10 * time.Second)
	for (rollbackFile() || !strings.Contains(saved(), `"remaining-hop-count": 8`)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if rollbackFile() || !strings.Contains(saved(), `"remaining-hop-count": 8`) {
		t.Errorf("expired c2: rollback file %v, saved:\n%s", rollbackFile(), saved())
	}

	// Apply and confirm: it stays.
	commit(r, 2, request("c3", 300*time.Millisecond))
	commit(r, 0, confirm("c3"))
	time.Sleep(500 * time.Millisecond) // past c3's rollback duration
	waitView(r, "commit c3 confirmed", twoHops)
	if rollbackFile() {
		t.Error("confirmed c3 left its rollback file")
	}

	// A commit pending when intd stops is rolled back when it starts.
	commit(r, 8, request("c4", time.Hour))
	waitView(r, "commit c4 applied", threeHops)
	r.stop()
	r2 := startLabRun(t, ctx, dir)
	tcp, _ = r2.li.lab.FlowKey("tcp")
	waitView(r2, "c4 rolled back at start", twoHops)
	if rollbackFile() || !strings.Contains(saved(), `"remaining-hop-count": 2`) {
		t.Errorf("after the restart: rollback file %v, saved:\n%s", rollbackFile(), saved())
	}
}

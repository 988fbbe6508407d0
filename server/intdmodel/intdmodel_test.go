package intdmodel_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/collector"
	"github.com/intd-project/intd/server/intdmodel"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestIntdTarget serves dtel's orchestrator through the adapter: the
// initial configuration is applied and read back typed, as is the state.
func TestIntdTarget(t *testing.T) {
	srv, err := intdmodel.New(server.WithLogger(quiet), server.WithStatePollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	initial := &gen.Device{}
	nc := initial.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig()
	nc.NodeId, nc.Enabled, nc.IntTransit = ygot.Uint32(42), ygot.Bool(true), ygot.Bool(true)
	if err := intdmodel.CheckConfig(initial); err != nil {
		t.Fatal(err)
	}
	orch := dtel.New(saitest.New(), dtel.WithLogger(quiet))
	if err := srv.AddTarget(context.Background(), "dut", intdmodel.Target(orch), server.TargetOptions{Initial: initial, InvalidErr: dtel.ErrInvalid}); err != nil {
		t.Fatal(err)
	}
	running, err := intdmodel.Running(srv, "dut")
	if err != nil {
		t.Fatal(err)
	}
	if got := running.GetInt().GetNode().GetConfig().GetNodeId(); got != 42 {
		t.Errorf("running node-id %d, want 42", got)
	}
	if roles := intdmodel.Roles(running); !slices.Equal(roles, []string{"int-transit"}) {
		t.Errorf("roles %v, want [int-transit]", roles)
	}
	srv.RefreshState(context.Background())
	st, err := intdmodel.State(srv, "dut")
	if err != nil || st == nil {
		t.Fatalf("state %v, %v", st, err)
	}
	if st.GetInt().GetNode().GetState() == nil {
		t.Error("no node state from the orchestrator")
	}
}

// TestCheckConfigNamesThePath: a leafref to no INT session is refused
// before any dataplane sees it, naming the leaf.
func TestCheckConfigNamesThePath(t *testing.T) {
	d := &gen.Device{}
	ac := d.GetOrCreateInt().GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(10).GetOrCreateActions().GetOrCreateConfig()
	ac.FlowOp, ac.IntSession = gen.IntdInt_FlowOp_INT, ygot.String("nope")
	err := intdmodel.CheckConfig(d)
	if err == nil || !strings.Contains(err.Error(), "int-session") {
		t.Fatalf("CheckConfig = %v, want an error naming int-session", err)
	}
}

// TestOtherSchemaRefusesIntd: a server of another model neither takes an
// intd applier nor answers intd's typed reads.
func TestOtherSchemaRefusesIntd(t *testing.T) {
	sc, err := collector.Schema()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.WithSchema(sc), server.WithLogger(quiet), server.WithStatePollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.AddTarget(context.Background(), "dut", intdmodel.Target(dtel.New(saitest.New(), dtel.WithLogger(quiet))), server.TargetOptions{}); err == nil {
		t.Error("an intd applier was served over the collector's model")
	}
	if err := srv.AddTarget(context.Background(), "dut", intdmodel.Target(dtel.New(saitest.New(), dtel.WithLogger(quiet))), server.TargetOptions{Initial: &gen.Device{}}); err == nil {
		t.Error("an intd configuration was taken as the collector's")
	}
	if ts := srv.Targets(); len(ts) != 0 {
		t.Errorf("targets %v after refused adds", ts)
	}
	if _, err := server.New(); err == nil {
		t.Error("a server without a schema")
	}
}

package dtel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
)

var errBoom = errors.New("boom")

// testCaps are sai.FullCapabilities with the queue occupancy semantics
// full-config.json asks for (80-byte cells sampled at enqueue).
func testCaps() sai.Capabilities {
	c := sai.FullCapabilities()
	c.QueueOccupancy = sai.OccupancySemantics{Unit: sai.SizeCells, CellSize: 80, Timing: sai.QueueTimingEnqueue}
	return c
}

func newTest(t testing.TB, opts ...saitest.Option) (*Orchestrator, *saitest.Backend) {
	t.Helper()
	b := saitest.New(append([]saitest.Option{saitest.WithCapabilities(testCaps())}, opts...)...)
	return New(b, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithDataplaneName("saitest")), b
}

var fullJSON string

// fullConfigText is yang/examples/full-config.json.
func fullConfigText(t testing.TB) string {
	t.Helper()
	if fullJSON == "" {
		raw, err := os.ReadFile("../yang/examples/full-config.json")
		if err != nil {
			t.Fatal(err)
		}
		fullJSON = string(raw)
	}
	return fullJSON
}

var parsedFull *gen.Device

// full returns a fresh copy of the (fixed) example configuration.
func full(t testing.TB) *gen.Device {
	t.Helper()
	if parsedFull == nil {
		d, err := gen.ParseConfig([]byte(fullConfigText(t)))
		if err != nil {
			t.Fatalf("ParseConfig: %v", err)
		}
		parsedFull = d
	}
	return clone(t, parsedFull)
}

func clone(t testing.TB, d *gen.Device) *gen.Device {
	t.Helper()
	c, err := ygot.DeepCopy(d)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*gen.Device)
}

func mustApply(t testing.TB, o *Orchestrator, d *gen.Device) {
	t.Helper()
	if err := o.Apply(context.Background(), d); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// applied returns the backend's objects by configuration key, with their
// references replaced by the key of the referenced object (in refs).
func applied(t testing.TB, o *Orchestrator, b *saitest.Backend) (map[key]sai.Attrs, map[key]key) {
	t.Helper()
	snap := b.Snapshot()
	o.mu.RLock()
	s := o.snap
	o.mu.RUnlock()
	if len(s.oids) != len(snap) {
		t.Fatalf("orchestrator knows %d objects, backend holds %d:\n%v", len(s.oids), len(snap), snap)
	}
	objs, refs := map[key]sai.Attrs{}, map[key]key{}
	for k, oid := range s.oids {
		a, ok := snap[oid]
		if !ok {
			t.Fatalf("%v: %v is not in the backend", k, oid)
		}
		switch v := a.(type) {
		case sai.WatchlistEntryAttrs:
			if !v.Action.IntSession.IsNull() {
				refs[k] = s.keys[v.Action.IntSession]
			}
			v.Action.IntSession = sai.NullOID
			a = v
		case sai.EventAttrs:
			refs[k] = s.keys[v.ReportSession]
			v.ReportSession = sai.NullOID
			a = v
		}
		objs[k] = a
	}
	return objs, refs
}

func canon(b *saitest.Backend) string { return strings.Join(b.Snapshot().Canonical(), "\n") }

func kinds(log []saitest.Op) []string {
	var out []string
	for _, op := range log {
		s := string(op.Kind) + " " + op.Type.String()
		if op.Err != nil {
			s += " (failed)"
		}
		out = append(out, s)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func keysOf[V any](m map[key]V) []key {
	var out []key
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

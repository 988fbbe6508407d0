package dtel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
)

// deferBackend is a saitest backend that is a sai.Deferrer: it counts the
// calls, can fail one Flush, and checks that operations come between
// Defer and Flush.
type deferBackend struct {
	*saitest.Backend
	t         *testing.T
	deferred  bool
	defers    int
	flushes   int
	failFlush error
}

func (b *deferBackend) Defer() {
	if b.deferred {
		b.t.Error("Defer while deferred")
	}
	b.deferred = true
	b.defers++
}

func (b *deferBackend) Flush() error {
	if !b.deferred {
		b.t.Error("Flush without Defer")
	}
	b.deferred = false
	b.flushes++
	err := b.failFlush
	b.failFlush = nil
	return err
}

func (b *deferBackend) Create(a sai.Attrs) (sai.OID, error) {
	if !b.deferred {
		b.t.Errorf("Create of %v outside Defer/Flush", a.ObjectType())
	}
	return b.Backend.Create(a)
}

// TestDeferredProgramming: against a sai.Deferrer, every Apply runs its
// operations between one Defer and one Flush; a failed Flush rolls the
// change back (deferred and flushed again) and the backend holds the
// previous configuration; the next Apply goes through.
func TestDeferredProgramming(t *testing.T) {
	b := &deferBackend{Backend: saitest.New(saitest.WithCapabilities(testCaps())), t: t}
	o := New(b, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithDataplaneName("saitest"))
	mustApply(t, o, full(t))
	if b.defers != 1 || b.flushes != 1 {
		t.Fatalf("first Apply: %d Defer, %d Flush", b.defers, b.flushes)
	}
	before := canon(b.Backend)
	boom := errors.New("programming failed")
	b.failFlush = boom
	if err := o.Apply(context.Background(), multiChange(t)); !errors.Is(err, boom) {
		t.Fatalf("Apply with a failing Flush = %v", err)
	}
	if b.defers != 3 || b.flushes != 3 {
		t.Fatalf("failed Apply: %d Defer, %d Flush (want the change and its rollback)", b.defers, b.flushes)
	}
	if got := canon(b.Backend); got != before {
		t.Fatalf("backend after the rolled back change:\n%s\n--- want\n%s", got, before)
	}
	checkRefcounts(t, o, b.Backend)
	mustApply(t, o, multiChange(t))
	if b.deferred || b.flushes != 4 {
		t.Fatalf("retry: deferred %v, %d Flush", b.deferred, b.flushes)
	}
	// An operation refused halfway: undone, then flushed once.
	changed := canon(b.Backend)
	b.FailAt(3, errBoom)
	if err := o.Apply(context.Background(), full(t)); !errors.Is(err, errBoom) {
		t.Fatalf("Apply with a refused operation = %v", err)
	}
	if b.deferred || b.flushes != 5 {
		t.Fatalf("refused operation: deferred %v, %d Flush", b.deferred, b.flushes)
	}
	if got := canon(b.Backend); got != changed {
		t.Fatalf("backend after the refused change:\n%s\n--- want\n%s", got, changed)
	}
}

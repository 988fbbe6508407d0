// Package saitest provides an in-memory sai.Backend for tests of code that
// drives a dataplane (the dtel orchestrator, the gNMI server).
//
// It behaves like a strict switch: it validates attributes and checks them
// against its Capabilities, enforces referential integrity and uniqueness,
// and hands out deterministic OIDs (per type, counting from 1, never
// reused). It records every mutating call, can fail on demand, and exposes
// its objects as a Snapshot to compare whole states:
//
//	b := saitest.New()
//	run(b) // code under test
//	if diff := cmp.Diff(want, b.Snapshot().Canonical()); diff != "" { ... }
//
//	b.FailAt(3, errBoom) // the 3rd Create/Set/Remove from now fails
//	err := apply(b)      // expect a rollback...
//	// ...and compare b.Snapshot() with the snapshot taken before.
package saitest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/intd-project/intd/sai"
)

// OpKind names a mutating Backend call.
type OpKind string

const (
	OpCreate OpKind = "create"
	OpSet    OpKind = "set"
	OpRemove OpKind = "remove"
)

// Op is one recorded call.
type Op struct {
	Kind OpKind
	Type sai.ObjectType
	// OID is the object operated on; for a failed Create it is NullOID.
	OID sai.OID
	// Attrs is a copy of the attributes passed (nil for Remove).
	Attrs sai.Attrs
	// Err is the error the call returned, nil on success.
	Err error
}

func (o Op) String() string {
	s := fmt.Sprintf("%s %v", o.Kind, o.Type)
	if !o.OID.IsNull() {
		s += " " + o.OID.String()
	}
	if o.Err != nil {
		s += " failed: " + o.Err.Error()
	}
	return s
}

// Backend is an in-memory sai.Backend. The zero value is not usable; call New.
type Backend struct {
	mu       sync.Mutex
	caps     sai.Capabilities
	store    *sai.Store
	log      []Op
	calls    int // mutating calls so far
	failAt   int // absolute call number to fail, 0 = none
	failErr  error
	failWhen func(Op) error
	stats    *sai.Stats
}

var _ sai.Backend = (*Backend)(nil)

// Option configures New.
type Option func(*Backend)

// WithCapabilities makes the backend report and enforce caps instead of
// sai.FullCapabilities().
func WithCapabilities(caps sai.Capabilities) Option {
	return func(b *Backend) { b.caps = caps }
}

// New returns an empty backend.
func New(opts ...Option) *Backend {
	b := &Backend{caps: sai.FullCapabilities()}
	for _, o := range opts {
		o(b)
	}
	b.store = sai.NewStore(b.caps, nil)
	return b
}

// FailAt makes the n-th mutating call (Create, Set or Remove) from now fail
// with err, without changing state; n == 1 is the next call. n <= 0 cancels.
// The failure fires before any validation.
func (b *Backend) FailAt(n int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 {
		b.failAt, b.failErr = 0, nil
		return
	}
	b.failAt, b.failErr = b.calls+n, err
}

// FailWhen installs a hook consulted before every mutating call; when it
// returns an error the call fails with it, without changing state. The Op
// passed has no Err, and no OID for Create. nil removes the hook.
func (b *Backend) FailWhen(f func(Op) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failWhen = f
}

// Log returns the recorded calls, oldest first, failed ones included.
func (b *Backend) Log() []Op {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.log)
}

// ResetLog forgets the recorded calls (the call count for FailAt goes on).
func (b *Backend) ResetLog() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = nil
}

// Get returns a copy of the attributes of oid.
func (b *Backend) Get(oid sai.OID) (sai.Attrs, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.store.Get(oid)
	if !ok {
		return nil, false
	}
	return sai.Clone(a), true
}

// Objects returns the live OIDs of type t in ascending order.
func (b *Backend) Objects(t sai.ObjectType) []sai.OID {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []sai.OID
	for oid := range b.store.Of(t) {
		out = append(out, oid)
	}
	slices.Sort(out)
	return out
}

// Referrers returns the live objects that reference oid, ascending.
func (b *Backend) Referrers(oid sai.OID) []sai.OID {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.store.Referrers(oid)
}

// SetStats makes Stats return a copy of s. Until it is called, Stats returns
// zero counters with an entry for every live object.
func (b *Backend) SetStats(s sai.Stats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s = cloneStats(s)
	b.stats = &s
}

// Capabilities implements sai.Backend.
func (b *Backend) Capabilities() sai.Capabilities { return b.caps }

// Create implements sai.Backend.
func (b *Backend) Create(a sai.Attrs) (sai.OID, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	op := Op{Kind: OpCreate, Attrs: clone(a)}
	if a != nil {
		op.Type = a.ObjectType()
	}
	err := b.inject(op)
	if err == nil {
		op.OID, err = b.store.Create(a)
	}
	op.Err = err
	b.log = append(b.log, op)
	return op.OID, err
}

// Set implements sai.Backend.
func (b *Backend) Set(oid sai.OID, a sai.Attrs) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	op := Op{Kind: OpSet, Type: oid.Type(), OID: oid, Attrs: clone(a)}
	err := b.inject(op)
	if err == nil {
		_, err = b.store.Set(oid, a)
	}
	op.Err = err
	b.log = append(b.log, op)
	return err
}

// Remove implements sai.Backend.
func (b *Backend) Remove(oid sai.OID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	op := Op{Kind: OpRemove, Type: oid.Type(), OID: oid}
	err := b.inject(op)
	if err == nil {
		_, err = b.store.Remove(oid)
	}
	op.Err = err
	b.log = append(b.log, op)
	return err
}

// Stats implements sai.Backend.
func (b *Backend) Stats(ctx context.Context) (sai.Stats, error) {
	if err := ctx.Err(); err != nil {
		return sai.Stats{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stats != nil {
		return cloneStats(*b.stats), nil
	}
	s := b.store.NewStats()
	for oid, a := range b.store.All() {
		switch a := a.(type) {
		case sai.DTelAttrs:
			for _, p := range a.SinkPortList {
				s.Interfaces[p] = sai.Counters{}
			}
		case sai.QueueReportAttrs:
			s.QueueReports[oid] = sai.QueueReportStats{QuotaLeft: a.BreachQuota}
		}
	}
	return s, nil
}

// inject counts the call and returns an injected failure, if due.
func (b *Backend) inject(op Op) error {
	b.calls++
	if b.failAt != 0 && b.calls == b.failAt {
		err := b.failErr
		b.failAt, b.failErr = 0, nil
		return fmt.Errorf("saitest: injected failure of call %d (%v): %w", b.calls, op, err)
	}
	if b.failWhen != nil {
		if err := b.failWhen(op); err != nil {
			return fmt.Errorf("saitest: injected failure of call %d (%v): %w", b.calls, op, err)
		}
	}
	return nil
}

// Snapshot returns a deep copy of the live objects.
func (b *Backend) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{}
	for oid, a := range b.store.All() {
		s[oid] = sai.Clone(a)
	}
	return s
}

// Snapshot is a backend's objects by OID. It can be compared with
// reflect.DeepEqual or cmp.Diff when OIDs are expected to match exactly;
// use Canonical when objects may have been recreated under new OIDs (e.g.
// after a rollback).
type Snapshot map[sai.OID]sai.Attrs

// Canonical renders every object as one line, with references replaced by
// the referenced object's rendering, sorted: two snapshots holding the same
// objects and the same reference graph render equal whatever their OIDs.
func (s Snapshot) Canonical() []string {
	out := make([]string, 0, len(s))
	for _, a := range s {
		out = append(out, s.render(a))
	}
	sort.Strings(out)
	return out
}

// String renders the snapshot by OID, one object per line.
func (s Snapshot) String() string {
	var sb strings.Builder
	for _, oid := range slices.Sorted(maps.Keys(s)) {
		fmt.Fprintf(&sb, "%v: %+v\n", oid, s[oid])
	}
	return sb.String()
}

func (s Snapshot) render(a sai.Attrs) string {
	switch v := a.(type) {
	case sai.EventAttrs:
		ref := v.ReportSession
		v.ReportSession = sai.NullOID
		return fmt.Sprintf("%v %+v report-session=%s", a.ObjectType(), v, s.ref(ref))
	case sai.WatchlistEntryAttrs:
		ref := v.Action.IntSession
		v.Action.IntSession = sai.NullOID
		return fmt.Sprintf("%v %+v int-session=%s", a.ObjectType(), v, s.ref(ref))
	}
	return fmt.Sprintf("%v %+v", a.ObjectType(), a)
}

func (s Snapshot) ref(oid sai.OID) string {
	if oid.IsNull() {
		return "null"
	}
	if a, ok := s[oid]; ok {
		return "(" + s.render(a) + ")" // referenced types have no references
	}
	return "dangling " + oid.String()
}

func clone(a sai.Attrs) sai.Attrs {
	if a == nil {
		return nil
	}
	return sai.Clone(a)
}

func cloneStats(s sai.Stats) sai.Stats {
	s.Interfaces = maps.Clone(s.Interfaces)
	s.Drops = maps.Clone(s.Drops)
	s.Reports = maps.Clone(s.Reports)
	s.Watchlist = maps.Clone(s.Watchlist)
	s.IntSessions = maps.Clone(s.IntSessions)
	s.ReportSessions = maps.Clone(s.ReportSessions)
	s.QueueReports = maps.Clone(s.QueueReports)
	return s
}

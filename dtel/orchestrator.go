// Package dtel is intd's orchestrator: it turns the validated YANG
// configuration (the ygot root *gen.Device) into sai objects and reconciles
// a sai.Backend to them, and it assembles the YANG operational state from
// the applied configuration, the backend's counters and its capabilities.
//
// Apply is transactional: it validates everything first (errors wrap
// ErrInvalid and name the YANG data path), computes the difference between
// the desired objects and the applied ones, and runs creates, in-place Sets
// and removals in dependency order. If the backend refuses an operation,
// every operation already done in that Apply is undone in reverse order, so
// the backend holds exactly the objects it held before. A backend that is a
// sai.Deferrer programs its dataplane once per Apply (Defer before the
// operations, Flush after them); a failed Flush is rolled back the same
// way.
package dtel

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// Option configures an Orchestrator.
type Option func(*Orchestrator)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *Orchestrator) {
		if l != nil {
			o.log = l
		}
	}
}

// WithDataplaneName sets the name reported in /int/node/state/dataplane.
// By default it is the backend's Name() if it has one.
func WithDataplaneName(name string) Option {
	return func(o *Orchestrator) { o.dataplane = name }
}

// Orchestrator reconciles a sai.Backend to the configuration. Apply calls
// are serialized; State and Run may run concurrently with Apply.
type Orchestrator struct {
	b         sai.Backend
	caps      sai.Capabilities
	log       *slog.Logger
	dataplane string

	// applyMu serializes Apply; it guards everything below up to mu.
	applyMu sync.Mutex
	// live holds every object this orchestrator has created in the
	// backend, with its OID. Between Apply calls there is at most one
	// instance per key, unless an undo failed.
	live   map[*instance]bool
	nextID uint64

	// mu guards the snapshot State reads.
	mu   sync.RWMutex
	snap snapshot
}

// snapshot is what State needs from the last Apply, immutable once
// published.
type snapshot struct {
	cfg  *gen.Device       // the applied configuration (a private copy)
	oids map[key]sai.OID   // current OID of every applied object
	keys map[sai.OID]key   // the reverse
	objs map[key]sai.Attrs // applied attributes, references resolved
}

// New returns an orchestrator for b. The backend is assumed to hold no
// DTel objects: the orchestrator only ever removes what it created.
func New(b sai.Backend, opts ...Option) *Orchestrator {
	o := &Orchestrator{
		b:    b,
		caps: b.Capabilities(),
		log:  slog.Default(),
		live: map[*instance]bool{},
	}
	if n, ok := b.(interface{ Name() string }); ok {
		o.dataplane = n.Name()
	}
	for _, opt := range opts {
		opt(o)
	}
	o.snap = o.makeSnapshot(nil)
	return o
}

// Apply validates cfg beyond the schema and reconciles the backend to it
// atomically: on error the backend is exactly as before (compared object by
// object; OIDs of objects that had to be recreated may differ). Errors for
// configuration the backend cannot take wrap ErrInvalid; a nil cfg (or one
// without /int) removes every object.
func (o *Orchestrator) Apply(ctx context.Context, cfg *gen.Device) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cfg == nil {
		cfg = &gen.Device{}
	}
	in, err := o.translate(cfg)
	if err != nil {
		return err
	}
	o.applyMu.Lock()
	defer o.applyMu.Unlock()
	copied, err := ygot.DeepCopy(cfg)
	if err != nil {
		return err
	}
	p := o.plan(in)
	err = o.execute(p)
	if err == nil {
		o.publish(copied.(*gen.Device))
		o.log.Debug("dtel: applied configuration", "creates", p.count(opCreate), "sets", p.count(opSet), "removes", p.count(opRemove))
		return nil
	}
	// Keep the previous configuration for State; the objects are as
	// before (or, if undo failed, whatever is live, which the next Apply
	// reconciles).
	o.mu.RLock()
	prev := o.snap.cfg
	o.mu.RUnlock()
	o.publish(prev)
	return err
}

func (o *Orchestrator) publish(cfg *gen.Device) {
	s := o.makeSnapshot(cfg)
	o.mu.Lock()
	o.snap = s
	o.mu.Unlock()
}

func (o *Orchestrator) makeSnapshot(cfg *gen.Device) snapshot {
	s := snapshot{cfg: cfg, oids: map[key]sai.OID{}, keys: map[sai.OID]key{}, objs: map[key]sai.Attrs{}}
	for inst := range o.live {
		if cur, dup := s.oids[inst.key]; dup && cur < inst.oid {
			continue
		}
		s.oids[inst.key] = inst.oid
		s.keys[inst.oid] = inst.key
		s.objs[inst.key] = inst.resolved()
	}
	return s
}

// Run publishes State every interval, and once at the start, until ctx
// ends. Errors reading state are logged and the tick skipped.
func (o *Orchestrator) Run(ctx context.Context, interval time.Duration, publish func(*gen.Device)) {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if dev, err := o.State(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			o.log.Warn("dtel: reading state", "err", err)
		} else {
			publish(dev)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

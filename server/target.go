package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/proto"
)

// Applier is what the server needs from the layer below it, in the
// served schema's terms (cfg and state are roots of its generated type).
// The server owns the running configuration
// and the gNMI datastore; the applier owns the dataplane.
type Applier interface {
	// Apply validates cfg beyond the schema and reconciles the dataplane to
	// it atomically: on error nothing changed. An error that reports itself
	// as an invalid argument (see TargetOptions.InvalidErr and the
	// InvalidArgument() bool method) means the configuration is refused;
	// the Set fails with INVALID_ARGUMENT. Any other error fails it with
	// ABORTED. Apply must not modify cfg or keep a reference to it it
	// modifies later; the server hands it a candidate it will keep as the
	// running configuration.
	Apply(ctx context.Context, cfg ygot.GoStruct) error
	// State returns a root holding only config-false data (state
	// containers, counters, metadata semantics state), built from backend
	// statistics. The server does not modify the returned Device and may
	// keep parts of it, so the applier must not modify it afterwards
	// (return a fresh root each call).
	State(ctx context.Context) (ygot.GoStruct, error)
}

// StateSource is what a read-only target needs: its state (config false
// data), as a root of the server's schema. The server polls it like an
// Applier's State, publishes what changed and deletes what went away; the
// same ownership rules hold (return a fresh tree each call).
type StateSource interface {
	State(ctx context.Context) (ygot.GoStruct, error)
}

// stateOnly serves a StateSource: there is no configuration to apply (a
// read-only target starts from an empty one and refuses Set).
type stateOnly struct{ src StateSource }

func (stateOnly) Apply(context.Context, ygot.GoStruct) error { return nil }

func (b stateOnly) State(ctx context.Context) (ygot.GoStruct, error) { return b.src.State(ctx) }

// TargetOptions configures one served target.
type TargetOptions struct {
	// SavePath, when set, is where the running configuration is saved (as
	// RFC 7951 JSON) after every successful Set, and loaded from at start.
	SavePath string
	// Initial is the configuration applied at start when SavePath holds
	// none. Nil means an empty configuration.
	Initial ygot.GoStruct
	// InvalidErr, when set, is the sentinel (e.g. dtel.ErrInvalid) whose
	// presence in an Apply error chain (errors.Is) means the configuration
	// was refused rather than failing to apply.
	InvalidErr error
	// Owner, when set, names the external store that owns the
	// configuration (e.g. SONiC's CONFIG_DB): gNMI Set RPCs are refused
	// with FAILED_PRECONDITION naming it, and the configuration changes
	// only through Server.OwnerSet, which validates, applies, saves and
	// publishes exactly as Set does.
	Owner string
}

// invalidArgument is implemented by errors that mean "the configuration is
// refused", whatever package defines them.
type invalidArgument interface{ InvalidArgument() bool }

// target is one served gNMI target: its running configuration, the latest
// state from its applier, and the merged tree published to the cache.
type target struct {
	name    string
	srv     *Server
	applier Applier
	// readOnly targets serve state only: Set is refused.
	readOnly bool
	opts     TargetOptions
	log      *slog.Logger

	// sem (lock, unlock) serialises Set transactions, commit rollbacks
	// and state publishing.
	sem chan struct{}
	// pending is the commit waiting for confirmation, if any (commit.go).
	pending *pendingCommit
	// masters holds, by role, the master's election ID (extensions.go).
	masters map[string]electionID
	// lastPublish is how long the last configuration publish took.
	lastPublish time.Duration
	running     ygot.GoStruct // configuration only, as clients set it
	// published is running with the defaults in use filled in: what Get
	// and subscribers see.
	published ygot.GoStruct
	state     ygot.GoStruct // latest applier state (config false only)
	lastTS    int64

	// The leaves last written to the cache, by path string.
	cfgLeaves, stLeaves map[string]*gpb.Update

	// snap is the latest published tree, read by Get without locking mu.
	snap atomic.Pointer[snapshot]

	// stateErrLogged is set by the poller and RefreshState alike.
	stateErrLogged atomic.Bool
	// configs counts configuration changes (under the lock): a state read
	// before one describes the old configuration, and a poll drops it
	// rather than publish it over the state the change published.
	configs atomic.Uint64

	// gen counts cache writes: odd while a publish writes the cache, so a
	// sample round built at an even generation that has not moved since
	// is a consistent snapshot (sample.go).
	gen atomic.Uint64
	// rounds holds the shared SAMPLE rounds, by what they sample.
	rmu    sync.Mutex
	rounds map[roundKey]*roundSlot
}

// snapshot is an immutable published pair of configuration and state;
// their merged tree and its per-data-type views are built lazily, on the
// first Get that needs them.
type snapshot struct {
	sc             *schema
	running, state ygot.GoStruct
	ts             int64 // when it was taken
	mu             sync.Mutex
	dev            ygot.GoStruct
	views          map[viewKey]ygot.GoStruct
}

func (sn *snapshot) merged() (ygot.GoStruct, error) {
	if sn.dev != nil {
		return sn.dev, nil
	}
	if sn.state == nil {
		sn.dev = sn.running
		return sn.dev, nil
	}
	m, err := ygot.MergeStructs(sn.running, sn.state, &ygot.MergeOverwriteExistingFields{})
	if err != nil {
		return nil, fmt.Errorf("merging configuration and state: %w", err)
	}
	sn.dev = m
	return sn.dev, nil
}

// viewKey names a view: a data type, restricted to a model set.
type viewKey struct {
	typ    gpb.GetRequest_DataType
	models string
}

func (sn *snapshot) view(t gpb.GetRequest_DataType, models modelSet) (ygot.GoStruct, error) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	dev, err := sn.merged()
	if err != nil {
		return nil, err
	}
	keep := keepFor(t)
	if models != nil {
		typed := keep
		keep = func(e *yang.Entry) bool { return models.allows(sn.sc, e) && (typed == nil || typed(e)) }
	}
	if keep == nil {
		return dev, nil
	}
	k := viewKey{t, models.key()}
	if v := sn.views[k]; v != nil {
		return v, nil
	}
	cp, err := ygot.DeepCopy(dev)
	if err != nil {
		return nil, fmt.Errorf("copying tree for %v view: %w", t, err)
	}
	v := cp
	filterTree(v, sn.sc.root, keep)
	if sn.views == nil {
		sn.views = map[viewKey]ygot.GoStruct{}
	}
	sn.views[k] = v
	return v, nil
}

func (t *target) isInvalid(err error) bool {
	var ia invalidArgument
	if errors.As(err, &ia) && ia.InvalidArgument() {
		return true
	}
	return t.opts.InvalidErr != nil && errors.Is(err, t.opts.InvalidErr)
}

// start loads the saved or initial configuration, applies it and publishes
// the first tree.
func (t *target) start(ctx context.Context) error {
	cfg, from, rolledBack, err := t.startConfig()
	if err != nil {
		return fmt.Errorf("target %s: %w", t.name, err)
	}
	if cfg == nil || reflect.ValueOf(cfg).IsNil() {
		cfg = t.srv.schema.newRoot()
	} else {
		cp, err := ygot.DeepCopy(cfg)
		if err != nil {
			return fmt.Errorf("target %s: copying %s: %w", t.name, from, err)
		}
		cfg = cp
	}
	// Checked and applied as a Set replacing everything would be.
	if err := t.srv.checkCandidate(cfg, nil); err != nil {
		return fmt.Errorf("target %s: %s: %w", t.name, from, err)
	}
	if err := t.applier.Apply(ctx, cfg); err != nil {
		if t.isInvalid(err) {
			return fmt.Errorf("target %s: %s refused: %w", t.name, from, err)
		}
		return fmt.Errorf("target %s: applying %s: %w", t.name, from, err)
	}
	if rolledBack {
		// The save file follows the rollback before the record of it goes.
		if err := saveConfig(t.opts.SavePath, cfg); err != nil {
			return fmt.Errorf("target %s: saving the rolled back configuration: %w", t.name, err)
		}
		t.removeRollback()
		t.log.Warn("a commit was waiting for confirmation when the target stopped: rolled back", "from", from)
	}
	if !t.readOnly {
		t.log.Info("configuration applied", "from", from)
	}
	if err := t.lock(context.Background()); err != nil {
		return err
	}
	defer t.unlock()
	t.running = cfg
	t.configs.Add(1)
	if st, err := t.applier.State(ctx); err == nil {
		t.state = st
	} else {
		t.log.Warn("reading state", "err", err)
	}
	return t.publishLocked(true)
}

// nextTS returns a timestamp strictly after the previous one, so the cache
// never takes an update as stale.
func (t *target) nextTS() int64 {
	ts := time.Now().UnixNano()
	if ts <= t.lastTS {
		ts = t.lastTS + 1
	}
	t.lastTS = ts
	return ts
}

// publishLocked publishes t.running and t.state: the snapshot Get reads,
// and in the cache the leaves that changed since the last publish, with
// deletes for those that went away. Configuration and state are flattened
// separately, and each only when it changed, so a state poll never walks
// the configuration. t must be locked.
func (t *target) publishLocked(configChanged bool) error {
	// The time of the snapshot: Get answers with it (§3.3.2), the cache
	// holds the changes with it.
	ts := t.nextTS()
	var n gpb.Notification
	if configChanged || t.cfgLeaves == nil {
		t.published = t.srv.schema.withDefaults(t.running)
		leaves, err := flatten(t.published, nil)
		if err != nil {
			return fmt.Errorf("flattening configuration: %w", err)
		}
		diffLeaves(t.cfgLeaves, leaves, &n)
		t.cfgLeaves = leaves
	}
	st := t.state
	if st == nil {
		st = t.srv.schema.newRoot()
	}
	leaves, err := flatten(st, t.srv.schema.isConfigListKey)
	if err != nil {
		return fmt.Errorf("flattening state: %w", err)
	}
	diffLeaves(t.stLeaves, leaves, &n)
	t.stLeaves = leaves
	t.snap.Store(&snapshot{sc: t.srv.schema, running: t.published, state: t.state, ts: ts})
	if len(n.Update)+len(n.Delete) == 0 {
		return nil
	}
	n.Prefix = &gpb.Path{Target: t.name}
	n.Timestamp = ts
	t.gen.Add(1)
	defer t.gen.Add(1)
	if err := t.srv.cache.GnmiUpdate(&n); err != nil {
		// The tree is published for Get; a cache error only affects
		// subscribers, and the next publish rewrites the same leaves.
		t.log.Error("writing to the gNMI cache", "err", err)
	}
	return nil
}

// flatten renders a tree's leaves (ygot.TogNMINotifications) keyed by
// path string, leaving out those skip matches.
func flatten(dev ygot.GoStruct, skip func([]*gpb.PathElem) bool) (map[string]*gpb.Update, error) {
	ns, err := ygot.TogNMINotifications(dev, 0, ygot.GNMINotificationsConfig{UsePathElem: true})
	if err != nil {
		return nil, err
	}
	out := map[string]*gpb.Update{}
	for _, n := range ns {
		pre := n.GetPrefix().GetElem()
		for _, u := range n.GetUpdate() {
			full := make([]*gpb.PathElem, 0, len(pre)+len(u.GetPath().GetElem()))
			full = append(full, pre...)
			full = append(full, u.GetPath().GetElem()...)
			if skip != nil && skip(full) {
				continue
			}
			out[pathString(full)] = &gpb.Update{Path: &gpb.Path{Elem: full}, Val: u.GetVal()}
		}
	}
	return out, nil
}

// diffLeaves appends to n the leaves of cur that are new or changed since
// prev, and deletes for those of prev that are gone.
func diffLeaves(prev, cur map[string]*gpb.Update, n *gpb.Notification) {
	for k, u := range cur {
		if p, ok := prev[k]; !ok || !sameValue(p.GetVal(), u.GetVal()) {
			n.Update = append(n.Update, u)
		}
	}
	for k, u := range prev {
		if _, ok := cur[k]; !ok {
			n.Delete = append(n.Delete, u.GetPath())
		}
	}
}

// sameValue is proto.Equal for TypedValues, without reflection for the
// scalars that make up nearly every leaf.
func sameValue(a, b *gpb.TypedValue) bool {
	switch x := a.GetValue().(type) {
	case *gpb.TypedValue_UintVal:
		y, ok := b.GetValue().(*gpb.TypedValue_UintVal)
		return ok && x.UintVal == y.UintVal
	case *gpb.TypedValue_IntVal:
		y, ok := b.GetValue().(*gpb.TypedValue_IntVal)
		return ok && x.IntVal == y.IntVal
	case *gpb.TypedValue_StringVal:
		y, ok := b.GetValue().(*gpb.TypedValue_StringVal)
		return ok && x.StringVal == y.StringVal
	case *gpb.TypedValue_BoolVal:
		y, ok := b.GetValue().(*gpb.TypedValue_BoolVal)
		return ok && x.BoolVal == y.BoolVal
	}
	return proto.Equal(a, b)
}

// isConfigListKey reports whether a leaf is the key leaf of a
// configuration list entry: such leaves are published from the
// configuration, so the state tree (which repeats them to hold its
// entries) must not publish or delete them.
func (s *schema) isConfigListKey(p []*gpb.PathElem) bool {
	if len(p) < 2 {
		return false
	}
	parent := p[len(p)-2]
	if _, ok := parent.GetKey()[p[len(p)-1].GetName()]; !ok {
		return false
	}
	e := s.root
	for _, pe := range p[:len(p)-1] {
		if e = e.Dir[pe.GetName()]; e == nil {
			return false
		}
	}
	return isConfigEntry(e)
}

// pollState runs until ctx ends, publishing the applier's state every
// interval.
func (t *target) pollState(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.refreshState(ctx)
	}
}

func (t *target) refreshState(ctx context.Context) {
	configs := t.configs.Load()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	st, err := t.applier.State(sctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && !t.stateErrLogged.Swap(true) {
			t.log.Warn("reading state", "err", err)
		}
		return
	}
	t.stateErrLogged.Store(false)
	if t.lock(ctx) != nil {
		return
	}
	defer t.unlock()
	if t.configs.Load() != configs {
		return // read before a configuration change, which published newer state
	}
	t.state = st
	if err := t.publishLocked(false); err != nil {
		t.log.Error("publishing state", "err", err)
	}
}

// saveConfig writes dev atomically: a temporary file in the same
// directory, fsync, rename over the old one, fsync the directory.
func saveConfig(path string, dev ygot.GoStruct) error {
	js, err := ygot.EmitJSON(dev, &ygot.EmitJSONConfig{
		Format:         ygot.RFC7951,
		Indent:         "  ",
		SkipValidation: true,
		RFC7951Config:  &ygot.RFC7951JSONConfig{AppendModuleName: true},
	})
	if err != nil {
		return fmt.Errorf("encoding configuration: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("saving configuration: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.WriteString(js + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

package dtel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/intd-project/intd/sai"
)

// instance is one object created in the backend. Its references point to
// other instances rather than OIDs: when an undo has to recreate a removed
// object it gets a new OID, and everything that refers to the instance
// follows it.
type instance struct {
	id    uint64
	key   key
	path  string
	attrs sai.Attrs // references null
	refs  []*instance
	oid   sai.OID // null while not in the backend
	// users counts live instances whose references include this one: the
	// reference count of shared INT and report sessions. An instance is
	// only ever removed at zero.
	users int
}

func (i *instance) refOIDs() []sai.OID {
	out := make([]sai.OID, len(i.refs))
	for n, r := range i.refs {
		out[n] = r.oid
	}
	return out
}

// resolved returns the attributes as the backend holds them.
func (i *instance) resolved() sai.Attrs { return resolve(i.attrs, i.refOIDs()) }

type opKind uint8

const (
	opCreate opKind = iota
	opSet
	opRemove
)

func (k opKind) String() string {
	return [...]string{"create", "set", "remove"}[k]
}

// op is one backend call. For opSet, attrs and refs are the new values.
type op struct {
	kind  opKind
	inst  *instance
	attrs sai.Attrs
	refs  []*instance
}

type plan struct {
	ops []op
}

func (p *plan) count(k opKind) (n int) {
	for _, o := range p.ops {
		if o.kind == k {
			n++
		}
	}
	return n
}

// plan computes the operations that take the live objects to the desired
// ones.
//
// Ordering: all creates first, in dependency order (DTel, report sessions,
// INT sessions, queue reports, events, watchlist entries); then every Set,
// in the same order; then every removal, in reverse order. A Set may point
// an object at a newly created one, and a removal only happens once no
// kept object refers to the removed one, so the backend never sees a
// dangling reference and never refuses a removal with ErrInUse.
//
// Changes: an object whose attributes are unchanged and whose references
// still designate the same instances is left alone. Otherwise, if the new
// attributes are SettableFrom the old ones, one Set changes it in place:
// the object keeps its OID and its state (counters, sequence numbers,
// in-flight reports); references are settable attributes in sai, so moving
// an entry to another INT session, or an event to another report session,
// is also a Set.
//
// Create-only changes (a watchlist entry's priority or match) recreate
// the object make-before-break: the replacement is created in the create
// phase, next to the old object, and the old one is removed in the removal
// phase. Entries of equal priority may coexist, so the flow is monitored
// throughout. If the recreated object had dependents, each dependent is
// processed after it in dependency order, sees that its reference now
// designates a different instance, and is Set (or itself recreated) to
// point at the replacement before the old object's removal — so the old
// object's reference count is zero when it is removed. The sai uniqueness
// constraints (one DTel object, one queue report per port and queue, one
// event per type) are all on attributes that form the key here, so a
// replacement never collides with the object it replaces. The price of
// make-before-break is capacity: where a backend limit (watchlist entries,
// queue reports) would be exceeded half-way, makeRoom moves removals to the
// front, turning those recreations into break-before-make.
func (o *Orchestrator) plan(in *intent) *plan {
	byKey := map[key][]*instance{}
	for inst := range o.live {
		byKey[inst.key] = append(byKey[inst.key], inst)
	}
	var creates, sets, removes []op
	// Extra instances of one key only exist after a failed undo; keep the
	// oldest, remove the others.
	for _, insts := range byKey {
		slices.SortFunc(insts, func(a, b *instance) int { return int(a.id - b.id) })
		for _, extra := range insts[1:] {
			removes = append(removes, op{kind: opRemove, inst: extra})
		}
	}
	// target is the instance each desired key designates after the change.
	target := map[key]*instance{}
	for _, k := range sortedFunc(in.objects, compareKeys) {
		obj := in.objects[k]
		refs := make([]*instance, len(obj.refs))
		for i, r := range obj.refs {
			refs[i] = target[r] // dependency order: already planned
		}
		var cur *instance
		if insts := byKey[k]; len(insts) > 0 {
			cur = insts[0]
		}
		switch {
		case cur != nil && equalAttrs(cur.attrs, obj.attrs) && slices.Equal(cur.refs, refs):
			target[k] = cur
		case cur != nil && obj.attrs.SettableFrom(cur.attrs):
			sets = append(sets, op{kind: opSet, inst: cur, attrs: obj.attrs, refs: refs})
			cur.path = obj.path
			target[k] = cur
		default:
			n := o.newInstance(obj, refs)
			creates = append(creates, op{kind: opCreate, inst: n})
			target[k] = n
			if cur != nil {
				removes = append(removes, op{kind: opRemove, inst: cur})
			}
		}
	}
	for k, insts := range byKey {
		if _, ok := in.objects[k]; !ok {
			removes = append(removes, op{kind: opRemove, inst: insts[0]})
		}
	}
	slices.SortStableFunc(removes, func(a, b op) int {
		return -compareKeys(a.inst.key, b.inst.key)
	})
	early, removes := o.makeRoom(creates, removes)
	p := &plan{}
	p.ops = append(append(append(append(p.ops, early...), creates...), sets...), removes...)
	return p
}

// makeRoom moves removals ahead of the creates where the backend's object
// limits (watchlist entries, queue reports) would otherwise be exceeded
// half-way: pure deletions first, then the old halves of make-before-break
// recreations, which thereby become break-before-make. Both types are
// leaves (nothing references them), so removing them early is safe.
// translate has checked that the desired objects fit, so there are always
// enough removals to move.
func (o *Orchestrator) makeRoom(creates, removes []op) (early, late []op) {
	limits := map[sai.ObjectType]int{
		sai.ObjectTypeWatchlistEntry: o.caps.MaxWatchlistEntries,
		sai.ObjectTypeQueueReport:    o.caps.MaxQueueReports,
	}
	move := map[*instance]bool{}
	for t, limit := range limits {
		if limit <= 0 {
			continue
		}
		n := 0
		for inst := range o.live {
			if inst.key.t == t {
				n++
			}
		}
		recreated := map[key]bool{}
		for _, c := range creates {
			if c.inst.key.t == t {
				n++
				recreated[c.inst.key] = true
			}
		}
		excess := n - limit
		for pass := 0; pass < 2 && excess > 0; pass++ {
			for _, r := range removes {
				if excess > 0 && r.inst.key.t == t && !move[r.inst] && recreated[r.inst.key] == (pass == 1) {
					move[r.inst] = true
					excess--
				}
			}
		}
	}
	for _, r := range removes {
		if move[r.inst] {
			early = append(early, r)
		} else {
			late = append(late, r)
		}
	}
	return early, late
}

func (o *Orchestrator) newInstance(obj *object, refs []*instance) *instance {
	o.nextID++
	return &instance{id: o.nextID, key: obj.key, path: obj.path, attrs: sai.Clone(obj.attrs), refs: refs}
}

// execute runs the plan, deferred over all its operations when the
// backend is a sai.Deferrer (programmed once, at the end). If an
// operation or the final programming fails, the operations already done
// are undone in reverse order; the error names the failed operation and
// wraps the backend's error (and any undo error).
func (o *Orchestrator) execute(p *plan) error {
	def, _ := o.b.(sai.Deferrer)
	if def != nil {
		def.Defer()
	}
	flush := func() error {
		if def == nil {
			return nil
		}
		return def.Flush()
	}
	done := make([]op, 0, len(p.ops))
	for i, step := range p.ops {
		undo, err := o.do(step)
		if err == nil {
			done = append(done, undo)
			continue
		}
		if errors.Is(err, sai.ErrInvalid) || errors.Is(err, sai.ErrUnsupported) {
			// The dataplane refuses this configuration (beyond what its
			// capabilities say): the client's problem, reported with
			// the configuration path.
			var ae *sai.AttrError
			if errors.As(err, &ae) && ae.Attr != sai.AttrNone {
				// It names the attribute at fault: its leaf.
				err = o.attrError(&object{key: step.inst.key, path: step.inst.path, attrs: step.inst.attrs}, err)
			} else {
				err = &InvalidError{Path: step.inst.path, Msg: fmt.Sprintf("the dataplane refused to %v the %v: %v", step.kind, step.inst.key.t, err), Err: err}
			}
		} else {
			err = fmt.Errorf("dtel: step %d of %d: %v %v (%s): %w", i+1, len(p.ops), step.kind, step.inst.key, step.inst.path, err)
		}
		return o.rollback(err, done, flush)
	}
	if err := flush(); err != nil {
		err = fmt.Errorf("dtel: programming the dataplane after %d steps: %w", len(p.ops), err)
		if def != nil {
			def.Defer()
		}
		return o.rollback(err, done, flush)
	}
	return nil
}

// rollback undoes the operations done, in reverse order, programs the
// result (flush) and returns err, joined with what failed on the way back.
func (o *Orchestrator) rollback(err error, done []op, flush func() error) error {
	o.log.Warn("dtel: backend refused a change, rolling back", "err", err, "undo", len(done))
	for j := len(done) - 1; j >= 0; j-- {
		if _, uerr := o.do(done[j]); uerr != nil {
			uerr = fmt.Errorf("dtel: undo %v %v: %w", done[j].kind, done[j].inst.key, uerr)
			o.log.Error("dtel: rollback failed; the backend differs from the previous configuration until the next Apply", "err", uerr)
			return errors.Join(err, uerr, flush())
		}
	}
	if ferr := flush(); ferr != nil {
		ferr = fmt.Errorf("dtel: programming the dataplane after rollback: %w", ferr)
		o.log.Error("dtel: rollback failed; the backend differs from the previous configuration until the next Apply", "err", ferr)
		return errors.Join(err, ferr)
	}
	return err
}

// do performs one operation on the backend and the live set, and returns
// the operation that undoes it.
func (o *Orchestrator) do(p op) (op, error) {
	inst := p.inst
	switch p.kind {
	case opCreate:
		oid, err := o.b.Create(inst.resolved())
		if err != nil {
			return op{}, err
		}
		inst.oid = oid
		o.live[inst] = true
		for _, r := range inst.refs {
			r.users++
		}
		return op{kind: opRemove, inst: inst}, nil
	case opSet:
		if err := o.b.Set(inst.oid, resolve(p.attrs, oidsOf(p.refs))); err != nil {
			return op{}, err
		}
		undo := op{kind: opSet, inst: inst, attrs: inst.attrs, refs: inst.refs}
		for _, r := range inst.refs {
			r.users--
		}
		for _, r := range p.refs {
			r.users++
		}
		inst.attrs, inst.refs = sai.Clone(p.attrs), p.refs
		return undo, nil
	case opRemove:
		if inst.users != 0 {
			// A planning bug; refuse rather than leave a dangling
			// reference in the backend.
			return op{}, fmt.Errorf("dtel: internal error: %v still has %d users", inst.key, inst.users)
		}
		if err := o.b.Remove(inst.oid); err != nil {
			return op{}, err
		}
		inst.oid = sai.NullOID
		delete(o.live, inst)
		for _, r := range inst.refs {
			r.users--
		}
		return op{kind: opCreate, inst: inst}, nil
	}
	panic("dtel: unknown op")
}

func oidsOf(refs []*instance) []sai.OID {
	out := make([]sai.OID, len(refs))
	for i, r := range refs {
		out[i] = r.oid
	}
	return out
}

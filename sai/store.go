package sai

import (
	"fmt"
	"iter"
	"slices"
)

// Store is the object bookkeeping every Backend needs: it hands out OIDs,
// keeps attributes and reference counts, and runs the checks that do not
// depend on the dataplane (validity, capabilities, referenced objects,
// singletons and unique keys, capacity limits, objects in use). A backend
// embeds one, adds its own checks with Check, and programs its dataplane
// after each successful Create, Set or Remove.
//
// A Store is not safe for concurrent use: the backend's lock guards it
// together with the dataplane state it programs from it.
type Store struct {
	caps  Capabilities
	check func(self OID, a Attrs) error
	objs  map[OID]*stored
	next  [numObjectTypes]uint64
	n     [numObjectTypes]int
}

type stored struct {
	attrs Attrs
	refs  int // live objects referencing this one
}

// NewStore returns an empty store enforcing caps. check, if not nil, runs
// the backend's own checks after the common ones; self is the object being
// changed (NullOID for Create). OIDs count from 1 per type and are never
// reused.
func NewStore(caps Capabilities, check func(self OID, a Attrs) error) *Store {
	return &Store{caps: caps, check: check, objs: map[OID]*stored{}}
}

// Create checks a and records a copy under a new OID.
func (s *Store) Create(a Attrs) (OID, error) {
	if err := CheckCreate(a); err != nil {
		return NullOID, err
	}
	if err := s.caps.Check(a); err != nil {
		return NullOID, err
	}
	if err := s.checkCommon(NullOID, a); err != nil {
		return NullOID, err
	}
	t := a.ObjectType()
	if limit := s.limit(t); limit > 0 && s.n[t] >= limit {
		return NullOID, fmt.Errorf("sai: create %v: limit of %d reached: %w", t, limit, ErrUnsupported)
	}
	if s.check != nil {
		if err := s.check(NullOID, a); err != nil {
			return NullOID, err
		}
	}
	s.next[t]++
	oid := MakeOID(t, s.next[t])
	s.put(oid, Clone(a))
	return oid, nil
}

// Set checks a against the object's current attributes and replaces them
// with a copy of a. It returns the attributes replaced, so a backend that
// fails to program the change can Set them back.
func (s *Store) Set(oid OID, a Attrs) (old Attrs, err error) {
	o, ok := s.objs[oid]
	if !ok {
		return nil, fmt.Errorf("sai: set %v: %w", oid, ErrNotFound)
	}
	if err := CheckSet(oid, o.attrs, a); err != nil {
		return nil, err
	}
	if err := s.caps.Check(a); err != nil {
		return nil, err
	}
	if err := s.checkCommon(oid, a); err != nil {
		return nil, err
	}
	if s.check != nil {
		if err := s.check(oid, a); err != nil {
			return nil, err
		}
	}
	old = o.attrs
	s.unref(old)
	o.attrs = Clone(a)
	s.ref(o.attrs)
	return old, nil
}

// Remove forgets oid unless another object references it (ErrInUse). It
// returns the attributes the object had.
func (s *Store) Remove(oid OID) (Attrs, error) {
	o, ok := s.objs[oid]
	if !ok {
		return nil, fmt.Errorf("sai: remove %v: %w", oid, ErrNotFound)
	}
	if o.refs > 0 {
		return nil, fmt.Errorf("sai: remove %v: referenced by %v: %w", oid, s.Referrers(oid), ErrInUse)
	}
	s.unref(o.attrs)
	delete(s.objs, oid)
	s.n[oid.Type()]--
	return o.attrs, nil
}

// Get returns the attributes of oid. They are the store's: do not modify
// their slices.
func (s *Store) Get(oid OID) (Attrs, bool) {
	o, ok := s.objs[oid]
	if !ok {
		return nil, false
	}
	return o.attrs, true
}

// Len returns the number of live objects of type t.
func (s *Store) Len(t ObjectType) int {
	if t >= numObjectTypes {
		return 0
	}
	return s.n[t]
}

// All yields every live object, in no particular order.
func (s *Store) All() iter.Seq2[OID, Attrs] {
	return func(yield func(OID, Attrs) bool) {
		for oid, o := range s.objs {
			if !yield(oid, o.attrs) {
				return
			}
		}
	}
}

// Of yields the live objects of type t, in no particular order.
func (s *Store) Of(t ObjectType) iter.Seq2[OID, Attrs] {
	return func(yield func(OID, Attrs) bool) {
		if s.Len(t) == 0 {
			return
		}
		for oid, o := range s.objs {
			if oid.Type() == t && !yield(oid, o.attrs) {
				return
			}
		}
	}
}

// First returns the live object of type t with the lowest OID, for
// singletons such as the DTel object.
func (s *Store) First(t ObjectType) (OID, Attrs, bool) {
	best := NullOID
	for oid := range s.Of(t) {
		if best.IsNull() || oid < best {
			best = oid
		}
	}
	if best.IsNull() {
		return NullOID, nil, false
	}
	return best, s.objs[best].attrs, true
}

// Referrers returns the live objects that reference oid, ascending.
func (s *Store) Referrers(oid OID) []OID {
	var out []OID
	for o, st := range s.objs {
		if slices.Contains(st.attrs.References(), oid) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// checkCommon checks what holds for every backend: referenced objects
// exist, and a does not duplicate a singleton or a unique key of another
// object (Set cannot, as keys are create-only, but checking costs little).
func (s *Store) checkCommon(self OID, a Attrs) error {
	for _, r := range a.References() {
		if _, ok := s.objs[r]; !ok {
			return fmt.Errorf("sai: %v references %v: %w", a.ObjectType(), r, ErrNotFound)
		}
	}
	if dup := s.duplicate(self, a); !dup.IsNull() {
		return fmt.Errorf("sai: %v: same key as %v: %w", a.ObjectType(), dup, ErrExists)
	}
	return nil
}

// duplicate returns the live object other than self that a would clash
// with, if any.
func (s *Store) duplicate(self OID, a Attrs) OID {
	for oid, o := range s.Of(a.ObjectType()) {
		if oid == self {
			continue
		}
		switch a := a.(type) {
		case DTelAttrs:
			return oid // singleton
		case QueueReportAttrs:
			if q := o.(QueueReportAttrs); q.Port == a.Port && q.Queue == a.Queue {
				return oid
			}
		case EventAttrs:
			if o.(EventAttrs).Type == a.Type {
				return oid
			}
		}
	}
	return NullOID
}

func (s *Store) limit(t ObjectType) int {
	switch t {
	case ObjectTypeWatchlistEntry:
		return s.caps.MaxWatchlistEntries
	case ObjectTypeQueueReport:
		return s.caps.MaxQueueReports
	}
	return 0
}

func (s *Store) put(oid OID, a Attrs) {
	s.objs[oid] = &stored{attrs: a}
	s.n[oid.Type()]++
	s.ref(a)
}

func (s *Store) ref(a Attrs) {
	for _, r := range a.References() {
		s.objs[r].refs++
	}
}

func (s *Store) unref(a Attrs) {
	for _, r := range a.References() {
		s.objs[r].refs--
	}
}

// NewStats returns Stats with every map made and a zero entry for every
// live watchlist entry, INT session, report session and queue report, for
// a backend to fill in.
func (s *Store) NewStats() Stats {
	st := Stats{
		Interfaces:     map[string]Counters{},
		Drops:          map[DropReason]uint64{},
		Reports:        map[ReportType]ReportCounters{},
		Watchlist:      make(map[OID]WatchlistEntryStats, s.Len(ObjectTypeWatchlistEntry)),
		IntSessions:    make(map[OID]IntSessionStats, s.Len(ObjectTypeIntSession)),
		ReportSessions: make(map[OID]ReportSessionStats, s.Len(ObjectTypeReportSession)),
		QueueReports:   make(map[OID]QueueReportStats, s.Len(ObjectTypeQueueReport)),
	}
	for oid := range s.objs {
		switch oid.Type() {
		case ObjectTypeWatchlistEntry:
			st.Watchlist[oid] = WatchlistEntryStats{}
		case ObjectTypeIntSession:
			st.IntSessions[oid] = IntSessionStats{}
		case ObjectTypeReportSession:
			st.ReportSessions[oid] = ReportSessionStats{}
		case ObjectTypeQueueReport:
			st.QueueReports[oid] = QueueReportStats{}
		}
	}
	return st
}

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
	objs  [numObjectTypes]map[OID]*stored // by type: singletons and one type's objects are found without a scan
	next  [numObjectTypes]uint64
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
	s := &Store{caps: caps, check: check}
	for t := range s.objs {
		s.objs[t] = map[OID]*stored{}
	}
	return s
}

func (s *Store) get(oid OID) (*stored, bool) {
	if oid.Type() >= numObjectTypes {
		return nil, false
	}
	o, ok := s.objs[oid.Type()][oid]
	return o, ok
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
	if limit := s.limit(t); limit > 0 && s.Len(t) >= limit {
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
	o, ok := s.get(oid)
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
	o, ok := s.get(oid)
	if !ok {
		return nil, fmt.Errorf("sai: remove %v: %w", oid, ErrNotFound)
	}
	if o.refs > 0 {
		return nil, fmt.Errorf("sai: remove %v: referenced by %v: %w", oid, s.Referrers(oid), ErrInUse)
	}
	s.unref(o.attrs)
	delete(s.objs[oid.Type()], oid)
	return o.attrs, nil
}

// Get returns the attributes of oid. They are the store's: do not modify
// their slices.
func (s *Store) Get(oid OID) (Attrs, bool) {
	o, ok := s.get(oid)
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
	return len(s.objs[t])
}

// All yields every live object, in no particular order.
func (s *Store) All() iter.Seq2[OID, Attrs] {
	return func(yield func(OID, Attrs) bool) {
		for _, objs := range s.objs {
			for oid, o := range objs {
				if !yield(oid, o.attrs) {
					return
				}
			}
		}
	}
}

// Of yields the live objects of type t, in no particular order.
func (s *Store) Of(t ObjectType) iter.Seq2[OID, Attrs] {
	return func(yield func(OID, Attrs) bool) {
		if t >= numObjectTypes {
			return
		}
		for oid, o := range s.objs[t] {
			if !yield(oid, o.attrs) {
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
	return best, s.objs[t][best].attrs, true
}

// Referrers returns the live objects that reference oid, ascending.
func (s *Store) Referrers(oid OID) []OID {
	var out []OID
	for o, a := range s.All() {
		if slices.Contains(a.References(), oid) {
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
		if _, ok := s.get(r); !ok {
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
	switch a.(type) {
	case DTelAttrs, QueueReportAttrs, EventAttrs:
	default:
		return NullOID // no unique key
	}
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
	s.objs[oid.Type()][oid] = &stored{attrs: a}
	s.ref(a)
}

func (s *Store) ref(a Attrs) {
	for _, r := range a.References() {
		o, _ := s.get(r)
		o.refs++
	}
}

func (s *Store) unref(a Attrs) {
	for _, r := range a.References() {
		o, _ := s.get(r)
		o.refs--
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
		Events:         map[EventType]ReportCounters{},
		Ports:          map[string]PortInfo{},
		Watchlist:      make(map[OID]WatchlistEntryStats, s.Len(ObjectTypeWatchlistEntry)),
		IntSessions:    make(map[OID]IntSessionStats, s.Len(ObjectTypeIntSession)),
		ReportSessions: make(map[OID]ReportSessionStats, s.Len(ObjectTypeReportSession)),
		QueueReports:   make(map[OID]QueueReportStats, s.Len(ObjectTypeQueueReport)),
	}
	for oid := range s.objs[ObjectTypeWatchlistEntry] {
		st.Watchlist[oid] = WatchlistEntryStats{}
	}
	for oid := range s.objs[ObjectTypeIntSession] {
		st.IntSessions[oid] = IntSessionStats{}
	}
	for oid := range s.objs[ObjectTypeReportSession] {
		st.ReportSessions[oid] = ReportSessionStats{}
	}
	for oid := range s.objs[ObjectTypeQueueReport] {
		st.QueueReports[oid] = QueueReportStats{}
	}
	return st
}

package sai

import (
	"fmt"
	"strings"
	"time"
)

// Attrs is the attribute set of one DTel object. It is implemented only by
// the value types of this package (DTelAttrs, IntSessionAttrs,
// ReportSessionAttrs, QueueReportAttrs, EventAttrs, WatchlistEntryAttrs);
// pass values, not pointers.
type Attrs interface {
	// ObjectType is the type of object these attributes create.
	ObjectType() ObjectType
	// Validate checks values and their consistency; it returns an
	// *AttrError wrapping ErrInvalid. It does not check referenced OIDs
	// beyond their type: only the backend knows which objects exist.
	Validate() error
	// SettableFrom reports whether an object created with old can be
	// changed to these attributes by Set, i.e. old has the same type and
	// every create-only attribute is equal. If false, remove and recreate.
	SettableFrom(old Attrs) bool
	// References lists the non-null OIDs these attributes point to. The
	// referenced objects must exist while this one does.
	References() []OID

	sealed()
}

func (DTelAttrs) sealed()           {}
func (IntSessionAttrs) sealed()     {}
func (ReportSessionAttrs) sealed()  {}
func (QueueReportAttrs) sealed()    {}
func (EventAttrs) sealed()          {}
func (WatchlistEntryAttrs) sealed() {}

// Clone returns a deep copy of a, so a backend can keep attributes without
// sharing slices with its caller.
func Clone(a Attrs) Attrs {
	switch a := a.(type) {
	case DTelAttrs:
		return a.Clone()
	case ReportSessionAttrs:
		return a.Clone()
	default:
		return a // no reference types inside
	}
}

// CheckCreate is what a backend runs first in Create: a is one of this
// package's value types and valid.
func CheckCreate(a Attrs) error {
	if err := checkKind(a); err != nil {
		return err
	}
	return a.Validate()
}

// CheckSet is what a backend runs first in Set, given the attributes the
// object currently has: the OID's type matches, a is valid, and no
// create-only attribute changes (ErrCreateOnly).
func CheckSet(oid OID, old, a Attrs) error {
	if err := checkKind(a); err != nil {
		return err
	}
	if oid.Type() != a.ObjectType() {
		return fmt.Errorf("sai: set %v: attributes are for a %v: %w", oid, a.ObjectType(), ErrInvalid)
	}
	if err := a.Validate(); err != nil {
		return err
	}
	if !a.SettableFrom(old) {
		return fmt.Errorf("sai: set %v: %w", oid, ErrCreateOnly)
	}
	return nil
}

func checkKind(a Attrs) error {
	switch a.(type) {
	case DTelAttrs, IntSessionAttrs, ReportSessionAttrs, QueueReportAttrs, EventAttrs, WatchlistEntryAttrs:
		return nil
	case nil:
		return fmt.Errorf("sai: nil attributes: %w", ErrInvalid)
	default:
		return fmt.Errorf("sai: attributes must be passed by value, got %T: %w", a, ErrInvalid)
	}
}

// DSCPMatch is a DSCP value under a mask (SAI's sai_acl_field_data_t for a
// uint8). A zero Mask matches every packet.
type DSCPMatch struct {
	Value uint8
	Mask  uint8
}

// MaxDSCP is the largest 6-bit DSCP.
const MaxDSCP = 63

// Matches reports whether dscp carries the marking.
func (m DSCPMatch) Matches(dscp uint8) bool { return dscp&m.Mask == m.Value }

func (m DSCPMatch) validate(t ObjectType, value, mask AttrID, name string) error {
	switch {
	case m.Value > MaxDSCP:
		return invalid(t, value, "%s value %d exceeds %d", name, m.Value, MaxDSCP)
	case m.Mask > MaxDSCP:
		return invalid(t, mask, "%s mask %#x exceeds %#x", name, m.Mask, MaxDSCP)
	case m.Value&^m.Mask != 0:
		// Bits outside the mask would silently never match.
		return invalid(t, value, "%s value %#x has bits outside mask %#x", name, m.Value, m.Mask)
	}
	return nil
}

// PortRange is an inclusive L4 port range. The zero value matches any port;
// a single port is {P, P}.
type PortRange struct {
	Lo, Hi uint16
}

// IsAny reports whether r matches every port.
func (r PortRange) IsAny() bool { return r == PortRange{} || r == PortRange{0, 65535} }

func (r PortRange) validate(t ObjectType, attr AttrID, name string) error {
	if r.Lo > r.Hi {
		return invalid(t, attr, "%s range %d-%d has lo > hi", name, r.Lo, r.Hi)
	}
	return nil
}

func validateDuration(t ObjectType, attr AttrID, name string, d time.Duration) error {
	if d < 0 {
		return invalid(t, attr, "%s %v is negative", name, d)
	}
	return nil
}

// MaxIfNameLen is Linux's IFNAMSIZ-1.
const MaxIfNameLen = 15

// validateIfName applies the kernel's rules for interface (and VRF device)
// names, so bad names fail here rather than deep inside a netlink call.
// index is the list entry s is (-1 for none).
func validateIfName(t ObjectType, attr AttrID, index int, name, s string) error {
	switch {
	case s == "":
		return invalidEntry(t, attr, index, "%s is empty", name)
	case len(s) > MaxIfNameLen:
		return invalidEntry(t, attr, index, "%s %q is longer than %d bytes", name, s, MaxIfNameLen)
	case s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\x00"):
		return invalidEntry(t, attr, index, "%s %q is not a valid interface name", name, s)
	}
	return nil
}

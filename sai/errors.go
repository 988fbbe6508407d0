package sai

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them so callers can use [errors.Is]; the
// message around them names the object.
var (
	// ErrInvalid: an attribute value is out of range or inconsistent.
	ErrInvalid = errors.New("invalid attribute")
	// ErrUnsupported: the value is valid but the backend cannot do it
	// (see [Capabilities]).
	ErrUnsupported = errors.New("not supported by backend")
	// ErrNotFound: the OID (or an OID referenced by the attributes) does
	// not name a live object of the expected type.
	ErrNotFound = errors.New("object not found")
	// ErrExists: the object would duplicate a singleton or a unique key
	// (the DTel object, a queue report per port+queue, an event per type).
	ErrExists = errors.New("object already exists")
	// ErrInUse: the object is still referenced and cannot be removed.
	ErrInUse = errors.New("object in use")
	// ErrCreateOnly: Set tried to change a create-only attribute; remove
	// and recreate instead (see Attrs.SettableFrom).
	ErrCreateOnly = errors.New("create-only attribute changed")
)

// AttrError reports a bad attribute value. Error() reads like
// "sai: report session: destination 2: UDP port 0 is invalid".
type AttrError struct {
	Object ObjectType
	// Attr is the attribute at fault, so the orchestrator can map the
	// error back to its configuration path; AttrNone when the error is
	// about the object as a whole.
	Attr AttrID
	// Index is the entry of a list attribute at fault (Attr's String
	// holds "[]"); -1 when the error is about no single entry.
	Index int
	// Msg is the human explanation, already naming the attribute.
	Msg string
	// Err is ErrInvalid, ErrUnsupported or ErrCreateOnly; nil means ErrInvalid.
	Err error
}

func (e *AttrError) Error() string { return "sai: " + e.Object.String() + ": " + e.Msg }

func (e *AttrError) Unwrap() error {
	if e.Err == nil {
		return ErrInvalid
	}
	return e.Err
}

// Field is the Go field path at fault, e.g. "Destinations[2].UDPPort";
// "" for the object as a whole.
func (e *AttrError) Field() string { return e.Attr.field(e.Index) }

func invalid(t ObjectType, attr AttrID, format string, args ...any) error {
	return invalidEntry(t, attr, -1, format, args...)
}

// invalidEntry is invalid about entry i of a list attribute.
func invalidEntry(t ObjectType, attr AttrID, i int, format string, args ...any) error {
	return &AttrError{Object: t, Attr: attr, Index: i, Msg: fmt.Sprintf(format, args...)}
}

func unsupported(t ObjectType, attr AttrID, format string, args ...any) error {
	return &AttrError{Object: t, Attr: attr, Index: -1, Msg: fmt.Sprintf(format, args...), Err: ErrUnsupported}
}

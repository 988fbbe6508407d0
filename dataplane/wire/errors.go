package wire

import "errors"

// Sentinel errors. Hot-path functions return these unwrapped so that they
// never allocate; callers compare with errors.Is.
var (
	ErrTruncated     = errors.New("wire: truncated")
	ErrBadVersion    = errors.New("wire: unsupported version")
	ErrBadLength     = errors.New("wire: inconsistent length field")
	ErrBadType       = errors.New("wire: unsupported header type")
	ErrNoINT         = errors.New("wire: no INT header found")
	ErrNoRoom        = errors.New("wire: buffer has no room")
	ErrHopLimit      = errors.New("wire: remaining hop count is zero")
	ErrUnsupported   = errors.New("wire: unsupported encapsulation")
	ErrBadValue      = errors.New("wire: field value out of range")
	ErrGeneveTooLong = errors.New("wire: INT exceeds Geneve option length limit")
)

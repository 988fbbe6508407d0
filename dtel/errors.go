package dtel

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error Apply returns for configuration that
// is valid against the YANG schema but that intd (or its backend) cannot
// take. The gNMI server answers such errors with INVALID_ARGUMENT; they also
// implement InvalidArgument() bool.
var ErrInvalid = errors.New("invalid configuration")

// InvalidError is a semantic validation error: Path is the YANG data path
// of the offending node (e.g.
// /int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session)
// and Msg says what is wrong with it. Err, when not nil, is the underlying
// sai error (wrapping sai.ErrInvalid or sai.ErrUnsupported).
type InvalidError struct {
	Path string
	Msg  string
	Err  error
}

func (e *InvalidError) Error() string { return e.Path + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) true, and exposes the sai error.
func (e *InvalidError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// InvalidArgument reports that the error is the client's fault.
func (e *InvalidError) InvalidArgument() bool { return true }

func invalidf(path, format string, args ...any) *InvalidError {
	return &InvalidError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

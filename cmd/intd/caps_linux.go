//go:build linux

package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// capability is a Linux capability (capabilities(7)). libcap's cap
// package changes them on every thread of the process, as the Go runtime
// runs many.
type capability = cap.Value

const (
	capNetAdmin = cap.NET_ADMIN
	capNetRaw   = cap.NET_RAW
	capBPF      = cap.BPF
)

func capName(c capability) string { return strings.ToUpper(c.String()) }

// haveCap reports whether the process may use c now.
func haveCap(c capability) bool {
	on, err := cap.GetProc().GetFlag(cap.Effective, c)
	return err == nil && on
}

// dropCaps leaves the process only those of keep it has: permitted and
// effective sets reduced to them, inheritable and ambient sets emptied,
// and every other capability removed from the bounding set, so that no
// later exec regains it. It returns the names of the capabilities kept.
func dropCaps(keep []capability) ([]string, error) {
	cur := cap.GetProc()
	var kept []capability
	var names []string
	for _, c := range keep {
		if on, err := cur.GetFlag(cap.Permitted, c); err == nil && on {
			kept = append(kept, c)
			names = append(names, capName(c))
		}
	}
	var errs []error
	// Dropping from the bounding set needs CAP_SETPCAP, dropped last.
	if on, _ := cur.GetFlag(cap.Effective, cap.SETPCAP); on {
		var drop []capability
		for c := capability(0); c < cap.MaxBits(); c++ {
			if inBound, err := cap.GetBound(c); err == nil && inBound && !slices.Contains(kept, c) {
				drop = append(drop, c)
			}
		}
		if err := cap.DropBound(drop...); err != nil {
			errs = append(errs, fmt.Errorf("bounding set: %w", err))
		}
	}
	if err := cap.ResetAmbient(); err != nil && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("ambient set: %w", err))
	}
	next := cap.NewSet()
	if err := next.SetFlag(cap.Permitted, true, kept...); err != nil {
		return nil, err
	}
	if err := next.SetFlag(cap.Effective, true, kept...); err != nil {
		return nil, err
	}
	if err := next.SetProc(); err != nil {
		errs = append(errs, fmt.Errorf("permitted and effective sets: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return names, fmt.Errorf("dropping capabilities: %w", err)
	}
	return names, nil
}

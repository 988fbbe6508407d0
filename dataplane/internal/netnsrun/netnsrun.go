//go:build linux

// Package netnsrun runs code in a given network namespace, for the
// dataplanes that change host settings of the namespace they were started
// in from whatever goroutine configures them.
package netnsrun

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs fn on an OS thread switched into ns, then switches the thread
// back. Sockets fn opens stay in ns and may be used from any goroutine
// afterwards. A thread already in ns is not switched (which takes
// CAP_SYS_ADMIN, a capability intd gives up once set up).
func Run(ns netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if orig.Equal(ns) {
		return fn()
	}
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("entering network namespace: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Never hand a thread in the wrong namespace back to the runtime.
		panic("cannot return to the original network namespace: " + err.Error())
	}
	return ferr
}

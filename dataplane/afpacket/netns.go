//go:build linux

package afpacket

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNamespace runs fn on an OS thread switched into ns, then switches the
// thread back. Sockets fn opens stay in ns and may be used from any
// goroutine afterwards. A thread already in ns is not switched (which
// takes CAP_SYS_ADMIN, a capability intd gives up once set up).
func InNamespace(ns netns.NsHandle, fn func() error) error {
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
		return fmt.Errorf("afpacket: entering namespace: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Never hand a thread in the wrong namespace back to the runtime.
		panic("afpacket: cannot return to the original network namespace: " + err.Error())
	}
	return ferr
}

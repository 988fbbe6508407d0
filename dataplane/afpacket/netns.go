//go:build linux

package afpacket

import (
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/dataplane/internal/netnsrun"
)

// InNamespace runs fn on an OS thread switched into ns, then switches the
// thread back (netnsrun.Run).
func InNamespace(ns netns.NsHandle, fn func() error) error { return netnsrun.Run(ns, fn) }

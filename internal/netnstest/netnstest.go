//go:build linux

// Package netnstest gives tests private network namespaces with veth
// pairs, so packets and links never touch the host's.
package netnstest

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// New returns a new network namespace, closed when the test ends, and a
// netlink handle in it; the calling thread stays where it was. It skips
// the test when not run as root.
func New(t testing.TB) (netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // switches this thread into it
	if err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	if err := netns.Set(orig); err != nil {
		panic(err) // the thread is in the wrong namespace
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); ns.Close() })
	return ns, h
}

// Veth adds the veth pairs {name, peer} through h, every end up.
func Veth(t testing.TB, h *netlink.Handle, pairs ...[2]string) {
	t.Helper()
	for _, p := range pairs {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p[0]}, PeerName: p[1]}); err != nil {
			t.Fatalf("veth pair %s-%s: %v", p[0], p[1], err)
		}
		for _, n := range p {
			l, err := h.LinkByName(n)
			if err == nil {
				err = h.LinkSetUp(l)
			}
			if err != nil {
				t.Fatalf("%s up: %v", n, err)
			}
		}
	}
}

// Enter moves the test's goroutine, locked to its thread, into ns until
// the test ends.
func Enter(t testing.TB, ns netns.NsHandle) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	if err := netns.Set(ns); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer orig.Close()
		if err := netns.Set(orig); err != nil {
			return // the thread stays locked and ends with its goroutine
		}
		runtime.UnlockOSThread()
	})
}

// Run runs fn on a thread in ns and returns its error, or fails the test
// when fn does not return within d. The thread stays locked to its
// goroutine, so it never goes back to the runtime in the wrong namespace.
func Run(t testing.TB, ns netns.NsHandle, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("did not return within %v", d)
		return nil
	}
}

// Named creates the named network namespace name (commands run in it
// with `ip netns exec`), loopback up and IPv6 off (no autoconfiguration
// chatter on test links), deleted when the test ends. A namespace left
// by an earlier run of the same name is replaced.
func Named(t testing.TB, name string) {
	t.Helper()
	exec.Command("ip", "netns", "del", name).Run()
	IP(t, "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	IP(t, "-n", name, "link", "set", "lo", "up")
	if out, err := exec.Command("ip", "netns", "exec", name, "sh", "-c",
		"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6").CombinedOutput(); err != nil {
		t.Fatalf("in %s: disabling IPv6: %v\n%s", name, err, out)
	}
}

// IP runs iproute2's ip with args, failing the test on error.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

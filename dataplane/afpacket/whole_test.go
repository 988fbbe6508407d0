//go:build linux

package afpacket

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestWholeSuperPackets sends 8 MiB over TCP from h1 to h2 through the
// dataplane, over IPv4 and IPv6, hosts with their default offloads (TSO
// on the veths): with nothing watched, the switch must forward the
// super-packets whole (none segmented in userspace) and every byte must
// arrive as sent.
func TestWholeSuperPackets(t *testing.T) {
	r, h1, h2 := routerBetween(t, "10.1.0.", "10.2.0.")
	addAddrs(t, []nsAddr{{h1, "e1", "fd01::1/64"}, {r, "s1", "fd01::fe/64"}, {r, "s2", "fd02::fe/64"}, {h2, "e2", "fd02::1/64"}})
	route(t, h1, "0.0.0.0/0", "10.1.0.254")
	route(t, h2, "0.0.0.0/0", "10.2.0.254")
	route(t, h1, "::/0", "fd01::fe")
	route(t, h2, "::/0", "fd02::fe")
	d, _ := startDataplane(t, r, "s1", "s2")

	data := payloadBytes(8 << 20)
	for _, fam := range []struct{ network, addr string }{{"tcp4", "10.2.0.1:5555"}, {"tcp6", "[fd02::1]:5555"}} {
		before := d.Node().Stats()
		var ln net.Listener
		inNS(t, h2, func() (err error) {
			ln, err = net.Listen(fam.network, fam.addr)
			return err
		})
		recvd := acceptAll(ln)
		var c net.Conn
		inNS(t, h1, func() (err error) {
			c, err = net.DialTimeout(fam.network, fam.addr, 5*time.Second)
			return err
		})
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		c.Close()
		got := <-recvd
		ln.Close()
		st := d.Node().Stats()
		in, out := st[0], st[1]
		in.RxGSO -= before[0].RxGSO
		in.RxWhole -= before[0].RxWhole
		in.RxSegments -= before[0].RxSegments
		in.RxGSOErrors -= before[0].RxGSOErrors
		out.TxErrors -= before[1].TxErrors
		t.Logf("%s: s1 %d super-packets, %d whole", fam.network, in.RxGSO, in.RxWhole)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: received %d bytes, want the %d sent, byte for byte", fam.network, len(got), len(data))
		}
		if in.RxWhole == 0 || in.RxSegments != 0 || in.RxGSOErrors != 0 {
			t.Errorf("%s: s1: %d super-packets, %d forwarded whole, %d segments made, %d errors; want all whole",
				fam.network, in.RxGSO, in.RxWhole, in.RxSegments, in.RxGSOErrors)
		}
		if out.TxErrors != 0 {
			t.Errorf("%s: s2: %d frames refused", fam.network, out.TxErrors)
		}
	}
}

// nsAddr is an address for an interface in a namespace.
type nsAddr struct {
	ns        netns.NsHandle
	dev, cidr string
}

// addAddrs adds the addresses (usable at once: no duplicate address
// detection).
func addAddrs(t *testing.T, addrs []nsAddr) {
	t.Helper()
	for _, a := range addrs {
		inNS(t, a.ns, func() error {
			l, err := netlink.LinkByName(a.dev)
			if err != nil {
				return err
			}
			ad, err := netlink.ParseAddr(a.cidr)
			if err != nil {
				return err
			}
			ad.Flags = unix.IFA_F_NODAD
			return netlink.AddrAdd(l, ad)
		})
	}
}

// routerBetween makes namespaces h1 - r - h2 joined by veths e1 - s1
// and s2 - e2, addresses net1+"1" (e1), net1+"254" (s1), net2+"254"
// (s2) and net2+"1" (e2), all /24.
func routerBetween(t *testing.T, net1, net2 string) (r, h1, h2 netns.NsHandle) {
	t.Helper()
	r, _ = testNS(t)
	h1, _ = testNS(t)
	h2, _ = testNS(t)
	link(t, h1, "e1", net1+"1/24", r, "s1", net1+"254/24")
	link(t, h2, "e2", net2+"1/24", r, "s2", net2+"254/24")
	return r, h1, h2
}

// acceptAll accepts one connection on ln and sends what it read until
// EOF (nil if none came), waiting at most 20 s.
func acceptAll(ln net.Listener) <-chan []byte {
	recvd := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvd <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		b, _ := io.ReadAll(c)
		recvd <- b
	}()
	return recvd
}

//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/internal/netnstest"

	"github.com/intd-project/intd/dataplane/soft"
)

// testNS creates a network namespace that lives as long as the test and
// returns it with a netlink handle in it.
func testNS(t *testing.T) (netns.NsHandle, *netlink.Handle) { return netnstest.New(t) }

// inNS runs fn on a thread switched into ns.
func inNS(t *testing.T, ns netns.NsHandle, fn func() error) {
	t.Helper()
	if err := InNamespace(ns, fn); err != nil {
		t.Fatal(err)
	}
}

// twoLinks makes veth pairs h1-s1 and h2-s2 in a private namespace and opens
// a port with cfg on each end: the hosts' ends, then the switch's.
func twoLinks(t *testing.T, cfg PortConfig) (h1, h2, s1, s2 *Port) {
	t.Helper()
	ns, h := testNS(t)
	addVeth(t, h, "h1", "s1")
	addVeth(t, h, "h2", "s2")
	inNS(t, ns, func() (err error) {
		for _, x := range []struct {
			p    **Port
			name string
		}{{&h1, "h1"}, {&h2, "h2"}, {&s1, "s1"}, {&s2, "s2"}} {
			if *x.p, err = Open(x.name, cfg); err != nil {
				return err
			}
			p := *x.p
			t.Cleanup(func() { p.Close() })
		}
		return nil
	})
	return h1, h2, s1, s2
}

func addVeth(t *testing.T, h *netlink.Handle, a, b string) {
	t.Helper()
	la := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, MTU: 1500}, PeerName: b}
	if err := h.LinkAdd(la); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{a, b} {
		l, err := h.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	// Frames sent before the carrier is up (linkwatch runs
	// asynchronously) are dropped by veth.
	for _, n := range []string{a, b} {
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			l, err := h.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s: operstate %v", n, l.Attrs().OperState)
			}
		}
	}
}

func udpFrame(dstMAC, srcMAC [6]byte, src, dst netip.Addr, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], dstMAC[:])
	copy(f[6:12], srcMAC[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ^sum16(ip[:20], 0))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], 4000)
	binary.BigEndian.PutUint16(u[2:], 5000)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	return f
}

func sum16(b []byte, s uint32) uint16 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// readAll reads frames from p until want arrived or the deadline.
func readAll(t *testing.T, p *Port, want int, d time.Duration) [][]byte {
	t.Helper()
	var got [][]byte
	end := time.Now().Add(d)
	for len(got) < want && time.Now().Before(end) {
		n, err := p.Read()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			f := p.Frame(i)
			if binary.BigEndian.Uint16(f[12:]) != 0x0800 && binary.BigEndian.Uint16(f[12:]) != 0x8100 {
				continue // IPv6 router solicitations and the like
			}
			got = append(got, bytes.Clone(f))
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return got
}

// TestVethBatch sends batches of frames through a veth pair, one AF_PACKET
// port at each end, and checks they arrive intact and in order, that the
// sender does not read its own frames back, and that oversized frames are
// refused and counted.
func TestVethBatch(t *testing.T) {
	ns, h := testNS(t)
	addVeth(t, h, "va", "vb")
	var a, b *Port
	inNS(t, ns, func() (err error) {
		if a, err = Open("va", PortConfig{Batch: 16}); err != nil {
			return err
		}
		b, err = Open("vb", PortConfig{Batch: 16, Promiscuous: true})
		return err
	})
	defer a.Close()
	defer b.Close()
	const n = 100
	for i := 0; i < n; i++ {
		a.Transmit(udpFrame(b.MAC, a.MAC, netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"),
			[]byte(fmt.Sprintf("frame %03d %s", i, bytes.Repeat([]byte{'x'}, i*10)))))
	}
	a.Flush()
	if st := a.Stats(); st.TxFrames != n || st.TxBatches < n/16 || st.TxErrors != 0 {
		t.Fatalf("tx stats %+v", st)
	}
	got := readAll(t, b, n, 5*time.Second)
	if len(got) != n {
		t.Fatalf("received %d of %d frames", len(got), n)
	}
	for i, f := range got {
		if want := fmt.Sprintf("frame %03d", i); !bytes.Contains(f, []byte(want)) || len(f) != 14+28+10+i*10 {
			t.Fatalf("frame %d: len %d %q", i, len(f), f[42:min(len(f), 60)])
		}
	}
	if st := b.Stats(); st.RxBatches >= n || st.RxFrames < n {
		t.Errorf("rx stats %+v: not batched", st)
	}
	// The sender ignores its own transmissions (the peer's kernel may
	// have sent it IPv6 router solicitations meanwhile).
	k, _ := a.Read()
	for i := 0; i < k; i++ {
		if f := a.Frame(i); [6]byte(f[6:12]) == a.MAC {
			t.Errorf("sender read its own frame back: %x", f[:min(len(f), 64)])
		}
	}
	// A frame larger than the interface MTU is refused by the kernel.
	a.Transmit(udpFrame(b.MAC, a.MAC, netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), make([]byte, 3000)))
	a.Flush()
	if st := a.Stats(); st.TxErrors != 1 {
		t.Errorf("oversized transmit: stats %+v", st)
	}
}

// TestVLANRestored checks that a VLAN tag the kernel moves out of the
// frame (veth's tx VLAN offload) is put back.
func TestVLANRestored(t *testing.T) {
	ns, h := testNS(t)
	addVeth(t, h, "va", "vb")
	var a, b *Port
	inNS(t, ns, func() (err error) {
		if a, err = Open("va", PortConfig{}); err != nil {
			return err
		}
		b, err = Open("vb", PortConfig{})
		return err
	})
	defer a.Close()
	defer b.Close()
	plain := udpFrame(b.MAC, a.MAC, netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), []byte("tagged"))
	tagged := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x20, 0x07), plain[12:]...)
	a.Transmit(tagged)
	a.Flush()
	got := readAll(t, b, 1, 5*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0], tagged) {
		t.Fatalf("got %x\nwant %x", got, tagged)
	}
}

// TestChecksumCompleted checks completeChecksum against a full computation.
func TestChecksumCompleted(t *testing.T) {
	f := udpFrame([6]byte{2}, [6]byte{4}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), []byte("hello, checksum!!"))
	u := f[34:]
	// Pseudo-header sum, as a sender with checksum offload leaves it.
	ph := make([]byte, 12)
	copy(ph, f[26:34])
	ph[9] = 17
	binary.BigEndian.PutUint16(ph[10:], uint16(len(u)))
	binary.BigEndian.PutUint16(u[6:], sum16(ph, 0))
	if !completeChecksum(f, 34, 6) {
		t.Fatal("refused")
	}
	if s := sum16(append(ph, u...), 0); s != 0xffff {
		t.Errorf("checksum does not verify: sum %#x", s)
	}
}

// TestNodeForwards runs a soft switch on two veth ports and sends frames
// through it with a rate-limited egress port: they arrive with TTL
// decremented and MACs rewritten, paced at the port rate.
func TestNodeForwards(t *testing.T) {
	ph1, ph2, ps1, ps2 := twoLinks(t, PortConfig{Batch: 32})
	const rate = 10e6 // 10 Mbit/s: 1000-byte frames leave every 0.8 ms
	sw, err := soft.New(soft.Config{Name: "s", Ports: []soft.PortConfig{
		{Name: "s1", MAC: ps1.MAC}, {Name: "s2", MAC: ps2.MAC, Rate: rate}},
		Routes: []soft.Route{{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Ports: []string{"s2"}, NextHopMAC: ph2.MAC}}})
	if err != nil {
		t.Fatal(err)
	}
	node, err := NewNode(sw, []*Port{ps1, ps2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer runNode(t, node)()
	const n = 50
	for i := 0; i < n; i++ {
		ph1.Transmit(udpFrame(ps1.MAC, ph1.MAC, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1"),
			append([]byte(fmt.Sprintf("%03d", i)), make([]byte, 1000-42-3)...)))
	}
	start := time.Now()
	ph1.Flush()
	got := readAll(t, ph2, n, 5*time.Second)
	el := time.Since(start)
	if len(got) != n {
		t.Fatalf("received %d of %d; node stats %+v", len(got), n, node.Stats())
	}
	for i, f := range got {
		if !bytes.Equal(f[0:6], ph2.MAC[:]) || !bytes.Equal(f[6:12], ps2.MAC[:]) || f[22] != 63 ||
			string(f[42:45]) != fmt.Sprintf("%03d", i) || sum16(f[14:34], 0) != 0xffff {
			t.Fatalf("frame %d: %x", i, f[:45])
		}
	}
	// 50 kB at 10 Mbit/s takes 40 ms.
	if min := time.Duration(n*1000*8/rate*1e9) * 9 / 10; el < min {
		t.Errorf("took %v, less than the %v the port rate allows", el, min)
	}
	t.Logf("%d frames in %v; stats %+v", n, el, node.Stats())
}

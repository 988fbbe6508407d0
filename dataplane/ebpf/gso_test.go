package ebpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/wire"
)

// capture records the frames a device receives (after GRO), in the
// calling thread's network namespace.
type capture struct {
	fd     int
	mu     sync.Mutex
	frames [][]byte
	done   chan struct{}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (l *lab) capture(t testing.TB, ns, dev string) *capture {
	t.Helper()
	c := &capture{done: make(chan struct{})}
	err := l.in(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		c.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		// Big enough for a GRO-merged frame, so that one would show.
		_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		_ = unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
		return unix.Bind(c.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("capture on %s %s: %v", ns, dev, err)
	}
	stop := make(chan struct{})
	go func() {
		defer close(c.done)
		buf := make([]byte, 1<<17)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			c.mu.Lock()
			c.frames = append(c.frames, bytes.Clone(buf[:n]))
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-c.done; unix.Close(c.fd) })
	return c
}

func (c *capture) got() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.frames...)
}

// checkINT checks every captured TCP frame h1 -> h2 (10.0.1.2 -> 10.0.2.2,
// the watched direction) for INT-MD with hops hops and no more than mtu
// bytes of IP; it returns the number of frames, of those with payload and
// of full-sized frames without INT or with hops missing and the M bit set
// (those are allowed when full is set: non-GSO packets near the MTU's size
// have no room for INT).
func checkINT(t *testing.T, where string, frames [][]byte, hops, mtu int, full bool) (n, data, noRoom int) {
	t.Helper()
	pr := &wire.Parser{DSCP: 23, DSCPMask: 63}
	bad := 0
	for _, f := range frames {
		if len(f) < 34 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != wire.ProtoTCP ||
			!bytes.Equal(f[26:30], []byte{10, 0, 1, 2}) || !bytes.Equal(f[30:34], []byte{10, 0, 2, 2}) {
			continue
		}
		n++
		var p wire.Packet
		err := pr.Parse(f, &p)
		if err == nil && p.INT < 0 {
			if full && p.End-p.L3 == mtu {
				noRoom++
				continue
			}
			err = errNoINT
		}
		var st wire.MDStack
		if err == nil {
			_, st, err = wire.DecodeMD(f[p.INT:p.INT+p.INTLen], 0)
		}
		if err == nil && st.Count() != hops {
			err = errHops
			if full && st.Count() < hops && f[p.INT]&0x02 != 0 {
				// A non-GSO packet with room for the source's hop
				// only: the M bit tells why a hop is missing.
				noRoom++
				continue
			}
		}
		if err == nil && p.End-p.L3 > mtu {
			err = errTooBig
		}
		if err != nil {
			if bad++; bad <= 5 {
				t.Errorf("%s: frame of %d bytes: %v (%x)", where, len(f), err, f[:min(len(f), 80)])
			}
			continue
		}
		if p.End > p.Next {
			data++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d TCP frames h1->h2 without correct INT", where, bad, n)
	}
	return n, data, noRoom
}

type testErr string

func (e testErr) Error() string { return string(e) }

const (
	errNoINT  = testErr("no INT")
	errHops   = testErr("wrong hop count")
	errTooBig = testErr("larger than the MTU")
)

// TestGSO: a TCP stream h1 -> h2 with TSO/GSO on every veth (the default)
// and GRO on the routers' inter-router ingress; r1 sends the watched GSO
// super-packets through its detour veth, so every TCP segment on the
// r1-r2 and r2-r3 links carries INT (1 and 2 hops), none is merged by GRO
// at r2 or r3, segments fit the 1500-byte MTU with room for 8 hops, and h2
// receives the exact byte stream. iperf3 runs through it too.
//
// host-mtu-1400 gives the hosts' links the MTU differential the spec
// recommends (room for INT in every packet): every segment carries INT.
// With 1500 everywhere, r1 lowers the GSO size of super-packets so that
// their segments have room; a non-GSO packet of the full MTU (a single
// MSS) has none and leaves without INT, as the spec requires (counted as
// not initiated).
func TestGSO(t *testing.T) {
	t.Run("host-mtu-1400-gro", func(t *testing.T) { testGSO(t, 1400, true) })
	t.Run("mtu-1500", func(t *testing.T) { testGSO(t, 1500, false) })
}

// testGSO with gro set turns TSO off on the routers' links to the next
// router (generic GSO stays on): a veth hands packets to GRO on its peer
// only when it cannot send TSO super-packets itself.
func testGSO(t *testing.T, hostMTU int, gro bool) {
	e := newE2E(t, true)
	full := hostMTU == 1500
	if !full {
		// Not r3-h2: the kernel checks the egress MTU before the sink's
		// tc egress strips INT.
		m := strconv.Itoa(hostMTU)
		for _, x := range [][2]string{{"h1", "h1-r1"}, {"r1", "r1-h1"}, {"h2", "h2-r3"}} {
			e.exec(t, x[0], "ip", "link", "set", x[1], "mtu", m)
		}
	}
	// GRO on the routers' ingress from the previous router: it must not
	// merge INT segments.
	tso := func(f string) bool { return strings.HasPrefix(f, "tx-tcp") && strings.HasSuffix(f, "-segmentation") }
	for _, x := range [][4]string{{"r2", "r2-r1", "r1", "r1-r2"}, {"r3", "r3-r2", "r2", "r2-r3"}, {"r2", "r2-r3", "r3", "r3-r2"}} {
		if !gro {
			break
		}
		if err := e.in(x[0], func() error {
			return ethtool.SetFeatures(x[1], func(f string) bool { return f == "rx-gro" }, true)
		}); err != nil {
			t.Fatalf("GRO on %s: %v", x[1], err)
		}
		if err := e.in(x[2], func() error { return ethtool.SetFeatures(x[3], tso, false) }); err != nil {
			t.Fatalf("TSO off on %s: %v", x[3], err)
		}
	}
	// Offloads stay on where the stream starts, and the detour pair has
	// them off on its sending side.
	if err := e.in("h1", func() error {
		f, err := ethtool.ActiveFeatures("h1-r1")
		if err == nil && (!f["tx-tcp-segmentation"] || !f["tx-generic-segmentation"]) {
			t.Errorf("h1-r1 without TSO/GSO: %v", f)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.in("r1", func() error {
		f, err := ethtool.ActiveFeatures(e.r[0].gso.dev)
		if err == nil && (f["tx-tcp-segmentation"] || f["tx-checksum-ip-generic"]) {
			t.Errorf("%s: segmentation or checksum offload on: %v", e.r[0].gso.dev, f)
		}
		g, err2 := ethtool.ActiveFeatures(e.r[0].gso.peer)
		if err2 == nil && g["rx-gro"] {
			t.Errorf("%s: GRO on", e.r[0].gso.peer)
		}
		return cmpErr(err, err2)
	}); err != nil {
		t.Fatal(err)
	}
	// Control: GRO on r2-r3 merges the unwatched stream h2 -> h1, sent
	// segmented (h2 without TSO/GSO).
	if err := e.in("h2", func() error {
		return ethtool.SetFeatures("h2-r3", func(f string) bool { return strings.HasSuffix(f, "-segmentation") }, false)
	}); err != nil {
		t.Fatal(err)
	}
	c32 := e.capture(t, "r2", "r2-r3")
	c12 := e.capture(t, "r2", "r2-r1")
	c23 := e.capture(t, "r3", "r3-r2")

	var ln net.Listener
	if err := e.in("h2", func() error {
		var err error
		ln, err = net.Listen("tcp4", "10.0.2.2:9997")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
		_, _ = c.Write(data[:4<<20]) // the control stream
	}()
	var conn net.Conn
	if err := e.in("h1", func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", "10.0.2.2:9997", 3*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(data); err != nil {
		for i, d := range e.r {
			s, _ := d.Stats(context.Background())
			t.Logf("r%d: %+v drops %v sessions %v", i+1, s.Interfaces, s.Drops, s.IntSessions)
		}
		t.Logf("captured %d %d", len(c12.got()), len(c23.got()))
		for _, f := range c12.got()[:min(5, len(c12.got()))] {
			t.Logf("%d %x", len(f), f[:min(len(f), 80)])
		}
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	b := <-got
	back, _ := io.ReadAll(conn)
	conn.Close()
	merged := 0
	for _, f := range c32.got() {
		if len(f) > 1514 && bytes.Equal(f[26:30], []byte{10, 0, 2, 2}) {
			merged++
		}
	}
	t.Logf("control: %d bytes h2 -> h1, %d frames merged by GRO at r2-r3", len(back), merged)
	if gro && merged == 0 {
		t.Error("control: GRO at r2-r3 merged nothing: is GRO on for veth?")
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("h2 received %d bytes, not the %d sent", len(b), len(data))
	}
	time.Sleep(100 * time.Millisecond)
	n12, d12, f12 := checkINT(t, "r1->r2", c12.got(), 1, 1500, full)
	n23, d23, f23 := checkINT(t, "r2->r3", c23.got(), 2, 1500, full)
	gso := e.r[0].rawCounters(e.r[0].ifaces["r1-r2"].slot)[intdCounterC_GSO]
	t.Logf("TCP frames h1->h2: r1->r2 %d (%d with data, %d full-sized without INT), r2->r3 %d (%d, %d); GSO super-packets detoured at r1: %d",
		n12, d12, f12, n23, d23, f23, gso)
	// Full-MTU segments that TCP sent without GSO have no room for INT;
	// the spec says not to initiate (r1) or to set M instead of adding a
	// hop (r2). Each one must be accounted for by the dataplanes' own
	// counters, and they must stay a small minority of the stream.
	mbits := e.r[1].rawCounters(e.r[1].ifaces["r2-r3"].slot)[intdCounterC_MBIT]
	if f23 < f12 || uint64(f23-f12) != mbits || f23*10 > n23 {
		t.Errorf("full-sized frames without INT: %d of %d at r1->r2, %d of %d at r2->r3 (r2 set M on %d)", f12, n12, f23, n23, mbits)
	}
	if d12*1448 < len(data) || d23*1448 < len(data) {
		t.Errorf("too few data segments captured: %d, %d", d12, d23)
	}
	if gso == 0 {
		t.Error("no GSO super-packet went through the detour at r1")
	}
	st, _ := e.r[0].Stats(context.Background())
	for _, s := range st.IntSessions {
		if s.NotInitiated() != uint64(f12) {
			t.Errorf("r1: %d packets not initiated, %d without INT on the wire", s.NotInitiated(), f12)
		}
	}

	// iperf3 with INT on.
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Log("no iperf3: skipped")
		return
	}
	srv := exec.Command("ip", "netns", "exec", e.prefix+"h2", "iperf3", "-s", "-1", "-B", "10.0.2.2")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	before := len(c23.got())
	var out string
	for i := 0; i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		o, err := exec.Command("ip", "netns", "exec", e.prefix+"h1", "iperf3", "-c", "10.0.2.2", "-t", "1").CombinedOutput()
		if out = string(o); err == nil || !strings.Contains(out, "connect") {
			break
		}
	}
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3: %s", out)
	}
	frames := c23.got()[before:]
	n, d, f := checkINT(t, "iperf3 r2->r3", frames, 2, 1500, full)
	t.Logf("iperf3: %d TCP frames h1->h2 on r2->r3 (%d with data, %d full-sized without INT)\n%s", n, d, f, out[strings.LastIndex(out, "- - -"):])
	if d == 0 {
		t.Error("iperf3: no data segments captured")
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

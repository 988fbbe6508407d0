package ebpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv6"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// addIPv6 gives the lab's links IPv6 addresses and routes alongside the
// IPv4 ones:
//
//	h1 fd00:1::2 | fd00:1::1 r1 fd00:12::1 | fd00:12::2 r2 fd00:23::1 |
//	fd00:23::2 r3 fd00:2::1 | fd00:2::2 h2
func (l *lab) addIPv6(t testing.TB) {
	t.Helper()
	for _, a := range [][3]string{
		{"h1", "h1-r1", "fd00:1::2/64"}, {"r1", "r1-h1", "fd00:1::1/64"},
		{"r1", "r1-r2", "fd00:12::1/64"}, {"r2", "r2-r1", "fd00:12::2/64"},
		{"r2", "r2-r3", "fd00:23::1/64"}, {"r3", "r3-r2", "fd00:23::2/64"},
		{"r3", "r3-h2", "fd00:2::1/64"}, {"h2", "h2-r3", "fd00:2::2/64"},
	} {
		l.exec(t, a[0], "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0")
		l.exec(t, a[0], "ip", "-6", "addr", "add", a[2], "dev", a[1], "nodad")
	}
	l.exec(t, "h1", "ip", "-6", "route", "add", "default", "via", "fd00:1::1")
	l.exec(t, "h2", "ip", "-6", "route", "add", "default", "via", "fd00:2::1")
	l.exec(t, "r1", "ip", "-6", "route", "add", "default", "via", "fd00:12::2")
	l.exec(t, "r2", "ip", "-6", "route", "add", "fd00:1::/64", "via", "fd00:12::1")
	l.exec(t, "r2", "ip", "-6", "route", "add", "default", "via", "fd00:23::2")
	l.exec(t, "r3", "ip", "-6", "route", "add", "default", "via", "fd00:23::1")
	for _, r := range []string{"r1", "r2", "r3"} {
		l.exec(t, r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	}
}

// v6Config is routerConfig with the source watching fd00:1::/64 to
// fd00:2::/64.
func v6Config(cfg string) string {
	cfg = strings.Replace(cfg, `"10.0.1.0/24"`, `"fd00:1::/64"`, 1)
	return strings.Replace(cfg, `"10.0.2.0/24"`, `"fd00:2::/64"`, 1)
}

// TestEndToEndIPv6: UDP and TCP over IPv6 from h1 reach h2 intact through
// three kernel-forwarding routers: INT inserted at r1 (watchlist on IPv6
// prefixes), extended at r2, stripped at r3, whose reports carry the
// 3-hop path and r3's hop latency; then a routing miss at r2 gives an IPv6
// drop report.
func TestEndToEndIPv6(t *testing.T) {
	l := newLab(t)
	l.addIPv6(t)
	rec2, rec3 := &recorder{}, &recorder{}
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, v6Config(routerConfig(1, "", true)))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, rec2, strings.Replace(routerConfig(2, "", false),
		`"int-transit": true`, `"int-transit": true, "drop-report": true`, 1))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, rec3, routerConfig(3, "r3-h2", false))

	var h2udp *net.UDPConn
	if err := l.in("h2", func() (err error) {
		h2udp, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("fd00:2::2"), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer h2udp.Close()
	var h1udp *net.UDPConn
	if err := l.in("h1", func() (err error) {
		h1udp, err = net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.ParseIP("fd00:2::2"), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer h1udp.Close()
	msg := []byte("hello over INT, UDP on IPv6")
	buf := make([]byte, 2048)
	var n int
	var err error
	for i := 0; i < 5; i++ { // the first datagrams may wait for neighbour discovery
		if _, err := h1udp.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = h2udp.SetReadDeadline(time.Now().Add(time.Second))
		if n, err = h2udp.Read(buf); err == nil {
			break
		}
	}
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("UDP at h2: %q, %v", buf[:n], err)
	}

	l.tcpEcho(t, "tcp6", "[fd00:2::2]:9998", r)
	var cnt [3]uint64
	for i, d := range r {
		s, _ := d.Stats(context.Background())
		cnt[i] = [3]uint64{s.Node.IntInserted, s.Node.IntTransited, s.Node.IntStripped}[i]
	}
	if cnt[0] == 0 || cnt[1] == 0 || cnt[2] == 0 {
		t.Fatalf("inserted at r1 %d, transited at r2 %d, stripped at r3 %d", cnt[0], cnt[1], cnt[2])
	}
	t.Logf("inserted %d transited %d stripped %d, GSO super-packets detoured at r1 %d", cnt[0], cnt[1], cnt[2],
		r[0].rawCounters(0)[intdCounterC_GSO]+r[0].rawCounters(1)[intdCounterC_GSO]+r[0].rawCounters(2)[intdCounterC_GSO])

	// r3's reports: IPv6 frames with the path r3, r2, r1 and r3's latency.
	found := false
	for _, ev := range rec3.wait(t, 1) {
		if ev.Kind != report.KindFlow || ev.INT < 0 || !ev.Flow.Src.Is6() {
			continue
		}
		path, err := nodePath(ev.Packet, ev.INT, ev.INTLen)
		if err != nil {
			continue
		}
		if len(path) == 3 && path[0] == 3 && path[1] == 2 && path[2] == 1 && ev.Hop.Valid&spec.InstHopLatency != 0 {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("no IPv6 report with path 3, 2, 1 and hop latency at r3: %d events", len(rec3.wait(t, 0)))
	}

	// Drop reports of the IPv6 INT packet at r2: hop limit expiry (26),
	// then a routing miss (29).
	drop := func(reason uint8) *report.Event {
		for _, ev := range rec2.wait(t, 0) {
			if ev.Kind == report.KindDrop && ev.Flow.Src.Is6() && ev.DropReason == reason {
				return &ev
			}
		}
		return nil
	}
	wait := func(what string, reason uint8) {
		t.Helper()
		for end := time.Now().Add(3 * time.Second); drop(reason) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("no IPv6 %s drop report at r2", what)
			}
			_, _ = h1udp.Write(msg)
		}
		if ev := drop(reason); ev.Flow.DstPort != 9999 || ev.Unwatched || be16(ev.Packet[12:]) != wire.EtherTypeIPv6 {
			t.Errorf("r2 %s drop report: flow %v unwatched %v %x", what, ev.Flow, ev.Unwatched, ev.Packet)
		}
	}
	if err := ipv6.NewConn(h1udp).SetHopLimit(2); err != nil { // expires at r2
		t.Fatal(err)
	}
	wait("hop limit", 26)
	_ = ipv6.NewConn(h1udp).SetHopLimit(64)
	l.exec(t, "r2", "ip", "-6", "route", "del", "default")
	wait("routing miss", 29)
}

// TestPrefixWords: watchlist prefixes as the BPF program compares them,
// 16-byte addresses with IPv4 as ::ffff:a.b.c.d, and the entry's family.
func TestPrefixWords(t *testing.T) {
	words := func(b [16]byte) (w [4]uint32) {
		for i := range w {
			w[i] = binary.NativeEndian.Uint32(b[4*i:])
		}
		return w
	}
	for _, c := range []struct {
		p       string
		v, m    [16]byte
		matches []string
		not     []string
	}{
		{"10.0.1.0/24", [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 1}, [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			[]string{"10.0.1.7"}, []string{"10.0.2.7", "::a00:107", "::ffff:a00:207"}},
		{"0.0.0.0/0", [16]byte{10: 0xff, 11: 0xff}, [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			[]string{"1.2.3.4"}, []string{"2001:db8::1"}},
		{"2001:db8:1::/52", [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1}, [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0},
			[]string{"2001:db8:1:fff::1"}, []string{"2001:db8:1:1000::1", "10.0.0.1"}},
	} {
		v, m := prefixWords(netip.MustParsePrefix(c.p))
		if v != words(c.v) || m != words(c.m) {
			t.Errorf("%s: %08x/%08x, want %08x/%08x", c.p, v, m, words(c.v), words(c.m))
		}
		match := func(s string) bool {
			a := words(netip.MustParseAddr(s).As16())
			for i := range a {
				if (a[i]^v[i])&m[i] != 0 {
					return false
				}
			}
			return true
		}
		for _, s := range c.matches {
			if !match(s) {
				t.Errorf("%s does not match %s", c.p, s)
			}
		}
		for _, s := range c.not {
			if match(s) {
				t.Errorf("%s matches %s", c.p, s)
			}
		}
	}
	v4, v6 := netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")
	for _, c := range []struct {
		src, dst netip.Prefix
		fam      uint8
	}{{netip.Prefix{}, netip.Prefix{}, 0}, {v4, netip.Prefix{}, 4}, {netip.Prefix{}, v6, 6}, {v6, v6, 6}, {v4, v6, 0xff}} {
		if f := prefixFamily(c.src, c.dst); f != c.fam {
			t.Errorf("family of %v, %v: %d, want %d", c.src, c.dst, f, c.fam)
		}
	}
}

//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/internal/logtest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// link creates a veth pair a (in namespace na, address addrA if not
// empty) - b (in nb, addrB), both up, and waits for their carrier.
func link(t *testing.T, na netns.NsHandle, a, addrA string, nb netns.NsHandle, b, addrB string) {
	t.Helper()
	ha, err := netlink.NewHandleAt(na)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(nb)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, MTU: 1500}, PeerName: b,
		PeerNamespace: netlink.NsFd(nb)}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h          *netlink.Handle
		name, addr string
	}{{ha, a, addrA}, {hb, b, addrB}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		if x.addr != "" {
			ad, err := netlink.ParseAddr(x.addr)
			if err != nil {
				t.Fatal(err)
			}
			if ad.IP.To4() == nil {
				ad.Flags = unix.IFA_F_NODAD // usable at once
			}
			if err := x.h.AddrAdd(l, ad); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []struct {
		h    *netlink.Handle
		name string
	}{{ha, a}, {hb, b}} {
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			l, err := x.h.LinkByName(x.name)
			if err != nil {
				t.Fatal(err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s: operstate %v", x.name, l.Attrs().OperState)
			}
		}
	}
}

func route(t *testing.T, ns netns.NsHandle, dst, gw string) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RouteAdd(&netlink.Route{Dst: d, Gw: net.ParseIP(gw)}); err != nil {
		t.Fatalf("route %s via %s: %v", dst, gw, err)
	}
}

// sysctl writes a sysctl in namespace ns.
func sysctl(t *testing.T, ns netns.NsHandle, kv ...string) {
	t.Helper()
	inNS(t, ns, func() error {
		for _, s := range kv {
			k, v, _ := strings.Cut(s, "=")
			if err := writeProc("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func writeProc(path, v string) error { return os.WriteFile(path, []byte(v), 0o644) }

// startDataplane runs New in ns on ifaces and Run until the test ends;
// log lines go to the returned buffer.
func startDataplane(t *testing.T, ns netns.NsHandle, ifaces ...string) (*Dataplane, *logtest.Buffer) {
	t.Helper()
	return startDataplaneConfig(t, ns, Config{Interfaces: ifaces})
}

// startDataplaneConfig is startDataplane with cfg (named "r", logging to
// the returned buffer).
func startDataplaneConfig(t *testing.T, ns netns.NsHandle, cfg Config) (*Dataplane, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	cfg.Name, cfg.Logger = "r", slog.New(slog.NewTextHandler(logs, nil))
	var d *Dataplane
	inNS(t, ns, func() (err error) {
		d, err = New(cfg)
		return err
	})
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	// Forwarding has started once Run has taken the dataplane (a test
	// that ends at once must not close it before).
	for started := false; !started; time.Sleep(time.Millisecond) {
		d.mu.Lock()
		started = d.running != nil
		d.mu.Unlock()
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("dataplane log:\n%s", logs)
		}
	})
	return d, logs
}

// udpSink receives datagrams on addr in ns and counts them by payload.
type udpSink struct {
	mu  sync.Mutex
	got map[string]int
}

func listenUDP(t *testing.T, ns netns.NsHandle, network, addr string) *udpSink {
	t.Helper()
	var c *net.UDPConn
	inNS(t, ns, func() error {
		a, err := net.ResolveUDPAddr(network, addr)
		if err != nil {
			return err
		}
		c, err = net.ListenUDP(network, a)
		return err
	})
	t.Cleanup(func() { c.Close() })
	s := &udpSink{got: map[string]int{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got[string(buf[:n])]++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *udpSink) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[p]
}

func (s *udpSink) total() (n, dup int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.got {
		n += c
		dup += c - 1
	}
	return n, dup
}

func sendUDP(t *testing.T, ns netns.NsHandle, network, addr string, payloads ...string) {
	t.Helper()
	inNS(t, ns, func() error {
		c, err := net.Dial(network, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, p := range payloads {
			if _, err := c.Write([]byte(p)); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
}

func rules(t *testing.T, ns netns.NsHandle) string {
	t.Helper()
	var out string
	inNS(t, ns, func() error {
		for _, fam := range []string{"-4", "-6"} {
			b, err := exec.Command("ip", fam, "rule", "show").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ip rule: %v: %s", err, b)
			}
			out += string(b)
		}
		return nil
	})
	return out
}

func gro(t *testing.T, ns netns.NsHandle, name string) bool {
	t.Helper()
	var on bool
	inNS(t, ns, func() (err error) { on, err = ethtool.GetOffload(name, ethtool.GRO); return err })
	return on
}

// TestForwardsOnce runs the dataplane on a router whose kernel forwards
// (net.ipv4.ip_forward=1, net.ipv6.conf.all.forwarding=1) and checks
// that every IPv4 and IPv6 datagram h1 sends arrives at h2 exactly once -
// the kernel gets a copy of every frame and would forward it too -, that
// the host settings changed are logged, and that Close restores them.
func TestForwardsOnce(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	r, _ := testNS(t)
	h1, _ := testNS(t)
	h2, _ := testNS(t)
	link(t, h1, "e1", "10.1.0.1/24", r, "s1", "10.1.0.254/24")
	link(t, h2, "e2", "10.2.0.1/24", r, "s2", "10.2.0.254/24")
	ipv6 := func(ns netns.NsHandle, dev, cidr string) {
		inNS(t, ns, func() error {
			l, err := netlink.LinkByName(dev)
			if err != nil {
				return err
			}
			a, _ := netlink.ParseAddr(cidr)
			a.Flags = unix.IFA_F_NODAD
			return netlink.AddrAdd(l, a)
		})
	}
	ipv6(h1, "e1", "fd01::1/64")
	ipv6(r, "s1", "fd01::fe/64")
	ipv6(r, "s2", "fd02::fe/64")
	ipv6(h2, "e2", "fd02::1/64")
	route(t, h1, "0.0.0.0/0", "10.1.0.254")
	route(t, h2, "0.0.0.0/0", "10.2.0.254")
	route(t, h1, "::/0", "fd01::fe")
	route(t, h2, "::/0", "fd02::fe")
	sysctl(t, r, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	// GRO on, as on a NIC, to see it turned off and back on.
	for _, p := range []string{"s1", "s2"} {
		inNS(t, r, func() error { return ethtool.SetOffload(p, true, ethtool.GRO) })
	}
	before := rules(t, r)

	d, logs := startDataplane(t, r, "s1", "s2")
	for _, p := range []string{"s1", "s2"} {
		if gro(t, r, p) {
			t.Errorf("%s: GRO still on while the dataplane runs", p)
		}
		for _, want := range []string{
			"setting=generic-receive-offload was=on now=off",
			`setting="ipv4 rule" added="pref 1 iif ` + p + ` proto 29 blackhole"`,
			`setting="ipv6 rule" added="pref 1 iif ` + p + ` proto 29 blackhole"`} {
			if !strings.Contains(logs.String(), "interface="+p+" "+want) {
				t.Errorf("log does not say %s for %s:\n%s", want, p, logs)
			}
		}
	}
	if rs := rules(t, r); !strings.Contains(rs, "1:\tfrom all iif s1 blackhole proto 29") {
		t.Errorf("rules while running:\n%s", rs)
	}

	for _, fam := range []struct{ network, dst string }{{"udp4", "10.2.0.1:5000"}, {"udp6", "[fd02::1]:5000"}} {
		sink := listenUDP(t, h2, fam.network, fam.dst)
		var ps []string
		for i := range 50 {
			ps = append(ps, fmt.Sprintf("%s datagram %d", fam.network, i))
		}
		// The first datagrams wait in the node while r resolves h2.
		sendUDP(t, h1, fam.network, fam.dst, ps...)
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, _ := sink.total()
			if n >= len(ps) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // room for duplicates to arrive
		n, dup := sink.total()
		for _, p := range ps {
			if c := sink.count(p); c != 1 {
				t.Errorf("%s: %q arrived %d times", fam.network, p, c)
				break
			}
		}
		t.Logf("%s: %d datagrams sent, %d received, %d duplicates; node %+v", fam.network, len(ps), n, dup, d.Node().Stats())
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if after := rules(t, r); after != before {
		t.Errorf("rules after Close:\n%s\nwant as before:\n%s", after, before)
	}
	for _, p := range []string{"s1", "s2"} {
		if !gro(t, r, p) {
			t.Errorf("%s: GRO not restored", p)
		}
		if !strings.Contains(logs.String(), `msg="host setting restored" interface=`+p+` setting=generic-receive-offload now=on`) {
			t.Errorf("restoring GRO on %s not logged:\n%s", p, logs)
		}
	}
}

// TestUnresolvedNeighbour sends, through the dataplane, a datagram to a
// host on a connected subnet the router has no neighbour entry for, and
// one to an address nobody answers for. The router has a default route
// towards another router, which the switch used to take for both (the
// routers then sent them back and forth until the TTL ran out). The first
// must be held until the kernel resolves the host, then delivered; the
// second dropped after HoldTimeout and counted as a routing miss; neither
// may leave towards the default gateway.
func TestUnresolvedNeighbour(t *testing.T) {
	r, hr := testNS(t)
	h2, _ := testNS(t)
	gw, _ := testNS(t)
	addVeth(t, hr, "h1", "s1") // h1 injects frames into the port s1
	link(t, h2, "e2", "10.2.0.2/24", r, "s2", "10.2.0.254/24")
	link(t, gw, "e3", "10.3.0.1/24", r, "s3", "10.3.0.254/24")
	route(t, r, "0.0.0.0/0", "10.3.0.1")
	var inj *Port
	inNS(t, r, func() (err error) { inj, err = Open("h1", PortConfig{}); return err })
	defer inj.Close()
	var capt *Port
	inNS(t, gw, func() (err error) { capt, err = Open("e3", PortConfig{Promiscuous: true}); return err })
	defer capt.Close()
	sink := listenUDP(t, h2, "udp4", "10.2.0.2:5000")

	d, _ := startDataplane(t, r, "s1", "s2", "s3")
	// The default route is in the switch once the gateway is resolved.
	for end := time.Now().Add(5 * time.Second); d.Routes() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("default route not installed")
		}
	}
	var s1 [6]byte
	copy(s1[:], d.Ports()[0].MAC[:])
	send := func(dst, payload string) {
		inj.Transmit(udpFrame(s1, inj.MAC, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr(dst), []byte(payload)))
		inj.Flush()
	}
	send("10.2.0.2", "to a host not yet resolved")
	send("10.2.0.99", "to nobody")
	for end := time.Now().Add(2 * time.Second); sink.count("to a host not yet resolved") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not delivered to 10.2.0.2; node %+v", d.Node().Stats())
		}
	}
	time.Sleep(HoldTimeout + 500*time.Millisecond)
	st, err := d.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns := d.Node().Stats()
	if ns[0].HeldFrames != 2 || ns[0].HoldDrops != 1 || st.Drops[spec.DropRoutingMiss] != 1 ||
		st.Interfaces["s1"].DroppedPackets != 1 || st.Node.InPackets != 2 {
		t.Errorf("held %d, dropped %d (want 2, 1); routing misses %d, s1 dropped %d, in %d (want 1, 1, 2)",
			ns[0].HeldFrames, ns[0].HoldDrops, st.Drops[spec.DropRoutingMiss], st.Interfaces["s1"].DroppedPackets, st.Node.InPackets)
	}
	if n := sink.count("to a host not yet resolved"); n != 1 {
		t.Errorf("delivered %d times", n)
	}
	for {
		k, err := capt.Read()
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			f := capt.Frame(i)
			if len(f) >= 34 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[30] == 10 && f[31] == 2 {
				t.Errorf("a datagram to %v went to the default gateway", net.IP(f[30:34]))
			}
		}
		if k == 0 {
			break
		}
	}
}

// postcardConfig makes every UDP packet through the switch a postcard
// with the hop latency.
const postcardConfig = `{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "int-transit": true, "postcard": true}},
	"int-sessions": {"int-session": [{"name": "pc", "config": {"name": "pc", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"], "remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0"},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "c"}}]},
	"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10},
		"match": {"config": {"destination-prefix": "10.2.0.0/16"}},
		"actions": {"config": {"flow-op": "POSTCARD", "int-session": "pc", "sample-percent": 100}}}]}}
}}`

// recorder keeps the hop latency of every report event.
type recorder struct {
	mu  sync.Mutex
	lat []uint32
}

func (r *recorder) Report(ev *report.Event) {
	r.mu.Lock()
	r.lat = append(r.lat, ev.Hop.HopLatency)
	r.mu.Unlock()
}

// TestHopLatencyFromKernel checks that a frame's hop latency counts from
// the kernel's receive timestamp: frames that waited 100 ms in the socket
// before the node read them report at least that.
func TestHopLatencyFromKernel(t *testing.T) {
	ph1, ph2, ps1, ps2 := twoLinks(t, PortConfig{})
	rec := &recorder{}
	sw, err := soft.New(soft.Config{Name: "s", Reporter: rec, Ports: []soft.PortConfig{
		{Name: "s1", MAC: ps1.MAC}, {Name: "s2", MAC: ps2.MAC}},
		Routes: []soft.Route{{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Ports: []string{"s2"}, NextHopMAC: ph2.MAC}}})
	if err != nil {
		t.Fatal(err)
	}
	applyConfig(t, sw, postcardConfig)
	node, err := NewNode(sw, []*Port{ps1, ps2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel turns receive timestamping on from a work queue after
	// the first socket asks: until then frames are stamped when read.
	for end := time.Now().Add(5 * time.Second); ; {
		ph1.Transmit(udpFrame(ps1.MAC, ph1.MAC, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.9.0.1"), []byte("probe")))
		ph1.Flush()
		time.Sleep(20 * time.Millisecond)
		got := readAll(t, ps1, 1, time.Second)
		if len(got) == 1 && ps1.RxTime(0) > 0 && time.Now().UnixNano()-ps1.RxTime(0) >= int64(15*time.Millisecond) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no kernel receive timestamps")
		}
	}
	const n, wait = 5, 100 * time.Millisecond
	for i := range n {
		ph1.Transmit(udpFrame(ps1.MAC, ph1.MAC, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1"),
			[]byte(fmt.Sprintf("frame %d", i))))
	}
	ph1.Flush()
	time.Sleep(wait) // the frames wait in s1's socket
	defer runNode(t, node)()
	if got := readAll(t, ph2, n, 5*time.Second); len(got) != n {
		t.Fatalf("forwarded %d of %d", len(got), n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lat) != n {
		t.Fatalf("%d postcards, want %d", len(rec.lat), n)
	}
	for i, l := range rec.lat {
		if time.Duration(l) < wait || time.Duration(l) > 10*wait {
			t.Errorf("frame %d: hop latency %v, want at least the %v it waited in the kernel", i, time.Duration(l), wait)
		}
	}
	t.Logf("hop latencies (ns) after %v in the socket: %v", wait, rec.lat)
}

// TestConfigQueues: Config.Queues gives every port that many egress
// queues, each with its queue reports; one more is refused.
func TestConfigQueues(t *testing.T) {
	r, _ := testNS(t)
	h1, _ := testNS(t)
	h2, _ := testNS(t)
	link(t, h1, "e1", "10.1.0.1/24", r, "s1", "10.1.0.254/24")
	link(t, h2, "e2", "10.2.0.1/24", r, "s2", "10.2.0.254/24")
	d, _ := startDataplaneConfig(t, r, Config{Interfaces: []string{"s1", "s2"}, Queues: 4})
	dt := sai.DefaultDTelAttrs()
	dt.SwitchID, dt.QueueReportEnable = 1, true
	if _, err := d.Create(dt); err != nil {
		t.Fatal(err)
	}
	q := sai.QueueReportAttrs{Port: "s2", Queue: 3, LatencyThreshold: time.Millisecond, BreachQuota: 10}
	if _, err := d.Create(q); err != nil {
		t.Errorf("queue 3 of 4: %v", err)
	}
	q.Queue = 4
	if _, err := d.Create(q); err == nil {
		t.Error("queue 4 of 4 accepted")
	}
	st, err := d.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Queues["s2"]); n != 4 {
		t.Errorf("s2 has %d queues in its state, want 4", n)
	}
}

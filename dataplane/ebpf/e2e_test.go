package ebpf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/netnsrun"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
)

// lab is h1 - r1 - r2 - r3 - h2 in network namespaces, with a collector
// namespace behind r3; the routers forward with the kernel.
//
//	h1 10.0.1.2 | 10.0.1.1 r1 10.0.12.1 | 10.0.12.2 r2 10.0.23.1 |
//	10.0.23.2 r3 10.0.2.1 | 10.0.2.2 h2      r3 10.0.9.1 | 10.0.9.2 col
type lab struct {
	prefix string
	ns     map[string]netns.NsHandle
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newLab(t testing.TB) *lab {
	t.Helper()
	needRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	l := &lab{prefix: fmt.Sprintf("intd%d-", os.Getpid()%100000), ns: map[string]netns.NsHandle{}}
	names := []string{"h1", "r1", "r2", "r3", "h2", "col"}
	t.Cleanup(func() {
		for _, n := range names {
			if h, ok := l.ns[n]; ok {
				h.Close()
			}
			_ = exec.Command("ip", "netns", "del", l.prefix+n).Run()
		}
	})
	for _, n := range names {
		ipCmd(t, "netns", "add", l.prefix+n)
		h, err := netns.GetFromName(l.prefix + n)
		if err != nil {
			t.Fatal(err)
		}
		l.ns[n] = h
		l.exec(t, n, "ip", "link", "set", "lo", "up")
	}
	link := func(a, ia, addrA, b, ib, addrB string) {
		ipCmd(t, "link", "add", ia, "netns", l.prefix+a, "type", "veth", "peer", "name", ib, "netns", l.prefix+b)
		l.exec(t, a, "ip", "addr", "add", addrA, "dev", ia)
		l.exec(t, b, "ip", "addr", "add", addrB, "dev", ib)
		l.exec(t, a, "ip", "link", "set", ia, "up")
		l.exec(t, b, "ip", "link", "set", ib, "up")
	}
	link("h1", "h1-r1", "10.0.1.2/24", "r1", "r1-h1", "10.0.1.1/24")
	link("r1", "r1-r2", "10.0.12.1/24", "r2", "r2-r1", "10.0.12.2/24")
	link("r2", "r2-r3", "10.0.23.1/24", "r3", "r3-r2", "10.0.23.2/24")
	link("r3", "r3-h2", "10.0.2.1/24", "h2", "h2-r3", "10.0.2.2/24")
	link("r3", "r3-col", "10.0.9.1/24", "col", "col-r3", "10.0.9.2/24")
	l.exec(t, "h1", "ip", "route", "add", "default", "via", "10.0.1.1")
	l.exec(t, "h2", "ip", "route", "add", "default", "via", "10.0.2.1")
	l.exec(t, "col", "ip", "route", "add", "default", "via", "10.0.9.1")
	l.exec(t, "r1", "ip", "route", "add", "default", "via", "10.0.12.2")
	l.exec(t, "r2", "ip", "route", "add", "10.0.1.0/24", "via", "10.0.12.1")
	l.exec(t, "r2", "ip", "route", "add", "default", "via", "10.0.23.2")
	l.exec(t, "r3", "ip", "route", "add", "default", "via", "10.0.23.1")
	for _, r := range []string{"r1", "r2", "r3"} {
		l.exec(t, r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	}
	return l
}

// exec runs a command inside a namespace.
func (l *lab) exec(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.prefix + ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// in runs f on a thread inside namespace ns: sockets and netlink handles
// made there stay in ns.
func (l *lab) in(ns string, f func() error) error { return netnsrun.Run(l.ns[ns], f) }

// router starts a Dataplane in namespace ns on its interfaces, configured
// through the dtel orchestrator from a JSON configuration.
func (l *lab) router(t testing.TB, ns string, ifs []string, rep report.Reporter, cfgJSON string) *Dataplane {
	t.Helper()
	var d *Dataplane
	err := l.in(ns, func() error {
		var cfg Config
		for _, i := range ifs {
			cfg.Interfaces = append(cfg.Interfaces, Interface{Name: i})
		}
		cfg.Reporter = rep
		var err error
		d, err = New(cfg)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := l.in(ns, d.Close); err != nil {
			t.Errorf("%s: close: %v", ns, err)
		}
	})
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(cfgJSON), dev); err != nil {
		t.Fatalf("%s: config: %v", ns, err)
	}
	if err := dtel.New(d).Apply(context.Background(), dev); err != nil {
		t.Fatalf("%s: apply: %v", ns, err)
	}
	return d
}

func routerConfig(node int, sink string, source bool) string {
	return routerConfigSampled(node, sink, source, 0)
}

// routerConfigSampled is routerConfig with the source's watchlist entry
// acting on one packet per flow per intervalUs microseconds (0: all).
func routerConfigSampled(node int, sink string, source bool, intervalUs int) string {
	return routerConfigOp(node, sink, source, intervalUs, "INT")
}

// routerConfigOp is routerConfigSampled with the watchlist entry's flow op
// (INT or POSTCARD).
func routerConfigOp(node int, sink string, source bool, intervalUs int, flowOp string) string {
	postcard := ""
	if flowOp == "POSTCARD" {
		postcard = `, "postcard": true`
	}
	ifs := ""
	if sink != "" {
		ifs = fmt.Sprintf(`"interfaces": {"interface": [{"name": %q, "config": {"name": %q, "int-sink": true}}]},`, sink, sink)
	}
	wl := ""
	if source {
		wl = `"watchlist": {"entries": {"entry": [{"sequence-id": 10,
			"config": {"sequence-id": 10},
			"match": {"config": {"source-prefix": "10.0.1.0/24", "destination-prefix": "10.0.2.0/24"}},
			"actions": {"config": {"flow-op": "` + flowOp + `", "int-session": "default", "sample-percent": 100, "packet-interval": ` +
			strconv.Itoa(intervalUs) + `}}}]}},`
	}
	return fmt.Sprintf(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true, "latency-sensitivity": 8%s}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63, "vxlan-gpe-next-protocol": 0, "geneve-option-class": 0}},
	%s %s
	"int-sessions": {"int-session": [{"name": "default", "config": {"name": "default", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"],
		"remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "collector",
		"config": {"name": "collector", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0", "truncate-size": 512},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "collector"}}]}
}}`, node, postcard, ifs, wl)
}

// collector receives telemetry reports in the collector namespace and
// records the node-id path of each INT-MD report.
type collector struct {
	mu    sync.Mutex
	paths [][]uint32
	conn  *net.UDPConn
	pr    *wire.Parser // how reported frames carry INT; nil: DSCP 23/63
}

func (c *collector) run() {
	buf := make([]byte, 9000)
	pr := c.pr
	if pr == nil {
		pr = &wire.Parser{DSCP: 23, DSCPMask: 63, AllowTruncated: true}
	}
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			return
		}
		paths := wiretest.ReportPaths(buf[:n], pr)
		c.mu.Lock()
		c.paths = append(c.paths, paths...)
		c.mu.Unlock()
	}
}

func (c *collector) got() [][]uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]uint32(nil), c.paths...)
}

// e2e is the running lab with INT configured on r1 (source), r2 (transit)
// and r3 (sink towards h2, reports to the collector).
type e2e struct {
	*lab
	r    [3]*Dataplane
	col  *collector
	pipe *report.Pipeline
}

func newE2E(t testing.TB, intOn bool) *e2e {
	return newE2ESampled(t, intOn, 0)
}

// newE2ESampled is newE2E with r1 instrumenting one packet per flow per
// intervalUs microseconds (0: every packet).
func newE2ESampled(t testing.TB, intOn bool, intervalUs int) *e2e {
	return newE2EMode(t, intOn, intervalUs, false, 0)
}

// newE2EMode is newE2ESampled, with INT-XD postcards from every router
// instead of INT-MD when postcards is set, and the flow report filter's
// hop-latency threshold (ns) when not 0.
func newE2EMode(t testing.TB, intOn bool, intervalUs int, postcards bool, latThreshold int) *e2e {
	l := newLab(t)
	e := &e2e{lab: l, col: &collector{}}
	l.listen(t, e.col)
	if !intOn {
		return e
	}
	pipe := l.r3Pipeline(t)
	e.pipe = pipe
	filter := func(cfg string) string {
		if latThreshold == 0 {
			return cfg
		}
		return strings.Replace(cfg, `"intd-int:int": {`, fmt.Sprintf(`"intd-int:int": {
	"flow-report-filter": {"config": {"hop-latency-threshold": %d}},`, latThreshold), 1)
	}
	if postcards {
		// INT-XD: every router watches the flow and sends postcards.
		e.r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, pipe, filter(routerConfigOp(1, "", true, intervalUs, "POSTCARD")))
		e.r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, pipe, filter(routerConfigOp(2, "", true, intervalUs, "POSTCARD")))
		e.r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe, filter(routerConfigOp(3, "", true, intervalUs, "POSTCARD")))
		return e
	}
	e.r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, filter(routerConfigSampled(1, "", true, intervalUs)))
	e.r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, filter(routerConfig(2, "", false)))
	e.r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe, filter(routerConfig(3, "r3-h2", false)))
	return e
}

// listen has c receive reports in the collector namespace.
func (l *lab) listen(t testing.TB, c *collector) {
	t.Helper()
	if err := l.in("col", func() error {
		var err error
		c.conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 2), Port: 32766})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.conn.Close() })
	go c.run()
}

// r3Pipeline is a report pipeline whose reports leave from a socket in
// r3's namespace.
func (l *lab) r3Pipeline(t testing.TB) *report.Pipeline {
	t.Helper()
	var send *net.UDPConn
	if err := l.in("r3", func() error {
		var err error
		send, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	return sendingPipeline(t, send)
}

// sendingPipeline is a report pipeline whose reports leave from send.
func sendingPipeline(t testing.TB, send *net.UDPConn) *report.Pipeline {
	t.Helper()
	pipe, err := report.New(report.Config{}, report.Options{Sender: report.SenderFunc(func(p *report.Packet) error {
		_, err := send.WriteToUDPAddrPort(p.Payload, p.Dst)
		return err
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pipe.Close() })
	return pipe
}

// tcpEcho sends 1 MiB from h1 to an echo server listening on addr at h2
// (network tcp4 or tcp6) and fails unless it comes back byte for byte,
// logging the routers' counters then.
func (l *lab) tcpEcho(t testing.TB, network, addr string, routers [3]*Dataplane) {
	t.Helper()
	var ln net.Listener
	if err := l.in("h2", func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	var conn net.Conn
	if err := l.in("h1", func() (err error) {
		conn, err = net.DialTimeout(network, addr, 3*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = conn.Write(data) }()
	back := make([]byte, len(data))
	if _, err := io.ReadFull(conn, back); err != nil || !bytes.Equal(back, data) {
		for i, d := range routers {
			s, _ := d.Stats(context.Background())
			t.Logf("r%d: %+v gso %d drops %v", i+1, s.Node, d.rawCounters(0)[intdCounterC_GSO]+d.rawCounters(1)[intdCounterC_GSO]+d.rawCounters(2)[intdCounterC_GSO], s.Drops)
		}
		t.Fatalf("TCP echo over %s: %v (equal %v)", network, err, bytes.Equal(back, data))
	}
}

// ping sends an ICMP echo request from h1 to h2 and waits for the reply.
func (e *e2e) ping(t testing.TB) {
	t.Helper()
	var c *icmp.PacketConn
	if err := e.in("h1", func() error {
		var err error
		c, err = icmp.ListenPacket("ip4:icmp", "10.0.1.2")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for seq := 1; seq <= 2; seq++ {
		m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x1d, Seq: seq, Data: []byte("intd ping")}}
		b, _ := m.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: net.IPv4(10, 0, 2, 2)}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1500)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				t.Fatalf("ping %d: %v", seq, err)
			}
			r, err := icmp.ParseMessage(1, buf[:n])
			if err == nil && r.Type == ipv4.ICMPTypeEchoReply {
				if e, ok := r.Body.(*icmp.Echo); ok && e.Seq == seq && string(e.Data) == "intd ping" {
					break
				}
			}
		}
	}
}

// TestEndToEnd: ping, UDP and TCP from h1 reach h2 intact through three
// kernel-forwarding routers running the eBPF dataplane; INT is inserted at
// r1, extended at r2, stripped at r3, and the collector gets reports with
// the 3-hop path.
func TestEndToEnd(t *testing.T) {
	e := newE2E(t, true)
	e.ping(t)

	// UDP: the payload arrives unchanged. r2 transits every copy with
	// intd_transit (IPv4, DSCP-marked, a UDP header), r3 strips every
	// one with intd_sink.
	e.udpOnce(t, "udp4", "10.0.2.2:9999", []byte("hello over INT, UDP"))
	// r1 gives INT with intd_source to every datagram of a flow but its
	// first (classify's), when the checksum is complete as it arrives, as
	// from a NIC (h1's own sockets leave it to the device).
	r1 := e.r[0].counterSum()
	e.udpRaw(t, 10)
	r1n, r2, r3 := e.r[0].counterSum(), e.r[1].counterSum(), e.r[2].counterSum()
	ins, fast := r1n[intdCounterC_INSERTED]-r1[intdCounterC_INSERTED], r1n[intdCounterC_FAST_SOURCE]-r1[intdCounterC_FAST_SOURCE]
	if ins != 10 || fast != ins-1 {
		t.Errorf("r1, UDP: intd_source gave INT to %d of %d packets, want all of 10 but the first", fast, ins)
	}
	if tr, fast := r2[intdCounterC_TRANSITED], r2[intdCounterC_FAST_TRANSIT]; tr == 0 || fast != tr {
		t.Errorf("r2, UDP: intd_transit pushed %d of %d hops", fast, tr)
	}
	if st, fast := r3[intdCounterC_STRIPPED], r3[intdCounterC_FAST_SINK]; st == 0 || fast != st {
		t.Errorf("r3, UDP: intd_sink stripped %d of %d packets", fast, st)
	}

	// TCP: 1 MiB echoed back byte for byte (GSO super-packets included).
	e.tcpEcho(t, "tcp4", "10.0.2.2:9998", e.r)

	// Counters: r1 inserted, r2 transited, r3 stripped.
	st := [3]func() [16]uint64{}
	for i := range st {
		d := e.r[i]
		st[i] = func() [16]uint64 {
			s, _ := d.Stats(context.Background())
			return [16]uint64{s.Node.IntInserted, s.Node.IntTransited, s.Node.IntStripped}
		}
	}
	c1, c2, c3 := st[0](), st[1](), st[2]()
	if c1[0] == 0 || c2[1] == 0 || c3[2] == 0 {
		t.Fatalf("inserted at r1 %d, transited at r2 %d, stripped at r3 %d", c1[0], c2[1], c3[2])
	}
	t.Logf("inserted %d transited %d stripped %d", c1[0], c2[1], c3[2])
	// TCP: the data segments (timestamps: a 32-byte header) are
	// intd_transit's; segments with longer options (the SYN, SACK blocks
	// after a loss, more of them on a loaded machine) the general path's.
	tcp := e.r[1].counterSum()
	tr := tcp[intdCounterC_TRANSITED] - r2[intdCounterC_TRANSITED]
	fast = tcp[intdCounterC_FAST_TRANSIT] - r2[intdCounterC_FAST_TRANSIT]
	if fast > tr || fast < tr/2 {
		t.Errorf("r2, TCP: intd_transit pushed %d of %d hops", fast, tr)
	}
	t.Logf("r2, TCP: intd_transit pushed %d of %d hops", fast, tr)
	// And r3's strips, but for the SYN and FIN (the general path
	// reports and clamps them) and those segments.
	tcp = e.r[2].counterSum()
	stripped := tcp[intdCounterC_STRIPPED] - r3[intdCounterC_STRIPPED]
	fast = tcp[intdCounterC_FAST_SINK] - r3[intdCounterC_FAST_SINK]
	if fast > stripped || fast < stripped/2 {
		t.Errorf("r3, TCP: intd_sink stripped %d of %d packets", fast, stripped)
	}
	t.Logf("r3, TCP: intd_sink stripped %d of %d packets", fast, stripped)

	// Reports with the path r3, r2, r1 (stack order: last hop first).
	var paths [][]uint32
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		e.pipe.Flush()
		if paths = e.col.got(); len(paths) >= 2 {
			break
		}
	}
	if len(paths) == 0 {
		t.Fatal("collector got no INT reports")
	}
	for _, p := range paths {
		if fmt.Sprint(p) != "[3 2 1]" {
			t.Fatalf("report path %v, want [3 2 1]", p)
		}
	}
	t.Logf("%d reports, path %v", len(paths), paths[0])
}

// TestChecksumCompletedAtEgress: h1's packets leave its stack with the L4
// checksum still to be completed (CHECKSUM_PARTIAL over veth), and r1's
// egress device completes it in software (checksum offloads off, as the
// kernel's fallback for a device that cannot): INT must not move the L4
// header away from where that sum starts, so UDP and TCP over IPv4 and
// IPv6 arrive at h2 intact and h2 counts no checksum errors.
func TestChecksumCompletedAtEgress(t *testing.T) {
	for _, fam := range []struct{ name, udp, tcp, h2 string }{
		{"ipv4", "udp4", "tcp4", "10.0.2.2"},
		{"ipv6", "udp6", "tcp6", "fd00:2::2"},
	} {
		t.Run(fam.name, func(t *testing.T) {
			l := newLab(t)
			cfg := func(s string) string { return s }
			if fam.name == "ipv6" {
				l.addIPv6(t)
				cfg = v6Config
			}
			var r [3]*Dataplane
			r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, cfg(routerConfig(1, "", true)))
			r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, routerConfig(2, "", false))
			r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, nil, routerConfig(3, "r3-h2", false))
			if err := l.in("r1", func() error {
				return ethtool.SetFeatures("r1-r2", func(f string) bool { return strings.HasPrefix(f, "tx-checksum") }, false)
			}); err != nil {
				t.Fatal(err)
			}
			l.udpOnce(t, fam.udp, net.JoinHostPort(fam.h2, "9999"), []byte("hello over INT, checksum completed at egress"))
			l.tcpEcho(t, fam.tcp, net.JoinHostPort(fam.h2, "9998"), r)
			snmp := l.exec(t, "h2", "sh", "-c", "cat /proc/net/snmp /proc/net/snmp6")
			for _, c := range [][2]string{{"Udp:", "InCsumErrors"}, {"Tcp:", "InCsumErrors"}, {"", "Udp6InCsumErrors"}} {
				if v := snmpCounter(snmp, c[0], c[1]); v != "0" {
					t.Errorf("h2: %s %s = %s", c[0], c[1], v)
				}
			}
			s, _ := r[0].Stats(context.Background())
			det := r[0].rawCounters(0)[intdCounterC_GSO] + r[0].rawCounters(1)[intdCounterC_GSO] + r[0].rawCounters(2)[intdCounterC_GSO]
			if s.Node.IntInserted == 0 || det == 0 {
				t.Fatalf("r1: INT inserted %d, detoured %d", s.Node.IntInserted, det)
			}
		})
	}
}

// udpRaw sends n UDP datagrams of one flow from h1 to 10.0.2.2:9999 at h2
// through a raw IP socket, their checksums computed here (the kernel
// sends them with the checksum complete), one at a time, and fails unless
// each arrives intact.
func (l *lab) udpRaw(t testing.TB, n int) {
	t.Helper()
	var rx *net.UDPConn
	if err := l.in("h2", func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var fd int
	if err := l.in("h1", func() (err error) {
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	msg := []byte("hello over INT, UDP with its checksum")
	pkt := wiretest.UDPFrame("10.0.1.2", "10.0.2.2", 4444, 9999, msg, true)[wire.EthernetLen:]
	to := &syscall.SockaddrInet4{Addr: [4]byte{10, 0, 2, 2}}
	buf := make([]byte, 2048)
	for k := range n {
		if err := syscall.Sendto(fd, pkt, 0, to); err != nil {
			t.Fatal(err)
		}
		_ = rx.SetReadDeadline(time.Now().Add(3 * time.Second))
		m, err := rx.Read(buf)
		if err != nil || !bytes.Equal(buf[:m], msg) {
			t.Fatalf("UDP at h2, datagram %d: %q, %v; want %q", k+1, buf[:m], err, msg)
		}
	}
}

// udpOnce sends msg from h1 to addr at h2 (network udp4 or udp6) until one
// copy arrives (the first may wait for neighbour discovery) and fails
// unless it arrives intact.
func (l *lab) udpOnce(t testing.TB, network, addr string, msg []byte) {
	t.Helper()
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var rx, tx *net.UDPConn
	if err := l.in("h2", func() (err error) {
		rx, err = net.ListenUDP(network, ua)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := l.in("h1", func() (err error) {
		tx, err = net.DialUDP(network, nil, ua)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	buf := make([]byte, 2048)
	for i := 0; i < 5; i++ {
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = rx.SetReadDeadline(time.Now().Add(time.Second))
		n, err := rx.Read(buf)
		if err == nil {
			if !bytes.Equal(buf[:n], msg) {
				t.Fatalf("UDP at h2: %q, want %q", buf[:n], msg)
			}
			return
		}
	}
	snmp := l.exec(t, "h2", "sh", "-c", "cat /proc/net/snmp /proc/net/snmp6")
	t.Fatalf("UDP at h2: nothing in 5 s (h2: Udp InCsumErrors %s, Udp6InCsumErrors %s)",
		snmpCounter(snmp, "Udp:", "InCsumErrors"), snmpCounter(snmp, "", "Udp6InCsumErrors"))
}

// snmpCounter returns a counter of /proc/net/snmp (table "Udp:", name
// "InCsumErrors": a header line, then a value line) or of
// /proc/net/snmp6 (table "", name "Udp6InCsumErrors"), "" when absent.
func snmpCounter(text, table, name string) string {
	var header []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if table == "" {
			if f[0] == name {
				return f[1]
			}
			continue
		}
		if f[0] != table {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i := range header {
			if header[i] == name && i < len(f) {
				return f[i]
			}
		}
		return ""
	}
	return ""
}

//go:build linux

package afpacket

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// tunnelNodeConfig is the INT configuration of node id of the session
// tunnel lab: DSCP marking, INT recognised in VXLAN-GPE, the node's
// tunnel-address tun (IPv4) and tun6 (none when empty), sink interface
// sink, a session in a VXLAN-GPE tunnel to dst (IPv4) and dst6
// watching h1 -> h2 of both families when dst is set, and reports to
// collector port col on the loopback.
func tunnelNodeConfig(id int, tun, tun6, sink, dst, dst6 string, col int) string {
	node := fmt.Sprintf(`"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true`, id)
	if tun != "" {
		node += `, "tunnel-address": "` + tun + `", "tunnel-address-ipv6": "` + tun6 + `"`
	}
	extra := ""
	if sink != "" {
		extra += fmt.Sprintf(`"interfaces": {"interface": [{"name": %q, "config": {"name": %q, "int-sink": true}}]},`, sink, sink)
	}
	sess := ""
	if dst != "" {
		sess = `, "encapsulation": "VXLAN_GPE", "tunnel-destination": "` + dst + `", "tunnel-destination-ipv6": "` + dst6 + `", "clamp-tcp-mss": true`
		extra += `"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10},
			"match": {"config": {"source-prefix": "10.0.1.0/24", "destination-prefix": "10.0.2.0/24"}},
			"actions": {"config": {"flow-op": "INT", "int-session": "md", "sample-percent": 100}}},
			{"sequence-id": 20, "config": {"sequence-id": 20},
			"match": {"config": {"source-prefix": "fd00:1::/64", "destination-prefix": "fd00:2::/64"}},
			"actions": {"config": {"flow-op": "INT", "int-session": "md", "sample-percent": 100}}}]}},`
	}
	return fmt.Sprintf(`{"intd-int:int": {
	"node": {"config": {%s}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63}},
	%s
	"int-sessions": {"int-session": [{"name": "md", "config": {"name": "md", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"],
		"remaining-hop-count": 8%s}}]},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "127.0.0.1", "report-format": "TELEMETRY_REPORT_V2_0", "truncate-size": 512},
		"collectors": {"collector": [{"address": "127.0.0.1", "port": %d, "config": {"address": "127.0.0.1", "port": %d}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "c"}}]}
}}`, node, extra, sess, col, col)
}

// tunnelLab is h1 - s1 - s2 - s3 - h2 in namespaces, the soft dataplane
// on s1 (10.0.1.1, 10.0.12.1), s2 (10.0.12.2, 10.0.23.1) and s3
// (10.0.23.2, 10.0.2.1), hosts 10.0.1.2 and 10.0.2.2 with their default
// offloads (TSO on); IPv6 fd00:N::x for 10.0.N.x.
type tunnelLab struct {
	h1, s1, s2, s3, h2 netns.NsHandle
	d                  [3]*Dataplane
}

func newTunnelLab(t *testing.T) *tunnelLab {
	l := &tunnelLab{}
	for _, ns := range []*netns.NsHandle{&l.h1, &l.s1, &l.s2, &l.s3, &l.h2} {
		*ns, _ = testNS(t)
	}
	link(t, l.h1, "h1-s1", "10.0.1.2/24", l.s1, "s1-h1", "10.0.1.1/24")
	link(t, l.s1, "s1-s2", "10.0.12.1/24", l.s2, "s2-s1", "10.0.12.2/24")
	link(t, l.s2, "s2-s3", "10.0.23.1/24", l.s3, "s3-s2", "10.0.23.2/24")
	link(t, l.s3, "s3-h2", "10.0.2.1/24", l.h2, "h2-s3", "10.0.2.2/24")
	addAddrs(t, []nsAddr{{l.h1, "h1-s1", "fd00:1::2/64"}, {l.s1, "s1-h1", "fd00:1::1/64"}, {l.s1, "s1-s2", "fd00:12::1/64"},
		{l.s2, "s2-s1", "fd00:12::2/64"}, {l.s2, "s2-s3", "fd00:23::1/64"}, {l.s3, "s3-s2", "fd00:23::2/64"},
		{l.s3, "s3-h2", "fd00:2::1/64"}, {l.h2, "h2-s3", "fd00:2::2/64"}})
	// Routes of both families: 10.0.N.0/24 and fd00:N::/64 via 10.0.M.x
	// and fd00:M::x.
	for _, r := range []struct {
		ns           netns.NsHandle
		dst, via, gw string
	}{{l.h1, "0", "1", "1"}, {l.h2, "0", "2", "1"}, {l.s1, "2", "12", "2"}, {l.s1, "23", "12", "2"},
		{l.s2, "1", "12", "1"}, {l.s2, "2", "23", "2"}, {l.s3, "1", "23", "1"}, {l.s3, "12", "23", "1"}} {
		if r.dst == "0" {
			route(t, r.ns, "0.0.0.0/0", "10.0."+r.via+"."+r.gw)
			route(t, r.ns, "::/0", "fd00:"+r.via+"::"+r.gw)
			continue
		}
		route(t, r.ns, "10.0."+r.dst+".0/24", "10.0."+r.via+"."+r.gw)
		route(t, r.ns, "fd00:"+r.dst+"::/64", "fd00:"+r.via+"::"+r.gw)
	}
	return l
}

// start runs the three dataplanes.
func (l *tunnelLab) start(t *testing.T) {
	for i, s := range []struct {
		ns     netns.NsHandle
		ifaces []string
	}{{l.s1, []string{"s1-h1", "s1-s2"}}, {l.s2, []string{"s2-s1", "s2-s3"}}, {l.s3, []string{"s3-s2", "s3-h2"}}} {
		l.d[i], _ = startDataplane(t, s.ns, s.ifaces...)
	}
}

// apply configures dataplane i in its namespace (where its report
// sockets are made).
func (l *tunnelLab) apply(t *testing.T, i int, cfg string) error {
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(cfg), dev); err != nil {
		t.Fatal(err)
	}
	var err error
	inNS(t, []netns.NsHandle{l.s1, l.s2, l.s3}[i], func() error {
		err = dtel.New(l.d[i]).Apply(context.Background(), dev)
		return nil
	})
	return err
}

// reportPaths receives telemetry reports on conn and records the node
// id path of each INT-MD one.
type reportPaths struct {
	mu    sync.Mutex
	paths []string
}

func (r *reportPaths) run(conn net.PacketConn) {
	buf := make([]byte, 9000)
	pr := wire.Parser{VXLANGPEPort: spec.PortVXLANGPE, AllowTruncated: true}
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		for _, p := range wiretest.ReportPaths(buf[:n], &pr) {
			r.mu.Lock()
			r.paths = append(r.paths, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p)), ","), "[]"))
			r.mu.Unlock()
		}
	}
}

func (r *reportPaths) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// frameLog reads the frames arriving on an interface (a second
// AF_PACKET port on it) until stopped.
type frameLog struct {
	mu     sync.Mutex
	frames [][]byte
	stop   chan struct{}
	done   chan struct{}
}

func logFrames(t *testing.T, ns netns.NsHandle, dev string) *frameLog {
	var p *Port
	inNS(t, ns, func() (err error) {
		p, err = Open(dev, PortConfig{Promiscuous: true, SocketBuffer: 64 << 20})
		return err
	})
	c := &frameLog{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer p.Close()
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			n, err := p.Read()
			if err != nil {
				return
			}
			if n == 0 {
				time.Sleep(200 * time.Microsecond)
			}
			c.mu.Lock()
			for i := 0; i < n; i++ {
				c.frames = append(c.frames, bytes.Clone(p.Frame(i)))
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.end)
	return c
}

func (c *frameLog) end() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *frameLog) got() [][]byte {
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames
}

// h1h2 says whether f holds a TCP packet h1 -> h2 with payload at off
// (its IP header).
func h1h2(f []byte, off int) bool {
	if len(f) >= off+60 && f[off]>>4 == 6 {
		return f[off+6] == wire.ProtoTCP && netip.AddrFrom16([16]byte(f[off+8:off+24])) == netip.MustParseAddr("fd00:1::2") &&
			netip.AddrFrom16([16]byte(f[off+24:off+40])) == netip.MustParseAddr("fd00:2::2") &&
			int(binary.BigEndian.Uint16(f[off+4:])) > int(f[off+40+12]>>4)*4
	}
	return len(f) >= off+40 && f[off]>>4 == 4 && f[off+9] == wire.ProtoTCP &&
		bytes.Equal(f[off+12:off+20], []byte{10, 0, 1, 2, 10, 0, 2, 2}) &&
		int(binary.BigEndian.Uint16(f[off+2:])) > int(f[off]&15)*4+int(f[off+int(f[off]&15)*4+12]>>4)*4
}

// tunnelHops returns the inner IP header offset and the hop count of a
// session tunnel frame s1 -> s3 (10.0.12.1 -> 10.0.23.2, IPv6
// fd00:12::1 -> fd00:23::2, as it reaches s3), -1 when f is none.
func tunnelHops(f []byte) (int, int) {
	ip := 14
	switch {
	case len(f) >= 14+20 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == wire.ProtoUDP &&
		bytes.Equal(f[26:34], []byte{10, 0, 12, 1, 10, 0, 23, 2}):
		ip += 20
	case len(f) >= 14+40 && binary.BigEndian.Uint16(f[12:]) == 0x86dd && f[20] == wire.ProtoUDP &&
		netip.AddrFrom16([16]byte(f[22:38])) == netip.MustParseAddr("fd00:12::1") &&
		netip.AddrFrom16([16]byte(f[38:54])) == netip.MustParseAddr("fd00:23::2"):
		ip += 40
	default:
		return -1, 0
	}
	if len(f) < ip+16+12 || binary.BigEndian.Uint16(f[ip+2:]) != spec.PortVXLANGPE {
		return -1, 0
	}
	shim := ip + 16
	words, hopML := int(f[shim+1]), int(f[shim+6]&0x1f)
	if hopML == 0 || words < 3 || (words-3)%hopML != 0 {
		return -1, 0
	}
	return shim + 4 + words*4, (words - 3) / hopML
}

// TestSessionTunnelSoft: s1's INT session puts the TCP flow h1 -> h2
// into a VXLAN-GPE tunnel to s3 (tunnel-address 10.0.23.2), TSO on at
// the hosts. A 1 MiB echo h1 -> h2 -> h1 comes back byte for byte; s1
// sends the flow's super-packets whole in the tunnel (through its
// TunnelOut, none cut in userspace), s2 pushes its hop onto them whole,
// every data frame of the flow arriving at s3 is in the tunnel with both
// hops, super-packets among them; h2 receives no tunnel frame; the
// collector's reports show the path 3, 2, 1 only. With s2's port to s3
// shaped (a tbf qdisc, whose limit becomes the switch port's short
// queue), s2 cuts the tunnel super-packets larger than a quarter of it
// into segments, each with the outer headers and both hops, and drops
// none.
func TestSessionTunnelSoft(t *testing.T) {
	t.Run("whole", func(t *testing.T) { testSessionTunnelSoft(t, false) })
	t.Run("s2 shaped", func(t *testing.T) { testSessionTunnelSoft(t, true) })
}

func testSessionTunnelSoft(t *testing.T, shaped bool) {
	l := newTunnelLab(t)
	if shaped {
		inNS(t, l.s2, func() error {
			ln, err := netlink.LinkByName("s2-s3")
			if err != nil {
				return err
			}
			const rate = 500_000_000 // bytes/s
			return netlink.QdiscAdd(&netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ln.Attrs().Index,
				Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}, Rate: rate, Limit: 200_000,
				Buffer: netlink.Xmittime(rate, 256<<10)})
		})
	}
	l.start(t)
	// The report pipeline's sockets are made by its own goroutines, in
	// the test's namespace: the collector listens there, on a free port.
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	col := &reportPaths{}
	go col.run(conn)
	port := conn.LocalAddr().(*net.UDPAddr).Port
	for i, c := range []string{
		tunnelNodeConfig(1, "10.0.12.1", "fd00:12::1", "s1-h1", "10.0.23.2", "fd00:23::2", port),
		tunnelNodeConfig(2, "", "", "", "", "", port),
		tunnelNodeConfig(3, "10.0.23.2", "fd00:23::2", "s3-h2", "", "", port),
	} {
		if err := l.apply(t, i, c); errors.Is(err, soft.ErrNoSessionTunnels) {
			t.Skip(err)
		} else if err != nil {
			t.Fatalf("s%d: %v", i+1, err)
		}
		// Transit (s2) needs the TAPs as much as the tunnel's ends.
		if !l.d[i].ports[0].CanTunnel() {
			t.Fatalf("s%d: no session tunnel output after its configuration", i+1)
		}
	}
	for _, fam := range []struct{ network, addr string }{{"tcp4", "10.0.2.2:7000"}, {"tcp6", "[fd00:2::2]:7000"}} {
		t.Run(fam.network, func(t *testing.T) { l.echoInTunnel(t, col, fam.network, fam.addr, !shaped) })
	}
}

// echoInTunnel runs TestSessionTunnelSoft's echo over network to addr
// and checks what it says; s2Whole: s2 sends the tunnel super-packets on
// whole, else it cuts some (those its short queue does not take four
// of) into segments.
func (l *tunnelLab) echoInTunnel(t *testing.T, col *reportPaths, network, addr string, s2Whole bool) {
	before := [3][]PortStats{l.d[0].Node().Stats(), l.d[1].Node().Stats()}
	col.mu.Lock()
	col.paths = nil
	col.mu.Unlock()
	sess0 := l.sessionStats(t)
	atS3 := logFrames(t, l.s3, "s3-s2")
	atH2 := logFrames(t, l.h2, "h2-s3")

	data := payloadBytes(1 << 20)
	back := l.echo(t, network, addr, data)
	got := <-back
	if !bytes.Equal(got, data) {
		t.Fatalf("echo: %d bytes back, want the %d sent, byte for byte", len(got), len(data))
	}
	time.Sleep(100 * time.Millisecond)

	st, st2 := l.d[0].Node().Stats(), l.d[1].Node().Stats()
	rxGSO, rxWhole, rxSegs := st[0].RxGSO-before[0][0].RxGSO, st[0].RxWhole-before[0][0].RxWhole, st[0].RxSegments-before[0][0].RxSegments
	tx1, err1 := st[1].TxTunnel-before[0][1].TxTunnel, st[1].TxErrors-before[0][1].TxErrors
	tx2, err2 := st2[1].TxTunnel-before[1][1].TxTunnel, st2[0].RxGSOErrors-before[1][0].RxGSOErrors
	t.Logf("s1: from h1 %d super-packets, %d whole, %d segments made; to s2 %d whole in the tunnel, %d errors; s2: %d on whole",
		rxGSO, rxWhole, rxSegs, tx1, err1, tx2)
	if tx1 == 0 || rxSegs != 0 || err1 != 0 {
		t.Errorf("s1: %d super-packets sent whole in the tunnel, %d segments cut, %d refused; want whole only", tx1, rxSegs, err1)
	}
	segs2 := st2[0].RxSegments - before[1][0].RxSegments
	if s2Whole && (tx2 == 0 || segs2 != 0) || !s2Whole && segs2 == 0 || err2 != 0 {
		t.Errorf("s2: %d super-packets sent whole in the tunnel, %d segments cut, %d dropped", tx2, segs2, err2)
	}
	sess := l.sessionStats(t)
	sess.PacketsInitiated -= sess0.PacketsInitiated
	if sess.PacketsInitiated == 0 || sess != (sai.IntSessionStats{PacketsInitiated: sess.PacketsInitiated}) {
		t.Errorf("s1's session: %+v (this transfer), want packets initiated only", sess)
	}

	var tun, super, plain, wrong int
	for _, f := range atS3.got() {
		if h1h2(f, 14) {
			plain++
			continue
		}
		in, hops := tunnelHops(f)
		if in < 0 || !h1h2(f, in) {
			continue
		}
		tun++
		if len(f)-14 > 1500 {
			super++
		}
		if hops != 2 {
			wrong++
		}
	}
	t.Logf("s2 -> s3: %d data frames in the tunnel (%d super-packets), %d plain, %d without 2 hops", tun, super, plain, wrong)
	if tun == 0 || s2Whole && super == 0 || plain != 0 || wrong != 0 {
		t.Errorf("s2 -> s3: %d data frames in the tunnel, %d super-packets, %d plain, %d without 2 hops: want all in the tunnel with 2 hops",
			tun, super, plain, wrong)
	}
	for _, f := range atH2.got() {
		if _, h := tunnelHops(f); h > 0 || len(f) > 42 && f[23] == wire.ProtoUDP && binary.BigEndian.Uint16(f[36:]) == spec.PortVXLANGPE {
			t.Fatalf("h2 received a tunnel frame: %x", f[:min(len(f), 80)])
		}
	}

	var paths []string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && len(paths) == 0; time.Sleep(20 * time.Millisecond) {
		l.d[2].pipe.Flush()
		paths = col.got()
	}
	for _, p := range paths {
		if p != "3,2,1" {
			t.Fatalf("report paths %v, want 3,2,1 only", paths)
		}
	}
	s, _ := l.d[2].Stats(context.Background())
	if len(paths) == 0 {
		t.Fatalf("no reports; s3: %+v %+v", s.Node, s.Reports)
	}
	t.Logf("%d reports; s3 stripped %d", len(paths), s.Node.IntStripped)
}

// sessionStats returns the counters of s1's INT session (not initiated
// ones added up where they differ from 0).
func (l *tunnelLab) sessionStats(t *testing.T) sai.IntSessionStats {
	st, err := l.d[0].Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.IntSessions {
		return s
	}
	t.Fatal("s1 has no INT session")
	return sai.IntSessionStats{}
}

// TestSegmentSessionTunnel: a TCP super-packet in a session tunnel (as
// AF_PACKET reports one: TCPv4, the checksum starting at the inner TCP
// header) is cut as the kernel cuts a UDP tunnel: every segment has the
// outer headers and INT, outer IPv4 and UDP lengths of its own, valid
// outer and inner IPv4 and TCP checksums, consecutive sequence numbers
// and its share of the payload. A transit or sink switch that cannot
// send it on whole hands it on so.
func TestSegmentSessionTunnel(t *testing.T) {
	const mss, segs = 1000, 7
	f, p, vh := tunnelSuperPacket(t, segs*mss-300, mss)
	n := p.Next - p.L3 // what the tunnel added
	vh.CsumStart += uint16(n)
	orig := bytes.Clone(f)
	hl := p.Next + 20 + 32 // inner IPv4, TCP with 12 bytes of options
	var got [][]byte
	k, err := Segment(vh, f, func(s []byte) { got = append(got, bytes.Clone(s)) })
	if err != nil || k != segs || len(got) != segs {
		t.Fatalf("Segment: %d segments, %v; want %d", k, err, segs)
	}
	pr := wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}
	for i, s := range got {
		want := min(mss, len(orig)-hl-i*mss)
		var q wire.Packet
		if len(s) != hl+want || pr.Parse(s, &q) != nil || q.INT < 0 || !bytes.Equal(s[14+20+8:p.Next], orig[14+20+8:p.Next]) {
			t.Fatalf("segment %d: %d bytes, want %d with the tunnel and INT: %x", i, len(s), hl+want, s[:min(len(s), hl)])
		}
		if int(binary.BigEndian.Uint16(s[16:])) != len(s)-14 || int(binary.BigEndian.Uint16(s[38:])) != len(s)-34 ||
			int(binary.BigEndian.Uint16(s[p.Next+2:])) != len(s)-p.Next {
			t.Errorf("segment %d: outer IP, UDP or inner IP length wrong: %x", i, s[:hl])
		}
		if sum16(s[14:34], 0) != 0xffff || sum16(s[p.Next:p.Next+20], 0) != 0xffff {
			t.Errorf("segment %d: IPv4 header checksum wrong", i)
		}
		ip, tcp := s[p.Next:], s[p.Next+20:]
		if sum16(tcp, uint32(sum16(ip[12:20], 0))+6+uint32(len(tcp))) != 0xffff {
			t.Errorf("segment %d: TCP checksum wrong", i)
		}
		if seq, first := binary.BigEndian.Uint32(tcp[4:]), binary.BigEndian.Uint32(orig[p.Next+24:]); seq != first+uint32(i*mss) {
			t.Errorf("segment %d: sequence number %d, want %d", i, seq, first+uint32(i*mss))
		}
		if !bytes.Equal(tcp[32:], orig[hl+i*mss:hl+i*mss+want]) {
			t.Errorf("segment %d: payload differs", i)
		}
	}
}

// tunnelSuperPacket is superPacket(size, mss) put into a session tunnel
// from 10.0.12.1 to 10.0.23.2 with one hop (node id 1), its parse and
// its virtio_net_hdr as AF_PACKET has it for the inner packet.
func tunnelSuperPacket(t *testing.T, size, mss int) ([]byte, *wire.Packet, VnetHdr) {
	t.Helper()
	inner, vh := superPacket(size, mss)
	p := &wire.Packet{}
	if err := (&wire.Parser{}).Parse(inner, p); err != nil {
		t.Fatal(err)
	}
	md := make([]byte, wire.MDHeaderLen+4)
	_ = wire.MDHeader{Version: wire.Version2, HopML: 1, RemainingHops: 7, Instructions: wire.Instructions(spec.InstNodeID)}.Put(md)
	binary.BigEndian.PutUint32(md[wire.MDHeaderLen:], 1)
	f, err := wire.EncapSessionTunnel(append(inner[:len(inner):len(inner)], make([]byte, 128)...)[:len(inner)], p,
		netip.MustParseAddr("10.0.12.1"), netip.MustParseAddr("10.0.23.2"), md)
	if err != nil {
		t.Fatal(err)
	}
	return f, p, vh
}

// echo sends data from h1 to an echo server on h2 at addr (network) and
// returns where what comes back is given, once all of it is back or the
// connection ends (20 s at most).
func (l *tunnelLab) echo(t *testing.T, network, addr string, data []byte) <-chan []byte {
	t.Helper()
	var ln net.Listener
	inNS(t, l.h2, func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	})
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.Copy(c, c)
	}()
	var c net.Conn
	inNS(t, l.h1, func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	})
	c.SetDeadline(time.Now().Add(20 * time.Second))
	back := make(chan []byte, 1)
	go func() {
		defer c.Close()
		b := make([]byte, len(data))
		n, _ := io.ReadFull(c, b)
		back <- b[:n]
	}()
	go func() { _, _ = c.Write(data) }()
	return back
}

package ebpf

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// origin is where a frame of an edge case comes from.
type origin int

const (
	fromFabric origin = iota // "in", a port inside the INT domain
	fromEdge                 // "in" as a sink (edge) port: outside the domain
	// fromHost: sent by the node's host (ebpf: no ingress interface). The
	// soft switch never sees such packets (its AF_PACKET ports skip
	// outgoing frames); "in" as an edge port stands for the host there.
	fromHost
)

// edgeCase is one frame through both backends; want nil: dropped. The
// named counters must be 1 on the node (and on "in" unless from the host),
// the others 0; unwatched: the only watchlist entry matched nothing.
type edgeCase struct {
	name       string
	s          setup
	from       origin
	in, want   []byte
	remarked   bool
	malfFwd    bool
	malfDrop   bool
	dropReport bool // one drop report, reason 0, not unwatched
	unwatched  bool
	collectors []netip.Addr // report session destinations (port 32766)
}

// clampSession is mdSession with ClampTCPMSS: 8 hops of 5 words, 176
// bytes of INT with DSCP marking.
var clampSession = func() sai.IntSessionAttrs {
	s := mdSession
	s.ClampTCPMSS = true
	return s
}()

// setDSCP returns f with DSCP dscp and ECN ecn (IPv4 checksum fixed).
func setDSCP(f []byte, dscp, ecn uint8) []byte {
	g := bytes.Clone(f)
	h := g[wire.EthernetLen:]
	if h[0]>>4 == 4 {
		h[1] = dscp<<2 | ecn
		binary.BigEndian.PutUint16(h[10:], 0)
		binary.BigEndian.PutUint16(h[10:], wire.IPv4HeaderChecksum(h[:20]))
	} else {
		w := binary.BigEndian.Uint16(h)
		binary.BigEndian.PutUint16(h, w&0xf00f|uint16(dscp<<2|ecn)<<4)
	}
	return g
}

// clampMSS returns f (a TCP SYN) with its MSS lowered to mss by wire.
func clampMSS(t *testing.T, f []byte, mss uint16) []byte {
	t.Helper()
	g := bytes.Clone(f)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(g, &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := wire.ClampMSS(g, p.L4, mss); !ok {
		t.Fatalf("MSS of %x not lowered to %d", f, mss)
	}
	return g
}

// edgeCases are the cases of the domain's edge for one IP version (a and
// b the hosts' addresses).
func edgeCases(t *testing.T, a, b string) []edgeCase {
	dscp := wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f}
	src := func(f []byte) []byte { return insertINT(t, f, clampSession, dscp) }
	remark10 := func(d *sai.DTelAttrs) { d.IntL4DSCPRemark = 10 }
	drop := func(d *sai.DTelAttrs) { d.MalformedAction, d.DropReportEnable = sai.MalformedDrop, true }
	edge := setup{sess: &clampSession, match: port80(), mtu: 1500, edge: true}
	edgeRemark := edge
	edgeRemark.dt = remark10
	fabric := setup{sess: &clampSession, match: port80(), mtu: 1500}
	tcp := func(port uint16, dscp uint8, payload string) []byte {
		return tcpFrame(a, b, 1234, port, dscp, []byte(payload))
	}
	// Marked garbage: DSCP 0x17 and, where a shim would be, header type 7.
	garbage := tcp(81, 0x17, "\x70\x03\x00\x00not INT at all!")
	var cs []edgeCase
	for _, d := range []struct {
		name string
		v    uint8
	}{{"EF", 46}, {"AF41", 34}, {"CS6", 48}} {
		cs = append(cs,
			edgeCase{name: d.name + " from the edge, unwatched: unchanged", s: edge, from: fromEdge,
				in: tcp(81, d.v, "user data"), want: tcp(81, d.v, "user data")},
			edgeCase{name: d.name + " from the edge, watched: INT, the shim keeps the DSCP", s: edge, from: fromEdge,
				in: tcp(80, d.v, "user data"), want: src(tcp(80, d.v, "user data"))},
			edgeCase{name: d.name + " from the host: unchanged", s: edge, from: fromHost,
				in: tcp(81, d.v, "user data"), want: tcp(81, d.v, "user data")},
		)
	}
	colliding := setDSCP(tcp(81, 0, "colliding"), 0x17, 1)
	collidingW := setDSCP(tcp(80, 0, "colliding, watched"), 0x17, 2)
	cs = append(cs,
		edgeCase{name: "colliding DSCP from the edge: re-marked to 0, ECN kept", s: edge, from: fromEdge,
			in: colliding, want: setDSCP(colliding, 0, 1), remarked: true},
		edgeCase{name: "colliding DSCP from the edge: re-marked to the configured value", s: edgeRemark, from: fromEdge,
			in: colliding, want: setDSCP(colliding, 10, 1), remarked: true},
		edgeCase{name: "colliding DSCP from the edge, watched: re-marked, then INT keeps the new DSCP", s: edgeRemark, from: fromEdge,
			in: collidingW, want: src(setDSCP(collidingW, 10, 2)), remarked: true},
		edgeCase{name: "colliding DSCP from the host: re-marked", s: edgeRemark, from: fromHost,
			in: colliding, want: setDSCP(colliding, 10, 1), remarked: true},
		edgeCase{name: "marked garbage from the edge: re-marked, never parsed", s: edge, from: fromEdge,
			in: garbage, want: setDSCP(garbage, 0, 0), remarked: true},
		edgeCase{name: "marked garbage on a fabric port: forwarded unchanged", s: fabric, from: fromFabric,
			in: garbage, want: garbage, malfFwd: true},
		edgeCase{name: "marked garbage on a fabric port (DROP): dropped", s: setup{sess: &clampSession, match: port80(), mtu: 1500, dt: drop},
			from: fromFabric, in: garbage, malfDrop: true, dropReport: true},
		edgeCase{name: "marked garbage from the edge (DROP): never parsed, re-marked", s: setup{sess: &clampSession, match: port80(), mtu: 1500, dt: drop, edge: true},
			from: fromEdge, in: garbage, want: setDSCP(garbage, 0, 0), remarked: true},
	)
	// INT packets from outside the domain are not INT: not stripped at a
	// sink port, not re-marked there (the packet does not enter the domain).
	intIn := intFrame(t, tcp(80, 0, "an INT packet"), mdSession, 2, false)
	toSink := setup{sess: &clampSession, match: port80(), mtu: 1500, edge: true, sink: true}
	cs = append(cs,
		edgeCase{name: "INT packet from the edge to a sink port: untouched", s: toSink, from: fromEdge, in: intIn, want: intIn},
		edgeCase{name: "INT-marked packet from the host to a sink port: untouched", s: toSink, from: fromHost, in: intIn, want: intIn},
		edgeCase{name: "INT packet from the fabric to a sink port: stripped", s: setup{sink: true, mtu: 1500}, from: fromFabric,
			in: intIn, want: tcp(80, 0, "an INT packet")},
	)
	// Telemetry: reports to a collector are never watched.
	coll := netip.MustParseAddr(b)
	report := udpFrame(a, b, 40000, 32766, []byte("a telemetry report"), true)
	other := udpFrame(a, b, 40000, 32767, []byte("not a report"), true)
	watchAll := setup{sess: &clampSession, mtu: 1500}
	cs = append(cs,
		edgeCase{name: "report to a collector under a watch-all entry: no INT", s: watchAll, from: fromFabric,
			in: report, want: report, unwatched: true, collectors: []netip.Addr{coll}},
		edgeCase{name: "other UDP under a watch-all entry: INT", s: watchAll, from: fromFabric,
			in: other, want: src(other), collectors: []netip.Addr{coll}},
	)
	// MSS clamp: MTU 1500 - IP header - 20 - 176 bytes of INT.
	ipHdr := 20
	if netip.MustParseAddr(a).Is6() {
		ipHdr = 40
	}
	mss := uint16(1500 - ipHdr - 20 - (4 + 12 + 8*5*4))
	opts := append(wiretest.MSSOption(1460), 1, 3, 3, 7)
	oddOpts := append([]byte{1}, append(wiretest.MSSOption(8960), 4, 2)...) // MSS at an odd offset
	syn := wiretest.SYNFrame(a, b, 1234, 80, 0, 0x02, opts)
	synOdd := wiretest.SYNFrame(a, b, 1234, 80, 0, 0x02, oddOpts)
	small := wiretest.SYNFrame(a, b, 1234, 80, 0, 0x02, wiretest.MSSOption(536))
	synAck := wiretest.SYNFrame(b, a, 80, 1234, 0, 0x12, opts)
	synAck81 := wiretest.SYNFrame(b, a, 81, 1234, 0, 0x12, opts)
	noClamp := setup{sess: &mdSession, match: port80(), mtu: 1500}
	replySink := setup{sess: &clampSession, match: port80(), mtu: 1500, sink: true}
	cs = append(cs,
		edgeCase{name: "SYN of a watched flow: MSS clamped, INT", s: edge, from: fromEdge, in: syn, want: src(clampMSS(t, syn, mss))},
		edgeCase{name: "SYN of a watched flow, MSS at an odd offset: clamped", s: fabric, from: fromFabric, in: synOdd, want: src(clampMSS(t, synOdd, mss))},
		edgeCase{name: "SYN with a small MSS: unchanged, INT", s: edge, from: fromEdge, in: small, want: src(small)},
		edgeCase{name: "SYN, clamp-tcp-mss off: unchanged, INT", s: noClamp, from: fromFabric, in: syn, want: insertINT(t, syn, mdSession, dscp)},
		edgeCase{name: "SYN-ACK leaving the domain, reverse flow watched: MSS clamped", s: replySink, from: fromFabric,
			in: synAck, want: clampMSS(t, synAck, mss)},
		edgeCase{name: "SYN-ACK with INT at the sink: stripped, MSS clamped", s: replySink, from: fromFabric,
			in: intFrame(t, synAck, mdSession, 2, false), want: clampMSS(t, synAck, mss)},
		edgeCase{name: "SYN-ACK leaving the domain, reverse flow not watched: unchanged", s: replySink, from: fromFabric,
			in: synAck81, want: synAck81},
		edgeCase{name: "SYN-ACK into the domain: not a source's flow, unchanged", s: fabric, from: fromFabric,
			in: synAck, want: synAck},
	)
	return cs
}

func runEdge(t *testing.T, cases []edgeCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			if c.from != fromFabric {
				s.edge = true
			}
			for _, n := range nodes(t, s) {
				for _, ip := range c.collectors {
					rs := sai.DefaultReportSessionAttrs()
					rs.SrcIP = netip.MustParseAddr("10.9.9.9")
					if ip.Is6() {
						rs.SrcIP = netip.MustParseAddr("2001:db8:9::9")
					}
					rs.UDPDstPort = 32766
					rs.Destinations = []sai.ReportDestination{{IP: ip}}
					if _, err := n.Create(rs); err != nil {
						t.Fatal(err)
					}
				}
				if bn, ok := n.(*bpfNode); ok {
					if c.from == fromHost {
						bn.in = 0
					} else {
						// Count it in, as tc ingress of "in" would.
						st, _ := bn.Stats(t.Context())
						runProgFrom(t, bn.objs.IntdIngress, bytes.Clone(c.in), 1)
						st2, _ := bn.Stats(t.Context())
						if st2.Node.InPackets != st.Node.InPackets+1 {
							t.Fatalf("intd_ingress did not count the packet")
						}
					}
				}
				got := n.process(t, bytes.Clone(c.in))
				if !bytes.Equal(got, c.want) {
					t.Errorf("%s:\n got %x\nwant %x", n.name(), got, c.want)
				}
				st, err := n.Stats(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				one := func(b bool) uint64 {
					if b {
						return 1
					}
					return 0
				}
				host := c.from == fromHost && n.name() == "ebpf"
				for _, x := range []struct {
					name string
					want bool
					node uint64
					in   uint64
				}{
					{"dscp-remarked", c.remarked, st.Node.DSCPRemarked, st.Interfaces["in"].DSCPRemarked},
					{"int-malformed-forwarded", c.malfFwd, st.Node.IntMalformedForward, st.Interfaces["in"].IntMalformedForward},
					{"int-malformed-dropped", c.malfDrop, st.Node.IntMalformedDrop, st.Interfaces["in"].IntMalformedDrop},
				} {
					if x.node != one(x.want) || (!host && x.in != one(x.want)) {
						t.Errorf("%s: %s %d on the node, %d on in; want %d", n.name(), x.name, x.node, x.in, one(x.want))
					}
				}
				if c.malfDrop && (st.Drops[spec.DropUnknown] != 1 || st.Interfaces["in"].DroppedPackets != 1) {
					t.Errorf("%s: drops %v, %d on in", n.name(), st.Drops, st.Interfaces["in"].DroppedPackets)
				}
				nc := st.Node
				in := one(!host)
				if nc.InPackets != in || nc.OutPackets+nc.DroppedPackets != 1 {
					t.Errorf("%s: in %d, out %d, dropped %d: want in %d = out + dropped = 1", n.name(), nc.InPackets, nc.OutPackets, nc.DroppedPackets, in)
				}
				var drops []report.Event
				for _, ev := range recorderOf(n).wait(t, int(one(c.dropReport))) {
					if ev.Kind == report.KindDrop {
						drops = append(drops, ev)
					}
				}
				if len(drops) != int(one(c.dropReport)) || c.dropReport && (drops[0].DropReason != 0 || drops[0].Unwatched) {
					t.Errorf("%s: drop reports %+v", n.name(), drops)
				}
				if c.unwatched {
					for oid, w := range st.Watchlist {
						if w.MatchedPackets != 0 {
							t.Errorf("%s: entry %v matched %d packets", n.name(), oid, w.MatchedPackets)
						}
					}
				}
			}
		})
	}
}

// TestBehaviourEdge runs the cases of the INT domain's edge through both
// backends: packets from outside the domain (a sink port, the host) are
// never INT, colliding DSCPs are re-marked as they enter, marked packets
// that are not INT are forwarded unchanged (or dropped with DROP),
// telemetry is never watched, and TCP SYNs are clamped for INT.
func TestBehaviourEdge(t *testing.T) {
	runEdge(t, edgeCases(t, "10.0.1.1", "10.0.2.1"))
}

// TestBehaviourEdgeIPv6 is TestBehaviourEdge on IPv6 (DSCP in the
// traffic class).
func TestBehaviourEdgeIPv6(t *testing.T) {
	runEdge(t, edgeCases(t, "2001:db8:1::1", "2001:db8:2::1"))
}

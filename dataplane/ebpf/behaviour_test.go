package ebpf

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

var mdSession = sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: detInst}

func port80() sai.WatchlistMatch {
	return sai.WatchlistMatch{IPProtocol: sai.IPProtocolTCP, L4DstPort: sai.PortRange{Lo: 80, Hi: 80}}
}

// setup configures a node: DTel (DSCP 0x17 marking unless dt changes it),
// optionally an INT session and a watchlist entry using it.
type setup struct {
	dt      func(a *sai.DTelAttrs)
	sess    *sai.IntSessionAttrs
	match   sai.WatchlistMatch
	sink    bool // "lo", where frames leave, is a sink port
	edge    bool // "in", where they come from, is a sink (edge) port
	mtu     int
	noEntry bool
	// postcard: the entry's flow op is POSTCARD (sess says what to report)
	postcard bool
	act      func(a *sai.WatchlistAction) // changes the entry's action
}

func (s setup) apply(t testing.TB, b sai.Backend) {
	t.Helper()
	d := sai.DefaultDTelAttrs()
	d.SwitchID = nodeID
	d.IntEndpointEnable, d.IntTransitEnable, d.PostcardEnable = true, true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	if s.sink {
		d.SinkPortList = append(d.SinkPortList, "lo")
	}
	if s.edge {
		d.SinkPortList = append(d.SinkPortList, "in")
	}
	if s.dt != nil {
		s.dt(&d)
	}
	if _, err := b.Create(d); err != nil {
		t.Fatal(err)
	}
	if s.sess == nil {
		return
	}
	so, err := b.Create(*s.sess)
	if err != nil {
		t.Fatal(err)
	}
	if s.noEntry {
		return
	}
	act := sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: so, FlowSamplePercent: 100}
	if s.postcard {
		act.FlowOp = sai.FlowOpPostcard
	}
	if s.act != nil {
		s.act(&act)
	}
	if _, err := b.Create(sai.WatchlistEntryAttrs{Priority: 10, Match: s.match, Action: act}); err != nil {
		t.Fatal(err)
	}
}

// nodes returns both backends configured by s.
func nodes(t *testing.T, s setup) []node {
	mtu := s.mtu
	if mtu == 0 {
		mtu = 9000
	}
	sn := newSoftNode(t, mtu)
	bn := newBPFNode(t)
	bn.setMTU(mtu)
	out := []node{sn, bn}
	for _, n := range out {
		s.apply(t, n)
	}
	return out
}

// insertINT is what a source with session sa and this node's hop does to
// orig, built with wire.
func insertINT(t testing.TB, orig []byte, sa sai.IntSessionAttrs, opt wire.SourceOptions) []byte {
	t.Helper()
	inst := wire.Instructions(sa.Instructions)
	hdr := make([]byte, 256)
	n := wire.MDHeaderLen
	typ := spec.TypeMD
	if sa.Mode == sai.IntModeMX {
		typ = spec.TypeMX
		_ = wire.MXHeader{Version: 2, Instructions: inst}.Put(hdr)
	} else {
		_ = wire.MDHeader{Version: 2, HopML: uint8(inst.Words()), RemainingHops: sa.MaxHopCount - 1, Instructions: inst}.Put(hdr)
		m := testHop(nodeID)
		k, _ := wire.PutHop(hdr[n:], inst, 0, &m)
		n += k
	}
	f := make([]byte, len(orig), len(orig)+n+64)
	copy(f, orig)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(f, &p); err != nil {
		t.Fatal(err)
	}
	out, err := wire.InsertINT(f, &p, typ, hdr[:n], &opt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func withM(t testing.TB, f []byte) []byte {
	g := make([]byte, len(f)) // no spare room: PushHop sets M
	copy(g, f)
	var p wire.Packet
	if err := dscpParser.Parse(g, &p); err != nil {
		t.Fatal(err)
	}
	m := testHop(nodeID)
	out, err := wire.PushHop(g, &p, &m, wire.PushOptions{})
	if err != wire.ErrNoRoom {
		t.Fatalf("PushHop: %v", err)
	}
	return out
}

// behaviourCase is one frame through a node configured by s: want is
// what must leave, nil when the frame is dropped.
type behaviourCase struct {
	name string
	s    setup
	in   []byte
	want []byte
}

// behaviourCases are the INT cases shared with the software dataplane for
// one IP version: tcp80 is a TCP segment to port 80, tcp81 one to port 81,
// udp53 a UDP datagram with a checksum and udp0 one without; l3 is the
// IP header length of the frames.
func behaviourCases(t *testing.T, tcp80, tcp81, udp53, udp0 []byte, l3 int) []behaviourCase {
	transitIn := intFrame(t, tcp80, mdSession, 2, false)
	lastHop := mdSession
	lastHop.MaxHopCount = 2
	mx := sai.IntSessionAttrs{Mode: sai.IntModeMX, Instructions: detInst}
	udpPort := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTUDPPort
	}
	ipLen := len(tcp80) - wire.EthernetLen
	malformed := bytes.Clone(transitIn)
	malformed[wire.EthernetLen+l3+20+4] = 0x30 // version 3
	partial := bytes.Clone(transitIn)
	partial[wire.EthernetLen+l3+20+4+2]++ // Hop ML 6: the 10-word stack is not whole hops
	cases := []behaviourCase{
		{"source MD over TCP (DSCP)", setup{sess: &mdSession, match: port80()}, tcp80,
			insertINT(t, tcp80, mdSession, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source MD over UDP (UDP port, NPT 1)", setup{sess: &mdSession, dt: udpPort}, udp53,
			insertINT(t, udp53, mdSession, wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTUDPPort})},
		{"source over UDP without checksum", setup{sess: &mdSession}, udp0,
			insertINT(t, udp0, mdSession, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source MX", setup{sess: &mx, match: port80()}, tcp80,
			insertINT(t, tcp80, mx, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source headers exceed MTU: no INT", setup{sess: &mdSession, match: port80(), mtu: ipLen + 15}, tcp80, tcp80},
		{"source hop exceeds MTU: M bit", setup{sess: &mdSession, match: port80(), mtu: ipLen + 16}, tcp80, nil},
		{"unwatched traffic unchanged", setup{sess: &mdSession, match: port80()}, tcp81, tcp81},
		{"transit pushes metadata", setup{}, transitIn, pushHop(t, transitIn, nodeID)},
		{"transit E bit at Remaining Hop Count 0", setup{}, intFrame(t, tcp80, lastHop, 2, false),
			pushHop(t, intFrame(t, tcp80, lastHop, 2, false), nodeID)},
		{"transit M bit when the MTU is full", setup{mtu: len(transitIn) - wire.EthernetLen + 8}, transitIn, withM(t, transitIn)},
		{"sink strips to the original bytes", setup{sink: true}, transitIn, tcp80},
		{"sink of a UDP-port INT packet restores the port", setup{sink: true, dt: udpPort},
			insertINT(t, udp53, mdSession, wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTUDPPort}), udp53},
		{"sink discards D-bit packets", setup{sink: true}, intFrame(t, tcp80, mdSession, 1, true), nil},
		{"malformed INT forwarded unchanged", setup{}, malformed, malformed},
		{"malformed INT dropped (DROP)", setup{dt: func(a *sai.DTelAttrs) { a.MalformedAction = sai.MalformedDrop }}, malformed, nil},
		{"stack not whole hops forwarded unchanged", setup{}, partial, partial},
		{"stack not whole hops dropped (DROP)", setup{dt: func(a *sai.DTelAttrs) { a.MalformedAction = sai.MalformedDrop }}, partial, nil},
	}
	// The M-bit source case: headers but not this hop fit.
	{
		inst := wire.Instructions(mdSession.Instructions)
		hdr := make([]byte, 12)
		_ = wire.MDHeader{Version: 2, MTUExceeded: true, HopML: uint8(inst.Words()), RemainingHops: 8, Instructions: inst}.Put(hdr)
		f := make([]byte, len(tcp80), len(tcp80)+64)
		copy(f, tcp80)
		var p wire.Packet
		_ = (&wire.Parser{}).Parse(f, &p)
		out, _ := wire.InsertINT(f, &p, spec.TypeMD, hdr, &wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
		cases[5].want = out
	}
	return cases
}

func runBehaviour(t *testing.T, cases []behaviourCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range nodes(t, c.s) {
				got := n.process(t, bytes.Clone(c.in))
				if !bytes.Equal(got, c.want) {
					t.Errorf("%s:\n got %x\nwant %x", n.name(), got, c.want)
				}
			}
		})
	}
}

// TestBehaviour runs the INT cases shared with the software dataplane
// through both backends: the ebpf output must equal the software
// dataplane's and the packet built independently with wire.
func TestBehaviour(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	udp53 := udpFrame("10.0.1.1", "10.0.2.1", 4321, 53, []byte("dns-ish payload!"), true)
	udp0 := udpFrame("10.0.1.1", "10.0.2.1", 4321, 53, []byte("no checksum here"), false)
	tcp81 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0, []byte("not watched"))
	runBehaviour(t, behaviourCases(t, tcp80, tcp81, udp53, udp0, wire.IPv4MinLen))
}

// TestTransitLayouts pushes a hop onto INT packets of each header layout
// transit takes its offsets for as constants (TCP without options, TCP
// with timestamps, UDP by DSCP and by UDP port) and of others around them
// (longer TCP options, IPv4 options, IPv6), with and without UDP
// checksums: both backends must make what wire makes.
func TestTransitLayouts(t *testing.T) {
	ts := []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}        // NOP, NOP, timestamps
	long := append(slices.Clone(ts), 1, 1, 4, 2, 3, 3, 7, 0) // and SACK permitted, window scale
	udpPort := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTUDPPort
	}
	var cases []behaviourCase
	for _, fam := range [][2]string{{"10.0.1.1", "10.0.2.1"}, {"2001:db8:1::1", "2001:db8:2::1"}} {
		a, b := fam[0], fam[1]
		frames := []struct {
			name string
			f    []byte
		}{
			{"TCP", tcpFrame(a, b, 1234, 80, 0, []byte("hello, INT world"))},
			{"TCP with timestamps", wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, ts)},
			{"TCP with 20 bytes of options", wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, long)},
			{"UDP", udpFrame(a, b, 4321, 53, []byte("dns-ish payload!"), true)},
			{"UDP without checksum", udpFrame(a, b, 4321, 53, []byte("no checksum here"), false)},
		}
		for _, f := range frames {
			in := intFrame(t, f.f, mdSession, 2, false)
			cases = append(cases, behaviourCase{a + " " + f.name + " (DSCP)", setup{}, in, pushHop(t, in, nodeID)})
		}
		for _, f := range frames[3:] {
			in := insertINT(t, f.f, mdSession, wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTUDPPort})
			cases = append(cases, behaviourCase{a + " " + f.name + " (UDP port)", setup{dt: udpPort}, in,
				pushHopBy(t, &wire.Parser{UDPPort: 5000}, in, nodeID)})
		}
	}
	// IPv4 with options (a 4-byte no-op list).
	opt := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	withOpt := make([]byte, 0, len(opt)+4)
	withOpt = append(withOpt, opt[:wire.EthernetLen+wire.IPv4MinLen]...)
	withOpt = append(withOpt, 1, 1, 1, 0)
	withOpt = append(withOpt, opt[wire.EthernetLen+wire.IPv4MinLen:]...)
	withOpt[wire.EthernetLen] = 0x46
	binary.BigEndian.PutUint16(withOpt[wire.EthernetLen+2:], uint16(len(withOpt)-wire.EthernetLen))
	binary.BigEndian.PutUint16(withOpt[wire.EthernetLen+10:], wire.IPv4HeaderChecksum(withOpt[wire.EthernetLen:wire.EthernetLen+24]))
	in := intFrame(t, withOpt, mdSession, 2, false)
	cases = append(cases, behaviourCase{"10.0.1.1 TCP behind IPv4 options (DSCP)", setup{}, in, pushHop(t, in, nodeID)})
	runBehaviour(t, cases)
}

// TestBehaviourIPv6 is TestBehaviour on IPv6 (DSCP in the traffic class,
// payload length, no header checksum), plus NPT 2, the watchlist's
// address families and packets with extension headers.
func TestBehaviourIPv6(t *testing.T) {
	const a, b = "2001:db8:1::1", "2001:db8:2::1"
	tcp80 := tcpFrame(a, b, 1234, 80, 0, []byte("hello, INT world"))
	udp53 := udpFrame(a, b, 4321, 53, []byte("dns-ish payload!"), true)
	udp0 := udpFrame(a, b, 4321, 53, []byte("no checksum here"), false)
	tcp81 := tcpFrame(a, b, 1234, 81, 0, []byte("not watched"))
	cases := behaviourCases(t, tcp80, tcp81, udp53, udp0, wire.IPv6Len)
	// ECN bits and a DSCP of their own survive source and sink.
	ecn := tcpFrame(a, b, 1234, 80, 0x2a, []byte("ecn and dscp"))
	ecn[wire.EthernetLen+1] |= 0x10 // ECN 01
	ecnInt := insertINT(t, ecn, mdSession, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
	tcp4 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	v6Match := port80()
	v6Match.SrcPrefix = netip.MustParsePrefix("2001:db8:1::/48")
	v6Other := port80()
	v6Other.DstPrefix = netip.MustParsePrefix("2001:db8:3::/48")
	v4Match := port80()
	v4Match.SrcPrefix = netip.MustParsePrefix("0.0.0.0/0")
	npt2 := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTIPProto
	}
	npt2Out := insertINT(t, tcp80, mdSession, wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTIPProto})
	// ext puts an IPv6 extension header (next-header value nh, body
	// after the first two bytes) in front of the L4 header.
	ext := func(nh byte, body []byte) func([]byte) []byte {
		return func(f []byte) []byte {
			h := append([]byte{f[wire.EthernetLen+6], byte((len(body)+2)/8 - 1)}, body...)
			g := make([]byte, 0, len(f)+len(h))
			g = append(g, f[:wire.EthernetLen+wire.IPv6Len]...)
			g = append(g, h...)
			g = append(g, f[wire.EthernetLen+wire.IPv6Len:]...)
			g[wire.EthernetLen+6] = nh
			binary.BigEndian.PutUint16(g[wire.EthernetLen+4:], be16(g[wire.EthernetLen+4:])+uint16(len(h)))
			return g
		}
	}
	hbh := ext(0, []byte{1, 4, 0, 0, 0, 0}) // hop-by-hop, PadN
	cases = append(cases,
		behaviourCase{"source keeps ECN, sink restores DSCP and ECN", setup{sess: &mdSession, match: port80()}, ecn, ecnInt},
		behaviourCase{"sink restores traffic class", setup{sink: true}, ecnInt, ecn},
		behaviourCase{"IPv6 source prefix matches", setup{sess: &mdSession, match: v6Match}, tcp80,
			insertINT(t, tcp80, mdSession, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		behaviourCase{"IPv6 destination prefix differs: no INT", setup{sess: &mdSession, match: v6Other}, tcp80, tcp80},
		behaviourCase{"IPv4 prefix does not match IPv6", setup{sess: &mdSession, match: v4Match}, tcp80, tcp80},
		behaviourCase{"IPv6 prefix does not match IPv4", setup{sess: &mdSession, match: v6Match}, tcp4, tcp4},
		behaviourCase{"source MD over TCP with NPT 2 (UDP header added)", setup{sess: &mdSession, match: port80(), dt: npt2}, tcp80, npt2Out},
		behaviourCase{"sink of NPT 2 removes the UDP header", setup{sink: true, dt: npt2}, pushHop2(t, npt2Out), tcp80},
	)
	runBehaviour(t, cases)
	// Extension headers in front of the L4 header: the same cases, INT
	// after the L4 header behind them.
	srh := make([]byte, 22) // routing type 4, segments left 0, one segment
	srh[0], srh[1], srh[2] = 4, 0, 0
	copy(srh[6:], netip.MustParseAddr(b).AsSlice())
	for _, x := range []struct {
		name string
		add  func([]byte) []byte
		l3   int
	}{
		{"hop-by-hop", hbh, wire.IPv6Len + 8},
		{"destination options and routing", func(f []byte) []byte {
			return ext(60, []byte{1, 4, 0, 0, 0, 0})(ext(43, srh)(f))
		}, wire.IPv6Len + 8 + 24},
		{"atomic fragment", ext(44, []byte{0, 0, 0, 0, 0, 7}), wire.IPv6Len + 8},
	} {
		t.Run(x.name, func(t *testing.T) {
			runBehaviour(t, behaviourCases(t, x.add(tcp80), x.add(tcp81), x.add(udp53), x.add(udp0), x.l3))
		})
	}
	// A fragment (offset or M set), NPT 2 behind extension headers and
	// more extension header bytes than handled: untouched.
	t.Run("fragments and the rest: untouched", func(t *testing.T) {
		frag := ext(44, []byte{0, 1, 0, 0, 0, 7}) // M set
		long := ext(60, append([]byte{1, 60}, make([]byte, 60)...))
		for _, c := range []struct {
			s setup
			f []byte
		}{
			{setup{sess: &mdSession, match: port80()}, frag(tcp80)},
			{setup{sess: &mdSession, match: port80()}, long(tcp80)},
			{setup{sess: &mdSession, match: port80(), dt: npt2}, hbh(tcp80)},
		} {
			n := newBPFNode(t)
			c.s.apply(t, n)
			if got := n.process(t, bytes.Clone(c.f)); !bytes.Equal(got, c.f) {
				t.Errorf("got %x\nwant %x", got, c.f)
			}
		}
	})
}

// TestSinkReport: the sink's report carries the stack with this node's hop
// on top, exactly as the software dataplane reports it.
func TestSinkReport(t *testing.T) {
	sinkReport(t, tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world")))
}

// TestSinkReportIPv6 is TestSinkReport on an IPv6 frame.
func TestSinkReportIPv6(t *testing.T) {
	evs := sinkReport(t, tcpFrame("2001:db8:1::1", "2001:db8:2::1", 1234, 80, 0, []byte("hello, INT world")))
	if f := evs[1].Flow; f.Src != netip.MustParseAddr("2001:db8:1::1") || f.Dst != netip.MustParseAddr("2001:db8:2::1") || f.DstPort != 80 {
		t.Fatalf("ebpf report flow %v", f)
	}
}

func sinkReport(t *testing.T, tcp80 []byte) []report.Event {
	in := intFrame(t, tcp80, mdSession, 2, false)
	var got []report.Event
	ns := nodes(t, setup{sink: true})
	var pkts [][]byte
	for _, n := range ns {
		n.process(t, bytes.Clone(in))
		rec := recorderOf(n)
		evs := rec.wait(t, 1)
		if len(evs) != 1 || evs[0].Kind != report.KindFlow {
			t.Fatalf("%s: events %+v", n.name(), evs)
		}
		ev := evs[0]
		h, st, err := wire.DecodeMD(ev.Packet[ev.INT:ev.INT+ev.INTLen], 0)
		if err != nil || st.Count() != 3 || h.RemainingHops != 5 || ev.Hop.NodeID != nodeID {
			t.Fatalf("%s: report %+v %d hops err %v", n.name(), h, st.Count(), err)
		}
		pkts = append(pkts, ev.Packet)
		got = append(got, ev)
	}
	if !bytes.Equal(pkts[0], pkts[1]) {
		t.Fatalf("reported frames differ:\nsoft %x\nebpf %x", pkts[0], pkts[1])
	}
	if got[0].Flow != got[1].Flow {
		t.Fatalf("reported flows differ: soft %v, ebpf %v", got[0].Flow, got[1].Flow)
	}
	return got
}

// TestWatchlistPriority: entries apply in priority order, changes apply
// without reloading (the flow cache is invalidated by a generation).
func TestWatchlistPriority(t *testing.T) {
	f80 := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("x"))
	f81 := tcpFrame("10.0.1.1", "10.0.2.1", 1, 81, 0, []byte("x"))
	isINT := func(f []byte) bool {
		var p wire.Packet
		return f != nil && dscpParser.Parse(f, &p) == nil && p.INT >= 0
	}
	for _, n := range nodes(t, setup{sess: &mdSession, noEntry: true}) {
		if isINT(n.process(t, bytes.Clone(f80))) {
			t.Fatalf("%s: INT without a watchlist entry", n.name())
		}
		st, _ := n.Stats(t.Context())
		var sess sai.OID
		for oid := range st.IntSessions {
			sess = oid
		}
		all := sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100}
		lo, err := n.Create(sai.WatchlistEntryAttrs{Priority: 1, Action: all})
		if err != nil {
			t.Fatal(err)
		}
		if !isINT(n.process(t, bytes.Clone(f80))) {
			t.Fatalf("%s: catch-all entry did not apply to a cached flow", n.name())
		}
		hi, err := n.Create(sai.WatchlistEntryAttrs{Priority: 5, Match: port80()}) // NOP carve-out
		if err != nil {
			t.Fatal(err)
		}
		if isINT(n.process(t, bytes.Clone(f80))) || !isINT(n.process(t, bytes.Clone(f81))) {
			t.Fatalf("%s: higher priority NOP entry not applied first", n.name())
		}
		if err := n.Remove(hi); err != nil {
			t.Fatal(err)
		}
		if !isINT(n.process(t, bytes.Clone(f80))) {
			t.Fatalf("%s: removed entry still applies", n.name())
		}
		st, _ = n.Stats(t.Context())
		if st.Watchlist[lo].MatchedPackets != 3 || st.IntSessions[sess].PacketsInitiated != 3 {
			t.Fatalf("%s: stats %+v %+v", n.name(), st.Watchlist[lo], st.IntSessions[sess])
		}
	}
}

// TestSourceInstructionSets: the source's hop for instruction bitmaps
// whose values both backends know (no time): each such field alone, some
// together, with tx utilisation (unknown: all ones) and the checksum
// complement (all ones, last); every word at its place, on both backends
// and as wire builds it.
func TestSourceInstructionSets(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	var cases []behaviourCase
	for _, inst := range []spec.Instruction{
		spec.InstNodeID, spec.InstL1Interfaces, spec.InstQueue, spec.InstL2Interfaces, spec.InstEgressTxUtil,
		spec.InstL1Interfaces | spec.InstL2Interfaces, spec.InstNodeID | spec.InstChecksumComplement,
		detInst | spec.InstEgressTxUtil | spec.InstChecksumComplement,
	} {
		sess := sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: inst}
		cases = append(cases, behaviourCase{"instructions " + inst.String(), setup{sess: &sess, match: port80()}, tcp80,
			insertINT(t, tcp80, sess, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})})
	}
	runBehaviour(t, cases)
}

// TestPacketInterval: with a packet-interval the source instruments the
// first packet of each flow and then the first after the interval; the
// packets in between leave unchanged and count as unsampled.
func TestPacketInterval(t *testing.T) {
	const interval = time.Second
	a := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("flow a"))
	b := tcpFrame("10.0.1.1", "10.0.2.1", 2, 80, 0, []byte("flow b"))
	isINT := func(f []byte) bool {
		var p wire.Packet
		return f != nil && dscpParser.Parse(f, &p) == nil && p.INT >= 0
	}
	for _, n := range nodes(t, setup{sess: &mdSession, noEntry: true}) {
		st, _ := n.Stats(t.Context())
		var sess sai.OID
		for oid := range st.IntSessions {
			sess = oid
		}
		act := sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100, PacketInterval: interval}
		e, err := n.Create(sai.WatchlistEntryAttrs{Priority: 1, Match: port80(), Action: act})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		steps := []struct {
			f       []byte
			instrum bool
		}{{a, true}, {a, false}, {b, true}, {a, false}, {b, false}}
		for i, s := range steps {
			got := n.process(t, bytes.Clone(s.f))
			if isINT(got) != s.instrum {
				t.Fatalf("%s: packet %d: INT %v, want %v", n.name(), i, isINT(got), s.instrum)
			}
			if !s.instrum && !bytes.Equal(got, s.f) {
				t.Fatalf("%s: packet %d left alone but changed:\n got %x\nwant %x", n.name(), i, got, s.f)
			}
		}
		if time.Since(start) >= interval {
			t.Fatalf("%s: five packets took %v, longer than the interval", n.name(), time.Since(start))
		}
		time.Sleep(interval + 50*time.Millisecond)
		if !isINT(n.process(t, bytes.Clone(a))) {
			t.Fatalf("%s: no INT after the interval", n.name())
		}
		st, _ = n.Stats(t.Context())
		if w := st.Watchlist[e]; w.MatchedPackets != 6 || w.UnsampledPackets != 3 || st.IntSessions[sess].PacketsInitiated != 3 ||
			st.IntSessions[sess].NotInitiatedSampled != 3 || st.IntSessions[sess].NotInitiated() != 3 {
			t.Fatalf("%s: entry %+v, session %+v", n.name(), w, st.IntSessions[sess])
		}
	}
}

// TestFragments: IP fragments (IPv4 More Fragments or an offset, IPv6 a
// fragment header with M or an offset) leave both dataplanes untouched,
// watched or carrying INT: no source, transit or sink step.
func TestFragments(t *testing.T) {
	mf4 := func(f []byte) []byte {
		g := bytes.Clone(f)
		h := g[wire.EthernetLen:]
		old := binary.BigEndian.Uint16(h[6:])
		binary.BigEndian.PutUint16(h[6:], old|0x2000) // MF, offset 0: a first fragment
		binary.BigEndian.PutUint16(h[10:], wire.UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, old|0x2000))
		return g
	}
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	withINT := intFrame(t, tcp80, mdSession, 2, false)
	var cases []behaviourCase
	for _, c := range []struct {
		name string
		s    setup
		in   []byte
	}{
		{"watched first fragment: no INT", setup{sess: &mdSession, match: port80()}, mf4(tcp80)},
		{"postcard entry: no postcard", setup{sess: &mdSession, match: port80(), postcard: true}, mf4(tcp80)},
		{"fragment carrying INT: no transit hop", setup{}, mf4(withINT)},
		{"fragment carrying INT at the sink: not stripped", setup{sink: true}, mf4(withINT)},
	} {
		cases = append(cases, behaviourCase{c.name, c.s, c.in, c.in})
	}
	runBehaviour(t, cases)
	for _, n := range nodes(t, setup{sess: &mdSession, match: port80(), postcard: true}) {
		n.process(t, mf4(tcp80))
		if evs := recorderOf(n).wait(t, 0); len(evs) != 0 {
			t.Fatalf("%s: a fragment was reported: %+v", n.name(), evs)
		}
	}
}

// TestCountersAddUp: under a mix of good and bad traffic (watched and
// unwatched packets, INT to strip, INT with the D bit, malformed INT, a
// stack that is not whole hops, a fragment) every packet a node takes in
// is sent, dropped or discarded for its D bit, on both dataplanes:
// in-packets = out-packets + dropped-packets + int-discarded, node-wide
// and summed over the interfaces.
func TestCountersAddUp(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	tcp81 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0, []byte("not watched"))
	in := intFrame(t, tcp80, mdSession, 2, false)
	discard := intFrame(t, tcp80, mdSession, 1, true)
	bad := bytes.Clone(in)
	bad[wire.EthernetLen+wire.IPv4MinLen+20+4] = 0x30 // version 3
	partial := bytes.Clone(in)
	partial[wire.EthernetLen+wire.IPv4MinLen+20+4+2]++ // Hop ML 6
	frag := bytes.Clone(tcp80)
	h := frag[wire.EthernetLen:]
	old := binary.BigEndian.Uint16(h[6:])
	binary.BigEndian.PutUint16(h[6:], old|0x2000)
	binary.BigEndian.PutUint16(h[10:], wire.UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, old|0x2000))
	mix := [][]byte{tcp80, tcp81, in, discard, bad, partial, frag, in, discard, tcp80}
	for _, s := range []setup{
		{sess: &mdSession, match: port80(), sink: true, dt: func(a *sai.DTelAttrs) { a.MalformedAction = sai.MalformedDrop }},
		{sess: &mdSession, match: port80()}, // transit; malformed forwarded
	} {
		for _, n := range nodes(t, s) {
			for _, f := range mix {
				if b, ok := n.(*bpfNode); ok {
					// The ingress program counts what comes in.
					runProgFrom(t, b.objs.IntdIngress, bytes.Clone(f), 1)
				}
				n.process(t, bytes.Clone(f))
			}
			st, err := n.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			c := st.Node
			if c.InPackets != uint64(len(mix)) || c.InPackets != c.OutPackets+c.DroppedPackets+c.IntDiscarded {
				t.Errorf("%s: in %d, out %d + dropped %d + discarded %d (sink %v)", n.name(), c.InPackets, c.OutPackets,
					c.DroppedPackets, c.IntDiscarded, s.sink)
			}
			if s.sink && c.IntDiscarded != 2 {
				t.Errorf("%s: %d D-bit discards, want 2", n.name(), c.IntDiscarded)
			}
			var sum sai.Counters
			for _, ic := range st.Interfaces {
				sum.InPackets += ic.InPackets
				sum.OutPackets += ic.OutPackets
				sum.DroppedPackets += ic.DroppedPackets
				sum.IntDiscarded += ic.IntDiscarded
			}
			if sum.InPackets != c.InPackets || sum.OutPackets != c.OutPackets || sum.DroppedPackets != c.DroppedPackets ||
				sum.IntDiscarded != c.IntDiscarded {
				t.Errorf("%s: interfaces sum to %+v, node %+v", n.name(), sum, c)
			}
		}
	}
}

// fastA and fastB are the hosts of fastFrames' packets.
const fastA, fastB = "10.0.1.1", "10.0.2.1"

// fastFrames are the packets TestTransitFastPath and TestSinkFastPath
// build their cases from.
type fastFrames struct {
	ts, long  []byte // TCP options: timestamps (12 bytes), and 20 bytes
	tcp, udp  []byte
	last      sai.IntSessionAttrs // a hop limit of 2
	malformed []byte              // INT-MD over tcp with a shim length off by a word
	withInst  func(spec.Instruction) sai.IntSessionAttrs
}

func newFastFrames(t *testing.T) fastFrames {
	f := fastFrames{ts: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}}
	f.long = append(slices.Clone(f.ts), 1, 1, 4, 2, 3, 3, 7, 0)
	f.tcp = tcpFrame(fastA, fastB, 1234, 80, 0, []byte("hello, INT world"))
	f.udp = udpFrame(fastA, fastB, 4321, 53, []byte("dns-ish payload!"), true)
	f.last = mdSession
	f.last.MaxHopCount = 2
	f.malformed = intFrame(t, f.tcp, mdSession, 2, false)
	f.malformed[wire.EthernetLen+wire.IPv4MinLen+wire.TCPMinLen+1]++
	f.withInst = func(inst spec.Instruction) sai.IntSessionAttrs {
		sa := mdSession
		sa.Instructions = inst
		return sa
	}
	return f
}

// TestTransitFastPath runs INT packets through intd_egress with its
// transit step for common layouts (intd_transit, reached by a tail call)
// and without it (the steps entry deleted): both must make the same bytes
// and counters, and the fast step must take exactly the layouts it is
// written for. Those it leaves to the general path include what it hands
// back after its checks (E bit, M bit, malformed, longer TCP options),
// which must come out unchanged by the attempt.
func TestTransitFastPath(t *testing.T) {
	const a, b = fastA, fastB
	f := newFastFrames(t)
	ts, long, tcp, udp, last, malformed, withInst := f.ts, f.long, f.tcp, f.udp, f.last, f.malformed, f.withInst
	noTime := spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstL2Interfaces | spec.InstEgressTxUtil | spec.InstBuffer
	mx := intFrame(t, tcp, mdSession, 0, false)
	mx[wire.EthernetLen+wire.IPv4MinLen+wire.TCPMinLen] = byte(spec.TypeMX) << 4
	cases := []struct {
		name string
		in   []byte
		mtu  int
		fast bool
	}{
		{"TCP", intFrame(t, tcp, mdSession, 2, false), 0, true},
		{"TCP, first transit", intFrame(t, tcp, mdSession, 0, false), 0, true},
		{"TCP with timestamps", intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, ts), mdSession, 1, false), 0, true},
		{"UDP", intFrame(t, udp, mdSession, 2, false), 0, true},
		{"UDP without checksum", intFrame(t, udpFrame(a, b, 4321, 53, []byte("no checksum here"), false), mdSession, 2, false), 0, true},
		{"node id only", intFrame(t, tcp, withInst(spec.InstNodeID), 2, false), 0, true},
		{"every instruction but time", intFrame(t, tcp, withInst(noTime), 2, false), 0, true},
		{"checksum complement", intFrame(t, tcp, withInst(spec.InstNodeID|spec.InstChecksumComplement), 2, false), 0, false},
		{"TCP with 20 bytes of options", intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, long), mdSession, 2, false), 0, false},
		{"hop limit reached (E bit)", intFrame(t, tcp, last, 2, false), 0, false},
		{"no room in the MTU (M bit)", intFrame(t, tcp, mdSession, 2, false), 100, false},
		{"malformed shim length", malformed, 0, false},
		{"INT-MX", mx, 0, false},
		{"IPv6", intFrame(t, tcpFrame("2001:db8:1::1", "2001:db8:2::1", 1234, 80, 0, []byte("hello, INT world")), mdSession, 2, false), 0, false},
		{"not INT", tcp, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outs [2][]byte
			var ctrs [2][intdCounterNCTR]uint64
			for i, fast := range []bool{true, false} {
				n := newBPFNode(t)
				n.setMTU(cmp.Or(c.mtu, 9000))
				setup{}.apply(t, n)
				if !fast {
					if err := n.objs.Steps.Delete(uint32(intdStepSTEP_TRANSIT)); err != nil {
						t.Fatal(err)
					}
				}
				outs[i] = n.process(t, bytes.Clone(c.in))
				ctrs[i] = n.counterSum()
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Errorf("with intd_transit:\n%x\nwithout:\n%x", outs[0], outs[1])
			}
			if got := ctrs[0][intdCounterC_FAST_TRANSIT]; got != map[bool]uint64{true: 1}[c.fast] {
				t.Errorf("intd_transit pushed %d hops, want fast=%v", got, c.fast)
			}
			ctrs[0][intdCounterC_FAST_TRANSIT] = 0
			if ctrs[0] != ctrs[1] {
				t.Errorf("counters with intd_transit %v, without %v", ctrs[0], ctrs[1])
			}
			if c.fast && bytes.Equal(outs[0], c.in) {
				t.Errorf("no hop pushed")
			}
		})
	}
}

// TestSinkFastPath runs each packet twice (the flow's report, then its
// suppression) through a sink with intd_sink and without it (its steps
// entry deleted): the same bytes, counters and reports, and intd_sink's
// strip for exactly the layouts it is written for.
func TestSinkFastPath(t *testing.T) {
	const a, b = fastA, fastB
	f := newFastFrames(t)
	ts, long, tcp, udp, last, malformed, withInst := f.ts, f.long, f.tcp, f.udp, f.last, f.malformed, f.withInst
	latency := spec.InstNodeID | spec.InstHopLatency | spec.InstQueue
	mx := intFrame(t, tcp, mdSession, 0, false)
	mx[wire.EthernetLen+wire.IPv4MinLen+wire.TCPMinLen] = byte(spec.TypeMX) << 4
	adaptive := func(a *sai.DTelAttrs) {
		a.FlowReport.Adaptive, a.FlowReport.LatencyFactor, a.FlowReport.LatencyFloor = true, 4, time.Millisecond
	}
	cases := []struct {
		name string
		s    setup
		in   []byte
		fast bool
	}{
		{"TCP", setup{sink: true}, intFrame(t, tcp, mdSession, 2, false), true},
		{"TCP with a DSCP", setup{sink: true}, intFrame(t, tcpFrame(a, b, 1234, 80, 0x2e, []byte("hello, INT world")), mdSession, 2, false), true},
		{"TCP, no hop", setup{sink: true}, intFrame(t, tcp, mdSession, 0, false), true},
		{"TCP with timestamps", setup{sink: true}, intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x10, ts), mdSession, 1, false), true},
		{"UDP", setup{sink: true}, intFrame(t, udp, mdSession, 2, false), true},
		{"UDP without checksum", setup{sink: true}, intFrame(t, udpFrame(a, b, 4321, 53, []byte("no checksum here"), false), mdSession, 2, false), true},
		{"hop latencies", setup{sink: true}, intFrame(t, tcp, withInst(latency), 3, false), true},
		{"hop latencies, adaptive filter", setup{sink: true, dt: adaptive}, intFrame(t, tcp, withInst(latency), 3, false), true},
		{"node id only", setup{sink: true}, intFrame(t, tcp, withInst(spec.InstNodeID), 5, false), true},
		{"SYN", setup{sink: true}, intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x02, ts), mdSession, 2, false), false},
		{"FIN", setup{sink: true}, intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x11, ts), mdSession, 2, false), false},
		{"TCP with 20 bytes of options", setup{sink: true}, intFrame(t, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x10, long), mdSession, 2, false), false},
		{"discard (D bit)", setup{sink: true}, intFrame(t, tcp, mdSession, 2, true), false},
		{"hop limit reached (E bit)", setup{sink: true}, intFrame(t, tcp, last, 2, false), false},
		{"malformed shim length", setup{sink: true}, malformed, false},
		{"INT-MX", setup{sink: true}, mx, false},
		{"IPv6", setup{sink: true}, intFrame(t, tcpFrame("2001:db8:1::1", "2001:db8:2::1", 1234, 80, 0, []byte("hello, INT world")), mdSession, 2, false), false},
		{"from an edge port", setup{sink: true, edge: true}, intFrame(t, tcp, mdSession, 2, false), false},
		{"not INT", setup{sink: true}, tcp, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outs [2][2][]byte
			var ctrs [2][intdCounterNCTR]uint64
			var evs [2][]report.Event
			for i, fast := range []bool{true, false} {
				n := newBPFNode(t)
				n.setMTU(9000)
				c.s.apply(t, n)
				if !fast {
					if err := n.objs.Steps.Delete(uint32(intdStepSTEP_SINK)); err != nil {
						t.Fatal(err)
					}
				}
				for k := range outs[i] {
					outs[i][k] = n.process(t, bytes.Clone(c.in))
				}
				ctrs[i] = n.counterSum()
				evs[i] = n.rec.wait(t, int(ctrs[i][intdCounterC_EV_SENT]))
				for k := range evs[i] {
					e := &evs[i][k]
					e.Now, e.Hop.EgressTimestamp, e.Hop.IngressTimestamp, e.Hop.HopLatency = 0, 0, 0, 0
				}
			}
			if !reflect.DeepEqual(outs[0], outs[1]) {
				t.Errorf("with intd_sink:\n%x\nwithout:\n%x", outs[0], outs[1])
			}
			if got := ctrs[0][intdCounterC_FAST_SINK]; got != map[bool]uint64{true: 2}[c.fast] {
				t.Errorf("intd_sink stripped %d packets of 2, want fast=%v", got, c.fast)
			}
			ctrs[0][intdCounterC_FAST_SINK] = 0
			if ctrs[0] != ctrs[1] {
				t.Errorf("counters with intd_sink %v, without %v", ctrs[0], ctrs[1])
			}
			if !reflect.DeepEqual(evs[0], evs[1]) {
				t.Errorf("reports with intd_sink %+v, without %+v", evs[0], evs[1])
			}
			if c.fast && (len(evs[0]) != 1 || bytes.Equal(outs[0][0], c.in) || len(outs[0][0]) >= len(c.in)) {
				t.Errorf("%d reports, %d bytes of %d: want one report and INT stripped", len(evs[0]), len(outs[0][0]), len(c.in))
			}
		})
	}
}

// TestSourceFastPath runs each packet three times (the first classifies
// the flow, the others find its cached verdict) through a source with
// intd_source and without it (its steps entry deleted): the same bytes,
// counters, watchlist and session statistics, and intd_source finishing
// exactly the layouts and flows it is written for.
func TestSourceFastPath(t *testing.T) {
	const a, b = fastA, fastB
	f := newFastFrames(t)
	ts, long, tcp, udp, withInst := f.ts, f.long, f.tcp, f.udp, f.withInst
	noTime := spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstL2Interfaces | spec.InstEgressTxUtil | spec.InstBuffer
	src := setup{sess: &mdSession, match: port80()}
	port53 := sai.WatchlistMatch{IPProtocol: sai.IPProtocolUDP, L4DstPort: sai.PortRange{Lo: 53, Hi: 53}}
	with := func(sa sai.IntSessionAttrs) setup { return setup{sess: &sa, match: port80()} }
	discard, mx := mdSession, mdSession
	discard.Discard = true
	mx.Mode = sai.IntModeMX
	domain := mdSession
	domain.DomainSpecificID, domain.DSInstruction, domain.DSFlags = 7, 0x8000, 0x0100
	half := src
	half.act = func(a *sai.WatchlistAction) { a.FlowSamplePercent = 1 } // the flow: most likely out
	interval := src
	interval.act = func(a *sai.WatchlistAction) { a.PacketInterval = time.Hour }
	// ECN CE, which the marking must keep.
	ecn := tcpFrame(a, b, 1234, 80, 0x2e, []byte("hello, INT world"))
	h := ecn[wire.EthernetLen:]
	old := binary.BigEndian.Uint16(h)
	binary.BigEndian.PutUint16(h, old|3)
	binary.BigEndian.PutUint16(h[10:], wire.UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, old|3))
	const noIngress = ^uint32(0)
	// The MTU that leaves room for exactly the shim, the INT-MD header
	// and detInst's hop of 5 words.
	exact := len(tcp) - wire.EthernetLen + 16 + 5*4
	cases := []struct {
		name string
		s    setup
		in   []byte
		from uint32 // ingress ifindex; 0 is inIfindex
		mtu  int
		fast bool
	}{
		{"TCP", src, tcp, 0, 0, true},
		{"TCP with a DSCP", src, tcpFrame(a, b, 1234, 80, 0x2e, []byte("hello, INT world")), 0, 0, true},
		{"TCP with timestamps", src, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, ts), 0, 0, true},
		{"TCP with a DSCP and ECN", src, ecn, 0, 0, true},
		{"UDP", setup{sess: &mdSession, match: port53}, udp, 0, 0, true},
		{"UDP without checksum", setup{sess: &mdSession, match: port53}, udpFrame(a, b, 4321, 53, []byte("no checksum here"), false), 0, 0, true},
		{"from the host", src, tcp, noIngress, 0, true},
		{"from a port intd does not know", src, tcp, inIfindex + 1, 0, true},
		{"from an edge port", setup{sess: &mdSession, match: port80(), edge: true}, tcp, 0, 0, true},
		{"node id only", with(withInst(spec.InstNodeID)), tcp, 0, 0, true},
		{"every instruction but time", with(withInst(noTime)), tcp, 0, 0, true},
		{"D bit", with(discard), tcp, 0, 0, true},
		{"not watched", src, tcpFrame(a, b, 1234, 81, 0, []byte("not watched")), 0, 0, true},
		{"flows sampled at 1 %", half, tcp, 0, 0, true},
		{"exactly the MTU", src, tcp, 0, exact, true},
		{"no room in the MTU (M bit)", src, tcp, 0, exact - 1, false},
		{"no room at all", src, tcp, 0, exact - 21, false},
		{"checksum complement", with(withInst(spec.InstNodeID | spec.InstChecksumComplement)), tcp, 0, 0, false},
		{"domain-specific words", with(domain), tcp, 0, 0, false},
		{"SYN", src, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x02, ts), 0, 0, false},
		{"TCP with 20 bytes of options", src, wiretest.SYNFrame(a, b, 1234, 80, 0, 0x18, long), 0, 0, false},
		{"INT-MX", with(mx), tcp, 0, 0, false},
		{"postcard", setup{sess: &mdSession, match: port80(), postcard: true}, tcp, 0, 0, false},
		{"packet interval", interval, tcp, 0, 0, false},
		{"IPv6", src, tcpFrame("2001:db8:1::1", "2001:db8:2::1", 1234, 80, 0, []byte("hello, INT world")), 0, 0, false},
		{"DSCP-marked (INT)", src, intFrame(t, tcp, mdSession, 1, false), 0, 0, false},
	}
	type result struct {
		outs [3][]byte
		ctrs [intdCounterNCTR]uint64
		wl   sai.WatchlistEntryStats
		sess sai.IntSessionStats
		fast uint64
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r [2]result
			for i, fast := range []bool{true, false} {
				n := newBPFNode(t)
				n.setMTU(cmp.Or(c.mtu, 9000))
				c.s.apply(t, n)
				switch c.from {
				case 0:
				case noIngress:
					n.in = 0
				default:
					n.in = c.from
				}
				if !fast {
					if err := n.objs.Steps.Delete(uint32(intdStepSTEP_SOURCE)); err != nil {
						t.Fatal(err)
					}
				}
				for k := range r[i].outs {
					r[i].outs[k] = n.process(t, bytes.Clone(c.in))
				}
				r[i].ctrs = n.counterSum()
				r[i].fast = r[i].ctrs[intdCounterC_FAST_SOURCE] + r[i].ctrs[intdCounterC_FAST_PASS]
				r[i].ctrs[intdCounterC_FAST_SOURCE], r[i].ctrs[intdCounterC_FAST_PASS] = 0, 0
				st, err := n.Stats(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range st.Watchlist {
					r[i].wl.MatchedPackets += w.MatchedPackets
					r[i].wl.MatchedBytes += w.MatchedBytes
					r[i].wl.UnsampledPackets += w.UnsampledPackets
				}
				for _, s := range st.IntSessions {
					r[i].sess.PacketsInitiated += s.PacketsInitiated
					r[i].sess.NotInitiatedNoRoom += s.NotInitiatedNoRoom
					r[i].sess.NotInitiatedUnsupported += s.NotInitiatedUnsupported
					r[i].sess.NotInitiatedSampled += s.NotInitiatedSampled
				}
			}
			if !reflect.DeepEqual(r[0].outs, r[1].outs) {
				t.Errorf("with intd_source:\n%x\nwithout:\n%x", r[0].outs, r[1].outs)
			}
			if r[0].ctrs != r[1].ctrs || r[0].wl != r[1].wl || r[0].sess != r[1].sess {
				t.Errorf("counters, watchlist and session statistics with intd_source\n%v %+v %+v\nwithout\n%v %+v %+v",
					r[0].ctrs, r[0].wl, r[0].sess, r[1].ctrs, r[1].wl, r[1].sess)
			}
			// The first packet is the flow's first: classify's.
			if want := map[bool]uint64{true: 2}[c.fast]; r[0].fast != want {
				t.Errorf("intd_source finished %d packets of 3, want %d", r[0].fast, want)
			}
			if r[1].fast != 0 {
				t.Errorf("without its steps entry intd_source finished %d packets", r[1].fast)
			}
		})
	}
}

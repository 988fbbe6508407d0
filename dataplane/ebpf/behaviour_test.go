package ebpf

import (
	"bytes"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
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
	sink    bool
	mtu     int
	noEntry bool
}

func (s setup) apply(t testing.TB, b sai.Backend) {
	t.Helper()
	d := sai.DefaultDTelAttrs()
	d.SwitchID = nodeID
	d.IntEndpointEnable, d.IntTransitEnable, d.PostcardEnable = true, true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	if s.sink {
		d.SinkPortList = []string{"lo"}
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
	typ := wire.TypeMD
	if sa.Mode == sai.IntModeMX {
		typ = wire.TypeMX
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

// TestBehaviour runs the INT cases shared with the software dataplane
// through both backends: the ebpf output must equal the software
// dataplane's and the packet built independently with wire.
func TestBehaviour(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	udp53 := udpFrame("10.0.1.1", "10.0.2.1", 4321, 53, []byte("dns-ish payload!"), true)
	udp0 := udpFrame("10.0.1.1", "10.0.2.1", 4321, 53, []byte("no checksum here"), false)
	tcp81 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0, []byte("not watched"))
	transitIn := intFrame(t, tcp80, mdSession, 2, false)
	lastHop := mdSession
	lastHop.MaxHopCount = 2
	mx := sai.IntSessionAttrs{Mode: sai.IntModeMX, Instructions: detInst}
	udpPort := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.IntUDPDstPort, a.IntUDPNPT = 5000, sai.NPTUDPPayload
	}
	cases := []struct {
		name string
		s    setup
		in   []byte
		want []byte // nil: dropped
	}{
		{"source MD over TCP (DSCP)", setup{sess: &mdSession, match: port80()}, tcp80,
			insertINT(t, tcp80, mdSession, wire.SourceOptions{Encap: wire.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source MD over UDP (UDP port, NPT 1)", setup{sess: &mdSession, dt: udpPort}, udp53,
			insertINT(t, udp53, mdSession, wire.SourceOptions{Encap: wire.EncapUDPPort, UDPPort: 5000, NPT: wire.NPTUDPPort})},
		{"source over UDP without checksum", setup{sess: &mdSession}, udp0,
			insertINT(t, udp0, mdSession, wire.SourceOptions{Encap: wire.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source MX", setup{sess: &mx, match: port80()}, tcp80,
			insertINT(t, tcp80, mx, wire.SourceOptions{Encap: wire.EncapDSCP, DSCP: 0x17, Mask: 0x3f})},
		{"source headers exceed MTU: no INT", setup{sess: &mdSession, match: port80(), mtu: len(tcp80) - 14 + 15}, tcp80, tcp80},
		{"source hop exceeds MTU: M bit", setup{sess: &mdSession, match: port80(), mtu: len(tcp80) - 14 + 16}, tcp80, nil},
		{"unwatched traffic unchanged", setup{sess: &mdSession, match: port80()}, tcp81, tcp81},
		{"transit pushes metadata", setup{}, transitIn, pushHop(t, transitIn, nodeID)},
		{"transit E bit at Remaining Hop Count 0", setup{}, intFrame(t, tcp80, lastHop, 2, false),
			pushHop(t, intFrame(t, tcp80, lastHop, 2, false), nodeID)},
		{"transit M bit when the MTU is full", setup{mtu: len(transitIn) - 14 + 8}, transitIn, withM(t, transitIn)},
		{"sink strips to the original bytes", setup{sink: true}, transitIn, tcp80},
		{"sink of a UDP-port INT packet restores the port", setup{sink: true, dt: udpPort},
			insertINT(t, udp53, mdSession, wire.SourceOptions{Encap: wire.EncapUDPPort, UDPPort: 5000, NPT: wire.NPTUDPPort}), udp53},
		{"sink discards D-bit packets", setup{sink: true}, intFrame(t, tcp80, mdSession, 1, true), nil},
		{"malformed INT dropped", setup{}, func() []byte {
			f := bytes.Clone(transitIn)
			f[14+20+20+4] = 0x30 // version 3
			return f
		}(), nil},
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
		out, _ := wire.InsertINT(f, &p, wire.TypeMD, hdr, &wire.SourceOptions{Encap: wire.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
		cases[5].want = out
	}
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

// TestSinkReport: the sink's report carries the stack with this node's hop
// on top, exactly as the software dataplane reports it.
func TestSinkReport(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	in := intFrame(t, tcp80, mdSession, 2, false)
	ns := nodes(t, setup{sink: true})
	var pkts [][]byte
	for _, n := range ns {
		n.process(t, bytes.Clone(in))
		var rec *recorder
		switch n := n.(type) {
		case *softNode:
			rec = n.rec
		case *bpfNode:
			rec = n.rec
		}
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
	}
	if !bytes.Equal(pkts[0], pkts[1]) {
		t.Fatalf("reported frames differ:\nsoft %x\nebpf %x", pkts[0], pkts[1])
	}
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
		if w := st.Watchlist[e]; w.MatchedPackets != 6 || w.UnsampledPackets != 3 || st.IntSessions[sess].PacketsInitiated != 3 {
			t.Fatalf("%s: entry %+v, session %+v", n.name(), w, st.IntSessions[sess])
		}
	}
}

package soft

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

var specSession = sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID | spec.InstQueue}

func port80() sai.WatchlistMatch {
	return sai.WatchlistMatch{IPProtocol: sai.IPProtocolTCP, L4DstPort: sai.PortRange{Lo: 80, Hi: 80}}
}

// TestSpecExampleMDOverTCP reproduces INT v2.1 "Example with INT-MD over
// TCP": the packet arriving at the sink (Switch3) has DSCP 0x17, a shim of
// type 1 / NPT 0 / length 7, an INT-MD header with Hop ML 2 and Remaining
// Hop Count 6, and the node id + queue occupancy of hop 2 then hop 1.
func TestSpecExampleMDOverTCP(t *testing.T) {
	l := newLine(t, lineOpts{session: specSession, match: port80(), rate: []int64{1e9}})
	// A packet of another flow ahead of ours in s1's queue gives hop 1 a
	// non-zero queue occupancy.
	ahead := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0, make([]byte, 400))
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	l.send(ahead)
	l.send(orig)
	l.settle()
	if n := l.taps[1].count(); n != 2 {
		t.Fatalf("s2 sent %d frames, want 2", n)
	}
	got := l.taps[1].frames[1] // as received by the sink

	// Build the expected packet independently of the pipeline.
	const l4 = wire.EthernetLen + wire.IPv4MinLen
	const ins = l4 + wire.TCPMinLen
	intBlock := []byte{
		0x10, 7, 0x00, 0x00, // shim: type 1, NPT 0, length 7, original DSCP 0
		0x20, 0x00, 2, 6, // ver 2, D=E=M=0, Hop ML 2, Remaining Hop Count 6
		0x90, 0x00, 0x00, 0x00, // instruction bitmap: node id + queue; domain 0
		0x00, 0x00, 0x00, 0x00, // DS instruction, DS flags
		0, 0, 0, 2, // node id of hop2
		0, 0, 0, 0, // queue id 0 + occupancy of hop2 (s2 has no queue)
		0, 0, 0, 1, // node id of hop1
		0, 0, 0, 0, // queue id 0 + occupancy of hop1 (filled below)
	}
	binary.BigEndian.PutUint32(intBlock[28:], uint32(len(ahead)))
	want := append(append(append([]byte{}, orig[:ins]...), intBlock...), orig[ins:]...)
	ip := want[wire.EthernetLen:]
	ip[1] = 0x17 << 2
	ip[8] -= 2 // two routed hops
	binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+uint16(len(intBlock)))
	binary.BigEndian.PutUint16(ip[10:], wire.IPv4HeaderChecksum(ip[:20]))
	seg := want[l4:]
	binary.BigEndian.PutUint16(seg[16:], wire.L4Checksum(wire.PseudoHeaderSum(ip[12:16], ip[16:20], wire.ProtoTCP), seg, 16))
	if !bytes.Equal(got, want) {
		t.Fatalf("packet at the sink:\n got %x\nwant %x", got, want)
	}

	// The receiver gets the original bytes (TTL aside) and the sink
	// reports the stack with its own hop on top.
	if got := l.h2().frames[1]; !bytes.Equal(got, expectTTL(orig, 3)) {
		t.Fatalf("h2 got\n%x\nwant\n%x", got, expectTTL(orig, 3))
	}
	evs := l.rec[2].kind(report.KindFlow)
	if len(evs) != 1 {
		t.Fatalf("sink generated %d flow events, want 1", len(evs))
	}
	ev := evs[0]
	h, st, err := wire.DecodeMD(ev.Packet[ev.INT:ev.INT+wire.MDHeaderLen+3*8], 0)
	if err != nil || st.Count() != 3 || h.RemainingHops != 5 || ev.Hop.NodeID != 3 {
		t.Fatalf("sink report: %+v %d hops err %v node %d", h, st.Count(), err, ev.Hop.NodeID)
	}
	stats, _ := l.sw[0].Stats(t.Context())
	if stats.IntSessions[l.sess].PacketsInitiated != 1 || stats.Watchlist[l.entry].MatchedPackets != 1 {
		t.Fatalf("s1 stats: %+v %+v", stats.IntSessions, stats.Watchlist)
	}
	if s3, _ := l.sw[2].Stats(t.Context()); s3.Node.IntStripped != 1 || s3.Interfaces["p2"].IntStripped != 1 {
		t.Fatalf("s3 counters %+v", s3.Node)
	}
}

func mdAt(t *testing.T, f []byte, pr *wire.Parser) (wire.MDHeader, wire.MDStack) {
	t.Helper()
	p := parse(t, pr, f)
	if p.INT < 0 {
		t.Fatalf("no INT in %x", f)
	}
	h, st, err := wire.DecodeMD(f[p.INT:p.INT+p.INTLen], 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

var dscpParser = &wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}

func TestEBit(t *testing.T) {
	sa := specSession
	sa.MaxHopCount = 2
	l := newLine(t, lineOpts{session: sa, match: port80()})
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("x"))
	l.send(orig)
	h, st := mdAt(t, l.taps[1].last(t), dscpParser)
	if h.HopCountExceeded || h.RemainingHops != 0 || st.Count() != 2 {
		t.Fatalf("after s2: %+v, %d hops", h, st.Count())
	}
	ev := l.rec[2].kind(report.KindFlow)[0]
	h, st = mdAt(t, ev.Packet, dscpParser)
	if !h.HopCountExceeded || st.Count() != 2 {
		t.Fatalf("at the sink: E=%v, %d hops; want E set, 2 hops", h.HopCountExceeded, st.Count())
	}
	if s3, _ := l.sw[2].Stats(t.Context()); s3.Node.EBitSet != 1 {
		t.Fatalf("EBitSet = %d", s3.Node.EBitSet)
	}
	if got := l.h2().last(t); !bytes.Equal(got, expectTTL(orig, 3)) {
		t.Fatalf("h2 bytes differ")
	}
}

func TestMBit(t *testing.T) {
	sa := specSession
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, make([]byte, 1000))
	ipLen := len(orig) - wire.EthernetLen
	// s1 has room for the headers and its hop (16+8), s2 has no room for
	// one more hop.
	l := newLine(t, lineOpts{session: sa, match: port80(), mtu: []int{ipLen + 24, ipLen + 24 + 4}})
	l.send(orig)
	h, st := mdAt(t, l.taps[1].last(t), dscpParser)
	if !h.MTUExceeded || st.Count() != 1 || h.RemainingHops != 7 {
		t.Fatalf("after s2: M=%v hops=%d rhc=%d", h.MTUExceeded, st.Count(), h.RemainingHops)
	}
	if got := l.h2().last(t); !bytes.Equal(got, expectTTL(orig, 3)) {
		t.Fatalf("h2 bytes differ")
	}
	s2, _ := l.sw[1].Stats(t.Context())
	if s2.Node.MBitSet != 1 || s2.Node.IntTransited != 0 {
		t.Fatalf("s2 counters %+v", s2.Node)
	}

	// Headers fit at the source but its metadata does not: initiate, set M.
	l = newLine(t, lineOpts{session: sa, match: port80(), mtu: []int{ipLen + 20}})
	l.send(orig)
	h, st = mdAt(t, l.taps[0].last(t), dscpParser)
	if !h.MTUExceeded || st.Count() != 0 || h.RemainingHops != 8 {
		t.Fatalf("source: M=%v hops=%d rhc=%d", h.MTUExceeded, st.Count(), h.RemainingHops)
	}
	// Headers do not fit: no INT at all.
	l = newLine(t, lineOpts{session: sa, match: port80(), mtu: []int{ipLen + 15}})
	l.send(orig)
	if got := l.taps[0].last(t); !bytes.Equal(got, expectTTL(orig, 1)) {
		t.Fatal("source inserted INT beyond the MTU")
	}
	st1, _ := l.sw[0].Stats(t.Context())
	if st1.IntSessions[l.sess].NotInitiatedNoRoom != 1 || st1.IntSessions[l.sess].PacketsInitiated != 0 {
		t.Fatalf("session stats %+v", st1.IntSessions[l.sess])
	}
}

func TestDBitDiscardedAtSink(t *testing.T) {
	sa := specSession
	sa.Discard = true
	l := newLine(t, lineOpts{session: sa, match: port80()})
	l.send(tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("probe")))
	if l.h2().count() != 0 {
		t.Fatal("probe with D set reached h2")
	}
	if n := len(l.rec[2].kind(report.KindFlow)); n != 1 {
		t.Fatalf("sink reported %d times, want 1", n)
	}
	s3, _ := l.sw[2].Stats(t.Context())
	if s3.Node.IntStripped != 1 || s3.Node.OutPackets != 0 {
		t.Fatalf("sink counters %+v", s3.Node)
	}
}

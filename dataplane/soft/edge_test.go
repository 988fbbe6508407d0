package soft

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// edgeLine is h1 - s1 - s2 - s3 - h2 deployed as a domain: the
// host-facing ports (s1 p1, s3 p2) are sink (edge) ports, s1 watches TCP
// port 80 with INT, dt changes every switch's DTel object.
func edgeLine(t *testing.T, sess sai.IntSessionAttrs, dt func(a *sai.DTelAttrs)) *line {
	return newLine(t, lineOpts{session: sess, match: port80(), dtel: func(i int, a *sai.DTelAttrs) {
		if i == 0 {
			a.SinkPortList = []string{"p1"}
		}
		if dt != nil {
			dt(a)
		}
	}})
}

// withDSCP returns f with the IPv4 DSCP set (checksum fixed).
func withDSCP(f []byte, dscp uint8) []byte {
	g := bytes.Clone(f)
	h := g[wire.EthernetLen:]
	h[1] = dscp<<2 | h[1]&3
	binary.BigEndian.PutUint16(h[10:], 0)
	binary.BigEndian.PutUint16(h[10:], wire.IPv4HeaderChecksum(h[:20]))
	return g
}

// TestEdgeDSCP: user packets entering the domain arrive byte for byte
// (TTL aside) whatever their DSCP: EF, AF41 and CS6 untouched, watched or
// not; one whose DSCP collides with the INT marking is re-marked at the
// source edge (the configured value, ECN kept), instrumented when watched
// (the sink restores the re-marked DSCP), never taken for INT downstream,
// and counted. Marked garbage from either host is never parsed as INT.
func TestEdgeDSCP(t *testing.T) {
	l := edgeLine(t, specSession, func(a *sai.DTelAttrs) { a.IntL4DSCPRemark = 10 })
	var sent, want [][]byte
	for _, dscp := range []uint8{46, 34, 48} {
		for _, port := range []uint16{80, 81} {
			f := tcpFrame("10.0.1.1", "10.0.2.1", 1234, port, dscp, []byte("user data"))
			sent, want = append(sent, f), append(want, expectTTL(f, 3))
		}
		u := udpFrame("10.0.1.1", "10.0.2.1", 5353, 53, []byte("user datagram"), true)
		u = withDSCP(u, dscp)
		sent, want = append(sent, u), append(want, expectTTL(u, 3))
	}
	// Colliding: watched (INT on the way), unwatched, and marked garbage
	// with ECN set: all leave h1's edge with DSCP 10.
	for _, f := range [][]byte{
		tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0x17, []byte("watched, colliding")),
		tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0x17, []byte("unwatched, colliding")),
		withDSCP(udpFrame("10.0.1.1", "10.0.2.1", 9, 9, []byte{0x10, 0xff, 0, 0, 0xde, 0xad}, true), 0x17),
	} {
		f[wire.EthernetLen+1] |= 1 // ECN ECT(1)
		binary.BigEndian.PutUint16(f[wire.EthernetLen+10:], 0)
		binary.BigEndian.PutUint16(f[wire.EthernetLen+10:], wire.IPv4HeaderChecksum(f[wire.EthernetLen:wire.EthernetLen+20]))
		sent, want = append(sent, f), append(want, expectTTL(withDSCP(f, 10), 3))
	}
	// INT a host inserted itself is user data here: not transited, not
	// stripped, re-marked like any colliding packet.
	hostINT := func() []byte {
		f := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 81, 0, []byte("INT from a host"))
		g := make([]byte, len(f), len(f)+64)
		copy(g, f)
		p := parse(t, &wire.Parser{}, g)
		hdr := make([]byte, wire.MDHeaderLen)
		_ = wire.MDHeader{Version: 2, HopML: 1, RemainingHops: 4, Instructions: spec.InstNodeID}.Put(hdr)
		out, err := wire.InsertINT(g, &p, spec.TypeMD, hdr, &wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}()
	sent, want = append(sent, hostINT), append(want, expectTTL(withDSCP(hostINT, 10), 3))
	before := l.h2().count()
	for _, f := range sent {
		l.send(f)
	}
	got := l.h2().frames[before:]
	if len(got) != len(want) {
		t.Fatalf("h2 got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d:\n got %x\nwant %x", i, got[i], want[i])
		}
	}
	st1, _ := l.sw[0].Stats(t.Context())
	if st1.Node.DSCPRemarked != 4 || st1.Interfaces["p1"].DSCPRemarked != 4 || st1.Node.IntInserted != 4 {
		t.Errorf("s1: remarked %d (p1 %d), inserted %d; want 4, 4, 4", st1.Node.DSCPRemarked, st1.Interfaces["p1"].DSCPRemarked, st1.Node.IntInserted)
	}
	for i, sw := range l.sw {
		st, _ := sw.Stats(t.Context())
		c := st.Node
		if c.IntMalformedForward != 0 || c.IntMalformedDrop != 0 || c.DroppedPackets != 0 || c.InPackets != c.OutPackets {
			t.Errorf("s%d: %+v", i+1, c)
		}
	}
	// From h2's side: s3's p2 is an edge port too.
	g := withDSCP(udpFrame("10.0.2.1", "10.0.1.1", 9, 9, []byte{0x10, 0xff, 0, 0, 0xde, 0xad}, true), 0x17)
	l.sw[2].Receive(1, g)
	if back := l.back.last(t); !bytes.Equal(back, expectTTL(withDSCP(g, 10), 3)) {
		t.Errorf("h2 -> h1 marked garbage:\n got %x\nwant %x", back, expectTTL(withDSCP(g, 10), 3))
	}
	st3, _ := l.sw[2].Stats(t.Context())
	if st3.Interfaces["p2"].DSCPRemarked != 1 || st3.Node.IntMalformedForward != 0 {
		t.Errorf("s3: %+v", st3.Interfaces["p2"])
	}
}

// TestEdgeMSS: a watched flow's SYN gets an MSS that leaves room for the
// session's INT at MaxHopCount hops under s1's egress MTU, and so does the
// SYN-ACK answering it when it leaves the domain towards h1; with
// ClampTCPMSS off, or for other flows, MSS options are untouched.
func TestEdgeMSS(t *testing.T) {
	mss := tcpMSS(t)
	// 1500 - 20 (IPv4) - 20 (TCP) - (shim 4 + header 12 + 8 hops of 2 words).
	const want = 1500 - 20 - 20 - (4 + 12 + 8*2*4)
	opts := append(wiretest.MSSOption(1460), 1, 3, 3, 7) // MSS, NOP, window scale
	syn := wiretest.SYNFrame("10.0.1.1", "10.0.2.1", 40000, 80, 0, 0x02, opts)
	synAck := wiretest.SYNFrame("10.0.2.1", "10.0.1.1", 80, 40000, 0, 0x12, opts)
	other := wiretest.SYNFrame("10.0.2.1", "10.0.1.1", 81, 40000, 0, 0x12, opts)
	for _, clamp := range []bool{true, false} {
		sess := specSession
		sess.ClampTCPMSS = clamp
		l := edgeLine(t, sess, nil)
		l.send(syn)
		l.sw[2].Receive(1, synAck)
		gotAck := l.back.last(t)
		l.sw[2].Receive(1, other)
		gotOther := l.back.last(t)
		w := uint16(1460)
		if clamp {
			w = want
		}
		if m := mss(l.h2().last(t)); m != w {
			t.Errorf("clamp %v: SYN at h2 has MSS %d, want %d", clamp, m, w)
		}
		if m := mss(gotAck); m != w {
			t.Errorf("clamp %v: SYN-ACK at h1 has MSS %d, want %d", clamp, m, w)
		}
		if m := mss(gotOther); m != 1460 {
			t.Errorf("clamp %v: unwatched SYN-ACK at h1 has MSS %d, want 1460", clamp, m)
		}
	}
}

// tcpMSS returns a function reading the MSS option of a TCP SYN frame,
// checking the frame's checksums.
func tcpMSS(t *testing.T) func(f []byte) uint16 {
	return func(f []byte) uint16 {
		t.Helper()
		p := parse(t, &wire.Parser{}, f)
		if !wire.VerifyL4Checksum(f, &p) || p.IPVersion == 4 && wire.Fold(wire.Sum(0, f[p.L3:p.L3+20])) != 0xffff {
			t.Errorf("bad checksum in %x", f)
		}
		return wiretest.MSS(f[p.L4+20 : p.L4+p.L4HeaderLen])
	}
}

// TestTelemetryNotWatched: report packets to a collector of a report
// session are never instrumented, even under a watch-all entry; other UDP
// traffic is.
func TestTelemetryNotWatched(t *testing.T) {
	l := newLine(t, lineOpts{session: specSession})
	rs := sai.DefaultReportSessionAttrs()
	rs.SrcIP = netip.MustParseAddr("10.0.1.254")
	rs.UDPDstPort = 32766
	rs.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("10.0.2.9")}, {IP: netip.MustParseAddr("10.0.2.10"), UDPPort: 6000}}
	if _, err := l.sw[0].Create(rs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dst  string
		port uint16
		int  bool
	}{{"10.0.2.9", 32766, false}, {"10.0.2.10", 6000, false}, {"10.0.2.9", 32767, true}, {"10.0.2.10", 32766, true}} {
		f := udpFrame("10.0.1.254", c.dst, 40000, c.port, []byte("telemetry report"), true)
		l.send(f)
		p := parse(t, dscpParser, l.taps[0].last(t))
		if p.INT >= 0 != c.int {
			t.Errorf("%s:%d: INT %v, want %v", c.dst, c.port, p.INT >= 0, c.int)
		}
	}
	st, _ := l.sw[0].Stats(t.Context())
	if m := st.Watchlist[l.entry].MatchedPackets; m != 2 {
		t.Errorf("watch-all entry matched %d packets, want 2 (reports unwatched)", m)
	}
}

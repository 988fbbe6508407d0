package soft

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

func TestBackendContract(t *testing.T) {
	l := newLine(t, lineOpts{n: 1, noSource: true})
	sw := l.sw[0]
	is := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	_, err := sw.Create(sai.DefaultDTelAttrs())
	is(err, sai.ErrExists)
	sess, err := sw.Create(sai.DefaultIntSessionAttrs())
	is(err, nil)
	missing := sai.MakeOID(sai.ObjectTypeIntSession, 999)
	_, err = sw.Create(sai.WatchlistEntryAttrs{Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: missing, FlowSamplePercent: 100}})
	is(err, sai.ErrNotFound)
	_, err = sw.Create(sai.WatchlistEntryAttrs{Match: sai.WatchlistMatch{InPort: "nope"}})
	is(err, sai.ErrNotFound)
	wl, err := sw.Create(sai.WatchlistEntryAttrs{Priority: 1, Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100}})
	is(err, nil)
	is(sw.Remove(sess), sai.ErrInUse)
	is(sw.Set(wl, sai.WatchlistEntryAttrs{Priority: 2}), sai.ErrCreateOnly)
	is(sw.Set(sai.MakeOID(sai.ObjectTypeWatchlistEntry, 12345), sai.WatchlistEntryAttrs{}), sai.ErrNotFound)
	is(sw.Set(wl, sai.WatchlistEntryAttrs{Priority: 1}), nil) // action NOP now: session unreferenced
	is(sw.Remove(sess), nil)
	is(sw.Remove(sess), sai.ErrNotFound)
	_, err = sw.Create(sai.QueueReportAttrs{Port: "eth9", BreachQuota: 1, TailDrop: true})
	is(err, sai.ErrNotFound)
	_, err = sw.Create(sai.QueueReportAttrs{Port: "p2", BreachQuota: 1, TailDrop: true})
	is(err, nil)
	_, err = sw.Create(sai.QueueReportAttrs{Port: "p2", BreachQuota: 1, TailDrop: true})
	is(err, sai.ErrExists)
	_, err = sw.Create(sai.EventAttrs{Type: spec.EventDropReport, ReportSession: sai.MakeOID(sai.ObjectTypeReportSession, 77)})
	is(err, sai.ErrNotFound)
	rs := sai.DefaultReportSessionAttrs()
	rs.SrcIP = netip.MustParseAddr("10.0.0.1")
	rs.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("10.0.0.2"), UDPPort: 32766}}
	rso, err := sw.Create(rs)
	is(err, nil)
	_, err = sw.Create(sai.EventAttrs{Type: spec.EventDropReport, ReportSession: rso})
	is(err, nil)
	_, err = sw.Create(sai.EventAttrs{Type: spec.EventDropReport, ReportSession: rso})
	is(err, sai.ErrExists)
	is(sw.Remove(rso), sai.ErrInUse)
	bad := sai.DefaultDTelAttrs()
	bad.SinkPortList = []string{"ghost"}
	is(sw.Set(l.dtel[0], bad), sai.ErrNotFound)
	_, err = sw.Create(sai.IntSessionAttrs{}) // invalid
	is(err, sai.ErrInvalid)
	st, err := sw.Stats(t.Context())
	is(err, nil)
	if _, ok := st.Watchlist[wl]; !ok || len(st.ReportSessions) != 1 || len(st.QueueReports) != 1 {
		t.Fatalf("stats miss live objects: %+v", st)
	}
}

// TestWatchlistCacheInvalidation: a flow cached as unwatched becomes
// watched as soon as an entry is created, and priorities order entries.
func TestWatchlistCacheInvalidation(t *testing.T) {
	l := newLine(t, lineOpts{noSource: true})
	f := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("x"))
	l.send(f)
	sess, _ := l.sw[0].Create(specSession)
	lo, _ := l.sw[0].Create(sai.WatchlistEntryAttrs{Priority: 1, Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100}})
	l.send(f)
	hi, _ := l.sw[0].Create(sai.WatchlistEntryAttrs{Priority: 5, Match: port80()}) // NOP carve-out
	l.send(f)
	st, _ := l.sw[0].Stats(t.Context())
	if st.Watchlist[lo].MatchedPackets != 1 || st.Watchlist[hi].MatchedPackets != 1 || st.Node.IntInserted != 1 {
		t.Fatalf("lo %+v hi %+v inserted %d", st.Watchlist[lo], st.Watchlist[hi], st.Node.IntInserted)
	}
}

func TestForwardingDrops(t *testing.T) {
	l := newLine(t, lineOpts{match: port80(), action: func(a *sai.WatchlistAction) { a.DropReportEnable = true }})
	ttl1 := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, nil)
	ttl1[wire.EthernetLen+8] = 1
	l.send(ttl1)
	l.send(tcpFrame("10.0.1.1", "10.9.9.9", 1, 80, 0, nil))
	st, _ := l.sw[0].Stats(t.Context())
	if st.Drops[spec.DropIPTTLZero] != 1 || st.Drops[spec.DropRoutingMiss] != 1 || st.Interfaces["p1"].DroppedPackets != 2 {
		t.Fatalf("drops %v", st.Drops)
	}
	evs := l.rec[0].kind(report.KindDrop)
	if len(evs) != 2 || evs[0].DropReason != uint8(spec.DropIPTTLZero) || evs[1].DropReason != uint8(spec.DropRoutingMiss) {
		t.Fatalf("drop events %+v", evs)
	}
}

// TestMalformedINT feeds a transit node INT headers with a bad version, a
// length beyond the packet and a Hop ML too small for the bitmap: by
// default they are forwarded unchanged (but for the TTL) and counted, with
// MalformedDrop dropped and counted.
func TestMalformedINT(t *testing.T) {
	for _, drop := range []bool{false, true} {
		l := newLine(t, lineOpts{session: specSession, match: port80(), dtel: func(i int, a *sai.DTelAttrs) {
			if drop {
				a.MalformedAction = sai.MalformedDrop
			}
		}})
		l.send(tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("payload")))
		good := l.taps[0].last(t)
		p := parse(t, dscpParser, good)
		corrupt := []func(f []byte){
			func(f []byte) { f[p.INT] = 0x30 },   // version 3
			func(f []byte) { f[p.Shim+1] = 200 }, // shim length past the end
			func(f []byte) { f[p.INT+2] = 1 },    // Hop ML 1 < 2 words asked
			func(f []byte) { f[p.Shim] = 0x70 },  // header type 7
			func(f []byte) { f[p.Shim+1] = 1 },   // shorter than the header
			func(f []byte) { f[p.INT] = 0x27 },   // E, M and a reserved bit: still valid
		}
		before := l.h2().count()
		var sent [][]byte
		for _, c := range corrupt {
			f := append([]byte(nil), good...)
			c(f)
			sent = append(sent, f)
			l.sw[1].Receive(0, f)
		}
		st, _ := l.sw[1].Stats(t.Context())
		got := l.h2().frames[before:]
		c, in := st.Node, st.Interfaces["p1"]
		if drop {
			if c.IntMalformedDrop != 5 || st.Drops[spec.DropUnknown] != 5 || c.IntMalformedForward != 0 || in.IntMalformedDrop != 5 {
				t.Fatalf("drop: malformed drops %d (p1 %d), unknown drops %d, forwarded %d", c.IntMalformedDrop, in.IntMalformedDrop, st.Drops[spec.DropUnknown], c.IntMalformedForward)
			}
			if len(got) != 1 {
				t.Fatalf("drop: %d frames reached h2, want 1", len(got))
			}
			// Reported like the drop of an INT packet, reason 0.
			evs := l.rec[1].kind(report.KindDrop)
			if len(evs) != 5 {
				t.Fatalf("drop: %d drop reports, want 5", len(evs))
			}
			for _, ev := range evs {
				if ev.DropReason != uint8(spec.DropUnknown) || ev.Unwatched || ev.Hop.EgressPort != 2 || ev.Flow.DstPort != 80 {
					t.Errorf("drop report %+v", ev)
				}
			}
		} else {
			if c.IntMalformedForward != 5 || in.IntMalformedForward != 5 || c.IntMalformedDrop != 0 || c.DroppedPackets != 0 || c.IntTransited != 2 {
				t.Fatalf("forward: counters %+v", c)
			}
			if len(got) != 6 {
				t.Fatalf("forward: %d frames reached h2, want 6", len(got))
			}
			// Through s2 and s3 (the sink): unchanged but for the TTL.
			for i, f := range []int{0, 1, 2, 3, 4} {
				if want := expectTTL(sent[f], 2); !bytes.Equal(got[i], want) {
					t.Errorf("forward: malformed frame %d changed:\n got %x\nwant %x", f, got[i], want)
				}
			}
			s3, _ := l.sw[2].Stats(t.Context())
			if s3.Node.IntMalformedForward != 5 || s3.Node.IntStripped != 2 {
				t.Fatalf("forward: sink counters %+v", s3.Node)
			}
		}
		if c.InPackets != c.OutPackets+c.DroppedPackets {
			t.Errorf("drop %v: in %d != out %d + dropped %d", drop, c.InPackets, c.OutPackets, c.DroppedPackets)
		}
	}
}

// TestCongestion: a burst into a slow link builds a queue; the metadata
// carries growing hop latency and occupancy, the queue report fires and
// the queue tail-drops once full.
func TestCongestion(t *testing.T) {
	sa := sai.IntSessionAttrs{MaxHopCount: 8, Instructions: spec.InstNodeID | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTxUtil}
	l := newLine(t, lineOpts{session: sa, match: port80(), rate: []int64{100e6}, qbytes: []int{40000},
		action: func(a *sai.WatchlistAction) { a.TailDropReportEnable = true }})
	qr, err := l.sw[0].Create(sai.QueueReportAttrs{Port: "p2", LatencyThreshold: 500 * time.Microsecond, BreachQuota: 5, TailDrop: true})
	if err != nil {
		t.Fatal(err)
	}
	const burst = 60
	for i := 0; i < burst; i++ {
		l.send(tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, make([]byte, 1000)))
	}
	l.settle()
	got := l.h2().frames
	if len(got) == 0 || len(got) >= burst {
		t.Fatalf("%d of %d frames delivered; want tail drops", len(got), burst)
	}
	evs := l.rec[2].kind(report.KindFlow)
	var lat, occ []uint32
	for _, ev := range evs {
		_, st := mdAt(t, ev.Packet, dscpParser)
		var m wire.HopMetadata
		_ = wire.DecodeHop(st.Hop(st.Count()-1), wire.Instructions(sa.Instructions), &m) // s1's hop
		lat, occ = append(lat, m.HopLatency), append(occ, m.QueueOccupancy)
	}
	n := len(lat) - 1
	if lat[n] < 20*lat[0] || occ[n] < 30000 || occ[0] != 0 {
		t.Fatalf("hop latency %d -> %d ns, occupancy %d -> %d bytes", lat[0], lat[n], occ[0], occ[n])
	}
	// 1054-byte frames at 100 Mb/s: 84.32 us each.
	if lat[0] != 84320 {
		t.Fatalf("first hop latency %d, want the serialisation time 84320", lat[0])
	}
	st, _ := l.sw[0].Stats(t.Context())
	if st.Drops[spec.DropTrafficManager] != uint64(burst-len(got)) {
		t.Fatalf("tail drops %d, lost %d", st.Drops[spec.DropTrafficManager], burst-len(got))
	}
	q := st.QueueReports[qr]
	if q.Breaches != 1 || q.Reports != 5 || q.QuotaLeft != 0 {
		t.Fatalf("queue report stats %+v", q)
	}
	drops := l.rec[0].kind(report.KindDrop)
	if len(drops) != burst-len(got) || !drops[0].TailDrop || drops[0].DropReason != uint8(spec.DropTrafficManager) {
		t.Fatalf("%d tail drop events", len(drops))
	}
	if qs := l.rec[0].kind(report.KindQueue); len(qs) != len(got) {
		t.Fatalf("%d queue events for %d packets", len(qs), len(got))
	}
}

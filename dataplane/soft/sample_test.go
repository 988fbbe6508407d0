package soft

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
)

// sampleStep is one packet of a packet-interval test: its flow (TCP source
// port), arrival time after the start and whether the flow op acts on it.
type sampleStep struct {
	sport uint16
	at    time.Duration
	acted bool
}

// The brief's sequence for flow 1000 with a 1 ms interval (1st, 4th and 6th
// acted), interleaved with flow 2000, sampled on its own: its first packet
// is acted on although flow 1000 was acted on 0.4 ms before.
var sampleSteps = []sampleStep{
	{1000, 0, true},
	{1000, 400 * time.Microsecond, false},
	{2000, 400 * time.Microsecond, true},
	{1000, 900 * time.Microsecond, false},
	{2000, 1000 * time.Microsecond, false},
	{1000, 1050 * time.Microsecond, true},
	{1000, 1500 * time.Microsecond, false},
	{2000, 1500 * time.Microsecond, true},
	{1000, 2200 * time.Microsecond, true},
}

// runSampleSteps sends steps from h1 through l and returns the original
// frames and the frames s1 sent, in order.
func runSampleSteps(t *testing.T, l *line, start int64, steps []sampleStep) (sent, got [][]byte) {
	t.Helper()
	n0 := l.taps[0].count()
	for i, st := range steps {
		l.clk.Set(start + int64(st.at))
		f := tcpFrame("10.0.1.1", "10.0.2.1", st.sport, 80, 0, fmt.Appendf(nil, "packet %d", i))
		l.send(f)
		sent = append(sent, f)
	}
	l.settle()
	l.taps[0].mu.Lock()
	got = append(got, l.taps[0].frames[n0:]...)
	l.taps[0].mu.Unlock()
	if len(got) != len(steps) {
		t.Fatalf("s1 sent %d frames, want %d", len(got), len(steps))
	}
	return sent, got
}

func sampleLine(t *testing.T, op sai.FlowOp, interval time.Duration) *line {
	return newLine(t, lineOpts{n: 2, match: port80(), action: func(a *sai.WatchlistAction) {
		a.FlowOp, a.PacketInterval = op, interval
	}})
}

// TestPacketIntervalINT: with packet-interval 1 ms the source inserts INT
// into the first packet of a flow and then into the first packet at least
// 1 ms after the last instrumented one; the others leave byte for byte as
// they came (TTL aside) and are counted as unsampled.
func TestPacketIntervalINT(t *testing.T) {
	l := sampleLine(t, sai.FlowOpInt, time.Millisecond)
	sent, got := runSampleSteps(t, l, l.clk.Now(), sampleSteps)
	pr := wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}
	acted, unsampled := 0, 0
	for i, st := range sampleSteps {
		p := parse(t, &pr, got[i])
		switch {
		case st.acted && p.INT < 0:
			t.Errorf("packet %d (flow %d at %v) has no INT, want INT", i, st.sport, st.at)
		case !st.acted && !bytes.Equal(got[i], expectTTL(sent[i], 1)):
			t.Errorf("packet %d (flow %d at %v) modified:\n got %x\nwant %x", i, st.sport, st.at, got[i], expectTTL(sent[i], 1))
		}
		if st.acted {
			acted++
		} else {
			unsampled++
		}
	}
	st, _ := l.sw[0].Stats(t.Context())
	w := st.Watchlist[l.entry]
	if w.MatchedPackets != uint64(len(sampleSteps)) || w.UnsampledPackets != uint64(unsampled) {
		t.Errorf("watchlist stats %+v, want %d matched, %d unsampled", w, len(sampleSteps), unsampled)
	}
	if ss := st.IntSessions[l.sess]; ss.PacketsInitiated != uint64(acted) || ss.NotInitiatedSampled != uint64(unsampled) ||
		ss.NotInitiated() != uint64(unsampled) {
		t.Errorf("session stats %+v, want %d initiated, %d not initiated (sampled)", ss, acted, unsampled)
	}
	// The sink saw INT exactly on the instrumented packets.
	if n := len(l.rec[1].kind(report.KindFlow)); n != acted {
		t.Errorf("sink reported %d packets, want %d", n, acted)
	}
}

// TestPacketIntervalPostcard: postcards follow the same per-flow sampling,
// and no packet is modified.
func TestPacketIntervalPostcard(t *testing.T) {
	l := sampleLine(t, sai.FlowOpPostcard, time.Millisecond)
	start := l.clk.Now()
	sent, got := runSampleSteps(t, l, start, sampleSteps)
	var want []int64
	for i, st := range sampleSteps {
		if !bytes.Equal(got[i], expectTTL(sent[i], 1)) {
			t.Errorf("packet %d modified by postcard mode", i)
		}
		if st.acted {
			want = append(want, start+int64(st.at))
		}
	}
	var times []int64
	for _, ev := range l.rec[0].kind(report.KindFlow) {
		times = append(times, ev.Now)
	}
	if fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("postcards at %v, want %v", times, want)
	}
	st, _ := l.sw[0].Stats(t.Context())
	if u := st.Watchlist[l.entry].UnsampledPackets; u != uint64(len(sampleSteps)-len(want)) {
		t.Errorf("unsampled %d, want %d", u, len(sampleSteps)-len(want))
	}
	if st.Node.Postcards != uint64(len(want)) {
		t.Errorf("%d postcards counted, want %d", st.Node.Postcards, len(want))
	}
}

// TestPacketIntervalSet: an in-place Set of the interval applies to flows
// already in the cache, which keep when they were last acted on.
func TestPacketIntervalSet(t *testing.T) {
	l := sampleLine(t, sai.FlowOpInt, time.Millisecond)
	start := l.clk.Now()
	setInterval := func(d time.Duration) {
		t.Helper()
		a := sai.WatchlistEntryAttrs{Priority: 10, Match: port80(),
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: l.sess, FlowSamplePercent: 100, PacketInterval: d}}
		if err := l.sw[0].Set(l.entry, a); err != nil {
			t.Fatalf("Set interval %v: %v", d, err)
		}
	}
	check := func(name string, steps []sampleStep) {
		t.Helper()
		_, got := runSampleSteps(t, l, start, steps)
		pr := wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}
		for i, st := range steps {
			if p := parse(t, &pr, got[i]); (p.INT >= 0) != st.acted {
				t.Errorf("%s: packet at %v has INT %v, want %v", name, st.at, p.INT >= 0, st.acted)
			}
		}
	}
	check("1ms", []sampleStep{{1000, 0, true}, {1000, 100 * time.Microsecond, false}})
	setInterval(100 * time.Microsecond)
	// Still within 100 µs of the last acted packet: the Set did not make
	// the flow new.
	check("100µs", []sampleStep{
		{1000, 50 * time.Microsecond, false},
		{1000, 200 * time.Microsecond, true}, // would be skipped with 1 ms
		{1000, 250 * time.Microsecond, false},
		{1000, 300 * time.Microsecond, true},
	})
	setInterval(0)
	check("0", []sampleStep{{1000, 310 * time.Microsecond, true}, {1000, 320 * time.Microsecond, true}})
	st, _ := l.sw[0].Stats(t.Context())
	if u := st.Watchlist[l.entry].UnsampledPackets; u != 3 {
		t.Errorf("unsampled %d, want 3", u)
	}
}

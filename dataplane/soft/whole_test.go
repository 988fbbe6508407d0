package soft

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/sai"
)

// wholeTap records what a WholeLink is given.
type wholeTap struct {
	frames  [][]byte
	whole   [][]byte
	off     []Offload
	counted int  // super-packets given while discard
	discard bool // count, keep nothing
}

func (w *wholeTap) Transmit(f []byte) { w.frames = append(w.frames, append([]byte(nil), f...)) }
func (w *wholeTap) TransmitWhole(f []byte, o *Offload) {
	if w.discard {
		w.counted++
		return
	}
	w.whole = append(w.whole, append([]byte(nil), f...))
	w.off = append(w.off, *o)
}

// TestReceiveWhole checks which super-packets the switch forwards whole
// (unwatched, sampled out) and which it leaves to be segmented (watched,
// sampled in, too large for the egress MTU or queue, no WholeLink), that
// those it refuses change nothing, and that those it forwards keep their
// bytes and offload metadata, the TTL aside.
func TestReceiveWhole(t *testing.T) {
	big := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, bytes.Repeat([]byte{7}, 60000))
	other := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 443, 0, bytes.Repeat([]byte{9}, 60000))
	o := Offload{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	const segIP = 1400
	newSW := func(t *testing.T, interval time.Duration, link Link) (*Switch, sai.OID) {
		sw, err := New(Config{Name: "s", Clock: NewManualClock(1), Reporter: nopReporter{},
			Ports:  []PortConfig{{Name: "p1"}, {Name: "p2", Link: link}},
			Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}}}})
		if err != nil {
			t.Fatal(err)
		}
		d := sai.DefaultDTelAttrs()
		d.SwitchID = 9
		d.IntEndpointEnable, d.IntTransitEnable = true, true
		d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
		if _, err := sw.Create(d); err != nil {
			t.Fatal(err)
		}
		s, _ := sw.Create(specSession)
		e, err := sw.Create(sai.WatchlistEntryAttrs{Match: port80(),
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: s, FlowSamplePercent: 100, PacketInterval: interval}})
		if err != nil {
			t.Fatal(err)
		}
		return sw, e
	}
	stats := func(sw *Switch) sai.Stats {
		st, err := sw.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	t.Run("unwatched", func(t *testing.T) {
		tap := &wholeTap{}
		sw, _ := newSW(t, 0, tap)
		f := append([]byte(nil), other...)
		if !sw.ReceiveWhole(0, f, 0, &o, segIP) {
			t.Fatal("an unwatched super-packet was not forwarded whole")
		}
		if len(tap.whole) != 1 || len(tap.frames) != 0 || tap.off[0] != o {
			t.Fatalf("link got %d whole, %d frames, offload %v", len(tap.whole), len(tap.frames), tap.off)
		}
		want := append([]byte(nil), other...)
		want[14+8]--                       // TTL
		copy(want[14+10:], f[14+10:14+12]) // header checksum, checked by the decTTL tests
		if !bytes.Equal(tap.whole[0], want) {
			t.Error("the super-packet changed beyond its TTL")
		}
		if st := stats(sw); st.Node.InPackets != 1 || st.Node.OutPackets != 1 {
			t.Errorf("node counters %+v, want 1 in, 1 out", st.Node)
		}
		tap.discard = true
		if n := testing.AllocsPerRun(200, func() { copy(f, other); sw.ReceiveWhole(0, f, 0, &o, segIP) }); n != 0 {
			t.Errorf("%v allocs per super-packet", n)
		}
		if tap.counted != 201 {
			t.Errorf("%d super-packets sent whole of 201", tap.counted)
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			frame []byte
			segIP int
			link  Link
		}{
			{"watched", big, segIP, &wholeTap{}},
			{"segments above the MTU", other, 1501, &wholeTap{}},
			{"no WholeLink", other, segIP, LinkFunc(func([]byte) {})},
		} {
			sw, _ := newSW(t, 0, c.link)
			f := append([]byte(nil), c.frame...)
			if sw.ReceiveWhole(0, f, 0, &o, c.segIP) {
				t.Errorf("%s: forwarded whole", c.name)
			}
			if !bytes.Equal(f, c.frame) {
				t.Errorf("%s: the refused frame was changed", c.name)
			}
			if st := stats(sw); st.Node.InPackets != 0 || st.Node.OutPackets != 0 {
				t.Errorf("%s: counted %+v", c.name, st.Node)
			}
		}
	})
	t.Run("sampled", func(t *testing.T) {
		tap := &wholeTap{}
		sw, e := newSW(t, time.Millisecond, tap)
		// The flow's first packet is sampled: refused whole, then
		// instrumented as a segment; the next is sampled out and goes
		// whole, counted as unsampled.
		if sw.ReceiveWhole(0, append([]byte(nil), big...), 0, &o, segIP) {
			t.Fatal("the flow's first super-packet went whole")
		}
		sw.Receive(0, tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 1000)))
		if len(tap.frames) != 1 || len(tap.frames[0]) <= 14+40+1000 {
			t.Fatalf("first segment not sent with INT: %d frames", len(tap.frames))
		}
		if !sw.ReceiveWhole(0, append([]byte(nil), big...), 0, &o, segIP) {
			t.Fatal("a sampled-out super-packet was not forwarded whole")
		}
		if st := stats(sw).Watchlist[e]; st.UnsampledPackets != 1 || st.MatchedPackets != 2 {
			t.Errorf("watchlist entry %+v, want 2 matched, 1 unsampled", st)
		}
	})
}

// BenchmarkReceiveWhole is the switch's cost for an unwatched 60 KB
// super-packet forwarded whole (no copy: the frame is rewritten in place).
//
//	go test ./dataplane/soft -run '^$' -bench ReceiveWhole -benchmem
func BenchmarkReceiveWhole(b *testing.B) {
	sw := benchSwitch(b, "source")
	sw.SetLink(1, &wholeTap{discard: true})
	frame := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 443, 0, make([]byte, 60000))
	o := Offload{}
	b.ReportAllocs()
	for b.Loop() {
		frame[14+8] = 64 // TTL back
		if !sw.ReceiveWhole(0, frame, 0, &o, 1400) {
			b.Fatal("not forwarded whole")
		}
	}
}

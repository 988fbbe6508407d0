package soft

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestPriorityQueues: a port with 8 queues at 8 Mbit/s; DSCP picks the
// queue (class selector), the highest queue is sent first, and INT
// metadata and queue reports carry each packet's queue and that queue's
// occupancy and latency.
func TestPriorityQueues(t *testing.T) {
	clk := NewManualClock(1_000_000_000_000)
	out := &capture{}
	rec := &recorder{}
	sw, err := New(Config{Name: "s", Clock: clk, NoTTLDecrement: true, Reporter: rec,
		Ports:  []PortConfig{{Name: "in"}, {Name: "out", Rate: 8_000_000, Queues: MaxQueues, Link: out}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Ports: []string{"out"}}}})
	if err != nil {
		t.Fatal(err)
	}
	d := sai.DefaultDTelAttrs()
	d.SwitchID = 1
	d.IntEndpointEnable, d.PostcardEnable, d.QueueReportEnable = true, true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x01, Mask: 0x3f}
	if _, err := sw.Create(d); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Create(sai.QueueReportAttrs{Port: "out", Queue: 8, LatencyThreshold: time.Millisecond}); err == nil {
		t.Fatal("queue 8 of a port with 8 queues accepted")
	}
	if _, err := sw.Create(sai.QueueReportAttrs{Port: "out", Queue: 0, LatencyThreshold: time.Millisecond, BreachQuota: 100}); err != nil {
		t.Fatal(err)
	}
	sess, err := sw.Create(sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8,
		Instructions: spec.InstNodeID | spec.InstHopLatency | spec.InstQueue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Create(sai.WatchlistEntryAttrs{Priority: 1, Match: sai.WatchlistMatch{IPProtocol: sai.IPProtocolUDP},
		Action: sai.WatchlistAction{FlowOp: sai.FlowOpPostcard, IntSession: sess, FlowSamplePercent: 100, ReportAllPackets: true}}); err != nil {
		t.Fatal(err)
	}
	frame := func(dscp uint8, seq uint16) []byte {
		f := udpFrame("10.0.1.1", "10.0.2.1", 1000+uint16(dscp), 9000, make([]byte, 958), false)
		f[wire.EthernetLen+1] = dscp << 2
		binary.BigEndian.PutUint16(f[wire.EthernetLen+4:], seq) // IP id: the order they left in
		return f
	}
	// 1000-byte frames take 1 ms each at 8 Mbit/s: ten best-effort (CS0)
	// ones, then one CS5 and one CS7 behind them.
	for i := range 10 {
		sw.Receive(0, frame(0, uint16(i)))
	}
	clk.Advance(500 * time.Microsecond)
	sw.Receive(0, frame(5<<3, 100))
	sw.Receive(0, frame(7<<3, 101))
	// Queue state: the bytes of each queue, and the wait at the port rate
	// for them and the queues above (1 ms per 1000 bytes).
	st, err := sw.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	qs := st.Queues["out"]
	if len(qs) != MaxQueues || qs[0] != (sai.QueueStats{Occupancy: 10000, Delay: 12 * time.Millisecond}) ||
		qs[5] != (sai.QueueStats{Occupancy: 1000, Delay: 2 * time.Millisecond}) || qs[7] != (sai.QueueStats{Occupancy: 1000, Delay: time.Millisecond}) ||
		qs[1] != (sai.QueueStats{}) {
		t.Errorf("queue state %+v", qs)
	}
	for sw.NextDeparture() != 1<<63-1 {
		clk.Set(sw.NextDeparture())
		sw.Poll()
	}
	var order []uint16
	for _, f := range out.frames {
		order = append(order, binary.BigEndian.Uint16(f[wire.EthernetLen+4:]))
	}
	// The first CS0 frame was on the wire already; CS7, then CS5, then the
	// other nine.
	want := []uint16{0, 101, 100, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if len(order) != len(want) {
		t.Fatalf("sent %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("sent %v, want %v", order, want)
		}
	}
	pcs := rec.kind(report.KindFlow)
	if len(pcs) != 12 {
		t.Fatalf("%d postcards, want 12", len(pcs))
	}
	for _, ev := range pcs {
		id := binary.BigEndian.Uint16(ev.Packet[wire.EthernetLen+4:])
		h := ev.Hop
		switch id {
		case 101, 100:
			// Alone in their queues: no bytes ahead, sent after the
			// frame on the wire (0.5 ms left) and, for CS5, CS7's.
			wantQ, wantLat := uint8(7), 1500*time.Microsecond
			if id == 100 {
				wantQ, wantLat = 5, 2500*time.Microsecond
			}
			if h.QueueID != wantQ || h.QueueOccupancy != 0 || time.Duration(h.HopLatency) != wantLat {
				t.Errorf("frame %d: queue %d occupancy %d latency %v, want queue %d, 0, %v", id, h.QueueID, h.QueueOccupancy, time.Duration(h.HopLatency), wantQ, wantLat)
			}
		default:
			// Best effort: id frames ahead, and two high ones overtook.
			wantLat := time.Duration(id+1) * time.Millisecond
			if id > 0 {
				wantLat += 2 * time.Millisecond
			}
			if h.QueueID != 0 || h.QueueOccupancy != uint32(id)*1000 || time.Duration(h.HopLatency) != wantLat {
				t.Errorf("frame %d: queue %d occupancy %d latency %v, want queue 0, %d, %v", id, h.QueueID, h.QueueOccupancy, time.Duration(h.HopLatency), id*1000, wantLat)
			}
		}
	}
	// Queue 0's report: every packet of queue 0 goes to the pipeline; none
	// of the others.
	for _, ev := range rec.kind(report.KindQueue) {
		if ev.Hop.QueueID != 0 {
			t.Errorf("queue event for queue %d: only queue 0 has a report", ev.Hop.QueueID)
		}
	}
	st, _ = sw.Stats(t.Context())
	for _, q := range st.QueueReports {
		if q.Breaches != 1 || q.Reports == 0 {
			t.Errorf("queue 0 report: %+v, want one breach with reports", q)
		}
	}
}

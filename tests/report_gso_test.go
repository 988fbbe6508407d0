package tests

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// heldSender is intd's UDP sender whose first Send waits for release: the
// report packets queued meanwhile reach the collector's goroutine
// together, which sends them as UDP GSO messages.
type heldSender struct {
	*report.UDPSender
	release chan struct{}
	held    bool
}

func (h *heldSender) Send(p *report.Packet) error {
	if !h.held {
		h.held = true
		<-h.release
	}
	return h.UDPSender.Send(p)
}

// TestReportsGSOToCollectorGRO: report packets intd queued together go
// out as UDP GSO messages (runs of equal size, a shorter packet ending a
// run) to the collector's socket with UDP GRO on loopback, which gets them
// whole; the collector counts every report, with no packet lost or
// reordered, and intd counts every packet sent.
func TestReportsGSOToCollectorGRO(t *testing.T) {
	r, err := collector.Listen("127.0.0.1:0", collector.DefaultBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.GRO() {
		t.Skip("the kernel refuses UDP_GRO (Linux before 5.0)")
	}
	c := collector.New(collector.Config{})
	done := make(chan error, 1)
	go func() { done <- c.Serve(r) }()

	snd := &heldSender{UDPSender: report.NewUDPSender(), release: make(chan struct{})}
	defer snd.Close()
	cfg := report.Config{NodeID: 7, HWID: 1, Filter: report.DefaultFilter(),
		Sessions: []report.Session{{Name: "s", Src: netip.MustParseAddr("127.0.0.1"),
			Collectors: []report.Collector{{Addr: r.Addr().(*net.UDPAddr).AddrPort()}}, TruncateSize: 128, MaxReports: 4}},
		Events: map[report.EventType]report.Route{spec.EventFlowReportAllPackets: {Session: "s"}}}
	p, err := report.New(cfg, report.Options{Sender: snd, TickInterval: -1, QueueLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	// 3 rounds of 200 packets of 4 reports and, every 25th, of 1 (a
	// shorter packet: it ends a run).
	frame := udpFrame()
	ev := report.Event{Kind: report.KindFlow, ReportAll: true, INT: -1, Packet: frame,
		Flow: wire.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 1000, DstPort: 2000, Proto: wire.ProtoUDP},
		Hop:  wire.HopMetadata{NodeID: 7, IngressPort: 1, EgressPort: 2, HopLatency: 10, Valid: spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency}}
	const rounds, perRound = 3, 200
	reports := 0
	for round := 0; round < rounds; round++ {
		for k := 0; k < perRound; k++ {
			n := 4
			if k%25 == 24 {
				n = 1
			}
			for i := 0; i < n; i++ {
				ev.Now = time.Now().UnixNano()
				p.Report(&ev)
			}
			p.Flush()
			reports += n
		}
		if round == 0 {
			close(snd.release)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Reports < uint64(reports) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := c.Snapshot(0)
	if st.Counters.Packets != rounds*perRound || st.Counters.Reports != uint64(reports) || st.Counters.Lost != 0 {
		t.Errorf("collector counters %+v; want %d packets, %d reports, none lost", st.Counters, rounds*perRound, reports)
	}
	if len(st.Sources) != 1 || st.Sources[0].Reordered != 0 || st.Sources[0].OutOfWindow != 0 {
		t.Errorf("sources %+v: want one, nothing reordered", st.Sources)
	}
	cs := p.Stats().Sessions["s"]
	if cs.Packets != rounds*perRound || cs.SendErrors != 0 || cs.QueueFull != 0 {
		t.Errorf("intd session stats %+v", cs)
	}
}

// udpFrame is an Ethernet/IPv4/UDP frame of 10.0.0.1:1000 -> 10.0.0.2:2000
// with 64 bytes of payload.
func udpFrame() []byte {
	b := make([]byte, 14+20+8+64)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 20+8+64)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp, 1000)
	binary.BigEndian.PutUint16(udp[2:], 2000)
	binary.BigEndian.PutUint16(udp[4:], 8+64)
	return b
}

package lab

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
)

func TestDefaultLab(t *testing.T) {
	clk := soft.NewManualClock(1_700_000_000_000_000_000)
	var sent atomic.Int64
	l, err := New(Options{Clock: clk, Collector: "127.0.0.1:32766",
		Sender: report.SenderFunc(func(*report.Packet) error { sent.Add(1); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got [][]byte
	l.Capture("h2", func(f []byte) { got = append(got, f) })
	l.RunUntil(clk.Now() + int64(100*time.Millisecond))
	tcp := wire.FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 40001, DstPort: 80, Proto: wire.ProtoTCP}
	v, ok := l.View(tcp)
	if !ok || len(v.Path) != 3 || v.Path[0] != 1 || v.Path[1] != 2 || v.Path[2] != 3 {
		t.Fatalf("tcp view %+v", v)
	}
	// The UDP bursts queue at s2 (100 Mb/s towards s3): s2's hop latency
	// exceeds a lone packet's serialisation time.
	udp := tcp
	udp.Proto, udp.SrcPort, udp.DstPort = wire.ProtoUDP, 40002, 5001
	if v, _ := l.View(udp); len(v.HopLatency) != 3 || v.HopLatency[1] < 200_000 {
		t.Fatalf("udp view %+v", v)
	}
	if len(got) < 600 {
		t.Fatalf("h2 got %d frames", len(got))
	}
	for _, f := range got {
		if f[wire.EthernetLen+1] != 0 || f[wire.EthernetLen+8] != 61 {
			t.Fatalf("h2 frame still marked or TTL wrong: %x", f[:40])
		}
	}
	var out bytes.Buffer
	l.Summary(context.Background(), &out)
	if !strings.Contains(out.String(), "path s1 -> s2 -> s3") {
		t.Fatalf("summary:\n%s", out.String())
	}
	t.Log("\n" + out.String())
	for _, n := range l.SwitchNames() {
		st, _ := l.Switch(n).Stats(context.Background())
		if st.Node.DroppedPackets != 0 && n != "s2" {
			t.Errorf("%s dropped %d", n, st.Node.DroppedPackets)
		}
	}
	l.Close()
	if sent.Load() == 0 {
		t.Fatal("no report packets sent")
	}
	if len(l.Backends()) != 3 {
		t.Fatal("backends")
	}
	_ = sai.ReportFlow
}

// TestParallelPaths: a diamond s1 -> {s2, s3} -> s4 spreads flows by ECMP.
func TestParallelPaths(t *testing.T) {
	topo := &Topology{
		Switches: []SwitchSpec{{Name: "s1"}, {Name: "s2"}, {Name: "s3"}, {Name: "s4"}},
		Hosts: []HostSpec{{Name: "h1", IP: netip.MustParseAddr("10.0.1.1"), Port: "s1:h1"},
			{Name: "h2", IP: netip.MustParseAddr("10.0.2.1"), Port: "s4:h2"}},
		Links: []LinkSpec{{A: "s1:a", B: "s2:a"}, {A: "s1:b", B: "s3:a"}, {A: "s2:b", B: "s4:a"}, {A: "s3:b", B: "s4:b"}},
	}
	var flows []Flow
	for i := 0; i < 16; i++ {
		flows = append(flows, Flow{Name: "f", From: "h1", To: "h2", Proto: wire.ProtoUDP, SrcPort: uint16(1000 + i), DstPort: 9, Size: 100, PPS: 1000})
	}
	clk := soft.NewManualClock(1)
	l, err := New(Options{Topology: topo, Clock: clk, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.RunUntil(clk.Now() + int64(10*time.Millisecond))
	via := map[uint32]int{}
	for i := range flows {
		k := wire.FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: uint16(1000 + i), DstPort: 9, Proto: wire.ProtoUDP}
		v, ok := l.View(k)
		if !ok || len(v.Path) != 3 {
			t.Fatalf("flow %d: %+v", i, v)
		}
		via[v.Path[1]]++
	}
	if via[2] == 0 || via[3] == 0 {
		t.Fatalf("ECMP used one path only: %v", via)
	}
}

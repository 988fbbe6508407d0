package soft

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/sai"
)

type nopReporter struct{}

func (nopReporter) Report(*report.Event) {}

// benchSwitch is a lone switch with the lab's DTel configuration: role
// "source" (watchlist INT entry), "transit" or "sink" (p2 is a sink port).
func benchSwitch(tb testing.TB, role string) *Switch {
	sw, err := New(Config{Name: role, Clock: NewManualClock(1), Reporter: nopReporter{},
		Ports:  []PortConfig{{Name: "p1"}, {Name: "p2"}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}}}})
	if err != nil {
		tb.Fatal(err)
	}
	d := sai.DefaultDTelAttrs()
	d.SwitchID = 9
	d.IntEndpointEnable, d.IntTransitEnable = true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	if role == "sink" {
		d.SinkPortList = []string{"p2"}
	}
	if _, err := sw.Create(d); err != nil {
		tb.Fatal(err)
	}
	if role == "source" {
		s, _ := sw.Create(specSession)
		if _, err := sw.Create(sai.WatchlistEntryAttrs{Match: port80(),
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: s, FlowSamplePercent: 100}}); err != nil {
			tb.Fatal(err)
		}
	}
	return sw
}

const wire14 = 14

func benchPipeline(b *testing.B, role string, frame []byte) {
	sw := benchSwitch(b, role)
	sw.Receive(0, frame) // warm the flow cache and the buffer pool
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		sw.Receive(0, frame)
	}
	cpu := cpuTime() - c0
	b.StopTimer()
	// Wall-clock figures suffer on a shared machine; the CPU time this
	// process spent is what one core needs per packet.
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/pkt")
	b.ReportMetric(float64(b.N)/(float64(cpu)/1e9)/1e6, "cpu-Mpps")
	st, _ := sw.Stats(b.Context())
	if st.Node.OutPackets != uint64(b.N)+1 {
		b.Fatalf("out %d want %d (%+v)", st.Node.OutPackets, b.N+1, st.Node)
	}
}

func benchInputs(b *testing.B) (plain, int3 []byte) {
	plain = tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 64))
	l := newLine(b, lineOpts{n: 4, session: specSession, match: port80()})
	l.send(plain)
	return plain, l.taps[2].frames[0]
}

// BenchmarkTransit3Hops: an INT-MD packet with 3 hops gets a 4th.
func BenchmarkTransit3Hops(b *testing.B) {
	_, int3 := benchInputs(b)
	benchPipeline(b, "transit", int3)
}

// BenchmarkSource: a watched TCP packet gets INT-MD headers and a hop.
func BenchmarkSource(b *testing.B) {
	plain, _ := benchInputs(b)
	benchPipeline(b, "source", plain)
}

// BenchmarkSink: the sink pushes its hop, reports and strips 3 hops.
func BenchmarkSink(b *testing.B) {
	_, int3 := benchInputs(b)
	benchPipeline(b, "sink", int3)
}

// BenchmarkForward: unwatched traffic, no INT.
func BenchmarkForward(b *testing.B) {
	plain, _ := benchInputs(b)
	plain[wire14+22] = 0x01 // TCP destination port 336 (IPv4 header 20 bytes, then sport, dport): unwatched
	benchPipeline(b, "source", plain)
}

// TestZeroAllocs asserts that steady-state packets allocate nothing.
func TestZeroAllocs(t *testing.T) {
	plain := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 64))
	l := newLine(t, lineOpts{n: 4, session: specSession, match: port80()})
	l.send(plain)
	int3 := l.taps[2].frames[0]
	for _, c := range []struct {
		role  string
		frame []byte
	}{{"source", plain}, {"transit", int3}, {"sink", int3}} {
		sw := benchSwitch(t, c.role)
		sw.Receive(0, c.frame)
		if n := testing.AllocsPerRun(1000, func() { sw.Receive(0, c.frame) }); n != 0 {
			t.Errorf("%s: %v allocs per packet", c.role, n)
		}
	}
}

// cpuTime is the user+system CPU time of the process in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

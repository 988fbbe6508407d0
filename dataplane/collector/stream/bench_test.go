package stream

import (
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/natstest"
	"github.com/intd-project/intd/sai/spec"
)

// benchPackets are packets of 8 sink reports (3-hop INT-MD stacks) over
// flows distinct flows; every 512th report is a drop report of node 2
// and every 16th a congestion report of node 2 (events; congestion is
// gathered into one message per queue and second).
func benchPackets(b *testing.B, flows int) [][]byte {
	var pkts [][]byte
	sinkH := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, RepMdBits: wire.RepHopLatency}
	dropH := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: true, RepMdBits: wire.RepDrop}
	congH := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Congested: true, Intermediate: true,
		RepMdBits: wire.RepL1Ports | wire.RepQueue}
	n := 0
	for p := 0; p < flows/8; p++ {
		pk, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(p), NodeID: 3})
		for i := 0; i < 8; i++ {
			f := sinkFrame(b, uint16(1000+n), []uint32{2, 1}, 10_000)
			binary.BigEndian.PutUint16(f[wire.EthernetLen+12:], uint16(n>>16)) // source address spreads the flows
			switch {
			case n%512 == 511:
				pk, _ = wire.AppendReport(pk, &dropH, &wire.ReportMetadata{DropReason: 71}, nil, f)
			case n%16 == 15:
				pk, _ = wire.AppendReport(pk, &congH, &wire.ReportMetadata{EgressPort: 2, QueueID: 1, QueueOccupancy: 500}, nil, f)
			default:
				pk, _ = wire.AppendReport(pk, &sinkH, &wire.ReportMetadata{HopLatency: 10_000}, nil, f)
			}
			n++
		}
		pkts = append(pkts, pk)
	}
	return pkts
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublish measures a collector with JetStream publishing on (a
// local nats-server, stream with one replica): decode, aggregation, the
// events (1/512 drop and 1/16 congestion reports) and the flow summaries
// of 4,096 flows (3 messages each, one per node) every 1 s and every
// 100 ms, per report: CPU ns of this process (nats-server excluded),
// allocations, and reports per CPU second. All messages are acknowledged
// before the timer stops. BenchmarkNoPublish is the same without the
// publisher.
func BenchmarkPublish(b *testing.B) {
	for _, every := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("summary="+every.String(), func(b *testing.B) { benchCollector(b, every) })
	}
}

func BenchmarkNoPublish(b *testing.B) { benchCollector(b, 0) }

func benchCollector(b *testing.B, summaries time.Duration) {
	publish := summaries > 0
	const flows, per = 4096, 8
	pkts := benchPackets(b, flows)
	c := collector.New(collector.Config{})
	var p *Publisher
	if publish {
		cl := natstest.Start(b, 1)
		var err error
		p, err = New(context.Background(), c, Config{URLs: cl.URLs(), CollectorID: "bench", SummaryInterval: summaries}, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
	for i, pk := range pkts { // every flow known: the steady state
		c.HandlePacket(pk, int64(i))
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.HandlePacket(pkts[i%len(pkts)], time.Now().UnixNano())
	}
	if p != nil {
		p.Close(time.Minute)
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	n := float64(b.N * per)
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/report")
	b.ReportMetric(n/cpu.Seconds(), "reports/cpu-s")
	if p != nil {
		cn := p.Counters()
		b.ReportMetric(float64(cn.Acked)/n, "msgs/report")
		b.ReportMetric(float64(cn.Acked)/b.Elapsed().Seconds(), "msgs/s")
		// Events the publisher could not keep up with (its queue full).
		b.ReportMetric(float64(cn.Dropped)/n, "dropped/report")
		if cn.Acked != cn.Published || cn.Failed != 0 {
			b.Errorf("publisher %+v", cn)
		}
	}
}

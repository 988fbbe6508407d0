package collector

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

func TestReceiverLoopback(t *testing.T) {
	r, err := Listen("127.0.0.1:0", 8)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{})
	done := make(chan error, 1)
	go func() { done <- c.Serve(r) }()
	s, err := net.Dial("udp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 20; i++ {
		s.Write(testPayload(t, uint32(i)))
	}
	s.Write([]byte{0x70, 1, 2}) // malformed
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets < 21 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := c.Snapshot(0)
	if st.Counters.Reports != 60 || st.Counters.Errors[ErrKindVersion] != 1 || st.Counters.Lost != 0 {
		t.Errorf("counters = %+v", st.Counters)
	}
	if f, ok := c.Flow(testFlow); !ok || f.NHops != 4 {
		t.Errorf("flow = %+v", f)
	}
}

// BenchmarkReceiveLoopback sends b.N packets of 8 coalesced reports (each
// with a 3-hop INT-MD stack) over 127.0.0.1 and measures the reports the
// receive path (recvmmsg, decode, aggregate) handles per second. Reports
// lost in the socket are not counted.
func BenchmarkReceiveLoopback(b *testing.B) {
	const per = 8
	r, err := Listen("127.0.0.1:0", DefaultBatch)
	if err != nil {
		b.Fatal(err)
	}
	c := New(Config{})
	pkt := benchPayload(b, per, 0)
	s, err := net.Dial("udp", r.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		for i := 0; i < b.N; i++ {
			s.Write(pkt)
		}
	}()
	got := 0
	var last time.Time
	for got < b.N {
		r.SetDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := r.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break // the rest was dropped by the socket
		}
		if err != nil {
			b.Fatal(err)
		}
		c.Lock()
		for i := 0; i < n; i++ {
			c.HandlePacketLocked(r.Packet(i), 0)
		}
		c.Unlock()
		got += n
		last = time.Now()
	}
	b.StopTimer()
	r.Close()
	b.ReportMetric(float64(c.Snapshot(1).Counters.Reports)/last.Sub(start).Seconds(), "reports/s")
	b.ReportMetric(float64(b.N-got)/float64(b.N)*100, "%lost")
}

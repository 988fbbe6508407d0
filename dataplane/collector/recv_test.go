package collector

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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

// TestReceiverGroup: receivers sharing a port with SO_REUSEPORT each get
// the senders of some addresses, all of an address's datagrams whatever
// its source port (its sequence numbers stay in order), ServeAll
// aggregates what all of them read and returns once they are closed, and
// another group cannot join the port.
func TestReceiverGroup(t *testing.T) {
	rs, err := ListenGroup("127.0.0.1:0", 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	addr := rs[0].Addr().String()
	if got := rs[1].Addr().String(); got != addr {
		t.Fatalf("second receiver on %s, first on %s", got, addr)
	}
	if more, err := ListenGroup(addr, 2, 8); err == nil {
		for _, r := range more {
			r.Close()
		}
		t.Fatalf("a second group on %s: no error", addr)
	}
	// Senders on 127.0.0.1 and 127.0.0.2, eight source ports each.
	const senders, each = 16, 5
	var conns []*net.UDPConn
	for i := 0; i < senders; i++ {
		s, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%2))}, rs[0].Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		conns = append(conns, s)
	}
	for i, s := range conns {
		s.Write(testPayload(t, uint32(i)))
	}
	at := readGroup(rs)
	// By the address's last word modulo 2: .1 to the second receiver,
	// .2 to the first.
	want := map[netip.Addr]map[int]int{
		netip.MustParseAddr("127.0.0.1"): {1: senders / 2},
		netip.MustParseAddr("127.0.0.2"): {0: senders / 2},
	}
	if !reflect.DeepEqual(at, want) {
		t.Fatalf("datagrams by sender address and receiver %v, want %v", at, want)
	}
	c := New(Config{})
	done := make(chan error, 1)
	go func() { done <- c.ServeAll(rs) }()
	for i, s := range conns {
		for k := 0; k < each; k++ {
			s.Write(testPayload(t, uint32(i*each+k)))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets < senders*each && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, r := range rs {
		r.Close()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Snapshot(0).Counters; st.Packets != senders*each || st.Reports != 3*senders*each {
		t.Errorf("packets %d, reports %d; want %d, %d", st.Packets, st.Reports, senders*each, 3*senders*each)
	}
}

// TestReceiverGroupIPv6: the group steers IPv6 senders by their address
// too (its last 32 bits: ::1 to the second of two receivers).
func TestReceiverGroupIPv6(t *testing.T) {
	rs, err := ListenGroup("[::1]:0", 2, 8)
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer func() {
		for _, r := range rs {
			r.Close()
		}
	}()
	for i := 0; i < 8; i++ {
		s, err := net.Dial("udp", rs[0].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s.Write(testPayload(t, uint32(i)))
		s.Close()
	}
	if at, want := readGroup(rs), map[netip.Addr]map[int]int{netip.MustParseAddr("::1"): {1: 8}}; !reflect.DeepEqual(at, want) {
		t.Fatalf("datagrams by sender address and receiver %v, want %v", at, want)
	}
}

// readGroup reads every receiver of rs until it has been quiet for 300
// ms and counts the datagrams by sender address and receiver.
func readGroup(rs []*Receiver) map[netip.Addr]map[int]int {
	at := map[netip.Addr]map[int]int{}
	for k, r := range rs {
		for {
			r.SetDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := r.Read()
			if err != nil {
				break
			}
			for i := 0; i < n; i++ {
				a := r.From(i)
				if at[a] == nil {
					at[a] = map[int]int{}
				}
				at[a][k]++
			}
		}
		r.SetDeadline(time.Time{})
	}
	return at
}

// BenchmarkReceiveLoopback sends b.N packets of 8 coalesced reports (each
// with a 3-hop INT-MD stack) over 127.0.0.1 with sendmmsg (8 UDP GSO
// messages of 32 datagrams per call, at most 1024 datagrams in flight)
// and measures the reports the receive path (recvmmsg, decode, aggregate)
// handles per second, from the first to the last packet read. Reports lost
// in the socket are not counted (%lost).
func BenchmarkReceiveLoopback(b *testing.B) {
	b.ReportAllocs()
	cpu0 := cpuTime()
	m := receiveRound(b, b.N, true)
	cpu := cpuTime() - cpu0
	b.ReportMetric(m.reports/m.wall.Seconds(), "reports/s")
	b.ReportMetric(m.reports/m.cpu.Seconds(), "recv-reports/cpu-s")
	b.ReportMetric(float64(b.N*benchPer)/cpu.Seconds(), "reports/process-cpu-s")
	b.ReportMetric(m.lost*100, "%lost")
}

// BenchmarkReceiveVsNull compares the collector's receive path with a
// null receiver (the same recvmmsg batches, nothing decoded) on the same
// traffic (as BenchmarkReceiveLoopback, b.N datagrams per round), in
// interleaved rounds whose order alternates. It reports the ratio of the
// collector's reports per second to the null receiver's datagrams per
// second times the reports per datagram (recv/null), and the same ratio of
// the receiving thread's CPU time per datagram (cpu/null), each as the
// median with the minimum and maximum, and the 1-minute load average.
func BenchmarkReceiveVsNull(b *testing.B) {
	const rounds = 5
	var rate, cpu []float64
	b.ReportAllocs()
	for i := 0; i < rounds; i++ {
		var null, coll recvMeasure
		if i%2 == 0 {
			null, coll = receiveRound(b, b.N, false), receiveRound(b, b.N, true)
		} else {
			coll, null = receiveRound(b, b.N, true), receiveRound(b, b.N, false)
		}
		rate = append(rate, coll.reports/coll.wall.Seconds()/(null.reports/null.wall.Seconds()))
		cpu = append(cpu, (null.cpu.Seconds()/null.reports)/(coll.cpu.Seconds()/coll.reports))
	}
	slices.Sort(rate)
	slices.Sort(cpu)
	b.ReportMetric(rate[rounds/2], "recv/null")
	b.ReportMetric(rate[0], "recv/null-min")
	b.ReportMetric(rate[rounds-1], "recv/null-max")
	b.ReportMetric(cpu[rounds/2], "cpu/null")
	b.ReportMetric(cpu[0], "cpu/null-min")
	b.ReportMetric(cpu[rounds-1], "cpu/null-max")
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		b.ReportMetric(float64(si.Loads[0])/(1<<unix.SI_LOAD_SHIFT), "load1")
	}
}

// benchPer is the number of reports per datagram of the receive
// benchmarks.
const benchPer = 8

// recvMeasure is one receive round: the reports (datagrams times
// benchPer) read in wall time from the first to the last read, the
// receiving thread's CPU time, and the fraction of datagrams lost.
type recvMeasure struct {
	reports   float64
	wall, cpu time.Duration
	lost      float64
}

// receiveRound sends n datagrams of benchPer reports to a fresh receiver
// and reads them, handing them to a collector when handle is set (the
// null receiver otherwise).
func receiveRound(b *testing.B, n int, handle bool) recvMeasure {
	const burst = 8 // messages per sendmmsg
	r, err := Listen("127.0.0.1:0", DefaultBatch)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c := New(Config{})
	pkt := benchPayload(b, benchPer, 0)
	s, err := net.Dial("udp", r.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	raw, err := s.(*net.UDPConn).SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	// Each message is a UDP GSO super-datagram of seg copies of pkt: the
	// kernel segments it into seg datagrams, so the sender pays for one
	// trip through the stack per message instead of per datagram.
	const seg = 32
	super := bytes.Repeat(pkt, seg)
	iov := unix.Iovec{Base: &super[0]}
	iov.SetLen(len(super))
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(len(pkt))
	msgs := make([]unix.Mmsghdr, burst)
	for i := range msgs {
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
		msgs[i].Hdr.Control = &oob[0]
		msgs[i].Hdr.SetControllen(len(oob))
	}
	b.ResetTimer()
	// The sender keeps at most window datagrams in flight (sent and not
	// yet read), well within the socket's receive buffer: the benchmark
	// measures what the receiver handles without loss, and a sender far
	// ahead would only fill the buffer and take CPU from the receiver.
	const window = 1024
	var read atomic.Int64
	var stop atomic.Bool // the receiver gave up: datagrams were lost
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for sent := 0; sent < n && !stop.Load(); {
			for int64(sent)-read.Load() > window-burst*seg && !stop.Load() {
				time.Sleep(20 * time.Microsecond)
			}
			k := min(burst, (n-sent+seg-1)/seg)
			raw.Write(func(fd uintptr) bool {
				m, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(k), 0, 0, 0)
				if e == unix.EAGAIN {
					return false
				}
				if e == 0 {
					sent += int(m) * seg
				} else {
					sent += k * seg // ECONNREFUSED and the like: counted as lost
				}
				return true
			})
		}
	}()
	// The receiver runs on its own thread, to read its CPU time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	got := 0
	var first, last time.Time
	for got < n {
		r.SetDeadline(time.Now().Add(200 * time.Millisecond))
		k, err := r.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break // the rest was dropped by the socket
		}
		if err != nil {
			b.Fatal(err)
		}
		if got == 0 {
			first = time.Now()
		}
		if handle {
			c.handleFrom(r, k, 0)
		}
		got += k
		read.Store(int64(got))
		last = time.Now()
	}
	cpu := threadCPU() - cpu0
	b.StopTimer()
	stop.Store(true)
	<-sent
	reports := float64(got * benchPer)
	if handle {
		reports = float64(c.Snapshot(1).Counters.Reports)
	}
	return recvMeasure{reports: reports, wall: last.Sub(first), cpu: cpu, lost: float64(n-got) / float64(n)}
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

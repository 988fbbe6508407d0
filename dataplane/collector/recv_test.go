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
	m := receiveRound(b, b.N, 32, 256/32, true, true)
	cpu := cpuTime() - cpu0
	b.ReportMetric(m.reports/m.wall.Seconds(), "reports/s")
	b.ReportMetric(m.reports/m.cpu.Seconds(), "recv-reports/cpu-s")
	b.ReportMetric(float64(b.N*benchPer)/cpu.Seconds(), "reports/process-cpu-s")
	b.ReportMetric(m.lost*100, "%lost")
}

// BenchmarkReceiveVsNull compares the collector's receive path with a
// null receiver on the same traffic (as BenchmarkReceiveLoopback, b.N
// datagrams per round): a plain recvmmsg receiver (batches of 256
// datagrams, no UDP GRO, nothing decoded), and the same null receiver
// with the collector's socket (UDP GRO on). Rounds are interleaved, the
// order rotating. It reports the ratio of the collector's reports per
// second to the null receiver's datagrams per second times the reports
// per datagram (recv/null; recv/null-gro against the GRO null receiver),
// and the same ratio of the receiving thread's CPU time per report
// (cpu/null, cpu/null-gro), each as the median with the minimum and
// maximum, and the 1-minute load average.
func BenchmarkReceiveVsNull(b *testing.B) { benchVsNull(b, 32, 256/32) }

// BenchmarkReceiveVsNullDatagrams is BenchmarkReceiveVsNull with a
// sender that sends every datagram on its own (sendmmsg of 256 messages,
// no GSO; intd with one packet queued): on loopback nothing coalesces
// them, so GRO cannot help and each datagram costs its own trip through
// recvmmsg.
func BenchmarkReceiveVsNullDatagrams(b *testing.B) { benchVsNull(b, 1, 256) }

// BenchmarkReceiveVsNullIntd is BenchmarkReceiveVsNull with a sender that
// sends as intd's report sender does when its queue to the collector is
// full: one UDP GSO message per sendmsg, as many datagrams as the kernel
// takes in one (64, and 64 kB).
func BenchmarkReceiveVsNullIntd(b *testing.B) {
	seg := min(64, (0xffff-48)/len(benchPayload(b, benchPer, 0)))
	benchVsNull(b, seg, 1)
}

// benchVsNull is BenchmarkReceiveVsNull with seg datagrams per message,
// burst messages per sendmmsg.
func benchVsNull(b *testing.B, seg, burst int) {
	const rounds = 5
	var rate, cpu, rateGRO, cpuGRO []float64
	b.ReportAllocs()
	for i := 0; i < rounds; i++ {
		var m [3]recvMeasure
		for k := 0; k < 3; k++ { // null, null with GRO, collector; rotating
			v := (i + k) % 3
			m[v] = receiveRound(b, b.N, seg, burst, v == 2, v != 0)
		}
		null, nullGRO, coll := m[0], m[1], m[2]
		rate = append(rate, coll.reports/coll.wall.Seconds()/(null.reports/null.wall.Seconds()))
		cpu = append(cpu, (null.cpu.Seconds()/null.reports)/(coll.cpu.Seconds()/coll.reports))
		rateGRO = append(rateGRO, coll.reports/coll.wall.Seconds()/(nullGRO.reports/nullGRO.wall.Seconds()))
		cpuGRO = append(cpuGRO, (nullGRO.cpu.Seconds()/nullGRO.reports)/(coll.cpu.Seconds()/coll.reports))
	}
	for _, v := range []struct {
		name string
		r    []float64
	}{{"recv/null", rate}, {"cpu/null", cpu}, {"recv/null-gro", rateGRO}, {"cpu/null-gro", cpuGRO}} {
		slices.Sort(v.r)
		b.ReportMetric(v.r[rounds/2], v.name)
		if v.name == "recv/null" || v.name == "cpu/null" {
			b.ReportMetric(v.r[0], v.name+"-min")
			b.ReportMetric(v.r[rounds-1], v.name+"-max")
		}
	}
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
// (the collector's, with UDP GRO where the kernel has it, when gro is
// set; a plain recvmmsg receiver otherwise) and reads them, handing them
// to a collector when handle is set (the null receiver otherwise). The
// sender sends messages of seg datagrams (UDP GSO when seg > 1), burst
// messages per sendmmsg.
func receiveRound(b *testing.B, n, seg, burst int, handle, gro bool) recvMeasure {
	r, err := Listen("127.0.0.1:0", DefaultBatch)
	if !gro {
		r, err = listenPlain("127.0.0.1:0")
	}
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
		if seg > 1 {
			msgs[i].Hdr.Control = &oob[0]
			msgs[i].Hdr.SetControllen(len(oob))
		}
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
			for int64(sent)-read.Load() > int64(window-burst*seg) && !stop.Load() {
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

// listenPlain is a receiver without UDP GRO: one datagram per slot.
func listenPlain(addr string) (*Receiver, error) { return listen(addr, DefaultBatch, false) }

// listenGRO is a receiver with UDP GRO on 127.0.0.1, closed when the
// test ends; it skips the test when the kernel has no UDP GRO.
func listenGRO(t *testing.T, batch int) *Receiver {
	t.Helper()
	r, err := Listen("127.0.0.1:0", batch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if !r.GRO() {
		t.Skip("the kernel refuses UDP_GRO (Linux before 5.0)")
	}
	return r
}

// sendGSO sends segs (all of the first one's size but the last, which
// may be shorter) as one UDP GSO message: the kernel cuts it into one
// datagram per segment, or on loopback hands it whole to a socket with
// UDP GRO on.
func sendGSO(t *testing.T, s *net.UDPConn, segs ...[]byte) {
	t.Helper()
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(len(segs[0]))
	if _, _, err := s.WriteMsgUDP(bytes.Join(segs, nil), oob, nil); err != nil {
		t.Fatal(err)
	}
}

// received is one datagram as a Receiver handed it.
type received struct {
	from    netip.Addr
	payload string
}

// readAll reads r until it has been quiet for 300 ms and returns the
// datagrams in order, and the largest number of datagrams one slot held.
func readAll(t *testing.T, r *Receiver) ([]received, int) {
	t.Helper()
	var got []received
	most := 0
	for {
		r.SetDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := r.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return got, most
		}
		if err != nil {
			t.Fatal(err)
		}
		per := map[int32]int{}
		for i := 0; i < n; i++ {
			got = append(got, received{r.From(i), string(r.Packet(i))})
			if r.gro {
				per[r.segs[i].slot]++
				most = max(most, per[r.segs[i].slot])
			} else {
				most = 1
			}
		}
	}
}

// TestReceiverGRO: a receiver with UDP GRO gets a sender's GSO message
// in one slot and hands its datagrams one by one, the last short one
// too, byte for byte and in the order sent, between the datagrams of
// another sender, exactly as a plain receiver (one datagram per slot)
// gets them.
func TestReceiverGRO(t *testing.T) {
	gro := listenGRO(t, 8)
	plain, err := listenPlain("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.GRO() {
		t.Fatal("listenPlain: GRO on")
	}
	seg := func(tag byte, n int) []byte { return bytes.Repeat([]byte{tag}, n) }
	var want []received
	for _, r := range []*Receiver{gro, plain} {
		a, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, r.Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}, r.Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		sendGSO(t, a, seg(1, 100), seg(2, 100), seg(3, 100), seg(4, 37)) // a last short segment
		b.Write(seg(5, 100))
		sendGSO(t, a, seg(6, 64), seg(7, 64))   // segments of another size
		sendGSO(t, b, seg(8, 50))               // one segment
		sendGSO(t, a, seg(9, 1000), seg(10, 1)) // a one-byte last segment
		if want == nil {
			one, two := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
			for _, w := range []struct {
				from netip.Addr
				seg  []byte
			}{{one, seg(1, 100)}, {one, seg(2, 100)}, {one, seg(3, 100)}, {one, seg(4, 37)}, {two, seg(5, 100)},
				{one, seg(6, 64)}, {one, seg(7, 64)}, {two, seg(8, 50)}, {one, seg(9, 1000)}, {one, seg(10, 1)}} {
				want = append(want, received{w.from, string(w.seg)})
			}
		}
	}
	got, most := readAll(t, gro)
	if !slices.Equal(got, want) {
		t.Errorf("GRO receiver: %d datagrams %v\nwant %d %v", len(got), got, len(want), want)
	}
	if most < 4 {
		t.Errorf("GRO receiver: at most %d datagrams in one slot, want the first message's 4 in one", most)
	}
	if got, _ := readAll(t, plain); !slices.Equal(got, want) {
		t.Errorf("plain receiver: %d datagrams %v\nwant %d %v", len(got), got, len(want), want)
	}
}

// TestReceiverGROCollector: the collector serving a GRO receiver counts
// every report of coalesced datagrams, with no sequence number lost or
// reordered, and reads its datagrams without allocating.
func TestReceiverGROCollector(t *testing.T) {
	r := listenGRO(t, 4)
	c := New(Config{})
	done := make(chan error, 1)
	go func() { done <- c.Serve(r) }()
	s, err := net.DialUDP("udp", nil, r.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 20 messages of 7 datagrams of 2 reports and a last of 1 (shorter).
	const msgs, full = 20, 7
	seq := uint32(0)
	for m := 0; m < msgs; m++ {
		var segs [][]byte
		for k := 0; k < full; k++ {
			segs = append(segs, benchPayload(t, 2, seq))
			seq++
		}
		segs = append(segs, benchPayload(t, 1, seq))
		seq++
		sendGSO(t, s, segs...)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets < msgs*(full+1) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := c.Snapshot(0)
	if st.Counters.Packets != msgs*(full+1) || st.Counters.Reports != msgs*(2*full+1) || st.Counters.Lost != 0 {
		t.Errorf("counters %+v; want %d packets, %d reports, none lost", st.Counters, msgs*(full+1), msgs*(2*full+1))
	}
	if len(st.Sources) != 1 || st.Sources[0].Reordered != 0 || st.Sources[0].OutOfWindow != 0 || st.Sources[0].Packets != msgs*(full+1) {
		t.Errorf("sources %+v", st.Sources)
	}
}

// TestSplitGRO cuts slots by the segment size in their control messages.
func TestSplitGRO(t *testing.T) {
	r := listenGRO(t, 4)
	cmsg := func(slot int, size int32) {
		b := r.oob[slot*groOOB : (slot+1)*groOOB]
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
		h.SetLen(unix.CmsgLen(4))
		*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = size
		r.msgs[slot].Hdr.SetControllen(unix.CmsgSpace(4))
	}
	r.msgs[0].Len, r.msgs[1].Len, r.msgs[2].Len, r.msgs[3].Len = 10, 8, 5, 7
	cmsg(0, 4)                     // 4+4+2
	cmsg(1, 4)                     // 4+4
	r.msgs[2].Hdr.SetControllen(0) // no segment size: one datagram
	cmsg(3, 7)                     // the size of the whole: one datagram
	r.n = 4
	r.split()
	want := []segment{{0, 0, 4}, {0, 4, 4}, {0, 8, 2}, {1, 0, 4}, {1, 4, 4}, {2, 0, 5}, {3, 0, 7}}
	if r.n != len(want) || !slices.Equal(r.segs, want) {
		t.Errorf("segments %v (n %d), want %v", r.segs, r.n, want)
	}
	if a := testing.AllocsPerRun(100, func() { r.n = 4; r.split() }); a != 0 {
		t.Errorf("split: %v allocations", a)
	}
}

// TestGROSize finds the segment size among control messages and ignores
// malformed ones.
func TestGROSize(t *testing.T) {
	msg := func(level, typ int32, v int32) []byte {
		b := make([]byte, unix.CmsgSpace(4))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(4))
		*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = v
		return b
	}
	gro := msg(unix.SOL_UDP, unix.UDP_GRO, 1200)
	other := msg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 3)
	bad := slices.Clone(gro)
	(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).SetLen(4 * unix.CmsgSpace(4)) // longer than the buffer
	for _, c := range []struct {
		name string
		b    []byte
		want int32
	}{
		{"none", nil, 0},
		{"segment size", gro, 1200},
		{"after another message", append(slices.Clone(other), gro...), 1200},
		{"another message only", other, 0},
		{"truncated", gro[:unix.CmsgLen(0)+2], 0},
		{"length past the end", bad, 0},
	} {
		if got := groSize(c.b); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

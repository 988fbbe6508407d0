package report

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/internal/netnstest"
)

// gsoPacket is a v2.0 report packet to dst of size bytes with sequence
// number seq (the rest of its bytes derived from seq, so a mix-up shows).
func gsoPacket(dst netip.AddrPort, seq uint32, size int) *Packet {
	b := groupHeaderWithSeq(seq)
	for len(b) < size {
		b = append(b, byte(seq*7+uint32(len(b))))
	}
	src := netip.MustParseAddr("127.0.0.1")
	if dst.Addr().Is6() {
		src = netip.IPv6Loopback()
	}
	return &Packet{Src: src, Dst: dst, Seq: seq, Payload: b[:size]}
}

// gsoSizes is a queued run of mixed sizes, and the UDP GSO messages it
// must go out as: runs of one size, a shorter packet ending its run, a
// larger one starting a new one, at most 64 datagrams and 64 kB each.
var (
	gsoSizes = func() []int {
		s := []int{100, 100, 100, 100, 100, 60, 100, 100, 100, 200, 200, 50, 50, 50}
		for i := 0; i < 70; i++ {
			s = append(s, 80)
		}
		for i := 0; i < 40; i++ {
			s = append(s, 2000)
		}
		return append(s, 3000) // larger: a datagram of its own
	}()
	// {segment size, datagrams} per message; size 0: no segmentation.
	gsoMessages = [][2]int{{100, 6}, {100, 3}, {200, 3}, {50, 2}, {80, 64}, {80, 6}, {2000, 32}, {2000, 8}}
)

// udpListen is a UDP socket on 127.0.0.1 (::1 with v6) with an 8 MB
// receive buffer, UDP GRO on when gro is set, closed when the test ends.
func udpListen(t *testing.T, gro bool, v6 ...bool) *net.UDPConn {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 1)
	if len(v6) > 0 && v6[0] {
		ip = net.IPv6loopback
	}
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		t.Skip("no loopback UDP:", err)
	}
	t.Cleanup(func() { ln.Close() })
	rc, _ := ln.SyscallConn()
	var serr error
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		}
		if gro {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
		}
	})
	if serr != nil {
		t.Skip("the kernel has no UDP GRO:", serr)
	}
	return ln
}

// readMessages reads ln until it is quiet for 300 ms: each message's
// payload and its segment size (UDP GRO's control message; 0 without).
func readMessages(t *testing.T, ln *net.UDPConn) (payloads [][]byte, segs []int) {
	t.Helper()
	buf, oob := make([]byte, 1<<16), make([]byte, 256)
	for {
		ln.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, oobn, _, _, err := ln.ReadMsgUDP(buf, oob)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return payloads, segs
		}
		if err != nil {
			t.Fatal(err)
		}
		seg := 0
		cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range cms {
			if m.Header.Level == unix.IPPROTO_UDP && m.Header.Type == unix.UDP_GRO && len(m.Data) >= 2 {
				seg = int(binary.NativeEndian.Uint16(m.Data))
			}
		}
		payloads = append(payloads, append([]byte(nil), buf[:n]...))
		segs = append(segs, seg)
	}
}

func gsoBatch(dst netip.AddrPort) []*Packet {
	var ps []*Packet
	for i, n := range gsoSizes {
		ps = append(ps, gsoPacket(dst, uint32(i), n))
	}
	return ps
}

// TestSendBatchGSO: a queued run of mixed sizes goes out as UDP GSO
// messages (a receiver with GRO on loopback gets each message whole, cut
// where the sizes and the kernel's limits require) and a receiver without
// GRO gets every datagram byte for byte, in order, with its own size;
// over IPv4 and IPv6.
func TestSendBatchGSO(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) { testSendBatchGSO(t, v6) })
	}
}

func testSendBatchGSO(t *testing.T, v6 bool) {
	snd := NewUDPSender()
	defer snd.Close()
	plain, gro := udpListen(t, false, v6), udpListen(t, true, v6)
	for _, ln := range []*net.UDPConn{plain, gro} {
		ps := gsoBatch(ln.LocalAddr().(*net.UDPAddr).AddrPort())
		errs := make([]error, len(ps))
		snd.SendBatch(ps, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("packet %d: %v", i, err)
			}
		}
	}
	got, _ := readMessages(t, plain)
	want := gsoBatch(netip.AddrPort{})
	if len(got) != len(want) {
		t.Fatalf("receiver without GRO: %d datagrams, want %d", len(got), len(want))
	}
	for i, p := range want {
		if !bytes.Equal(got[i], p.Payload) {
			t.Fatalf("datagram %d: %d bytes %x..., want %d bytes %x...", i, len(got[i]), got[i][:8], len(p.Payload), p.Payload[:8])
		}
	}
	msgs, segs := readMessages(t, gro)
	var gotMsgs [][2]int
	at := 0
	for i, m := range msgs {
		k := 1
		if segs[i] != 0 {
			k = (len(m) + segs[i] - 1) / segs[i]
		}
		gotMsgs = append(gotMsgs, [2]int{segs[i], k})
		var joined []byte
		for _, p := range want[at:min(at+k, len(want))] {
			joined = append(joined, p.Payload...)
		}
		if !bytes.Equal(m, joined) {
			t.Fatalf("message %d (%d bytes, segments of %d) is not packets %d-%d", i, len(m), segs[i], at, at+k-1)
		}
		at += k
	}
	wantMsgs := append(append([][2]int(nil), gsoMessages...), [2]int{0, 1})
	if fmt.Sprint(gotMsgs) != fmt.Sprint(wantMsgs) {
		t.Errorf("messages {segment size, datagrams} %v, want %v", gotMsgs, wantMsgs)
	}
}

// TestSendBatchAllocs: sending a batch, from the kernel's port or from
// chosen ones, allocates nothing once the collector's socket exists.
func TestSendBatchAllocs(t *testing.T) {
	ln := udpListen(t, false)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			if _, err := ln.Read(buf); err != nil {
				return
			}
		}
	}()
	snd := NewUDPSender()
	defer snd.Close()
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	ps := []*Packet{gsoPacket(dst, 1, 500), gsoPacket(dst, 2, 500), gsoPacket(dst, 3, 500), gsoPacket(dst, 4, 90)}
	errs := make([]error, len(ps))
	snd.SendBatch(ps, errs)
	if n := testing.AllocsPerRun(100, func() { snd.SendBatch(ps, errs) }); n != 0 || errs[0] != nil {
		t.Errorf("%v allocations per batch (err %v)", n, errs[0])
	}
	if os.Geteuid() != 0 {
		return // no raw socket
	}
	for i, p := range ps {
		p.SrcPort = uint16(30000 + i)
	}
	snd.SendBatch(ps, errs)
	if n := testing.AllocsPerRun(100, func() { snd.SendBatch(ps, errs) }); n != 0 || errs[0] != nil {
		t.Errorf("from chosen ports: %v allocations per batch (err %v)", n, errs[0])
	}
}

// gate is a UDPSender whose first Send waits for open: the reports queued
// meanwhile reach the collector's goroutine together.
type gate struct {
	*UDPSender
	open chan struct{}
	once bool
}

func (g *gate) Send(p *Packet) error {
	if !g.once {
		g.once = true
		<-g.open
	}
	return g.UDPSender.Send(p)
}

// TestPipelineBatchRefused: packets queued together and sent as UDP GSO
// messages to a closed port are each refused by sequence number: every
// one counts as a send error, none as sent.
func TestPipelineBatchRefused(t *testing.T) {
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback UDP:", err)
	}
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	ln.Close() // the port is now closed
	g := &gate{UDPSender: NewUDPSender(), open: make(chan struct{})}
	defer g.Close()
	p, err := New(udpConfig(1, "127.0.0.1", dst), Options{Sender: g, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := newFrame(1, []uint32{1}, []uint32{1})
	var ev Event
	const n = 40 // within the kernel's burst of ICMP errors (50)
	for i := 0; i < n; i++ {
		f.event(&ev, int64(i), 10)
		ev.ReportAll = true
		p.Report(&ev)
	}
	close(g.open)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c := p.Stats().Sessions["s"].Collectors[0]; c.Queued == 0 && c.Packets+c.SendErrors >= n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the ICMP errors come back
	// One more send reads them.
	f.event(&ev, n, 10)
	ev.ReportAll = true
	p.Report(&ev)
	p.Close()
	c := p.Stats().Sessions["s"].Collectors[0]
	if c.QueueFull != 0 || c.SendErrors < n || c.Refused < n-1 || c.Packets > 1 {
		t.Errorf("collector %+v: want the %d packets queued together refused one by one", c, n)
	}
}

// TestSendBatchFallback: a socket on which the kernel refuses
// UDP_SEGMENT at its first message (EINVAL here: a socket without UDP
// checksums; EIO on kernels that refuse it where the device has no
// checksum offload: this one, 6.18, accepted that) gets each packet of the run on its own, is logged once, and sends
// one datagram per sendmsg from then on.
func TestSendBatchFallback(t *testing.T) {
	ln := udpListen(t, false)
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(old)
	snd := NewUDPSender()
	defer snd.Close()
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	src := netip.MustParseAddr("127.0.0.1")
	c, err := snd.conn(udpKey{src, dst, 0, ""})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := c.SyscallConn()
	rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1) })
	if err != nil {
		t.Fatal(err)
	}
	var want []*Packet
	for round := uint32(0); round < 3; round++ {
		ps := []*Packet{gsoPacket(dst, 4*round, 300), gsoPacket(dst, 4*round+1, 300), gsoPacket(dst, 4*round+2, 300), gsoPacket(dst, 4*round+3, 120)}
		errs := make([]error, len(ps))
		snd.SendBatch(ps, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d packet %d: %v", round, i, err)
			}
		}
		want = append(want, ps...)
	}
	checkDatagrams(t, ln, want)
	if c.gso != gsoOff {
		t.Errorf("UDP_SEGMENT state %d, want off after the kernel refused it", c.gso)
	}
	if n := strings.Count(logs.String(), "UDP_SEGMENT"); n != 1 {
		t.Errorf("%d log lines about UDP_SEGMENT, want 1:\n%s", n, logs.String())
	}
}

// TestSendBatchBeyondMTU: a run whose datagrams exceed the route's MTU
// fails as too long (EMSGSIZE: the sockets set DF); its packets are tried
// one by one (each refused as a lone datagram would be) and the socket
// keeps UDP GSO for the runs that fit.
func TestSendBatchBeyondMTU(t *testing.T) {
	ns, h := netnstest.New(t)
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetMTU(lo, 1280)
	}
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatal(err)
	}
	netnstest.Enter(t, ns)
	ln := udpListen(t, false)
	snd := NewUDPSender()
	defer snd.Close()
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	var want []*Packet
	for _, size := range []int{1400, 300} {
		var ps []*Packet
		for i := 0; i < 4; i++ {
			ps = append(ps, gsoPacket(dst, uint32(size+i), size))
		}
		errs := make([]error, len(ps))
		snd.SendBatch(ps, errs)
		for i, err := range errs {
			if tooLong := errors.Is(err, unix.EMSGSIZE); tooLong != (size == 1400) {
				t.Fatalf("%d-byte packet %d: %v", size, i, err)
			}
		}
		if size == 300 {
			want = append(want, ps...)
		}
		c, err := snd.conn(udpKey{ps[0].Src, dst, 0, ""})
		if err != nil {
			t.Fatal(err)
		}
		if wantGSO := map[int]int{1400: gsoUnknown, 300: gsoOn}[size]; c.gso != wantGSO {
			t.Errorf("after the %d-byte run: UDP_SEGMENT state %d, want %d", size, c.gso, wantGSO)
		}
	}
	checkDatagrams(t, ln, want)
}

// BenchmarkSendBatch measures the CPU intd spends per report it sends to
// a collector on 127.0.0.1 (the process's CPU time less the receiving
// thread's; on loopback the sending thread also delivers the datagrams
// to the receiving socket), with the collector's goroutine handing what
// is queued to SendBatch (UDP GSO messages) and with one Send per packet,
// interleaved, five rounds of b.N reports each. Reports are coalesced 8
// to a packet (with a 128-byte inner packet, about 1.4 kB); the producer
// keeps at most 128 packets in flight (sent and not yet read) so that
// none is dropped. It reports each mode's CPU per report and their ratio
// (batch/single), median (min-max), and the 1-minute load average.
func BenchmarkSendBatch(b *testing.B) { benchSendBatch(b, 0) }

// BenchmarkSendBatchRaw is BenchmarkSendBatch from a fixed source port:
// through the raw socket, a run of packets in one sendmmsg against one
// sendmsg each.
func BenchmarkSendBatchRaw(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("raw sockets need CAP_NET_RAW: run as root")
	}
	benchSendBatch(b, 40000)
}

func benchSendBatch(b *testing.B, srcPort uint16) {
	const rounds = 5
	var batch, single, ratio []float64
	b.ReportAllocs()
	for i := 0; i < rounds; i++ {
		var ns [2]float64
		for k := 0; k < 2; k++ {
			m := (i + k) % 2 // 0: SendBatch, 1: Send per packet
			ns[m] = sendRound(b, b.N, m == 0, srcPort)
		}
		batch, single = append(batch, ns[0]), append(single, ns[1])
		ratio = append(ratio, ns[0]/ns[1])
	}
	for _, v := range []struct {
		name string
		r    []float64
	}{{"batch-cpu-ns/report", batch}, {"single-cpu-ns/report", single}, {"batch/single", ratio}} {
		slices.Sort(v.r)
		b.ReportMetric(v.r[rounds/2], v.name)
		b.ReportMetric(v.r[0], v.name+"-min")
		b.ReportMetric(v.r[rounds-1], v.name+"-max")
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		b.ReportMetric(float64(si.Loads[0])/(1<<unix.SI_LOAD_SHIFT), "load1")
	}
}

// sendRound sends n reports through a pipeline to a fresh receiver (from
// srcPort, 0: the kernel's) and returns the CPU nanoseconds per report
// received.
func sendRound(b *testing.B, n int, batched bool, srcPort uint16) float64 {
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Skip("no loopback UDP:", err)
	}
	defer ln.Close()
	if rc, err := ln.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) })
	}
	snd := NewUDPSender()
	defer snd.Close()
	var s Sender = snd
	if !batched {
		s = SenderFunc(snd.Send) // not a BatchSender
	}
	cfg := udpConfig(8, "127.0.0.1", ln.LocalAddr().(*net.UDPAddr).AddrPort())
	cfg.Sessions[0].MaxDelay = 0 // packets of 8 reports (the clock is the report index)
	cfg.Sessions[0].SrcPort = srcPort
	p, err := New(cfg, Options{Sender: s, TickInterval: -1, QueueLen: 256})
	if err != nil {
		b.Fatal(err)
	}
	f := newFrame(1, []uint32{1, 2, 3}, []uint32{1, 2, 3})
	var ev Event
	f.event(&ev, 0, 10)
	ev.ReportAll = true
	pkts := n / 8
	var read atomic.Int64
	var recvCPU time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := threadCPU()
		buf := make([]byte, 1<<16)
		for read.Load() < int64(pkts) {
			ln.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := ln.Read(buf); err != nil {
				break
			}
			read.Add(1)
		}
		recvCPU = threadCPU() - cpu0
	}()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < pkts*8; i++ {
		for int64(i/8)-read.Load() > 128 {
			time.Sleep(20 * time.Microsecond)
		}
		ev.Now = int64(i)
		p.Report(&ev)
	}
	<-done
	cpu := processCPU() - cpu0 - recvCPU
	b.StopTimer()
	p.Close()
	got := read.Load()
	if got < int64(pkts) {
		c := p.Stats().Sessions["s"].Collectors[0]
		b.Fatalf("batched %v: %d of %d packets received; sender %+v", batched, got, pkts, c)
	}
	return float64(cpu.Nanoseconds()) / float64(got*8)
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSendBatchRaw: a batch mixing packets from chosen source ports (the
// raw socket, a run of them in one sendmmsg) and from the kernel's port
// (UDP GSO) reaches a receiver in order, byte for byte, each from its
// port and with a valid UDP checksum (the receiving kernel checks it).
func TestSendBatchRaw(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raw sockets need CAP_NET_RAW: run as root")
	}
	for _, v6 := range []bool{false, true} {
		ln := udpListen(t, false, v6)
		dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
		snd := NewUDPSender()
		defer snd.Close()
		var ps []*Packet
		for i := 0; i < 200; i++ {
			p := gsoPacket(dst, uint32(i), 100+i%3)
			if i%100 < 80 { // runs of 80 from chosen ports: 64 and 16
				p.SrcPort = uint16(20000 + i)
			}
			ps = append(ps, p)
		}
		errs := make([]error, len(ps))
		snd.SendBatch(ps, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("v6 %v packet %d: %v", v6, i, err)
			}
		}
		buf := make([]byte, 1<<16)
		for i, p := range ps {
			ln.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, from, err := ln.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("v6 %v: %d of %d datagrams: %v", v6, i, len(ps), err)
			}
			if !bytes.Equal(buf[:n], p.Payload) || p.SrcPort != 0 && from.Port() != p.SrcPort {
				t.Fatalf("v6 %v datagram %d: %d bytes from %v, want packet %d (%d bytes, port %d)", v6, i, n, from, p.Seq, len(p.Payload), p.SrcPort)
			}
		}
	}
}

// checkDatagrams reads what ln received and checks it is want's payloads,
// in order.
func checkDatagrams(t *testing.T, ln *net.UDPConn, want []*Packet) {
	t.Helper()
	got, _ := readMessages(t, ln)
	if len(got) != len(want) {
		t.Fatalf("%d datagrams, want %d", len(got), len(want))
	}
	for i, p := range want {
		if !bytes.Equal(got[i], p.Payload) {
			t.Errorf("datagram %d: %d bytes, want %d bytes of packet %d", i, len(got[i]), len(p.Payload), p.Seq)
		}
	}
}

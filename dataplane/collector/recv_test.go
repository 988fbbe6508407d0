package collector

import (
	"bytes"
	"errors"
	"net"
	"os"
	"runtime"
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

// BenchmarkReceiveLoopback sends b.N packets of 8 coalesced reports (each
// with a 3-hop INT-MD stack) over 127.0.0.1 with sendmmsg (8 UDP GSO
// messages of 32 datagrams per call, at most 1024 datagrams in flight)
// and measures the reports the receive path (recvmmsg, decode, aggregate)
// handles per second, from the first to the last packet read. Reports lost
// in the socket are not counted (%lost).
func BenchmarkReceiveLoopback(b *testing.B) {
	const per, burst = 8, 8 // reports per datagram, messages per sendmmsg
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
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	// The sender keeps at most window datagrams in flight (sent and not
	// yet read), well within the socket's receive buffer: the benchmark
	// measures what the receiver handles without loss, and a sender far
	// ahead would only fill the buffer and take CPU from the receiver.
	const window = 1024
	var read atomic.Int64
	go func() {
		for sent := 0; sent < b.N; {
			for int64(sent)-read.Load() > window-burst*seg {
				time.Sleep(20 * time.Microsecond)
			}
			n := min(burst, (b.N-sent+seg-1)/seg)
			raw.Write(func(fd uintptr) bool {
				k, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(n), 0, 0, 0)
				if e == unix.EAGAIN {
					return false
				}
				if e == 0 {
					sent += int(k) * seg
				} else {
					sent += n * seg // ECONNREFUSED and the like: counted as lost
				}
				return true
			})
		}
	}()
	// The receiver runs on its own thread, to read its CPU time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rcpu0 := threadCPU()
	got := 0
	var first, last time.Time
	for got < b.N {
		r.SetDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := r.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break // the rest was dropped by the socket
		}
		if err != nil {
			b.Fatal(err)
		}
		if got == 0 {
			first = time.Now()
		}
		c.HandlePackets(n, r.Packet, 0)
		got += n
		read.Store(int64(got))
		last = time.Now()
	}
	b.StopTimer()
	rcpu := threadCPU() - rcpu0
	cpu := cpuTime() - cpu0
	r.Close()
	reports := c.Snapshot(1).Counters.Reports
	b.ReportMetric(float64(reports)/last.Sub(first).Seconds(), "reports/s")
	b.ReportMetric(float64(reports)/rcpu.Seconds(), "recv-reports/cpu-s")
	b.ReportMetric(float64(b.N*per)/cpu.Seconds(), "reports/process-cpu-s")
	b.ReportMetric(float64(b.N-got)/float64(b.N)*100, "%lost")
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

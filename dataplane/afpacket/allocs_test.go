//go:build linux

package afpacket

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/soft"
)

// TestNodeAllocs forwards UDP frames and whole TCP super-packets through
// a running dataplane (h1 - r - h2, sent and counted with AF_PACKET ports,
// so no socket code of the test allocates per packet) and checks that the
// node's loop (poll, recvmmsg, the switch, sendmmsg) allocates nothing per
// packet: what the process allocates meanwhile (stats polls, the
// runtime, netlink updates of the kernel tables) stays far below one
// allocation per packet.
func TestNodeAllocs(t *testing.T) {
	r, h1, _ := routerBetween(t, "10.0.1.", "10.0.2.")
	d, _ := startDataplane(t, r, "s1", "s2")
	var src *Port
	inNS(t, h1, func() (err error) {
		src, err = Open("e1", PortConfig{})
		return err
	})
	defer src.Close()
	s1 := d.Node().ports[0].MAC
	frame := udpFrame(s1, src.MAC, netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1"), make([]byte, 1000))
	super, vh := superPacket(30000, 1448)
	copy(super[0:6], s1[:])
	copy(super[6:12], src.MAC[:])
	var off soft.Offload
	vh.Put(off[:])

	forwarded := func() uint64 { return d.Node().Stats()[1].TxFrames }
	// send sends n frames (every 8th a super-packet), about 1024 at
	// most ahead of what the switch has sent on s2 (so no socket
	// overflows on a loaded machine), and waits until it has sent all or
	// 100 ms pass without one.
	send := func(n int) int {
		before := forwarded()
		// reached waits until the switch has sent k (or stalls) and says
		// whether it has.
		reached := func(k int) bool {
			last := forwarded()
			for idle := 0; int(last-before) < k && idle < 100; {
				time.Sleep(time.Millisecond)
				if f := forwarded(); f != last {
					last, idle = f, 0
				} else {
					idle++
				}
			}
			return int(last-before) >= k
		}
		for i := 0; i < n; i++ {
			if i%8 == 7 {
				src.TransmitWhole(super, &off)
				src.Flush()
			} else {
				src.Transmit(frame)
			}
			if i%64 == 63 {
				src.Flush()
			}
			// Stats allocate a copy: look every 512 packets.
			if i%512 == 511 && !reached(i+1-512) {
				break
			}
		}
		src.Flush()
		reached(n)
		return int(forwarded() - before)
	}
	// The first frames wait for h2's address to resolve and warm caches.
	send(200)
	const n = 50000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	got := send(n)
	runtime.ReadMemStats(&m1)
	took := time.Since(t0)
	allocs := m1.Mallocs - m0.Mallocs
	st := d.Node().Stats()
	t.Logf("%d of %d packets forwarded (%d super-packets whole on s1), %d allocations in the process (%.4f per packet)",
		got, n, st[0].RxWhole, allocs, float64(allocs)/float64(n))
	if got < n*9/10 {
		t.Fatalf("%d of %d packets forwarded", got, n)
	}
	if st[0].RxWhole == 0 {
		t.Errorf("no super-packet forwarded whole")
	}
	// The process allocates a few hundred times a second when idle
	// (netlink updates of the kernel tables, the runtime), so the
	// allowance grows with the time the packets took: one allocation per
	// packet exceeds it unless they took over a minute.
	if allowed := n/20 + int(500*took.Seconds()); int(allocs) > allowed {
		t.Errorf("%d allocations for %d packets in %v (allowed %d): the forwarding loop allocates", allocs, n, took, allowed)
	}
}

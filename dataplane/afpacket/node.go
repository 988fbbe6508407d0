//go:build linux

package afpacket

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/soft"
)

// Node runs one software switch over AF_PACKET ports: a single goroutine
// waits (ppoll) for frames on every port or for the switch's next queue
// departure, reads frames in batches (GSO super-packets forwarded whole
// when the switch takes them so, else cut into segments), hands the
// switch's (Kernel.Classify) to Switch.ReceiveAt with
// the kernel's receive timestamp, calls Switch.Poll on the switch's (real)
// clock so egress queues drain at their configured rate, and flushes what
// the switch transmitted with one sendmmsg per port. Frames whose next hop
// is being resolved wait in a bounded hold queue.
type Node struct {
	sw     *soft.Switch
	ports  []*Port
	swPort []int
	kernel *Kernel

	mu    sync.Mutex
	stats []PortStats

	wakeMu sync.Mutex
	efd    int // eventfd ppoll waits on besides the sockets; -1 outside Run

	// Node goroutine only.
	rxAt    int64      // receive time (switch clock) of the frame being handled
	holdIn  int        // port of the frame being held
	holdNH  netip.Addr // next hop it waits for
	held    []heldFrame
	freeBuf [][]byte
	offload soft.Offload
}

type heldFrame struct {
	port     int
	nh       netip.Addr
	rx       int64 // receive time, switch clock
	deadline int64 // switch clock
	buf      []byte
}

// Hold queue bounds: frames waiting for their next hop to resolve.
const (
	// HoldTimeout is how long a frame waits for its next hop: the
	// kernel's own resolution gives up after 3 probes 1 s apart.
	HoldTimeout = 3 * time.Second
	holdMax     = 256 // frames held in all
	holdPerHop  = 64  // frames held for one next hop
	holdFrame   = 9216 + vlanRoom
)

// NewNode connects each port to the switch port of the same name (as the
// switch's Link) and returns the node; Run drives it. Frames go to the
// switch as k classifies them; with a nil k, every frame does.
func NewNode(sw *soft.Switch, ports []*Port, k *Kernel) (*Node, error) {
	n := &Node{sw: sw, ports: ports, kernel: k, stats: make([]PortStats, len(ports)), efd: -1}
	for _, p := range ports {
		i := sw.Port(p.Name)
		if i < 0 {
			return nil, fmt.Errorf("afpacket: switch %s has no port %q", sw.Name(), p.Name)
		}
		n.swPort = append(n.swPort, i)
		sw.SetLink(i, p)
	}
	if k != nil {
		// Held frames are looked at again as soon as the kernel's tables
		// change.
		k.synced = n.wake
	}
	return n, nil
}

// Stats returns every port's counters as of the last loop iteration, in
// the order of the ports given to NewNode.
func (n *Node) Stats() []PortStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]PortStats(nil), n.stats...)
}

// wake makes a running Run look at its held frames.
func (n *Node) wake() {
	n.wakeMu.Lock()
	defer n.wakeMu.Unlock()
	if n.efd >= 0 {
		one := [8]byte{1}
		_, _ = unix.Write(n.efd, one[:])
	}
}

// readBudget bounds the batches read from one port before the others and
// the queues get their turn.
const readBudget = 8

// spinBelow is the wait for the next departure below which the loop does
// not sleep (ns).
const spinBelow = 20_000

// maxAge bounds a plausible kernel receive timestamp's age; older ones
// (a clock step) are replaced by the time of reading.
const maxAge = int64(10 * time.Second)

// Run drives the node until ctx ends (returning nil) or a socket fails.
// It does not close the ports; held frames are dropped when it returns.
func (n *Node) Run(ctx context.Context) error {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("afpacket: eventfd: %w", err)
	}
	n.wakeMu.Lock()
	n.efd = efd
	n.wakeMu.Unlock()
	defer func() {
		n.wakeMu.Lock()
		unix.Close(n.efd)
		n.efd = -1
		n.wakeMu.Unlock()
		n.dropHeld()
	}()
	stop := context.AfterFunc(ctx, n.wake)
	defer stop()
	fds := make([]unix.PollFd, len(n.ports)+1)
	for i, p := range n.ports {
		fds[i] = unix.PollFd{Fd: int32(p.Fd()), Events: unix.POLLIN}
	}
	fds[len(n.ports)] = unix.PollFd{Fd: int32(efd), Events: unix.POLLIN}
	// Receive functions per port, made once: segments of GSO
	// super-packets go to the switch (or the hold queue) one by one.
	recv := make([]func([]byte), len(n.ports))
	hold := make([]func([]byte), len(n.ports))
	for i := range n.ports {
		sp := n.swPort[i]
		recv[i] = func(f []byte) {
			n.sw.ReceiveAt(sp, f, n.rxAt)
			n.flushRefs()
		}
		hold[i] = n.hold
	}
	clock := n.sw.Clock()
	next := n.sw.Poll()
	var drain [8]byte
	for {
		n.flush()
		if len(n.held) > 0 {
			next = min(next, n.held[0].deadline)
		}
		var ts *unix.Timespec
		if next != math.MaxInt64 {
			d := next - clock.Now()
			if d <= spinBelow {
				// A departure this close is not worth a sleep whose
				// timer slack alone is 50 µs: poll the sockets without
				// waiting and drain the queues again.
				d = 0
			}
			t := unix.NsecToTimespec(max(d, 0))
			ts = &t
		}
		if _, err := unix.Ppoll(fds, ts, nil); err != nil && err != unix.EINTR {
			return fmt.Errorf("afpacket: ppoll: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if fds[len(n.ports)].Revents&unix.POLLIN != 0 {
			_, _ = unix.Read(efd, drain[:])
		}
		for i, p := range n.ports {
			if fds[i].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				// Report the socket error (e.g. the interface went away).
				if v, err := unix.GetsockoptInt(p.Fd(), unix.SOL_SOCKET, unix.SO_ERROR); err == nil && v != 0 {
					if v == int(unix.ENETDOWN) {
						continue
					}
					return fmt.Errorf("afpacket: %s: %w", p.Name, unix.Errno(v))
				}
			}
			if fds[i].Revents&unix.POLLIN == 0 {
				continue
			}
			for b := 0; b < readBudget; b++ {
				k, err := p.Read()
				if err != nil {
					return err
				}
				// Kernel timestamps are CLOCK_REALTIME; the switch's
				// clock does not follow wall clock steps, so a frame's
				// age is what carries over.
				real, now := time.Now().UnixNano(), clock.Now()
				for j := 0; j < k; j++ {
					n.rxAt = now
					if age := real - p.RxTime(j); p.RxTime(j) > 0 && age >= 0 && age < maxAge {
						n.rxAt = now - age
					}
					v, nh := Forward, netip.Addr{}
					if n.kernel != nil {
						v, nh = n.kernel.Classify(i, p.Frame(j))
					}
					switch v {
					case Forward:
						if n.whole(p, i, j) {
							continue
						}
						// Every segment of a super-packet has its headers.
						p.Segments(j, recv[i])
					case Hold:
						n.holdIn, n.holdNH = i, nh
						p.Segments(j, hold[i])
					case NoPortRoute:
						p.stats.NoPortRoute++
					}
				}
				if k < len(p.rxMsgs)/2 {
					break
				}
			}
		}
		if len(n.held) > 0 {
			n.release(clock.Now())
		}
		next = n.sw.Poll()
		n.flush()
		n.mu.Lock()
		for i, p := range n.ports {
			n.stats[i] = p.stats
		}
		n.mu.Unlock()
	}
}

// whole hands frame j of port i to the switch whole when it is a GSO
// super-packet the switch forwards so (soft.Switch.ReceiveWhole), and
// says whether it did.
func (n *Node) whole(p *Port, i, j int) bool {
	vh := p.rxVnet[j]
	if vh.GSOType == GSONone {
		return false
	}
	f := p.Frame(j)
	seg := segmentIPLen(vh, f)
	if seg <= 0 {
		seg = tunnelSegmentIPLen(vh, f)
	}
	if seg <= 0 {
		return false
	}
	vh.Put(n.offload[:])
	ok := n.sw.ReceiveWhole(n.swPort[i], f, n.rxAt, &n.offload, seg)
	n.flushRefs()
	if ok {
		p.stats.RxWhole++
	}
	return ok
}

// flushRefs sends what ports queued by reference (Port.TransmitWhole): a
// receive buffer read again, or a switch buffer used again by the next
// packet, would change it.
func (n *Node) flushRefs() {
	for _, p := range n.ports {
		if p.refs > 0 {
			p.Flush()
		}
	}
}

// hold keeps a copy of frame (of port n.holdIn, waiting for n.holdNH).
func (n *Node) hold(frame []byte) {
	p := n.ports[n.holdIn]
	same := 0
	for i := range n.held {
		if n.held[i].nh == n.holdNH {
			same++
		}
	}
	if len(n.held) >= holdMax || same >= holdPerHop || len(frame) > holdFrame {
		p.stats.HoldDrops++
		return
	}
	var buf []byte
	if k := len(n.freeBuf); k > 0 {
		buf, n.freeBuf = n.freeBuf[k-1], n.freeBuf[:k-1]
	} else {
		buf = make([]byte, holdFrame) // once per slot, reused
	}
	buf = buf[:copy(buf[:holdFrame], frame)]
	n.held = append(n.held, heldFrame{port: n.holdIn, nh: n.holdNH, rx: n.rxAt,
		deadline: n.rxAt + int64(HoldTimeout), buf: buf})
	p.stats.HeldFrames++
}

// release hands the held frames whose next hop is resolved to the
// switch, in the order they arrived, and drops those that waited too
// long.
func (n *Node) release(now int64) {
	kept := n.held[:0]
	for _, h := range n.held {
		switch {
		case n.kernel.Resolved(h.nh):
			n.sw.ReceiveAt(n.swPort[h.port], h.buf, h.rx)
			n.flushRefs()
		case now >= h.deadline:
			n.ports[h.port].stats.HoldDrops++
		default:
			kept = append(kept, h)
			continue
		}
		n.freeBuf = append(n.freeBuf, h.buf[:cap(h.buf)])
	}
	clear(n.held[len(kept):])
	n.held = kept
}

func (n *Node) dropHeld() {
	for _, h := range n.held {
		n.ports[h.port].stats.HoldDrops++
	}
	n.held = n.held[:0]
	n.mu.Lock()
	for i, p := range n.ports {
		n.stats[i] = p.stats
	}
	n.mu.Unlock()
}

func (n *Node) flush() {
	for _, p := range n.ports {
		if p.txN > 0 {
			p.Flush()
		}
	}
}

//go:build linux

package afpacket

import (
	"context"
	"fmt"
	"math"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/soft"
)

// Node runs one software switch over AF_PACKET ports: a single goroutine
// waits (ppoll) for frames on every port or for the switch's next queue
// departure, reads frames in batches (GSO super-packets cut into
// segments), hands the accepted ones to
// Switch.Receive, calls Switch.Poll on the switch's (real) clock so egress
// queues drain at their configured rate, and flushes what the switch
// transmitted with one sendmmsg per port.
type Node struct {
	sw     *soft.Switch
	ports  []*Port
	swPort []int
	accept func(port int, frame []byte) bool

	mu    sync.Mutex
	stats []PortStats
}

// NewNode connects each port to the switch port of the same name (as the
// switch's Link) and returns the node; Run drives it. accept, when not
// nil, is asked about every received frame (port is the index in ports)
// and only frames it accepts enter the switch; the others are left to the
// kernel, which gets a copy of every frame anyway.
func NewNode(sw *soft.Switch, ports []*Port, accept func(port int, frame []byte) bool) (*Node, error) {
	n := &Node{sw: sw, ports: ports, accept: accept, stats: make([]PortStats, len(ports))}
	for _, p := range ports {
		i := sw.Port(p.Name)
		if i < 0 {
			return nil, fmt.Errorf("afpacket: switch %s has no port %q", sw.Name(), p.Name)
		}
		n.swPort = append(n.swPort, i)
		sw.SetLink(i, p)
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

// readBudget bounds the batches read from one port before the others and
// the queues get their turn.
const readBudget = 8

// spinBelow is the wait for the next departure below which the loop does
// not sleep (ns).
const spinBelow = 20_000

// Run drives the node until ctx ends (returning nil) or a socket fails.
// It does not close the ports.
func (n *Node) Run(ctx context.Context) error {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("afpacket: eventfd: %w", err)
	}
	defer unix.Close(efd)
	stop := context.AfterFunc(ctx, func() {
		var one = [8]byte{1}
		_, _ = unix.Write(efd, one[:])
	})
	defer stop()
	fds := make([]unix.PollFd, len(n.ports)+1)
	for i, p := range n.ports {
		fds[i] = unix.PollFd{Fd: int32(p.Fd()), Events: unix.POLLIN}
	}
	fds[len(n.ports)] = unix.PollFd{Fd: int32(efd), Events: unix.POLLIN}
	// One receive function per port, made once: segments of GSO
	// super-packets go to the switch one by one.
	recv := make([]func([]byte), len(n.ports))
	for i := range n.ports {
		sp := n.swPort[i]
		recv[i] = func(f []byte) { n.sw.Receive(sp, f) }
	}
	clock := n.sw.Clock()
	next := n.sw.Poll()
	for {
		n.flush()
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
				for j := 0; j < k; j++ {
					f := p.Frame(j)
					if n.accept == nil || n.accept(i, f) {
						// Every segment of a super-packet has its headers.
						p.Segments(j, recv[i])
					}
				}
				if k < len(p.rxMsgs)/2 {
					break
				}
			}
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

func (n *Node) flush() {
	for _, p := range n.ports {
		if p.txN > 0 {
			p.Flush()
		}
	}
}

package report

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BatchSender is implemented by Senders that put several packets on the
// wire at once. A collector's goroutine hands it the packets that are
// queued when it wakes, in order; SendBatch sets errs[i] to what Send
// would have returned for ps[i]. Payloads are valid during the call only.
type BatchSender interface {
	Sender
	SendBatch(ps []*Packet, errs []error)
}

const (
	// maxSegments is the most datagrams the kernel takes in one UDP GSO
	// message (UDP_MAX_SEGMENTS).
	maxSegments = 64
	// maxGSOPayload bounds the UDP payload of one GSO message: it must
	// fit one IP packet of 64 kB with the IPv6 and UDP headers.
	maxGSOPayload = 0xffff - 40 - udpHeaderLen
)

// UDP_SEGMENT state of a socket.
const (
	gsoUnknown = iota // not used yet
	gsoOn             // the kernel took a message
	gsoOff            // the kernel refused it at first use: one datagram per sendmsg
)

// udpConn is a connected report socket with what sending a run of
// datagrams as one UDP GSO message needs, made once.
type udpConn struct {
	*net.UDPConn
	rc  syscall.RawConn
	mu  sync.Mutex // held while a run is sent: guards the fields below
	gso int        // gsoUnknown, gsoOn, gsoOff
	iov [maxSegments]unix.Iovec
	oob []byte // the UDP_SEGMENT control message
	msg unix.Msghdr
	// The result of writeFn, which the poller calls (a method value made
	// once, so that a send allocates nothing).
	errno   unix.Errno
	writeFn func(fd uintptr) bool
	// The sequence numbers of the last messages of several datagrams: a
	// message delivered whole (to a port of this host) draws one ICMP
	// error, quoting its first datagram, for all of them.
	runs    [8]gsoRun
	nextRun int
}

type gsoRun struct {
	n    int
	seqs [maxSegments]uint32
}

// runOf calls fn with each sequence number of the message whose first
// datagram had seq, or with seq alone.
func (c *udpConn) runOf(seq uint32, fn func(uint32)) {
	for i := range c.runs {
		if r := &c.runs[i]; r.n > 1 && r.seqs[0] == seq {
			for _, s := range r.seqs[:r.n] {
				fn(s)
			}
			return
		}
	}
	fn(seq)
}

func newUDPConn(c *net.UDPConn) (*udpConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	u := &udpConn{UDPConn: c, rc: rc, oob: make([]byte, unix.CmsgSpace(2))}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&u.oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	u.msg.Iov = &u.iov[0]
	u.msg.Control = &u.oob[0]
	u.msg.SetControllen(len(u.oob))
	u.writeFn = u.write
	return u, nil
}

func (c *udpConn) write(fd uintptr) bool {
	_, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&c.msg)), 0)
	if e == unix.EAGAIN {
		return false // the socket's buffer is full: wait for room
	}
	c.errno = e
	return true
}

// sendGSO sends ps (equal payload sizes but the last, which may be
// shorter) as one UDP GSO message of segments of size: the kernel sends
// one datagram per packet, or none.
func (c *udpConn) sendGSO(ps []*Packet, size int) error {
	for i, p := range ps {
		c.iov[i].Base = &p.Payload[0]
		c.iov[i].SetLen(len(p.Payload))
	}
	c.msg.SetIovlen(len(ps))
	*(*uint16)(unsafe.Pointer(&c.oob[unix.CmsgLen(0)])) = uint16(size)
	c.errno = 0
	err := c.rc.Write(c.writeFn)
	for i := range ps {
		c.iov[i].Base = nil // keep no payload reachable
	}
	if err != nil {
		return err
	}
	if c.errno != 0 {
		return &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("sendmsg", c.errno)}
	}
	return nil
}

// SendBatch implements BatchSender: each run of packets to one collector
// through one socket (same source, DSCP and VRF, the kernel's source
// port) of equal payload sizes, the last possibly shorter, goes as one
// UDP GSO message (UDP_SEGMENT, up to 64 datagrams and 64 kB). Packets
// from a chosen source port go through the raw socket, which cannot
// segment, a run of them in one sendmmsg. A socket whose kernel or route refuses UDP_SEGMENT at
// first use (EIO: no checksum offload on the route's device; EINVAL)
// sends one datagram per sendmsg from then on.
func (u *UDPSender) SendBatch(ps []*Packet, errs []error) {
	for i := 0; i < len(ps); {
		p := ps[i]
		k := udpKey{p.Src, p.Dst, p.DSCP, p.VRF}
		if p.SrcPort != 0 {
			// A raw socket cannot segment: the run of packets from chosen
			// ports goes in one sendmmsg instead.
			j := i + 1
			for j < len(ps) && j-i < maxSegments && ps[j].SrcPort != 0 &&
				ps[j].Dst == k.dst && ps[j].Src == k.src && ps[j].DSCP == k.dscp && ps[j].VRF == k.vrf {
				j++
			}
			u.sendRawRun(k, ps[i:j], errs[i:j])
			i = j
			continue
		}
		c, err := u.conn(k)
		if err != nil {
			errs[i] = err
			i++
			continue
		}
		c.mu.Lock()
		i = u.sendRun(c, k, ps, errs, i)
		c.mu.Unlock()
	}
}

// sendRun sends the run of packets that starts at ps[i] through c (of
// key k) and returns the index after it.
func (u *UDPSender) sendRun(c *udpConn, k udpKey, ps []*Packet, errs []error, i int) int {
	p := ps[i]
	j := i + 1
	size := len(p.Payload)
	if c.gso != gsoOff && size > 0 {
		total := size
		for j < len(ps) && j-i < maxSegments {
			q := ps[j]
			n := len(q.Payload)
			if q.SrcPort != 0 || n == 0 || n > size || total+n > maxGSOPayload ||
				q.Dst != k.dst || q.Src != k.src || q.DSCP != k.dscp || q.VRF != k.vrf {
				break
			}
			total += n
			j++
			if n < size {
				break // only the last segment may be shorter
			}
		}
	}
	u.readErrors(c, p.Dst)
	if j-i == 1 {
		_, errs[i] = c.Write(p.Payload)
		return j
	}
	err := c.sendGSO(ps[i:j], size)
	if err == nil {
		c.gso = gsoOn
		r := &c.runs[c.nextRun]
		c.nextRun = (c.nextRun + 1) % len(c.runs)
		r.n = j - i
		for m, q := range ps[i:j] {
			r.seqs[m] = q.Seq
		}
	}
	if err != nil && resendAlone(err) {
		// Refused before anything was sent: send the run one by one, so
		// that each packet gets its own result (segments beyond the path
		// MTU fail with EMSGSIZE on these IP_PMTUDISC_DO sockets, as a
		// lone datagram would, and leave UDP GSO on; an ICMP error that
		// came back meanwhile fails one datagram).
		if c.gso == gsoUnknown && (errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL)) {
			c.gso = gsoOff
			if !u.gsoLogged.Swap(true) {
				slog.Warn("the kernel refuses UDP segmentation (UDP_SEGMENT) to a report collector: one datagram per system call",
					"collector", p.Dst.String(), "err", err)
			}
		}
		for ; i < j; i++ {
			u.readErrors(c, p.Dst)
			_, errs[i] = c.Write(ps[i].Payload)
		}
		return j
	}
	for ; i < j; i++ {
		errs[i] = err
	}
	return j
}

// resendAlone reports whether a UDP GSO message failed with err before
// any of its datagrams was sent, in a way a datagram on its own may not.
func resendAlone(err error) bool {
	for _, e := range []unix.Errno{unix.EIO, unix.EINVAL, unix.EMSGSIZE, unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Receiver reads report datagrams from a UDP socket in batches with
// recvmmsg(2), through the Go runtime's poller. With UDP GRO on (Listen
// and ListenGroup turn it on where the kernel has it) one slot of a batch
// can hold a run of same-size datagrams of one sender, coalesced by the
// kernel: Read splits them again at the segment size the kernel reports,
// so Packet and From still see one datagram each, in the order sent. It
// is not safe for concurrent use.
type Receiver struct {
	conn *net.UDPConn
	raw  syscall.RawConn
	bufs [][]byte
	iovs []unix.Iovec
	msgs []unix.Mmsghdr
	// names receive the senders' addresses (an IPv6 one is the largest).
	names []unix.RawSockaddrInet6
	// With GRO: each slot's control message space (the segment size), and
	// the datagrams of the last Read cut from the slots.
	gro  bool
	oob  []byte
	segs []segment
	used int // slots the last recvmmsg filled (their lengths to reset)
	n    int
	err  error
	read func(fd uintptr) bool
}

// segment is one datagram of a GRO slot.
type segment struct{ slot, off, len int32 }

// DefaultBatch is the number of datagrams (with UDP GRO, of runs of
// coalesced datagrams) read per system call: 256 buffers of 9216 bytes,
// 2.3 MB per receiver, or of 64 kB with GRO, 16 MB of address space of
// which only what the largest batches filled becomes resident.
const DefaultBatch = 256

// groSlot is the buffer of a GRO slot: the kernel coalesces UDP datagrams
// up to 64 kB.
const groSlot = 1 << 16

// groOOB is the control message space of a GRO slot (one int).
var groOOB = unix.CmsgSpace(4)

// Listen opens a UDP socket on addr (for example ":32766") with UDP GRO
// where the kernel has it, reading up to batch slots per call.
func Listen(addr string, batch int) (*Receiver, error) { return listen(addr, batch, true) }

// listen is Listen, with UDP GRO only if gro is set.
func listen(addr string, batch int, gro bool) (*Receiver, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	setReadBuffer(conn, 8<<20)
	r, err := NewReceiver(conn, batch)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if gro {
		r.setGRO()
	}
	return r, nil
}

// ListenGroup opens n UDP sockets on addr sharing its port with
// SO_REUSEPORT (one plain socket when n is 1), each reading up to batch
// datagrams per call: served by one goroutine each (ServeAll), they read
// on several cores. The senders are spread over the sockets by their IP
// address (steerBySource), so one node's reports stay on one socket, in
// order.
func ListenGroup(addr string, n, batch int) ([]*Receiver, error) {
	if n <= 1 {
		r, err := Listen(addr, batch)
		if err != nil {
			return nil, err
		}
		return []*Receiver{r}, nil
	}
	// Sockets with SO_REUSEPORT of the same user join a group on the port
	// silently: a plain socket first fails if anything holds it (another
	// collector), as Listen does.
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	if ua.Port != 0 {
		probe, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, err
		}
		probe.Close()
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("SO_REUSEPORT: %w", serr)
		}
		return nil
	}}
	var rs []*Receiver
	fail := func(err error) ([]*Receiver, error) {
		for _, r := range rs {
			r.Close()
		}
		return nil, err
	}
	for i := 0; i < n; i++ {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			return fail(err)
		}
		conn := pc.(*net.UDPConn)
		setReadBuffer(conn, 8<<20)
		r, err := NewReceiver(conn, batch)
		if err != nil {
			conn.Close()
			return fail(err)
		}
		r.setGRO()
		rs = append(rs, r)
		if i == 0 { // the others take the port the first one got
			var serr error
			if err := r.raw.Control(func(fd uintptr) { serr = steerBySource(fd, n) }); err != nil || serr != nil {
				return fail(fmt.Errorf("SO_ATTACH_REUSEPORT_CBPF: %w", errors.Join(err, serr)))
			}
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return fail(err)
			}
			addr = net.JoinHostPort(host, fmt.Sprint(conn.LocalAddr().(*net.UDPAddr).Port))
		}
	}
	return rs, nil
}

// steerBySource attaches to the SO_REUSEPORT group of socket fd a classic
// BPF program that picks the group's socket by the sender's IP address
// (its last 32 bits) modulo n. The kernel's default, a hash of addresses
// and ports, would spread a node sending from several ports (intd's
// FLOW_HASH source ports) over the sockets, and the goroutines would read
// its sequence numbers out of order.
func steerBySource(fd uintptr, n int) error {
	var nh int32 = -0x100000 // SKF_NET_OFF: loads from the network header
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: uint32(nh)}, // IP version
		{Code: unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 6, Jt: 2},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: uint32(nh + 12)}, // IPv4 source
		{Code: unix.BPF_JMP | unix.BPF_JA, K: 1},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: uint32(nh + 20)}, // IPv6 source, last word
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(n)},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	return unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// setReadBuffer asks for a receive buffer of n bytes: SO_RCVBUF is capped
// by net.core.rmem_max, so with CAP_NET_ADMIN SO_RCVBUFFORCE is tried
// first. Errors are ignored (the default buffer still works, with more
// loss in bursts).
func setReadBuffer(conn *net.UDPConn, n int) {
	if raw, err := conn.SyscallConn(); err == nil {
		var serr error
		raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) })
		if serr == nil {
			return
		}
	}
	conn.SetReadBuffer(n)
}

// NewReceiver wraps an open UDP socket.
func NewReceiver(conn *net.UDPConn, batch int) (*Receiver, error) {
	if batch <= 0 {
		batch = DefaultBatch
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &Receiver{conn: conn, raw: raw,
		bufs: make([][]byte, batch), iovs: make([]unix.Iovec, batch), msgs: make([]unix.Mmsghdr, batch),
		names: make([]unix.RawSockaddrInet6, batch)}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, 9216)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(len(r.bufs[i]))
		r.msgs[i].Hdr.Iov = &r.iovs[i]
		r.msgs[i].Hdr.SetIovlen(1)
		r.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
	}
	r.used = batch
	r.read = r.recvmmsg
	return r, nil
}

// setGRO turns UDP GRO on for the socket and gives every slot a 64 kB
// buffer and room for the segment size. It keeps the plain datagram
// slots when the kernel refuses (before Linux 5.0), and reports whether
// GRO is on.
func (r *Receiver) setGRO() bool {
	var serr error
	if err := r.raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) }); err != nil || serr != nil {
		return false
	}
	batch := len(r.msgs)
	arena := make([]byte, batch*groSlot) // untouched pages stay virtual
	r.oob = make([]byte, batch*groOOB)
	r.segs = make([]segment, 0, batch*64) // the kernel coalesces up to 64
	for i := range r.bufs {
		r.bufs[i] = arena[i*groSlot : (i+1)*groSlot : (i+1)*groSlot]
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(groSlot)
		r.msgs[i].Hdr.Control = &r.oob[i*groOOB]
	}
	r.gro, r.used = true, batch
	return true
}

// GRO reports whether the socket hands coalesced datagrams (UDP GRO).
func (r *Receiver) GRO() bool { return r.gro }

// Addr is the socket's local address.
func (r *Receiver) Addr() net.Addr { return r.conn.LocalAddr() }

// Close closes the socket; a blocked Read returns an error.
func (r *Receiver) Close() error { return r.conn.Close() }

// SetDeadline sets the read deadline.
func (r *Receiver) SetDeadline(t time.Time) error { return r.conn.SetReadDeadline(t) }

func (r *Receiver) recvmmsg(fd uintptr) bool {
	// The kernel writes back the lengths of the slots it fills.
	for i := range r.msgs[:r.used] {
		r.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		if r.gro {
			r.msgs[i].Hdr.SetControllen(groOOB)
		}
	}
	r.used = 0
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)),
		unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EWOULDBLOCK {
		return false // wait for the poller
	}
	if e == unix.EINTR {
		return false
	}
	r.n, r.err = int(n), nil
	if e != 0 {
		r.n, r.err = 0, e
	}
	r.used = r.n
	if r.gro {
		r.split()
	}
	return true
}

// split cuts the slots of the last recvmmsg into their datagrams: a slot
// with a segment size holds datagrams of that size, the last one possibly
// shorter; a slot without holds one datagram.
func (r *Receiver) split() {
	segs := r.segs[:0]
	for i := 0; i < r.n; i++ {
		l := int32(r.msgs[i].Len)
		g := groSize(r.oob[i*groOOB : i*groOOB+min(int(r.msgs[i].Hdr.Controllen), groOOB)])
		if g <= 0 || g >= l {
			segs = append(segs, segment{int32(i), 0, l})
			continue
		}
		for off := int32(0); off < l; off += g {
			segs = append(segs, segment{int32(i), off, min(g, l-off)})
		}
	}
	r.segs = segs
	r.n = len(segs)
}

// groSize is the segment size in control messages b (UDP_GRO), or 0.
func groSize(b []byte) int32 {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(b) {
			return 0
		}
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && int(h.Len) >= unix.CmsgLen(4) {
			return *(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)]))
		}
		next := unix.CmsgSpace(int(h.Len) - unix.CmsgLen(0))
		if next > len(b) {
			return 0
		}
		b = b[next:]
	}
	return 0
}

// Read blocks until at least one datagram is available and returns how
// many were read; Packet(i) returns them. It does not allocate.
func (r *Receiver) Read() (int, error) {
	if err := r.raw.Read(r.read); err != nil {
		return 0, err
	}
	return r.n, r.err
}

// Packet returns datagram i of the last Read (valid until the next Read).
func (r *Receiver) Packet(i int) []byte {
	if r.gro {
		s := r.segs[i]
		return r.bufs[s.slot][s.off : s.off+s.len]
	}
	return r.bufs[i][:r.msgs[i].Len]
}

// From returns the sender's address of datagram i of the last Read
// (IPv4 senders of a dual-stack socket come unmapped).
func (r *Receiver) From(i int) netip.Addr {
	if r.gro {
		i = int(r.segs[i].slot)
	}
	n := &r.names[i]
	switch n.Family {
	case unix.AF_INET6:
		return netip.AddrFrom16(n.Addr).Unmap()
	case unix.AF_INET:
		v4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(n))
		return netip.AddrFrom4(v4.Addr)
	}
	return netip.Addr{}
}

// ServeAll serves every receiver of rs (Serve) on its own goroutine until
// all are closed. It returns the first error, after closing the others.
func (c *Collector) ServeAll(rs []*Receiver) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Serve(r); err != nil {
				once.Do(func() {
					first = err
					for _, o := range rs {
						o.Close()
					}
				})
			}
		}()
	}
	wg.Wait()
	return first
}

// Serve reads report packets from r until it is closed and aggregates
// them. It returns nil after Close.
func (c *Collector) Serve(r *Receiver) error {
	for {
		n, err := r.Read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		now := time.Now().UnixNano()
		c.handleFrom(r, n, now)
	}
}

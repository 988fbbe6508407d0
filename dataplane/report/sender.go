package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/wire"
)

// Packet is one telemetry report packet handed to a Sender.
type Packet struct {
	Session string         // report session name
	Src     netip.Addr     // configured source address
	Dst     netip.AddrPort // collector
	VRF     string
	DSCP    uint8
	Format  Format
	Seq     uint32 // sequence number in the header
	// SrcPort is the UDP source port; 0 lets the kernel pick one per
	// collector.
	SrcPort uint16
	Reports int // individual reports inside
	// Payload is the UDP payload (group header + reports, or a v0.5
	// report). It is only valid during Send.
	Payload []byte
}

// Sender puts report packets on the wire. Send is called from one
// goroutine per collector and may block: while it does, that collector's
// queue fills and further reports to it are dropped and counted.
type Sender interface {
	Send(p *Packet) error
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(p *Packet) error

// Send implements Sender.
func (f SenderFunc) Send(p *Packet) error { return f(p) }

// Capture is a Sender that keeps a copy of every packet (for tests and the
// lab).
type Capture struct {
	mu      sync.Mutex
	packets []Packet
}

// Send implements Sender.
func (c *Capture) Send(p *Packet) error {
	q := *p
	q.Payload = append([]byte(nil), p.Payload...)
	c.mu.Lock()
	c.packets = append(c.packets, q)
	c.mu.Unlock()
	return nil
}

// Packets returns the packets captured so far.
func (c *Capture) Packets() []Packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Packet(nil), c.packets...)
}

// Reset forgets the captured packets.
func (c *Capture) Reset() {
	c.mu.Lock()
	c.packets = nil
	c.mu.Unlock()
}

// SourcePortSender is implemented by Senders that may be unable to send
// from a chosen UDP source port (Packet.SrcPort): Configure refuses a
// session that asks for one when SourcePorts returns an error for its
// address family. Senders without it send every packet.
type SourcePortSender interface {
	SourcePorts(v6 bool) error
}

// Refuser is implemented by Senders that learn after Send returned that
// a packet was not delivered (an ICMP unreachable came back for it).
// Refused calls fn with the sequence number of each such packet to dst
// learnt since the last call.
type Refuser interface {
	Refused(dst netip.AddrPort, fn func(seq uint32))
}

// UDPSender sends report packets over UDP sockets, one per (source,
// collector, DSCP, VRF), with IP_TOS/IPV6_TCLASS set to the DSCP and path
// MTU discovery on (DF set, IP_PMTUDISC_DO). The source address is bound
// when it is local; otherwise the kernel picks one and NotLocal records it.
//
// Sockets are connected, so an ICMP error (port or host unreachable)
// coming back for one packet would fail the next send with the packet
// that caused it counted as sent. With IP_RECVERR each error is queued
// with the datagram that caused it; Send reads the queue first, and
// Refused reports those packets (the Refuser interface), so a collector
// that is down counts every packet as undelivered.
//
// A packet with a SrcPort goes through a raw socket instead (see rawSock),
// from the address the connected socket would use.
type UDPSender struct {
	mu       sync.Mutex
	conns    map[udpKey]*udpConn
	notLocal map[netip.Addr]bool
	refused  map[netip.AddrPort][]uint32

	raw4, raw6 rawSock
	raws       map[udpKey]*rawDest
	rawDsts    map[netip.AddrPort]bool

	gsoLogged atomic.Bool // the kernel's refusal of UDP_SEGMENT was logged
}

type udpKey struct {
	src  netip.Addr
	dst  netip.AddrPort
	dscp uint8
	vrf  string
}

// NewUDPSender returns a sender with no UDP sockets open yet, and the raw
// sockets of chosen source ports open if the process may (CAP_NET_RAW).
func NewUDPSender() *UDPSender {
	return &UDPSender{conns: map[udpKey]*udpConn{}, notLocal: map[netip.Addr]bool{}, refused: map[netip.AddrPort][]uint32{},
		raw4: openRaw(false), raw6: openRaw(true), raws: map[udpKey]*rawDest{}, rawDsts: map[netip.AddrPort]bool{}}
}

// Send implements Sender.
func (u *UDPSender) Send(p *Packet) error {
	if p.SrcPort != 0 {
		return u.sendRaw(p)
	}
	c, err := u.conn(udpKey{p.Src, p.Dst, p.DSCP, p.VRF})
	if err != nil {
		return err
	}
	c.mu.Lock()
	u.readErrors(c, p.Dst)
	_, err = c.Write(p.Payload)
	c.mu.Unlock()
	return err
}

// conn is the connected socket for k, dialled on first use.
func (u *UDPSender) conn(k udpKey) (*udpConn, error) {
	u.mu.Lock()
	c := u.conns[k]
	u.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return u.dial(k)
}

// readErrors takes the socket's queued ICMP errors (IP_RECVERR): each
// comes with the start of the datagram that caused it, whose sequence
// number is recorded as refused (with the rest of its UDP GSO message,
// see udpConn.runs). The caller holds c.mu. Reading the queue also clears the
// pending error, so the next Write is not failed for an earlier packet.
func (u *UDPSender) readErrors(c *udpConn, dst netip.AddrPort) {
	rc, err := c.SyscallConn() // concrete here: the closure stays on the stack
	if err != nil {
		return
	}
	var buf [8]byte // the group header (or v0.5 header's first words)
	rc.Control(func(fd uintptr) {
		for {
			n, err := recvErr(int(fd), buf[:], nil)
			if err != nil {
				return
			}
			seq, ok := payloadSeq(buf[:n])
			if !ok {
				continue
			}
			u.mu.Lock()
			c.runOf(seq, func(s uint32) { u.refused[dst] = append(u.refused[dst], s) })
			u.mu.Unlock()
		}
	})
}

// payloadSeq is the sequence number of a report packet (v2.0 group header
// or v0.5 header).
func payloadSeq(b []byte) (uint32, bool) {
	if len(b) < 8 {
		return 0, false
	}
	if b[0]>>4 == wire.Version2 {
		return binary.BigEndian.Uint32(b) & wire.MaxReportSeq, true
	}
	return binary.BigEndian.Uint32(b[4:]), true
}

// Refused implements Refuser.
func (u *UDPSender) Refused(dst netip.AddrPort, fn func(seq uint32)) {
	u.mu.Lock()
	seqs := u.refused[dst]
	if len(seqs) == 0 {
		u.mu.Unlock()
		return
	}
	u.refused[dst] = nil
	u.mu.Unlock()
	for _, s := range seqs {
		fn(s)
	}
}

func (u *UDPSender) dial(k udpKey) (*udpConn, error) {
	v6 := !k.dst.Addr().Unmap().Is4()
	control := func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			tos := int(k.dscp) << 2
			if v6 {
				if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos); serr != nil {
					return
				}
				if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1); serr != nil {
					return
				}
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
			} else {
				if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_RECVERR, 1); serr != nil {
					return
				}
				if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TOS, tos); serr != nil {
					return
				}
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			}
			if serr == nil && k.vrf != "" {
				serr = unix.SetsockoptString(s, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, k.vrf)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
	d := net.Dialer{Control: control}
	raddr := net.UDPAddrFromAddrPort(k.dst)
	u.mu.Lock()
	notLocal := u.notLocal[k.src]
	u.mu.Unlock()
	var conn net.Conn
	var err error
	if k.src.IsValid() && !notLocal {
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(k.src, 0))
		conn, err = d.Dial("udp", raddr.String())
		if err != nil && errors.Is(err, syscall.EADDRNOTAVAIL) {
			// The source is not a local address: send from any.
			u.mu.Lock()
			u.notLocal[k.src] = true
			u.mu.Unlock()
			d.LocalAddr = nil
			conn, err = d.Dial("udp", raddr.String())
		}
	} else {
		conn, err = d.Dial("udp", raddr.String())
	}
	if err != nil {
		return nil, fmt.Errorf("report: socket to %v: %w", k.dst, err)
	}
	c, err := newUDPConn(conn.(*net.UDPConn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("report: socket to %v: %w", k.dst, err)
	}
	u.mu.Lock()
	if old := u.conns[k]; old != nil {
		u.mu.Unlock()
		c.Close()
		return old, nil
	}
	u.conns[k] = c
	u.mu.Unlock()
	return c, nil
}

// NotLocal reports whether src could not be bound because it is not a
// local address (reports to it are sent from an address the kernel picks).
func (u *UDPSender) NotLocal(src netip.Addr) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.notLocal[src]
}

// Close closes every socket.
func (u *UDPSender) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, c := range u.conns {
		c.Close()
		delete(u.conns, k)
	}
	clear(u.raws)
	for _, r := range []*rawSock{&u.raw4, &u.raw6} {
		if r.fd >= 0 {
			unix.Close(r.fd)
			r.fd, r.err = -1, net.ErrClosed
		}
	}
	return nil
}

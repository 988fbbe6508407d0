package report

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/wire"
)

// rawSock sends UDP datagrams from any source port: a raw socket of
// protocol UDP (the kernel writes the IP header, the sender the UDP one).
// A connected UDP socket has one source port, and one socket per port of
// a flow-entropy range is too many; the raw socket is opened when the
// sender is made (intd still holds CAP_NET_RAW then), so that it can be
// used after intd dropped its capabilities.
//
// It receives nothing: a filter drops every datagram the kernel copies to
// it. With IP_RECVERR it queues the ICMP errors of every UDP datagram the
// host sends; Send reads them and keeps those about its collectors.
type rawSock struct {
	fd  int
	err error // why there is no socket
}

func openRaw(v6 bool) rawSock {
	fam, lvl, recverr, mtu, pmtu := unix.AF_INET, unix.IPPROTO_IP, unix.IP_RECVERR, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO
	if v6 {
		fam, lvl, recverr, mtu, pmtu = unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO
	}
	fd, err := unix.Socket(fam, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return rawSock{fd: -1, err: err}
	}
	dropAll := []unix.SockFilter{{Code: 0x06, K: 0}} // BPF_RET|BPF_K 0: keep no byte
	for _, set := range []func() error{
		func() error {
			return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: 1, Filter: &dropAll[0]})
		},
		func() error { return unix.SetsockoptInt(fd, lvl, recverr, 1) },
		func() error { return unix.SetsockoptInt(fd, lvl, mtu, pmtu) },
	} {
		if err := set(); err != nil {
			unix.Close(fd)
			return rawSock{fd: -1, err: err}
		}
	}
	return rawSock{fd: fd}
}

// rawDest is what sending to one (source, collector, DSCP, VRF) from a
// chosen port needs, computed once.
type rawDest struct {
	mu     sync.Mutex
	v6     bool
	dst    netip.AddrPort
	to     unix.Sockaddr
	oob    []byte // source address (and VRF) and traffic class
	pseudo uint32 // pseudo-header sum but the length
	// For sendRawRun: the destination as the kernel takes it, and per
	// message a UDP header and the iovecs of header and payload.
	rawTo unix.RawSockaddrInet6 // or a RawSockaddrInet4 in its first bytes
	toLen uint32
	hdrs  [maxSegments][udpHeaderLen]byte
	iovs  [maxSegments][2]unix.Iovec
	msgs  [maxSegments]unix.Mmsghdr
	idx   [maxSegments]int // the packet of each message
}

// SourcePorts reports whether the sender can send from a chosen UDP
// source port (Packet.SrcPort) to collectors of one family.
func (u *UDPSender) SourcePorts(v6 bool) error {
	r := u.raw4
	if v6 {
		r = u.raw6
	}
	if r.fd < 0 {
		return fmt.Errorf("a fixed or per-flow report source port is sent through a raw socket, which could not be opened when intd started (it needs CAP_NET_RAW then): %w", r.err)
	}
	return nil
}

// rawFor is what sending to k from a chosen port needs: the destination
// and the raw socket of its family.
func (u *UDPSender) rawFor(k udpKey) (*rawDest, rawSock, error) {
	u.mu.Lock()
	d := u.raws[k]
	u.mu.Unlock()
	if d == nil {
		var err error
		if d, err = u.rawDest(k); err != nil {
			return nil, rawSock{}, err
		}
	}
	r := u.raw4
	if d.v6 {
		r = u.raw6
	}
	if r.fd < 0 {
		return nil, rawSock{}, u.SourcePorts(d.v6)
	}
	return d, r, nil
}

// sendRaw sends p from p.SrcPort through the raw socket: a run of one.
func (u *UDPSender) sendRaw(p *Packet) error {
	ps, errs := [1]*Packet{p}, [1]error{}
	u.sendRawRun(udpKey{p.Src, p.Dst, p.DSCP, p.VRF}, ps[:], errs[:])
	return errs[0]
}

// sendRawRun sends ps, all of key k and each from its SrcPort, through
// the raw socket with sendmmsg: one system call for the run, a result per
// packet in errs (the kernel stops at a packet it fails; the rest go in
// the next call).
func (u *UDPSender) sendRawRun(k udpKey, ps []*Packet, errs []error) {
	d, r, err := u.rawFor(k)
	if err != nil {
		for i := range ps {
			errs[i] = err
		}
		return
	}
	u.readRawErrors(r.fd, d.v6)
	d.mu.Lock()
	defer d.mu.Unlock()
	m := 0
	for i, p := range ps {
		n := udpHeaderLen + len(p.Payload)
		if n > 0xffff {
			errs[i] = fmt.Errorf("report: %d-byte datagram to %v", n, p.Dst)
			continue
		}
		errs[i] = nil
		h := &d.hdrs[m]
		binary.BigEndian.PutUint16(h[0:], p.SrcPort)
		binary.BigEndian.PutUint16(h[2:], p.Dst.Port())
		binary.BigEndian.PutUint16(h[4:], uint16(n))
		c := ^wire.Fold(wire.Sum(wire.Sum(d.pseudo+uint32(n), h[:6]), p.Payload))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(h[6:], c)
		d.iovs[m][0].Base, d.iovs[m][1].Base = &h[0], nil
		if len(p.Payload) > 0 {
			d.iovs[m][1].Base = &p.Payload[0]
		}
		d.iovs[m][0].SetLen(udpHeaderLen)
		d.iovs[m][1].SetLen(len(p.Payload))
		hdr := &d.msgs[m].Hdr
		hdr.Name, hdr.Namelen = (*byte)(unsafe.Pointer(&d.rawTo)), d.toLen
		hdr.Iov = &d.iovs[m][0]
		hdr.SetIovlen(2)
		hdr.Control = &d.oob[0]
		hdr.SetControllen(len(d.oob))
		d.idx[m] = i
		m++
	}
	for at := 0; at < m; {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&d.msgs[at])), uintptr(m-at), 0, 0, 0)
		if e != 0 {
			i := d.idx[at]
			errs[i] = fmt.Errorf("report: send to %v: %w", ps[i].Dst, e)
			at++
			continue
		}
		at += int(n)
	}
	for i := 0; i < m; i++ {
		d.iovs[i][1].Base = nil // keep no payload reachable
	}
}

// rawDest finds the source address the kernel uses for k (the address of
// the connected UDP socket Send would use, so that a source that is not
// local is replaced alike) and prepares the control messages.
func (u *UDPSender) rawDest(k udpKey) (*rawDest, error) {
	c, err := u.conn(k)
	if err != nil {
		return nil, err
	}
	src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	dst := k.dst.Addr().Unmap()
	d := &rawDest{v6: !dst.Is4(), dst: k.dst}
	ifindex := 0
	if k.vrf != "" {
		ifi, err := net.InterfaceByName(k.vrf)
		if err != nil {
			return nil, fmt.Errorf("report: VRF %q: %w", k.vrf, err)
		}
		ifindex = ifi.Index
	}
	s16, d16 := src.AsSlice(), dst.AsSlice()
	d.pseudo = wire.PseudoHeaderSum(s16, d16, unix.IPPROTO_UDP)
	if d.v6 {
		d.rawTo = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.As16()}
		d.toLen = unix.SizeofSockaddrInet6
	} else {
		*(*unix.RawSockaddrInet4)(unsafe.Pointer(&d.rawTo)) = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.As4()}
		d.toLen = unix.SizeofSockaddrInet4
	}
	if d.v6 {
		d.to = &unix.SockaddrInet6{Addr: dst.As16()}
		d.oob = append(unix.PktInfo6(&unix.Inet6Pktinfo{Addr: src.As16(), Ifindex: uint32(ifindex)}),
			cmsgInt(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(k.dscp)<<2)...)
	} else {
		d.to = &unix.SockaddrInet4{Addr: dst.As4()}
		d.oob = append(unix.PktInfo4(&unix.Inet4Pktinfo{Ifindex: int32(ifindex), Spec_dst: src.As4()}),
			cmsgInt(unix.IPPROTO_IP, unix.IP_TOS, int(k.dscp)<<2)...)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if old := u.raws[k]; old != nil {
		return old, nil
	}
	u.raws[k] = d
	u.rawDsts[k.dst] = true
	return d, nil
}

// cmsgInt is a control message carrying an int.
func cmsgInt(level, typ, v int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = int32(level), int32(typ)
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], uint32(v))
	return b
}

// readRawErrors takes the raw socket's queued ICMP errors: each comes with
// the offending datagram from its UDP header on, and the address it was
// sent to; those to a collector are recorded as refused.
func (u *UDPSender) readRawErrors(fd int, v6 bool) {
	var buf [udpHeaderLen + 8]byte
	for {
		var from unix.RawSockaddrAny
		n, err := recvErr(fd, buf[:], &from)
		if err != nil {
			return // EAGAIN: none left
		}
		if n < udpHeaderLen {
			continue
		}
		var addr netip.Addr
		switch from.Addr.Family {
		case unix.AF_INET:
			addr = netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(&from)).Addr)
		case unix.AF_INET6:
			addr = netip.AddrFrom16((*unix.RawSockaddrInet6)(unsafe.Pointer(&from)).Addr)
		default:
			continue
		}
		dst := netip.AddrPortFrom(addr, binary.BigEndian.Uint16(buf[2:]))
		seq, ok := payloadSeq(buf[udpHeaderLen:n])
		u.mu.Lock()
		if ok && u.rawDsts[dst] {
			u.refused[dst] = append(u.refused[dst], seq)
		}
		u.mu.Unlock()
	}
}

// recvErr reads one message of fd's error queue into b, and the address
// it was sent to into from when not nil, without waiting. Unlike
// unix.Recvmsg it allocates nothing.
func recvErr(fd int, b []byte, from *unix.RawSockaddrAny) (int, error) {
	var iov unix.Iovec
	if len(b) > 0 {
		iov.Base = &b[0]
		iov.SetLen(len(b))
	}
	var msg unix.Msghdr
	msg.Iov = &iov
	msg.SetIovlen(1)
	if from != nil {
		msg.Name = (*byte)(unsafe.Pointer(from))
		msg.Namelen = uint32(unsafe.Sizeof(*from))
	}
	n, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

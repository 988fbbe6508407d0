package tests

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/afpacket"
)

// vnetFwd is the smallest useful AF_PACKET forwarder, the baseline the
// soft switch is measured against: between two ports of a namespace it
// forwards IPv4 unicast sent to the receiving port's MAC and not to the
// namespace, rewriting the MACs for the one neighbour on the other side
// and decrementing the TTL, in place. Sockets have PACKET_VNET_HDR, and
// the virtio_net_hdr read with a frame is written back with it, so GSO
// super-packets and partial checksums pass through whole.
type vnetFwd struct {
	fd    [2]int
	mac   [2][6]byte // the ports' MACs
	peer  [2][6]byte // the neighbour's MAC on each port
	local map[[4]byte]bool
	// tunRole is what the forwarder does from its first port to its
	// second (tunPlain, tunSource, tunTransit, tunSink; tunfwd_test.go),
	// tap where source and transit send.
	tunRole int
	tap     *afpacket.TunnelOut
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startVnetFwd runs a vnetFwd in namespace ns between ports[0] and
// ports[1] (peers: the MAC of the other end of each port's veth) until
// the test ends.
func startVnetFwd(t *testing.T, l *lab, ns string, ports [2]string, peers [2][6]byte, role int) {
	t.Helper()
	f := &vnetFwd{peer: peers, local: map[[4]byte]bool{}, stop: make(chan struct{}), tunRole: role}
	if role == tunSource || role == tunTransit {
		f.tap = openTunnelOut(t, l, ns, ports[1])
	}
	l.in(ns, func() error {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if ip := a.(*net.IPNet).IP.To4(); ip != nil {
				f.local[[4]byte(ip)] = true
			}
		}
		for i, name := range ports {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			copy(f.mac[i][:], ifi.HardwareAddr)
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			f.fd[i] = fd
			for _, o := range []int{unix.PACKET_VNET_HDR, unix.PACKET_IGNORE_OUTGOING} {
				if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o, 1); err != nil {
					return err
				}
			}
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
			// A receive timeout, so the loops see stop.
			tv := unix.Timeval{Usec: 100_000}
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0x0300, Ifindex: ifi.Index}); err != nil { // ETH_P_ALL, network order
				return err
			}
		}
		return nil
	})
	f.wg.Add(2)
	if role == tunPlain {
		go f.loop(0, 1)
	} else {
		go f.tunnelLoop()
	}
	go f.loop(1, 0)
	t.Cleanup(func() {
		close(f.stop)
		f.wg.Wait()
		unix.Close(f.fd[0])
		unix.Close(f.fd[1])
	})
}

// loop forwards from port in to port out: recvmmsg a batch, rewrite in
// place, sendmmsg what is to be forwarded from the same buffers.
func (f *vnetFwd) loop(in, out int) {
	defer f.wg.Done()
	const batch, size = 32, 10 + 65536 + 256
	var (
		bufs         [batch][]byte
		rxIov, txIov [batch]unix.Iovec
		rx, tx       [batch]unix.Mmsghdr
	)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		rxIov[i].Base = &bufs[i][0]
		rxIov[i].SetLen(size)
		rx[i].Hdr.Iov = &rxIov[i]
		rx[i].Hdr.SetIovlen(1)
	}
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(f.fd[in]), uintptr(unsafe.Pointer(&rx[0])), batch, unix.MSG_WAITFORONE, 0, 0)
		if e != 0 {
			if e == unix.EAGAIN || e == unix.EINTR {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		k := 0
		for i := 0; i < int(r); i++ {
			b := bufs[i][:rx[i].Len]
			if !f.rewrite(b[10:], in, out) {
				continue
			}
			txIov[k].Base = &b[0]
			txIov[k].SetLen(len(b))
			tx[k].Hdr.Iov = &txIov[k]
			tx[k].Hdr.SetIovlen(1)
			k++
		}
		for sent := 0; sent < k; {
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(f.fd[out]), uintptr(unsafe.Pointer(&tx[sent])), uintptr(k-sent), 0, 0, 0)
			if e != 0 {
				if e == unix.EINTR || e == unix.EAGAIN {
					continue
				}
				sent++ // refused: skip the frame
				continue
			}
			sent += int(n)
		}
	}
}

// rewrite makes frame ready to leave on port out, or says it is not to
// be forwarded.
func (f *vnetFwd) rewrite(frame []byte, in, out int) bool {
	if len(frame) < 34 || [6]byte(frame[0:6]) != f.mac[in] || binary.BigEndian.Uint16(frame[12:]) != unix.ETH_P_IP {
		return false
	}
	ip := frame[14:]
	if f.local[[4]byte(ip[16:20])] || ip[8] <= 1 {
		return false
	}
	copy(frame[0:6], f.peer[out][:])
	copy(frame[6:12], f.mac[out][:])
	ip[8]--
	// The TTL is the high byte of a header word: its checksum rises by
	// 0x0100 (RFC 1624), with the end-around carry.
	c := uint32(binary.BigEndian.Uint16(ip[10:])) + 0x0100
	binary.BigEndian.PutUint16(ip[10:], uint16(c+c>>16))
	return true
}

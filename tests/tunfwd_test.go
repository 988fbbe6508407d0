package tests

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/afpacket"
)

// The tunnel roles of a vnetFwd in the direction from its first port to
// its second: it wraps TCP in a VXLAN-GPE tunnel carrying INT-MD (the
// source), pushes a hop onto such a tunnel (transit) or removes it (the
// sink). Source and transit hand the kernel the tunnelled super-packet
// whole through a TAP with virtio 1.4 UDP tunnel GSO headers, redirected
// by tc to the port, since AF_PACKET takes no tunnel GSO: the bound of
// that design, with INT's own work reduced to writing the headers.
const (
	tunPlain = iota
	tunSource
	tunTransit
	tunSink
)

// Tunnel layout: outer IPv4, UDP to 4790, VXLAN-GPE, INT shim, INT-MD
// header, then one 32-byte hop per INT node (six instructions: node id,
// interface ids, hop latency, queue occupancy, ingress and egress
// timestamps of 8 bytes).
const (
	tunOuter  = 20 + 8 + 8 // IPv4, UDP, VXLAN-GPE
	tunShimMD = 4 + 12
	tunHop    = 32
	tunHead   = 256 // headroom before a received frame for headers pushed
)

// openTunnelOut sets up f's tunnelled output through port (a TAP with
// UDP tunnel GSO redirected to the port, afpacket.TunnelOut).
func openTunnelOut(t *testing.T, l *lab, ns, port string) *afpacket.TunnelOut {
	t.Helper()
	var o *afpacket.TunnelOut
	var err error
	l.in(ns, func() error {
		o, err = afpacket.OpenTunnelOut(port)
		return nil
	})
	if errors.Is(err, afpacket.ErrNoTunnelGSO) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.in(ns, o.Close) })
	return o
}

// tunnelLoop forwards from port 0 to port 1 in f's tunnel role: frames
// are read after tunHead bytes of headroom, rewritten in place, and
// leave through f.tap (source, transit) or port 1 (sink, plain frames).
func (f *vnetFwd) tunnelLoop() {
	defer f.wg.Done()
	const batch, size = 32, 65536 + 256
	var (
		bufs  [batch][]byte
		hdrs  [batch][10]byte
		rxIov [2 * batch]unix.Iovec
		rx    [batch]unix.Mmsghdr
		txIov [2]unix.Iovec
	)
	for i := range bufs {
		bufs[i] = make([]byte, tunHead+size)
		rxIov[2*i].Base = &hdrs[i][0]
		rxIov[2*i].SetLen(10)
		rxIov[2*i+1].Base = &bufs[i][tunHead]
		rxIov[2*i+1].SetLen(size)
		rx[i].Hdr.Iov = &rxIov[2*i]
		rx[i].Hdr.SetIovlen(2)
	}
	send := func(fd int, hdr, frame []byte) {
		txIov[0].Base, txIov[1].Base = &hdr[0], &frame[0]
		txIov[0].SetLen(len(hdr))
		txIov[1].SetLen(len(frame))
		for {
			_, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&txIov[0])), 2)
			if e != unix.EINTR && e != unix.EAGAIN {
				return
			}
		}
	}
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(f.fd[0]), uintptr(unsafe.Pointer(&rx[0])), batch, unix.MSG_WAITFORONE, 0, 0)
		if e != 0 {
			if e != unix.EAGAIN && e != unix.EINTR {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		for i := 0; i < int(r); i++ {
			n := int(rx[i].Len) - 10
			frame := bufs[i][tunHead : tunHead+n]
			vh := hdrs[i][:]
			if n < 14 || binary.BigEndian.Uint16(frame[12:]) != unix.ETH_P_IP {
				continue
			}
			switch {
			case f.tunRole == tunSource && frame[14+9] == unix.IPPROTO_TCP && !f.local[[4]byte(frame[30:34])] &&
				int(binary.BigEndian.Uint16(frame[16:]))+tunOuter+tunShimMD+tunHop <= 65535:
				frame, th := f.encap(bufs[i], n, vh)
				_ = f.tap.Send(frame, th)
			case f.tunRole == tunTransit && isTunnel(frame):
				frame, th := f.pushHop(bufs[i], n, vh)
				_ = f.tap.Send(frame, th)
			case f.tunRole == tunSink && isTunnel(frame):
				frame = f.decap(frame, vh)
				send(f.fd[1], vh, frame)
			default:
				if f.rewrite(frame, 0, 1) {
					send(f.fd[1], vh, frame)
				}
			}
		}
	}
}

// isTunnel says whether frame is IPv4/UDP to 4790 with VXLAN-GPE
// carrying INT (next protocol 0x82).
func isTunnel(f []byte) bool {
	return len(f) >= 14+tunOuter+tunShimMD && f[14+9] == unix.IPPROTO_UDP && f[14] == 0x45 &&
		binary.BigEndian.Uint16(f[34+2:]) == 4790 && f[42+3] == 0x82
}

// tunVnet returns the tunnel header for a frame whose inner packet
// starts at innerNH, shifted by shift bytes from where the received
// virtio_net_hdr vh put it.
func tunVnet(vh []byte, shift, innerNH int) afpacket.TunnelHdr {
	h := afpacket.ParseVnetHdr(vh)
	if h.GSOType != afpacket.GSONone {
		h.GSOType |= afpacket.GSOUDPTunnelIPv4
	}
	if h.Flags&afpacket.VnetNeedsCsum != 0 { // the inner L4 checksum moved
		h.CsumStart += uint16(shift)
	}
	if h.HdrLen != 0 {
		h.HdrLen += uint16(shift)
	}
	return afpacket.TunnelHdr{Vnet: h, OuterTransport: 14 + 20, InnerNetwork: uint16(innerNH)}
}

// encap wraps the n-byte frame at buf[tunHead:] in the tunnel with the
// source's hop and returns the new frame (starting in the headroom).
func (f *vnetFwd) encap(buf []byte, n int, vh []byte) ([]byte, afpacket.TunnelHdr) {
	add := tunOuter + tunShimMD + tunHop
	s := tunHead - add
	fr := buf[s : tunHead+n]
	inner := fr[14+add:]
	inner[8]-- // TTL, checksum fixed as in rewrite
	c := uint32(binary.BigEndian.Uint16(inner[10:])) + 0x0100
	binary.BigEndian.PutUint16(inner[10:], uint16(c+c>>16))
	copy(fr[0:6], f.peer[1][:])
	copy(fr[6:12], f.mac[1][:])
	binary.BigEndian.PutUint16(fr[12:], unix.ETH_P_IP)
	ip := fr[14:34]
	clear(ip)
	ip[0], ip[1], ip[6], ip[8], ip[9] = 0x45, inner[1], 0x40, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(fr)-14))
	copy(ip[12:16], []byte{10, 0, 12, 1})
	copy(ip[16:20], []byte{10, 0, 23, 3})
	binary.BigEndian.PutUint16(ip[10:], ipSum(ip))
	udp := fr[34:42]
	binary.BigEndian.PutUint16(udp[0:], 0xc000|binary.BigEndian.Uint16(inner[20:])&0x3fff) // source port: the inner one, for ECMP
	binary.BigEndian.PutUint16(udp[2:], 4790)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(fr)-34))
	udp[6], udp[7] = 0, 0
	gpe := fr[42:50]
	clear(gpe)
	gpe[0], gpe[3] = 0x0c, 0x82
	md := fr[50 : 50+tunShimMD+tunHop]
	clear(md)
	md[0], md[1], md[3] = 0x10, byte((tunShimMD+tunHop)/4), 0x01 // INT-MD shim, length in words, next IPv4
	md[4] = 0x20                                                 // version 2
	md[6], md[7] = 8, 7                                          // hop metadata length (words), remaining hop count
	binary.BigEndian.PutUint32(md[16:], 1)                       // node id
	binary.BigEndian.PutUint64(md[32:], uint64(time.Now().UnixNano()))
	return fr, tunVnet(vh, add, 14+add)
}

// pushHop pushes a 32-byte hop onto the INT stack of the tunnelled
// n-byte frame at buf[tunHead:] and returns the new frame.
func (f *vnetFwd) pushHop(buf []byte, n int, vh []byte) ([]byte, afpacket.TunnelHdr) {
	s := tunHead - tunHop
	fr := buf[s : tunHead+n]
	hl := 14 + tunOuter + tunShimMD // headers before the stack move down
	copy(fr[0:hl], fr[tunHop:tunHop+hl])
	clear(fr[hl : hl+tunHop])
	binary.BigEndian.PutUint32(fr[hl:], 2)
	binary.BigEndian.PutUint64(fr[hl+16:], uint64(time.Now().UnixNano()))
	copy(fr[0:6], f.peer[1][:])
	copy(fr[6:12], f.mac[1][:])
	ip := fr[14:34]
	ip[8]--
	binary.BigEndian.PutUint16(ip[2:], uint16(len(fr)-14))
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], ipSum(ip))
	binary.BigEndian.PutUint16(fr[38:], uint16(len(fr)-34))
	fr[51] += tunHop / 4
	fr[50+6+1]--
	return fr, tunVnet(vh, tunHop, 14+tunOuter+int(fr[51])*4)
}

// decap removes the tunnel from frame and adjusts vh (a plain
// virtio_net_hdr again) to the inner packet.
func (f *vnetFwd) decap(frame []byte, vh []byte) []byte {
	cut := tunOuter + int(frame[51])*4
	fr := frame[cut:]
	copy(fr[0:6], f.peer[1][:])
	copy(fr[6:12], f.mac[1][:])
	binary.BigEndian.PutUint16(fr[12:], unix.ETH_P_IP)
	if vh[0]&1 != 0 {
		binary.LittleEndian.PutUint16(vh[6:], binary.LittleEndian.Uint16(vh[6:])-uint16(cut))
	}
	if hl := binary.LittleEndian.Uint16(vh[2:]); hl > uint16(cut) {
		binary.LittleEndian.PutUint16(vh[2:], hl-uint16(cut))
	}
	vh[1] &^= afpacket.GSOUDPTunnelIPv4
	return fr
}

// ipSum is the IPv4 header checksum of h (its checksum field zero).
func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

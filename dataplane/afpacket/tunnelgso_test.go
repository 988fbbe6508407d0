//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTunnelGSORefused checks what the soft dataplane's refusal of INT
// session tunnels rests on: AF_PACKET (Linux 6.18) takes no UDP tunnel
// GSO. PACKET_VNET_HDR_SZ has no size with the tunnel offsets, and a
// VXLAN-GPE super-packet sent with the tunnel GSO type is refused, while
// the same socket sends the inner TCP super-packet with plain TCPv4 GSO.
// When a kernel accepts them, the soft dataplane can hand the kernel
// tunnelled super-packets whole and this test says so.
func TestTunnelGSORefused(t *testing.T) {
	ns, h := testNS(t)
	addVeth(t, h, "va", "vb")
	var fd int
	inNS(t, ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return err
		}
		va, err := h.LinkByName("va")
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: va.Attrs().Index})
	})
	defer unix.Close(fd)

	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ, TunnelHdrLen); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PACKET_VNET_HDR_SZ %d: %v, want EINVAL: the kernel may now take tunnel offsets", TunnelHdrLen, err)
	}

	inner, vh := superPacket(20*1400, 1400)
	send := func(hdr VnetHdr, frame []byte) error {
		b := make([]byte, vnetHdrLen+len(frame))
		hdr.Put(b)
		copy(b[vnetHdrLen:], frame)
		_, err := unix.Write(fd, b)
		return err
	}
	if err := send(vh, inner); err != nil {
		t.Fatalf("TCPv4 super-packet: %v", err)
	}

	f, th := gpeFrame(inner, vh, 0)
	tv := th.Vnet
	if err := send(tv, f); !errors.Is(err, unix.EINVAL) {
		t.Errorf("VXLAN-GPE super-packet with UDP tunnel GSO: %v, want EINVAL: the kernel may now take it", err)
	}
}

// gpeFrame wraps the TCP super-packet inner (Ethernet frame, GSO header
// vh) in Ethernet (inner's addresses), IPv4 10.9.0.1 -> 10.9.0.2, UDP to
// 4790 and VXLAN-GPE, with intLen bytes (0xa0, 0xa1, ...) between
// VXLAN-GPE and the inner IP header, and returns it with its tunnel
// header.
func gpeFrame(inner []byte, vh VnetHdr, intLen int) ([]byte, TunnelHdr) {
	outer := 14 + 20 + 8 + 8 + intLen
	f := make([]byte, outer+len(inner)-14)
	copy(f, inner[:12])
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:]
	ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	copy(ip[12:], []byte{10, 9, 0, 1, 10, 9, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^sum16(ip[:20], 0))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 49152)
	binary.BigEndian.PutUint16(udp[2:], 4790)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(f)-34))
	udp[8], udp[11] = 0x0c, 0x01 // I and P flags, next protocol IPv4
	for i := range intLen {
		f[50+i] = byte(0xa0 + i)
	}
	copy(f[outer:], inner[14:])
	vh.GSOType |= GSOUDPTunnelIPv4
	vh.CsumStart += uint16(outer - 14)
	vh.HdrLen = 0
	return f, TunnelHdr{Vnet: vh, OuterTransport: 34, InnerNetwork: uint16(outer)}
}

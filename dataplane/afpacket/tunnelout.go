//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
)

// TunnelHdrLen is the size of the virtio 1.4 header of a UDP-tunnelled
// frame (struct virtio_net_hdr_v1_hash_tunnel): the virtio_net_hdr, the
// v1 buffer count, hash value, report and padding, then the outer
// transport and inner network header offsets.
const TunnelHdrLen = 24

// GSO type bits of a UDP tunnel (virtio 1.4), or-ed onto the inner
// packet's GSO type, and the flag of a tunnel whose UDP checksum the
// kernel is to compute.
const (
	GSOUDPTunnelIPv4  = 0x20
	GSOUDPTunnelIPv6  = 0x40
	VnetUDPTunnelCsum = 8
)

// TunnelHdr describes a UDP-tunnelled frame to the kernel: Vnet as for
// the inner packet (GSOType with GSOUDPTunnelIPv4 or GSOUDPTunnelIPv6
// added, CsumStart at the inner L4 header) and the offsets from the
// frame's start of the outer UDP header and of the inner IP header.
type TunnelHdr struct {
	Vnet           VnetHdr
	OuterTransport uint16
	InnerNetwork   uint16
}

// Put writes h into b (TunnelHdrLen bytes, little endian as virtio 1.4
// has it).
func (h TunnelHdr) Put(b []byte) {
	_ = b[TunnelHdrLen-1]
	clear(b[:TunnelHdrLen])
	b[0], b[1] = h.Vnet.Flags, h.Vnet.GSOType
	binary.LittleEndian.PutUint16(b[2:], h.Vnet.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.Vnet.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], h.Vnet.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], h.Vnet.CsumOffset)
	binary.LittleEndian.PutUint16(b[20:], h.OuterTransport)
	binary.LittleEndian.PutUint16(b[22:], h.InnerNetwork)
}

// ErrNoTunnelGSO is returned (wrapped) by OpenTunnelOut on kernels whose
// TAP takes no UDP tunnel GSO (before Linux 6.17).
var ErrNoTunnelGSO = errors.New("the kernel's TAP takes no UDP tunnel GSO (Linux 6.17 or later needed)")

// tunnelFeatures are the port features that let a UDP-tunnelled
// super-packet leave whole (a veth hands it to its peer so; a device
// without them segments it in software).
var tunnelFeatures = map[string]bool{"tx-udp_tnl-segmentation": true, "tx-udp_tnl-csum-segmentation": true}

// TunnelOut sends UDP-tunnelled GSO super-packets out of a port whole,
// for the kernel (GSO, or the device's tunnel TSO) to cut with the outer
// headers and what follows them copied onto every segment. AF_PACKET
// takes no UDP tunnel GSO (Linux 6.18: PACKET_VNET_HDR_SZ has no size
// with the tunnel offsets, and virtio_net_hdr_to_skb refuses the tunnel
// GSO types), a TAP does: frames are written to a TAP with virtio 1.4
// tunnel headers, and a tc filter on the TAP's ingress redirects them to
// the port's egress. The TAP goes away with Close (and with the process),
// the port's tunnel segmentation features are put back as they were.
type TunnelOut struct {
	Port string
	tap  string
	mu   sync.Mutex      // Send against Close
	fd   int             // -1 once closed
	made bool            // the TAP is ours (TUNSETIFF made it)
	was  map[string]bool // tunnel features of the port before
	hdr  [TunnelHdrLen]byte
	iov  [2]unix.Iovec
}

// OpenTunnelOut sets up tunnelled output through port (in the calling
// thread's network namespace).
func OpenTunnelOut(port string) (*TunnelOut, error) {
	pl, err := netlink.LinkByName(port)
	if err != nil {
		return nil, fmt.Errorf("afpacket: tunnel output: interface %q: %w", port, err)
	}
	o := &TunnelOut{Port: port, tap: fmt.Sprintf("intd-tnl%d", pl.Attrs().Index), fd: -1}
	fail := func(what string, err error) (*TunnelOut, error) {
		o.Close()
		return nil, fmt.Errorf("afpacket: tunnel output through %s: %s: %w", port, what, err)
	}
	if o.fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return fail("/dev/net/tun", err)
	}
	ifr, err := unix.NewIfreq(o.tap)
	if err != nil {
		return fail("TAP name", err)
	}
	// Never another's device of that name: TUNSETIFF would attach to a
	// TAP and Close remove it.
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(o.fd, unix.TUNSETIFF, ifr); err != nil {
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL) {
			if _, lerr := net.InterfaceByName(o.tap); lerr == nil {
				err = fmt.Errorf("%w (an interface named %s exists already)", err, o.tap)
			}
		}
		return fail("TUNSETIFF", err)
	}
	o.made = true
	if err := unix.IoctlSetPointerInt(o.fd, unix.TUNSETVNETHDRSZ, TunnelHdrLen); err != nil {
		return fail("TUNSETVNETHDRSZ", err)
	}
	// TUN_F_UDP_TUNNEL_GSO and TUN_F_UDP_TUNNEL_GSO_CSUM (Linux 6.17).
	const tunFUDPTunnelGSO, tunFUDPTunnelGSOCsum = 0x80, 0x100
	if err := unix.IoctlSetInt(o.fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6|
		tunFUDPTunnelGSO|tunFUDPTunnelGSOCsum); err != nil {
		if errors.Is(err, unix.EINVAL) {
			err = fmt.Errorf("%w: %w", ErrNoTunnelGSO, err)
		}
		return fail("TUNSETOFFLOAD", err)
	}
	tl, err := netlink.LinkByName(o.tap)
	if err != nil {
		return fail("TAP", err)
	}
	if err := netlink.LinkSetUp(tl); err != nil {
		return fail("TAP up", err)
	}
	qd := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: tl.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := netlink.QdiscAdd(qd); err != nil {
		return fail("clsact on the TAP", err)
	}
	redirect := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: tl.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
		Priority: 1, Protocol: unix.ETH_P_ALL}, Actions: []netlink.Action{netlink.NewMirredAction(pl.Attrs().Index)}}
	if err := netlink.FilterAdd(redirect); err != nil {
		return fail("redirect from the TAP", err)
	}
	active, err := ethtool.ActiveFeatures(port)
	if err != nil {
		return fail("features", err)
	}
	o.was = map[string]bool{}
	for n := range tunnelFeatures {
		o.was[n] = active[n]
	}
	if err := ethtool.SetFeatures(port, func(n string) bool { return tunnelFeatures[n] }, true); err != nil {
		return fail("UDP tunnel segmentation", err)
	}
	return o, nil
}

// errTunnelClosed is Send's error after Close.
var errTunnelClosed = errors.New("afpacket: tunnel output closed")

// Send writes one frame, tunnelled as h describes, out of the port. It
// may be called while Close runs (then it fails with errTunnelClosed).
func (o *TunnelOut) Send(frame []byte, h TunnelHdr) error {
	if len(frame) == 0 {
		return errors.New("afpacket: tunnel output: empty frame")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fd < 0 {
		return errTunnelClosed
	}
	h.Put(o.hdr[:])
	o.iov[0].Base, o.iov[1].Base = &o.hdr[0], &frame[0]
	o.iov[0].SetLen(TunnelHdrLen)
	o.iov[1].SetLen(len(frame))
	for {
		_, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(o.fd), uintptr(unsafe.Pointer(&o.iov[0])), 2)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("afpacket: tunnel output through %s: %w", o.Port, e)
	}
}

// Close removes the TAP (and its filter) and puts the port's tunnel
// segmentation features back, in the calling thread's network namespace
// (the one OpenTunnelOut ran in).
func (o *TunnelOut) Close() error {
	var errs []error
	if o.was != nil {
		for n, on := range o.was {
			if err := ethtool.SetFeatures(o.Port, func(s string) bool { return s == n }, on); err != nil {
				errs = append(errs, err)
			}
		}
	}
	o.mu.Lock()
	if o.fd >= 0 {
		errs = append(errs, unix.Close(o.fd))
		o.fd = -1
	}
	o.mu.Unlock()
	if _, err := net.InterfaceByName(o.tap); o.made && err == nil {
		// Gone with the descriptor unless made persistent elsewhere.
		if l, err := netlink.LinkByName(o.tap); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
	return errors.Join(errs...)
}

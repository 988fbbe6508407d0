//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
)

// PortConfig configures Open.
type PortConfig struct {
	// Batch is the number of frames read or written per system call
	// (default 64).
	Batch int
	// MaxFrame is the largest frame received, without VLAN tag (default
	// 9216), GSO super-packets aside. Larger frames are counted in
	// RxOversize and dropped.
	MaxFrame int
	// MaxGSO is the largest GSO super-packet received (default 65664:
	// Ethernet, two VLAN tags, an IPv6 header and 64 KB of payload).
	// Super-packets up to it are segmented (Segments); larger ones (BIG
	// TCP) are counted in RxOversize and dropped.
	MaxGSO int
	// Promiscuous puts the interface in promiscuous mode for the life of
	// the socket (PACKET_ADD_MEMBERSHIP, undone by the kernel at close).
	Promiscuous bool
	// SocketBuffer sets SO_RCVBUFFORCE and SO_SNDBUFFORCE (default 4 MiB;
	// falls back to the unforced options when not privileged).
	SocketBuffer int
}

// PortStats count what a port saw. They are read with Port.Stats.
type PortStats struct {
	RxFrames, RxBytes, RxBatches uint64
	RxOversize                   uint64 // truncated frames, dropped
	RxGSO                        uint64 // GSO super-packets received (in RxFrames)
	RxWhole                      uint64 // of them, forwarded whole (Node; not segmented)
	RxSegments                   uint64 // segments made of them by Segments
	RxGSOErrors                  uint64 // super-packets Segments could not segment, dropped
	RxChecksummed                uint64 // partial checksums completed in software
	RxVLANRestored               uint64 // VLAN tags put back from PACKET_AUXDATA
	TxFrames, TxBytes, TxBatches uint64
	TxErrors                     uint64 // frames the kernel refused (e.g. larger than the MTU)
	TxTunnel                     uint64 // super-packets sent whole in a UDP tunnel (TransmitTunnel)
	// Counted by Node:
	HeldFrames  uint64 // frames (segments) held while their next hop was resolved
	HoldDrops   uint64 // held frames dropped: next hop not resolved in HoldTimeout, or the hold queue full
	NoPortRoute uint64 // frames the kernel routes through an interface that is not a port, dropped
}

// vnetHdrLen is sizeof(struct virtio_net_hdr), the header PACKET_VNET_HDR
// puts before every frame in both directions.
const vnetHdrLen = 10

const vlanRoom = 4 // headroom to put a VLAN tag back

// growRoom is room behind every receive buffer (beyond what the kernel
// may fill) for the switch to grow a super-packet in place: INT, a
// session tunnel, without copying 64 KB first.
const growRoom = 512

// defaultMaxGSO is the default PortConfig.MaxGSO: a 64 KB IPv6 payload
// behind two VLAN tags.
const defaultMaxGSO = 14 + 8 + 40 + 65535 + 67

// Port is one interface opened with an AF_PACKET socket: SOCK_RAW bound to
// the interface for every protocol, PACKET_IGNORE_OUTGOING (its own
// transmissions are not read back), PACKET_VNET_HDR (so checksums left
// partial by the sender's offload are completed and GSO packets recognised)
// and PACKET_AUXDATA (so VLAN tags the kernel took out of the frame are put
// back). GSO super-packets are read whole and cut into segments by
// Segments. Frames are read with recvmmsg and written with sendmmsg in
// batches. A Port is not safe for concurrent use; Node drives it from one
// goroutine.
type Port struct {
	Name  string
	Index int
	MAC   [6]byte
	MTU   int
	// tunnel sends the port's UDP-tunnelled super-packets whole
	// (TransmitTunnel); nil: none. Set while the port forwards.
	tunnel atomic.Pointer[TunnelOut]

	fd       int
	maxFrame int
	maxGSO   int

	rxStore [][]byte // per message: vlanRoom headroom + frame
	rxHdr   [][vnetHdrLen]byte
	rxCtrl  [][]byte
	rxIov   []unix.Iovec // 2 per message
	rxMsgs  []unix.Mmsghdr
	rxN     int // frames in the last read
	rxOff   []int
	rxLen   []int
	rxVnet  []VnetHdr // per frame of the last read, CsumStart adjusted for a restored VLAN tag
	rxTime  []int64   // per frame of the last read: kernel receive time, Unix ns (0: none)

	txStore    [][]byte
	txHdr      [][vnetHdrLen]byte
	refs       int          // frames queued by reference (TransmitWhole)
	txIov      []unix.Iovec // 2 per message
	txMsgs     []unix.Mmsghdr
	txN        int
	transmitFn func([]byte) // Transmit, bound once
	// zeroHdr is the virtio_net_hdr of every transmitted frame: no GSO,
	// no checksum to complete (frames leave with their checksums whole:
	// Read completes partial ones, Segments computes them, the switch
	// updates them incrementally).
	zeroHdr [vnetHdrLen]byte

	stats PortStats
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Open opens an AF_PACKET port on the named interface (in the calling
// thread's network namespace).
func Open(name string, cfg PortConfig) (*Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("afpacket: interface %q: %w", name, err)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 9216
	}
	if cfg.MaxGSO <= 0 {
		cfg.MaxGSO = defaultMaxGSO
	}
	cfg.MaxGSO = max(cfg.MaxGSO, cfg.MaxFrame)
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = 4 << 20
	}
	// Protocol 0 receives nothing until bind names the interface, so no
	// frame from another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afpacket: socket: %w", err)
	}
	p := &Port{Name: name, Index: ifi.Index, MTU: ifi.MTU, fd: fd, maxFrame: cfg.MaxFrame, maxGSO: cfg.MaxGSO}
	copy(p.MAC[:], ifi.HardwareAddr)
	p.transmitFn = p.Transmit
	fail := func(what string, err error) (*Port, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: %s: %s: %w", name, what, err)
	}
	for _, o := range []struct {
		name string
		opt  int
	}{{"PACKET_IGNORE_OUTGOING", unix.PACKET_IGNORE_OUTGOING}, {"PACKET_VNET_HDR", unix.PACKET_VNET_HDR}, {"PACKET_AUXDATA", unix.PACKET_AUXDATA}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, 1); err != nil {
			return fail(o.name, err)
		}
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.SocketBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.SocketBuffer)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, cfg.SocketBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SocketBuffer)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	if cfg.Promiscuous {
		mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			return fail("promiscuous mode", err)
		}
	}
	// The kernel's receive timestamp of every frame (SO_TIMESTAMPNS), so
	// that hop latency counts the time a frame waits in the socket.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	n := cfg.Batch
	ctrlLen := unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{}))) + unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{})))
	p.rxStore, p.rxHdr, p.rxCtrl = make([][]byte, n), make([][vnetHdrLen]byte, n), make([][]byte, n)
	p.rxIov, p.rxMsgs, p.rxOff, p.rxLen = make([]unix.Iovec, 2*n), make([]unix.Mmsghdr, n), make([]int, n), make([]int, n)
	p.rxVnet, p.rxTime = make([]VnetHdr, n), make([]int64, n)
	p.txStore, p.txIov, p.txMsgs = make([][]byte, n), make([]unix.Iovec, 2*n), make([]unix.Mmsghdr, n)
	p.txHdr = make([][vnetHdrLen]byte, n)
	for i := 0; i < n; i++ {
		// Room for a GSO super-packet; one spare byte detects longer
		// frames (MSG_TRUNC is set on them too). Pages beyond what the
		// largest frame so far touched stay unused.
		p.rxStore[i] = make([]byte, vlanRoom+cfg.MaxGSO+1, vlanRoom+cfg.MaxGSO+1+growRoom)
		p.rxCtrl[i] = make([]byte, ctrlLen)
		p.txStore[i] = make([]byte, cfg.MaxFrame+vlanRoom)
		p.txIov[2*i].Base = &p.zeroHdr[0]
		p.txIov[2*i].SetLen(vnetHdrLen)
		p.txMsgs[i].Hdr.Iov = &p.txIov[2*i]
		p.txMsgs[i].Hdr.SetIovlen(2)
	}
	return p, nil
}

// Fd returns the socket's file descriptor (non-blocking), for polling.
func (p *Port) Fd() int { return p.fd }

// Close closes the socket.
func (p *Port) Close() error { return unix.Close(p.fd) }

// Stats returns the port's counters.
func (p *Port) Stats() PortStats { return p.stats }

// Read reads up to a batch of frames without blocking and returns how many
// it read (0 when none is waiting); Frame(i) returns them until the next
// Read. Partial checksums of frames without GSO are completed. GSO
// super-packets are returned whole: Segments cuts them. Oversized frames
// are dropped and counted, so a Read may return 0 although frames were
// waiting: call it until it returns 0 with a nil error.
func (p *Port) Read() (int, error) {
	for i := range p.rxMsgs {
		h := &p.rxMsgs[i].Hdr
		p.rxIov[2*i].Base = &p.rxHdr[i][0]
		p.rxIov[2*i].SetLen(vnetHdrLen)
		p.rxIov[2*i+1].Base = &p.rxStore[i][vlanRoom]
		p.rxIov[2*i+1].SetLen(len(p.rxStore[i]) - vlanRoom)
		h.Iov = &p.rxIov[2*i]
		h.SetIovlen(2)
		h.Control = &p.rxCtrl[i][0]
		h.SetControllen(len(p.rxCtrl[i]))
		h.Flags = 0
		p.rxMsgs[i].Len = 0
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.rxMsgs[0])), uintptr(len(p.rxMsgs)),
		unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return 0, nil
	}
	if e != 0 {
		return 0, fmt.Errorf("afpacket: %s: recvmmsg: %w", p.Name, e)
	}
	got := int(r)
	p.stats.RxBatches++
	k := 0
	for i := 0; i < got; i++ {
		m := &p.rxMsgs[i]
		n := int(m.Len) - vnetHdrLen
		if n < 14 || m.Hdr.Flags&unix.MSG_TRUNC != 0 {
			p.stats.RxOversize++
			continue
		}
		vh := ParseVnetHdr(p.rxHdr[i][:])
		if n > p.maxGSO || vh.GSOType == GSONone && n > p.maxFrame {
			p.stats.RxOversize++
			continue
		}
		off := vlanRoom
		frame := p.rxStore[i][off : off+n]
		tci, tagged, ts := p.control(i)
		if tagged {
			// Put the tag the kernel moved to skb metadata back after the
			// MAC addresses.
			s := p.rxStore[i]
			copy(s[0:12], s[vlanRoom:vlanRoom+12])
			binary.BigEndian.PutUint16(s[12:], unix.ETH_P_8021Q)
			binary.BigEndian.PutUint16(s[14:], tci)
			off, n = 0, n+vlanRoom
			frame = s[:n]
			if vh.Flags&VnetNeedsCsum != 0 {
				vh.CsumStart += vlanRoom
			}
			p.stats.RxVLANRestored++
		}
		if vh.GSOType != GSONone {
			p.stats.RxGSO++
		} else if vh.Flags&VnetNeedsCsum != 0 {
			if !completeChecksum(frame, int(vh.CsumStart), int(vh.CsumOffset)) {
				p.stats.RxOversize++
				continue
			}
			vh.Flags &^= VnetNeedsCsum
			p.stats.RxChecksummed++
		}
		p.rxOff[k], p.rxLen[k], p.rxVnet[k], p.rxTime[k] = off, n, vh, ts
		if k != i {
			p.rxStore[k], p.rxStore[i] = p.rxStore[i], p.rxStore[k]
		}
		k++
		p.stats.RxFrames++
		p.stats.RxBytes += uint64(n)
	}
	p.rxN = k
	return k, nil
}

// control returns what the control messages of message i carry: the
// VLAN TCI the kernel stripped from the frame (PACKET_AUXDATA) and its
// receive timestamp (SCM_TIMESTAMPNS, Unix ns; 0 when absent). It does
// not allocate.
func (p *Port) control(i int) (tci uint16, tagged bool, ts int64) {
	b := p.rxCtrl[i][:p.rxMsgs[i].Hdr.Controllen]
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			break
		}
		data := b[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && len(data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})):
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&data[0]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
				tci, tagged = aux.Vlan_tci, true
			}
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts = (*unix.Timespec)(unsafe.Pointer(&data[0])).Nano()
		}
		next := (l + int(unsafe.Sizeof(uintptr(0))) - 1) &^ (int(unsafe.Sizeof(uintptr(0))) - 1)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return tci, tagged, ts
}

// completeChecksum finishes a checksum the sender left to offload: the
// field at start+offset holds the pseudo-header sum, the one's complement
// sum from start to the end is stored there complemented.
func completeChecksum(b []byte, start, offset int) bool {
	if start < 0 || offset < 0 || start+offset+2 > len(b) {
		return false
	}
	binary.BigEndian.PutUint16(b[start+offset:], ^wire.Fold64(wire.Sum64(0, b[start:])))
	return true
}

// Frame returns frame i of the last Read, valid until the next Read (or
// Segments(i)). A GSO super-packet is returned whole.
func (p *Port) Frame(i int) []byte { return p.rxStore[i][p.rxOff[i] : p.rxOff[i]+p.rxLen[i]] }

// RxTime returns the kernel's receive timestamp of frame i of the last
// Read in Unix nanoseconds (CLOCK_REALTIME), 0 when the kernel gave none.
func (p *Port) RxTime(i int) int64 { return p.rxTime[i] }

// Vnet returns the virtio_net_hdr of frame i of the last Read (CsumStart
// relative to Frame(i); VnetNeedsCsum cleared once Read completed the
// checksum).
func (p *Port) Vnet(i int) VnetHdr { return p.rxVnet[i] }

// Segments hands emit frame i of the last Read as it goes on the wire:
// the frame itself, or the segments of a GSO super-packet (see Segment;
// they are cut in place, so Frame(i) is garbage afterwards, and emit must
// not keep the slice). It returns the number of frames emitted; a
// super-packet that cannot be segmented is counted in RxGSOErrors and
// dropped.
func (p *Port) Segments(i int, emit func(frame []byte)) int {
	vh := p.rxVnet[i]
	if vh.GSOType == GSONone {
		emit(p.Frame(i))
		return 1
	}
	n, err := Segment(vh, p.Frame(i), emit)
	if err != nil {
		p.stats.RxGSOErrors++
		return 0
	}
	p.stats.RxSegments += uint64(n)
	return n
}

// Transmit queues a copy of frame for the next Flush (flushing first when
// the batch is full). It implements soft.Link.
func (p *Port) Transmit(frame []byte) {
	if len(frame) > len(p.txStore[0]) {
		p.stats.TxErrors++
		return
	}
	if p.txN == len(p.txMsgs) {
		p.Flush()
	}
	i := p.txN
	n := copy(p.txStore[i], frame)
	p.txIov[2*i].Base = &p.zeroHdr[0]
	p.txIov[2*i+1].Base = &p.txStore[i][0]
	p.txIov[2*i+1].SetLen(n)
	p.txN++
}

// TransmitWhole queues a GSO super-packet with its virtio_net_hdr (o,
// as Read gave it in Vnet and Node passed it to the switch): the kernel
// segments it, or hands it whole to a device that takes it so. The frame
// is not copied: it must stay as it is until the next Flush (Node flushes
// after every call into the switch that queued one). It implements
// soft.WholeLink.
func (p *Port) TransmitWhole(frame []byte, o *soft.Offload) {
	if p.txN == len(p.txMsgs) {
		p.Flush()
	}
	i := p.txN
	p.txHdr[i] = [vnetHdrLen]byte(o[:vnetHdrLen])
	p.txIov[2*i].Base = &p.txHdr[i][0]
	p.txIov[2*i+1].Base = &frame[0]
	p.txIov[2*i+1].SetLen(len(frame))
	p.txN++
	p.refs++
}

// Pending returns the number of frames waiting for Flush.
func (p *Port) Pending() int { return p.txN }

// Flush sends the queued frames with sendmmsg. Frames the kernel refuses
// are counted in TxErrors and skipped; a full socket buffer is waited out.
func (p *Port) Flush() {
	i := 0
	for i < p.txN {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.txMsgs[i])), uintptr(p.txN-i), 0, 0, 0)
		switch {
		case e == 0:
			p.stats.TxBatches++
			for j := i; j < i+int(r); j++ {
				p.stats.TxFrames++
				p.stats.TxBytes += uint64(p.txIov[2*j+1].Len)
			}
			i += int(r)
		case e == unix.EAGAIN || e == unix.ENOBUFS:
			if e == unix.ENOBUFS {
				// Dropped by the qdisc: the frame is gone.
				p.stats.TxErrors++
				i++
				continue
			}
			fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLOUT}}
			_, _ = unix.Poll(fds, 10)
		case e == unix.EINTR:
		default:
			p.stats.TxErrors++
			i++
		}
	}
	p.txN, p.refs = 0, 0
}

// ErrClosed is returned by Node.Run after Close.
var ErrClosed = errors.New("afpacket: closed")

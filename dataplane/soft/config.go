package soft

import (
	"errors"
	"net/netip"

	"github.com/intd-project/intd/dataplane/report"
)

// Link is the transmit side of a port: where frames leave the switch. The
// lab connects links in-process; an AF_PACKET port writes to a socket. The
// frame is only valid during the call (copy it to keep it), and Transmit
// must not call back into the transmitting switch synchronously.
type Link interface {
	Transmit(frame []byte)
}

// Offload is what a receiving port knows of a GSO super-packet beyond its
// bytes (for an AF_PACKET port, its virtio_net_hdr: segment size, type,
// where the checksum to complete starts). The switch does not read it: it
// goes unchanged with a super-packet forwarded whole (ReceiveWhole) to
// the egress port's WholeLink, which hands it to its device.
type Offload [10]byte

// WholeLink is a Link that also sends GSO super-packets whole, with the
// Offload they arrived with. Frame and Offload are only valid during the
// call.
type WholeLink interface {
	Link
	TransmitWhole(frame []byte, o *Offload)
}

// TunnelLink is a Link that can also send TCP super-packets in a UDP
// tunnel whole (an INT session tunnel), for the kernel to cut into
// segments with everything up to the inner IP header copied onto each.
type TunnelLink interface {
	Link
	// CanTunnel says whether TransmitTunnel works on this link.
	CanTunnel() bool
	// TransmitTunnel sends frame, whose outer UDP header is at outerL4
	// and inner IP header at innerL3, as segments of mss bytes of TCP
	// payload. The inner TCP checksum holds its pseudo-header sum (as
	// received from a sender that left it to the device). Frame is only
	// valid during the call.
	TransmitTunnel(frame []byte, outerL4, innerL3, mss int)
}

// TCPLink is a Link that sends a TCP super-packet (IP at l3, its TCP
// checksum holding the pseudo-header sum) whole with fresh offload
// state, as segments of mss payload bytes. Frame must stay as it is
// until the next flush, as for WholeLink.
type TCPLink interface {
	Link
	TransmitTCP(frame []byte, l3, mss int)
}

// LinkFunc adapts a function to Link.
type LinkFunc func(frame []byte)

// Transmit implements Link.
func (f LinkFunc) Transmit(frame []byte) { f(frame) }

// PortConfig describes one switch port. Frames enter through
// Switch.Receive(index) and leave through Link.
type PortConfig struct {
	Name string // interface name, as used in sai attributes (sink ports, queue reports, InPort)
	// ID is the level-1 interface id in INT metadata; 0 means index+1.
	ID uint16
	// L2ID is the level-2 interface id; 0 means 0x10000 + level-1 id.
	L2ID uint32
	// MTU is the largest IP datagram the port sends (default 1500). INT
	// never fragments: it sets M or skips initiation instead.
	MTU int
	// Rate drains the egress queue, in bits per second; 0 is infinitely
	// fast (no queueing, what the benchmarks use).
	Rate int64
	// QueueBytes bounds each egress queue (default 256 KiB); a packet
	// that does not fit is tail-dropped (reason 71).
	QueueBytes int
	// Queues is the number of egress queues, 1 (the default) to
	// MaxQueues. A packet joins queue min(DSCP >> 3, Queues-1), its DSCP
	// class selector, and the port sends by strict priority, the highest
	// queue first. The queue is the queue id of INT metadata and queue
	// reports.
	Queues int
	// MAC is the port's address, written as source MAC by routes that
	// rewrite MACs.
	MAC [6]byte
	// Link receives transmitted frames; nil discards them.
	Link Link
}

// Route is a static route: packets whose outer destination address is in
// Prefix leave through one of Ports (ECMP by flow hash when several).
type Route struct {
	Prefix netip.Prefix
	Ports  []string
	// NextHopMAC, when non-zero, becomes the destination MAC and the
	// egress port's MAC the source MAC. The zero value forwards frames
	// with their MACs untouched (the lab's default).
	NextHopMAC [6]byte
}

// Config configures a software switch.
type Config struct {
	Name   string
	Ports  []PortConfig
	Routes []Route
	// NoTTLDecrement makes the switch a bump in the wire: IP TTL / hop
	// limit is neither checked nor decremented.
	NoTTLDecrement bool
	// Clock defaults to a RealClock.
	Clock Clock
	// Reporter receives report events; nil discards them. If it also
	// implements ReportConfigurer or StatsReporter, the switch configures
	// it and reads its counters.
	Reporter report.Reporter
	// MaxFrame is the largest frame received (default 9216); buffers get
	// room on top for INT growth.
	MaxFrame int
	// FlowCacheSize is the number of flow cache slots, rounded up to a
	// power of two (default 4096).
	FlowCacheSize int
	// NoSessionTunnels, when set, says why INT session tunnels cannot be
	// configured (a node tunnel address is refused with it).
	NoSessionTunnels string
	// TunnelOutput, when set, gives the links what TunnelLink.CanTunnel
	// needs (on) once a configuration first sends session tunnels whole
	// (a node tunnel address with INT endpoint on, or INT transit, with
	// INT recognised in VXLAN-GPE) and takes it away (off) when none
	// does any more, so that a node without such a configuration changes
	// nothing on the host for them. Packets go on meanwhile (the
	// switch's lock let go; configuration changes wait): the links'
	// CanTunnel and TransmitTunnel must take the change at any time. A
	// new configuration applies once it is on; it is turned off after
	// the old one stopped. An error turning it on refuses the
	// configuration change (naming the attribute that asked for it),
	// unless it wraps ErrNoSessionTunnels: then the host can never give
	// it, tunnel addresses are refused from then on as with
	// NoSessionTunnels, and transit nodes cut tunnel super-packets into
	// segments.
	TunnelOutput func(on bool) error
}

// ErrNoSessionTunnels is wrapped by a Config.TunnelOutput error that says
// the host can never send session tunnels whole.
var ErrNoSessionTunnels = errors.New("session tunnels cannot leave whole on this host")

const (
	defaultMTU        = 1500
	defaultQueueBytes = 256 << 10
	// MaxQueues is the most egress queues a port has: one per DSCP class
	// selector.
	MaxQueues       = 8
	defaultMaxFrame = 9216
	// maxWhole is the largest super-packet ReceiveWhole takes: 64 KB
	// of payload behind Ethernet, two VLAN tags and up to 128 bytes of
	// IPv6 and TCP headers.
	maxWhole = 65535 + 14 + 8 + 40 + 128
	intRoom  = 512 // buffer room for INT headers and metadata (and a session tunnel)
)

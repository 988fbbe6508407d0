// Package afpacket runs the software INT switch (dataplane/soft) on real
// Linux interfaces. It knows packets, sockets and the kernel's tables,
// nothing of gNMI; `intd run --dataplane soft --interfaces eth1,eth2`
// (cmd/intd/soft.go) wires it to dtel and the gNMI server.
//
// # Dataplane
//
// New(Config{Interfaces}) opens the ports, prepares the host (below),
// builds the switch with a report pipeline sending over UDP through the
// kernel's stack, and mirrors the kernel's tables (Kernel); Run forwards
// until its context ends; Close stops forwarding, sends the reports the
// pipeline still holds back for coalescing, closes the sockets and
// restores the host. Dataplane is the switch's sai.Backend, with the
// frames dropped before the switch (see Node) counted as routing misses.
//
// # Host settings
//
// New changes the host as follows, logs each change at INFO ("host
// setting changed; restored at exit", with the interface, the setting,
// the old and new value) and Close undoes each, logging "host setting
// restored":
//
//   - Kernel forwarding. The kernel receives a copy of every frame the
//     switch forwards; with forwarding on (net.ipv4.ip_forward=1,
//     net.ipv6.conf.all.forwarding=1, as on a router) it would forward a
//     second copy. For every port and both families New adds a policy
//     routing rule `ip rule add pref 1 iif <port> proto 29 blackhole`
//     (RulePriority, RuleProtocol): what arrives on a port and is not for
//     one of the node's own addresses (the local table, priority 0, comes
//     first) is dropped by the kernel instead of forwarded. Forwarding
//     between other interfaces is untouched, and so are the forwarding
//     sysctls. A per-interface sysctl would not do: IPv4's
//     net.ipv4.conf.<port>.forwarding=0 stops forwarding of what arrives
//     on the port, but IPv6's net.ipv6.conf.<port>.forwarding=0 does not
//     (it only makes the interface behave as a host: router
//     advertisements accepted, no router flag in neighbour
//     advertisements), and forwarding goes on as long as
//     net.ipv6.conf.all.forwarding=1; measured on Linux 6.18. Ports in a
//     VRF are not supported (the rule comes before the VRF's l3mdev rule).
//   - GRO and LRO are turned off on every port where they are on, like
//     `ethtool -K <port> gro off lro off`: a router forwards frames as
//     they were received, never merged beyond the MTU. (Merged frames
//     would still be cut again by Segments, at a cost.)
//   - INT session tunnels, only while the configuration sends them whole
//     (a tunnel-address with INT endpoint on, or INT transit, with INT
//     recognised in VXLAN-GPE; soft.Config.TunnelOutput): every port
//     gets a TunnelOut (a TAP named intd-tnl<ifindex> whose tc ingress
//     redirects to the port, gone with the process) and UDP tunnel
//     segmentation (tx-udp_tnl-segmentation,
//     tx-udp_tnl-csum-segmentation) on, put back as it was when no
//     configuration needs them any more and at Close. Until then, and on
//     a node not configured so, nothing of it exists. A TAP that cannot
//     be made refuses the configuration (all ports' undone); on a kernel
//     whose TAP takes no UDP tunnel GSO the switch refuses tunnel
//     addresses and transit cuts tunnel super-packets into segments.
//
// Nothing else is changed: addresses, routes, neighbours, qdiscs and
// sysctls are the operator's.
//
// One intd per interface: New holds each port (an abstract unix socket
// named intd/if/<ifindex> in the namespace, freed by the kernel when the
// process exits, however it exits; dataplane/internal/hostlock) and
// refuses an interface another running intd holds, naming its process.
// After a crash (kill -9), the rules stay, and the kernel then drops what
// arrives on the ports instead of forwarding it; the next New removes
// every rule of priority 1 and protocol 29 whose interface no running
// intd holds and logs a warning for each ("left by an intd that did not
// stop cleanly"). By hand: `ip rule del pref 1 iif <port>` and
// `ip -6 rule del pref 1 iif <port>`. GRO and LRO turned off by an
// instance that crashed stay off (the next one finds them off and leaves
// them so): `ethtool -K <port> gro on` restores them.
//
// # Ports
//
// Open gives a Port: an AF_PACKET SOCK_RAW socket bound to one interface
// for every protocol, with
//
//   - PACKET_IGNORE_OUTGOING: what the switch (or the kernel) sends on the
//     interface is not read back;
//   - PACKET_VNET_HDR: every frame comes with a virtio_net_hdr, so a
//     checksum the sender left to offload (CHECKSUM_PARTIAL, common on
//     veth) is completed in software before forwarding, and GSO
//     super-packets (up to MaxGSO, 64 KB of payload) are read whole and
//     segmented (below); frames longer than MaxFrame without GSO are
//     dropped and counted (RxOversize), never forwarded beyond the MTU;
//   - PACKET_AUXDATA: a VLAN tag the kernel moved into skb metadata is put
//     back into the frame;
//   - promiscuous mode (PACKET_ADD_MEMBERSHIP) on request.
//
// Frames are read with recvmmsg and written with sendmmsg in batches
// (default 64). Port implements soft.Link: Transmit copies the frame into
// the next slot of the batch, Flush sends it.
//
// Transmitted frames carry an all-zero virtio_net_hdr: no GSO (every
// frame fits the MTU) and no checksum left to complete (frames leave with
// whole checksums), super-packets forwarded whole aside (below).
//
// # GSO super-packets
//
// A local sender or a veth peer with TSO/GSO on (the default) hands the
// port TCP and UDP super-packets of up to 64 KB, which a hardware NIC
// would have cut into MTU-sized frames. Segment does that cut in
// userspace, from the virtio_net_hdr the kernel delivers (gso_type
// TCPV4, TCPV6, UDP_L4 and legacy UDP, the ECN bit, gso_size,
// csum_start): it replicates the L2/L3/L4 headers and fixes them as the
// kernel's software GSO does - IPv4 total length, identification (plus
// one per segment) and header checksum, IPv6 payload length, TCP sequence
// numbers, FIN/PSH on the last segment only and CWR on the first only,
// UDP lengths, and TCP/UDP checksums computed in full with the
// pseudo-header. Legacy UFO becomes IPv4 fragments (IPv6 UFO, which the
// kernel never delivers to packet sockets, is refused). Node feeds each
// segment to Switch.Receive, so INT is added to every MTU-sized segment
// as on a hardware switch. Segmentation is in place in the receive buffer
// (the headers of segment i overwrite the tail of segment i-1's payload,
// already handed over), without allocation; work is linear in the frame
// length, bounded by MaxGSOSegments and MaxGSOHeader. Frames it cannot
// segment (unknown type, headers that do not match it) are dropped and
// counted (RxGSOErrors). The frame's hdr_len is only a hint from the
// kernel (skb_headlen) and is not used; headers are parsed.
//
// Super-packets forwarded whole: Node first offers a super-packet to
// soft.Switch.ReceiveWhole, which forwards it as it is when nothing in it
// is instrumented (no INT in it, no watchlist entry acting on it, sampled
// out, an egress port with room in its queue and an MTU its segments fit;
// see there). Port.TransmitWhole then sends it with the virtio_net_hdr it
// came with (segment size, type, partial checksum), from the buffer it
// is in, without a copy; the kernel segments it after the switch, or
// passes it whole to a device that takes super-packets (veth). Only what
// gets INT is cut in userspace (PortStats.RxWhole against RxGSO).
//
// Offloads: a router must see what is on the wire. New turns GRO and LRO
// off on its ports like `ethtool -K` (package dataplane/internal/ethtool)
// and restores them at exit (Host settings). Hosts next to the
// switch keep their default offloads: their super-packets are segmented as
// above.
//
// # Node
//
// Node is the run loop of one switch, one goroutine: ppoll on every port's
// socket with a timeout at the switch's next queue departure, read up to 8
// batches per ready port, hand the switch's frames (Kernel.Classify) to
// Switch.ReceiveAt, then Switch.Poll on the real clock (so egress queues
// drain at their rate) and one sendmmsg per port. Departures closer than
// 20 µs are not slept for (the timer slack alone is 50 µs).
//
// Timestamps: ports ask for the kernel's receive timestamp of every frame
// (SO_TIMESTAMPNS, taken when the driver hands the frame to the stack), and
// a frame's ingress timestamp in INT metadata and reports is that time, so
// hop latency includes the time a frame waited in the kernel before intd
// read it, not only its time in the switch (TestHopLatencyFromKernel: 5
// frames left 100 ms in the socket report 100.39 ms). Timestamps are
// CLOCK_REALTIME; the switch's clock does not follow wall clock steps, so
// a frame's age (now minus the timestamp, read once per batch) is what is
// carried over. Timestamps older than 10 s or in the future are ignored.
//
// Hold queue: a frame whose next hop has no neighbour entry yet (an
// on-link destination the node never talked to, or a gateway not
// resolved) is copied into a hold queue while the kernel resolves the
// address (RTM_NEWNEIGH with NTF_USE, at most once a second per address,
// as if it had a packet for it); when the neighbour table changes the
// node is woken and hands the frames whose next hop resolved to the switch,
// in arrival order, with their original receive time (their latency
// includes the wait). A frame waits at most HoldTimeout (3 s, when the
// kernel's own resolution gives up) and is then dropped; at most 256
// frames wait, 64 per next hop, larger than 9220 bytes none; frames beyond
// are dropped. Drops are counted in PortStats.HoldDrops and, through
// Dataplane.Stats, as routing misses (reason 29) in the node's and the
// interface's drop counters. Without the queue the switch would take a
// less specific route - the default route towards another router, which
// sends it back, until the TTL runs out.
//
// # Forwarding: the kernel's tables
//
// Kernel makes the switch forward like the kernel's router would with the
// same `ip route` configuration: Sync mirrors the namespace's main routing
// table into Switch.SetRoutes - a gateway route becomes a route with the
// gateway's MAC from the neighbour table (rewritten as destination MAC,
// the egress port's MAC as source); a connected route becomes one /32 or
// /128 per known neighbour; routes through interfaces that are not ports
// (management) are left out, as are non-unicast routes and fe80::/10.
// Multipath routes use the next hops that resolve to the first one's MAC
// (soft rewrites one MAC per route). A gateway without a usable neighbour
// entry is resolved by the kernel (RTM_NEWNEIGH with NTF_USE, at most once
// a second per address) and its route appears when the entry does.
// Run re-syncs on every netlink route, neighbour or address notification
// (debounced by 10 ms) and every 10 s. Kernel works in the calling
// thread's network namespace; Dataplane.Run runs it on a thread in the
// namespace New ran in.
//
// Kernel.Classify decides what becomes of each received frame: IPv4 and
// IPv6 unicast sent to the port's MAC and not to one of the namespace's
// addresses is the switch's (Forward); ARP, neighbour discovery,
// multicast, traffic to the node itself (gNMI, ping) and frames seen only
// because of promiscuous mode are the kernel's alone (ToKernel). Classify
// looks the destination up in the kernel's main table (longest prefix,
// lowest metric, one map per prefix length, no allocation): a route on a
// port whose next hop is not resolved yet holds the frame (Hold, above);
// a route through an interface that is not a port, and blackhole,
// unreachable and prohibit routes, drop it (NoPortRoute: the switch cannot
// send there, and the kernel must not forward, see Host settings), counted
// in PortStats.NoPortRoute and as routing misses; no route at all leaves
// it to the switch, which counts a routing miss (reason 29) and reports
// the drop.
//
// Interfaces keep their kernel addresses, so the kernel answers ARP and
// terminates traffic for the switch.
//
// Shaping: when an interface has a tbf root qdisc, intd gives the soft
// port the tbf's rate and limit (Shaping), so the switch's own egress
// queue does the shaping and INT hop latency, queue occupancy and queue
// reports see the congestion; the tbf then passes the paced traffic.
// Unshaped ports drain at the sysfs link speed, 10 Gbit/s for veth.
//
// # Figures
//
// Measured figures and their history: docs/performance.md.
package afpacket

// Package afpacket runs the software INT switch (dataplane/soft) on real
// Linux interfaces. It knows packets, sockets and the kernel's tables,
// nothing of gNMI; `intd run --dataplane soft --interfaces eth1,eth2`
// (cmd/intd/soft.go) wires it to dtel and the gNMI server.
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
// whole checksums).
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
// kernel (skb_headlen) and is not used; headers are parsed. Figures: a
// 64 KB TCP super-packet into 45 segments of 1448 bytes costs about
// 9-13 µs including a 1.5 µs copy back into place (BenchmarkSegment,
// 5-7 GB/s, zero allocations; shared 2-core VM at load average 6).
//
// Offloads: a router must see what is on the wire. SetOffload switches
// GRO/LRO/TSO/GSO/tx checksum like `ethtool -K`; intd turns GRO and LRO off
// on its ports. Hosts next to the switch keep their default offloads:
// their super-packets are segmented as above.
//
// # Node
//
// Node is the run loop of one switch, one goroutine: ppoll on every port's
// socket with a timeout at the switch's next queue departure, read up to 8
// batches per ready port, hand accepted frames to Switch.Receive, then
// Switch.Poll on the real clock (so egress queues drain at their rate and
// hop latency is what a packet spent in the switch) and one sendmmsg per
// port. Departures closer than 20 µs are not slept for (the timer slack
// alone is 50 µs).
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
// (debounced by 10 ms) and every 10 s.
//
// Kernel.Accept decides which received frames the switch forwards: IPv4
// and IPv6 unicast sent to the port's MAC and not to one of the
// namespace's addresses. ARP, neighbour discovery, traffic to the switch
// itself (gNMI, ping) and frames seen only because of promiscuous mode go
// to the kernel alone. A destination on a connected subnet without a
// neighbour entry is accepted (the switch drops it as a routing miss,
// reason 29) and resolution requested.
//
// Interfaces keep their kernel addresses, so the kernel answers ARP and
// terminates traffic for the switch. The kernel also receives a copy of
// every frame the switch forwards; IP forwarding must be off in the
// switch's namespace (net.ipv4.ip_forward=0, net.ipv6.conf.all.forwarding=0)
// or the kernel forwards a second copy, without INT.
//
// Shaping: when an interface has a tbf root qdisc, intd gives the soft
// port the tbf's rate and limit (Shaping), so the switch's own egress
// queue does the shaping and INT hop latency, queue occupancy and queue
// reports see the congestion; the tbf then passes the paced traffic.
// Unshaped ports drain at the sysfs link speed, 10 Gbit/s for veth.
//
// # Figures
//
// See the README's Performance section (make bench-e2e).
package afpacket

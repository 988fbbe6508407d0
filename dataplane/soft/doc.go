// Package soft is intd's software INT dataplane: a switch that implements
// sai.Backend and does what an INT switch does, with real queues, latency
// and drops. It is the embedded default behind `intd lab`.
//
// Build a switch with New(Config{Ports, Routes, Clock, Reporter}). Frames
// enter with Switch.Receive(port, frame) and leave through each port's
// Link (PortConfig.Link or SetLink); an AF_PACKET port implements Link and
// calls Receive. Poll drains the egress queues up to the Clock's now and
// returns the next departure time; RealClock gives POSIX nanoseconds from a
// monotonic source, ManualClock makes tests deterministic.
//
// GSO super-packets: ReceiveWhole takes one whole (with its port's
// Offload) and forwards it so, to a port whose Link is a WholeLink, when
// nothing in it is instrumented; otherwise it refuses it untouched and
// the caller cuts it into segments for Receive. A super-packet forwarded
// whole leaves as soon as nothing is queued ahead of it.
//
// INT session tunnels (sessions with encapsulation VXLAN-GPE): the source
// puts a watched packet behind outer IP, UDP, VXLAN-GPE and INT-MD
// (wire.EncapSessionTunnel), a TCP super-packet whole when its egress
// Link is a TunnelLink that can tunnel (the kernel then copies all of it
// onto every segment); transit nodes push their hop onto tunnel
// super-packets whole; the sink routes a tunnel to its tunnel address by
// the inner destination and removes the whole encapsulation, sending a
// super-packet through a TCPLink. Config.TunnelOutput is asked to give
// the links their tunnel output when a configuration first needs it;
// Config.NoSessionTunnels makes the switch refuse tunnel addresses.
//
// Pipeline: parse (wire.Parser from the DTel markings) -> watchlist
// (priority-ordered entries with prefix, range, DSCP, TCP flag, in-port and
// VXLAN inner matches; a direct-mapped flow cache keyed by everything the
// entries look at, invalidated by a generation bump on any change) ->
// static routes (longest prefix, ECMP by flow hash) -> TTL (drop 26 at
// zero) -> egress queue (PortConfig.Queues of them, default 1; a packet
// joins queue min(DSCP >> 3, Queues-1), its class selector; each bounded
// in bytes, tail drop 71) drained at the port rate by strict priority
// (when the link is free, the highest queue's head is sent and departs
// size/rate later) -> egress processing at the departure time -> Link.
//
// INT roles are per packet: a watched packet (flow op INT) without INT
// gets INT at egress unless the egress port is a sink port (source); an
// INT packet gets this hop's metadata (transit) or, leaving through a sink
// port, this hop's metadata on the stack (LastHopEmbeddedInt), a
// report.Event with the frame incl. INT, and Strip (sink; discarded when D
// is set). The source uses the tunnel of an already GRE, VXLAN-GPE or
// Geneve encapsulated packet (G=0 cases; soft does not add GRE itself),
// else the TCP/UDP marking (DSCP, UDP port NPT 1/2 - non-UDP always NPT 2
// -, probe marker). Never fragments: headers that do not fit the egress
// MTU are not inserted (IntSessionStats.NotInitiatedNoRoom); headers that
// fit without the source's hop get M; in a Geneve tunnel Remaining Hop
// Count starts no higher than the 31-word option holds
// (wire.GeneveHopLimit). Transit sets E at Remaining Hop Count 0 and M
// when the MTU leaves no room. IP fragments are forwarded untouched, as
// on the eBPF dataplane (docs/fragments.md). Unknown domain-specific
// metadata and reserved bits are filled with all ones. Watched packets
// left without INT count by reason (IntSessionStats): no room, unsupported
// (no marking for it, no L4 header, insertion refused), sampled
// (PacketInterval). INT-MX hops report their metadata
// as KindFlow events; postcards (flow op POSTCARD) report without touching
// the packet. A watchlist PacketInterval limits INT and postcards to the
// first packet of a flow and then one per interval, remembered in the flow
// cache slot (a flow evicted by a colliding flow starts over);
// the other packets pass untouched and count as UnsampledPackets.
//
// The domain's edge: sink ports face hosts outside the INT domain. A frame
// received on one is never parsed as INT (wire.Parser.NoINT: tunnels are
// found, INT is not), whatever its DSCP, ports or probe marker say. On an
// INT endpoint with DSCP marking, such a frame whose DSCP carries the
// marking and which leaves through a port that is not a sink (it enters
// the domain) gets DTel IntL4DSCPRemark as DSCP (ECN kept, IPv4 checksum
// updated), counted in DSCPRemarked on the node and the ingress port,
// after the watchlist saw its DSCP and before any source step, whose shim
// then saves the new DSCP (INT v2.1, DSCP marking: user traffic must not
// look like INT inside the domain). The switch never sees what its host
// sends: AF_PACKET ports skip outgoing frames, which leave without it. A
// frame from any other port that carries the marking but does not parse
// as INT (version, length, type, Hop ML smaller than the bitmap) is
// forwarded as a plain packet - never watched, never given INT - and
// counted (IntMalformedForward, node and ingress port); with DTel
// MalformedDrop it is dropped and counted (IntMalformedDrop, reason 0, no
// drop report). UDP packets to a collector (any report session's
// destination address and effective port) match no watchlist entry:
// telemetry reports, this node's or another's, never get INT.
//
// TCP MSS clamp (IntSessionAttrs.ClampTCPMSS): the MSS option of a SYN or
// SYN-ACK is lowered to MTU - IP header (20, IPv6 40) - TCP header (20) -
// the INT a full-sized segment gets from the session at MaxHopCount hops
// (wire.TCPSourceOverhead: shim and header, MaxHopCount hops of metadata
// for MD, the probe marker or the NPT 2 UDP header the marking adds), with
// the TCP checksum updated incrementally (wire.ClampMSS), (a) for a flow
// whose entry has flow op INT under such a session, at the source's egress
// against its MTU, sampled packet or not; (b) for a segment leaving the
// domain through a sink port whose reverse flow - as it would come in
// through that port, with the segment's own DSCP and TCP flags - matches
// such an entry, against the MTU of the port the segment came in through,
// which the watched flow leaves by (symmetric routing): the watched
// sender outside takes its segment size from this option.
//
// Metadata: node id (DTel SwitchID), level-1 port ids (PortConfig.ID),
// level-2 ids (PortConfig.L2ID), hop latency in ns (departure minus
// arrival), queue id (the egress queue) and its occupancy in bytes at
// enqueue (the packet being sent included), timestamps in
// POSIX ns, tx utilisation in percent over 1 ms windows (unavailable on
// unlimited ports), buffer id 0 and the switch's queued bytes.
//
// Reports: the Reporter gets KindFlow (sink, MX, postcard), KindDrop
// (watched drops; tail drops also unwatched at queues reporting tail
// drops) and KindQueue (every packet through a queue with a queue report;
// the reporting pipeline applies thresholds and quotas). A reporter that
// implements ReportPipeline (report.Pipeline does) is configured from the
// sai objects and feeds Stats.Reports / ReportSessions / QueueReports.
// Stats.Queues gives each port's queues: their bytes and the wait at the
// port rate for them and the queues above.
//
// The pipeline allocates nothing per packet (TestZeroAllocs). Measured
// figures and their history: docs/performance.md.
package soft

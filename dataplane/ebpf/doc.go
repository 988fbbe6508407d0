// Package ebpf is intd's tc/eBPF INT dataplane: the Linux kernel forwards,
// and BPF programs on tc clsact hooks do the INT work (INT v2.1 over
// TCP/UDP and in VXLAN-GPE, Geneve and GRE tunnels, on IPv4 and IPv6). It
// implements sai.Backend, like dataplane/soft. It needs Linux 6.2 or later
// (the kfunc bpf_cast_to_kern_ctx) with kernel BTF, and CAP_BPF,
// CAP_PERFMON and CAP_NET_ADMIN.
//
// # Use
//
//	d, err := ebpf.New(ebpf.Config{Interfaces: []ebpf.Interface{{Name: "eth0"}, {Name: "eth1"}},
//		Reporter: pipeline}) // a *report.Pipeline, configured from the sai objects
//	defer d.Close()           // detaches everything
//	o := dtel.New(d)          // or drive d.Create/Set/Remove directly
//
// New loads bpf/intd.c (compiled by bpf2go into intd_bpfel.o, committed:
// building needs no clang; `make generate` regenerates it byte for byte
// with the same clang), adds a clsact qdisc where none exists and
// direct-action filters on ingress and egress of every interface
// (AddInterface/RemoveInterface at run time; Close and RemoveInterface
// delete the filters, and the qdisc when intd created it) and reads the
// report ring buffer. The BTF tracepoints skb:kfree_skb (drop reports)
// and net:net_dev_start_xmit (queueing delay) run for every packet of the
// host, every namespace: each configuration change attaches them only
// while something uses them (tracersFor), before the configuration word
// that uses them, and detaches them after the one that stops; their first
// test is the device's namespace against a constant set at load.
// Config.NoAttach only fills the maps, for BPF_PROG_TEST_RUN. Close
// detaches, hands the events still in the ring buffer to the reporter and
// frees everything; nothing is pinned.
//
// # Crashes and restarts
//
// A process killed before Close (kill -9, a crash) leaves its tc filters
// attached, their programs running with its last configuration, and its
// GSO detour pair (below). New cleans up after it: every attached
// interface is held for the life of the process (an abstract unix socket
// intd/if/<ifindex> in the namespace, which the kernel frees when the
// process exits, however it exits; dataplane/internal/hostlock), so is
// every detour pair (intd/gso/<N>), and New first deletes intd's filters
// (handle 0x1d0, priority 0xc1d, programs intd_*) from every interface
// no running intd holds - with the clsact qdisc when it held nothing else
// - and every intd-gsoN pair no running intd holds, and the session
// tunnel device intd-gpe (docs/tunnels.md) unless a running intd holds
// it (intd/gpe), logging a warning for each ("left by an intd that did
// not stop cleanly"). So kill -9 and a restart leave exactly what one
// instance has. An interface another running intd is attached to is
// refused, naming its process. By hand:
// `tc filter del dev <if> ingress pref 3101` (and egress),
// `ip link del intd-gso0` and `ip link del intd-gpe`.
//
// Configuration never reloads programs: sai objects are compiled into
// maps (cfg, ifaces, sessions, watchlist, qr_cfg), after every Create, Set
// and Remove, or once per orchestrator Apply (sai.Deferrer: a watchlist of
// 1000 entries applies in 56 ms, against 3.2 s compiled after each entry;
// BenchmarkApplyWatchlist). The watchlist (up to
// 1024 entries) is double-buffered: a change writes the inactive half and
// then flips the active half and a generation number in cfg, so a packet
// sees the old or the new list, never a mix. Entries are sorted by
// priority (then OID) and classified by sets (watchlist.go, wl_match in
// bpf/intd.c): for every field, the bitmap of the entries that accept the
// packet's value; the first bit of their intersection is the matching
// entry. Address prefixes are looked up in an LPM trie whose nodes are the
// entries' distinct prefixes (IPv4 as ::ffff:a.b.c.d/96+n) and ::/0, each
// with the set of entries whose prefix contains it, which for the longest
// match is exactly the entries accepting the address; ports map to the
// elementary intervals between the entries' range bounds (a 64 Ki __u16
// array per field), protocol, DSCP, TCP flags and family index arrays of
// sets, and ingress ports a hash (entries without a port otherwise). The
// sets, intervals and entries are written through mmap (BPF_F_MMAPABLE
// arrays), the trie by difference. A miss costs about ten lookups and
// sixteen-word ANDs whatever the list's length; the verifier sees wl_match
// once (a global function). The verdict is cached per flow (5-tuple,
// in-port, DSCP and TCP flags when an entry matches them) in an LRU hash
// tagged with the generation; the cached value holds what the egress needs
// of the entry (flow op, session, actions, stats index), so a hit costs one
// lookup. TestWatchlistDifferential checks the classification against the
// soft dataplane's on random overlapping watchlists of 1024 entries.
//
// # Pipeline
//
// intd_ingress records the packet's arrival time in a per-CPU slot keyed
// by a fingerprint of its IP header (addresses, IPv4 id and length or
// IPv6 flow label and payload length, protocol):
// forwarding runs ingress to egress synchronously on one CPU, so the
// egress program finds it for the same packet. intd_egress then, per
// packet: never parses a packet from outside the domain as INT (below);
// forwards marked packets that do not parse as INT (version, length, type,
// Hop ML) as they are, or drops them (below); on a sink port reports and
// strips INT
// (restoring DSCP or the UDP port, NPT 2 removes the added UDP header) and
// discards D-bit packets; else on an INT packet pushes this hop's metadata
// (transit), or sets E at Remaining Hop Count 0 or M when the egress MTU
// has no room; on a watched packet with flow op INT inserts shim + INT-MD
// (with this hop) or INT-MX (source: DSCP or UDP-port marking, NPT 1 for
// UDP, NPT 2 otherwise; no INT for non-TCP/UDP without NPT 2; never beyond
// the MTU: headers that do not fit are not inserted, a hop that does not
// fit gets M); postcards for flow op POSTCARD (a GSO super-packet, one
// packet to the kernel until a device segments it, gets one postcard,
// the packet itself untouched); queue reports. Watched packets left
// without INT count by reason (IntSessionStats): no room (headers beyond
// the egress MTU, or below the GSO detour's minimum), unsupported (no
// marking for it, no L4 header, NPT 2 behind IPv6 extension headers, no
// detour, room the kernel would not make, Geneve option lengths), sampled
// (the entry's packet-interval; counted at classification). Headers are
// parsed with direct packet access. Room is made with
// bpf_skb_adjust_room(BPF_ADJ_ROOM_NET) after the fixed IPv4 or IPv6
// header and the L4 header is moved down with direct packet access; INT,
// lengths (IPv6: payload length), counts, the DSCP (IPv6: in the traffic
// class) and the IPv4 checksum are written directly, and so is the L4
// checksum
// (l4_fix, bit for bit what two bpf_l4_csum_replace calls would write):
// the summed change of the covered bytes and the pseudo-header length for
// CHECKSUM_NONE/UNNECESSARY, the pseudo-header length only for
// CHECKSUM_PARTIAL (ip_summed read with bpf_cast_to_kern_ctx and CO-RE);
// zero UDP checksums stay zero, a zero result becomes 0xffff; only
// CHECKSUM_COMPLETE skbs keep the two helper calls (they also fix
// skb->csum). Interfaces are an array map indexed by ifindex (below 65536), so
// their lookup is inlined; a per-CPU copy of the last flow's verdict sits
// in front of the flow cache; the queue occupancy is read only when a
// session, queue report or event uses it.
//
// Source, transit and sink of the common layouts have programs of their
// own, intd_source, intd_transit and intd_sink: IPv4 without options, a
// TCP header of 20 or 32 bytes or a UDP header, no GSO, DSCP marking; for
// the source a flow whose watchlist verdict is cached (this CPU's last
// flow or the flow cache) and is either no INT or INT-MD without sampling
// by packet interval, a hop of exactly the instructions' words and room
// in the MTU, not a SYN (clamped); for transit INT-MD with such a hop to a
// port without queue reports, for the sink no D bit, no E bit due and no
// TCP flag that reports or is clamped (FIN, SYN, RST). intd_egress sends
// unmarked TCP and UDP over IPv4 to a port that is not a sink to
// intd_source, marked IPv4 from another node to the other two (a tail
// call through the program array steps), before its own set-up and parse;
// the step checks what parse, classify and the role would, with every
// offset a constant, and does the work, or hands the packet back unchanged
// (a per-CPU flag, then a tail call) to the general path. Both paths make
// the same bytes, counts and reports (TestSourceFastPath,
// TestTransitFastPath, TestSinkFastPath); a step costs about 0.8 of the
// general path's time (docs/performance.md). The array loses its entries
// when intd's last file of it closes, so programs left attached by a
// killed intd run the general path alone.
//
// GSO/TSO: offloads need not be turned off. INT over TCP/UDP goes after
// the L4 header, which GSO cannot replicate per segment (it copies headers
// up to the end of the TCP header, and any room made in a super-packet
// with bpf_skb_adjust_room marks it SKB_GSO_DODGY and gets it segmented
// with INT in the first segment only; NPT 2 as a UDP tunnel fails because
// there is no inner IP header to segment from). So a watched GSO
// super-packet takes a software-segmentation detour: a veth pair in
// New's namespace (intd-gso0/intd-gso1, the first intd-gsoN pair no
// running intd holds) with TSO/GSO and checksum offloads off on intd-gso0
// (set with ETHTOOL_SFEATURES) and GRO off on intd-gso1. Only a source
// step takes it, so the pair exists while the node is an INT endpoint: the
// apply that turns int-endpoint on adds it (checkAttrs, so that a failure
// refuses the apply at /int/node/config/int-endpoint and changes nothing),
// before the configuration word that names it; the apply that turns it
// off removes it after the word that stops naming it; Close removes it.
// Each is logged as a host setting. A node started and not configured as
// an endpoint changes nothing on the host. Without the pair (and with
// Config.NoGSODetour, which never adds it) detour() leaves such packets
// as they are, without INT, counted as unsupported (IntSessionStats).
// intd_egress lowers a TCP super-packet's GSO size so that each segment has
// room for the fixed headers plus max_hops hops of metadata within the
// egress MTU (the conservative path MTU of the spec's MTU section; made
// with bpf_skb_adjust_room growing without and shrinking with
// BPF_F_ADJ_ROOM_FIXED_GSO, which leaves the bytes as they were), writes
// the egress step's state (ingress time and port ids, queue occupancy,
// session, original mark) into a detour record, puts (record tag << 16 |
// egress ifindex) in skb->mark and bpf_redirects it to intd-gso0. The
// kernel segments it there in software (full checksums); intd_gso on tc
// ingress of intd-gso1 restores the mark, runs the same source step on
// each segment with the record's state and bpf_redirects it to the egress
// device, where intd_egress lets it pass (its ingress ifindex is
// intd-gso1's). Segments leave with full checksums that INT insertion
// updated, so they are correct on any wire. A non-GSO packet of the full
// MTU has no room for INT and leaves without it (not initiated), as the
// spec requires; the spec's remedy is an MTU differential (host links'
// MTU lower than the fabric's by the INT size). The sink's egress link
// must have the MTU of the INT packets: the kernel checks it before tc
// egress strips INT. UDP GSO (UDP_SEGMENT) super-packets take the detour
// with their GSO size unchanged (it delimits datagrams). So does a watched
// packet whose L4 checksum is still to be completed (CHECKSUM_PARTIAL, as
// a local or container stack hands packets to a device with checksum
// offload; ip_summed read with bpf_cast_to_kern_ctx): the device or the
// kernel's fallback would sum from skb->csum_start, which INT leaves
// behind when it moves the L4 header, and no helper moves csum_start; the
// detour's sending side completes the checksum in software first.
// TestChecksumCompletedAtEgress checks this with checksum offloads off on
// the source's egress link (UDP and TCP, IPv4 and IPv6, intact at h2, no
// checksum errors there).
//
// Transit and sink see only segments: GRO never merges INT segments,
// because the INT bytes are TCP payload that the sequence numbers do not
// count (tcp_gro_receive flushes when seq + payload length differs from
// the next segment's seq). TestGSO checks this with GRO on the routers'
// veths (and a control stream that GRO does merge).
//
// # The domain's edge
//
// Sink ports face hosts outside the INT domain, and so does the node's own
// stack. A packet that came in through a sink port (its ingress interface's
// sink flag, from intd_ingress's per-CPU slot or the ifaces map) or that
// the host sent (tc egress sees it with ingress ifindex 0) is never parsed
// as INT: tunnels are found, INT is not, whatever its DSCP, UDP port or
// probe marker (no transit, no sink, no malformed drop). On an INT
// endpoint with DSCP marking, such a packet whose DSCP carries the marking
// and that leaves through a port that is not a sink (it enters the domain)
// gets cfg.remark (DTel IntL4DSCPRemark) as DSCP - ECN kept, IPv4 header
// checksum updated, IPv6 traffic class - counted in DSCPRemarked on the
// node and the ingress interface (the host's packets count on the node
// only), after the watchlist saw the DSCP it came with and before the
// source step, whose shim then saves the new DSCP (INT v2.1, DSCP
// marking). A packet from inside the domain that carries the marking but
// does not parse as INT is forwarded as it is - never watched, never given
// INT - and counted (IntMalformedForward), or with DTel MalformedDrop
// dropped and counted once (IntMalformedDrop and reason 0, on the ingress
// interface): every packet intd_egress or intd_gso drops is remembered per
// CPU (the kernel skb) and intd_kfree_skb, which runs right after, leaves
// it alone (it used to count such a drop again as ACL_DENY and report it).
// The kfree_skb tracepoint also takes no packet from a sink port for INT.
// UDP packets to a collector (any report session's destination address
// and effective port, in the telemetry hash map, up to 256) match no
// watchlist entry: telemetry reports, this node's or another's, never get
// INT.
//
// TCP MSS clamp (IntSessionAttrs.ClampTCPMSS; session.clamp is the INT a
// full-sized segment gets at the session's maximum hop count, computed by
// wire.TCPSourceOverhead): syn_clamp lowers the MSS option of a SYN or
// SYN-ACK to MTU - IP header (20, IPv6 40) - TCP header (20) - clamp and
// updates the TCP checksum with bpf_l4_csum_replace (byte-swapped for an
// option at an odd offset; nothing to do for CHECKSUM_PARTIAL), (a) for a
// flow whose entry has flow op INT (wl_cache.entry_op: before sampling,
// so a sampled-out SYN is clamped too) at the source's egress, against its
// MTU; (b) for a segment leaving the domain through a sink port (after the
// sink strips it, if it carried INT) whose reverse flow - as it would come
// in through that port, with the segment's DSCP and TCP flags - matches
// such an entry in wl_match, against the MTU of the interface the segment
// came in through, which the watched flow leaves by (symmetric routing):
// the watched sender outside takes its segment size from that option.
// syn_clamp and remark are global functions (verified once, called for
// the few packets that need them); the option walk keeps its offset in
// memory, so the verifier checks each of its 40 rounds once. TestBehaviourEdge
// runs all of this through both backends (EF, AF41, CS6 and colliding
// DSCPs from the edge and the host, marked garbage on fabric and edge
// ports with either action, INT packets from the edge to a sink port,
// reports under a watch-all entry, SYN and SYN-ACK clamps in both
// directions), byte for byte, with the counters and in = out + dropped;
// TestEdgeEndToEnd does it in namespaces with kernel forwarding (h1 - r1 -
// r2 - r3 - h2: EF, AF41, CS6 and colliding UDP from h1, marked datagrams
// the routers send themselves, marked garbage from a fabric port dropped
// at r2 and counted once with one drop report, a report to the collector
// under a watch-all entry, a TCP transfer with TSO off at h1 whose SYN and
// SYN-ACK carry the clamped MSS and whose every data segment gets INT).
// TestVerifierBudget logs the instructions the verifier processes
// (intd_egress about 421k of the 1M limit, 405k before).
//
// IPv6 is handled like IPv4 (source with DSCP marking in the traffic
// class, UDP-port marking NPT 1 and NPT 2, transit, sink, postcards, drop
// reports; watchlist prefixes of either family, an entry with IPv4
// prefixes never matches IPv6 packets and vice versa, one without
// prefixes matches both; flow keys hold 16-byte addresses, IPv4 as
// ::ffff:a.b.c.d). Up to 48 bytes of hop-by-hop, routing and destination
// options headers and an atomic fragment header (offset 0, M clear) may
// precede the L4 header: INT goes after the L4 header behind them, as in
// the soft dataplane (TestBehaviourIPv6 runs the shared cases with each).
// Fragments, mobility, HIP and shim6 headers, longer chains, and NPT 2
// behind extension headers (the protocol it saves is in the last one's
// next-header field) leave packets untouched, as do VLAN-tagged frames
// (a tag in the frame bytes; tc usually sees tags out of band). INT over
// TCP/UDP may be announced by a 64-bit probe marker after the L4 header
// instead of DSCP or a UDP port (DTel ProbeMarker; TestProbeMarker).
//
// Tunnels (INT v2.1 §5.7): with the DTel code points set, INT rides in
// VXLAN-GPE (UDP 4790, P flag, next protocol 0x82 with the shim keeping
// the original one), Geneve (UDP 6081, an option of class 0x0103 and type
// MD or MX among the first four; the header's option length grows with
// it) and GRE over IPv4 (protocol type GREProtocolType, the shim keeping
// the original; no GRE checksum or routing), over IPv4 or IPv6 outer
// headers. The source inserts it into a packet already in such a tunnel
// (no DSCP or port marking; matched on the outer headers), transit pushes
// metadata (M when the Geneve option or header length would overflow),
// the sink restores the tunnel header; outer lengths and the outer UDP
// checksum (when not zero) follow. Tunnelled GSO super-packets take the
// GSO detour: the kernel segments them with their outer headers, after
// intd_egress lowered the inner GSO size (inner TCP over IPv4 or IPv6,
// behind an Ethernet header or not) so that each segment has room for INT
// and max_hops hops within the MTU, as for INT over TCP; a packet sent
// whole at the full tunnel MTU has no room and leaves without INT (the
// MTU differential the spec asks for avoids that). TestTunnelRoles runs
// each tunnel through source, two transits and a sink of both backends,
// byte for byte; TestEndToEndVXLANGPE runs UDP and TCP through a kernel
// VXLAN-GPE tunnel (ip link type vxlan gpe) across three routers, at a
// lowered and at the full tunnel MTU (this kernel has no Geneve or GRE
// devices to test with).
//
// Metadata: node id (DTel SwitchID); level-1 and level-2 interface ids
// (Interface.ID / L2ID, default the ifindex; LOGICAL_INTERFACE); hop
// latency in ns = tc egress minus tc ingress time of the same packet plus
// the queueing ahead of it in the egress qdisc (below); ingress and egress
// timestamps in POSIX ns: CLOCK_TAI (bpf_ktime_get_tai_ns, which follows
// the system clock's NTP/PTP corrections) minus the kernel's TAI offset,
// read at load; the egress timestamp is the estimated departure from the
// qdisc, as the hop latency.
//
// Queue: the id is the tx queue the kernel will pick for the packet (the
// pick runs after tc egress: netdev_pick_tx without a socket, i.e. the
// recorded rx queue folded onto the tx queues, else the packet's hash
// scaled to them; XPS maps and drivers with their own queue selection are
// not followed), so on mq the id names the mq class (1:id+1) whose child
// the packet joins; with a classful root (htb, tbf with a child) the id is
// 0 and the occupancy is the root's whole backlog, whatever class the
// packet goes to. Occupancy, in bytes at enqueue: the backlog of that tx
// queue's qdisc (the mq child, or the root qdisc of a single-queue
// device) plus the bytes the driver has in flight by BQL, read with
// bpf_cast_to_kern_ctx, bpf_rdonly_cast and CO-RE (0 with noqueue).
// Qdiscs with per-CPU counters (pfifo_fast and other lockless ones) cannot
// be summed by a program without the kernel's per-CPU offsets (absent
// without kallsyms): their queue metadata is unavailable (all ones).
// Queueing delay: one packet per tx queue at a time is followed from tc
// egress (its kernel skb address and the bytes ahead of it) to the
// net_dev_start_xmit tracepoint (intd_xmit, tp_btf), where it leaves the
// qdisc for the driver; its sojourn and the bytes ahead give the queue's
// drain time per byte, and a packet joining behind occ bytes is given
// occ x that (0 when the queue is empty). Packets are followed only while
// the configuration reports or inserts a time (postcards, queue reports,
// transit, sinks, sources with a session of hop latency, egress timestamp
// or INT-MX); otherwise the queue state's delay keeps the last estimate
// measured. A followed packet the qdisc
// drops is released by the drop tracer; one that never shows (segmented,
// or dropped unseen) after 1024 packets and a second. Tx utilisation, in
// tenths of a percent: the bits the device sent over the last 100 ms
// (netlink link statistics, polled) against its capacity, the ethtool
// link speed or a tbf root qdisc's rate when lower (an htb's rates are
// not followed); unavailable (all ones) until the second poll or without
// a speed. Buffer occupancy: buffer id 0, the bytes queued on the whole
// egress device (every tx queue's qdisc, a shared root counted once, plus
// BQL; up to 16 tx queues), unavailable where a qdisc keeps per-CPU
// counters.
//
// Queue state (Stats.Queues, interfaces/interface/state/queues in YANG):
// per queue id as above, the qdisc's backlog as netlink dumps it (BQL's
// bytes in flight are not in it) and the delay the last measured drain
// time per byte gives it.
//
// Reports: the per-flow smart filter runs in BPF (LRU map flow -> last
// report time + digest of ports, the node ids of the INT stack and
// latency buckets of width 2^floor(log2(HopLatencyChange)), so any change
// the shared filter acts on crosses a bucket); TCP SYN/FIN/RST and
// report-all entries bypass it. Report-worthy events cross a 1 MiB ring
// buffer with up to 512 bytes of the frame (the reader is woken at most
// once a millisecond per CPU or when a quarter of the ring is used, and
// polls every 10 ms: a wakeup per event cost the sink about 7 µs per
// packet) and become report.Events for
// the shared report pipeline (sink events get this hop pushed onto their
// stack in userspace with wire.PushHop, as soft reports them). Queue
// reports apply thresholds and the breach quota in BPF and send the
// breach-ending packet too; a queue report watches one tx queue of its
// interface (queue-id, below 16; ids from 15 up share the state of 15).
// Drop reports: the kfree_skb tracepoint, as tp_btf (it sees every
// namespace's drops: it first compares skb->dev's namespace with intd's,
// two loads through BTF-typed pointers, so drops elsewhere cost a few
// instructions; only drops in the namespace intd started in, on one of
// its ports, count) reports a dropped packet when its
// 5-tuple is in the map of watched flows with drop reporting (written at
// egress when the flow cache misses) or when it carries INT (transit and
// sink nodes have no entry of their own for it, as in soft), and a tail
// drop at a queue with tail-drop reporting. The kernel's skb_drop_reason,
// read by name from kernel BTF, maps to SD-Fabric codes (qdisc drops -> 71
// TRAFFIC_MANAGER, no route IP_INNOROUTES/IP_OUTNOROUTES -> 29 ROUTING
// MISS, netfilter/tc -> 80, ...; ip_forward drops an expired TTL as
// IP_INHDR, reported as 26 IP_TTL_ZERO when the TTL is 0 or 1).
//
// Stats come from per-CPU array maps (per interface slot, per drop
// reason, per watchlist entry, per session) summed at read time.
//
// # Tests
//
// Tests need root (they load BPF programs) and skip otherwise.
// TestBehaviour runs the shared INT cases (source over TCP/UDP/UDP
// without checksum, MX, MTU limits and M bit, unwatched traffic, transit
// push, E bit, M bit, sink strip to the original bytes, UDP-port restore,
// D-bit discard, malformed forward and drop) through intd_egress with
// BPF_PROG_TEST_RUN and through a one-switch soft dataplane, comparing
// both with packets built by dataplane/wire; TestSinkReport checks the
// reported frame equals soft's; TestWatchlistPriority checks priorities
// and live updates; TestEndToEnd builds h1-r1-r2-r3-h2 plus a collector
// namespace with kernel forwarding, configures the routers through the
// dtel orchestrator from YANG JSON, and checks ping, UDP and a 1 MiB TCP
// echo arrive intact and the collector receives reports with the path
// [3 2 1]. TestBehaviourMore compares NPT 2 source and sink, INT-MX
// transit and sink and postcards (packets and reports) with soft;
// TestQueueReportQuota checks the latency threshold, breach quota and
// breach end in BPF; TestQueueMetadata shapes r1's egress below the
// offered load (tbf on one tx queue; mq over four tx queues, each a tbf
// with fq_codel under it when the kernel has it) and checks the INT-MD
// hop of r1 at the sink, r1's postcards and queue reports against what
// `tc -s qdisc` backlog / rate predicts (afpacket's
// TestQueueMetadataSoft is the same scenario on the software switch); TestDropReports drops packets in the lab (route
// removed at the source and at a transit node, TTL expiring) and checks
// the reasons 29 and 26. TestGSO sends 8 MiB h1 -> h2 with TSO/GSO on the
// hosts, captures the r1-r2 and r2-r3 links at the receiving routers and
// checks every TCP segment h1 -> h2 carries INT-MD with 1 and 2 hops within
// the MTU (with host MTU 1400 and GRO on at the routers; and with 1500
// everywhere, where only non-GSO packets near the MTU may lack INT,
// counted as not initiated, or a transit hop, with the M bit), that h2 gets
// the exact stream, and runs iperf3 through it. tests/ebpf_e2e_test.go
// runs three `intd run --dataplane ebpf` processes configured only over
// gNMI. The package's tests take about 15 s.
//
// Measured figures and their history: docs/performance.md.
package ebpf

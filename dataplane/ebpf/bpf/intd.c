// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * intd tc/eBPF dataplane: INT v2.1 over TCP/UDP (DSCP or UDP port marking)
 * on kernel-forwarded IPv4 and IPv6 traffic.
 *
 *   intd_ingress  tc ingress: remembers the ingress time of the packet in a
 *                 per-CPU slot (forwarding runs ingress -> egress on one CPU
 *                 without deferral), keyed by a fingerprint of the IP header.
 *   intd_egress   tc egress: packets from outside the INT domain (through a
 *                 sink port, or sent by the host) are never INT; malformed
 *                 INT forwarded or dropped; sink (report, strip, D-bit
 *                 discard), transit (push metadata, E/M bits), watchlist
 *                 lookup, DSCP re-mark at the edge, TCP MSS clamp, source
 *                 (insert shim + INT-MD/MX), postcards and queue reports;
 *                 per-flow report filter; events to a ring buffer.
 *   intd_gso      tc ingress of the GSO detour veth's peer: the source step
 *                 on each software segment of a watched GSO super-packet,
 *                 then redirect to its egress device.
 *   intd_pass     returns TC_ACT_OK: the benchmark baseline.
 *   intd_kfree_skb raw tracepoint skb:kfree_skb: drop reports for watched
 *                 flows.
 *
 * Configuration lives in maps written by dataplane/ebpf; nothing is compiled
 * in, so configuration changes never reload programs.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "intd_spec.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58

/* The enums below are shared with Go: bpf2go -type turns each into Go
 * constants (see dataplane/ebpf/gen.go and unused_abi). */

/* Table sizes */
enum limit {
	MAX_WL = 1024,       /* watchlist entries (one half of the double buffer) */
	MAX_SESS = 64,       /* INT sessions */
	MAX_SLOTS = 64,      /* interface counter slots; slot 0 is "other" */
	MAX_QR = 16,         /* queue reports */
	MAX_IFINDEX = 65536, /* the ifaces map */
	MAX_TXQ = 16,        /* tx queues per interface with state of their own; higher ones share the last */
	MAX_FLOW_SETS = 16384, /* sets of the flow report filter's table (flows) */
};
#define MAX_CAP 512    /* bytes of a frame copied into an event */
#define MAX_MOVE 128   /* header bytes moved when room is made after L4 */
#define MAX_INT 1024   /* largest INT shim length handled, bytes */
#define MAX_EXT 48     /* IPv6 extension header bytes handled (moves stay within MAX_MOVE) */

/* cfg.flags */
enum cfg_flag {
	F_DTEL = 1 << 0,
	F_ENDPOINT = 1 << 1,
	F_TRANSIT = 1 << 2,
	F_POSTCARD = 1 << 3,
	F_DROP = 1 << 4,
	F_QUEUE = 1 << 5,
	F_WL_DSCP = 1 << 6,
	F_WL_FLAGS = 1 << 7,
	F_PORT_CHANGE = 1 << 8,
	F_PATH_CHANGE = 1 << 9,
	F_QUEUE_CHANGE = 1 << 10,
	F_WL_IFX = 1 << 11,    /* some watchlist entry matches the ingress port */
	F_REMARK = 1 << 12,    /* endpoint with DSCP marking: re-mark colliding DSCPs entering the domain */
	F_TELEMETRY = 1 << 13, /* report sessions: traffic to their collectors is never watched */
	F_WL_INNER = 1 << 14,  /* some watchlist entry matches tunnel and inner headers */
	F_WL_TID = 1 << 15,    /* some watchlist entry matches a tunnel id */
	F_WL_ICMP = 1 << 16,   /* some watchlist entry matches ICMP type or code */
	F_WL_IFAM = 1 << 19,   /* some watchlist entry matches the inner family */
	F_WL_IPROTO = 1 << 20, /* some watchlist entry matches the inner protocol */
	F_ADAPTIVE = 1 << 21,  /* flow filter: learned latency band, not lat_shift buckets */
	F_QTIME = 1 << 22,     /* something uses the queueing delay: intd_xmit is attached, packets are followed */
};

/* cfg.wl_use: classification skips the sets of a field no entry matches
 * (each would hold every entry). */
enum wl_use {
	WLU_SRC = 1 << 0, /* outer source prefix */
	WLU_DST = 1 << 1,
	WLU_SPORT = 1 << 2,
	WLU_DPORT = 1 << 3,
	WLU_ISRC = 1 << 4, /* inner source prefix */
	WLU_IDST = 1 << 5,
	WLU_ISPORT = 1 << 6,
	WLU_IDPORT = 1 << 7,
	WLU_PROTO = 1 << 8, /* outer protocol */
};

/* ENC_* (pkt.encap, pkt.tun), TUN_* (cfg.tunnels) and the tunnels' code
 * points are in intd_spec.h */

/* wl_entry.act */
enum wl_act {
	ACT_DROP_REPORT = 1,
	ACT_TAIL_DROP = 2,
	ACT_REPORT_ALL = 4,
	ACT_SESSION = 8, /* the entry names an INT session: a postcard reports what it asks */
};

/* session.mode */
enum sess_mode {
	MODE_MD,
	MODE_MX,
};

/* flow ops (wl_entry.flow_op, session.op) */
enum flow_op {
	OP_NOP,
	OP_INT,
	OP_POSTCARD,
};

/* event flags (the kinds, EV_*, are in intd_spec.h) */
enum event_flag {
	EVF_REPORT_ALL = 1,
	EVF_UNWATCHED = 2,
	EVF_TAIL_DROP = 4,
	EVF_TAIL_DROP_REPORT = 8,
	EVF_SINK = 16,   /* frame as received at the sink: userspace pushes Hop */
	EVF_BREACH = 32, /* queue report inside a breach */
	EVF_INST = 64,   /* event inst is the requested instruction bitmap */
	EVF_LAT_ANOMALY = 128, /* F_ADAPTIVE: a hop latency left the flow's learned band */
};

/* counters */
enum counter {
	C_IN,
	C_OUT,
	C_DROP,
	C_INSERTED,
	C_TRANSITED,
	C_STRIPPED,
	C_EBIT,
	C_MBIT,
	C_MALFORMED,
	C_POSTCARD,
	C_EV_SENT,
	C_EV_SUPPRESSED,
	C_EV_LOST,
	C_GSO,
	C_FLOW_GEN,
	C_DROP_GEN,
	C_MALFORMED_FWD,
	C_REMARKED,
	C_DISCARDED,   /* INT packets discarded at the sink for their D bit */
	C_DETOUR_LOST, /* GSO segments whose detour record was reused: left without INT */
	C_FAST_TRANSIT, /* of C_TRANSITED, those intd_transit did (tests tell the paths apart by it) */
	C_FAST_SINK,    /* of C_STRIPPED, those intd_sink did */
	C_FAST_SOURCE,  /* of C_INSERTED, those intd_source did */
	C_FAST_PASS,    /* of C_OUT, those intd_source passed without INT (not watched, sampled out) */
	NCTR = 32,
};

struct cfg {
	__u32 flags;
	__u32 node_id;
	__u64 time_offset;   /* clock_ns() + time_offset = POSIX ns */
	__u64 flow_interval; /* ns between reports of an unchanged flow */
	__u32 wl_gen;        /* bumps on every watchlist change */
	__u16 wl_count;      /* entries in the active half */
	__u16 udp_port;      /* INT UDP destination port, 0: off */
	__u8 dscp_val;
	__u8 dscp_mask;      /* 0: DSCP marking off */
	__u8 npt;            /* 1 or 2 for UDP port marking */
	__u8 lat_shift;      /* latency bucket = latency >> lat_shift */
	__u8 wl_base;        /* 0 or 1: active half of the watchlist */
	__u8 tunnels;        /* TUN_*: INT in these tunnels */
	__u8 remark;         /* DSCP for packets entering the domain with the marking's (F_REMARK) */
	__u8 malformed_drop; /* 1: drop marked packets that are not INT; 0: forward them */
	__u32 netns;         /* inode of intd's network namespace */
	__u32 gso_dev;       /* ifindex of the detour veth's sending side, 0: none */
	__u32 gso_peer;      /* ifindex of its receiving side (intd_gso) */
	__u16 gre_proto;     /* GRE protocol type announcing INT (TUN_GRE) */
	__u16 wl_use;        /* WLU_*: the fields some watchlist entry matches */
	__u64 probe;         /* probe marker as the packet's bytes read, 0: off */
	__u32 lat_factor;    /* F_ADAPTIVE: deviations a latency may move */
	__u32 lat_floor;     /* F_ADAPTIVE: ns a latency may always move */
	__u32 tun_addr;      /* the node's end of session tunnels (IPv4, network order), 0: none */
	__u32 tun_dev;       /* ifindex of intd's VXLAN-GPE device (tun_handoff), 0: none */
	__u32 tun_addr6[4];  /* and of IPv6 ones, all 0: none */
};

struct iface {
	__u32 l2_id;
	__u16 l1_id;
	__u16 mtu;
	__u8 sink;
	__u8 slot;
	__u8 qr; /* 1: some queue of the interface has a queue report (qr_of) */
	__u8 on; /* 1: one of intd's interfaces */
	__u8 veth; /* 1: a veth, whose peer gets GSO packets whole and parses their headers anew */
	__u8 pad[3];
};

struct session {
	__u16 inst;
	__u16 domain;
	__u16 ds_inst;
	__u16 ds_flags;
	__u8 mode; /* enum sess_mode */
	__u8 max_hops;
	__u8 discard;
	__u8 hop_ml; /* words: baseline + domain specific */
	__u16 clamp; /* bytes of INT a full-sized TCP segment gets: SYN MSS leaves room; 0 off */
	__u8 tunnel; /* 1: INT-MD in a VXLAN-GPE tunnel the source adds (tun_source) */
	__u8 pad;
	__u32 tun_dst; /* its outer destination (IPv4, network order) */
	__u32 tun_dst6[4]; /* and IPv6 packets' */
};

struct wl_entry {
	__u32 src[4], srcmask[4], dst[4], dstmask[4];
	__u32 in_ifindex;
	__u16 sport_lo, sport_hi, dport_lo, dport_hi;
	__u8 family; /* 0 any, 4, 6 (addresses: IPv4 as ::ffff:a.b.c.d) */
	__u8 proto;
	__u8 dscp_val, dscp_mask;
	__u8 flags_val, flags_mask;
	__u8 flow_op;
	__u8 sample_pct;
	__u8 act;
	__u8 session;
	__u16 stats;
	__u16 pad;
	__u32 interval_us; /* packet-interval: act on one packet per flow per interval, 0: every */
};

/* Watchlist classification (wl_match): per field, the set of entries that
 * accept the packet's value, as a bitmap over the entries in priority
 * order; the first bit of their intersection is the matching entry.
 * Userspace computes the sets when the watchlist changes: address
 * prefixes through an LPM trie whose nodes are the entries' distinct
 * prefixes (a node's set holds every entry whose prefix contains it, so
 * the longest match's set is exactly the entries accepting the address),
 * ports through elementary intervals of the entries' range bounds, and
 * protocol, DSCP, TCP flags, family and ingress port by value. */
#define WL_WORDS (MAX_WL / 64)
struct wl_bm {
	__u64 w[WL_WORDS];
};

/* wl_small, per half: protocol, DSCP, TCP flags, family (IPv4, IPv6),
 * the set of entries without an ingress port, then the tunnel's: kind
 * (0 none, TUNK_*), inner family, inner protocol, the entries without a
 * tunnel id, and ICMP type and code. Address and port fields: per half,
 * outer source and destination, then (WL_INNER + ...) inner ones. */
enum wl_set {
	WLS_PROTO = 0,
	WLS_DSCP = 256,
	WLS_FLAGS = 320,
	WLS_FAM = 576,
	WLS_IFX_ANY = 578,
	WLS_TUN = 579,
	WLS_IFAM = 587,
	WLS_IPROTO = 589,
	WLS_TID_ANY = 845,
	WLS_ICMP_TYPE = 846,
	WLS_ICMP_CODE = 1102,
	WLS_N = 1358,
	WL_INNER = 4,
	WL_PFX = MAX_WL + 1,      /* trie nodes per half and field */
	WL_IVAL = 2 * MAX_WL + 2, /* port intervals per half and field */
	WL_PORTS = 65536,
};

/* The trie key: tag = half * 2 + field (0 source, 1 destination; inner
 * ones WL_INNER + half * 2 + field), then the
 * 16-byte address (IPv4 as ::ffff:a.b.c.d); prefixlen counts the tag's 8
 * bits. The value indexes wl_pfx. */
struct wl_lpm_key {
	__u32 prefixlen;
	__u8 tag;
	__u8 addr[16];
	__u8 pad[3];
};

/* Addresses are 16 bytes, IPv4 ones as ::ffff:a.b.c.d. */
struct flow_key {
	__u32 src[4], dst[4];
	__u16 sport, dport;
	__u8 proto, dscp, tcp_flags, pad;
	__u32 in_ifindex;
	__u16 icmp;   /* ICMP type << 8 | code, when the watchlist matches them */
	__u16 pad2;
	__u64 inner;  /* digest of the tunnel and inner flow (inner_parse), 0: none */
};

/* The filter builds its flow key by words: one built field by field and
 * read back as words (flow_key_eq) waits for each narrower store to
 * complete (no store forwarding). key_ports is the key's fifth word as
 * the filter has it, KEY_V4 the second or fourth, of an IPv4 address as
 * ::ffff:a.b.c.d (a in network order); little endian, as the target. */
_Static_assert(__builtin_offsetof(struct flow_key, sport) == 32 && __builtin_offsetof(struct flow_key, in_ifindex) == 40 &&
		       __builtin_offsetof(struct flow_key, inner) == 48 && sizeof(struct flow_key) == 56,
	       "flow_key words");
static __always_inline __u64 key_ports(__u16 sport, __u16 dport, __u8 proto)
{
	return sport | ((__u64)dport << 16) | ((__u64)proto << 32); /* DSCP, TCP flags 0 */
}
#define KEY_V4(a) ((__u64)bpf_htonl(0xffff) | ((__u64)(a) << 32))

#define WL_NONE 0xffff
struct wl_cache {
	__u32 gen;
	__u16 entry; /* WL_NONE: none */
	__u16 stats;
	__u8 flow_op;
	__u8 session; /* of the entry: a hit needs no watchlist lookup */
	__u8 act;
	__u8 entry_op; /* the entry's flow op before sampling */
	__u32 interval_us; /* of the entry */
	__u64 last_act;    /* clock_ns() the flow op last acted, 0: never */
};

struct counters {
	__u64 c[NCTR];
};

/* Watched packets given INT, and left without it by reason. */
struct sess_stats {
	__u64 initiated;
	__u64 no_room;     /* headers beyond the egress MTU */
	__u64 unsupported; /* nothing to carry INT or no room the kernel would make */
	__u64 sampled;     /* skipped by the entry's packet-interval */
};

/* A collector: report packets to it are never watched. */
struct tel_key {
	__u32 addr[4]; /* IPv4 as ::ffff:a.b.c.d */
	__u16 port;
	__u16 pad;
};

struct wl_stats {
	__u64 packets;
	__u64 bytes;
	__u64 unsampled; /* left alone by packet-interval */
};

struct qr_cfg {
	__u32 depth;   /* bytes, 0 off */
	__u32 latency; /* ns, 0 off */
	__u32 reset;   /* ns */
	__u32 quota;
	__u32 tail_drop;
	__u32 rate; /* reports per one second window, 0: no limit */
};

struct qr_state {
	__u32 in_breach;
	__u32 quota_left;
	__u64 breaches;
	__u64 reports;
	__u64 win_start; /* rate limit window: start (ns), reports in it */
	__u32 win_count;
	__u32 pad;
};

struct flow_state {
	struct flow_key key; /* the flow */
	__u64 hash;          /* flow_key_hash(key) */
	__u64 seen;          /* clock_ns() of its last packet, 0: free */
	__u64 last;
	__u64 digest;
	/* F_ADAPTIVE: the learned band of up to 8 hop latencies (this node's,
	 * then the stack's), EWMA of latency (gain 1/8) and of its absolute
	 * deviation (gain 1/64 rising, 1/32 for a latency that left the band,
	 * 1/256 falling per DECAY_STEP ns of time since decayed) in ns, as the
	 * report pipeline's filter. */
	__u32 n;
	__u32 mean[8];
	__u32 dev[8];
	__u64 decayed;
};

struct ing_slot {
	__u64 ts;
	__u32 fp;
	__u32 ifindex;
	__u32 l2_id; /* ids of the ingress interface */
	__u16 l1_id;
	__u8 sink; /* the ingress interface is a sink (edge) port */
	__u8 slot;
};

/* detour is what a GSO super-packet's segments need at the peer of the
 * detour veth (intd_gso): the egress step's state, found by skb->mark. */
struct detour {
	__u64 ts_in;      /* clock_ns() at ingress, 0: unknown */
	__u32 mark;       /* skb->mark given to the super-packet (tag) */
	__u32 orig_mark;  /* skb->mark before, restored on the segments */
	__u32 in_ifindex;
	__u32 l2_in;
	__u32 occ;    /* queue id << 24 | occupancy */
	__u32 qdelay; /* queueing estimate (need_qtime) */
	__u32 buf;    /* buffer occupancy (need_buf) */
	__u16 l1_in;
	__u16 valid;
	__u8 session, act;
	__u16 stats;
};

struct drop_watch {
	__u64 ts;
	__u32 in_ifindex;
	__u8 act;
	__u8 pad[3];
};

struct event {
	__u64 now;
	__u64 ts_in;
	__u32 in_ifindex, out_ifindex;
	__u32 hop_latency, queue_occ;
	__u32 l2_in, l2_out;
	__u16 l1_in, l1_out;
	__u16 cap_len, pkt_len;
	__u16 valid; /* instruction bits with real values */
	__u16 l3_off; /* 14: data starts with Ethernet; 0: with IP (drops) */
	__u8 kind, flags, drop_reason, tcp_flags;
	__u32 node_id;
	__u16 inst; /* with EVF_INST: what a postcard's session asks for */
	__u16 ds_inst; /* with EVF_INST: its domain and DS instruction */
	__u16 domain;
	__u16 pad;
	__u32 tx_util; /* tenths of a percent, valid with INST_EGRESS_TX_UTIL */
	__u32 buf_occ; /* buffer id 0, bytes; valid with INST_BUFFER */
	__u8 data[MAX_CAP];
};

struct pkt {
	__u32 ihl;
	__u32 l4;
	__u32 l4len;
	__u32 ip_len;
	__u32 shim;  /* offset of the shim, 0: no INT */
	__u32 csum;  /* offset of the L4 checksum, 0: none */
	__u32 saddr[4], daddr[4]; /* IPv4 as ::ffff:a.b.c.d */
	__u16 sport, dport;
	__u16 ip_id; /* IPv6: the low 16 bits of the flow label */
	__u16 frag;
	__u8 proto;   /* flow protocol (original one for NPT 2) */
	__u8 ipproto; /* IP header protocol */
	__u8 tos;
	__u8 encap; /* ENC_*: how INT was found */
	__u8 tun;   /* ENC_VXLAN_GPE, ENC_GENEVE, ENC_GRE: the packet is in such a tunnel */
	__u32 tunnel; /* offset of the tunnel header when tun */
	__u8 tcp_flags;
	__u8 npt2_flags; /* NPT 2 over TCP: the flags of the TCP header behind the stack */
	__u8 csum_flags;
	__u8 v6;
	__u8 ext; /* IPv6 extension headers before the L4 header */
	__u64 idigest; /* the tunnel and inner flow (inner_parse), 0: none */
	/* INT, when shim != 0 */
	__u8 itype;
	__u8 npt;
	__u8 shim_words;
	__u16 shim_val;
	__u8 ver;
	__u8 hdr0; /* D/E/M byte */
	__u8 hop_ml;
	__u8 rhc;
	__u16 inst;
};

/* Tunnels whose inner packet the watchlist matches (sai.TunnelType). */
#define TUNK_VXLAN 1
#define TUNK_GPE 2
#define TUNK_GENEVE 3
#define TUNK_GRE 4
#define TUNK_GTPU 5
#define PORT_VXLAN 4789
#define PORT_GTPU 2152
#define GTPU_MAX_EXT 4 /* extension headers stepped over, as wire.MaxGTPUExt */

/* The inner packet of a tunnelled one (inner_parse). */
struct inner {
	__u32 saddr[4], daddr[4]; /* IPv4 as ::ffff:a.b.c.d */
	__u32 id;                 /* VNI, GRE key, TEID */
	__u16 sport, dport;
	__u8 tun; /* TUNK_*, 0: no tunnel with an IP packet inside */
	__u8 proto;
	__u8 v6;
	__u8 pad;
};

struct hop {
	__u64 ts_in, ts_out;
	__u32 node, latency, occ, l2_in, l2_out;
	__u16 l1_in, l1_out;
	__u16 valid;
	__u32 in_ifindex;
	__u32 out_ifindex;
	__u32 txq;    /* tx queue of the packet (need_occ) */
	__u32 qid;    /* its queue id: txq, 0 when the tx queues share the root qdisc */
	__u32 qdelay; /* queueing estimate in ts_out and latency (need_qtime) */
	__u32 util;   /* egress tx utilisation (need_util) */
	__u32 buf;    /* buffer occupancy, bytes (need_buf) */
	__u8 qdone;   /* need_qtime ran */
	__u8 occ_read; /* need_occ ran */
	__u8 pad[6];
};

/* scratch is the per-CPU state of the packet being processed, shared by
 * the (separately verified) global functions below. */
struct scratch {
	struct cfg c;
	struct iface ifc;
	struct pkt p;
	struct hop h;
	struct wl_entry e;
	__u32 slot;
	__u8 op;
	__u8 miss; /* classify missed the flow cache */
	__u8 unsampled; /* the flow op packet-interval kept from this packet, 0: none */
	__u8 edge; /* from outside the INT domain: sink port or the host */
	__u8 entry_op; /* the matching entry's flow op before sampling */
	__u32 in_slot; /* counter slot of the ingress interface (0: the host, unknown) */
	__u32 wl_in; /* ingress ifindex wl_match matches */
	__u32 walk; /* syn_clamp's offset in the TCP options */
	__u32 req;    /* a postcard's requested instruction bitmap, for emit (EVF_INST) */
	__u32 req_ds; /* and its domain (high 16 bits) and DS instruction */
	__u16 icmp; /* ICMP type << 8 | code of the packet (F_WL_ICMP) */
	__u8 slow; /* a step (intd_transit, intd_sink, intd_source) sent the packet back to intd_egress's general path */
	__u8 pad3;
	struct inner in; /* the tunnel and inner packet (F_WL_INNER) */
	struct wl_lpm_key lk; /* wl_match's trie key */
	__u64 tk;             /* wl_match's wl_tid key */
	__u64 wl_acc[WL_WORDS]; /* wl_match's intersection */
	/* The last flow classified on this CPU and its cached verdict: bulk
	 * flows skip the flow cache's hash lookup. */
	struct flow_key last_key;
	struct wl_cache last;
	__u64 last_wake; /* ring buffer wakeup throttle, ns */
	__u64 now;  /* clock_ns() of need_time */
	__u64 t_in; /* clock_ns() at ingress (intd_ingress), 0: unknown */
	__u32 hop_words;
	__u32 hop[32];
	__u8 mv[MAX_MOVE];
	__u8 buf[512];
	__u32 ins[40]; /* [probe marker +] shim + INT header + hop, assembled for one store */
	__u32 flat[8]; /* filter: the packet's hop latencies (F_ADAPTIVE) */
	__u32 nflat;
	struct flow_key fk;   /* filter: the packet's flow */
	__u64 fkh;            /* and its flow_key_hash */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} cfg_map SEC(".maps");

/* Interfaces by ifindex (MAX_IFINDEX): an array, so that the lookup is
 * inlined address arithmetic (a hash lookup hashes and walks a bucket). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_IFINDEX);
	__type(key, __u32);
	__type(value, struct iface);
} ifaces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SESS);
	__type(key, __u32);
	__type(value, struct session);
} sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); /* written by userspace through mmap */
	__uint(max_entries, 2 * MAX_WL);
	__type(key, __u32);
	__type(value, struct wl_entry);
} watchlist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, struct wl_cache);
} wl_cache_map SEC(".maps");

/* The watchlist's classification sets (see struct wl_bm), written by
 * userspace through mmap: [half][...]. */
#define WL_SETS(name, n)                                  \
	struct {                                          \
		__uint(type, BPF_MAP_TYPE_ARRAY);         \
		__uint(map_flags, BPF_F_MMAPABLE);        \
		__uint(max_entries, n);                   \
		__type(key, __u32);                       \
		__type(value, struct wl_bm);              \
	} name SEC(".maps")

WL_SETS(wl_small, 2 * WLS_N);
WL_SETS(wl_pfx, 2 * 2 * 2 * WL_PFX);
WL_SETS(wl_ival, 2 * 2 * 2 * WL_IVAL);

/* Port -> interval index, [region: half * 2 + field (0 source, 1
 * destination), inner ones WL_INNER + ...][port]:
 * four ports per element, so that the mmap is a flat __u16 array. */
struct wl_port4 {
	__u16 ival[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2 * 2 * 2 * WL_PORTS / 4);
	__type(key, __u32);
	__type(value, struct wl_port4);
} wl_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 2 * 2 * 2 * WL_PFX);
	__type(key, struct wl_lpm_key);
	__type(value, __u32);
} wl_lpm SEC(".maps");

/* Entries of an ingress port: key half << 32 | ifindex. Ports without
 * entries of their own take the WLS_IFX_ANY set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * MAX_SLOTS);
	__type(key, __u64);
	__type(value, struct wl_bm);
} wl_ifx SEC(".maps");

/* Entries of a tunnel id: key half << 32 | id. Other ids take the
 * WLS_TID_ANY set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * MAX_WL);
	__type(key, __u64);
	__type(value, struct wl_bm);
} wl_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct counters);
} ctrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SESS);
	__type(key, __u32);
	__type(value, struct sess_stats);
} sess_stats_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_WL);
	__type(key, __u32);
	__type(value, struct wl_stats);
} wl_stats_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_QR);
	__type(key, __u32);
	__type(value, struct qr_cfg);
} qr_cfg_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_QR);
	__type(key, __u32);
	__type(value, struct qr_state);
} qr_state_map SEC(".maps");

/* The report filter's flow states: a set-associative table (FLOW_WAYS
 * ways per set, the set from the flow's hash) in an array, so that a
 * lookup is a few inlined loads instead of a hash map helper call; a new
 * flow takes a free way of its set, else the way least recently seen.
 * CPUs racing for a way may leave one flow without state: it is new again
 * at its next packet (reported), as after an LRU eviction. */
#define FLOW_WAYS 4
#define FLOW_SETS MAX_FLOW_SETS
struct flow_set {
	struct flow_state way[FLOW_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FLOW_SETS);
	__type(key, __u32);
	__type(value, struct flow_set);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, struct drop_watch);
} drop_watch_map SEC(".maps");

/* intd_kfree_skb's copy of a dropped tunnelled packet's headers
 * (drop_inner): DROP_COPY bytes from the outer IP header, in a buffer
 * twice as long so that offsets masked to DROP_COPY - 1 stay inside. */
#define DROP_COPY 256
struct drop_copy {
	__u8 b[2 * DROP_COPY];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_copy);
} drop_copy_map SEC(".maps");

/* kernel skb_drop_reason -> sai drop reason + 1 (0: not mapped: unknown;
 * DR_IP_HDR + 1: header error, TTL expiry when the TTL is 1 or 0;
 * DR_NO_SOCKET + 1: no socket, a GTP-U G-PDU nothing here takes) */
enum drop_map {
	DR_IP_HDR = 256,
	DR_NO_SOCKET = 257,
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u32);
} drop_reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ing_slot);
} ing_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

#define MAX_DETOUR 8192 /* super-packets in flight through the detour veth */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_DETOUR);
	__type(key, __u32);
	__type(value, struct detour);
} detours SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} detour_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct tel_key);
	__type(value, __u8);
} telemetry SEC(".maps");

/* The skb intd_egress or intd_gso dropped last on this CPU (the kernel
 * frees it right after the program returns): intd_kfree_skb leaves it,
 * counted already. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} own_drop SEC(".maps");

/* The programs of the program array steps, by index. */
enum step { STEP_EGRESS, STEP_TRANSIT, STEP_SINK, STEP_SOURCE, NSTEPS };

/* Generated Go types for userspace. */
struct event *unused_event __attribute__((unused));
struct flow_key *unused_flow_key __attribute__((unused));
/* The shared enums, so that BTF describes them for bpf2go -type. */
struct abi {
	enum limit limit;
	enum cfg_flag cfg_flag;
	enum wl_act wl_act;
	enum flow_op flow_op;
	enum sess_mode sess_mode;
	enum event_flag event_flag;
	enum counter counter;
	enum wl_set wl_set;
	enum drop_map drop_map;
	enum wl_use wl_use;
	enum step step;
} *unused_abi __attribute__((unused));

/* ---- CO-RE view of the egress queue (queue occupancy) ---- */

#define TCQ_F_CPUSTATS 0x20 /* include/net/sch_generic.h: per-CPU qstats (lockless qdiscs) */

struct gnet_stats_queue {
	__u32 qlen;
	__u32 backlog;
} __attribute__((preserve_access_index));

struct Qdisc {
	int (*enqueue)(void);
	unsigned int flags;
	struct gnet_stats_queue qstats;
	struct gnet_stats_queue *cpu_qstats;
} __attribute__((preserve_access_index));

struct dql {
	unsigned int num_queued;
	unsigned int num_completed;
} __attribute__((preserve_access_index));

struct netdev_queue {
	struct Qdisc *qdisc;
	struct dql dql;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	struct Qdisc *qdisc;
	struct netdev_queue *_tx;
	unsigned int real_num_tx_queues;
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	unsigned char *head;
	__u32 tail; /* offset from head (64-bit kernels) */
	__u16 network_header;
	__u16 queue_mapping;
	__u32 len;
	int skb_iif;
	__u8 ip_summed:2;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* The clock of every timestamp and interval: CLOCK_TAI, which follows
 * the system clock's NTP/PTP corrections; cfg.time_offset turns it into
 * POSIX time (CLOCK_REALTIME). */
#define clock_ns() bpf_ktime_get_tai_ns()

/* Queue delay tracking: one packet per tx queue at a time is followed
 * from tc egress (before the qdisc) to the driver (net_dev_start_xmit);
 * its sojourn and the bytes queued ahead of it give the queue's drain
 * rate, so that a packet joining the queue behind occ bytes can be given
 * occ / rate of queueing before it leaves. */
#define SOJ_RECLAIM 1024 /* packets after which a followed packet may be taken for lost */
struct sojourn {
	__u64 skb;  /* the packet followed, 0: none */
	__u64 t0;   /* its tc egress time */
	__u32 occ0; /* bytes queued ahead of it */
	__u32 wait; /* packets seen since it was taken */
	__u64 est;  /* sojourn of the last packet followed, ns */
	__u32 occ;  /* bytes ahead of that one */
	__u32 pad;
	__u64 samples;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS * MAX_TXQ);
	__type(key, __u32);
	__type(value, struct sojourn);
} sojourns SEC(".maps");

/* Queue report index + 1 per interface slot and tx queue, 0: none. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS * MAX_TXQ);
	__type(key, __u32);
	__type(value, __u8);
} qr_of SEC(".maps");

static __always_inline __u32 txq_key(__u32 slot, __u32 txq)
{
	return (slot & (MAX_SLOTS - 1)) * MAX_TXQ + (txq < MAX_TXQ ? txq : MAX_TXQ - 1);
}

/* txq_of is the tx queue the kernel will pick for skb on dev (the pick
 * runs after tc egress): netdev_pick_tx without socket or XPS: the
 * recorded rx queue folded onto the tx queues, else the flow hash scaled
 * to them. */
static __always_inline __u32 txq_of(struct __sk_buff *skb, struct net_device *dev)
{
	__u32 n = dev->real_num_tx_queues;
	if (n <= 1)
		return 0;
	__u32 q = skb->queue_mapping;
	if (q) {
		q--;
		if (q >= n)
			q %= n;
		return q;
	}
	/* skb_get_hash: the hash the packet has (a socket's, the NIC's),
	 * else the flow hash, computed once and kept, as the kernel would. */
	__u32 hash = skb->hash;
	if (!hash)
		hash = bpf_get_hash_recalc(skb);
	return ((__u64)hash * n) >> 32;
}

/* txq_bytes returns the bytes queued in tx queue q of dev: the backlog of
 * its qdisc (the mq child, or the root qdisc of a single-queue device)
 * plus the bytes the driver has in flight by BQL; -1 when unknown: the
 * qdisc keeps per-CPU counters (pfifo_fast and other lockless qdiscs),
 * which a program cannot sum without the kernel's per-CPU offsets. */
static __always_inline __s64 txq_bytes(struct net_device *dev, __u32 q, __u32 *shared)
{
	struct netdev_queue *tx0 = dev->_tx;
	if (!tx0)
		return -1;
	__u64 a = (__u64)tx0 + (__u64)q * bpf_core_type_size(struct netdev_queue);
	struct netdev_queue *tx = bpf_rdonly_cast((void *)a, bpf_core_type_id_kernel(struct netdev_queue));
	__s64 bytes = 0;
	struct Qdisc *qd = tx->qdisc;
	*shared = q && qd == dev->qdisc;
	if (qd && qd->enqueue) {
		if (qd->flags & TCQ_F_CPUSTATS)
			return -1;
		bytes = qd->qstats.backlog;
	}
	if (bpf_core_field_exists(tx->dql))
		bytes += (__u32)(tx->dql.num_queued - tx->dql.num_completed);
	return bytes;
}

/* need_occ reads the egress queue into s->h once per packet, when
 * something uses it: the tx queue (h->txq), the queue id (h->qid: the tx
 * queue, or 0 when the device's tx queues all feed its root qdisc, which
 * is then the one queue) and its occupancy in bytes (INST_QUEUE valid when
 * known). */
static __always_inline void need_occ(struct __sk_buff *skb, struct scratch *s)
{
	struct hop *h = &s->h;
	if (h->occ_read)
		return;
	h->occ_read = 1;
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	struct net_device *dev = k->dev;
	if (!dev)
		return;
	__u32 q = txq_of(skb, dev), shared = 0;
	__s64 b = txq_bytes(dev, q, &shared);
	h->txq = q;
	h->qid = shared ? 0 : q;
	if (b < 0)
		return;
	h->occ = b < 0xffffff ? b : 0xffffff;
	h->valid |= INST_QUEUE;
}

/* Egress tx utilisation per interface slot in tenths of a percent: the
 * device's transmitted bits over the last 100 ms against its capacity,
 * written by userspace; 0xffffffff: unknown. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_util SEC(".maps");

static __always_inline void need_util(struct scratch *s)
{
	__u32 k = s->slot & (MAX_SLOTS - 1);
	__u32 *u = bpf_map_lookup_elem(&tx_util, &k);
	if (u && *u != 0xffffffff) {
		s->h.util = *u;
		s->h.valid |= INST_EGRESS_TX_UTIL;
	}
}

/* soj_of is the sojourn state of the packet's tx queue. */
static __always_inline struct sojourn *soj_of(struct scratch *s)
{
	__u32 k = txq_key(s->slot, s->h.txq);
	return bpf_map_lookup_elem(&sojourns, &k);
}

/* need_time reads the clock once per packet, when something uses it
 * (timestamps, hop latency, events, the report filter): the egress
 * timestamp, and with the ingress time s->t_in the hop latency. Packets
 * whose INT instructions need no time are spared the helper call. */
static __always_inline void need_time(struct scratch *s)
{
	struct hop *h = &s->h;
	if (h->valid & INST_EGRESS_TIMESTAMP)
		return;
	__u64 now = clock_ns();
	s->now = now;
	h->ts_out = now + s->c.time_offset;
	h->valid |= INST_EGRESS_TIMESTAMP;
	if (s->t_in && s->t_in <= now) {
		h->ts_in = s->t_in + s->c.time_offset;
		h->latency = now - s->t_in;
		h->valid |= INST_HOP_LATENCY | INST_INGRESS_TIMESTAMP;
	}
}

/* need_qtime is need_time for metadata: the egress timestamp and hop
 * latency also count the time the packet will spend in the egress queue,
 * estimated from its occupancy and the drain rate last measured. */
static __always_inline void need_qtime(struct __sk_buff *skb, struct scratch *s)
{
	struct hop *h = &s->h;
	need_occ(skb, s);
	need_time(s);
	if (h->qdone)
		return;
	h->qdone = 1;
	if (!h->occ)
		return;
	struct sojourn *j = soj_of(s);
	if (!j)
		return;
	__u64 est = j->est;
	__u32 occ0 = j->occ;
	__u64 d = occ0 ? est * h->occ / occ0 : est;
	if (d > 4000000000ULL)
		d = 4000000000ULL;
	h->qdelay = d;
	h->ts_out += d;
	if (h->valid & INST_HOP_LATENCY) {
		__u64 l = (__u64)h->latency + d;
		h->latency = l < 0xfffffffe ? l : 0xfffffffe;
	}
}

/* follow starts following the packet through its tx queue when none is
 * followed there. */
static __always_inline void follow(struct __sk_buff *skb, struct scratch *s)
{
	need_occ(skb, s);
	if (!s->h.occ)
		return; /* an empty queue: nothing to learn, no delay to add */
	struct sojourn *j = soj_of(s);
	if (!j)
		return;
	if (j->skb) {
		/* Followed packets the kernel drops or segments never reach
		 * the driver: taken for lost after a second. */
		if (++j->wait < SOJ_RECLAIM)
			return;
		need_time(s);
		if (s->now - j->t0 < 1000000000ULL)
			return;
	}
	need_time(s);
	j->t0 = s->now;
	j->occ0 = s->h.occ;
	j->wait = 0;
	j->skb = (__u64)bpf_cast_to_kern_ctx(skb);
}

/* INT instruction bits that need need_time. */
#define INST_TIME (INST_HOP_LATENCY | INST_INGRESS_TIMESTAMP | INST_EGRESS_TIMESTAMP)

/* ---- small helpers ---- */

static __always_inline struct iface *iface_of(__u32 ifx)
{
	struct iface *i = bpf_map_lookup_elem(&ifaces, &ifx);
	return i && i->on ? i : 0;
}

#define L3 14


#define GLOBAL __attribute__((noinline))
/* BOUND masks v in a way the compiler cannot drop, so that the verifier
 * sees the bound on the register actually passed to a helper. */
#define BOUND(v, mask) asm volatile("%[x] &= " #mask : [x] "+r"(v))

static __always_inline void cnt(struct scratch *s, int i)
{
	__u32 k = s->slot;
	struct counters *c = bpf_map_lookup_elem(&ctrs, &k);
	if (c)
		c->c[i & (NCTR - 1)]++;
}

/* cnt2 counts i and j with one lookup. */
static __always_inline void cnt2(struct scratch *s, int i, int j)
{
	__u32 k = s->slot;
	struct counters *c = bpf_map_lookup_elem(&ctrs, &k);
	if (c) {
		c->c[i & (NCTR - 1)]++;
		c->c[j & (NCTR - 1)]++;
	}
}

static __always_inline void cnt_at(__u32 slot, int i)
{
	struct counters *c = bpf_map_lookup_elem(&ctrs, &slot);
	if (c)
		c->c[i & (NCTR - 1)]++;
}

static __always_inline void cnt_drop(struct scratch *s, __u32 reason)
{
	__u64 *d = bpf_map_lookup_elem(&drops, &reason);
	if (d)
		(*d)++;
	cnt(s, C_DROP);
}

/* shot drops the packet; intd_kfree_skb leaves this drop alone (counted
 * here, if at all). */
static __always_inline int shot(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&own_drop, &zero);
	if (o)
		*o = (__u64)(long)bpf_cast_to_kern_ctx(skb);
	return TC_ACT_SHOT;
}

static __always_inline __u32 inst_words(__u16 inst)
{
	/* The two-word bits counted twice, with one popcount. */
	return __builtin_popcount(inst | ((__u32)(inst & INST_DOUBLE_WORD) << 16));
}

static __always_inline __u64 hash64(__u64 h, __u64 w)
{
	h ^= w;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/* afold folds a 16-byte address into 32 bits: an IPv4 address (as
 * ::ffff:a.b.c.d) into itself. */
static __always_inline __u32 afold(const __u32 *a)
{
	return a[0] ^ a[1] ^ a[2] ^ a[3] ^ bpf_htonl(0xffff);
}

static __always_inline __u64 flow_hash(struct flow_key *k)
{
	__u64 h = hash64(0x12345, ((__u64)afold(k->src) << 32) | afold(k->dst));
	h = hash64(h, ((__u64)k->sport << 32) | ((__u64)k->dport << 16) | k->proto);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	return h;
}

/* wmix is wire's mix: the 128-bit product's halves xored. */
static __always_inline __u64 wmix(__u64 h, __u64 w)
{
	__u64 a = h ^ w, b = 0xa0761d6478bd642fULL;
	__u64 al = (__u32)a, ah = a >> 32, bl = (__u32)b, bh = b >> 32;
	__u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	__u64 mid = (ll >> 32) + (__u32)lh + (__u32)hl;
	__u64 hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
	return hi ^ (a * b);
}

/* entropy_port is wire.FlowKey.EntropyPort of a flow (16-byte addresses,
 * IPv4 as ::ffff:a.b.c.d): the UDP source port of an NPT 2 header. */
static __always_inline __u16 entropy_port(const __u32 *src, const __u32 *dst, __u16 sport, __u16 dport, __u8 proto)
{
	__u64 h = 0x9e3779b97f4a7c15ULL;
	h = wmix(h, ((__u64)src[1] << 32) | src[0]);
	h = wmix(h, ((__u64)src[3] << 32) | src[2]);
	h = wmix(h, ((__u64)dst[1] << 32) | dst[0]);
	h = wmix(h, ((__u64)dst[3] << 32) | dst[2]);
	h = wmix(h, ((__u64)sport << 32) | ((__u64)dport << 16) | proto);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return 0xc000 | (__u16)(h >> 50);
}

static __always_inline __u32 fingerprint(__u32 saddr, __u32 daddr, __u32 idlen, __u32 proto)
{
	__u64 h = hash64(saddr, ((__u64)daddr << 32) | idlen);
	return (__u32)hash64(h, proto);
}

static __always_inline struct scratch *scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&scratch_map, &zero);
}

/* ---- parsing ---- */

/* parse reads Ethernet/IPv4 or IPv6/TCP/UDP and the INT shim + header into
 * s->p. It returns -1 for packets intd does not touch (not IP, fragments,
 * IPv6 extension headers), 1 for malformed INT, 0 otherwise. */
/* PKT_RELOAD reloads the packet pointers after a helper that may move the
 * data, loading them from the context in asm: otherwise the compiler may
 * keep a pointer into the context across the call, which the verifier
 * refuses to dereference. */
#define PKT_RELOAD(skb, d, end)                                                      \
	do {                                                                         \
		__u64 _d, _e;                                                        \
		asm volatile("%0 = *(u32 *)(%1 + %2)"                                \
			     : "=r"(_d)                                              \
			     : "r"(skb), "i"(__builtin_offsetof(struct __sk_buff, data))); \
		asm volatile("%0 = *(u32 *)(%1 + %2)"                                \
			     : "=r"(_e)                                              \
			     : "r"(skb), "i"(__builtin_offsetof(struct __sk_buff, data_end))); \
		d = (void *)(long)_d;                                                \
		end = (void *)(long)_e;                                              \
	} while (0)

/* PULL_UPTO makes the packet's first off bytes linear (pulling at most 255)
 * when it has them but its linear part does not; parse returns -1 when
 * that fails. */
#define PULL_UPTO(skb, d, end, off)                                      \
	do {                                                             \
		if ((d) + (off) > (end) && (off) <= (skb)->len) {        \
			__u32 _w = (skb)->len < 255 ? (skb)->len : 255;  \
			if (bpf_skb_pull_data(skb, _w))                  \
				return -1;                               \
			PKT_RELOAD(skb, d, end);                         \
		}                                                        \
	} while (0)

static __always_inline int parse(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return -1;
	struct pkt *p = &s->p;
	struct cfg *c = &s->c;
	int edge = s->edge; /* from outside the domain: tunnels, never INT */
	__builtin_memset(p, 0, sizeof(*p));
	/* Direct packet access (a helper call per load costs more): the
	 * headers are in the linear part, or are pulled there once. */
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + 34 > end) {
		__u32 want = skb->len < 160 ? skb->len : 160;
		if (bpf_skb_pull_data(skb, want))
			return -1;
		PKT_RELOAD(skb, d, end);
		if (d + 34 > end)
			return -1;
	}
	__u32 l4;
	if (d[12] == 0x86 && d[13] == 0xdd) {
		if (d + 54 > end) {
			__u32 want = skb->len < 160 ? skb->len : 160;
			if (bpf_skb_pull_data(skb, want))
				return -1;
			PKT_RELOAD(skb, d, end);
			if (d + 54 > end)
				return -1;
		}
		if ((d[14] >> 4) != 6)
			return -1;
		p->v6 = 1;
		p->ihl = 40;
		p->tos = (d[14] << 4) | (d[15] >> 4);
		p->ip_len = 40 + (((__u32)d[18] << 8) | d[19]);
		p->ip_id = ((__u16)d[16] << 8) | d[17];
		__builtin_memcpy(p->saddr, &d[22], 16);
		__builtin_memcpy(p->daddr, &d[38], 16);
		l4 = L3 + 40;
		/* Hop-by-hop, routing and destination options headers and an
		 * atomic fragment header are stepped over (INT goes after the
		 * L4 header behind them, as in the soft dataplane); fragments
		 * and other extension headers leave the packet untouched. */
		__u8 nh = d[20];
		for (int i = 0; i < 4; i++) {
			if (nh != 0 && nh != 43 && nh != 60 && nh != 44)
				break;
			if (l4 + 8 > L3 + 40 + MAX_EXT || l4 + 8 > skb->len)
				return -1;
			if (d + l4 + 8 > end) {
				__u32 want = skb->len < 200 ? skb->len : 200;
				if (bpf_skb_pull_data(skb, want))
					return -1;
				PKT_RELOAD(skb, d, end);
			}
			__u8 *x = d + (l4 & 0xff);
			if (x + 8 > end)
				return -1;
			if (nh == 44) {
				if ((((__u16)x[2] << 8) | x[3]) & 0xfff9)
					return -1; /* a fragment: offset or M set */
				l4 += 8;
			} else {
				l4 += ((__u32)x[1] + 1) * 8;
			}
			nh = x[0];
			p->ext = 1;
		}
		switch (nh) {
		case 0: case 43: case 44: case 60: case 135: case 139: case 140:
			return -1;
		}
		if (l4 > L3 + 40 + MAX_EXT)
			return -1;
		p->proto = p->ipproto = nh;
		p->ihl = l4 - L3;
		p->l4 = l4;
	} else {
		if (d[12] != 0x08 || d[13] != 0x00 || (d[14] >> 4) != 4)
			return -1;
		p->ihl = (d[14] & 0xf) * 4;
		if (p->ihl < 20)
			return -1;
		p->tos = d[15];
		p->ip_len = ((__u32)d[16] << 8) | d[17];
		p->ip_id = ((__u16)d[18] << 8) | d[19];
		p->frag = (((__u16)d[20] << 8) | d[21]) & 0x3fff;
		p->proto = p->ipproto = d[23];
		p->saddr[2] = p->daddr[2] = bpf_htonl(0xffff);
		__builtin_memcpy(&p->saddr[3], &d[26], 4);
		__builtin_memcpy(&p->daddr[3], &d[30], 4);
		l4 = L3 + (p->ihl & 0x3c);
		p->l4 = l4;
		if (p->frag)
			return -1;
	}
	int gre = p->proto == IPPROTO_GRE && !p->v6 && (c->tunnels & TUN_GRE);
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP && !gre)
		return 0;
	/* L4 header plus an INT shim and header behind it. */
	__u32 need = l4 + 60 + 16;
	if (need > skb->len)
		need = skb->len;
	need &= 0xff;
	if (d + need > end) {
		if (bpf_skb_pull_data(skb, need))
			return -1;
		PKT_RELOAD(skb, d, end);
	}
	__u8 *t = d + l4;
	if (gre) {
		/* GRE without checksum or routing, version 0; INT when its
		 * protocol type is cfg.gre_proto. */
		if (t + 4 > end)
			return -1;
		__u16 flags = ((__u16)t[0] << 8) | t[1];
		if (flags & 0xc007)
			return 0;
		p->l4len = 4 + ((flags & 0x2000) ? 4 : 0) + ((flags & 0x1000) ? 4 : 0);
		p->tun = ENC_GRE;
		p->tunnel = l4;
		if (edge || (((__u16)t[2] << 8) | t[3]) != c->gre_proto)
			return 0;
		p->shim = l4 + p->l4len;
		p->encap = ENC_GRE;
		goto shim;
	}
	if (p->proto == IPPROTO_TCP) {
		if (t + 20 > end)
			return -1;
		p->sport = ((__u16)t[0] << 8) | t[1];
		p->dport = ((__u16)t[2] << 8) | t[3];
		p->l4len = (t[12] >> 4) * 4;
		p->tcp_flags = t[13];
		p->csum = l4 + 16;
		if (p->l4len < 20)
			return -1;
	} else {
		if (t + 8 > end)
			return -1;
		p->sport = ((__u16)t[0] << 8) | t[1];
		p->dport = ((__u16)t[2] << 8) | t[3];
		p->l4len = 8;
		p->csum = l4 + 6;
		p->csum_flags = BPF_F_MARK_MANGLED_0;
	}
	if (p->proto == IPPROTO_UDP && (c->tunnels & TUN_VXLAN_GPE) && p->dport == PORT_VXLAN_GPE) {
		/* VXLAN-GPE: INT when the P flag is set and the next protocol
		 * is INT; the first shim must be MD or MX. */
		__u8 *g = t + 8;
		if (g + 8 > end)
			return 0;
		if (!(g[0] & 0x04))
			return 0;
		p->tun = ENC_VXLAN_GPE;
		p->tunnel = l4 + 8;
		if (edge || g[3] != VXLAN_GPE_NP_INT)
			return 0;
		p->shim = l4 + 16;
		p->encap = ENC_VXLAN_GPE;
	} else if (p->proto == IPPROTO_UDP && (c->tunnels & TUN_GENEVE) && p->dport == PORT_GENEVE) {
		/* Geneve: INT is the first option of class INT and type MD or
		 * MX among the first four options. */
		__u8 *g = t + 8;
		if (g + 8 > end || (g[0] >> 6))
			return 0;
		p->tun = ENC_GENEVE;
		p->tunnel = l4 + 8;
		if (edge)
			return 0;
		__u32 o = l4 + 16, oend = l4 + 16 + (g[0] & 0x3f) * 4;
		for (int i = 0; i < 4; i++) {
			if (o + 4 > oend || o > 0xff)
				break;
			__u8 *q = d + (o & 0xff);
			if (q + 4 > end)
				return 0;
			__u8 ty = q[2] & 0x7f;
			__u16 class = ((__u16)q[0] << 8) | q[1];
			if (class == GENEVE_CLASS_INT && (ty == INT_TYPE_MD || ty == INT_TYPE_MX)) {
				if (o + 4 + (q[3] & 0x1f) * 4 > oend)
					return 1;
				p->shim = o;
				break;
			}
			o += 4 + (q[3] & 0x1f) * 4;
		}
		if (!p->shim)
			return 0;
		p->encap = ENC_GENEVE;
	} else if (edge) {
		return 0;
	} else if (c->dscp_mask && ((p->tos >> 2) & c->dscp_mask) == c->dscp_val) {
		p->shim = l4 + (p->l4len & 0x3c);
		p->encap = ENC_DSCP;
	} else if (c->udp_port && p->proto == IPPROTO_UDP && p->dport == c->udp_port) {
		p->shim = l4 + 8;
		p->encap = ENC_UDP_PORT;
	} else if (c->probe) {
		/* A 64-bit probe marker right after the L4 header. */
		__u32 mo = (l4 + p->l4len) & 0xff;
		PULL_UPTO(skb, d, end, mo + 8);
		__u8 *m = d + mo;
		if (m + 8 > end || *(__u64 *)m != c->probe)
			return 0;
		p->shim = mo + 8;
		p->encap = ENC_PROBE_MARKER;
	} else {
		return 0;
	}
shim:;
	__u32 so = p->shim & 0xff;
	PULL_UPTO(skb, d, end, so + 16);
	__u8 *b = d + so;
	if (p->shim + 16 > L3 + p->ip_len || b + 16 > end)
		return 1;
	if (ENC_IS_TUNNEL(p->encap)) {
		/* Tunnel shims: GPE and GRE Type(4) .. Length(8) ..; the Geneve
		 * option header Class(16) Type(8) Length(5). No NPT. */
		p->shim_val = ((__u16)b[2] << 8) | b[3];
		if (p->encap == ENC_GENEVE) {
			p->itype = b[2] & 0x7f;
			p->shim_words = b[3] & 0x1f;
			__u8 *g = d + (p->tunnel & 0xff);
			if (g + 1 > end)
				return 1;
			p->shim_val = g[0] & 0x3f; /* Geneve: the header's option words */
		} else {
			p->itype = b[0] >> 4;
			p->shim_words = b[1];
		}
		if (p->itype != INT_TYPE_MD && p->itype != INT_TYPE_MX)
			return -1; /* another INT type first: untouched */
		goto hdr;
	}
	p->itype = b[0] >> 4;
	p->npt = (b[0] >> 2) & 3;
	if (p->npt == NPT_IP_PROTO && p->ext)
		return -1; /* the protocol to restore is in the last extension header: untouched */
	p->shim_words = b[1];
	p->shim_val = ((__u16)b[2] << 8) | b[3];
hdr:
	p->ver = b[4] >> 4;
	p->hdr0 = b[4];
	p->hop_ml = b[6] & 0x1f;
	p->rhc = b[7];
	p->inst = ((__u16)b[8] << 8) | b[9];
	if (p->itype != INT_TYPE_MD && p->itype != INT_TYPE_MX)
		return 1;
	if (p->ver != 2 || p->shim_words < 3 || p->npt > NPT_IP_PROTO || (p->npt && p->encap != ENC_UDP_PORT))
		return 1;
	if (p->shim + 4 + (__u32)p->shim_words * 4 > L3 + p->ip_len)
		return 1;
	if (p->itype == INT_TYPE_MD) {
		if (p->hop_ml < inst_words(p->inst))
			return 1;
		if (p->shim_words > 3 && p->hop_ml == 0)
			return 1;
		if (p->hop_ml && (__u32)(p->shim_words - 3) % p->hop_ml)
			return 1; /* the stack is not whole hops */
	}
	if (p->npt == NPT_UDP_PORT) {
		p->dport = p->shim_val;
	} else if (p->npt == NPT_IP_PROTO) {
		__u8 o[14];
		p->proto = (__u8)p->shim_val;
		p->sport = p->dport = 0;
		if (p->proto == IPPROTO_TCP && bpf_skb_load_bytes(skb, p->shim + 4 + p->shim_words * 4, o, 14) == 0) {
			p->sport = ((__u16)o[0] << 8) | o[1];
			p->dport = ((__u16)o[2] << 8) | o[3];
			p->npt2_flags = o[13];
		} else if (p->proto == IPPROTO_UDP && bpf_skb_load_bytes(skb, p->shim + 4 + p->shim_words * 4, o, 4) == 0) {
			p->sport = ((__u16)o[0] << 8) | o[1];
			p->dport = ((__u16)o[2] << 8) | o[3];
		}
	}
	return 0;
}

/* ---- hop metadata ---- */

/* build_hop writes this hop's metadata for inst into s->hop and returns its
 * length in words: hop_ml words in all, domain-specific words and
 * unavailable fields all ones. Straight-line code (every field is written
 * at the current position, which advances when inst has its bit): no
 * branch on inst, so the verifier walks it once. sparse (a constant)
 * computes and writes only the fields inst asks for instead, the position
 * through memory after each, so that the verifier still sees one unknown
 * position whether inst has the bit or not: cheaper for a short hop, dearer
 * for a long one (a store and load per field). */
#define HOP_BIT(b) ((0x8000 >> (b)))
#define HOP_POS(v) (*(volatile __u32 *)&s->hop_words = (v), *(volatile __u32 *)&s->hop_words)
#define HOP_PUT(b, x)                                                          \
	do {                                                                   \
		if (!sparse || (inst & HOP_BIT(b))) {                          \
			__u32 m_ = -(__u32)((valid >> (15 - (b))) & 1);        \
			s->hop[n & 31] = (bpf_htonl(x) & m_) | ~m_;            \
			if (sparse)                                            \
				n = HOP_POS(n + 1);                            \
			else                                                   \
				n += (inst >> (15 - (b))) & 1;                 \
		}                                                              \
	} while (0)
#define HOP_PUT2(b, x, y)                                                      \
	do {                                                                   \
		if (!sparse || (inst & HOP_BIT(b))) {                          \
			__u32 m_ = -(__u32)((valid >> (15 - (b))) & 1);        \
			s->hop[n & 31] = (bpf_htonl(x) & m_) | ~m_;            \
			s->hop[(n + 1) & 31] = (bpf_htonl(y) & m_) | ~m_;      \
			if (sparse)                                            \
				n = HOP_POS(n + 2);                            \
			else                                                   \
				n += ((inst >> (15 - (b))) & 1) * 2;           \
		}                                                              \
	} while (0)
/* HOP_FIELDS puts the fields of bits 0-8 in order (s, h, inst, valid, n
 * and sparse in scope). */
#define HOP_FIELDS()                                                           \
	do {                                                                   \
		HOP_PUT(0, h->node);                                           \
		HOP_PUT(1, ((__u32)h->l1_in << 16) | h->l1_out);               \
		HOP_PUT(2, h->latency);                                        \
		HOP_PUT(3, (h->qid << 24) | (h->occ & 0xffffff));              \
		HOP_PUT2(4, h->ts_in >> 32, (__u32)h->ts_in);                  \
		HOP_PUT2(5, h->ts_out >> 32, (__u32)h->ts_out);                \
		HOP_PUT2(6, h->l2_in, h->l2_out);                              \
		HOP_PUT(7, h->util);                                           \
		HOP_PUT(8, h->buf & 0xffffff);                                 \
	} while (0)
static __always_inline __u32 build_hop(struct scratch *s, __u32 inst, __u32 hop_ml, const int sparse)
{
	struct hop *h = &s->h;
	__u32 valid = h->valid;
	__u32 n = 0;
	HOP_FIELDS();
	/* Bits 9-14 have no values: all ones, as the padding up to hop_ml
	 * words (the checksum complement, bit 15, last). */
	__u32 n15 = n + __builtin_popcount(inst & INST_RESERVED);
	__u32 want = hop_ml - (inst & INST_CHECKSUM_COMPLEMENT);
	if (want < n15)
		want = n15;
	if (want > n15 + 31)
		want = n15 + 31;
	for (int i = 0; i < 31 + 8; i++) {
		if (n >= want)
			break;
		s->hop[n & 31] = 0xffffffff;
		n++;
	}
	if (inst & INST_CHECKSUM_COMPLEMENT) {
		s->hop[n & 31] = 0xffffffff;
		n++;
	}
	/* Through memory: the verifier forgets the value, so that what
	 * follows is verified once, not once per length. */
	*(volatile __u32 *)&s->hop_words = n;
	return *(volatile __u32 *)&s->hop_words;
}

/* ---- checksum and header edits ---- */

/* store_hop writes words of s->hop at off. */
static __always_inline void store_hop(struct __sk_buff *skb, __u32 off, struct scratch *s, __u32 words)
{
	__u64 len = words * 4;
	BOUND(len, 0x7c);
	if (len > 0)
		bpf_skb_store_bytes(skb, off, s->hop, len, 0);
}

static __always_inline void ip_word(struct __sk_buff *skb, __u32 off, __u16 oldv, __u16 newv)
{
	__u16 o = bpf_htons(oldv), n = bpf_htons(newv);
	bpf_skb_store_bytes(skb, L3 + off, &n, 2, 0);
	bpf_l3_csum_replace(skb, L3 + 10, o, n, 2);
}

/* l4_word rewrites a 16-bit word inside the L4 checksum's coverage. */
static __always_inline void l4_word(struct __sk_buff *skb, struct pkt *p, __u32 off, __u16 oldv, __u16 newv)
{
	__u16 o = bpf_htons(oldv), n = bpf_htons(newv);
	bpf_skb_store_bytes(skb, off, &n, 2, 0);
	if (p->csum)
		bpf_l4_csum_replace(skb, p->csum, o, n, 2 | p->csum_flags);
}

/* l4_pseudo_len accounts for the L4 segment length changing from oldv to
 * newv in the pseudo header. */
static __always_inline void l4_pseudo_len(struct __sk_buff *skb, struct pkt *p, __u16 oldv, __u16 newv)
{
	if (p->csum)
		bpf_l4_csum_replace(skb, p->csum, bpf_htons(oldv), bpf_htons(newv),
				    2 | BPF_F_PSEUDO_HDR | p->csum_flags);
}

/* l4_sum folds the one's complement sum change diff into the L4 checksum. */
static __always_inline void l4_sum(struct __sk_buff *skb, struct pkt *p, __s64 diff)
{
	if (p->csum && diff >= 0)
		bpf_l4_csum_replace(skb, p->csum, 0, (__u32)diff, p->csum_flags);
}

/* One's complement arithmetic on 16-bit words as they lie in memory (the
 * checksum helpers' convention): cadd accumulates the change old -> new. */
static __always_inline __u32 cadd(__u32 acc, __u16 oldv, __u16 newv)
{
	return acc + (__u16)~oldv + newv;
}

/* put8 writes byte v at q + second (0 or 1) with one 16-bit store and
 * adds the change of the 16-bit word at q to acc: a byte store read back
 * as a word would wait for the store to complete (no store forwarding). */
static __always_inline __u32 put8(__u32 acc, __u8 *q, int second, __u8 v)
{
	__u16 o = *(__u16 *)q, h = bpf_ntohs(o);
	__u16 n = bpf_htons(second ? (h & 0xff00) | v : (h & 0x00ff) | ((__u16)v << 8));
	*(__u16 *)q = n;
	return cadd(acc, o, n);
}

static __always_inline __u16 cfold(__u32 acc)
{
	acc = (acc & 0xffff) + (acc >> 16);
	acc = (acc & 0xffff) + (acc >> 16);
	return acc;
}

#define CHECKSUM_PARTIAL 3
#define CHECKSUM_COMPLETE 2

/* csum_pending tells whether the L4 checksum is still to be completed
 * (CHECKSUM_PARTIAL: the device, or the kernel in software, sums from
 * skb->csum_start as the packet leaves). INT moves the L4 header away
 * from csum_start, so such packets get INT only after that (detour). */
static __always_inline int csum_pending(struct __sk_buff *skb)
{
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	return BPF_CORE_READ_BITFIELD(k, ip_summed) == CHECKSUM_PARTIAL;
}

/* l4_fix folds the one's complement change acc of covered bytes and the
 * pseudo header's L4 length change oldlen -> newlen into the L4 checksum,
 * with the result of l4_sum then l4_pseudo_len, bit for bit, but written
 * with direct packet access: CHECKSUM_NONE/UNNECESSARY take both changes,
 * CHECKSUM_PARTIAL (the field holds the pseudo-header sum) the length
 * change only, as the helper does; a zero UDP checksum stays zero and a
 * result of zero becomes 0xffff. CHECKSUM_COMPLETE keeps the helpers,
 * which also fix skb->csum. The sums start at 0xffff (= 0) like the
 * kernel's 32-bit complement of the old value, so the folded sum is never
 * 0 and equals the helpers' in every case. */
static __always_inline int l4_fix(struct __sk_buff *skb, struct pkt *p, __u32 acc, __u16 oldlen, __u16 newlen)
{
	if (!p->csum)
		return 0;
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	__u32 summed = BPF_CORE_READ_BITFIELD(k, ip_summed);
	if (summed == CHECKSUM_COMPLETE) {
		l4_sum(skb, p, cfold(acc));
		l4_pseudo_len(skb, p, oldlen, newlen);
		return 0;
	}
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u8 *q = d + (p->csum & 0xff);
	if (q + 2 > end)
		return -1;
	__u16 v = *(__u16 *)q;
	if (!v && p->csum_flags)
		return 0;
	__u32 t = 0xffff + (__u16)~bpf_htons(oldlen) + bpf_htons(newlen);
	if (summed == CHECKSUM_PARTIAL)
		t += v;
	else
		t += (__u16)~v + cfold(acc);
	__u16 nv = ~cfold(t);
	if (!nv && p->csum_flags)
		nv = 0xffff;
	*(__u16 *)q = nv;
	return 0;
}

/* ip_csum_fix folds the accumulated change acc into the IPv4 header
 * checksum (RFC 1624: HC' = ~(~HC + ~m + m')). */
static __always_inline void ip_csum_fix(__u8 *iph, __u32 acc)
{
	__u16 *ck = (__u16 *)(iph + 10);
	*ck = ~cfold((__u16)~*ck + acc);
}

/* ip_set writes the DSCP/ECN byte tos and the length ip_len (IPv4 total
 * length, fixing the header checksum; IPv6: the payload length is ip_len
 * minus 40, the traffic class is tos) of the IP header at iph. */
static __always_inline int ip_set(struct pkt *p, __u8 *iph, __u8 *end, __u8 tos, __u32 ip_len)
{
	if (p->v6) {
		if (iph + 40 > end)
			return -1;
		iph[0] = (iph[0] & 0xf0) | (tos >> 4);
		iph[1] = (iph[1] & 0x0f) | (tos << 4);
		*(__u16 *)(iph + 4) = bpf_htons(ip_len - 40);
		return 0;
	}
	if (iph + 20 > end)
		return -1;
	__u32 iacc = put8(0, iph, 1, tos);
	__u16 o16 = *(__u16 *)(iph + 2);
	*(__u16 *)(iph + 2) = bpf_htons(ip_len);
	iacc = cadd(iacc, o16, *(__u16 *)(iph + 2));
	ip_csum_fix(iph, iacc);
	return 0;
}

/* fixed_len is the length of the fixed IP header, after which
 * bpf_skb_adjust_room(BPF_ADJ_ROOM_NET) inserts or removes room. */
static __always_inline __u32 fixed_len(struct pkt *p)
{
	return p->v6 ? 40 : 20;
}

/* make_room makes n bytes of room at offset at (after the L4 header, at
 * most MAX_MOVE bytes after the fixed IP header of fix bytes) with one
 * helper call: the kernel inserts the room after the fixed IP header and
 * the bytes in between move down again with direct packet access. It
 * returns 0, -1 when nothing changed, -2 when the packet is left
 * inconsistent. */
static __always_inline int make_room(struct __sk_buff *skb, __u32 at, __u32 n, __u32 fix)
{
	fix &= 0x3c;
	__u32 mv = at - (L3 + fix);
	if (mv > MAX_MOVE || n > 0x1ff)
		return -1;
	if (bpf_skb_adjust_room(skb, n, BPF_ADJ_ROOM_NET, 0))
		return -1;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	/* Eight bytes a step (four for the last word of an odd count);
	 * every load is ahead of the stores before it (dst < src). */
	for (int i = 0; i < MAX_MOVE / 8; i++) {
		__u32 o = i * 8;
		if (o >= mv)
			break;
		__u8 *dst = d + L3 + fix + o;
		__u8 *src = dst + (n & 0x1ff);
		/* Keep the checked pointers in registers: recomputed ones
		 * would not carry the verifier's bounds. */
		asm volatile("" : "+r"(dst), "+r"(src));
		if (o + 4 == mv) {
			if (dst + 4 > end || src + 4 > end)
				return -2;
			*(__u32 *)dst = *(__u32 *)src;
			break;
		}
		if (dst + 8 > end || src + 8 > end)
			return -2;
		*(__u64 *)dst = *(__u64 *)src;
	}
	return 0;
}

/* grow makes n bytes of room at offset at (after the L4 header): the
 * kernel inserts them after the fixed IP header (fix bytes) and the bytes
 * in between (IP options, L4 header, INT header) move down. Only used on
 * non-GSO packets. */
static __always_inline int grow(struct __sk_buff *skb, struct scratch *s, __u32 at, __u32 n, __u32 fix)
{
	fix &= 0x3c;
	__u32 mv = at - (L3 + fix);
	if (mv > MAX_MOVE)
		return -1;
	if (bpf_skb_adjust_room(skb, n, BPF_ADJ_ROOM_NET, 0))
		return -1;
	__u64 m = mv;
	BOUND(m, 0xff);
	if (m > 0 && m <= MAX_MOVE) {
		if (bpf_skb_load_bytes(skb, L3 + fix + n, s->mv, m) ||
		    bpf_skb_store_bytes(skb, L3 + fix, s->mv, m, 0))
			return -2;
	}
	return 0;
}

/* shrink removes n bytes at offset at, moving the bytes between the fixed
 * IP header (fix bytes) and at up. */
static __always_inline int shrink(struct __sk_buff *skb, struct scratch *s, __u32 at, __u32 n, __u32 fix)
{
	fix &= 0x3c;
	__u32 mv = at - (L3 + fix);
	if (mv > MAX_MOVE)
		return -1;
	__u64 m = mv;
	BOUND(m, 0xff);
	if (m > 0 && m <= MAX_MOVE) {
		if (bpf_skb_load_bytes(skb, L3 + fix, s->mv, m) ||
		    bpf_skb_store_bytes(skb, L3 + fix + n, s->mv, m, 0))
			return -1;
	}
	if (bpf_skb_adjust_room(skb, -(__s32)n, BPF_ADJ_ROOM_NET, 0))
		return -2;
	return 0;
}

/* ---- buffer occupancy ---- */

/* dev_backlog returns the bytes queued on the packet's egress device, all
 * its tx queues (up to MAX_TXQ): their qdiscs (a root qdisc the tx queues
 * share counted once) and BQL's bytes in flight; 0xffffffff when unknown
 * (per-CPU qdisc counters, see txq_bytes). The buffer occupancy
 * metadata, buffer id 0. */
GLOBAL __u32 dev_backlog(struct __sk_buff *skb)
{
	if (!skb)
		return 0xffffffff;
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	struct net_device *dev = k->dev;
	if (!dev)
		return 0xffffffff;
	__u32 n = dev->real_num_tx_queues;
	__u64 sum = 0;
	for (__u32 q = 0; q < MAX_TXQ && q < n; q++) {
		__u32 shared = 0;
		__s64 b = txq_bytes(dev, q, &shared);
		if (b < 0)
			return 0xffffffff;
		sum += b;
		if (shared)
			sum -= dev->qdisc->qstats.backlog; /* counted at queue 0 */
	}
	return sum < 0xffffff ? sum : 0xffffff;
}

/* need_buf reads the buffer occupancy into s->h once per packet. */
static __always_inline void need_buf(struct __sk_buff *skb, struct scratch *s)
{
	struct hop *h = &s->h;
	if (h->valid & INST_BUFFER)
		return;
	__u32 b = dev_backlog(skb);
	if (b != 0xffffffff) {
		h->buf = b;
		h->valid |= INST_BUFFER;
	}
}

/* need_inst measures what the instruction bitmap inst asks of this hop
 * beyond the node id and interfaces: queue, time, utilisation, buffer. */
static __always_inline void need_inst(struct __sk_buff *skb, struct scratch *s, __u16 inst)
{
	if (inst & INST_QUEUE)
		need_occ(skb, s);
	if (inst & INST_TIME)
		need_qtime(skb, s);
	if (inst & INST_EGRESS_TX_UTIL)
		need_util(s);
	if (inst & INST_BUFFER)
		need_buf(skb, s);
}

/* ---- events ---- */

GLOBAL int emit(struct __sk_buff *skb, struct scratch *s, __u32 kind, __u32 flags)
{
	if (!s)
		return -1;
	struct event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		cnt(s, C_EV_LOST);
		return -1;
	}
	struct hop *h = &s->h;
	need_qtime(skb, s);
	need_util(s);
	need_buf(skb, s);
	ev->now = h->ts_out;
	/* Fields unset without their valid bit (intd_transit and intd_sink
	 * set up only what they use) go out as 0. */
	ev->ts_in = (h->valid & INST_INGRESS_TIMESTAMP) ? h->ts_in : 0;
	ev->in_ifindex = h->in_ifindex;
	ev->out_ifindex = h->out_ifindex;
	ev->hop_latency = (h->valid & INST_HOP_LATENCY) ? h->latency : 0;
	ev->queue_occ = (h->qid << 24) | (h->occ & 0xffffff);
	ev->l2_in = h->l2_in;
	ev->l2_out = h->l2_out;
	ev->l1_in = h->l1_in;
	ev->l1_out = h->l1_out;
	ev->valid = h->valid;
	ev->node_id = h->node;
	ev->tx_util = (h->valid & INST_EGRESS_TX_UTIL) ? h->util : 0;
	ev->buf_occ = (h->valid & INST_BUFFER) ? h->buf : 0;
	ev->kind = kind;
	ev->flags = flags;
	ev->drop_reason = 0;
	ev->tcp_flags = s->p.proto == IPPROTO_TCP ? s->p.tcp_flags : 0;
	ev->inst = (flags & EVF_INST) ? s->req : 0;
	ev->ds_inst = (flags & EVF_INST) ? s->req_ds : 0;
	ev->domain = (flags & EVF_INST) ? s->req_ds >> 16 : 0;
	ev->pad = 0;
	ev->l3_off = L3;
	__u32 len = skb->len;
	ev->pkt_len = len;
	if (len > MAX_CAP)
		len = MAX_CAP;
	ev->cap_len = 0;
	if (len > 0 && len <= MAX_CAP && bpf_skb_load_bytes(skb, 0, ev->data, len) == 0)
		ev->cap_len = len;
	/* Waking the reader costs microseconds per event: wake it at most
	 * once a millisecond per CPU, or when a quarter of the ring is
	 * used; it polls every 10 ms for what is left. */
	__u64 wake = BPF_RB_NO_WAKEUP;
	if (h->ts_out - s->last_wake > 1000000 || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (1 << 18)) {
		wake = BPF_RB_FORCE_WAKEUP;
		s->last_wake = h->ts_out;
	}
	bpf_ringbuf_submit(ev, wake);
	cnt(s, C_EV_SENT);
	return 0;
}

/* DECAY_STEP: the band's deviation decays once per this many ns (its
 * memory is time, not packets). */
#define DECAY_SHIFT 23
#define DECAY_STEP (1ULL << DECAY_SHIFT)

/* learn updates the band b with the packet's latencies (s->flat) at time
 * now and returns 1 when one left it by more than lat_factor deviations
 * and lat_floor ns; such a latency becomes the mean. Integer arithmetic
 * equal to the report pipeline's, so both dataplanes judge alike. */
static __always_inline int learn(struct flow_state *b, struct scratch *s, struct cfg *c, __u64 now)
{
	__u32 n = s->nflat;
	if (b->n != n) {
		int changed = b->n != 0;
		b->n = n;
		b->decayed = now;
		for (int i = 0; i < 8; i++) {
			if (i >= n)
				break;
			b->mean[i] = s->flat[i];
			b->dev[i] = s->flat[i] / 4;
		}
		return changed;
	}
	/* Decay steps due since the last (at most 128: half the excess). */
	__s64 steps = 0;
	__s64 el = (__s64)(now - b->decayed);
	if (el < 0 || el >= 128 * (__s64)DECAY_STEP) {
		steps = el < 0 ? 0 : 128;
		b->decayed = now;
	} else if (el >= (__s64)DECAY_STEP) {
		steps = (__s64)((__u64)el >> DECAY_SHIFT);
		b->decayed += (__u64)steps << DECAY_SHIFT; /* the rest of a step counts next time */
	}
	int out = 0;
	for (int i = 0; i < 8; i++) {
		if (i >= n)
			break;
		__s64 x = s->flat[i];
		__s64 d = x - (__s64)b->mean[i];
		__s64 ad = d < 0 ? -d : d;
		__s64 lim = (__s64)c->lat_factor * b->dev[i];
		if (lim < (__s64)c->lat_floor)
			lim = c->lat_floor;
		if (ad > lim) {
			out = 1;
			b->mean[i] = x;
			b->dev[i] = (__u32)((__s64)b->dev[i] + ((ad - (__s64)b->dev[i]) >> 5));
			continue;
		}
		b->mean[i] = (__u32)((__s64)b->mean[i] + (d >> 3));
		__s64 dv = b->dev[i];
		if (ad > dv)
			b->dev[i] = (__u32)(dv + ((ad - dv) >> 6));
		else
			b->dev[i] = (__u32)(dv - (((dv - ad) * steps) >> 8));
	}
	return out;
}

static __always_inline void flat_add(struct scratch *s, __u32 lat)
{
	__u32 n = s->nflat;
	if (n < 8) {
		s->flat[n & 7] = lat;
		s->nflat = n + 1;
	}
}

/* flow_key_hash is a flow key's digest in flows: its set (high bits) and
 * a tag compared before the whole key, in two independent
 * multiplications. */
static __always_inline __u64 flow_key_hash(const struct flow_key *k)
{
	__u64 a = ((__u64)afold(k->src) << 32) | afold(k->dst);
	__u64 b = ((__u64)k->sport << 32) | ((__u64)k->dport << 16) | k->proto;
	a *= 0x9e3779b97f4a7c15ULL;
	b = (b ^ k->inner) * 0xbf58476d1ce4e5b9ULL;
	return a ^ (a >> 29) ^ b;
}

static __always_inline int flow_key_eq(const struct flow_key *a, const struct flow_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 diff = 0;
	for (int i = 0; i < sizeof(*a) / 8; i++)
		diff |= x[i] ^ y[i];
	return diff == 0;
}

/* filter is the per-flow smart filter: a flow is reported when new, when
 * flow_interval has passed, or when the digest of its ports, path (node ids
 * of the INT stack) and latency buckets changed (F_ADAPTIVE: when a
 * latency left the flow's learned band). It returns FL_* bits. */
enum { FL_REPORT = 1, FL_JUDGED = 2, FL_ANOMALY = 4 };
static __always_inline int filter(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return 0;
	struct pkt *p = &s->p;
	struct hop *h = &s->h;
	struct cfg *c = &s->c;
	need_qtime(skb, s);
	struct flow_key *k = &s->fk;
	__u64 *kw = (__u64 *)k;
	const __u64 *sa = (const __u64 *)p->saddr, *da = (const __u64 *)p->daddr;
	kw[0] = sa[0];
	kw[1] = sa[1];
	kw[2] = da[0];
	kw[3] = da[1];
	kw[4] = key_ports(p->sport, p->dport, p->proto);
	kw[5] = 0; /* ingress port, ICMP: not the filter's */
	kw[6] = p->idigest;
	s->fkh = flow_key_hash(k);
	__u64 d = 0x5bd1e995;
	__u32 lat_shift = c->lat_shift & 31;
	int adaptive = (c->flags & F_ADAPTIVE) != 0;
	if (c->flags & F_PORT_CHANGE)
		d = hash64(d, ((__u64)h->in_ifindex << 32) | h->out_ifindex);
	s->nflat = 1;
	s->flat[0] = (h->valid & INST_HOP_LATENCY) ? h->latency : 0;
	if ((h->valid & INST_HOP_LATENCY) && !adaptive)
		d = hash64(d, h->latency >> lat_shift);
	if (p->shim && p->itype == INT_TYPE_MD && p->hop_ml) {
		/* Up to 8 hops of the stack: node ids and latencies. */
		__u32 stack = p->shim + 16;
		__u32 end = p->shim + 4 + (__u32)p->shim_words * 4;
		__u32 step = (__u32)p->hop_ml * 4;
		__u32 latw = ((p->inst & INST_NODE_ID) ? 1 : 0) + ((p->inst & INST_L1_INTERFACES) ? 1 : 0);
		/* Up to 512 bytes of the stack walked in place when they are
		 * in the linear part, else loaded in one helper call. */
		__u64 len = end > stack ? end - stack : 0;
		if (len > 512)
			len = 512;
		BOUND(len, 0x3ff);
		__u8 *pd = (void *)(long)skb->data, *pe = (void *)(long)skb->data_end;
		__u32 so = stack & 0x3ff;
		if (len >= 4 && len <= 512 && pd + so + len <= pe) {
			__u8 *base = pd + so;
			for (int i = 0; i < 8; i++) {
				__u32 at = i * step;
				if (at + step > len)
					break;
				__u8 *q = base + (at & 0x1ff);
				asm volatile("" : "+r"(q));
				if (q + 4 > pe)
					break;
				__u32 w;
				if ((c->flags & F_PATH_CHANGE) && (p->inst & INST_NODE_ID)) {
					w = *(__u32 *)q;
					d = hash64(d, w);
				}
				if (p->inst & INST_HOP_LATENCY) {
					q = base + ((at + latw * 4) & 0x3ff);
					asm volatile("" : "+r"(q));
					if (q + 4 > pe)
						break;
					w = *(__u32 *)q;
					if (adaptive)
						flat_add(s, bpf_ntohl(w));
					else
						d = hash64(d, bpf_ntohl(w) >> lat_shift);
				}
			}
		} else if (len >= 4 && len <= 512 && bpf_skb_load_bytes(skb, stack, s->buf, len) == 0) {
			for (int i = 0; i < 8; i++) {
				__u32 at = i * step;
				if (at + step > len)
					break;
				__u32 w;
				if ((c->flags & F_PATH_CHANGE) && (p->inst & INST_NODE_ID)) {
					__builtin_memcpy(&w, &s->buf[at & 0x1fc], 4);
					d = hash64(d, w);
				}
				if (p->inst & INST_HOP_LATENCY) {
					__builtin_memcpy(&w, &s->buf[(at + latw * 4) & 0x1fc], 4);
					if (adaptive)
						flat_add(s, bpf_ntohl(w));
					else
						d = hash64(d, bpf_ntohl(w) >> lat_shift);
				}
			}
		}
	}
	int judged = adaptive ? FL_JUDGED : 0;
	__u64 fh = s->fkh;
	__u32 si = (fh >> 48) & (FLOW_SETS - 1);
	struct flow_set *set = bpf_map_lookup_elem(&flows, &si);
	if (!set)
		return FL_REPORT | judged;
	__u32 hit = FLOW_WAYS, vic = 0;
	__u64 oldest = ~0ULL;
	for (__u32 i = 0; i < FLOW_WAYS; i++) {
		struct flow_state *w = &set->way[i];
		if (w->seen && w->hash == fh && flow_key_eq(&w->key, k)) {
			hit = i;
			break;
		}
		if (w->seen < oldest) {
			oldest = w->seen;
			vic = i;
		}
	}
	if (hit < FLOW_WAYS) {
		struct flow_state *st = &set->way[hit & (FLOW_WAYS - 1)];
		st->seen = h->ts_out;
		int out = adaptive && learn(st, s, c, h->ts_out) ? FL_ANOMALY : 0;
		if (!out && st->digest == d && h->ts_out - st->last < c->flow_interval)
			return judged;
		st->digest = d;
		st->last = h->ts_out;
		return FL_REPORT | judged | out;
	}
	struct flow_state *ns = &set->way[vic & (FLOW_WAYS - 1)];
	__builtin_memset(ns, 0, sizeof(*ns));
	ns->key = *k;
	ns->hash = fh;
	ns->seen = h->ts_out;
	ns->last = h->ts_out;
	ns->digest = d;
	if (adaptive)
		learn(ns, s, c, h->ts_out);
	return FL_REPORT | judged;
}

static __always_inline void flow_event(struct __sk_buff *skb, struct scratch *s, __u32 flags)
{
	int tcp_trigger = s->p.proto == IPPROTO_TCP && (s->p.tcp_flags & 0x07);
	/* TCP flag packets run the filter too: its state then follows every
	 * packet, as the report pipeline's does. */
	int fl = (flags & EVF_REPORT_ALL) ? 0 : filter(skb, s);
	if (!(flags & EVF_REPORT_ALL) && !tcp_trigger && !(fl & FL_REPORT)) {
		cnt2(s, C_FLOW_GEN, C_EV_SUPPRESSED); /* one lookup for most packets */
		return;
	}
	cnt(s, C_FLOW_GEN);
	if (fl & FL_ANOMALY)
		flags |= EVF_LAT_ANOMALY;
	emit(skb, s, EV_FLOW, flags);
}

/* ---- watchlist ---- */

/* sample applies the entry's packet-interval to the flow's cache entry mv
 * (shared by all CPUs; a race lets two packets act, which is harmless):
 * the flow op acts on the first packet after the interval since it last
 * acted, and leaves the others alone. */
static __always_inline void sample(struct scratch *s, struct wl_cache *mv)
{
	if (!mv)
		return; /* evicted meanwhile: act, as on a new flow */
	need_time(s);
	__u64 last = mv->last_act;
	if (last && s->now - last < (__u64)mv->interval_us * 1000) {
		s->unsampled = s->op;
		s->op = OP_NOP;
		return;
	}
	mv->last_act = s->now;
}

/* bm_and intersects acc with b (nothing when b is missing). */
static __always_inline void bm_and(__u64 *acc, struct wl_bm *b)
{
	if (!b) {
		for (int j = 0; j < WL_WORDS; j++)
			acc[j] = 0;
		return;
	}
	for (int j = 0; j < WL_WORDS; j++)
		acc[j] &= b->w[j];
}

static __always_inline struct wl_bm *small_set(__u32 half, __u32 i)
{
	__u32 k = half * WLS_N + i;
	return bpf_map_lookup_elem(&wl_small, &k);
}

static __always_inline struct wl_bm *prefix_set(struct scratch *s, __u32 tag, __u32 *addr)
{
	/* The key lives in the scratch map: wl_match's stack stays small. */
	struct wl_lpm_key *lk = &s->lk;
	lk->prefixlen = 8 + 128;
	lk->tag = tag;
	__builtin_memcpy(lk->addr, addr, 16);
	__u32 *i = bpf_map_lookup_elem(&wl_lpm, lk);
	if (!i)
		return 0;
	__u32 k = *i;
	return bpf_map_lookup_elem(&wl_pfx, &k);
}

static __always_inline struct wl_bm *port_set(__u32 region, __u16 port)
{
	__u32 k = (region * WL_PORTS + port) / 4;
	struct wl_port4 *p4 = bpf_map_lookup_elem(&wl_port, &k);
	if (!p4)
		return 0;
	__u32 iv = p4->ival[port & 3];
	if (iv >= WL_IVAL)
		return 0;
	k = region * WL_IVAL + iv;
	return bpf_map_lookup_elem(&wl_ival, &k);
}

/* PKT_AT is a pointer to n (a constant) bytes at offset off of the
 * packet: in place when the linear part holds them, else copied into
 * s->buf; 0 when the packet is shorter. */
#define PKT_AT(skb, s, off, n)                                                  \
	({                                                                      \
		__u8 *_d = (void *)(long)(skb)->data, *_e = (void *)(long)(skb)->data_end; \
		__u32 _o = (off);                                               \
		__u8 *_r = 0;                                                   \
		if (_o < 256) {                                                 \
			__u8 *_q = _d + (_o & 0xff);                            \
			if (_q + (n) <= _e)                                     \
				_r = _q;                                        \
		}                                                               \
		if (!_r && !bpf_skb_load_bytes(skb, _o, (s)->buf, n))           \
			_r = (s)->buf;                                          \
		_r;                                                             \
	})

/* TUN_AT is PKT_AT for inner_ip and tun_digest: n bytes at off in the
 * packet in tc, or (copy) in intd_kfree_skb's copy cp of the first have
 * bytes of a dropped packet. copy is a constant: each caller gets its own
 * code. */
#define TUN_AT(off, n)                                                                \
	(copy ? ((off) + (n) <= have ? cp + ((off) & (DROP_COPY - 1)) : (__u8 *)0) \
	      : PKT_AT(skb, s, off, n))

/* inner_ip parses the IPv4 or IPv6 packet at off (up to end, the outer
 * datagram's end) into in as wire's parser does: lengths within the
 * datagram, ports of TCP (with a valid data offset) and UDP, none for
 * fragments after the first; IPv6 extension headers stepped over (at
 * most 4). It returns 0 on success. */
static __always_inline int inner_ip(struct __sk_buff *skb, struct scratch *s, const int copy, __u8 *cp, __u32 have,
				    struct inner *in, __u32 off, __u32 end, int v6)
{
	__u8 *b = 0;
	__u32 l4, iend, frag = 0;
	__u8 nh;
	if (v6) {
		if (off + 40 > end || !(b = TUN_AT(off, 40)) || (b[0] >> 4) != 6)
			return -1;
		iend = off + 40 + (((__u32)b[4] << 8) | b[5]);
		if (iend > end)
			return -1;
		__builtin_memcpy(in->saddr, &b[8], 16);
		__builtin_memcpy(in->daddr, &b[24], 16);
		in->v6 = 1;
		nh = b[6];
		l4 = off + 40;
		for (int i = 0; i < 4; i++) {
			if (nh != 0 && nh != 43 && nh != 60 && nh != 44)
				break;
			if (l4 + 8 > iend || !(b = TUN_AT(l4, 8)))
				return -1;
			if (nh == 44) {
				nh = b[0];
				l4 += 8;
				if ((((__u16)b[2] << 8) | b[3]) & 0xfff8) {
					frag = 1;
					break;
				}
				continue;
			}
			nh = b[0];
			l4 += 8 * ((__u32)b[1] + 1);
		}
		if (!frag && (nh == 0 || nh == 43 || nh == 60 || nh == 44))
			return -1;
	} else {
		if (off + 20 > end || !(b = TUN_AT(off, 20)) || (b[0] >> 4) != 4)
			return -1;
		__u32 ihl = (b[0] & 0xf) * 4, total = ((__u32)b[2] << 8) | b[3];
		if (ihl < 20 || total < ihl || off + total > end)
			return -1;
		iend = off + total;
		in->saddr[0] = in->saddr[1] = in->daddr[0] = in->daddr[1] = 0;
		in->saddr[2] = in->daddr[2] = bpf_htonl(0xffff);
		__builtin_memcpy(&in->saddr[3], &b[12], 4);
		__builtin_memcpy(&in->daddr[3], &b[16], 4);
		in->v6 = 0;
		nh = b[9];
		frag = ((((__u16)b[6] << 8) | b[7]) & 0x1fff) != 0;
		l4 = off + ihl;
	}
	in->proto = nh;
	in->sport = in->dport = 0;
	if (frag)
		return 0;
	if (l4 > iend)
		return -1;
	if (nh == IPPROTO_TCP) {
		if (l4 + 20 > iend || !(b = TUN_AT(l4, 20)))
			return -1;
		__u32 doff = (b[12] >> 4) * 4;
		if (doff < 20 || l4 + doff > iend)
			return -1;
	} else if (nh == IPPROTO_UDP) {
		if (l4 + 8 > iend || !(b = TUN_AT(l4, 8)))
			return -1;
	} else if (nh == IPPROTO_GRE) {
		/* GRE inside: wire checks its header. */
		if (l4 + 4 > iend || !(b = TUN_AT(l4, 4)))
			return -1;
		__u16 fl = ((__u16)b[0] << 8) | b[1];
		__u32 n = 4 + ((fl & 0x8000) ? 4 : 0) + ((fl & 0x2000) ? 4 : 0) + ((fl & 0x1000) ? 4 : 0);
		if ((fl & 0x4007) || l4 + n > iend)
			return -1;
		return 0;
	} else {
		return 0;
	}
	in->sport = ((__u16)b[0] << 8) | b[1];
	in->dport = ((__u16)b[2] << 8) | b[3];
	return 0;
}

/* tun_digest finds the IP packet inside a VXLAN, VXLAN-GPE, Geneve, GRE
 * (IPv4 or IPv6) or GTP-U G-PDU tunnel of p (its outer L4 header, IP
 * protocol and UDP destination port; end the outer datagram's end), as
 * wire.FindInner does, into in (in->tun set when there is one), and
 * returns the digest of the tunnel and inner flow (0: none). It reads the
 * packet in tc, or (copy) the copy cp of a dropped one's first have bytes.
 */
static __always_inline __u64 tun_digest(struct __sk_buff *skb, struct scratch *s, const int copy, __u8 *cp, __u32 have,
					struct inner *in, struct pkt *p, __u32 end)
{
	__u8 *b = 0;
	__u32 at, id = 0, kind, eth = 0;
	__u16 et = 0;
	if (p->ipproto == IPPROTO_GRE) {
		at = p->l4;
		if (at + 4 > end || !(b = TUN_AT(at, 4)))
			return 0;
		__u16 fl = ((__u16)b[0] << 8) | b[1];
		et = ((__u16)b[2] << 8) | b[3];
		if (fl & 0x4007)
			return 0; /* source routing or GRE version != 0 */
		at += (fl & 0x8000) ? 8 : 4;
		if (fl & 0x2000) {
			if (at + 4 > end || !(b = TUN_AT(at, 4)))
				return 0;
			id = ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
			at += 4;
		}
		if (fl & 0x1000)
			at += 4;
		kind = TUNK_GRE;
	} else if (p->ipproto == IPPROTO_UDP) {
		__u32 u = p->l4 + 8;
		if (u + 8 > end || !(b = TUN_AT(u, 8)))
			return 0;
		at = u + 8;
		id = ((__u32)b[4] << 16) | ((__u32)b[5] << 8) | b[6];
		switch (p->dport) {
		case PORT_VXLAN:
			kind = TUNK_VXLAN;
			eth = 1;
			break;
		case PORT_VXLAN_GPE:
			kind = TUNK_GPE;
			if (b[3] == 3)
				eth = 1;
			else if (b[3] != 1 && b[3] != 2)
				return 0;
			break;
		case PORT_GENEVE:
			kind = TUNK_GENEVE;
			at += (b[0] & 0x3f) * 4;
			et = ((__u16)b[2] << 8) | b[3];
			break;
		case PORT_GTPU: {
			/* TS 29.281 §5.1: version 1, PT 1, G-PDU; with E, S or
			 * PN the sequence number, N-PDU number and next
			 * extension header type; with E the extension headers
			 * (length in 4-octet units, the last octet the next
			 * type) up to a next type of 0. */
			kind = TUNK_GTPU;
			__u8 f = b[0];
			if ((f >> 5) != 1 || !(f & 0x10) || b[1] != 255)
				return 0;
			id = ((__u32)b[4] << 24) | ((__u32)b[5] << 16) | ((__u32)b[6] << 8) | b[7];
			if (!(f & 7))
				break;
			if (at + 4 > end || !(b = TUN_AT(at, 4)))
				return 0;
			__u8 next = b[3];
			at += 4;
			if (!(f & 4))
				break;
			for (int i = 0; i < GTPU_MAX_EXT; i++) {
				if (!next)
					break;
				if (at + 1 > end || !(b = TUN_AT(at, 1)) || !b[0])
					return 0;
				__u32 n = (__u32)b[0] * 4;
				if (at + n > end || !(b = TUN_AT(at + n - 1, 1)))
					return 0;
				next = b[0];
				at += n;
			}
			if (next)
				return 0;
			break;
		}
		default:
			return 0;
		}
	} else {
		return 0;
	}
	if (kind == TUNK_GRE || kind == TUNK_GENEVE) {
		if (et == 0x6558)
			eth = 1;
		else if (et != 0x0800 && et != 0x86dd)
			return 0;
	}
	if (at >= end)
		return 0;
	int v6;
	if (eth) {
		/* Ethernet, up to two VLAN tags, then IP. */
		if (at + 14 > end || !(b = TUN_AT(at, 14)))
			return 0;
		et = ((__u16)b[12] << 8) | b[13];
		at += 14;
		for (int i = 0; i < 2; i++) {
			if (et != 0x8100 && et != 0x88a8)
				break;
			if (at + 4 > end || !(b = TUN_AT(at, 4)))
				return 0;
			et = ((__u16)b[2] << 8) | b[3];
			at += 4;
		}
		if (et != 0x0800 && et != 0x86dd)
			return 0;
		v6 = et == 0x86dd;
	} else {
		if (!(b = TUN_AT(at, 1)))
			return 0;
		if ((b[0] >> 4) != 4 && (b[0] >> 4) != 6)
			return 0;
		v6 = (b[0] >> 4) == 6;
	}
	if (inner_ip(skb, s, copy, cp, have, in, at, end, v6))
		return 0;
	in->id = id;
	in->tun = kind;
	__u64 h = hash64(0x51ed270b, ((__u64)kind << 32) | id);
	for (int i = 0; i < 4; i++)
		h = hash64(h, ((__u64)in->saddr[i] << 32) | in->daddr[i]);
	h = hash64(h, ((__u64)in->sport << 32) | ((__u64)in->dport << 16) | in->proto);
	return h | 1;
}

/* inner_parse is tun_digest of the packet in tc into s->in and
 * s->p.idigest. Global: verified once, apart from intd_egress. */
GLOBAL int inner_parse(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return 0;
	struct pkt *p = &s->p;
	s->in.tun = 0;
	p->idigest = 0;
	__u32 end = L3 + p->ip_len;
	if (end > skb->len)
		return 0;
	p->idigest = tun_digest(skb, s, 0, 0, 0, &s->in, p, end);
	return 0;
}

/* drop_digest is tun_digest of intd_kfree_skb's copy of a dropped packet
 * (have bytes of the outer datagram, which ends at end; its L4 header at
 * l4, protocol << 16 | UDP destination port in pd). Global: the verifier
 * walks it once, not again from every state the tracer calls it in. */
GLOBAL __u64 drop_digest(struct drop_copy *dc, __u32 have, __u32 end, __u32 l4, __u32 pd)
{
	if (!dc)
		return 0;
	struct inner in;
	struct pkt p = {.l4 = l4, .ipproto = pd >> 16, .dport = pd & 0xffff};
	return tun_digest(0, 0, 1, dc->b, have, &in, &p, end);
}

/* ctz64 is the index of the lowest set bit of x (x != 0). */
static __always_inline __u32 ctz64(__u64 x)
{
	x &= -x;
	__u32 n = 0;
	if (x & 0xffffffff00000000ULL)
		n += 32;
	if (x & 0xffff0000ffff0000ULL)
		n += 16;
	if (x & 0xff00ff00ff00ff00ULL)
		n += 8;
	if (x & 0xf0f0f0f0f0f0f0f0ULL)
		n += 4;
	if (x & 0xccccccccccccccccULL)
		n += 2;
	if (x & 0xaaaaaaaaaaaaaaaaULL)
		n += 1;
	return n;
}

/* wl_inner intersects acc with the sets of the packet's ICMP type and
 * code (s->icmp) and of its tunnel and inner headers (s->in), for
 * wl_match (F_WL_ICMP, F_WL_INNER). */
static __always_inline void wl_inner(struct scratch *s, __u64 *acc, __u32 half)
{
	struct cfg *c = &s->c;
	struct inner *in = &s->in;
	if (c->flags & F_WL_ICMP) {
		bm_and(acc, small_set(half, WLS_ICMP_TYPE + (s->icmp >> 8)));
		bm_and(acc, small_set(half, WLS_ICMP_CODE + (s->icmp & 0xff)));
	}
	if (!(c->flags & F_WL_INNER))
		return;
	/* Entries without a tunnel match are in every tunnel set. */
	bm_and(acc, small_set(half, WLS_TUN + (in->tun & 7)));
	if (!in->tun)
		return;
	if (c->flags & F_WL_IFAM)
		bm_and(acc, small_set(half, WLS_IFAM + (in->v6 ? 1 : 0)));
	if (c->flags & F_WL_IPROTO)
		bm_and(acc, small_set(half, WLS_IPROTO + in->proto));
	if (c->flags & F_WL_TID) {
		s->tk = ((__u64)half << 32) | in->id;
		struct wl_bm *b = bpf_map_lookup_elem(&wl_tid, &s->tk);
		bm_and(acc, b ? b : small_set(half, WLS_TID_ANY));
	}
	if (c->wl_use & WLU_ISRC)
		bm_and(acc, prefix_set(s, WL_INNER + half * 2, in->saddr));
	if (c->wl_use & WLU_IDST)
		bm_and(acc, prefix_set(s, WL_INNER + half * 2 + 1, in->daddr));
	if (c->wl_use & WLU_ISPORT)
		bm_and(acc, port_set(WL_INNER + half * 2, in->sport));
	if (c->wl_use & WLU_IDPORT)
		bm_and(acc, port_set(WL_INNER + half * 2 + 1, in->dport));
}

/* wl_match returns the index (priority order) of the first watchlist
 * entry of the active half that matches the parsed packet as it came in
 * through ifindex s->wl_in, or WL_NONE.
 * Global: verified once, apart from intd_egress. */
GLOBAL int wl_match(struct scratch *s)
{
	if (!s)
		return WL_NONE;
	struct pkt *p = &s->p;
	struct cfg *c = &s->c;
	__u32 half = c->wl_base & 1;
	__u64 *acc = s->wl_acc;
	struct wl_bm *b = small_set(half, WLS_FAM + (p->v6 ? 1 : 0));
	if (!b)
		return WL_NONE;
	for (int j = 0; j < WL_WORDS; j++)
		acc[j] = b->w[j];
	if (c->wl_use & WLU_PROTO)
		bm_and(acc, small_set(half, WLS_PROTO + p->proto));
	if (c->flags & F_WL_DSCP)
		bm_and(acc, small_set(half, WLS_DSCP + ((p->tos >> 2) & 63)));
	if (c->flags & F_WL_FLAGS)
		bm_and(acc, small_set(half, WLS_FLAGS + (p->proto == IPPROTO_TCP ? p->tcp_flags : 0)));
	if (c->flags & F_WL_IFX) {
		__u64 ik = ((__u64)half << 32) | s->wl_in;
		b = bpf_map_lookup_elem(&wl_ifx, &ik);
		bm_and(acc, b ? b : small_set(half, WLS_IFX_ANY));
	}
	/* Trie lookups cost most: each only when some entry has such a
	 * prefix. */
	if (c->wl_use & WLU_SRC)
		bm_and(acc, prefix_set(s, half * 2, p->saddr));
	if (c->wl_use & WLU_DST)
		bm_and(acc, prefix_set(s, half * 2 + 1, p->daddr));
	if (c->wl_use & WLU_SPORT)
		bm_and(acc, port_set(half * 2, p->sport));
	if (c->wl_use & WLU_DPORT)
		bm_and(acc, port_set(half * 2 + 1, p->dport));
	if (s->in.tun && !(c->flags & F_WL_ICMP)) {
		/* A tunnelled packet whose first outer candidate has no
		 * tunnel match (it is in every inner set): decided without
		 * the inner sets. */
		b = small_set(half, WLS_TUN);
		for (int j = 0; j < WL_WORDS; j++) {
			__u64 w = acc[j];
			if (!w)
				continue;
			w &= -w;
			if (b && (b->w[j] & w))
				return j * 64 + ctz64(w);
			break;
		}
	}
	if (c->flags & (F_WL_INNER | F_WL_ICMP))
		wl_inner(s, acc, half);
	for (int j = 0; j < WL_WORDS; j++) {
		if (acc[j])
			return j * 64 + ctz64(acc[j]);
	}
	return WL_NONE;
}

/* classify looks the packet up in the watchlist (through the flow cache),
 * copies the matching entry into s->e and its effective flow op into s->op.
 * It returns 1 on a match. */
static __always_inline int classify(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return 0;
	struct pkt *p = &s->p;
	struct cfg *c = &s->c;
	s->op = OP_NOP;
	s->entry_op = OP_NOP;
	if (!c->wl_count)
		return 0;
	struct flow_key k = {.sport = p->sport, .dport = p->dport, .proto = p->proto,
			     .in_ifindex = skb->ingress_ifindex};
	__builtin_memcpy(k.src, p->saddr, 16);
	__builtin_memcpy(k.dst, p->daddr, 16);
	if (c->flags & F_WL_DSCP)
		k.dscp = p->tos >> 2;
	if (c->flags & F_WL_FLAGS)
		k.tcp_flags = p->proto == IPPROTO_TCP ? p->tcp_flags : 0;
	s->icmp = 0;
	if ((c->flags & F_WL_ICMP) && (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) &&
	    p->l4 + 2 <= L3 + p->ip_len) {
		__u8 ic[2];
		if (!bpf_skb_load_bytes(skb, p->l4, ic, 2))
			s->icmp = ((__u16)ic[0] << 8) | ic[1];
	}
	k.icmp = s->icmp;
	s->in.tun = 0;
	/* Only GRE and UDP to a tunnel port can be tunnels (inner_parse's
	 * cases): other packets skip its call. */
	if ((c->flags & F_WL_INNER) &&
	    (p->ipproto == IPPROTO_GRE ||
	     (p->ipproto == IPPROTO_UDP && (p->dport == PORT_VXLAN || p->dport == PORT_VXLAN_GPE ||
					    p->dport == PORT_GENEVE || p->dport == PORT_GTPU)))) {
		inner_parse(skb, s);
		k.inner = p->idigest;
	}
	__u32 base = c->wl_base ? MAX_WL : 0;
	s->miss = 0;
	s->unsampled = 0;
	struct wl_cache *wc = &s->last;
	struct flow_key *lk = &s->last_key;
	__u32 adiff = 0;
	for (int i = 0; i < 4; i++)
		adiff |= (lk->src[i] ^ k.src[i]) | (lk->dst[i] ^ k.dst[i]);
	if (wc->gen != c->wl_gen || adiff || lk->sport != k.sport ||
	    lk->dport != k.dport || lk->proto != k.proto || lk->dscp != k.dscp || lk->tcp_flags != k.tcp_flags ||
	    lk->in_ifindex != k.in_ifindex || lk->icmp != k.icmp || lk->inner != k.inner) {
		wc = bpf_map_lookup_elem(&wl_cache_map, &k);
		if (wc && wc->gen == c->wl_gen) {
			s->last = *wc;
			s->last_key = k;
		}
	}
	if (wc && wc->gen == c->wl_gen) {
		if (wc->entry == WL_NONE)
			return 0;
		s->e.session = wc->session;
		s->e.act = wc->act;
		s->e.stats = wc->stats;
		s->op = wc->flow_op;
		s->entry_op = wc->entry_op;
		if (wc->interval_us && s->op != OP_NOP)
			sample(s, wc == &s->last ? bpf_map_lookup_elem(&wl_cache_map, &k) : wc);
		return 1;
	}
	s->miss = 1;
	__u32 hit = WL_NONE;
	__u32 i = WL_NONE;
	int tel = 0;
	if ((c->flags & F_TELEMETRY) && p->proto == IPPROTO_UDP) {
		/* Telemetry reports to a collector (this node's or another
		 * node's) are never watched. */
		struct tel_key tk = {.port = p->dport};
		__builtin_memcpy(tk.addr, p->daddr, 16);
		tel = bpf_map_lookup_elem(&telemetry, &tk) != 0;
	}
	if (!tel) {
		s->wl_in = skb->ingress_ifindex;
		i = wl_match(s);
	}
	if (i < MAX_WL) {
		__u32 idx = base + i;
		struct wl_entry *e = bpf_map_lookup_elem(&watchlist, &idx);
		if (e) {
			s->e = *e;
			hit = i;
		}
	}
	struct wl_cache nc = {.gen = c->wl_gen, .entry = hit}; /* flow_op OP_NOP (0) */
	/* Here wc is the flow's stale cache entry, if any: its last_act
	 * carries the sampling over watchlist changes. */
	__u64 prev = wc ? wc->last_act : 0;
	if (hit != WL_NONE) {
		nc.session = s->e.session;
		nc.act = s->e.act;
		nc.stats = s->e.stats;
		nc.flow_op = s->e.flow_op;
		nc.entry_op = s->e.flow_op;
		if (nc.flow_op != OP_NOP && s->e.sample_pct < 100 && (flow_hash(&k) >> 32) % 100 >= s->e.sample_pct)
			nc.flow_op = OP_NOP;
		nc.interval_us = s->e.interval_us;
		nc.last_act = prev;
	}
	s->op = nc.flow_op;
	s->entry_op = nc.entry_op;
	if (nc.interval_us && nc.flow_op != OP_NOP)
		sample(s, &nc);
	bpf_map_update_elem(&wl_cache_map, &k, &nc, BPF_ANY);
	s->last = nc;
	s->last_key = k;
	return hit != WL_NONE;
}

/* ---- the domain's edge ---- */

/* remark writes cfg.remark as the DSCP of a packet entering the domain
 * whose DSCP carries the INT marking (ECN kept; IPv4 header checksum
 * fixed), so that no node downstream takes it for INT (INT v2.1, DSCP
 * marking); counted on the ingress interface. A source then saves the new
 * DSCP in the shim. */
GLOBAL int remark(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return -1;
	struct pkt *p = &s->p;
	__u8 tos = (s->c.remark << 2) | (p->tos & 3);
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (ip_set(p, d + L3, end, tos, p->ip_len))
		return -1;
	p->tos = tos;
	cnt_at(s->in_slot, C_REMARKED);
	return 0;
}

/* syn_clamp lowers the MSS option of a TCP SYN or SYN-ACK (header at
 * s->p.l4) so that a full-sized segment has room for the INT a session
 * adds at its maximum hop count (session.clamp bytes) under an MTU: MSS <=
 * MTU - IP header (20, IPv6 40) - TCP header (20) - clamp, and one more IP
 * header of the packet's family for a session tunnel. The segment is
 * either a watched flow's at its source (reply 0: the entry classify found,
 * this egress MTU), or leaves the domain through a sink port (reply 1): the
 * watchlist entry is the one the reverse flow matches as it would come in
 * through this egress port, and the MTU that of the port the reply came in
 * through, by which that flow leaves (symmetric routing). The TCP checksum
 * is updated incrementally (an odd offset in the header counts
 * byte-swapped; nothing to do for CHECKSUM_PARTIAL, which the helper
 * knows). It returns 1 when it lowered the MSS. */
GLOBAL int syn_clamp(struct __sk_buff *skb, struct scratch *s, int reply)
{
	if (!s)
		return 0;
	struct pkt *p = &s->p;
	__u8 t[64];
	__u32 l4 = p->l4;
	if (l4 > 0xff || bpf_skb_load_bytes(skb, l4, t, 20))
		return 0;
	if (!(t[13] & 0x02))
		return 0;
	__u64 olen = (t[12] >> 4) * 4;
	if (olen <= 20)
		return 0;
	olen -= 20;
	BOUND(olen, 0x3f);
	if (olen == 0 || olen > 40 || bpf_skb_load_bytes(skb, l4 + 20, t + 20, olen))
		return 0;
	__u32 sid = s->e.session;
	__u32 mtu = s->ifc.mtu;
	if (reply) {
		struct iface *ii = iface_of(s->h.in_ifindex);
		if (!ii)
			return 0;
		mtu = ii->mtu;
		__u32 a[4], pt = p->sport;
		__u8 fl = p->tcp_flags;
		__builtin_memcpy(a, p->saddr, 16);
		__builtin_memcpy(p->saddr, p->daddr, 16);
		__builtin_memcpy(p->daddr, a, 16);
		p->sport = p->dport;
		p->dport = pt;
		p->tcp_flags = t[13];
		s->wl_in = s->h.out_ifindex;
		/* A TCP segment: neither ICMP nor tunnelled. */
		s->icmp = 0;
		s->in.tun = 0;
		__u32 i = wl_match(s);
		__builtin_memcpy(p->daddr, p->saddr, 16);
		__builtin_memcpy(p->saddr, a, 16);
		p->dport = p->sport;
		p->sport = pt;
		p->tcp_flags = fl;
		if (i >= MAX_WL)
			return 0;
		__u32 idx = (s->c.wl_base ? MAX_WL : 0) + i;
		struct wl_entry *e = bpf_map_lookup_elem(&watchlist, &idx);
		if (!e || e->flow_op != OP_INT)
			return 0;
		sid = e->session;
	}
	struct session *se = bpf_map_lookup_elem(&sessions, &sid);
	if (!se || !se->clamp)
		return 0;
	__s32 iph = p->v6 ? 40 : 20;
	/* A session tunnel's outer IP header is of the packet's family. */
	__s32 lim = (__s32)mtu - iph - 20 - se->clamp - (se->tunnel ? iph : 0);
	if (lim <= 0)
		return 0;
	if (lim > 0xffff)
		lim = 0xffff;
	/* The options: end of list (0), no-op (1), else kind and length. */
	/* The offset goes through memory: the verifier forgets its value,
	 * so that every round of the walk is verified once. */
	__u32 end = 20 + olen;
	s->walk = 20;
	__u32 o = 0;
	int found = 0;
	for (int i = 0; i < 40; i++) {
		o = *(volatile __u32 *)&s->walk;
		if (o + 1 >= end)
			return 0;
		__u8 kind = t[o & 63];
		if (kind == 0)
			return 0;
		__u32 n = 1;
		if (kind != 1) {
			n = t[(o + 1) & 63];
			if (n < 2 || o + n > end)
				return 0;
			if (kind == 2 && n == 4) {
				found = 1;
				break;
			}
		}
		*(volatile __u32 *)&s->walk = o + n;
	}
	if (!found)
		return 0;
	__u32 at = o + 2;
	__u16 old = ((__u16)t[at & 63] << 8) | t[(at + 1) & 63];
	if (old <= lim)
		return 0;
	__u16 nv = bpf_htons(lim), ov = bpf_htons(old);
	if (bpf_skb_store_bytes(skb, l4 + at, &nv, 2, 0))
		return 0;
	if (at & 1) {
		nv = __builtin_bswap16(nv);
		ov = __builtin_bswap16(ov);
	}
	bpf_l4_csum_replace(skb, l4 + 16, ov, nv, 2);
	return 1;
}

/* ---- roles ---- */

/* tunnel_headers returns the length of a tunnelled packet's headers from
 * the outer IP header to the inner TCP payload, or 0 when the inner
 * packet is not TCP over IPv4 or IPv6 (behind an Ethernet header or not). */
static __always_inline __u32 tunnel_headers(struct __sk_buff *skb, struct pkt *p)
{
	__u8 tb[4];
	if (bpf_skb_load_bytes(skb, p->tunnel, tb, 4))
		return 0;
	__u32 in;
	__u16 proto; /* EtherType of the inner packet */
	if (p->tun == ENC_VXLAN_GPE) {
		in = p->tunnel + 8;
		proto = tb[3] == 1 ? 0x0800 : tb[3] == 2 ? 0x86dd : tb[3] == 3 ? 0x6558 : 0;
	} else {
		in = p->tun == ENC_GENEVE ? p->tunnel + 8 + (tb[0] & 0x3f) * 4 : p->l4 + p->l4len;
		proto = ((__u16)tb[2] << 8) | tb[3];
	}
	if (proto == 0x6558) {
		__u8 eth[2];
		if (bpf_skb_load_bytes(skb, in + 12, eth, 2))
			return 0;
		proto = ((__u16)eth[0] << 8) | eth[1];
		in += 14;
	}
	__u8 ip[10];
	if (in > 0x1ff || bpf_skb_load_bytes(skb, in, ip, 10))
		return 0;
	__u32 ihl;
	if (proto == 0x0800 && (ip[0] >> 4) == 4 && ip[9] == IPPROTO_TCP)
		ihl = (ip[0] & 0xf) * 4;
	else if (proto == 0x86dd && (ip[0] >> 4) == 6 && ip[6] == IPPROTO_TCP)
		ihl = 40;
	else
		return 0;
	__u8 doff;
	if (bpf_skb_load_bytes(skb, in + ihl + 12, &doff, 1))
		return 0;
	return in + ihl + (doff >> 4) * 4 - L3;
}

/* detour sends a watched GSO super-packet through the detour veth, whose
 * sending side has segmentation and checksum offloads off: the kernel
 * segments it there in software, and intd_gso on the peer inserts INT into
 * every segment and redirects it to this egress device. INT over TCP/UDP
 * follows the L4 header, which GSO cannot replicate per segment, hence the
 * detour. A packet whose L4 checksum is pending (csum_pending) takes it
 * too: the kernel completes the checksum there, before INT moves the L4
 * header away from csum_start; so do tunnelled super-packets (segmented
 * with their outer headers). For TCP the GSO size is lowered first so
 * that every segment has room for the fixed headers and max_hops hops of
 * metadata within this egress MTU (the conservative path MTU of the
 * spec's MTU section); UDP's GSO size delimits datagrams and stays, and a
 * tunnel's is the inner one, also kept. It returns TC_ACT_REDIRECT, or
 * TC_ACT_OK when the packet leaves as it is (without INT). */
static __always_inline int detour(struct __sk_buff *skb, struct scratch *s, struct session *se,
				  struct sess_stats *ss, __u32 fixed)
{
	struct pkt *p = &s->p;
	struct hop *h = &s->h;
	__u32 out = h->out_ifindex;
	__u32 zero = 0;
	if (!s->c.gso_dev || out > 0xffff || !out)
		goto unsupported;
	if (p->ipproto == IPPROTO_TCP) {
		__u32 reserve = fixed + (se->mode == MODE_MD ? (__u32)se->max_hops * se->hop_ml * 4 : 0);
		__u32 hdrs = p->ihl + p->l4len + reserve;
		__u32 mtu = s->ifc.mtu;
		if (mtu < hdrs + 256)
			goto no_room;
		__u32 want = mtu - hdrs;
		__u32 gso = skb->gso_size;
		if (gso > want) {
			/* Room made without BPF_F_ADJ_ROOM_FIXED_GSO lowers the
			 * GSO size by its length; taking it back with the flag
			 * keeps the lower size and restores the packet. */
			__s32 d = gso - want;
			if (bpf_skb_adjust_room(skb, d, BPF_ADJ_ROOM_NET, 0))
				goto unsupported;
			if (bpf_skb_adjust_room(skb, -d, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
				return TC_ACT_SHOT;
		}
	} else if (p->tun) {
		/* A tunnel's GSO size is that of the inner TCP segments: lower
		 * it the same way when the headers up to the inner payload,
		 * INT and max_hops hops would not fit the MTU. Kept (and
		 * segments without room leave without INT) when the inner
		 * packet is not TCP or the kernel refuses. */
		__u32 hdrs = tunnel_headers(skb, p);
		__u32 reserve = fixed + (se->mode == MODE_MD ? (__u32)se->max_hops * se->hop_ml * 4 : 0);
		__u32 mtu = s->ifc.mtu;
		__u32 gso = skb->gso_size;
		if (hdrs && mtu >= hdrs + reserve + 256 && gso > mtu - hdrs - reserve) {
			__s32 d = gso - (mtu - hdrs - reserve);
			if (bpf_skb_adjust_room(skb, d, BPF_ADJ_ROOM_NET, 0) == 0 &&
			    bpf_skb_adjust_room(skb, -d, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
				return TC_ACT_SHOT;
		}
	}
	__u32 *seq = bpf_map_lookup_elem(&detour_seq, &zero);
	if (!seq)
		goto unsupported;
	__u32 n = __sync_fetch_and_add(seq, 1);
	__u32 idx = n & (MAX_DETOUR - 1);
	struct detour *r = bpf_map_lookup_elem(&detours, &idx);
	if (!r)
		goto unsupported;
	__u32 mark = ((n & 0xffff) << 16) | out;
	r->mark = mark;
	r->orig_mark = skb->mark;
	r->in_ifindex = h->in_ifindex;
	r->l1_in = h->l1_in;
	r->l2_in = h->l2_in;
	need_qtime(skb, s);
	need_buf(skb, s); /* of the egress device: the segments come in on the detour veth */
	r->occ = (h->qid << 24) | (h->occ & 0xffffff);
	r->qdelay = h->qdelay;
	r->buf = h->buf;
	r->valid = h->valid & ~(INST_HOP_LATENCY | INST_INGRESS_TIMESTAMP | INST_EGRESS_TIMESTAMP);
	r->ts_in = 0;
	if (h->valid & INST_HOP_LATENCY)
		r->ts_in = h->ts_in - s->c.time_offset;
	r->session = s->e.session;
	r->act = s->e.act;
	r->stats = s->e.stats;
	skb->mark = mark;
	cnt(s, C_GSO);
	return bpf_redirect(s->c.gso_dev, 0);
no_room:
	ss->no_room++;
	return TC_ACT_OK;
unsupported:
	ss->unsupported++;
	return TC_ACT_OK;
}

/* ---- session tunnels: INT-MD in a VXLAN-GPE tunnel the source adds ----
 *
 * The source puts the packet behind outer IPv4 (cfg.tun_addr to the
 * session's tun_dst), UDP (port 4790) and VXLAN-GPE (next protocol INT)
 * headers followed by the INT shim, the INT-MD header and its own hop, all
 * with one bpf_skb_adjust_room(BPF_ADJ_ROOM_MAC) whose ENCAP flags make the
 * skb a UDP tunnel: GSO/TSO then copy the outer headers and INT (the
 * tunnel's "inner L2") onto every segment of a super-packet, which needs
 * no detour. Transit nodes push their hops as onto any VXLAN-GPE INT packet
 * (super-packets only through a veth: tun_gso_transit). At the
 * sink, tun_arrive (ingress) gives a packet addressed to cfg.tun_addr the
 * inner destination as its outer one, so the kernel routes it by the inner
 * packet; leaving through a sink port it is reported and tun_strip removes
 * the whole encapsulation. */
#define STUN_UDP_GPE (8 + 8) /* UDP, VXLAN-GPE after the outer IP header */
#define STUN_INT 16          /* INT shim + INT-MD header */
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7) /* Linux 6.3 */
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#define STUN_DECAP_L4_UDP (1ULL << 10) /* newer kernels: also resets the UDP tunnel GSO state */
#define TUN_HANDOFF 0x1d7c0001 /* skb->priority of a packet tun_handoff gave the kernel (intd_tun_rx) */

/* md_words writes the session's words of an INT-MD/MX header (from its
 * fifth byte): instruction bitmap, domain, DS instruction, DS flags. */
static __always_inline void md_words(__u8 *b, struct session *se)
{
	b[0] = se->inst >> 8;
	b[1] = se->inst;
	b[2] = se->domain >> 8;
	b[3] = se->domain;
	b[4] = se->ds_inst >> 8;
	b[5] = se->ds_inst;
	b[6] = se->ds_flags >> 8;
	b[7] = se->ds_flags;
}

/* lower_gso lowers a TCP super-packet's GSO size by d: room made without
 * BPF_F_ADJ_ROOM_FIXED_GSO lowers it by its length, and taking the room
 * back with the flag keeps the lower size. 0, -1 (unchanged) or -2. */
static __always_inline int lower_gso(struct __sk_buff *skb, __s32 d)
{
	if (bpf_skb_adjust_room(skb, d, BPF_ADJ_ROOM_NET, 0))
		return -1;
	if (bpf_skb_adjust_room(skb, -d, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		return -2;
	return 0;
}

/* tun_gso_transit tells whether the transit step may push its hop onto a
 * GSO super-packet s->p: a VXLAN-GPE INT packet (a session tunnel) over
 * IPv4 leaving through a veth. Room made after the outer IP header keeps
 * the inner headers' offsets, which segmentation goes by, and lowers the
 * GSO size by the hop, so segments keep their size on the wire; the outer
 * UDP header moves into the room, away from the skb's transport header
 * offset, which the veth's peer sets anew on receive (a device's tunnel
 * TSO would start from it: elsewhere super-packets pass without the
 * hop). */
static __always_inline int tun_gso_transit(struct scratch *s)
{
	return s->ifc.veth && s->p.encap == ENC_VXLAN_GPE && !s->p.ext && s->p.l4 == L3 + fixed_len(&s->p);
}

/* ip4_csum is the header checksum of a 20-byte IPv4 header. */
static __always_inline __u16 ip4_csum(const __u8 *h)
{
	__u32 sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += *(const __u16 *)(h + i);
	return ~cfold(sum);
}

/* tun_source is the source step of a session tunnel's packet (s->e);
 * verified on its own, with its own stack: intd_egress has little left.
 * TC_ACT_OK, or TC_ACT_SHOT when the packet was left inconsistent. */
GLOBAL int tun_source(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return TC_ACT_OK;
	__u32 sid = s->e.session;
	struct session *se = bpf_map_lookup_elem(&sessions, &sid);
	struct sess_stats *ss = bpf_map_lookup_elem(&sess_stats_map, &sid);
	if (!se || !ss)
		return TC_ACT_OK;
	struct pkt *p = &s->p;
	__u32 mtu = s->ifc.mtu;
	/* The tunnel is of the packet's IP version (the sink routes by the
	 * inner destination, put into the outer header), with an address at
	 * both ends; the IP header says the skb's length (no BIG TCP). A
	 * packet an offload already encapsulated is refused by the kernel
	 * (one tunnel level). */
	int v6 = p->v6;
	__u32 ohl = v6 ? 40 : 20;
	int ends = v6 ? (afold(s->c.tun_addr6) && afold(se->tun_dst6)) : (s->c.tun_addr && se->tun_dst);
	if (!ends || p->ext || skb->protocol != bpf_htons(v6 ? 0x86dd : 0x0800) || p->ip_len != skb->len - L3)
		goto unsupported;
	__u32 hopb = (__u32)se->hop_ml * 4;
	__u32 n = ohl + STUN_UDP_GPE + STUN_INT + hopb;
	if (hopb > 31 * 4)
		goto unsupported;
	if (skb->gso_size && p->ipproto != IPPROTO_TCP) {
		/* Not whole into the tunnel: the sink's decapsulation leaves
		 * the UDP tunnel GSO state on a kernel without
		 * BPF_F_ADJ_ROOM_DECAP_L4_UDP, and UDP segmentation then takes
		 * the packet's own UDP header for the tunnel's and drops it.
		 * Segmented first (the detour), each datagram gets the
		 * tunnel. */
		return detour(skb, s, se, ss, n - hopb);
	}
	if (skb->gso_size) {
		/* Segments must fit the egress MTU with the tunnel and
		 * max_hops hops: the SYN's MSS clamp usually left the room;
		 * else TCP segments are made smaller. */
		__u32 reserve = n + (se->max_hops > 1 ? (__u32)(se->max_hops - 1) * hopb : 0);
		__u32 hdrs = p->l4 - L3 + p->l4len;
		if (mtu < hdrs + reserve + 256)
			goto no_room;
		__u32 want = mtu - hdrs - reserve;
		if (skb->gso_size > want) {
			int r = lower_gso(skb, skb->gso_size - want);
			if (r == -2)
				return TC_ACT_SHOT;
			if (r)
				goto no_room;
		}
	} else if (p->ip_len + n > mtu) {
		goto no_room;
	}
	need_inst(skb, s, se->inst);
	__u32 hopw = build_hop(s, se->inst, se->hop_ml, 0) & 31;
	if (hopw * 4 != hopb)
		goto unsupported;
	/* Outer IP header: the inner DSCP and ECN (RFC 6040's normal mode);
	 * IPv4 with DF (INT never fragments). GSO gives every segment its
	 * length (and IPv4 identification and checksum). */
	__u8 *h = s->buf;
	__builtin_memset(h, 0, 40 + STUN_UDP_GPE + STUN_INT);
	__u32 len = skb->len - L3 + n;
	__u8 *u = h + 20;
	if (v6) {
		h[0] = 0x60 | (p->tos >> 4);
		h[1] = p->tos << 4;
		h[4] = (len - 40) >> 8;
		h[5] = len - 40;
		h[6] = IPPROTO_UDP;
		h[7] = 64;
		__builtin_memcpy(h + 8, s->c.tun_addr6, 16);
		__builtin_memcpy(h + 24, se->tun_dst6, 16);
		u = h + 40;
	} else {
		h[0] = 0x45;
		h[1] = p->tos;
		h[2] = len >> 8;
		h[3] = len;
		h[6] = 0x40;
		h[8] = 64;
		h[9] = IPPROTO_UDP;
		__builtin_memcpy(h + 12, &s->c.tun_addr, 4);
		__builtin_memcpy(h + 16, &se->tun_dst, 4);
		*(__u16 *)(h + 10) = ip4_csum(h);
	}
	/* UDP: the inner flow's entropy in the source port (ECMP), no
	 * checksum (RFC 768; over IPv6 as RFC 6935 allows tunnels: the
	 * inner packet has its own, and the sink removes the tunnel before
	 * any UDP stack sees it). */
	__u16 sp = entropy_port(p->saddr, p->daddr, p->sport, p->dport, p->proto);
	__u32 ulen = len - ohl;
	u[0] = sp >> 8;
	u[1] = sp;
	u[2] = PORT_VXLAN_GPE >> 8;
	u[3] = PORT_VXLAN_GPE & 0xff;
	u[4] = ulen >> 8;
	u[5] = ulen;
	/* VXLAN-GPE: I and P flags, next protocol INT, VNI 0. */
	u[8] = 0x0c;
	u[11] = VXLAN_GPE_NP_INT;
	/* INT shim (type MD, length of header and stack in words, next
	 * protocol IPv4 or IPv6), INT-MD header. */
	u[16] = INT_TYPE_MD << 4;
	u[17] = (12 + hopb) / 4;
	u[19] = v6 ? 2 : 1;
	u[20] = 0x20 | (se->discard ? 0x08 : 0);
	u[22] = se->hop_ml;
	u[23] = se->max_hops - 1;
	md_words(u + 24, se);
	for (int i = 0; i < 31; i++) {
		if (i >= hopw)
			break;
		__builtin_memcpy(u + STUN_UDP_GPE + STUN_INT + i * 4, &s->hop[i], 4);
	}
	__u64 flags = (v6 ? BPF_F_ADJ_ROOM_ENCAP_L3_IPV6 : BPF_F_ADJ_ROOM_ENCAP_L3_IPV4) | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		      BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L2((8 + STUN_INT + hopb) & 0xff);
	if (bpf_skb_adjust_room(skb, n, BPF_ADJ_ROOM_MAC, flags))
		goto unsupported;
	__u64 sl = n;
	BOUND(sl, 0xfc);
	if (sl < 20 + STUN_UDP_GPE + STUN_INT || bpf_skb_store_bytes(skb, L3, h, sl, 0))
		return TC_ACT_SHOT;
	ss->initiated++;
	cnt(s, C_INSERTED);
	return TC_ACT_OK;
no_room:
	ss->no_room++;
	return TC_ACT_OK;
unsupported:
	ss->unsupported++;
	return TC_ACT_OK;
}

static __always_inline int addr6_eq(const __u32 *a, const __u32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* tun_inner reads the inner packet of a session tunnel whose INT shim is
 * at shim (type MD, next protocol IPv4 or IPv6 as v6 says) into ip (of
 * the scratch: intd_egress has little stack left), the fixed header's 40
 * bytes (IPv4: 20); 0, or -1 when it is not one. */
static __always_inline int tun_inner(struct __sk_buff *skb, __u32 shim, int v6, __u8 *ip)
{
	if (bpf_skb_load_bytes(skb, shim, ip, 4) || (ip[0] >> 4) != INT_TYPE_MD || ip[3] != (v6 ? 2 : 1))
		return -1;
	__u32 in = shim + 4 + (__u32)ip[1] * 4;
	if (v6 ? bpf_skb_load_bytes(skb, in, ip, 40) : bpf_skb_load_bytes(skb, in, ip, 20))
		return -1;
	return (ip[0] >> 4) == (v6 ? 6 : 4) ? 0 : -1;
}

/* tun_arrive runs at ingress of a fabric port (never of a sink port: a
 * tunnel from outside the INT domain is no session tunnel): a session
 * tunnel packet addressed to this node (cfg.tun_addr, tun_addr6) takes
 * the inner packet's destination as its outer one, so that the kernel
 * forwards it by the inner packet towards the sink port, where tun_strip
 * removes the tunnel. h is its IP header (40 bytes, IPv4's 20 first);
 * the new outer destination goes there too. */
static __always_inline void tun_arrive(struct __sk_buff *skb, __u32 *h, int v6)
{
	__u8 *b = (__u8 *)h;
	__u32 zero = 0;
	__u32 ohl = v6 ? 40 : 20;
	if (v6 ? b[6] != IPPROTO_UDP : (b[9] != IPPROTO_UDP || b[0] != 0x45 || (b[6] & 0x3f) || b[7]))
		return;
	__u8 u[12]; /* UDP, GPE up to its next protocol */
	if (bpf_skb_load_bytes(skb, L3 + ohl, u, 12) || u[2] != (PORT_VXLAN_GPE >> 8) ||
	    u[3] != (PORT_VXLAN_GPE & 0xff) || u[11] != VXLAN_GPE_NP_INT)
		return;
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!c || !(c->tunnels & TUN_VXLAN_GPE) || !(c->flags & F_ENDPOINT))
		return;
	if (v6 ? (!afold(c->tun_addr6) || !addr6_eq(c->tun_addr6, h + 6)) : (!c->tun_addr || c->tun_addr != h[4]))
		return;
	struct scratch *s = scratch();
	if (!s)
		return;
	__u8 *ip = s->mv;
	if (tun_inner(skb, L3 + ohl + STUN_UDP_GPE, v6, ip))
		return;
	__s64 diff;
	if (v6) {
		diff = bpf_csum_diff(h + 6, 16, (__u32 *)(ip + 24), 16, 0);
		__builtin_memcpy(h + 6, ip + 24, 16);
		bpf_skb_store_bytes(skb, L3 + 24, ip + 24, 16, 0);
	} else {
		diff = bpf_csum_diff(h + 4, 4, (__u32 *)(ip + 16), 4, 0);
		__builtin_memcpy(h + 4, ip + 16, 4);
		bpf_skb_store_bytes(skb, L3 + 16, ip + 16, 4, 0);
		bpf_l3_csum_replace(skb, L3 + 10, 0, diff, 0);
	}
	if (diff >= 0 && (u[6] | u[7]))
		bpf_l4_csum_replace(skb, L3 + ohl + 6, 0, diff, BPF_F_PSEUDO_HDR | BPF_F_MARK_MANGLED_0);
}

/* tun_ends reports whether the INT packet s->p is a session tunnel that
 * ends here: VXLAN-GPE INT-MD straight after the outer IP header, the
 * inner packet of the same IP version straight after the stack, with the
 * inner destination as outer one (tun_arrive). */
static __always_inline int tun_ends(struct __sk_buff *skb, struct scratch *s)
{
	struct pkt *p = &s->p;
	int v6 = p->v6;
	__u32 ohl = v6 ? 40 : 20;
	if (!(v6 ? afold(s->c.tun_addr6) : s->c.tun_addr) || p->encap != ENC_VXLAN_GPE || p->ext ||
	    p->l4 != L3 + ohl || p->shim != L3 + ohl + STUN_UDP_GPE)
		return 0;
	__u8 *ip = s->mv;
	if (tun_inner(skb, p->shim, v6, ip))
		return 0;
	if (v6)
		return addr6_eq((__u32 *)(ip + 24), p->daddr);
	return *(__u32 *)(ip + 16) == p->daddr[3];
}

/* tun_strip removes a session tunnel (tun_ends): outer IP, UDP,
 * VXLAN-GPE and INT, leaving the inner packet as the source sent it. A
 * super-packet keeps its GSO size (segments sized for the tunnel fit
 * without it); kernels that know BPF_F_ADJ_ROOM_DECAP_L4_UDP also clear
 * its UDP tunnel GSO state. 0, or -1: drop. */
static __always_inline int tun_strip(struct __sk_buff *skb, struct scratch *s)
{
	int v6 = s->p.v6;
	__u32 n = (v6 ? 40 : 20) + STUN_UDP_GPE + 4 + (__u32)s->p.shim_words * 4;
	if ((s->p.tos & 3) == 3) {
		/* Congestion marked in the tunnel: the inner packet keeps the
		 * mark when its ECN field allows it (RFC 6040). IPv6 has it
		 * in bits 4-5 of its second byte, and no header checksum. */
		__u16 *w = (__u16 *)s->mv;
		if (n > 0x1ff || bpf_skb_load_bytes(skb, L3 + n, w, 2))
			return -1;
		__u16 old = w[0], ce = bpf_htons(v6 ? 0x30 : 3);
		if ((old & ce) && (old | ce) != old) {
			w[0] = old | ce;
			if (!v6)
				bpf_l3_csum_replace(skb, L3 + n + 10, old, w[0], 2);
			bpf_skb_store_bytes(skb, L3 + n, w, 2, 0);
		}
	}
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | (v6 ? BPF_F_ADJ_ROOM_DECAP_L3_IPV6 : BPF_F_ADJ_ROOM_DECAP_L3_IPV4);
	if (skb->gso_size && bpf_skb_adjust_room(skb, -(__s32)n, BPF_ADJ_ROOM_MAC, flags | STUN_DECAP_L4_UDP) == 0)
		return 0;
	return bpf_skb_adjust_room(skb, -(__s32)n, BPF_ADJ_ROOM_MAC, flags) ? -1 : 0;
}

/* tun_handoff hands a GSO super-packet of a session tunnel (tun_ends) to
 * the kernel's own VXLAN-GPE receive through intd's device cfg.tun_dev,
 * where a kernel without BPF_F_ADJ_ROOM_DECAP_L4_UDP would leave
 * tun_strip's packet marked as a UDP tunnel: INT goes (the room after the
 * outer IP header shrinks by it, the inner headers stay where the skb's
 * inner offsets say), UDP and VXLAN-GPE with next protocol IPv4 or IPv6
 * are written before the inner packet, and the outer destination is the
 * node's tunnel address again (IPv4's source the inner one). The kernel's
 * decapsulation clears the tunnel's GSO state; it then forwards the inner
 * super-packet, whole, out of this sink port, where intd_egress lets it
 * pass (ingress tun_dev). The inner TTL (hop limit) goes one up for the
 * kernel's forwarding to take: the sink forwards the inner packet once,
 * as without the handoff. 0, or -1: drop. */
static __always_inline int tun_handoff(struct __sk_buff *skb, struct scratch *s)
{
	int v6 = s->p.v6;
	__u32 ohl = v6 ? 40 : 20;
	__u32 intlen = 4 + (__u32)s->p.shim_words * 4;
	__u8 *h = s->mv;
	/* tun_ends left the inner IP header there. */
	__u32 isrc = *(__u32 *)(h + 12);
	__u8 iecn = v6 ? (h[1] >> 4) & 3 : h[1] & 3;
	if (intlen > 0x1ff || (v6 ? bpf_skb_load_bytes(skb, L3, h, 40 + 2) : bpf_skb_load_bytes(skb, L3, h, 20 + 2)))
		return -1;
	if (bpf_skb_adjust_room(skb, -(__s32)intlen, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		return -1;
	__u32 len = skb->len - L3;
	__u32 in = L3 + ohl + STUN_UDP_GPE;
	__u16 *w = (__u16 *)(h + 64); /* the inner TTL (hop limit) and its neighbour byte */
	if (bpf_skb_load_bytes(skb, in + (v6 ? 6 : 8), w, 2))
		return -1;
	__u16 old = w[0];
	__u8 *ttl = (__u8 *)w + (v6 ? 1 : 0);
	if (*ttl < 255) {
		(*ttl)++;
		if (!v6 && bpf_l3_csum_replace(skb, in + 10, old, w[0], 2))
			return -1;
		if (bpf_skb_store_bytes(skb, in + (v6 ? 6 : 8), w, 2, 0))
			return -1;
	}
	if ((s->p.tos & 3) == 3 && !iecn) {
		/* Congestion marked in the tunnel, the inner packet not
		 * ECN-capable: forwarded unmarked, as tun_strip does (the
		 * kernel's decapsulation would drop it). */
		h[1] &= v6 ? ~0x30 : ~3;
	}
	__u8 *u = h + ohl;
	/* u[0..1]: the source's entropy port, kept. */
	u[2] = PORT_VXLAN_GPE >> 8;
	u[3] = PORT_VXLAN_GPE & 0xff;
	u[4] = (len - ohl) >> 8;
	u[5] = len - ohl;
	u[6] = 0;
	u[7] = 0;
	__builtin_memset(u + 8, 0, 8);
	u[8] = 0x0c;
	u[11] = v6 ? 2 : 1;
	if (v6) {
		h[4] = (len - 40) >> 8;
		h[5] = len - 40;
		__builtin_memcpy(h + 24, s->c.tun_addr6, 16);
		if (bpf_skb_store_bytes(skb, L3, h, 40 + STUN_UDP_GPE, 0))
			return -1;
	} else {
		h[2] = len >> 8;
		h[3] = len;
		/* From the inner source: reverse path filtering then judges
		 * the tunnel packet as it judges the inner one (the kernel's
		 * external-mode receive keeps the outer source only as
		 * metadata). */
		__builtin_memcpy(h + 12, &isrc, 4);
		__builtin_memcpy(h + 16, &s->c.tun_addr, 4);
		h[10] = 0;
		h[11] = 0;
		*(__u16 *)(h + 10) = ip4_csum(h);
		if (bpf_skb_store_bytes(skb, L3, h, 20 + STUN_UDP_GPE, 0))
			return -1;
	}
	return 0;
}

/* tun_local tells whether the node's tunnel address of the packet's IP
 * version is one of its own (the FIB's local table): the kernel's tunnel
 * receive takes only packets to a local address; to another, the handed
 * packet would be forwarded as a tunnel. */
static __always_inline int tun_local(struct __sk_buff *skb, struct scratch *s)
{
	struct bpf_fib_lookup f = {.ifindex = skb->ifindex};
	if (s->p.v6) {
		f.family = 10; /* AF_INET6 */
		__builtin_memcpy(f.ipv6_dst, s->c.tun_addr6, 16);
	} else {
		f.family = 2; /* AF_INET */
		f.ipv4_dst = s->c.tun_addr;
	}
	return bpf_fib_lookup(skb, &f, sizeof(f), 0) == BPF_FIB_LKUP_RET_NOT_FWDED;
}

/* tun_end removes the session tunnel that ends here (tun_ends) from the
 * packet at a sink port, verified on its own: 1 when it did, 2 when the
 * kernel will (tun_handoff: the caller redirects to cfg.tun_dev), 0 when
 * the packet is no such tunnel, -1 when it must be dropped. */
GLOBAL int tun_end(struct __sk_buff *skb, struct scratch *s)
{
	if (!s || !tun_ends(skb, s))
		return 0;
	if (skb->gso_size && s->c.tun_dev && !(s->p.hdr0 & 0x08) && tun_local(skb, s))
		return tun_handoff(skb, s) ? -1 : 2;
	return tun_strip(skb, s) ? -1 : 1;
}

/* intd_tun_rx is on tc ingress of intd's VXLAN-GPE device: it passes only
 * what tun_handoff sent (the tunnel packet, then the inner packet the
 * kernel took out of it, marked by priority on the way), so that the
 * device's UDP port is no way into the node for tunnels from elsewhere. */
SEC("tc")
int intd_tun_rx(struct __sk_buff *skb)
{
	struct bpf_tunnel_key k;
	if (bpf_skb_get_tunnel_key(skb, &k, sizeof(k), 0) && bpf_skb_get_tunnel_key(skb, &k, sizeof(k), BPF_F_TUNINFO_IPV6)) {
		/* No tunnel metadata: a tunnel packet tun_handoff redirected
		 * here (nothing else enters the device's receive); its
		 * priority, which the redirect zeroed, goes on to the inner
		 * packet the kernel takes out of it. */
		skb->priority = TUN_HANDOFF;
		return TC_ACT_OK;
	}
	if (skb->priority != TUN_HANDOFF)
		return TC_ACT_SHOT; /* a tunnel from elsewhere to the device's port */
	skb->priority = 0;
	return TC_ACT_OK;
}

/* source is the INT source step for a watched packet (s->e). It returns
 * TC_ACT_OK, or TC_ACT_SHOT when the packet was left inconsistent. */
static __always_inline int source(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return TC_ACT_OK;
	struct pkt *p = &s->p;
	struct cfg *c = &s->c;
	__u32 sid = s->e.session;
	struct session *se = bpf_map_lookup_elem(&sessions, &sid);
	struct sess_stats *ss = bpf_map_lookup_elem(&sess_stats_map, &sid);
	if (!se || !ss)
		return TC_ACT_OK;
	if (se->tunnel)
		return tun_source(skb, s);
	__u32 npt = NPT_NONE;
	__u32 fixed = 4 + 12;
	__u32 pre = 0; /* probe marker bytes before the shim */
	if (p->tun) {
		/* In a tunnel, INT goes into its header; no marking. A GSO
		 * super-packet takes the detour like any other: segmented in
		 * software (outer headers on every segment), each gets INT. */
	} else if (c->dscp_mask) {
		npt = NPT_NONE;
	} else if (c->udp_port) {
		npt = c->npt;
		if (npt == NPT_UDP_PORT && p->proto != IPPROTO_UDP)
			npt = NPT_IP_PROTO;
		if (npt == NPT_IP_PROTO)
			fixed += 8;
	} else if (c->probe) {
		pre = 8;
		fixed += 8;
	} else {
		ss->unsupported++; /* no marking to announce INT with */
		return TC_ACT_OK;
	}
	if (npt == NPT_IP_PROTO && p->ext) {
		/* The new UDP header would go behind IPv6 extension headers,
		 * whose last next-header field this does not rewrite. */
		ss->unsupported++;
		return TC_ACT_OK;
	}
	if (npt != NPT_IP_PROTO && !p->l4len) {
		/* INT over TCP/UDP needs a TCP or UDP header to follow. */
		ss->unsupported++;
		return TC_ACT_OK;
	}
	if (skb->gso_size || csum_pending(skb))
		return detour(skb, s, se, ss, fixed);
	__u32 mtu = s->ifc.mtu;
	__u32 room = mtu > p->ip_len ? mtu - p->ip_len : 0;
	if (fixed > room) {
		ss->no_room++;
		return TC_ACT_OK;
	}
	__u32 hopw = 0;
	__u32 hdr[3]; /* the INT-MD/MX header as it goes on the wire */
	__u8 rhc = se->max_hops;
	if (se->mode == MODE_MD && p->tun == ENC_GENEVE && se->hop_ml) {
		/* Geneve option room (wire.GeneveHopLimit): the INT option's
		 * data is at most 31 words, all options 63. Remaining Hop
		 * Count is capped so that the hop finding no room sets E and
		 * M keeps meaning "MTU exceeded". */
		__u8 g0 = 0;
		bpf_skb_load_bytes(skb, p->tunnel, &g0, 1);
		__u32 other = g0 & 0x3f;
		__u32 room = 31; /* words for the INT-MD header and stack */
		if (other > 31)
			room = other < 62 ? 62 - other : 0;
		__u32 lim = room > 3 ? (room - 3) / se->hop_ml : 0;
		if (lim < 1)
			lim = 1;
		if (rhc > lim)
			rhc = lim;
	}
	__u8 b0 = 0x20 | (se->discard ? 0x08 : 0);
	if (se->mode == MODE_MD) {
		if (fixed + (__u32)se->hop_ml * 4 > room) {
			b0 |= 0x02;
			cnt(s, C_MBIT);
		} else {
			rhc--;
			need_inst(skb, s, se->inst);
			hopw = build_hop(s, se->inst, se->hop_ml, 1);
		}
	}
	/* Whole words: byte stores read back as words would wait for
	 * each other (no store forwarding). */
	__u32 md = se->mode == MODE_MD;
	hdr[0] = bpf_htonl(((__u32)b0 << 24) | (md ? ((__u32)se->hop_ml << 8) | rhc : 0));
	hdr[1] = bpf_htonl(((__u32)se->inst << 16) | se->domain);
	hdr[2] = bpf_htonl(((__u32)se->ds_inst << 16) | se->ds_flags);
	hopw &= 31;
	__u32 ilen = 12 + hopw * 4;
	__u8 shim[4];
	shim[0] = ((se->mode == MODE_MD ? INT_TYPE_MD : INT_TYPE_MX) << 4) | (npt << 2);
	shim[1] = ilen / 4;
	__u32 n = ilen + 4;
	if (npt == NPT_IP_PROTO) {
		/* New UDP header + shim + INT between the IP header and the
		 * original L4 header; the original L4 checksum stays valid. */
		n += 8;
		__u32 at = L3 + p->ihl;
		shim[2] = 0;
		shim[3] = p->proto;
		__u16 u[4];
		u[0] = bpf_htons(entropy_port(p->saddr, p->daddr, p->sport, p->dport, p->proto));
		u[1] = bpf_htons(c->udp_port);
		u[2] = bpf_htons(p->ip_len - p->ihl + n);
		u[3] = 0;
		int r = grow(skb, s, at, n, fixed_len(p));
		if (r == -2)
			return TC_ACT_SHOT;
		if (r) {
			ss->unsupported++;
			return TC_ACT_OK;
		}
		bpf_skb_store_bytes(skb, at, u, 8, 0);
		bpf_skb_store_bytes(skb, at + 8, shim, 4, 0);
		bpf_skb_store_bytes(skb, at + 12, hdr, 12, 0);
		store_hop(skb, at + 24, s, hopw);
		if (p->v6) {
			/* Next header and payload length; no header checksum. */
			__u8 nh = IPPROTO_UDP;
			__u16 pl = bpf_htons(p->ip_len - 40 + n);
			bpf_skb_store_bytes(skb, L3 + 6, &nh, 1, 0);
			bpf_skb_store_bytes(skb, L3 + 4, &pl, 2, 0);
		} else {
			__u8 ttl;
			bpf_skb_load_bytes(skb, L3 + 8, &ttl, 1);
			__u16 old = ((__u16)ttl << 8) | p->proto;
			ip_word(skb, 8, old, (old & 0xff00) | IPPROTO_UDP);
			ip_word(skb, 2, p->ip_len, p->ip_len + n);
		}
	} else {
		__u32 at = p->l4 + p->l4len;
		__u8 tb[4] = {};
		if (p->tun) {
			/* The tunnel header's next protocol goes into the shim
			 * (GPE, GRE); Geneve's INT option header is the shim. */
			if (bpf_skb_load_bytes(skb, p->tunnel, tb, 4)) {
				ss->unsupported++;
				return TC_ACT_OK;
			}
			__u8 type = se->mode == MODE_MD ? INT_TYPE_MD : INT_TYPE_MX;
			if (p->tun == ENC_GENEVE) {
				if (ilen / 4 > 31 || (tb[0] & 0x3f) + n / 4 > 63) {
					ss->unsupported++; /* Geneve's option lengths */
					return TC_ACT_OK;
				}
				shim[0] = GENEVE_CLASS_INT >> 8;
				shim[1] = GENEVE_CLASS_INT & 0xff;
				shim[2] = type;
				shim[3] = ilen / 4;
			} else {
				shim[0] = type << 4;
				shim[2] = p->tun == ENC_GRE ? tb[2] : 0;
				shim[3] = tb[3];
			}
			if (p->tun != ENC_GRE)
				at = p->tunnel + 8;
		} else if (pre) {
			shim[2] = shim[3] = 0;
		} else if (npt == NPT_NONE) {
			shim[2] = 0;
			shim[3] = (p->tos >> 2) << 2;
		} else {
			shim[2] = p->dport >> 8;
			shim[3] = p->dport;
		}
		/* [probe marker +] shim + header + hop in one buffer of
		 * words: one checksum diff, one store. */
		__u32 *w = s->ins;
		if (pre) {
			__builtin_memcpy(w, &c->probe, 8);
			w += 2;
		}
		w[0] = bpf_htonl(((__u32)shim[0] << 24) | ((__u32)shim[1] << 16) | ((__u32)shim[2] << 8) | shim[3]);
		w[1] = hdr[0];
		w[2] = hdr[1];
		w[3] = hdr[2];
		for (int i = 0; i < 31; i++) {
			if (i >= hopw)
				break;
			w[4 + i] = s->hop[i];
		}
		n += pre;
		__u64 len = n;
		BOUND(len, 0xfc);
		if (len < 16 || len > 152) {
			ss->unsupported++;
			return TC_ACT_OK;
		}
		int r = make_room(skb, at, n, fixed_len(p));
		if (r == -2)
			return TC_ACT_SHOT;
		if (r) {
			ss->unsupported++;
			return TC_ACT_OK;
		}
		/* shim + INT written directly after the L4 header, then the
		 * UDP length/port and the IP header (DSCP, length) with the
		 * checksums (l4_fix: the L4 checksum's summed change and its
		 * pseudo header). */
		__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		__u32 acc = 0;
		at &= 0xff;
		for (int i = 0; i < 38; i++) {
			if (i * 4 >= len)
				break;
			__u8 *q = d + at + i * 4;
			asm volatile("" : "+r"(q));
			if (q + 4 > end)
				return TC_ACT_SHOT;
			__u32 v = s->ins[i];
			*(__u32 *)q = v;
			acc += (v & 0xffff) + (v >> 16);
		}
		__u32 l4 = p->l4 & 0xff;
		__u8 *u = d + l4, *iph = d + L3;
		if (u + 8 > end)
			return TC_ACT_SHOT;
		__u16 seg = p->ip_len - p->ihl;
		__u16 o16;
		if (p->ipproto == IPPROTO_UDP) {
			o16 = *(__u16 *)(u + 4);
			*(__u16 *)(u + 4) = bpf_htons(seg + n);
			acc = cadd(acc, o16, *(__u16 *)(u + 4));
		}
		if (npt == NPT_UDP_PORT) {
			o16 = *(__u16 *)(u + 2);
			*(__u16 *)(u + 2) = bpf_htons(c->udp_port);
			acc = cadd(acc, o16, *(__u16 *)(u + 2));
		}
		if (p->tun) {
			/* The tunnel header announces INT. */
			__u8 *g = d + (p->tunnel & 0xff);
			if (g + 4 > end)
				return TC_ACT_SHOT;
			if (p->tun == ENC_VXLAN_GPE)
				acc = put8(acc, g + 2, 1, VXLAN_GPE_NP_INT);
			else if (p->tun == ENC_GENEVE)
				acc = put8(acc, g, 0, (g[0] & 0xc0) | ((g[0] + n / 4) & 0x3f)); else {
				*(__u16 *)(g + 2) = bpf_htons(c->gre_proto);
			}
		}
		/* TOS / traffic class (DSCP marking) and length. */
		__u8 tos = p->tos;
		if (npt == NPT_NONE && !p->tun && !pre) {
			__u8 dscp = p->tos >> 2;
			__u8 nd = (dscp & ~c->dscp_mask) | (c->dscp_val & c->dscp_mask);
			tos = (nd << 2) | (p->tos & 3);
		}
		if (ip_set(p, iph, end, tos, p->ip_len + n))
			return TC_ACT_SHOT;
		if (l4_fix(skb, p, acc, seg, seg + n))
			return TC_ACT_SHOT;
	}
	ss->initiated++;
	cnt(s, C_INSERTED);
	if (se->mode == MODE_MX)
		flow_event(skb, s, 0);
	return TC_ACT_OK;
}

/* set_hdr0 sets a bit (E or M) of the INT-MD flags byte. */
static __always_inline void set_hdr0(struct __sk_buff *skb, struct pkt *p, __u8 bit)
{
	if (p->hdr0 & bit)
		return;
	__u32 off = p->shim + 4;
	__u8 b1 = 0;
	bpf_skb_load_bytes(skb, off + 1, &b1, 1);
	__u16 old = ((__u16)p->hdr0 << 8) | b1;
	l4_word(skb, p, off, old, old | ((__u16)bit << 8));
	p->hdr0 |= bit;
}

/* push_hop is transit's step for a packet that takes a hop of hop_ml
 * words (n bytes): the hop's metadata pushed onto the stack, Remaining
 * Hop Count, lengths and checksums updated. */
static __always_inline int push_hop(struct __sk_buff *skb, struct scratch *s, __u32 hop_ml, __u32 n)
{
	struct pkt *p = &s->p;
	need_inst(skb, s, p->inst);
	__u32 w = build_hop(s, p->inst, hop_ml, 0);
	w &= 31;
	if (w == 0 || w * 4 != n)
		return TC_ACT_OK;
	__u32 at = p->shim + 16;
	int r = make_room(skb, at, n, fixed_len(p));
	if (r == -2)
		return TC_ACT_SHOT;
	if (r) {
		set_hdr0(skb, p, 0x02);
		cnt(s, C_MBIT);
		return TC_ACT_OK;
	}
	/* The hop at the top of the stack, Remaining Hop Count, shim length,
	 * UDP and IP lengths written directly; the L4 checksum takes the sum
	 * of the changes and its pseudo header's in l4_fix. */
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 acc = 0;
	at &= 0x1ff;
	for (int i = 0; i < 31; i++) {
		if (i >= w)
			break;
		__u8 *q = d + at + i * 4;
		if (q + 4 > end)
			return TC_ACT_SHOT;
		__u32 v = s->hop[i & 31];
		*(__u32 *)q = v;
		acc += (v & 0xffff) + (v >> 16);
	}
	__u32 so = p->shim & 0x1ff, l4 = p->l4 & 0xff;
	__u8 *sh = d + so, *u = d + l4, *iph = d + L3;
	if (sh + 8 > end || u + 8 > end)
		return TC_ACT_SHOT;
	acc = put8(acc, sh + 6, 1, p->rhc - 1);
	if (p->encap == ENC_GENEVE) {
		/* The option's and the Geneve header's lengths. */
		__u8 *g = d + (p->tunnel & 0xff);
		if (g + 2 > end)
			return TC_ACT_SHOT;
		acc = put8(acc, sh + 2, 1, (sh[3] & 0xe0) | (p->shim_words + hop_ml));
		acc = put8(acc, g, 0, (g[0] & 0xc0) | (p->shim_val + hop_ml));
	} else {
		acc = put8(acc, sh, 1, p->shim_words + hop_ml);
	}
	__u16 seg = p->ip_len - p->ihl;
	if (p->ipproto == IPPROTO_UDP) {
		__u16 o16 = *(__u16 *)(u + 4);
		*(__u16 *)(u + 4) = bpf_htons(seg + n);
		acc = cadd(acc, o16, *(__u16 *)(u + 4));
	}
	if (ip_set(p, iph, end, p->tos, p->ip_len + n))
		return TC_ACT_SHOT;
	if (l4_fix(skb, p, acc, seg, seg + n))
		return TC_ACT_SHOT;
	cnt(s, C_TRANSITED);
	return TC_ACT_OK;
}

static __always_inline int transit(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return TC_ACT_OK;
	struct pkt *p = &s->p;
	if (p->itype == INT_TYPE_MX) {
		cnt(s, C_TRANSITED);
		flow_event(skb, s, 0);
		return TC_ACT_OK;
	}
	if (p->rhc == 0) {
		set_hdr0(skb, p, 0x04);
		cnt(s, C_EBIT);
		return TC_ACT_OK;
	}
	__u32 hop_ml = p->hop_ml;
	__u32 n = hop_ml * 4;
	__u32 mtu = s->ifc.mtu;
	__u32 room = mtu > p->ip_len ? mtu - p->ip_len : 0;
	if (skb->gso_size) {
		/* INT segments are never merged by GRO (the INT bytes break
		 * the sequence arithmetic), so this is not an INT packet we
		 * can extend; leave it alone. Session tunnels through a veth
		 * excepted: their segments keep their size. */
		if (!tun_gso_transit(s)) {
			cnt(s, C_GSO);
			return TC_ACT_OK;
		}
		room = n;
	}
	if (n > room || p->shim_words + hop_ml > 255 ||
	    (p->encap == ENC_GENEVE && (p->shim_words + hop_ml > 31 || p->shim_val + hop_ml > 63))) {
		/* No room in the MTU, the shim or the Geneve option. */
		set_hdr0(skb, p, 0x02);
		cnt(s, C_MBIT);
		return TC_ACT_OK;
	}
	return push_hop(skb, s, hop_ml, n);
}

/* csum_out is the folded sum of the complements of the ilen bytes (a
 * multiple of 4) at d + so, in the linear part: their change to a checksum
 * when they are removed, as bpf_csum_diff has it; -1 past end. */
static __always_inline __s32 csum_out(__u8 *d, __u8 *end, __u32 so, __u32 ilen)
{
	/* The count is a new scalar: bounds learnt from it at each
	 * exit of the loop must not reach ilen, which callers use in
	 * pointer arithmetic (else every exit is verified apart). */
	__u32 nw = ilen >> 2;
	asm volatile("" : "+r"(nw));
	/* Eight bytes a step: their 32-bit halves summed in 64 bits
	 * and folded, the same one's complement sum. */
	__u64 a64 = 0;
	for (int i = 0; i < MAX_INT / 8; i++) {
		if (i * 2 >= nw)
			break;
		__u8 *q = d + so + i * 8;
		asm volatile("" : "+r"(q));
		if (i * 2 + 1 == nw) {
			if (q + 4 > end)
				return -1;
			a64 += (__u32)~*(__u32 *)q;
			break;
		}
		if (q + 8 > end)
			return -1;
		__u64 v = ~*(__u64 *)q;
		a64 += (v & 0xffffffff) + (v >> 32);
	}
	a64 = (a64 & 0xffffffff) + (a64 >> 32);
	a64 = (a64 & 0xffffffff) + (a64 >> 32);
	return cfold((__u32)a64);
}

/* strip is the INT sink step after the report: remove shim and INT (and the
 * UDP header of NPT 2), restore DSCP / port / protocol and lengths. It
 * returns 0, or -1 when the packet must be dropped. */
static __always_inline int strip(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return -1;
	struct pkt *p = &s->p;
	__u32 ilen = 4 + (__u32)p->shim_words * 4;
	if (ilen > MAX_INT)
		return -1;
	if (p->npt == NPT_IP_PROTO) {
		__u32 n = 8 + ilen;
		if (p->v6) {
			__u8 nh = p->shim_val;
			__u16 pl = bpf_htons(p->ip_len - 40 - n);
			bpf_skb_store_bytes(skb, L3 + 6, &nh, 1, 0);
			bpf_skb_store_bytes(skb, L3 + 4, &pl, 2, 0);
		} else {
			__u8 ttl;
			bpf_skb_load_bytes(skb, L3 + 8, &ttl, 1);
			__u16 old = ((__u16)ttl << 8) | IPPROTO_UDP;
			ip_word(skb, 8, old, (old & 0xff00) | (p->shim_val & 0xff));
			ip_word(skb, 2, p->ip_len, p->ip_len - n);
		}
		return shrink(skb, s, p->l4, n, fixed_len(p)) ? -1 : 0;
	}
	/* The bytes removed: shim and INT, after the probe marker. */
	__u32 start = p->shim;
	if (p->encap == ENC_PROBE_MARKER) {
		start -= 8;
		ilen += 8;
	}
	/* Checksum effect of the removed bytes: the folded sum of their
	 * complements (bpf_csum_diff's), summed in place when they are in
	 * the linear part. */
	__u32 acc = 0;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 so = start & 0xff;
	if (d + so + ilen <= end) {
		__s32 r = csum_out(d, end, so, ilen);
		if (r < 0)
			return -1;
		acc = r;
	} else {
		__s64 diff = 0;
		for (int i = 0; i < 2; i++) {
			__u32 done = i * 512;
			if (done >= ilen)
				break;
			__u32 len = ilen - done;
			if (len > 512)
				len = 512;
			len &= 0x3fc;
			if (len == 0 || len > 512)
				break;
			if (bpf_skb_load_bytes(skb, start + done, s->buf, len))
				return -1;
			diff = bpf_csum_diff((__u32 *)s->buf, len, 0, 0, diff);
		}
		if (diff < 0)
			return -1;
		acc = cfold((__u32)diff);
		d = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
	}
	__u32 l4 = p->l4 & 0xff;
	__u8 *u = d + l4, *iph = d + L3;
	if (u + 8 > end)
		return -1;
	__u16 seg = p->ip_len - p->ihl;
	__u16 o16;
	if (ENC_IS_TUNNEL(p->encap)) {
		/* Restore the tunnel header: GPE's and GRE's next protocol
		 * from the shim, Geneve's option length without the option. */
		__u8 *g = d + (p->tunnel & 0xff), *sh = d + (p->shim & 0xff);
		if (g + 4 > end || sh + 4 > end)
			return -1;
		if (p->encap == ENC_VXLAN_GPE)
			acc = put8(acc, g + 2, 1, sh[3]);
		else if (p->encap == ENC_GRE)
			*(__u16 *)(g + 2) = *(__u16 *)(sh + 2);
		else
			acc = put8(acc, g, 0, (g[0] & 0xc0) | ((g[0] - (ilen >> 2)) & 0x3f));
	}
	if (p->ipproto == IPPROTO_UDP) {
		o16 = *(__u16 *)(u + 4);
		*(__u16 *)(u + 4) = bpf_htons(seg - ilen);
		acc = cadd(acc, o16, *(__u16 *)(u + 4));
	}
	if (p->npt == NPT_UDP_PORT) {
		o16 = *(__u16 *)(u + 2);
		*(__u16 *)(u + 2) = bpf_htons(p->shim_val);
		acc = cadd(acc, o16, *(__u16 *)(u + 2));
	}
	__u8 tos = p->tos;
	if (p->encap == 1)
		tos = (p->tos & 0x03) | (p->shim_val & 0xfc);
	if (ip_set(p, iph, end, tos, p->ip_len - ilen))
		return -1;
	p->tos = tos;
	if (l4_fix(skb, p, acc, seg, seg - ilen))
		return -1;
	/* Move what lies between the fixed IP header and the shim down over
	 * the INT bytes, then drop the room after the fixed IP header. */
	__u32 fix = fixed_len(p);
	__u32 mv = start - (L3 + fix);
	if (mv > MAX_MOVE)
		return -1;
	d = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	/* Top word first (the bytes move up), from the last word to move:
	 * no pass over the words that stay. */
	__u32 words = mv >> 2;
	for (__u32 j = 0; j < MAX_MOVE / 4; j++) {
		if (j >= words)
			break;
		__u32 i = (words - 1 - j) & (MAX_MOVE / 4 - 1);
		__u8 *src = d + L3 + fix + i * 4;
		__u8 *dst = src + (ilen & 0x7ff);
		asm volatile("" : "+r"(dst), "+r"(src));
		if (dst + 4 > end || src + 4 > end)
			return -1;
		*(__u32 *)dst = *(__u32 *)src;
	}
	if (bpf_skb_adjust_room(skb, -(__s32)ilen, BPF_ADJ_ROOM_NET, 0))
		return -1;
	return 0;
}

static __always_inline int sink(struct __sk_buff *skb, struct scratch *s)
{
	if (!s)
		return TC_ACT_OK;
	int discard = s->p.hdr0 & 0x08;
	if (s->p.itype == INT_TYPE_MD && s->p.rhc == 0)
		cnt(s, C_EBIT);
	flow_event(skb, s, EVF_SINK);
	/* A session tunnel goes whole, leaving the packet the source sent.
	 * Only VXLAN-GPE INT can be one (tun_ends): other packets skip the
	 * call. */
	int tun = s->p.encap == ENC_VXLAN_GPE ? tun_end(skb, s) : 0;
	if (tun < 0 || (!tun && strip(skb, s))) {
		cnt(s, C_MALFORMED);
		cnt_drop(s, 0);
		return shot(skb);
	}
	if (tun == 2) {
		cnt(s, C_STRIPPED);
		return bpf_redirect(s->c.tun_dev, BPF_F_INGRESS); /* C_OUT as it leaves again */
	}
	if (discard) {
		cnt2(s, C_STRIPPED, C_DISCARDED);
		return shot(skb);
	}
	/* The TCP header is where it was (NPT 2: where the UDP header was). */
	if (!tun && s->p.proto == IPPROTO_TCP && ((s->p.tcp_flags | s->p.npt2_flags) & 0x02))
		syn_clamp(skb, s, 1);
	cnt2(s, C_STRIPPED, C_OUT);
	return TC_ACT_OK;
}

GLOBAL int queue_report(struct __sk_buff *skb, struct scratch *s, int watched)
{
	if (!s)
		return 0;
	struct hop *h = &s->h;
	need_occ(skb, s);
	__u32 k = txq_key(s->slot, h->qid);
	__u8 *qi = bpf_map_lookup_elem(&qr_of, &k);
	if (!qi || !*qi)
		return 0; /* no report on this queue */
	__u32 i = (*qi - 1) & (MAX_QR - 1);
	struct qr_cfg *q = bpf_map_lookup_elem(&qr_cfg_map, &i);
	struct qr_state *st = bpf_map_lookup_elem(&qr_state_map, &i);
	if (!q || !st)
		return 0;
	need_qtime(skb, s);
	int breach = (q->depth && h->occ >= q->depth) || (q->latency && (h->valid & INST_HOP_LATENCY) && h->latency >= q->latency);
	__u32 flags = watched ? 0 : EVF_UNWATCHED;
	if (!breach) {
		if (st->in_breach) {
			int reset = (!q->latency && h->occ < q->depth / 2) || (q->latency && h->latency < q->reset);
			if (reset) {
				st->in_breach = 0;
				st->quota_left = q->quota;
				emit(skb, s, EV_QUEUE, flags); /* ends the breach in userspace too */
			}
		}
		return 0;
	}
	if (!st->in_breach) {
		st->in_breach = 1;
		st->breaches++;
		st->quota_left = q->quota;
	}
	if (!st->quota_left)
		return 0;
	if (q->rate) {
		/* The report pipeline's rule: one second windows from the
		 * first report in each (racing CPUs may overshoot by one). */
		if (h->ts_out - st->win_start >= 1000000000ULL || h->ts_out < st->win_start) {
			st->win_start = h->ts_out;
			st->win_count = 0;
		}
		if (st->win_count >= q->rate)
			return 0;
		st->win_count++;
	}
	st->quota_left--;
	st->reports++;
	emit(skb, s, EV_QUEUE, flags | EVF_BREACH);
	return 0;
}

SEC("tc")
int intd_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u32 ifx = skb->ifindex;
	struct iface *ifc = iface_of(ifx);
	if (!ifc)
		return TC_ACT_OK;
	__u32 slot = ifc->slot;
	struct counters *ctr = bpf_map_lookup_elem(&ctrs, &slot);
	if (ctr)
		ctr->c[C_IN]++;
	/* The fingerprint is what intd_egress computes from s->p: folded
	 * addresses, IPv4 id and total length (IPv6: the low 16 bits of the
	 * flow label and 40 + payload length), protocol. */
	__u32 h[10];
	__u32 sa, da, idlen, proto;
	if (skb->protocol == bpf_htons(0x0800)) {
		if (bpf_skb_load_bytes(skb, L3, h, 20) < 0)
			return TC_ACT_OK;
		__u8 *b = (__u8 *)h;
		if (!ifc->sink)
			tun_arrive(skb, h, 0);
		sa = h[3];
		da = h[4];
		idlen = ((__u32)b[4] << 24) | ((__u32)b[5] << 16) | ((__u32)b[2] << 8) | b[3];
		proto = b[9];
	} else if (skb->protocol == bpf_htons(0x86dd)) {
		if (bpf_skb_load_bytes(skb, L3, h, 40) < 0)
			return TC_ACT_OK;
		if (!ifc->sink)
			tun_arrive(skb, h, 1);
		__u8 *b = (__u8 *)h;
		sa = afold(&h[2]);
		da = afold(&h[6]);
		idlen = ((__u32)b[2] << 24) | ((__u32)b[3] << 16) | ((40 + (((__u32)b[4] << 8) | b[5])) & 0xffff);
		proto = b[6];
	} else {
		return TC_ACT_OK;
	}
	struct ing_slot *sl = bpf_map_lookup_elem(&ing_map, &zero);
	if (!sl)
		return TC_ACT_OK;
	sl->ts = clock_ns();
	sl->fp = fingerprint(sa, da, idlen, proto);
	sl->ifindex = ifx;
	sl->l1_id = ifc->l1_id;
	sl->l2_id = ifc->l2_id;
	sl->sink = ifc->sink;
	sl->slot = ifc->slot;
	return TC_ACT_OK;
}

/* The steps intd_egress passes a packet to, and intd_transit and
 * intd_sink back from, with a tail call (enum step). */
int intd_egress(struct __sk_buff *skb);
int intd_transit(struct __sk_buff *skb);
int intd_sink(struct __sk_buff *skb);
int intd_source(struct __sk_buff *skb);
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, NSTEPS);
	__type(key, __u32);
	__array(values, int(struct __sk_buff *));
} steps SEC(".maps") = {
	.values =
		{
			[STEP_EGRESS] = (void *)&intd_egress,
			[STEP_TRANSIT] = (void *)&intd_transit,
			[STEP_SINK] = (void *)&intd_sink,
			[STEP_SOURCE] = (void *)&intd_source,
		},
};

/* TAIL_CALL is a tail call to step k (a constant) of steps. The JIT makes
 * a constant index a direct jump; the empty asm after the call, whose
 * operand is k, keeps the compiler from merging two calls into one with a
 * variable index (an indirect jump). */
#define TAIL_CALL(skb, k)                         \
	do {                                      \
		bpf_tail_call(skb, &steps, k);    \
		asm volatile("" ::"i"(k));        \
	} while (0)

SEC("tc")
int intd_egress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct scratch *s = scratch();
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!s || !c)
		return TC_ACT_OK;
	__u32 ifx = skb->ifindex;
	struct iface *ifc = iface_of(ifx);
	if (!ifc)
		return TC_ACT_OK;
	if ((c->flags & F_DTEL) && c->dscp_mask) {
		/* IPv4 without options: marked from another node, most likely
		 * INT to transit or to sink, which intd_transit and intd_sink
		 * do for the common layouts; unmarked, intd_source's to give
		 * INT or pass. Unless a step sent the packet back. */
		__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		if (d + 16 <= end && *(__u16 *)(d + 12) == bpf_htons(0x0800) && d[14] == 0x45) {
			if (s->slow)
				s->slow = 0;
			else if (((d[15] >> 2) & c->dscp_mask) != c->dscp_val) {
				if (!ifc->sink && (c->flags & F_ENDPOINT) && c->wl_count && d + 24 <= end &&
				    (d[23] == IPPROTO_TCP || d[23] == IPPROTO_UDP))
					TAIL_CALL(skb, STEP_SOURCE);
			} else if (skb->ingress_ifindex) {
				if (!ifc->sink && (c->flags & F_TRANSIT))
					TAIL_CALL(skb, STEP_TRANSIT);
				else if (ifc->sink && (c->flags & F_ENDPOINT))
					TAIL_CALL(skb, STEP_SINK);
			}
		}
	}
	s->slot = ifc->slot;
	if (!(c->flags & F_DTEL) || (skb->ingress_ifindex == c->gso_peer && c->gso_peer) ||
	    (skb->ingress_ifindex == c->tun_dev && c->tun_dev)) {
		/* Segments back from the GSO detour already had their INT
		 * step in intd_gso; a session tunnel's packet back from the
		 * kernel's decapsulation (tun_handoff) its sink step. */
		cnt(s, C_OUT);
		return TC_ACT_OK;
	}
	s->c = *c;
	s->ifc = *ifc;
	/* The ingress interface. A packet from outside the INT domain -
	 * through a sink (edge) port, or sent by the host itself (no ingress
	 * interface) - is never INT, whatever its DSCP or ports say. */
	__u32 in = skb->ingress_ifindex;
	__u32 l1_in = 0, l2_in = 0, known = 0;
	struct ing_slot *sl = bpf_map_lookup_elem(&ing_map, &zero);
	s->edge = !in;
	s->in_slot = 0;
	if (sl && in && sl->ifindex == in) {
		/* intd_ingress of this CPU saw the packet's ingress port last. */
		l1_in = sl->l1_id;
		l2_in = sl->l2_id;
		s->edge = sl->sink;
		s->in_slot = sl->slot;
		known = 1;
	} else if (in) {
		struct iface *ii = iface_of(in);
		if (ii) {
			l1_in = ii->l1_id;
			l2_in = ii->l2_id;
			s->edge = ii->sink;
			s->in_slot = ii->slot;
			known = 1;
		}
	}
	int pr = parse(skb, s);
	if (pr < 0) {
		cnt(s, C_OUT);
		return TC_ACT_OK;
	}
	struct hop *h = &s->h;
	__builtin_memset(h, 0, sizeof(*h));
	h->node = s->c.node_id;
	h->l1_out = ifc->l1_id;
	h->l2_out = ifc->l2_id;
	h->in_ifindex = in;
	h->out_ifindex = ifx;
	h->valid = INST_NODE_ID; /* node id; queue: need_occ; time: need_time */
	h->occ = 0;
	if (known) {
		h->l1_in = l1_in;
		h->l2_in = l2_in;
		h->valid |= INST_L1_INTERFACES | INST_L2_INTERFACES;
	}
	s->t_in = 0;
	if (sl && sl->ifindex == h->in_ifindex && sl->ts) {
		/* The fingerprint is of the packet as it arrived: INT edits
		 * happen below, at this node's egress. need_time takes the
		 * latency from t_in. */
		__u32 idlen = ((__u32)s->p.ip_id << 16) | (s->p.ip_len & 0xffff);
		if (sl->fp == fingerprint(afold(s->p.saddr), afold(s->p.daddr), idlen, s->p.ipproto))
			s->t_in = sl->ts;
	}
	if (s->c.flags & F_QTIME)
		follow(skb, s);
	int qr = s->ifc.qr && (s->c.flags & F_QUEUE);

	if (pr > 0 && s->c.malformed_drop) {
		/* Marked but not INT, from inside the domain: dropped, counted
		 * on the ingress interface (reason 0) and reported like the
		 * drop of an INT packet. */
		cnt_at(s->in_slot, C_MALFORMED);
		cnt_at(s->in_slot, C_DROP);
		__u64 *dr = bpf_map_lookup_elem(&drops, &zero);
		if (dr)
			(*dr)++;
		if (s->c.flags & F_DROP) {
			cnt_at(s->in_slot, C_DROP_GEN);
			emit(skb, s, EV_DROP, 0);
		}
		return shot(skb);
	}
	if (pr > 0) {
		/* Marked but not INT, from inside the domain: forwarded as it
		 * is (never watched, so never given INT). */
		cnt_at(s->in_slot, C_MALFORMED_FWD);
		if (qr)
			queue_report(skb, s, 0);
		cnt(s, C_OUT);
		return TC_ACT_OK;
	}
	if (s->p.shim) {
		if (s->ifc.sink && (s->c.flags & F_ENDPOINT))
			return sink(skb, s);
		if (s->c.flags & F_TRANSIT) {
			if (transit(skb, s) != TC_ACT_OK)
				return shot(skb);
		}
		if (qr)
			queue_report(skb, s, 1);
		cnt(s, C_OUT);
		return TC_ACT_OK;
	}
	int watched = classify(skb, s);
	if (s->edge && (s->c.flags & F_REMARK) && !s->ifc.sink &&
	    ((s->p.tos >> 2) & s->c.dscp_mask) == s->c.dscp_val)
		remark(skb, s); /* entering the domain: after the watchlist saw it */
	if (watched) {
		__u32 si = s->e.stats & (MAX_WL - 1);
		struct wl_stats *ws = bpf_map_lookup_elem(&wl_stats_map, &si);
		if (ws) {
			ws->packets++;
			ws->bytes += skb->len;
			if (s->unsampled)
				ws->unsampled++;
		}
		if (s->unsampled == OP_INT) {
			__u32 sid = s->e.session;
			struct sess_stats *ss = bpf_map_lookup_elem(&sess_stats_map, &sid);
			if (ss)
				ss->sampled++;
		}
		if (s->miss && (s->c.flags & F_DROP) && (s->e.act & (ACT_DROP_REPORT | ACT_TAIL_DROP))) {
			/* A tunnel's users are watched apart: keyed with the
			 * digest of the tunnel and inner flow (tun_digest). */
			struct flow_key k = {.sport = s->p.sport, .dport = s->p.dport, .proto = s->p.proto,
					     .inner = s->p.idigest};
			__builtin_memcpy(k.src, s->p.saddr, 16);
			__builtin_memcpy(k.dst, s->p.daddr, 16);
			need_time(s);
			struct drop_watch dw = {.ts = s->now, .in_ifindex = h->in_ifindex, .act = s->e.act};
			bpf_map_update_elem(&drop_watch_map, &k, &dw, BPF_ANY);
		}
		if (s->entry_op == OP_INT && (s->c.flags & F_ENDPOINT) && !s->ifc.sink) {
			/* The flow's SYNs are clamped whether or not this packet
			 * is sampled: every segment given INT later needs room. */
			if (s->p.ipproto == IPPROTO_TCP && (s->p.tcp_flags & 0x02))
				syn_clamp(skb, s, 0);
			if (s->op == OP_INT) {
				int r = source(skb, s);
				if (r == TC_ACT_REDIRECT) {
					/* GSO detour: the segments count as they leave. */
					if (qr)
						queue_report(skb, s, watched);
					return r;
				}
				if (r != TC_ACT_OK)
					return shot(skb);
			}
		} else if (s->op == OP_POSTCARD && (s->c.flags & F_POSTCARD)) {
			cnt(s, C_POSTCARD);
			__u32 fl = (s->e.act & ACT_REPORT_ALL) ? EVF_REPORT_ALL : 0;
			if (s->e.act & ACT_SESSION) {
				__u32 sid = s->e.session;
				struct session *se = bpf_map_lookup_elem(&sessions, &sid);
				if (se) {
					s->req = se->inst;
					s->req_ds = ((__u32)se->domain << 16) | se->ds_inst;
					fl |= EVF_INST;
				}
			}
			flow_event(skb, s, fl);
		}
	}
	if (s->ifc.sink && (s->c.flags & F_ENDPOINT) && s->p.ipproto == IPPROTO_TCP && (s->p.tcp_flags & 0x02))
		syn_clamp(skb, s, 1); /* a reply leaving the domain */
	if (qr)
		queue_report(skb, s, watched);
	cnt(s, C_OUT);
	return TC_ACT_OK;
}

/* fast_hop is build_hop for a hop of exactly the words inst asks for
 * (no padding, no checksum complement): no loop, no popcount. */
static __always_inline void fast_hop(struct scratch *s, __u32 inst)
{
	const int sparse = 0;
	struct hop *h = &s->h;
	__u32 valid = h->valid;
	__u32 n = 0;
	HOP_FIELDS();
}

/* FAST_L4_SUM is l4_fix's sum written in place, for the steps' packets
 * with CHECKSUM_NONE or UNNECESSARY: the L4 checksum at d + csum takes the
 * covered bytes' change acc and the length seg -> nseg; a zero UDP
 * checksum stays zero, a zero result becomes 0xffff. A macro, so that
 * each step keeps the code it was measured with. */
#define FAST_L4_SUM(d, csum, udp, seg, nseg, acc)                                                          \
	do {                                                                                               \
		__u16 *ck_ = (__u16 *)((d) + (csum));                                                      \
		__u16 v_ = *ck_;                                                                           \
		if (v_ || !(udp)) {                                                                        \
			__u16 nv_ = ~cfold(0xffff + (__u16)~bpf_htons(seg) + bpf_htons(nseg) + (__u16)~v_ + cfold(acc)); \
			*ck_ = (!nv_ && (udp)) ? 0xffff : nv_;                                             \
		}                                                                                          \
	} while (0)

/* FAST_SLOW: a step (fast_transit, fast_sink, fast_source) leaves the
 * packet, unchanged, to the general path. */
#define FAST_SLOW 1

/* fast_setup is, for a step (role: STEP_TRANSIT, STEP_SINK or
 * STEP_SOURCE, a constant), what intd_egress sets up between its lookups
 * and its roles: the ingress port (for transit and sink one inside the
 * domain, else FAST_SLOW; for a source any port or the host), the egress
 * slot, and of the configuration and the hop only what the functions the
 * steps call read: the time offset (need_time); what need_occ, need_time
 * and need_qtime test or use before they set it, the ids build_hop,
 * filter and emit take (others they mask by their valid bit). Every store
 * counts: zeroing the whole hop cost ~10 ns. */
static __always_inline int fast_setup(struct __sk_buff *skb, struct scratch *s, struct cfg *c, struct iface *ifc,
				      __u32 idlen, __u32 sa, __u32 da, __u8 proto, const int role)
{
	const int src = role == STEP_SOURCE;
	__u32 zero = 0, in = skb->ingress_ifindex;
	__u32 l1_in = 0, l2_in = 0, known = 1;
	struct ing_slot *sl = bpf_map_lookup_elem(&ing_map, &zero);
	if (sl && (!src || in) && sl->ifindex == in) {
		if (sl->sink && !src)
			return FAST_SLOW;
		l1_in = sl->l1_id;
		l2_in = sl->l2_id;
	} else {
		struct iface *ii = src && !in ? 0 : iface_of(in);
		if (!src && (!ii || ii->sink))
			return FAST_SLOW;
		if (ii) {
			l1_in = ii->l1_id;
			l2_in = ii->l2_id;
		} else {
			known = 0; /* the host, or a port intd does not know */
		}
	}
	s->slot = ifc->slot;
	s->c.time_offset = c->time_offset;
	struct hop *h = &s->h;
	h->valid = INST_NODE_ID | (known ? INST_L1_INTERFACES | INST_L2_INTERFACES : 0);
	h->qdone = h->occ_read = 0;
	h->occ = h->txq = 0;
	h->node = c->node_id;
	h->l1_in = l1_in;
	h->l1_out = ifc->l1_id;
	h->l2_in = l2_in;
	h->l2_out = ifc->l2_id;
	if (role == STEP_SINK) {
		/* What filter and emit read besides. */
		h->qid = 0;
		h->in_ifindex = in;
		h->out_ifindex = skb->ifindex;
	}
	s->t_in = 0;
	if (sl && sl->ifindex == in && sl->ts && sl->fp == fingerprint(sa, da, idlen, proto))
		s->t_in = sl->ts;
	if (c->flags & F_QTIME)
		follow(skb, s);
	return 0;
}

/* fast_transit is transit's step, parse's checks included, for a packet
 * of Ethernet, IPv4 without options, an L4 header of l4len bytes (a
 * constant: TCP of 20 or 32 bytes, or UDP) and DSCP-marked INT-MD behind
 * it. Every offset is a constant; the checks are parse's and transit's,
 * in an order that changes nothing before the last of them. */
static __always_inline int fast_transit(struct __sk_buff *skb, struct scratch *s, struct cfg *c, struct iface *ifc,
					const __u32 l4len)
{
	const __u32 l4 = L3 + 20, so = l4 + l4len, at = so + 16, mv = l4len + 16;
	const int udp = l4len == 8;
	const __u32 csum = udp ? l4 + 6 : l4 + 16;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + at > end)
		return FAST_SLOW; /* not linear: parse pulls it */
	__u8 *b = d + so;
	__u32 ip_len = ((__u32)d[16] << 8) | d[17];
	__u32 words = b[1], hop_ml = b[6] & 0x1f, rhc = b[7];
	__u16 inst = ((__u16)b[8] << 8) | b[9];
	/* MX, another type or version, NPT (DSCP marks none), E bit due. */
	if ((b[0] & 0xfc) != (INT_TYPE_MD << 4) || (b[4] >> 4) != 2 || words < 3 || !rhc || !hop_ml)
		return FAST_SLOW;
	if (at > L3 + ip_len || so + 4 + words * 4 > L3 + ip_len || (words - 3) % hop_ml)
		return FAST_SLOW; /* malformed */
	if (hop_ml != inst_words(inst) || (inst & (INST_RESERVED | INST_CHECKSUM_COMPLEMENT)))
		return FAST_SLOW; /* malformed, or padding: domain-specific, reserved or checksum words */
	__u32 n = hop_ml * 4;
	if (skb->gso_size || ip_len + n > ifc->mtu || words + hop_ml > 255)
		return FAST_SLOW; /* GSO; M bit */
	__u8 hdr0 = b[4];
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	__u32 summed = BPF_CORE_READ_BITFIELD(kskb, ip_summed);
	__u32 idlen = ((__u32)d[18] << 24) | ((__u32)d[19] << 16) | ip_len;
	__u32 sa = *(__u32 *)(d + 26), da = *(__u32 *)(d + 30);

	if (fast_setup(skb, s, c, ifc, idlen, sa, da, d[23], STEP_TRANSIT))
		return FAST_SLOW;

	/* push_hop. */
	need_inst(skb, s, inst);
	__u32 w = hop_ml;
	fast_hop(s, inst);
	struct pkt *p = &s->p; /* what set_hdr0 and l4_fix read */
	if (bpf_skb_adjust_room(skb, n, BPF_ADJ_ROOM_NET, 0)) {
		p->shim = so;
		p->hdr0 = hdr0;
		p->csum = csum;
		p->csum_flags = udp ? BPF_F_MARK_MANGLED_0 : 0;
		set_hdr0(skb, p, 0x02);
		cnt(s, C_MBIT);
		goto out;
	}
	PKT_RELOAD(skb, d, end);
	/* L4 header, shim and INT header back up to the IP header. */
	__u8 *src = d + l4 + (n & 0x7c);
	asm volatile("" : "+r"(src));
	if (d + at > end || src + mv > end)
		return shot(skb);
#pragma unroll
	for (__u32 i = 0; i + 8 <= mv; i += 8)
		*(__u64 *)(d + l4 + i) = *(__u64 *)(src + i);
	if (mv & 4)
		*(__u32 *)(d + l4 + (mv & ~7)) = *(__u32 *)(src + (mv & ~7));
	/* The hop on top of the stack. */
	__u32 acc = 0;
	for (int i = 0; i < 31; i++) {
		if (i >= w)
			break;
		__u8 *q = d + at + i * 4;
		if (q + 4 > end)
			return shot(skb);
		__u32 v = s->hop[i & 31];
		*(__u32 *)q = v;
		acc += (v & 0xffff) + (v >> 16);
	}
	__u8 *sh = d + so;
	acc = put8(acc, sh + 6, 1, rhc - 1);
	acc = put8(acc, sh, 1, words + hop_ml);
	__u16 seg = ip_len - 20;
	if (udp) {
		__u16 o16 = *(__u16 *)(d + l4 + 4);
		*(__u16 *)(d + l4 + 4) = bpf_htons(seg + n);
		acc = cadd(acc, o16, *(__u16 *)(d + l4 + 4));
	}
	/* ip_set with the TOS unchanged: its byte store adds 0xffff. */
	__u16 o16 = *(__u16 *)(d + 16);
	*(__u16 *)(d + 16) = bpf_htons(ip_len + n);
	ip_csum_fix(d + L3, cadd(0xffff, o16, *(__u16 *)(d + 16)));
	if (summed <= 1) {
		FAST_L4_SUM(d, csum, udp, seg, seg + n, acc);
	} else {
		p->csum = csum;
		p->csum_flags = udp ? BPF_F_MARK_MANGLED_0 : 0;
		if (l4_fix(skb, p, acc, seg, seg + n))
			return shot(skb);
	}
	__u32 k = s->slot;
	struct counters *ct = bpf_map_lookup_elem(&ctrs, &k);
	if (ct) {
		ct->c[C_TRANSITED]++;
		ct->c[C_OUT]++;
		ct->c[C_FAST_TRANSIT]++;
	}
	return TC_ACT_OK;
out:
	cnt(s, C_OUT);
	return TC_ACT_OK;
}

/* FAST_STEP sets r to what step (fast_transit, fast_sink or fast_source)
 * makes of the packet when it has a layout the steps take, with the L4
 * header's length as a constant: IPv4 without options or fragmentation;
 * TCP with 20 or 32 bytes of header, or UDP but for the tunnels INT is
 * carried in (c->tunnels). A macro, not a function returning the length:
 * the checks then lead straight to each call. */
#define FAST_STEP(r, step, skb, s, c, ifc)                                                                \
	do {                                                                                              \
		__u8 *d_ = (void *)(long)(skb)->data, *end_ = (void *)(long)(skb)->data_end;             \
		if (d_ + L3 + 20 + 20 > end_ || d_[14] != 0x45 || (*(__u16 *)(d_ + 20) & bpf_htons(0x3fff))) \
			break;                                                                            \
		if (d_[23] == IPPROTO_TCP) {                                                              \
			if ((d_[46] >> 4) == 5)                                                           \
				r = step(skb, s, c, ifc, 20);                                             \
			else if ((d_[46] >> 4) == 8)                                                      \
				r = step(skb, s, c, ifc, 32);                                             \
		} else if (d_[23] == IPPROTO_UDP) {                                                       \
			__u16 dport_ = ((__u16)d_[36] << 8) | d_[37];                                     \
			if (!(((c)->tunnels & TUN_VXLAN_GPE) && dport_ == PORT_VXLAN_GPE) &&             \
			    !(((c)->tunnels & TUN_GENEVE) && dport_ == PORT_GENEVE))                      \
				r = step(skb, s, c, ifc, 8);                                              \
		}                                                                                         \
	} while (0)

/* fast_back hands a packet a step did not take, unchanged, back to
 * intd_egress's general path; the flag keeps intd_egress from sending it
 * to the step again. */
static __always_inline int fast_back(struct __sk_buff *skb, struct scratch *s)
{
	s->slow = 1;
	bpf_tail_call(skb, &steps, STEP_EGRESS);
	s->slow = 0;
	return TC_ACT_OK;
}

/* fast_sink is sink()'s step, parse's checks included, for the layouts of
 * fast_transit: the report filter and event as sink() has them, then
 * strip() with constant offsets. A packet with the D bit, the E bit due,
 * a TCP flag that reports or is clamped (FIN, SYN, RST), or anything
 * parse calls malformed goes back before anything changed. */
static __always_inline int fast_sink(struct __sk_buff *skb, struct scratch *s, struct cfg *c, struct iface *ifc,
				     const __u32 l4len)
{
	const __u32 l4 = L3 + 20, so = l4 + l4len, at = so + 16;
	const int udp = l4len == 8;
	const __u32 csum = udp ? l4 + 6 : l4 + 16;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + at > end)
		return FAST_SLOW; /* not linear: parse pulls it */
	__u8 *b = d + so;
	__u32 ip_len = ((__u32)d[16] << 8) | d[17];
	__u32 words = b[1], hop_ml = b[6] & 0x1f;
	__u16 inst = ((__u16)b[8] << 8) | b[9];
	__u32 ilen = 4 + words * 4;
	if ((b[0] & 0xfc) != (INT_TYPE_MD << 4) || (b[4] >> 4) != 2 || (b[4] & 0x08) || !b[7] || words < 3 ||
	    (!udp && (d[l4 + 13] & 0x07)))
		return FAST_SLOW; /* MX, another type or version, NPT; D; E; TCP flags */
	if (at > L3 + ip_len || so + ilen > L3 + ip_len || hop_ml < inst_words(inst) || (words > 3 && !hop_ml) ||
	    (hop_ml && (words - 3) % hop_ml))
		return FAST_SLOW; /* malformed */
	if (skb->gso_size || d + so + ilen > end)
		return FAST_SLOW; /* GSO; INT not in the linear part */
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	__u32 summed = BPF_CORE_READ_BITFIELD(kskb, ip_summed);
	__u32 idlen = ((__u32)d[18] << 24) | ((__u32)d[19] << 16) | ip_len;
	__u32 sa = *(__u32 *)(d + 26), da = *(__u32 *)(d + 30);
	if (fast_setup(skb, s, c, ifc, idlen, sa, da, d[23], STEP_SINK))
		return FAST_SLOW;

	/* What filter and emit read of the packet and the configuration. */
	struct pkt *p = &s->p;
	p->sport = ((__u16)d[l4] << 8) | d[l4 + 1];
	p->dport = ((__u16)d[l4 + 2] << 8) | d[l4 + 3];
	p->proto = p->ipproto = d[23];
	p->tcp_flags = udp ? 0 : d[l4 + 13];
	p->idigest = 0;
	/* By words, as filter reads them. */
	__u64 *pa = (__u64 *)p->saddr, *pd = (__u64 *)p->daddr;
	pa[0] = pd[0] = 0;
	pa[1] = KEY_V4(sa);
	pd[1] = KEY_V4(da);
	p->shim = so;
	p->itype = INT_TYPE_MD;
	p->hop_ml = hop_ml;
	p->shim_words = words;
	p->inst = inst;
	s->c.flags = c->flags;
	s->c.lat_shift = c->lat_shift;
	s->c.flow_interval = c->flow_interval;
	s->c.lat_factor = c->lat_factor;
	s->c.lat_floor = c->lat_floor;
	/* flow_event without a TCP flag that triggers; a suppressed event
	 * counts with the strip below, in one counter lookup. */
	int fl = filter(skb, s);
	if (fl & FL_REPORT) {
		cnt(s, C_FLOW_GEN);
		emit(skb, s, EV_FLOW, EVF_SINK | ((fl & FL_ANOMALY) ? EVF_LAT_ANOMALY : 0));
	}
	__u32 quiet = !(fl & FL_REPORT);

	/* strip. */
	PKT_RELOAD(skb, d, end);
	if (d + at > end || d + so + ilen > end)
		goto bad;
	__s32 sum = csum_out(d, end, so, ilen);
	if (sum < 0)
		goto bad;
	__u32 acc = sum;
	__u16 seg = ip_len - 20, nseg = seg - ilen;
	if (udp) {
		__u16 o16 = *(__u16 *)(d + l4 + 4);
		*(__u16 *)(d + l4 + 4) = bpf_htons(nseg);
		acc = cadd(acc, o16, *(__u16 *)(d + l4 + 4));
	}
	/* The DSCP the source kept in the shim, and the length. */
	__u32 iacc = put8(0, d + L3, 1, (d[15] & 0x03) | (d[so + 3] & 0xfc));
	__u16 o16 = *(__u16 *)(d + 16);
	*(__u16 *)(d + 16) = bpf_htons(ip_len - ilen);
	ip_csum_fix(d + L3, cadd(iacc, o16, *(__u16 *)(d + 16)));
	if (summed <= 1) {
		FAST_L4_SUM(d, csum, udp, seg, nseg, acc);
	} else {
		p->csum = csum;
		p->csum_flags = udp ? BPF_F_MARK_MANGLED_0 : 0;
		if (l4_fix(skb, p, acc, seg, nseg))
			goto bad;
		PKT_RELOAD(skb, d, end);
	}
	/* The L4 header up over the INT bytes, top word first (it may
	 * overlap its new place), then the room after the IP header goes. */
	__u8 *dst = d + l4 + (ilen & 0x7fc);
	asm volatile("" : "+r"(dst));
	if (d + so > end || dst + l4len > end)
		goto bad;
	if (l4len & 4)
		*(__u32 *)(dst + (l4len & ~7)) = *(__u32 *)(d + l4 + (l4len & ~7));
#pragma unroll
	for (int i = (int)(l4len & ~7) - 8; i >= 0; i -= 8)
		*(__u64 *)(dst + i) = *(__u64 *)(d + l4 + i);
	if (bpf_skb_adjust_room(skb, -(__s32)ilen, BPF_ADJ_ROOM_NET, 0))
		goto bad;
	__u32 k = s->slot;
	struct counters *ct = bpf_map_lookup_elem(&ctrs, &k);
	if (ct) {
		ct->c[C_FLOW_GEN] += quiet;
		ct->c[C_EV_SUPPRESSED] += quiet;
		ct->c[C_STRIPPED]++;
		ct->c[C_OUT]++;
		ct->c[C_FAST_SINK]++;
	}
	return TC_ACT_OK;
bad:
	/* What sink() does when strip() fails. */
	if (quiet)
		cnt2(s, C_FLOW_GEN, C_EV_SUPPRESSED);
	cnt(s, C_MALFORMED);
	cnt_drop(s, 0);
	return shot(skb);
}

/* fast_source is the source's step, classify's and parse's checks
 * included, for the layouts of fast_transit without INT: a flow whose
 * verdict classify cached (this CPU's last flow, or the flow cache) and
 * that is either not watched, or given INT-MD by a session that marks it
 * with the DSCP, with a hop of exactly the words its instructions ask
 * for. Sampling, SYNs (clamped), postcards, the M bit, GSO and pending
 * checksums (the detour), tunnels and another marking INT could be
 * mistaken for go back before anything changed. */
static __always_inline int fast_source(struct __sk_buff *skb, struct scratch *s, struct cfg *c, struct iface *ifc,
				       const __u32 l4len)
{
	const __u32 l4 = L3 + 20, at = l4 + l4len;
	const int udp = l4len == 8;
	const __u32 csum = udp ? l4 + 6 : l4 + 16;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + at > end)
		return FAST_SLOW; /* not linear: parse pulls it */
	__u16 sport = ((__u16)d[l4] << 8) | d[l4 + 1], dport = ((__u16)d[l4 + 2] << 8) | d[l4 + 3];
	__u8 tos = d[15], tcp_flags = udp ? 0 : d[l4 + 13];
	if (c->udp_port || c->probe)
		return FAST_SLOW; /* parse might take it for INT */
	if (udp && (c->flags & F_WL_INNER) &&
	    (dport == PORT_VXLAN || dport == PORT_VXLAN_GPE || dport == PORT_GENEVE || dport == PORT_GTPU))
		return FAST_SLOW; /* classify looks inside */

	/* classify's key, and its cached verdict. */
	struct flow_key k = {.sport = sport, .dport = dport, .proto = d[23], .in_ifindex = skb->ingress_ifindex};
	k.src[2] = k.dst[2] = bpf_htonl(0xffff);
	k.src[3] = *(__u32 *)(d + 26);
	k.dst[3] = *(__u32 *)(d + 30);
	if (c->flags & F_WL_DSCP)
		k.dscp = tos >> 2;
	if (c->flags & F_WL_FLAGS)
		k.tcp_flags = tcp_flags;
	struct wl_cache *wc = &s->last;
	if (wc->gen != c->wl_gen || !flow_key_eq(&s->last_key, &k)) {
		wc = bpf_map_lookup_elem(&wl_cache_map, &k);
		if (!wc || wc->gen != c->wl_gen)
			return FAST_SLOW; /* a new flow, or the watchlist changed */
		s->last = *wc;
		s->last_key = k;
	}
	__u32 ip_len = ((__u32)d[16] << 8) | d[17];
	__u32 idlen = ((__u32)d[18] << 24) | ((__u32)d[19] << 16) | ip_len;
	__u32 sa = k.src[3], da = k.dst[3];
	if (wc->entry == WL_NONE) {
		/* Not watched: nothing but follow's queue sample. */
		if (c->flags & F_QTIME)
			fast_setup(skb, s, c, ifc, idlen, sa, da, d[23], STEP_SOURCE);
		__u32 k0 = ifc->slot;
		struct counters *ct = bpf_map_lookup_elem(&ctrs, &k0);
		if (ct) {
			ct->c[C_OUT]++;
			ct->c[C_FAST_PASS]++;
		}
		return TC_ACT_OK;
	}
	__u8 op = wc->flow_op;
	if (wc->interval_us && op != OP_NOP)
		return FAST_SLOW; /* packet-interval sampling */
	__u32 ins = 0;
	if (wc->entry_op == OP_INT && (c->flags & F_ENDPOINT)) {
		if (tcp_flags & 0x02)
			return FAST_SLOW; /* syn_clamp */
		ins = op == OP_INT;
	} else if (op == OP_POSTCARD && (c->flags & F_POSTCARD)) {
		return FAST_SLOW;
	}
	__u32 sid = wc->session, si = wc->stats & (MAX_WL - 1);
	struct session *se = 0;
	struct sess_stats *ss = 0;
	__u32 hop_ml = 0, inst = 0;
	if (ins) {
		se = bpf_map_lookup_elem(&sessions, &sid);
		ss = bpf_map_lookup_elem(&sess_stats_map, &sid);
		if (!se || !ss || se->tunnel || se->mode != MODE_MD || skb->gso_size || csum_pending(skb))
			return FAST_SLOW; /* a session tunnel, MX, the detour */
		hop_ml = se->hop_ml;
		inst = se->inst;
		if (!hop_ml || hop_ml != inst_words(inst) || (inst & (INST_RESERVED | INST_CHECKSUM_COMPLEMENT)))
			return FAST_SLOW; /* padding, reserved or checksum words */
		__u32 mtu = ifc->mtu;
		if (16 + hop_ml * 4 > (mtu > ip_len ? mtu - ip_len : 0))
			return FAST_SLOW; /* no room: the M bit, or none at all */
	}

	fast_setup(skb, s, c, ifc, idlen, sa, da, d[23], STEP_SOURCE);
	struct wl_stats *ws = bpf_map_lookup_elem(&wl_stats_map, &si);
	if (ws) {
		ws->packets++;
		ws->bytes += skb->len;
	}
	__u32 k0 = s->slot;
	struct counters *ct;
	if (!se || !ss)
		goto out;

	/* source: the hop, then shim, INT-MD header and hop after the L4
	 * header, with the DSCP marking. */
	need_inst(skb, s, inst);
	fast_hop(s, inst);
	__u32 n = 16 + hop_ml * 4, mv = l4len;
	__u8 rhc = se->max_hops - 1;
	__u32 w0 = ((__u32)INT_TYPE_MD << 28) | ((n / 4 - 1) << 16) | ((tos >> 2) << 2);
	__u32 w1 = ((__u32)(0x20 | (se->discard ? 0x08 : 0)) << 24) | (hop_ml << 8) | rhc;
	__u32 w2 = ((__u32)inst << 16) | se->domain;
	__u32 w3 = ((__u32)se->ds_inst << 16) | se->ds_flags;
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	__u32 summed = BPF_CORE_READ_BITFIELD(kskb, ip_summed);
	if (bpf_skb_adjust_room(skb, n, BPF_ADJ_ROOM_NET, 0)) {
		ss->unsupported++;
		goto out;
	}
	PKT_RELOAD(skb, d, end);
	/* The L4 header back down to the IP header. */
	__u8 *src = d + l4 + (n & 0xfc);
	asm volatile("" : "+r"(src));
	if (d + at + 16 > end || src + mv > end)
		return shot(skb);
#pragma unroll
	for (__u32 i = 0; i + 8 <= mv; i += 8)
		*(__u64 *)(d + l4 + i) = *(__u64 *)(src + i);
	if (mv & 4)
		*(__u32 *)(d + l4 + (mv & ~7)) = *(__u32 *)(src + (mv & ~7));
	__u32 *q = (__u32 *)(d + at), acc = 0;
	q[0] = bpf_htonl(w0);
	q[1] = bpf_htonl(w1);
	q[2] = bpf_htonl(w2);
	q[3] = bpf_htonl(w3);
#pragma unroll
	for (int i = 0; i < 4; i++)
		acc += (q[i] & 0xffff) + (q[i] >> 16);
	for (int i = 0; i < 31; i++) {
		if (i >= hop_ml)
			break;
		__u8 *h = d + at + 16 + i * 4;
		if (h + 4 > end)
			return shot(skb);
		__u32 v = s->hop[i & 31];
		*(__u32 *)h = v;
		acc += (v & 0xffff) + (v >> 16);
	}
	__u16 seg = ip_len - 20;
	if (udp) {
		__u16 o16 = *(__u16 *)(d + l4 + 4);
		*(__u16 *)(d + l4 + 4) = bpf_htons(seg + n);
		acc = cadd(acc, o16, *(__u16 *)(d + l4 + 4));
	}
	/* The DSCP marking and the length. */
	__u8 dscp = ((tos >> 2) & ~c->dscp_mask) | (c->dscp_val & c->dscp_mask);
	__u32 iacc = put8(0, d + L3, 1, (dscp << 2) | (tos & 3));
	__u16 o16 = *(__u16 *)(d + 16);
	*(__u16 *)(d + 16) = bpf_htons(ip_len + n);
	ip_csum_fix(d + L3, cadd(iacc, o16, *(__u16 *)(d + 16)));
	if (summed <= 1) {
		FAST_L4_SUM(d, csum, udp, seg, seg + n, acc);
	} else {
		struct pkt *p = &s->p;
		p->csum = csum;
		p->csum_flags = udp ? BPF_F_MARK_MANGLED_0 : 0;
		if (l4_fix(skb, p, acc, seg, seg + n))
			return shot(skb);
	}
	ss->initiated++;
	ct = bpf_map_lookup_elem(&ctrs, &k0);
	if (ct) {
		ct->c[C_INSERTED]++;
		ct->c[C_OUT]++;
		ct->c[C_FAST_SOURCE]++;
	}
	return TC_ACT_OK;
out:
	ct = bpf_map_lookup_elem(&ctrs, &k0);
	if (ct) {
		ct->c[C_OUT]++;
		ct->c[C_FAST_PASS]++;
	}
	return TC_ACT_OK;
}

/* step_main is the body of the step programs (role, a constant): the
 * lookups, the role's step for the layouts FAST_STEP takes, and the
 * packet back to intd_egress when the step does not finish it. Not a
 * step's: packets back from the GSO detour or a session tunnel
 * (intd_egress passes them), transit and source to a sink port or to one
 * with queue reports, the sink's to any other port. The host (no ingress
 * port) sends only a source's packets. */
static __always_inline int step_main(struct __sk_buff *skb, const int role)
{
	__u32 zero = 0, in = skb->ingress_ifindex;
	struct scratch *s = scratch();
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	struct iface *ifc = iface_of(skb->ifindex);
	if (!s || !c)
		return TC_ACT_OK;
	int r = FAST_SLOW;
	int port = ifc && (role == STEP_SINK ? ifc->sink : !ifc->sink && !(ifc->qr && (c->flags & F_QUEUE)));
	int from = (role == STEP_SOURCE && !in) || (in != c->gso_peer && in != c->tun_dev);
	if (port && from) {
		if (role == STEP_TRANSIT)
			FAST_STEP(r, fast_transit, skb, s, c, ifc);
		else if (role == STEP_SINK)
			FAST_STEP(r, fast_sink, skb, s, c, ifc);
		else
			FAST_STEP(r, fast_source, skb, s, c, ifc);
	}
	return r != FAST_SLOW ? r : fast_back(skb, s);
}

/* intd_transit is the transit step for the layouts most INT traffic has
 * (fast_transit), reached from intd_egress by a tail call before its own
 * set-up: a transit's packet is spared that and parse's and push_hop's
 * general walk. Any other packet goes back to intd_egress (s->slow)
 * before anything changed; both make the same bytes and counts
 * (TestTransitFastPath). */
SEC("tc")
int intd_transit(struct __sk_buff *skb)
{
	return step_main(skb, STEP_TRANSIT);
}

/* intd_sink is the sink step for the layouts of intd_transit
 * (fast_sink), reached from intd_egress by a tail call as intd_transit
 * is; both paths make the same bytes, counts and reports
 * (TestSinkFastPath). */
SEC("tc")
int intd_sink(struct __sk_buff *skb)
{
	return step_main(skb, STEP_SINK);
}

/* intd_source is the source step for the layouts of intd_transit
 * (fast_source), reached from intd_egress by a tail call for unmarked TCP
 * and UDP; both paths make the same bytes and counts
 * (TestSourceFastPath). */
SEC("tc")
int intd_source(struct __sk_buff *skb)
{
	return step_main(skb, STEP_SOURCE);
}

/* intd_gso is on tc ingress of the detour veth's receiving side: the
 * segments of a GSO super-packet sent there by detour() get the source
 * step with the super-packet's state, found by skb->mark, and leave by its
 * egress device. */
SEC("tc")
int intd_gso(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u32 mark = skb->mark;
	__u32 out = mark & 0xffff;
	__u32 idx = (mark >> 16) & (MAX_DETOUR - 1);
	struct iface *ifc = iface_of(out);
	if (!ifc)
		return shot(skb); /* not from detour() */
	struct detour *r = bpf_map_lookup_elem(&detours, &idx);
	struct scratch *s = scratch();
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!r || !s || !c)
		return shot(skb);
	s->slot = ifc->slot;
	if (r->mark != mark) {
		/* The record was reused (more than MAX_DETOUR super-packets in
		 * flight): the segment leaves without INT. */
		cnt(s, C_DETOUR_LOST);
		skb->mark = 0;
		return bpf_redirect(out, 0);
	}
	skb->mark = r->orig_mark;
	s->c = *c;
	s->ifc = *ifc;
	/* The super-packet had no INT: its segments neither. */
	s->edge = 1;
	if (parse(skb, s) || s->p.shim)
		return bpf_redirect(out, 0);
	__u64 now = clock_ns();
	struct hop *h = &s->h;
	h->node = c->node_id;
	h->ts_out = now + c->time_offset;
	h->l1_out = ifc->l1_id;
	h->l2_out = ifc->l2_id;
	h->in_ifindex = r->in_ifindex;
	h->out_ifindex = out;
	h->l1_in = r->l1_in;
	h->l2_in = r->l2_in;
	h->occ = r->occ & 0xffffff;
	h->txq = h->qid = r->occ >> 24;
	h->qdelay = r->qdelay;
	h->buf = r->buf;
	h->qdone = 1;
	h->occ_read = 1;
	h->ts_out += r->qdelay;
	h->valid = r->valid | INST_EGRESS_TIMESTAMP;
	s->now = now;
	s->t_in = 0;
	h->ts_in = 0;
	h->latency = 0;
	if (r->ts_in && r->ts_in <= now) {
		h->ts_in = r->ts_in + c->time_offset;
		__u64 l = now - r->ts_in + r->qdelay;
		h->latency = l < 0xfffffffe ? l : 0xfffffffe;
		h->valid |= INST_HOP_LATENCY | INST_INGRESS_TIMESTAMP;
	}
	s->e.session = r->session;
	s->e.act = r->act;
	s->e.stats = r->stats;
	if (source(skb, s) != TC_ACT_OK)
		return shot(skb);
	return bpf_redirect(out, 0);
}

SEC("tc")
int intd_pass(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

/* ---- queue delay ---- */

/* The inode of intd's network namespace, set before loading: the
 * tracing programs leave other namespaces' packets without a map lookup. */
volatile const __u32 own_netns = 0;

/* own_ns says whether dev is in intd's namespace (ifindexes are per
 * namespace): two loads and a compare with a constant for every other
 * device. */
static __always_inline int own_ns(struct net_device *dev)
{
	return dev && dev->nd_net.net->ns.inum == own_netns;
}

/* soj_at is the sojourn state of the tx queue the kernel gave skb. */
static __always_inline struct sojourn *soj_at(struct iface *ifc, struct sk_buff *skb)
{
	__u32 k = txq_key(ifc->slot, skb->queue_mapping);
	return bpf_map_lookup_elem(&sojourns, &k);
}

/* intd_xmit: tp_btf net_dev_start_xmit, where a packet leaves the qdisc
 * for the driver: the sojourn of the packet followed in its queue. */
SEC("tp_btf/net_dev_start_xmit")
int intd_xmit(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = (struct net_device *)ctx[1];
	if (!own_ns(dev))
		return 0;
	struct iface *ifc = iface_of(dev->ifindex);
	if (!ifc)
		return 0;
	struct sojourn *j = soj_at(ifc, skb);
	if (!j || j->skb != (__u64)skb)
		return 0;
	__u64 now = clock_ns();
	j->skb = 0;
	if (now < j->t0)
		return 0;
	j->est = now - j->t0;
	j->occ = j->occ0;
	j->samples++;
	return 0;
}

/* ---- drop reports ---- */

/* intd_kfree_skb: tp_btf skb:kfree_skb. Every drop on the host passes
 * here: drops outside intd's namespace and interfaces leave after a few
 * loads, before anything else. */
SEC("tp_btf/kfree_skb")
int intd_kfree_skb(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = skb->dev;
	if (!own_ns(dev))
		return 0;
	__u32 zero = 0;
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!c)
		return 0;
	struct iface *dfc = iface_of(dev->ifindex); /* skb->dev: ingress, or egress once routed */
	if (dfc) {
		struct sojourn *j = soj_at(dfc, skb);
		if (j && j->skb == (__u64)skb)
			j->skb = 0; /* a followed packet dropped in its queue */
	}
	if (!(c->flags & F_DROP))
		return 0;
	__u64 *own = bpf_map_lookup_elem(&own_drop, &zero);
	if (own && *own == (__u64)skb) {
		*own = 0; /* intd_egress or intd_gso dropped it: counted there */
		return 0;
	}
	int iif = skb->skb_iif;
	__u32 ifx = iif;
	struct iface *ifc = iif ? iface_of(ifx) : 0;
	if (!ifc)
		return 0; /* did not come in on one of our ports */
	__u32 kreason = (__u32)ctx[2];
	unsigned char *head = skb->head;
	__u16 nh = skb->network_header;
	if (!head || nh == 0xffff)
		return 0;
	__u8 ip[40];
	if (bpf_probe_read_kernel(ip, 20, head + nh))
		return 0;
	int v6 = (ip[0] >> 4) == 6;
	if (!v6 && (ip[0] >> 4) != 4)
		return 0;
	if (v6 && bpf_probe_read_kernel(ip, 40, head + nh))
		return 0;
	/* IPv6: the fields of IPv4 that the code below uses (protocol, TOS,
	 * TTL, length) at their own offsets. */
	struct flow_key k = {.proto = v6 ? ip[6] : ip[9]};
	__u32 ihl = (ip[0] & 0xf) * 4;
	__u8 tos = ip[1], ttl = ip[8];
	__u32 iplen = ((__u32)ip[2] << 8) | ip[3];
	if (v6) {
		__builtin_memcpy(k.src, &ip[8], 16);
		__builtin_memcpy(k.dst, &ip[24], 16);
		ihl = 40;
		tos = (ip[0] << 4) | (ip[1] >> 4);
		ttl = ip[7];
		iplen = 40 + (((__u32)ip[4] << 8) | ip[5]);
	} else {
		k.src[2] = k.dst[2] = bpf_htonl(0xffff);
		__builtin_memcpy(&k.src[3], &ip[12], 4);
		__builtin_memcpy(&k.dst[3], &ip[16], 4);
	}
	if (k.proto == IPPROTO_TCP || k.proto == IPPROTO_UDP) {
		__u8 pt[4];
		if (bpf_probe_read_kernel(pt, 4, head + nh + (ihl & 0x3c)))
			return 0;
		k.sport = ((__u16)pt[0] << 8) | pt[1];
		k.dport = ((__u16)pt[2] << 8) | pt[3];
	}
	if ((c->flags & F_WL_INNER) && (k.proto == IPPROTO_UDP || k.proto == IPPROTO_GRE)) {
		/* The watched users of a tunnel: the entry of the inner flow
		 * (intd_egress keys drop_watch with its digest). */
		struct drop_copy *dc = bpf_map_lookup_elem(&drop_copy_map, &zero);
		__u32 have = iplen < DROP_COPY ? iplen : DROP_COPY;
		__u32 lin = skb->tail > nh ? skb->tail - nh : 0; /* the linear part */
		if (lin < have)
			have = lin;
		if (dc && have > 0 && bpf_probe_read_kernel(dc->b, have & (2 * DROP_COPY - 1), head + nh) == 0)
			k.inner = drop_digest(dc, have, iplen, v6 ? 40 : ihl & 0x3c, ((__u32)k.proto << 16) | k.dport);
	}
	struct drop_watch *dw = bpf_map_lookup_elem(&drop_watch_map, &k);
	if (dw && dw->in_ifindex != (__u32)iif)
		dw = 0;
	/* A packet carrying INT was watched by its source: transit and sink
	 * nodes report its drops without an entry of their own. */
	int intpkt = !ifc->sink && ((c->dscp_mask && ((tos >> 2) & c->dscp_mask) == c->dscp_val) ||
				    (c->udp_port && k.proto == IPPROTO_UDP && k.dport == c->udp_port));
	__u32 kr = kreason & 511;
	__u32 *m = bpf_map_lookup_elem(&drop_reasons, &kr);
	__u32 reason = m && *m ? *m - 1 : 0;
	if (reason == DR_IP_HDR)
		/* The kernel drops TTL expiry in forwarding as a header error. */
		reason = ttl <= 1 ? 26 : 0;
	else if (reason == DR_NO_SOCKET)
		/* A G-PDU to this node with no GTP-U endpoint for it: no
		 * uplink PDR for its TEID (SD-Fabric UPF_UL_PDR_MISS). */
		reason = k.proto == IPPROTO_UDP && k.dport == PORT_GTPU ? 133 : 0;
	int tail = reason == 71;
	__u32 flags = tail ? EVF_TAIL_DROP : 0;
	int want = 0;
	if (dw) {
		want = tail ? (dw->act & ACT_TAIL_DROP) : (dw->act & ACT_DROP_REPORT);
		if (dw->act & ACT_TAIL_DROP)
			flags |= EVF_TAIL_DROP_REPORT;
	} else if (intpkt && !tail) {
		want = 1;
	}
	struct iface *oifc = 0;
	__u32 qm = 0; /* the queue id of a tail drop */
	if (tail && (c->flags & F_QUEUE)) {
		/* Tail drop at a queue with tail-drop reporting: the egress
		 * device is skb->dev. */
		oifc = dfc;
		qm = skb->queue_mapping;
		if (qm && dev->_tx) {
			/* Tx queues sharing the root qdisc are queue 0. */
			__u64 a = (__u64)dev->_tx + (__u64)qm * bpf_core_type_size(struct netdev_queue);
			struct netdev_queue *tx = bpf_rdonly_cast((void *)a, bpf_core_type_id_kernel(struct netdev_queue));
			if (tx->qdisc == dev->qdisc)
				qm = 0;
		}
		__u32 k = oifc ? txq_key(oifc->slot, qm) : 0;
		__u8 *qx = oifc && oifc->qr ? bpf_map_lookup_elem(&qr_of, &k) : 0;
		if (qx && *qx) {
			__u32 qi = (*qx - 1) & (MAX_QR - 1);
			struct qr_cfg *q = bpf_map_lookup_elem(&qr_cfg_map, &qi);
			if (q && q->tail_drop)
				want = 1;
			else
				oifc = 0;
		} else {
			oifc = 0;
		}
	}
	/* Every drop of a forwarded packet is counted (a reason the kernel
	 * gives for forwarding drops, or a watched or INT packet), reported
	 * or not, so that in = out + dropped holds. */
	if (!want && !(m && *m))
		return 0;
	__u32 slot = ifc->slot;
	struct counters *ctr = bpf_map_lookup_elem(&ctrs, &slot);
	__u32 r8 = reason & 0xff;
	__u64 *d = bpf_map_lookup_elem(&drops, &r8);
	if (d)
		(*d)++;
	if (ctr)
		ctr->c[C_DROP]++;
	if (!want)
		return 0;
	if (!dw && !intpkt)
		flags |= EVF_UNWATCHED;
	if (ctr)
		ctr->c[C_DROP_GEN]++;
	struct event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		if (ctr)
			ctr->c[C_EV_LOST]++;
		return 0;
	}
	__u64 now = clock_ns();
	__builtin_memset(ev, 0, __builtin_offsetof(struct event, data));
	ev->now = now + c->time_offset;
	ev->ts_in = 0;
	ev->in_ifindex = iif;
	ev->node_id = c->node_id;
	ev->kind = EV_DROP;
	ev->flags = flags;
	ev->drop_reason = reason;
	ev->valid = INST_NODE_ID | INST_L1_INTERFACES | INST_L2_INTERFACES;
	/* The ingress time, when intd_ingress saw this packet last on this
	 * CPU (a forwarding drop follows it in the same softirq): the
	 * fingerprint intd_egress matches too. */
	struct ing_slot *sl = bpf_map_lookup_elem(&ing_map, &zero);
	if (sl && sl->ts && sl->ifindex == (__u32)iif) {
		__u32 idlen = v6 ? ((__u32)ip[2] << 24) | ((__u32)ip[3] << 16) | (iplen & 0xffff)
				 : ((__u32)ip[4] << 24) | ((__u32)ip[5] << 16) | (iplen & 0xffff);
		__u32 sa = v6 ? afold(k.src) : k.src[3], da = v6 ? afold(k.dst) : k.dst[3];
		if (sl->fp == fingerprint(sa, da, idlen, k.proto)) {
			ev->ts_in = sl->ts + c->time_offset;
			ev->valid |= INST_INGRESS_TIMESTAMP;
		}
	}
	ev->l1_in = ifc->l1_id;
	ev->l2_in = ifc->l2_id;
	if (oifc) {
		ev->l1_out = oifc->l1_id;
		ev->l2_out = oifc->l2_id;
		ev->queue_occ = (__u32)qm << 24; /* the queue id; occupancy not valid */
	}
	ev->l3_off = 0;
	if (iplen > MAX_CAP)
		iplen = MAX_CAP;
	ev->pkt_len = iplen;
	ev->cap_len = 0;
	if (iplen > 0 && iplen <= MAX_CAP && bpf_probe_read_kernel(ev->data, iplen, head + nh) == 0)
		ev->cap_len = iplen;
	bpf_ringbuf_submit(ev, 0);
	if (ctr)
		ctr->c[C_EV_SENT]++;
	return 0;
}

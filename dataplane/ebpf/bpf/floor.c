// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The floor of the INT roles' per-packet cost (BenchmarkProgram): the
 * helper calls intd_egress cannot avoid, each alone in a program, measured
 * like BenchmarkProgram measures intd_egress.
 *
 *   floor_empty        returns TC_ACT_OK (= intd_pass)
 *   floor_source_grow  the room a source inserts for the benchmark's
 *                      session: shim 4 + INT-MD header 12 + one hop of
 *                      node id and queue occupancy (2 words)
 *   floor_transit_grow the room of one transit hop of the benchmark's INT
 *                      frame: node id, L1 interfaces, queue, L2 interfaces
 *                      (5 words)
 *   floor_sink_shrink  the room a sink removes from that frame: shim and
 *                      INT-MD header with two such hops (4 + 12 + 2 * 20)
 *   floor_ktime        one read of the clock intd_egress reads
 *                      (clock_ns: bpf_ktime_get_tai_ns)
 *   floor_sink         what the sink cannot avoid, in one program: the
 *                      clock read and floor_sink_shrink's room
 *
 * The sizes are those of BenchmarkProgram's packets; change both together.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define SOURCE_ROOM (4 + 12 + 2 * 4)
#define TRANSIT_ROOM (5 * 4)
#define SINK_ROOM (4 + 12 + 2 * 5 * 4)

SEC("tc")
int floor_empty(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

SEC("tc")
int floor_source_grow(struct __sk_buff *skb)
{
	if (bpf_skb_adjust_room(skb, SOURCE_ROOM, BPF_ADJ_ROOM_NET, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc")
int floor_transit_grow(struct __sk_buff *skb)
{
	if (bpf_skb_adjust_room(skb, TRANSIT_ROOM, BPF_ADJ_ROOM_NET, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc")
int floor_sink_shrink(struct __sk_buff *skb)
{
	if (bpf_skb_adjust_room(skb, -SINK_ROOM, BPF_ADJ_ROOM_NET, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc")
int floor_ktime(struct __sk_buff *skb)
{
	/* The result must be used, or the call is dropped. */
	return bpf_ktime_get_tai_ns() ? TC_ACT_OK : TC_ACT_SHOT;
}

SEC("tc")
int floor_sink(struct __sk_buff *skb)
{
	if (!bpf_ktime_get_tai_ns())
		return TC_ACT_SHOT;
	if (bpf_skb_adjust_room(skb, -SINK_ROOM, BPF_ADJ_ROOM_NET, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

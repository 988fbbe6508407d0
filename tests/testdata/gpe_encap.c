// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test programs for bench-ebpf's encapsulation mode: INT-MD carried in a
 * VXLAN-GPE encapsulation that gpe_encap (tc egress of the source's link)
 * adds to every IPv4 TCP packet with bpf_skb_adjust_room's ENCAP flags, so
 * that GSO/TSO copy the outer headers and INT onto every segment of a
 * super-packet, and gpe_decap (tc ingress of the sink's link) removes.
 * They measure what such a mode can reach; transit hops leave the tunnel
 * alone. Built by go generate ./tests (clang), object committed. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define GPE_PORT 4790
#define INT_LEN (4 + 12 + 8) /* shim, MD header, one hop of 2 words */
#define TUN_LEN (20 + 8 + 8 + INT_LEN)

struct tun {
	struct iphdr ip;
	struct udphdr udp;
	__u8 gpe[8];
	__u8 shim[4];
	__u8 md[12];
	__u32 node, latency;
};

SEC("tc/encap")
int gpe_encap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_TCP)
		return TC_ACT_OK;
	struct tun t = {};
	__u16 len = bpf_ntohs(ip->tot_len) + TUN_LEN;
	t.ip.version = 4;
	t.ip.ihl = 5;
	t.ip.ttl = 64;
	t.ip.protocol = IPPROTO_UDP;
	t.ip.saddr = ip->saddr;
	t.ip.daddr = ip->daddr;
	t.ip.tot_len = bpf_htons(len);
	/* The inner flow's entropy in the source port, for ECMP. */
	t.udp.source = bpf_htons(0xc000 | (bpf_get_hash_recalc(skb) & 0x3fff));
	t.udp.dest = bpf_htons(GPE_PORT);
	t.udp.len = bpf_htons(len - 20);
	t.gpe[0] = 0x0c; /* I and P flags */
	t.gpe[3] = 0x82; /* next protocol: INT-MD */
	t.shim[0] = 0x10; /* type INT-MD */
	t.shim[1] = INT_LEN / 4;
	t.shim[3] = 0x01; /* next protocol IPv4 */
	t.md[0] = 0x20; /* version 2 */
	t.md[2] = 2; /* hop ML */
	t.md[3] = 7; /* remaining hop count */
	t.md[4] = 0xc0; /* node id, hop latency */
	t.latency = bpf_htonl((__u32)bpf_ktime_get_ns());
	__u32 sum = 0;
	__u16 *w = (__u16 *)&t.ip;
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	t.ip.check = ~sum;
	/* The GPE header and INT are the "inner L2" GSO copies per segment;
	 * the MSS leaves room for them, so the GSO size stays. */
	__u64 flags = BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_FIXED_GSO |
		      BPF_F_ADJ_ROOM_ENCAP_L2(8 + INT_LEN);
	if (bpf_skb_adjust_room(skb, TUN_LEN, BPF_ADJ_ROOM_MAC, flags))
		return TC_ACT_OK;
	if (bpf_skb_store_bytes(skb, ETH_HLEN, &t, sizeof(t), 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc/decap")
int gpe_decap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP ||
	    ip->ihl != 5 || udp->dest != bpf_htons(GPE_PORT))
		return TC_ACT_OK;
	if (bpf_skb_adjust_room(skb, -TUN_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * What a transit hop costs without the general program around it
 * (BenchmarkProgram, test only), for BenchmarkProgram's transit packet
 * (Ethernet, IPv4 without options, TCP, DSCP-marked INT-MD): no other
 * encapsulation or marking, no queue follow, no other role to tell apart.
 * lean_transit runs transit's own push_hop behind checks written for that
 * packet, so that what transit costs beyond it is the general program's
 * finding out what a packet is; hand_transit is the whole step written by
 * hand with constant offsets, so that what lean_transit costs beyond it is
 * push_hop's generality. Both use intd.c's maps. Never attached: other
 * packets they pass or leave half-checked.
 */
#include "intd.c"

SEC("tc")
int lean_transit(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u32 ifx = skb->ifindex;
	struct iface *ifc = iface_of(ifx);
	if (!ifc)
		return TC_ACT_OK;
	struct scratch *s = scratch();
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!s || !c)
		return TC_ACT_OK;
	if (!(c->flags & F_DTEL) || !(c->flags & F_TRANSIT))
		return TC_ACT_OK;
	s->slot = ifc->slot;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + 34 + 20 > end)
		return TC_ACT_OK;
	if (d[12] != 0x08 || d[13] != 0x00 || d[14] != 0x45 || d[23] != IPPROTO_TCP)
		return TC_ACT_OK;
	if (!c->dscp_mask || ((d[15] >> 2) & c->dscp_mask) != c->dscp_val)
		return TC_ACT_OK;
	if ((((__u16)d[20] << 8) | d[21]) & 0x3fff)
		return TC_ACT_OK;
	struct pkt *p = &s->p;
	__u32 l4len = (d[34 + 12] >> 4) * 4;
	if (l4len < 20)
		return TC_ACT_OK;
	__u32 so = (34 + l4len) & 0xff;
	__u8 *b = d + so;
	if (b + 16 > end)
		return TC_ACT_OK;
	if ((b[0] >> 4) != INT_TYPE_MD || (b[4] >> 4) != 2)
		return TC_ACT_OK;
	p->ihl = 20;
	p->l4 = 34;
	p->ip_len = ((__u32)d[16] << 8) | d[17];
	p->tos = d[15];
	p->shim = so;
	p->csum = 34 + 16;
	p->csum_flags = 0;
	p->ipproto = IPPROTO_TCP;
	p->v6 = 0;
	p->encap = ENC_DSCP;
	p->shim_words = b[1];
	p->hop_ml = b[6] & 0x1f;
	p->rhc = b[7];
	p->inst = ((__u16)b[8] << 8) | b[9];
	p->hdr0 = b[4];
	if (p->rhc == 0 || p->shim_words < 3)
		return TC_ACT_OK;
	__u32 hop_ml = p->hop_ml;
	__u32 n = hop_ml * 4;
	__u32 mtu = ifc->mtu;
	if (skb->gso_size || n > (mtu > p->ip_len ? mtu - p->ip_len : 0) || p->shim_words + hop_ml > 255)
		return TC_ACT_OK;
	/* The hop as intd_egress sets it up, the ingress ids left 0. */
	struct hop *h = &s->h;
	__builtin_memset(h, 0, sizeof(*h));
	h->node = c->node_id;
	h->l1_out = ifc->l1_id;
	h->l2_out = ifc->l2_id;
	h->valid = INST_NODE_ID | INST_L1_INTERFACES | INST_L2_INTERFACES;
	if (push_hop(skb, s, hop_ml, n) != TC_ACT_OK)
		return TC_ACT_SHOT;
	cnt(s, C_OUT);
	return TC_ACT_OK;
}

/* hand_transit is the transit step written by hand for that one packet
 * (TCP header without options, instructions node id, L1 ids, queue and L2
 * ids: a 5-word hop) with every offset a constant: what a transit costs
 * when the program knows the packet's layout in advance. It must make
 * the bytes intd_egress makes (BenchmarkProgram checks). */
SEC("tc")
int hand_transit(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct iface *ifc = iface_of(skb->ifindex);
	struct cfg *c = bpf_map_lookup_elem(&cfg_map, &zero);
	struct scratch *s = scratch();
	if (!ifc || !c || !s || !(c->flags & F_DTEL) || !(c->flags & F_TRANSIT))
		return TC_ACT_OK;
	struct iface *ii = iface_of(skb->ingress_ifindex);
	__u32 l1_in = ii ? ii->l1_id : 0, l2_in = ii ? ii->l2_id : 0;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (d + 90 > end)
		return TC_ACT_OK;
	if (*(__u16 *)(d + 12) != bpf_htons(0x0800) || d[14] != 0x45 || d[23] != IPPROTO_TCP || d[46] != 0x50 ||
	    !c->dscp_mask || ((d[15] >> 2) & c->dscp_mask) != c->dscp_val || (*(__u16 *)(d + 20) & bpf_htons(0x3fff)))
		return TC_ACT_OK;
	__u8 *b = d + 54;
	if ((b[0] >> 4) != INT_TYPE_MD || (b[4] >> 4) != 2 || (b[6] & 0x1f) != 5 || !b[7] || b[1] + 5 > 255 ||
	    b[8] != 0xd2 || b[9] != 0x00)
		return TC_ACT_OK;
	__u32 ip_len = bpf_ntohs(*(__u16 *)(d + 16));
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	if (skb->gso_size || ip_len + 20 > ifc->mtu || BPF_CORE_READ_BITFIELD(k, ip_summed) > 1)
		return TC_ACT_OK;
	s->h.occ_read = 0;
	s->h.valid = 0;
	s->h.occ = 0;
	need_occ(skb, s);
	__u32 q = (s->h.valid & INST_QUEUE) ? (s->h.qid << 24) | (s->h.occ & 0xffffff) : 0xffffffff;
	if (bpf_skb_adjust_room(skb, 20, BPF_ADJ_ROOM_NET, 0))
		return TC_ACT_OK;
	d = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (d + 110 > end)
		return TC_ACT_SHOT;
	/* TCP header, shim and INT header (36 bytes) back up to the IP
	 * header, then the hop behind them. */
	*(__u64 *)(d + 34) = *(__u64 *)(d + 54);
	*(__u64 *)(d + 42) = *(__u64 *)(d + 62);
	*(__u64 *)(d + 50) = *(__u64 *)(d + 70);
	*(__u64 *)(d + 58) = *(__u64 *)(d + 78);
	*(__u32 *)(d + 66) = *(__u32 *)(d + 86);
	__u32 w[5] = {bpf_htonl(c->node_id), bpf_htonl((l1_in << 16) | ifc->l1_id), bpf_htonl(q), bpf_htonl(l2_in),
		      bpf_htonl(ifc->l2_id)};
	__u32 acc = 0;
	for (int i = 0; i < 5; i++) {
		*(__u32 *)(d + 70 + i * 4) = w[i];
		acc += (w[i] & 0xffff) + (w[i] >> 16);
	}
	__u8 *sh = d + 54;
	acc = put8(acc, sh, 1, sh[1] + 5);
	acc = put8(acc, sh + 6, 1, sh[7] - 1);
	__u16 o16 = *(__u16 *)(d + 16);
	*(__u16 *)(d + 16) = bpf_htons(ip_len + 20);
	ip_csum_fix(d + 14, cadd(0, o16, *(__u16 *)(d + 16)));
	__u16 seg = ip_len - 20;
	__u16 *ck = (__u16 *)(d + 50);
	*ck = ~cfold(0xffff + (__u16)~bpf_htons(seg) + bpf_htons(seg + 20) + (__u16)~*ck + cfold(acc));
	cnt_at(ifc->slot, C_TRANSITED);
	cnt_at(ifc->slot, C_OUT);
	return TC_ACT_OK;
}

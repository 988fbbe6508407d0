// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The least a transit hop costs (BenchmarkProgram, test only): lean_transit
 * does nothing but the transit step for BenchmarkProgram's transit packet
 * (Ethernet, IPv4 without options, TCP, DSCP-marked INT-MD): no other
 * encapsulation or marking, no ingress interface, no queue follow, no
 * other role to tell apart. It shares transit's push_hop and intd.c's
 * maps, so that what BenchmarkProgram's transit costs beyond it is the
 * general program's finding out what a packet is. Never attached: other
 * packets it passes or leaves half-checked.
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

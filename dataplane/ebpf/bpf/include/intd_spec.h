/* Code generated from sai/spec by go generate ./dataplane/ebpf; DO NOT EDIT. */

#ifndef INTD_SPEC_H
#define INTD_SPEC_H

/* INT v2.1 instruction bits, as masks of the 16-bit bitmap */
#define INST_NODE_ID 0x8000 /* bit 0, 1 word(s) */
#define INST_L1_INTERFACES 0x4000 /* bit 1, 1 word(s) */
#define INST_HOP_LATENCY 0x2000 /* bit 2, 1 word(s) */
#define INST_QUEUE 0x1000 /* bit 3, 1 word(s) */
#define INST_INGRESS_TIMESTAMP 0x0800 /* bit 4, 2 word(s) */
#define INST_EGRESS_TIMESTAMP 0x0400 /* bit 5, 2 word(s) */
#define INST_L2_INTERFACES 0x0200 /* bit 6, 2 word(s) */
#define INST_EGRESS_TX_UTIL 0x0100 /* bit 7, 1 word(s) */
#define INST_BUFFER 0x0080 /* bit 8, 1 word(s) */
#define INST_CHECKSUM_COMPLEMENT 0x0001 /* bit 15, 1 word(s) */
#define INST_ALL 0xff81
#define INST_RESERVED 0x007e
#define INST_DOUBLE_WORD 0x0e00 /* two-word metadata */

/* DTel event types (sai_dtel_event_type_t) */
#define EVENT_FLOW_STATE 1
#define EVENT_FLOW_REPORT_ALL_PACKETS 2
#define EVENT_FLOW_TCPFLAG 3
#define EVENT_QUEUE_REPORT_THRESHOLD_BREACH 4
#define EVENT_QUEUE_REPORT_TAIL_DROP 5
#define EVENT_DROP_REPORT 6

/* SD-Fabric drop reasons */
#define DROP_UNKNOWN 0
#define DROP_IP_TTL_ZERO 26
#define DROP_ROUTING_MISS 29
#define DROP_PORT_VLAN_MAPPING_MISS 55
#define DROP_TRAFFIC_MANAGER 71
#define DROP_ACL_DENY 80
#define DROP_BRIDGING_MISS 89
#define DROP_NEXT_ID_MISS 128
#define DROP_MPLS_MISS 129
#define DROP_EGRESS_NEXT_MISS 130
#define DROP_MPLS_TTL_ZERO 131
#define DROP_UPF_DL_PDR_MISS 132
#define DROP_UPF_UL_PDR_MISS 133
#define DROP_UPF_FAR_MISS 134

#endif

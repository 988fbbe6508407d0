package sai

// DropReason is the drop reason code carried in drop reports and counted in
// Stats.Drops. Codes are SD-Fabric's (fabric-tna), so collectors that know
// SD-Fabric (e.g. DeepInsight) decode intd reports unchanged.
type DropReason uint8

// SD-Fabric drop reasons. Do not renumber: the values go on the wire.
const (
	DropUnknown             DropReason = 0   // unknown reason
	DropIPTTLZero           DropReason = 26  // IPv4/IPv6 TTL zero: maybe a forwarding loop
	DropRoutingMiss         DropReason = 29  // IPv4/IPv6 routing table miss
	DropPortVLANMappingMiss DropReason = 55  // ingress port VLAN table miss
	DropTrafficManager      DropReason = 71  // congestion (tail drop) or port down
	DropACLDeny             DropReason = 80  // ACL rule denied
	DropBridgingMiss        DropReason = 89  // bridging table miss
	DropNextIDMiss          DropReason = 128 // next id missing from ECMP or multicast table
	DropMPLSMiss            DropReason = 129 // MPLS table miss
	DropEgressNextMiss      DropReason = 130 // egress VLAN table miss
	DropMPLSTTLZero         DropReason = 131 // MPLS TTL zero: maybe a forwarding loop
	DropUPFDownlinkPDRMiss  DropReason = 132 // UPF: no downlink PDR for the UE
	DropUPFUplinkPDRMiss    DropReason = 133 // UPF: no uplink PDR
	DropUPFFARMiss          DropReason = 134 // UPF: no FAR
)

var dropReasonInfo = map[DropReason][2]string{
	DropUnknown:             {"UNKNOWN", "Drop with unknown reason."},
	DropIPTTLZero:           {"IP_TTL_ZERO", "IPv4 or IPv6 TTL zero; there might be a forwarding loop."},
	DropRoutingMiss:         {"ROUTING_MISS", "IPv4 or IPv6 routing table miss."},
	DropPortVLANMappingMiss: {"PORT_VLAN_MAPPING_MISS", "Ingress port VLAN table miss: packet received with an unexpected VLAN."},
	DropTrafficManager:      {"TRAFFIC_MANAGER", "Dropped by the traffic manager: congestion (tail drop) or port down."},
	DropACLDeny:             {"ACL_DENY", "Denied by an ACL rule."},
	DropBridgingMiss:        {"BRIDGING_MISS", "Missing bridging entry."},
	DropNextIDMiss:          {"NEXT_ID_MISS", "Missing next id in the ECMP or multicast table."},
	DropMPLSMiss:            {"MPLS_MISS", "MPLS table miss."},
	DropEgressNextMiss:      {"EGRESS_NEXT_MISS", "Egress VLAN table miss."},
	DropMPLSTTLZero:         {"MPLS_TTL_ZERO", "MPLS TTL zero; there might be a forwarding loop."},
	DropUPFDownlinkPDRMiss:  {"UPF_DL_PDR_MISS", "UPF: missing downlink PDR rule for the UE."},
	DropUPFUplinkPDRMiss:    {"UPF_UL_PDR_MISS", "UPF: missing uplink PDR rule."},
	DropUPFFARMiss:          {"UPF_FAR_MISS", "UPF: missing FAR rule."},
}

// String returns the reason's name, e.g. "IP_TTL_ZERO", or its number if it
// is not an SD-Fabric code.
func (r DropReason) String() string {
	if i, ok := dropReasonInfo[r]; ok {
		return i[0]
	}
	return "DropReason(" + itoa(int(r)) + ")"
}

// Description explains the reason for operators ("" if unknown).
func (r DropReason) Description() string { return dropReasonInfo[r][1] }

// Known reports whether r is one of the SD-Fabric codes above.
func (r DropReason) Known() bool {
	_, ok := dropReasonInfo[r]
	return ok
}

// DropReasons lists the known codes in ascending order.
func DropReasons() []DropReason {
	return []DropReason{
		DropUnknown, DropIPTTLZero, DropRoutingMiss, DropPortVLANMappingMiss,
		DropTrafficManager, DropACLDeny, DropBridgingMiss, DropNextIDMiss,
		DropMPLSMiss, DropEgressNextMiss, DropMPLSTTLZero,
		DropUPFDownlinkPDRMiss, DropUPFUplinkPDRMiss, DropUPFFARMiss,
	}
}

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

var dropReasonNames = map[DropReason]string{
	DropUnknown:             "UNKNOWN",
	DropIPTTLZero:           "IP_TTL_ZERO",
	DropRoutingMiss:         "ROUTING_MISS",
	DropPortVLANMappingMiss: "PORT_VLAN_MAPPING_MISS",
	DropTrafficManager:      "TRAFFIC_MANAGER",
	DropACLDeny:             "ACL_DENY",
	DropBridgingMiss:        "BRIDGING_MISS",
	DropNextIDMiss:          "NEXT_ID_MISS",
	DropMPLSMiss:            "MPLS_MISS",
	DropEgressNextMiss:      "EGRESS_NEXT_MISS",
	DropMPLSTTLZero:         "MPLS_TTL_ZERO",
	DropUPFDownlinkPDRMiss:  "UPF_DL_PDR_MISS",
	DropUPFUplinkPDRMiss:    "UPF_UL_PDR_MISS",
	DropUPFFARMiss:          "UPF_FAR_MISS",
}

// String returns the reason's name, e.g. "IP_TTL_ZERO", or its number if it
// is not an SD-Fabric code.
func (r DropReason) String() string {
	if s, ok := dropReasonNames[r]; ok {
		return s
	}
	return "DropReason(" + itoa(int(r)) + ")"
}

// Known reports whether r is one of the SD-Fabric codes above.
func (r DropReason) Known() bool {
	_, ok := dropReasonNames[r]
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

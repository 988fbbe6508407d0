package spec

import "strconv"

// DropReason is the drop reason code carried in drop reports and counted in
// drop statistics. Codes are SD-Fabric's (fabric-tna), so collectors that
// know SD-Fabric decode intd reports unchanged.
type DropReason uint8

// SD-Fabric drop reasons; their names and descriptions are in
// DropReasonTable. Do not renumber: the values go on the wire.
const (
	DropUnknown             DropReason = 0
	DropIPTTLZero           DropReason = 26
	DropRoutingMiss         DropReason = 29
	DropPortVLANMappingMiss DropReason = 55
	DropTrafficManager      DropReason = 71
	DropACLDeny             DropReason = 80
	DropBridgingMiss        DropReason = 89
	DropNextIDMiss          DropReason = 128
	DropMPLSMiss            DropReason = 129
	DropEgressNextMiss      DropReason = 130
	DropMPLSTTLZero         DropReason = 131
	DropUPFDownlinkPDRMiss  DropReason = 132
	DropUPFUplinkPDRMiss    DropReason = 133
	DropUPFFARMiss          DropReason = 134
)

// DropReasonInfo describes one drop reason.
type DropReasonInfo struct {
	Reason      DropReason
	Name        string // e.g. "IP_TTL_ZERO"; the C header's DROP_<Name>
	Description string // for operators
}

// DropReasonTable lists the known codes in ascending order.
var DropReasonTable = [...]DropReasonInfo{
	{DropUnknown, "UNKNOWN", "Drop with unknown reason."},
	{DropIPTTLZero, "IP_TTL_ZERO", "IPv4 or IPv6 TTL zero; there might be a forwarding loop."},
	{DropRoutingMiss, "ROUTING_MISS", "IPv4 or IPv6 routing table miss."},
	{DropPortVLANMappingMiss, "PORT_VLAN_MAPPING_MISS", "Ingress port VLAN table miss: packet received with an unexpected VLAN."},
	{DropTrafficManager, "TRAFFIC_MANAGER", "Dropped by the traffic manager: congestion (tail drop) or port down."},
	{DropACLDeny, "ACL_DENY", "Denied by an ACL rule."},
	{DropBridgingMiss, "BRIDGING_MISS", "Missing bridging entry."},
	{DropNextIDMiss, "NEXT_ID_MISS", "Missing next id in the ECMP or multicast table."},
	{DropMPLSMiss, "MPLS_MISS", "MPLS table miss."},
	{DropEgressNextMiss, "EGRESS_NEXT_MISS", "Egress VLAN table miss."},
	{DropMPLSTTLZero, "MPLS_TTL_ZERO", "MPLS TTL zero; there might be a forwarding loop."},
	{DropUPFDownlinkPDRMiss, "UPF_DL_PDR_MISS", "UPF: missing downlink PDR rule for the UE."},
	{DropUPFUplinkPDRMiss, "UPF_UL_PDR_MISS", "UPF: missing uplink PDR rule."},
	{DropUPFFARMiss, "UPF_FAR_MISS", "UPF: missing FAR rule."},
}

// dropIndex maps a code to its row + 1 (0: unknown code).
var dropIndex [256]uint8

func init() {
	for i, r := range DropReasonTable {
		dropIndex[r.Reason] = uint8(i + 1)
	}
}

func (r DropReason) info() (DropReasonInfo, bool) {
	if i := dropIndex[r]; i != 0 {
		return DropReasonTable[i-1], true
	}
	return DropReasonInfo{}, false
}

// String returns the reason's name, e.g. "IP_TTL_ZERO", or its number if it
// is not an SD-Fabric code.
func (r DropReason) String() string {
	if i, ok := r.info(); ok {
		return i.Name
	}
	return "DropReason(" + strconv.Itoa(int(r)) + ")"
}

// Description explains the reason for operators ("" if unknown).
func (r DropReason) Description() string {
	i, _ := r.info()
	return i.Description
}

// Known reports whether r is one of the SD-Fabric codes.
func (r DropReason) Known() bool {
	_, ok := r.info()
	return ok
}

// DropReasons lists the known codes in ascending order.
func DropReasons() []DropReason {
	out := make([]DropReason, 0, len(DropReasonTable))
	for _, r := range DropReasonTable {
		out = append(out, r.Reason)
	}
	return out
}

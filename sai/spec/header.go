package spec

import "strconv"

// HeaderType is the INT header type in the shims and the Geneve option
// type (INT v2.1 §5.4, Type field).
type HeaderType uint8

// INT header types; their metadata is in HeaderTypeTable.
const (
	TypeMD          HeaderType = 1 // INT-MD: transit hops push metadata
	TypeDestination HeaderType = 2 // consumed by the sink only (format not yet defined)
	TypeMX          HeaderType = 3 // INT-MX: hops export metadata in reports
)

// HeaderTypeInfo describes one INT header type.
type HeaderTypeInfo struct {
	Type HeaderType
	Name string // e.g. "md", as decoders print it
	C    string // constant in the generated C header
}

// HeaderTypeTable lists the header types in numeric order, from 1.
var HeaderTypeTable = [...]HeaderTypeInfo{
	{TypeMD, "md", "INT_TYPE_MD"},
	{TypeDestination, "destination", "INT_TYPE_DESTINATION"},
	{TypeMX, "mx", "INT_TYPE_MX"},
}

// Valid reports whether t is a defined header type.
func (t HeaderType) Valid() bool { return t >= 1 && int(t) <= len(HeaderTypeTable) }

// String returns the name, e.g. "md".
func (t HeaderType) String() string {
	if t.Valid() {
		return HeaderTypeTable[t-1].Name
	}
	return "HeaderType(" + strconv.Itoa(int(t)) + ")"
}

// NPT is the Next Protocol Type of the INT shim for TCP/UDP (INT v2.1
// §5.6.1): what follows the INT stack, and so what the shim's last 16 bits
// hold.
type NPT uint8

// Next Protocol Types; their metadata is in NPTTable.
const (
	// NPTNone: DSCP or probe marking; the shim may keep the original DSCP.
	NPTNone NPT = 0
	// NPTUDPPort: INT follows the original UDP header, whose destination
	// port the shim keeps (the original packet was UDP).
	NPTUDPPort NPT = 1
	// NPTIPProto: a new UDP header was inserted before the original L4
	// header, whose IP protocol the shim keeps.
	NPTIPProto NPT = 2
)

// NPTInfo describes one Next Protocol Type.
type NPTInfo struct {
	NPT  NPT
	Name string
	// YANG is the enum of intd-int's udp-npt that selects it ("" when it
	// is not configured).
	YANG string
	C    string // constant in the generated C header
}

// NPTTable lists the Next Protocol Types in numeric order, from 0.
var NPTTable = [...]NPTInfo{
	{NPTNone, "none", "", "NPT_NONE"},
	{NPTUDPPort, "udp-port", "ORIGINAL_PORT", "NPT_UDP_PORT"},
	{NPTIPProto, "ip-proto", "NEW_UDP_HEADER", "NPT_IP_PROTO"},
}

// Valid reports whether n is a defined Next Protocol Type.
func (n NPT) Valid() bool { return int(n) < len(NPTTable) }

// String returns the name, e.g. "udp-port".
func (n NPT) String() string {
	if n.Valid() {
		return NPTTable[n].Name
	}
	return "NPT(" + strconv.Itoa(int(n)) + ")"
}

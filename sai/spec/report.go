package spec

import "strconv"

// RepType is the Report Type of a Telemetry Report v2.0 individual report
// (RepType, 4 bits).
type RepType uint8

// Report types; their names are in RepTypeTable.
const (
	RepInnerOnly RepType = 0
	RepINT       RepType = 1
	RepIOAM      RepType = 2
)

// RepTypeTable names the report types in numeric order, from 0.
var RepTypeTable = [...]string{RepInnerOnly: "inner-only", RepINT: "INT", RepIOAM: "IOAM"}

// String returns the name, e.g. "INT".
func (t RepType) String() string {
	return name(RepTypeTable[:], int(t), "RepType")
}

// InType is the Inner Type of a Telemetry Report v2.0 individual report
// (InType, 4 bits): what follows the main contents.
type InType uint8

// Inner types; their names are in InTypeTable.
const (
	InNone     InType = 0
	InTLV      InType = 1
	InDSExt    InType = 2 // domain-specific extension data
	InEthernet InType = 3
	InIPv4     InType = 4
	InIPv6     InType = 5
)

// InTypeTable names the inner types in numeric order, from 0.
var InTypeTable = [...]string{InNone: "none", InTLV: "TLV", InDSExt: "domain-specific", InEthernet: "Ethernet", InIPv4: "IPv4", InIPv6: "IPv6"}

// String returns the name, e.g. "Ethernet".
func (t InType) String() string {
	return name(InTypeTable[:], int(t), "InType")
}

// TR05Proto is the next protocol of a Telemetry Report v0.5 header (the
// report format ReportFormatV05): what follows it.
type TR05Proto uint8

// v0.5 next protocols; their names are in TR05ProtoTable.
const (
	TR05Ethernet TR05Proto = 0 // INT report: the Ethernet frame
	TR05Drop     TR05Proto = 1 // drop report: switch-local header, then the frame
	TR05Local    TR05Proto = 2 // switch-local (queue) report: switch-local header, then the frame
	TR05HostDrop TR05Proto = 3 // Host-INT drop summary
	TR05IPv4     TR05Proto = 4 // Host-INT: the IPv4 packet
)

// TR05ProtoTable names the v0.5 next protocols in numeric order, from 0.
var TR05ProtoTable = [...]string{TR05Ethernet: "Ethernet", TR05Drop: "drop", TR05Local: "switch-local", TR05HostDrop: "host-drop", TR05IPv4: "IPv4"}

// String returns the name, e.g. "drop".
func (p TR05Proto) String() string {
	return name(TR05ProtoTable[:], int(p), "TR05Proto")
}

// name is table[v], or typ(v) when v is past its end.
func name(table []string, v int, typ string) string {
	if v < len(table) {
		return table[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

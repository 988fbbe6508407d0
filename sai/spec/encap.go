package spec

import (
	"strconv"
	"strings"
)

// Encap is a way INT is carried in (and recognised in) data packets. The
// zero value means none (a packet without INT).
type Encap uint8

// Encapsulations; their metadata is in EncapTable. The tunnels come last,
// in a row, so the C program tests for one with a range and keeps a
// bitmap of them (TunnelBit).
const (
	EncapNone        Encap = iota
	EncapDSCP              // INT over TCP/UDP, marked by DSCP
	EncapUDPPort           // INT over TCP/UDP, marked by the UDP destination port
	EncapProbeMarker       // INT over TCP/UDP, marked by a 64-bit probe marker
	EncapVXLANGPE          // INT shim(s) after a VXLAN-GPE header
	EncapGeneve            // INT as a Geneve option
	EncapGRE               // INT shim after an IPv4 GRE header
	NumEncaps              // one past the last encapsulation
)

// Code points of the tunnel encapsulations (INT v2.1 §5.7, IANA).
const (
	IPProtoUDP = 17 // IANA protocol numbers
	IPProtoGRE = 47

	PortVXLANGPE = 4790 // IANA service port vxlan-gpe
	PortGeneve   = 6081 // IANA service port geneve (RFC 8926)

	VXLANGPENextProtoINT = 0x82   // VXLAN-GPE next protocol for INT (INT v2.1 §5.7.3, tentative)
	GeneveClassINT       = 0x0103 // Geneve option class for INT (INT v2.1 §5.7.4, tentative)
)

// EncapInfo describes one encapsulation.
type EncapInfo struct {
	Encap Encap
	Name  string // as String prints it, e.g. "vxlan-gpe"
	// YANG is the leaf of intd-int's marking container that turns the
	// encapsulation on.
	YANG string
	// SAI is the sai_dtel_attr_t attribute that configures it ("" when
	// SAI has none).
	SAI string
	// Tunnel: INT travels inside a tunnel header rather than after the
	// flow's own TCP/UDP header.
	Tunnel bool
	// IPProto is the tunnel's IP protocol, Port its UDP destination port
	// (0 when it is not UDP).
	IPProto uint8
	Port    uint16
	// CodePoint says "INT follows" in the tunnel header: the VXLAN-GPE
	// next protocol or the Geneve option class (0: configured, as GRE's
	// protocol type is still TBD_INT in the spec).
	CodePoint uint16
}

// EncapTable lists the encapsulations in numeric order, from EncapDSCP.
var EncapTable = [...]EncapInfo{
	{Encap: EncapDSCP, Name: "dscp", YANG: "dscp-mask", SAI: "SAI_DTEL_ATTR_INT_L4_DSCP"},
	{Encap: EncapUDPPort, Name: "udp-port", YANG: "udp-port"},
	{Encap: EncapProbeMarker, Name: "probe-marker", YANG: "probe-marker"},
	{Encap: EncapVXLANGPE, Name: "vxlan-gpe", YANG: "vxlan-gpe-next-protocol", Tunnel: true, IPProto: IPProtoUDP, Port: PortVXLANGPE, CodePoint: VXLANGPENextProtoINT},
	{Encap: EncapGeneve, Name: "geneve", YANG: "geneve-option-class", Tunnel: true, IPProto: IPProtoUDP, Port: PortGeneve, CodePoint: GeneveClassINT},
	{Encap: EncapGRE, Name: "gre", YANG: "gre-protocol-type", Tunnel: true, IPProto: IPProtoGRE},
}

// Valid reports whether e is a defined encapsulation (not EncapNone).
func (e Encap) Valid() bool { return e > EncapNone && e < NumEncaps }

// Info returns e's table row.
func (e Encap) Info() (EncapInfo, bool) {
	if e.Valid() {
		return EncapTable[e-1], true
	}
	return EncapInfo{}, false
}

// String returns the name, e.g. "vxlan-gpe" ("none" for EncapNone).
func (e Encap) String() string {
	if e == EncapNone {
		return "none"
	}
	if e.Valid() {
		return EncapTable[e-1].Name
	}
	return "Encap(" + strconv.Itoa(int(e)) + ")"
}

// Tunnel reports whether e carries INT inside a tunnel header.
func (e Encap) Tunnel() bool { return e.Valid() && EncapTable[e-1].Tunnel }

// TunnelBit is e's bit in a set of tunnels (the BPF program's
// cfg.tunnels), 0 when e is not a tunnel.
func (e Encap) TunnelBit() uint8 {
	if !e.Tunnel() {
		return 0
	}
	return 1 << (e - firstTunnel)
}

// firstTunnel is the lowest tunnel encapsulation.
var firstTunnel = func() Encap {
	for _, r := range EncapTable {
		if r.Tunnel {
			return r.Encap
		}
	}
	return NumEncaps
}()

// C is the name of e's constant in the generated C header, e.g.
// "ENC_VXLAN_GPE".
func (e Encap) C() string {
	return "ENC_" + strings.ToUpper(strings.ReplaceAll(e.String(), "-", "_"))
}

// Encaps lists the defined encapsulations.
func Encaps() []Encap {
	out := make([]Encap, 0, len(EncapTable))
	for _, r := range EncapTable {
		out = append(out, r.Encap)
	}
	return out
}

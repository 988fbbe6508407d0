package sai

import (
	"net/netip"

	"github.com/intd-project/intd/sai/spec"
)

// Instruction is the INT v2.1 instruction bitmap; its bits and their
// metadata are spec.Instructions.
type Instruction = spec.Instruction

// IntMode selects the INT header type a source inserts.
type IntMode uint8

const (
	// IntModeMD (eMbed Data, the default): each hop pushes metadata onto a
	// stack in the packet.
	IntModeMD IntMode = iota
	// IntModeMX (eMbed instructions): the packet carries only
	// instructions; each hop sends its metadata in a telemetry report.
	IntModeMX
)

func (m IntMode) String() string {
	switch m {
	case IntModeMD:
		return "MD"
	case IntModeMX:
		return "MX"
	}
	return "IntMode(" + itoa(int(m)) + ")"
}

// IntSessionAttrs mirrors SAI_OBJECT_TYPE_DTEL_INT_SESSION
// (sai_dtel_int_session_attr_t): what an INT source asks downstream hops to
// collect. SAI's collect flags are generalised to the whole INT v2.1
// instruction bitmap. Every attribute is CREATE_AND_SET.
type IntSessionAttrs struct {
	Mode IntMode
	// MaxHopCount (SAI_DTEL_INT_SESSION_ATTR_MAX_HOP_COUNT) is the initial
	// Remaining Hop Count, 1..255 in MD mode; ignored in MX mode, which
	// has no hop count.
	MaxHopCount uint8
	// Instructions is the instruction bitmap; reserved bits 9..14 are
	// rejected, and checksum complement is MD only.
	Instructions Instruction
	// DomainSpecificID identifies the INT domain; 0 is the default domain,
	// in which DS instruction bits are reserved.
	DomainSpecificID uint16
	DSInstruction    uint16
	DSFlags          uint16
	// Discard sets the D bit: the sink drops the packet after reporting.
	Discard bool
	// ClampTCPMSS: the source lowers the MSS option of watched flows' TCP
	// SYNs (and of their replies leaving through a sink port) so that
	// full-sized segments have room for this session's headers at
	// MaxHopCount under the egress MTU.
	ClampTCPMSS bool
	// Encapsulation is how the session's INT travels; with
	// SessionEncapVXLANGPE the source puts IPv4 packets into a VXLAN-GPE
	// tunnel to TunnelDestination (IPv4) and IPv6 packets into one to
	// TunnelDestination6 (IPv6), carrying INT; packets of a family
	// without a destination get none.
	Encapsulation                         SessionEncap
	TunnelDestination, TunnelDestination6 netip.Addr
}

// SessionEncap is how an INT session's INT travels.
type SessionEncap uint8

const (
	// SessionEncapNone: in the flow's own packets (over TCP/UDP with the
	// node's marking, or inside the flow's tunnel).
	SessionEncapNone SessionEncap = iota
	// SessionEncapVXLANGPE: in a VXLAN-GPE tunnel the source adds (UDP
	// port spec.PortVXLANGPE, next protocol INT) and the sink removes.
	SessionEncapVXLANGPE
)

func (e SessionEncap) String() string {
	switch e {
	case SessionEncapNone:
		return "NONE"
	case SessionEncapVXLANGPE:
		return "VXLAN_GPE"
	}
	return "SessionEncap(" + itoa(int(e)) + ")"
}

// validTunnelAddr: a tunnel end is a routable unicast address of its
// family (IPv6 not IPv4-mapped).
func validTunnelAddr(a netip.Addr, v6 bool) bool {
	return a.Is6() == v6 && !a.Is4In6() && a.IsGlobalUnicast()
}

// DefaultIntSessionAttrs returns an MD session of 8 hops (SAI's default)
// collecting node id, level 1 interfaces and hop latency.
func DefaultIntSessionAttrs() IntSessionAttrs {
	return IntSessionAttrs{
		Mode:         IntModeMD,
		MaxHopCount:  8,
		Instructions: spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency,
	}
}

// ObjectType implements Attrs.
func (IntSessionAttrs) ObjectType() ObjectType { return ObjectTypeIntSession }

// References implements Attrs.
func (IntSessionAttrs) References() []OID { return nil }

// SettableFrom implements Attrs: all INT session attributes are settable.
func (IntSessionAttrs) SettableFrom(old Attrs) bool {
	_, ok := old.(IntSessionAttrs)
	return ok
}

// Validate implements Attrs.
func (a IntSessionAttrs) Validate() error {
	const t = ObjectTypeIntSession
	switch a.Mode {
	case IntModeMD:
		if a.MaxHopCount == 0 {
			return invalid(t, AttrIntSessionMaxHopCount, "max hop count 0 is invalid (want 1..255)")
		}
	case IntModeMX:
		if a.Instructions&spec.InstChecksumComplement != 0 {
			return invalid(t, AttrIntSessionInstructions, "checksum complement (bit 15) is not applicable in MX mode: remove it")
		}
	default:
		return invalid(t, AttrIntSessionMode, "mode %d is invalid", a.Mode)
	}
	if r := a.Instructions & spec.InstReserved; r != 0 {
		return invalid(t, AttrIntSessionInstructions, "instruction bitmap %#04x sets reserved bits %s", uint16(a.Instructions), r)
	}
	if a.DomainSpecificID == 0 && a.DSInstruction != 0 {
		return invalid(t, AttrIntSessionDSInstruction, "DS instruction %#04x needs a non-zero domain specific id", a.DSInstruction)
	}
	switch a.Encapsulation {
	case SessionEncapNone:
	case SessionEncapVXLANGPE:
		if a.Mode != IntModeMD {
			return invalid(t, AttrIntSessionEncapsulation, "encapsulation %v carries INT-MD; mode %v has no metadata stack to carry", a.Encapsulation, a.Mode)
		}
		if !a.TunnelDestination.IsValid() && !a.TunnelDestination6.IsValid() {
			return invalid(t, AttrIntSessionTunnelDestination, "encapsulation %v needs a tunnel destination, IPv4 or IPv6", a.Encapsulation)
		}
		if a.TunnelDestination.IsValid() && !validTunnelAddr(a.TunnelDestination, false) {
			return invalid(t, AttrIntSessionTunnelDestination, "tunnel destination %v is not a unicast IPv4 address", a.TunnelDestination)
		}
		if a.TunnelDestination6.IsValid() && !validTunnelAddr(a.TunnelDestination6, true) {
			return invalid(t, AttrIntSessionTunnelDestination6, "tunnel destination %v is not a unicast IPv6 address", a.TunnelDestination6)
		}
	default:
		return invalid(t, AttrIntSessionEncapsulation, "encapsulation %d is invalid", a.Encapsulation)
	}
	if a.Instructions&^spec.InstChecksumComplement == 0 && a.DSInstruction == 0 {
		return invalid(t, AttrIntSessionInstructions, "instruction bitmap requests no metadata")
	}
	return nil
}

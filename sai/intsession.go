package sai

import "github.com/intd-project/intd/sai/spec"

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
	if a.Instructions&^spec.InstChecksumComplement == 0 && a.DSInstruction == 0 {
		return invalid(t, AttrIntSessionInstructions, "instruction bitmap requests no metadata")
	}
	return nil
}

package sai

import (
	"math/bits"
	"strings"
)

// Instruction is the INT v2.1 16-bit instruction bitmap in wire order: bit 0
// of the spec is the most significant bit, so uint16(i) is what goes in the
// INT header.
type Instruction uint16

// InstructionBit returns spec bit n (0..15) of the bitmap.
func InstructionBit(n int) Instruction { return Instruction(1) << (15 - n) }

// Instruction bits. The comment names the SAI collect flag it generalises.
const (
	InstNodeID             Instruction = 1 << (15 - 0) // bit 0: node id (COLLECT_SWITCH_ID)
	InstL1Interfaces       Instruction = 1 << (15 - 1) // bit 1: level 1 ingress+egress interface ids, 16 bits each (COLLECT_SWITCH_PORTS)
	InstHopLatency         Instruction = 1 << (15 - 2) // bit 2: hop latency
	InstQueue              Instruction = 1 << (15 - 3) // bit 3: queue id (8) + occupancy (24) (COLLECT_QUEUE_INFO)
	InstIngressTimestamp   Instruction = 1 << (15 - 4) // bit 4: 8 bytes (COLLECT_INGRESS_TIMESTAMP)
	InstEgressTimestamp    Instruction = 1 << (15 - 5) // bit 5: 8 bytes (COLLECT_EGRESS_TIMESTAMP)
	InstL2Interfaces       Instruction = 1 << (15 - 6) // bit 6: level 2 ingress+egress interface ids, 8 bytes
	InstEgressTxUtil       Instruction = 1 << (15 - 7) // bit 7: egress interface tx utilisation
	InstBuffer             Instruction = 1 << (15 - 8) // bit 8: buffer id (8) + occupancy (24)
	InstChecksumComplement Instruction = 1             // bit 15: checksum complement (MD only, always last)

	// InstReserved are bits 9..14.
	InstReserved Instruction = 0x007e
	// InstAll is every defined bit.
	InstAll Instruction = ^InstReserved
)

var instNames = [16]string{
	0: "node-id", 1: "l1-interfaces", 2: "hop-latency", 3: "queue",
	4: "ingress-timestamp", 5: "egress-timestamp", 6: "l2-interfaces",
	7: "egress-tx-util", 8: "buffer", 15: "checksum-complement",
}

// String lists the set bits, e.g. "node-id|hop-latency" ("bit9" for reserved
// bits, "none" when empty).
func (i Instruction) String() string {
	if i == 0 {
		return "none"
	}
	var parts []string
	for n := 0; n < 16; n++ {
		if i&InstructionBit(n) == 0 {
			continue
		}
		if instNames[n] != "" {
			parts = append(parts, instNames[n])
		} else {
			parts = append(parts, "bit"+itoa(n))
		}
	}
	return strings.Join(parts, "|")
}

// HopMLWords is the per-hop metadata length in 4-byte words the bitmap asks
// for (Hop ML without domain-specific metadata): 8-byte metadata for bits
// 4..6, 4 bytes for every other bit, reserved bits included.
func (i Instruction) HopMLWords() int {
	return bits.OnesCount16(uint16(i)) + bits.OnesCount16(uint16(i&(InstIngressTimestamp|InstEgressTimestamp|InstL2Interfaces)))
}

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
		Instructions: InstNodeID | InstL1Interfaces | InstHopLatency,
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
			return invalid(t, "MaxHopCount", "max hop count 0 is invalid (want 1..255)")
		}
	case IntModeMX:
		if a.Instructions&InstChecksumComplement != 0 {
			return invalid(t, "Instructions", "checksum complement (bit 15) is not applicable in MX mode")
		}
	default:
		return invalid(t, "Mode", "mode %d is invalid", a.Mode)
	}
	if r := a.Instructions & InstReserved; r != 0 {
		return invalid(t, "Instructions", "instruction bitmap %#04x sets reserved bits %s", uint16(a.Instructions), r)
	}
	if a.DomainSpecificID == 0 && a.DSInstruction != 0 {
		return invalid(t, "DSInstruction", "DS instruction %#04x needs a non-zero domain specific id", a.DSInstruction)
	}
	if a.Instructions&^InstChecksumComplement == 0 && a.DSInstruction == 0 {
		return invalid(t, "Instructions", "instruction bitmap requests no metadata")
	}
	return nil
}

package spec

import (
	"math/bits"
	"strconv"
	"strings"
)

// Instruction is the INT v2.1 16-bit instruction bitmap in wire order: bit 0
// of the spec is the most significant bit, so uint16(i) is what goes in the
// INT header. Telemetry Report v2.0 RepMdBits use the same positions.
type Instruction uint16

// InstructionBit returns spec bit n (0..15) of the bitmap.
func InstructionBit(n int) Instruction { return Instruction(1) << (15 - n) }

// Instruction bits (INT v2.1 §5.8); their metadata is in Instructions.
const (
	InstNodeID             Instruction = 0x8000 >> 0
	InstL1Interfaces       Instruction = 0x8000 >> 1
	InstHopLatency         Instruction = 0x8000 >> 2
	InstQueue              Instruction = 0x8000 >> 3
	InstIngressTimestamp   Instruction = 0x8000 >> 4
	InstEgressTimestamp    Instruction = 0x8000 >> 5
	InstL2Interfaces       Instruction = 0x8000 >> 6
	InstEgressTxUtil       Instruction = 0x8000 >> 7
	InstBuffer             Instruction = 0x8000 >> 8
	InstChecksumComplement Instruction = 0x8000 >> 15
)

// InstructionInfo describes one defined instruction bit.
type InstructionInfo struct {
	Inst  Instruction
	Bit   int    // spec bit, 0 = most significant
	Name  string // short name, as String prints it
	Words int    // metadata length per hop, 4-byte words
	// YANG is the identity of intd-int-metadata-semantics naming the field.
	YANG string
	// SAI is the sai_dtel_int_session_attr_t collect flag the bit
	// generalises ("" when SAI has none).
	SAI string
	// RepMdBit is the field's position in Telemetry Report v2.0 RepMdBits,
	// -1 when it has none (bit 0 is reserved there, bit 15 is the drop
	// reason).
	RepMdBit int
	// InReports: telemetry reports carry the field (the node id in the
	// group header, the others at RepMdBit).
	InReports bool
	// C is the name of the bit's mask in the generated C header.
	C string
}

// Instructions is the table of defined instruction bits in bit order; bits
// 9..14 are reserved.
var Instructions = [...]InstructionInfo{
	{Inst: InstNodeID, Bit: 0, Name: "node-id", Words: 1, YANG: "METADATA_FIELD_NODE_ID", SAI: "SAI_DTEL_INT_SESSION_ATTR_COLLECT_SWITCH_ID", RepMdBit: -1, InReports: true, C: "INST_NODE_ID"},
	{Inst: InstL1Interfaces, Bit: 1, Name: "l1-interfaces", Words: 1, YANG: "METADATA_FIELD_LEVEL_1_INTERFACE_IDS", SAI: "SAI_DTEL_INT_SESSION_ATTR_COLLECT_SWITCH_PORTS", RepMdBit: 1, InReports: true, C: "INST_L1_INTERFACES"},
	{Inst: InstHopLatency, Bit: 2, Name: "hop-latency", Words: 1, YANG: "METADATA_FIELD_HOP_LATENCY", SAI: "", RepMdBit: 2, InReports: true, C: "INST_HOP_LATENCY"},
	{Inst: InstQueue, Bit: 3, Name: "queue", Words: 1, YANG: "METADATA_FIELD_QUEUE_OCCUPANCY", SAI: "SAI_DTEL_INT_SESSION_ATTR_COLLECT_QUEUE_INFO", RepMdBit: 3, InReports: true, C: "INST_QUEUE"},
	{Inst: InstIngressTimestamp, Bit: 4, Name: "ingress-timestamp", Words: 2, YANG: "METADATA_FIELD_INGRESS_TIMESTAMP", SAI: "SAI_DTEL_INT_SESSION_ATTR_COLLECT_INGRESS_TIMESTAMP", RepMdBit: 4, InReports: true, C: "INST_INGRESS_TIMESTAMP"},
	{Inst: InstEgressTimestamp, Bit: 5, Name: "egress-timestamp", Words: 2, YANG: "METADATA_FIELD_EGRESS_TIMESTAMP", SAI: "SAI_DTEL_INT_SESSION_ATTR_COLLECT_EGRESS_TIMESTAMP", RepMdBit: 5, InReports: true, C: "INST_EGRESS_TIMESTAMP"},
	{Inst: InstL2Interfaces, Bit: 6, Name: "l2-interfaces", Words: 2, YANG: "METADATA_FIELD_LEVEL_2_INTERFACE_IDS", SAI: "", RepMdBit: 6, InReports: true, C: "INST_L2_INTERFACES"},
	{Inst: InstEgressTxUtil, Bit: 7, Name: "egress-tx-util", Words: 1, YANG: "METADATA_FIELD_EGRESS_PORT_TX_UTILIZATION", SAI: "", RepMdBit: 7, InReports: true, C: "INST_EGRESS_TX_UTIL"},
	{Inst: InstBuffer, Bit: 8, Name: "buffer", Words: 1, YANG: "METADATA_FIELD_BUFFER_OCCUPANCY", SAI: "", RepMdBit: 8, InReports: true, C: "INST_BUFFER"},
	{Inst: InstChecksumComplement, Bit: 15, Name: "checksum-complement", Words: 1, YANG: "METADATA_FIELD_CHECKSUM_COMPLEMENT", SAI: "", RepMdBit: -1, InReports: false, C: "INST_CHECKSUM_COMPLEMENT"},
}

// RepMdDropReason is the RepMdBits position of the drop queue id and drop
// reason word in Telemetry Report v2.0.
const RepMdDropReason = 15

// Masks derived from the table.
var (
	// InstAll is every defined bit.
	InstAll = instMask(func(InstructionInfo) bool { return true })
	// InstReserved is every undefined bit (9..14).
	InstReserved = ^InstAll
	// InstDoubleWord are the bits whose metadata takes two words.
	InstDoubleWord = instMask(func(r InstructionInfo) bool { return r.Words == 2 })
	// InstReportable are the bits whose metadata telemetry reports carry.
	InstReportable = instMask(func(r InstructionInfo) bool { return r.InReports })

	instNames [16]string
)

func init() {
	for _, r := range Instructions {
		instNames[r.Bit] = r.Name
	}
}

func instMask(f func(InstructionInfo) bool) Instruction {
	var m Instruction
	for _, r := range Instructions {
		if f(r) {
			m |= r.Inst
		}
	}
	return m
}

// Info returns the table row of a single defined bit.
func (i Instruction) Info() (InstructionInfo, bool) {
	for _, r := range Instructions {
		if r.Inst == i {
			return r, true
		}
	}
	return InstructionInfo{}, false
}

// Bit reports whether spec bit n (0 = MSB) is set.
func (i Instruction) Bit(n int) bool { return i&InstructionBit(n) != 0 }

// Words is the per-hop metadata length in 4-byte words the bitmap asks for
// (Hop ML without domain-specific metadata): undefined bits take one word,
// filled with all ones.
func (i Instruction) Words() int {
	return bits.OnesCount16(uint16(i)) + bits.OnesCount16(uint16(i&InstDoubleWord))
}

// FieldWords is the size of the metadata of spec bit n in 4-byte words.
func FieldWords(n int) int { return 1 + int(InstDoubleWord>>(15-n)&1) }

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
			parts = append(parts, "bit"+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, "|")
}

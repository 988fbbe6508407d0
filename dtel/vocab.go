package dtel

import (
	"fmt"
	"reflect"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// The YANG <-> sai maps, read from sai/spec's tables by YANG name.
var (
	// instructionBits maps instruction identities to instruction bits.
	instructionBits = yangMap[gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD](spec.Instructions[:],
		func(r spec.InstructionInfo) (string, sai.Instruction) { return r.YANG, r.Inst })
	// fieldInstruction is the instruction bit of each metadata field that
	// has one.
	fieldInstruction = yangMap[mdField](spec.Instructions[:],
		func(r spec.InstructionInfo) (string, sai.Instruction) { return r.YANG, r.Inst })
	// eventTypes maps dtel-event-type values to event types.
	eventTypes = yangMap[gen.E_IntdInt_DtelEventType](spec.EventTypeTable[:],
		func(r spec.EventTypeInfo) (string, sai.EventType) { return r.Name, r.Type })
)

// yangEnum is a generated enumeration or identity type.
type yangEnum interface {
	~int64
	ΛMap() map[string]map[int64]ygot.EnumDefinition
}

// yangMap maps the values of E named by rows to the rows' values. A row
// naming no value of E is a programming error: the tables and the YANG
// modules must agree.
func yangMap[E yangEnum, R any, V any](rows []R, kv func(R) (string, V)) map[E]V {
	var zero E
	defs := zero.ΛMap()[reflect.TypeFor[E]().Name()]
	byName := make(map[string]E, len(defs))
	for v, d := range defs {
		byName[d.Name] = E(v)
	}
	m := make(map[E]V, len(rows))
	for _, r := range rows {
		name, v := kv(r)
		e, ok := byName[name]
		if !ok {
			panic(fmt.Sprintf("dtel: %s has no value %q", reflect.TypeFor[E]().Name(), name))
		}
		m[e] = v
	}
	return m
}

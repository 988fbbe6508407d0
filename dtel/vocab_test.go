package dtel

import (
	"reflect"
	"testing"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/spec"
)

// TestVocabularyMatchesYANG: every instruction bit and event type of
// sai/spec has its YANG value, and every YANG value has its row (the
// baseline field drop-reason, reported but never an instruction, aside).
func TestVocabularyMatchesYANG(t *testing.T) {
	if n := count[gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD](); len(instructionBits) != n-1 || len(instructionBits) != len(spec.Instructions) {
		t.Errorf("%d instruction identities mapped, YANG has %d baseline fields (one is drop-reason), table %d rows", len(instructionBits), n, len(spec.Instructions))
	}
	if _, ok := instructionBits[gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_DROP_REASON]; ok {
		t.Error("drop-reason maps to an instruction bit")
	}
	for id, bit := range instructionBits {
		info, ok := bit.Info()
		if !ok || info.YANG != id.String() {
			t.Errorf("%v maps to %v (%+v)", id, bit, info)
		}
	}
	if len(fieldInstruction) != len(spec.Instructions) {
		t.Errorf("%d metadata fields have an instruction bit, want %d", len(fieldInstruction), len(spec.Instructions))
	}
	if got, want := gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_HOP_LATENCY, spec.InstHopLatency; instructionBits[got] != want {
		t.Errorf("hop-latency maps to %v, want %v", instructionBits[got], want)
	}
	if n := count[gen.E_IntdInt_DtelEventType](); len(eventTypes) != n || n != len(spec.EventTypeTable) {
		t.Errorf("%d event types mapped, YANG has %d, table %d", len(eventTypes), n, len(spec.EventTypeTable))
	}
	for y, e := range eventTypes {
		if y.String() != e.String() {
			t.Errorf("YANG %v maps to %v", y, e)
		}
	}
}

// count is the number of values of a generated enumeration.
func count[E yangEnum]() int {
	var e E
	return len(e.ΛMap()[reflect.TypeFor[E]().Name()])
}

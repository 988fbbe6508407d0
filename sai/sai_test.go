package sai

import (
	"errors"
	"testing"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

func TestOID(t *testing.T) {
	o := MakeOID(ObjectTypeReportSession, 42)
	if o.Type() != ObjectTypeReportSession || o.Index() != 42 || o.IsNull() {
		t.Fatalf("MakeOID round trip: type %v index %d", o.Type(), o.Index())
	}
	if got := o.String(); got != "report-session:42" {
		t.Errorf("String() = %q", got)
	}
	if got := NullOID.String(); got != "null" {
		t.Errorf("NullOID.String() = %q", got)
	}
	if got := MakeOID(ObjectTypeEvent, 1<<55|5).Index(); got != 1<<55|5 {
		t.Errorf("index keeps 56 bits: got %#x", got)
	}
	if got := MakeOID(ObjectTypeEvent, 1<<56).Type(); got != ObjectTypeEvent {
		t.Errorf("oversized index leaked into type: %v", got)
	}
}

func TestInstruction(t *testing.T) {
	if uint16(spec.InstNodeID) != 0x8000 || uint16(spec.InstChecksumComplement) != 0x0001 || spec.InstructionBit(2) != spec.InstHopLatency {
		t.Fatal("instruction bits are not in wire order")
	}
	tests := []struct {
		i     Instruction
		words int
		str   string
	}{
		{0, 0, "none"},
		{spec.InstNodeID | spec.InstHopLatency, 2, "node-id|hop-latency"},
		{spec.InstIngressTimestamp | spec.InstEgressTimestamp | spec.InstL2Interfaces, 6, "ingress-timestamp|egress-timestamp|l2-interfaces"},
		{spec.InstAll, 13, "node-id|l1-interfaces|hop-latency|queue|ingress-timestamp|egress-timestamp|l2-interfaces|egress-tx-util|buffer|checksum-complement"},
		{spec.InstructionBit(9), 1, "bit9"},
	}
	for _, tt := range tests {
		if got := tt.i.Words(); got != tt.words {
			t.Errorf("%v.Words() = %d, want %d", tt.i, got, tt.words)
		}
		if got := tt.i.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
}

func TestSettableFrom(t *testing.T) {
	q := validQueueReport()
	e := validEntry()
	ev := EventAttrs{Type: spec.EventFlowState, ReportSession: MakeOID(ObjectTypeReportSession, 1)}
	tests := []struct {
		name     string
		old, new Attrs
		want     bool
	}{
		{"dtel anything", DefaultDTelAttrs(), mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.SwitchID = 9 }), true},
		{"int session anything", DefaultIntSessionAttrs(), mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Mode = IntModeMX }), true},
		{"report session anything", validReportSession(), mod(validReportSession(), func(a *ReportSessionAttrs) { a.DSCP = 1 }), true},
		{"queue threshold", q, mod(q, func(a *QueueReportAttrs) { a.BreachQuota = 5 }), true},
		{"queue port", q, mod(q, func(a *QueueReportAttrs) { a.Port = "eth1" }), false},
		{"queue id", q, mod(q, func(a *QueueReportAttrs) { a.Queue = 3 }), false},
		{"event session", ev, mod(ev, func(a *EventAttrs) { a.ReportSession = MakeOID(ObjectTypeReportSession, 2) }), true},
		{"event type", ev, mod(ev, func(a *EventAttrs) { a.Type = spec.EventDropReport }), false},
		{"entry action", e, mod(e, func(a *WatchlistEntryAttrs) { a.Action.FlowSamplePercent = 50 }), true},
		{"entry packet interval", e, mod(e, func(a *WatchlistEntryAttrs) { a.Action.PacketInterval = time.Millisecond }), true},
		{"entry priority", e, mod(e, func(a *WatchlistEntryAttrs) { a.Priority++ }), false},
		{"entry match", e, mod(e, func(a *WatchlistEntryAttrs) { a.Match.Inner.Enabled = true }), false},
		{"type change", DefaultDTelAttrs(), DefaultIntSessionAttrs(), false},
	}
	for _, tt := range tests {
		if got := tt.new.SettableFrom(tt.old); got != tt.want {
			t.Errorf("%s: SettableFrom = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCheckSet(t *testing.T) {
	q := validQueueReport()
	oid := MakeOID(ObjectTypeQueueReport, 1)
	if err := CheckSet(oid, q, mod(q, func(a *QueueReportAttrs) { a.TailDrop = true })); err != nil {
		t.Errorf("settable change: %v", err)
	}
	if err := CheckSet(oid, q, mod(q, func(a *QueueReportAttrs) { a.Queue = 1 })); !errors.Is(err, ErrCreateOnly) {
		t.Errorf("create-only change: got %v, want ErrCreateOnly", err)
	}
	if err := CheckSet(MakeOID(ObjectTypeEvent, 1), q, q); !errors.Is(err, ErrInvalid) {
		t.Errorf("type mismatch: got %v, want ErrInvalid", err)
	}
	if err := CheckSet(oid, q, mod(q, func(a *QueueReportAttrs) { a.BreachQuota = 0 })); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid attrs: got %v, want ErrInvalid", err)
	}
	if err := CheckCreate(&q); !errors.Is(err, ErrInvalid) {
		t.Errorf("pointer attrs: got %v, want ErrInvalid", err)
	}
	if err := CheckCreate(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil attrs: got %v, want ErrInvalid", err)
	}
}

func TestReferences(t *testing.T) {
	rs := MakeOID(ObjectTypeReportSession, 1)
	if got := (EventAttrs{Type: spec.EventFlowState, ReportSession: rs}).References(); len(got) != 1 || got[0] != rs {
		t.Errorf("event references = %v", got)
	}
	if got := validEntry().References(); len(got) != 1 || got[0] != MakeOID(ObjectTypeIntSession, 1) {
		t.Errorf("entry references = %v", got)
	}
	if got := (WatchlistEntryAttrs{}).References(); got != nil {
		t.Errorf("exclusion entry references = %v", got)
	}
	// Creation order puts every referenced type before its referrers.
	pos := map[ObjectType]int{}
	for i, ty := range ObjectTypes() {
		pos[ty] = i
	}
	if pos[ObjectTypeReportSession] > pos[ObjectTypeEvent] || pos[ObjectTypeIntSession] > pos[ObjectTypeWatchlistEntry] {
		t.Errorf("ObjectTypes() order %v breaks references", ObjectTypes())
	}
}

func TestClone(t *testing.T) {
	d := DefaultDTelAttrs()
	d.SinkPortList = []string{"eth0"}
	c := Clone(d).(DTelAttrs)
	c.SinkPortList[0] = "eth9"
	if d.SinkPortList[0] != "eth0" {
		t.Error("DTelAttrs clone shares SinkPortList")
	}
	r := validReportSession()
	rc := Clone(r).(ReportSessionAttrs)
	rc.Destinations[0].UDPPort = 1
	if r.Destinations[0].UDPPort != 0 {
		t.Error("ReportSessionAttrs clone shares Destinations")
	}
}

func TestQueueResetDefault(t *testing.T) {
	q := validQueueReport()
	if got := q.EffectiveResetThreshold(); got != time.Microsecond {
		t.Errorf("default reset = %v, want half of 2µs", got)
	}
	q.ResetThreshold = 500 * time.Nanosecond
	if got := q.EffectiveResetThreshold(); got != 500*time.Nanosecond {
		t.Errorf("explicit reset = %v", got)
	}
}

func TestCapabilitiesCheck(t *testing.T) {
	full := FullCapabilities()
	for _, a := range []Attrs{DefaultDTelAttrs(), DefaultIntSessionAttrs(), validReportSession(), validQueueReport(), validEntry()} {
		if err := full.Check(a); err != nil {
			t.Errorf("FullCapabilities rejects %T: %v", a, err)
		}
	}
	limited := full
	limited.Instructions = spec.InstNodeID | spec.InstHopLatency
	limited.ReportMetadata = spec.InstNodeID
	limited.Encaps = []spec.Encap{spec.EncapDSCP}
	limited.Postcard = false
	limited.Coalescing = false
	limited.MaxReportDestinations = 1
	limited.EventTypes = []EventType{spec.EventDropReport}
	limited.PacketInterval = false
	tests := []struct {
		a    Attrs
		attr string
	}{
		{DefaultIntSessionAttrs(), "Instructions"}, // L1 interfaces
		{mod(DefaultIntSessionAttrs(), func(a *IntSessionAttrs) { a.Mode, a.Instructions = IntModeMX, spec.InstHopLatency }), "Instructions"},
		{DefaultDTelAttrs(), "VXLANGPENextProtocol"},
		{mod(DefaultDTelAttrs(), func(a *DTelAttrs) { a.VXLANGPENextProtocol, a.GeneveOptionClass, a.PostcardEnable = 0, 0, true }), "PostcardEnable"},
		{mod(validReportSession(), func(a *ReportSessionAttrs) { a.Coalesce.MaxReports = 4 }), "Coalesce.MaxReports"},
		{mod(validReportSession(), func(a *ReportSessionAttrs) {
			a.Destinations = append(a.Destinations, ReportDestination{IP: a.SrcIP})
		}), "Destinations"},
		{EventAttrs{Type: spec.EventFlowState}, "Type"},
		{mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action = WatchlistAction{FlowOp: FlowOpPostcard, FlowSamplePercent: 1} }), "Action.FlowOp"},
		{mod(validEntry(), func(a *WatchlistEntryAttrs) { a.Action.PacketInterval = time.Millisecond }), "Action.PacketInterval"},
	}
	for _, tt := range tests {
		err := limited.Check(tt.a)
		var ae *AttrError
		if !errors.As(err, &ae) || ae.Field() != tt.attr || !errors.Is(err, ErrUnsupported) {
			t.Errorf("Check(%T) = %v, want ErrUnsupported on %s", tt.a, err, tt.attr)
		}
	}
}

func TestDropReasons(t *testing.T) {
	want := map[DropReason]uint8{spec.DropUnknown: 0, spec.DropIPTTLZero: 26, spec.DropRoutingMiss: 29, spec.DropTrafficManager: 71, spec.DropACLDeny: 80}
	for r, code := range want {
		if uint8(r) != code {
			t.Errorf("%v = %d, want %d", r, r, code)
		}
	}
	prev := -1
	for _, r := range spec.DropReasons() {
		if int(r) <= prev || !r.Known() || r.Description() == "" || r.String() == "" {
			t.Errorf("spec.DropReasons(): bad entry %d %q", r, r)
		}
		prev = int(r)
	}
	if DropReason(200).Known() || DropReason(200).String() != "DropReason(200)" {
		t.Error("unknown reason")
	}
}

package saitest

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

func reportSession(port uint16) sai.ReportSessionAttrs {
	a := sai.DefaultReportSessionAttrs()
	a.SrcIP = netip.MustParseAddr("10.0.0.1")
	a.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("10.0.1.1"), UDPPort: port}}
	return a
}

// entry returns an INT entry, or a drop-report-only one without a session.
func entry(prio uint16, session sai.OID) sai.WatchlistEntryAttrs {
	e := sai.WatchlistEntryAttrs{
		Priority: prio,
		Match:    sai.WatchlistMatch{DstPrefix: netip.MustParsePrefix("10.1.0.0/16")},
		Action:   sai.WatchlistAction{DropReportEnable: true},
	}
	if !session.IsNull() {
		e.Action = sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: session, FlowSamplePercent: 100}
	}
	return e
}

func mustCreate(t *testing.T, b *Backend, a sai.Attrs) sai.OID {
	t.Helper()
	oid, err := b.Create(a)
	if err != nil {
		t.Fatalf("Create(%T): %v", a, err)
	}
	return oid
}

// populate builds a small but complete configuration.
func populate(t *testing.T, b *Backend) (rs, is, ev, we sai.OID) {
	t.Helper()
	mustCreate(t, b, sai.DefaultDTelAttrs())
	rs = mustCreate(t, b, reportSession(32766))
	is = mustCreate(t, b, sai.DefaultIntSessionAttrs())
	ev = mustCreate(t, b, sai.EventAttrs{Type: spec.EventFlowState, ReportSession: rs})
	we = mustCreate(t, b, entry(10, is))
	return rs, is, ev, we
}

func TestDeterministicOIDs(t *testing.T) {
	a, b := New(), New()
	ra, ia, ea, wa := populate(t, a)
	rb, ib, eb, wb := populate(t, b)
	if ra != rb || ia != ib || ea != eb || wa != wb {
		t.Errorf("OIDs differ between identical runs: %v %v %v %v / %v %v %v %v", ra, ia, ea, wa, rb, ib, eb, wb)
	}
	if ra != sai.MakeOID(sai.ObjectTypeReportSession, 1) || wa != sai.MakeOID(sai.ObjectTypeWatchlistEntry, 1) {
		t.Errorf("first OIDs = %v, %v; want index 1 per type", ra, wa)
	}
	if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
		t.Errorf("snapshots differ:\n%v\n%v", a.Snapshot(), b.Snapshot())
	}
	// Indexes are never reused.
	if err := a.Remove(wa); err != nil {
		t.Fatal(err)
	}
	if w2 := mustCreate(t, a, entry(10, ia)); w2.Index() != 2 {
		t.Errorf("recreated entry got %v, want index 2", w2)
	}
}

func TestReferentialIntegrity(t *testing.T) {
	b := New()
	rs, is, ev, we := populate(t, b)

	if err := b.Remove(rs); !errors.Is(err, sai.ErrInUse) {
		t.Errorf("Remove(report session used by event) = %v, want ErrInUse", err)
	}
	if err := b.Remove(is); !errors.Is(err, sai.ErrInUse) {
		t.Errorf("Remove(INT session used by entry) = %v, want ErrInUse", err)
	}
	if got := b.Referrers(rs); !slices.Equal(got, []sai.OID{ev}) {
		t.Errorf("Referrers(%v) = %v", rs, got)
	}

	missingRS := sai.MakeOID(sai.ObjectTypeReportSession, 99)
	if _, err := b.Create(sai.EventAttrs{Type: spec.EventDropReport, ReportSession: missingRS}); !errors.Is(err, sai.ErrNotFound) {
		t.Errorf("Create(event -> missing session) = %v, want ErrNotFound", err)
	}
	if _, err := b.Create(entry(5, sai.MakeOID(sai.ObjectTypeIntSession, 99))); !errors.Is(err, sai.ErrNotFound) {
		t.Errorf("Create(entry -> missing INT session) = %v, want ErrNotFound", err)
	}
	if err := b.Set(ev, sai.EventAttrs{Type: spec.EventFlowState, ReportSession: missingRS}); !errors.Is(err, sai.ErrNotFound) {
		t.Errorf("Set(event -> missing session) = %v, want ErrNotFound", err)
	}

	// Moving the reference frees the old session.
	rs2 := mustCreate(t, b, reportSession(9999))
	if err := b.Set(ev, sai.EventAttrs{Type: spec.EventFlowState, ReportSession: rs2}); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(rs); err != nil {
		t.Errorf("Remove(unreferenced session) = %v", err)
	}
	// Remove in reverse dependency order succeeds.
	for _, oid := range []sai.OID{we, is, ev, rs2} {
		if err := b.Remove(oid); err != nil {
			t.Errorf("Remove(%v) = %v", oid, err)
		}
	}
	if err := b.Remove(we); !errors.Is(err, sai.ErrNotFound) {
		t.Errorf("second Remove = %v, want ErrNotFound", err)
	}
}

func TestUniqueness(t *testing.T) {
	b := New()
	rs, _, _, _ := populate(t, b)
	if _, err := b.Create(sai.DefaultDTelAttrs()); !errors.Is(err, sai.ErrExists) {
		t.Errorf("second DTel = %v, want ErrExists", err)
	}
	if _, err := b.Create(sai.EventAttrs{Type: spec.EventFlowState, ReportSession: rs}); !errors.Is(err, sai.ErrExists) {
		t.Errorf("second FLOW_STATE event = %v, want ErrExists", err)
	}
	q := sai.DefaultQueueReportAttrs("eth0", 1)
	q.TailDrop = true
	mustCreate(t, b, q)
	if _, err := b.Create(q); !errors.Is(err, sai.ErrExists) {
		t.Errorf("second queue report on eth0/1 = %v, want ErrExists", err)
	}
	q.Queue = 2
	mustCreate(t, b, q)
	// Equal watchlist priorities may coexist (make-before-break).
	mustCreate(t, b, entry(10, sai.NullOID))
}

func TestSetRules(t *testing.T) {
	b := New()
	_, is, _, we := populate(t, b)
	e := entry(10, is)
	e.Action.FlowSamplePercent = 50
	if err := b.Set(we, e); err != nil {
		t.Errorf("Set(action change) = %v", err)
	}
	e.Priority = 11
	if err := b.Set(we, e); !errors.Is(err, sai.ErrCreateOnly) {
		t.Errorf("Set(priority change) = %v, want ErrCreateOnly", err)
	}
	if err := b.Set(we, sai.DefaultIntSessionAttrs()); !errors.Is(err, sai.ErrInvalid) {
		t.Errorf("Set(wrong type) = %v, want ErrInvalid", err)
	}
	if err := b.Set(sai.MakeOID(sai.ObjectTypeIntSession, 42), sai.DefaultIntSessionAttrs()); !errors.Is(err, sai.ErrNotFound) {
		t.Errorf("Set(unknown) = %v, want ErrNotFound", err)
	}
	bad := sai.DefaultIntSessionAttrs()
	bad.MaxHopCount = 0
	err := b.Set(is, bad)
	var ae *sai.AttrError
	if !errors.As(err, &ae) || ae.Attr != sai.AttrIntSessionMaxHopCount {
		t.Errorf("Set(invalid) = %v, want AttrError on MaxHopCount", err)
	}
	if got, _ := b.Get(is); !reflect.DeepEqual(got, sai.DefaultIntSessionAttrs()) {
		t.Errorf("failed Set changed the object: %+v", got)
	}
}

func TestCapabilities(t *testing.T) {
	caps := sai.FullCapabilities()
	caps.MaxWatchlistEntries = 1
	caps.Modes = []sai.IntMode{sai.IntModeMD}
	b := New(WithCapabilities(caps))
	if !reflect.DeepEqual(b.Capabilities(), caps) {
		t.Error("Capabilities() does not report the configured value")
	}
	mustCreate(t, b, entry(1, sai.NullOID))
	if _, err := b.Create(entry(2, sai.NullOID)); !errors.Is(err, sai.ErrUnsupported) {
		t.Errorf("entry over limit = %v, want ErrUnsupported", err)
	}
	mx := sai.DefaultIntSessionAttrs()
	mx.Mode = sai.IntModeMX
	if _, err := b.Create(mx); !errors.Is(err, sai.ErrUnsupported) {
		t.Errorf("MX session = %v, want ErrUnsupported", err)
	}
}

func TestFailAt(t *testing.T) {
	b := New()
	populate(t, b)
	before := b.Snapshot()
	b.ResetLog()
	boom := errors.New("boom")

	b.FailAt(2, boom)
	rs, err := b.Create(reportSession(1))
	if err != nil {
		t.Fatalf("call 1: %v", err)
	}
	if _, err := b.Create(reportSession(2)); !errors.Is(err, boom) {
		t.Fatalf("call 2 = %v, want injected boom", err)
	}
	if _, err := b.Create(reportSession(3)); err != nil {
		t.Fatalf("call 3 (failure is one-shot): %v", err)
	}
	log := b.Log()
	if len(log) != 3 || log[1].Err == nil || !log[1].OID.IsNull() || log[0].OID != rs || log[0].Kind != OpCreate {
		t.Errorf("log = %v", log)
	}
	if got := len(b.Objects(sai.ObjectTypeReportSession)); got != 3 {
		t.Errorf("%d report sessions, want 3 (failed create leaves no object)", got)
	}

	// Failures fire before validation and leave state untouched.
	b.FailAt(1, boom)
	if err := b.Remove(rs); !errors.Is(err, boom) {
		t.Errorf("Remove = %v, want boom", err)
	}
	if _, ok := b.Get(rs); !ok {
		t.Error("failed Remove removed the object")
	}
	b.FailAt(1, boom)
	b.FailAt(0, nil) // cancel
	if err := b.Remove(rs); err != nil {
		t.Errorf("Remove after cancel = %v", err)
	}
	for _, oid := range b.Objects(sai.ObjectTypeReportSession) {
		if _, ok := before[oid]; !ok {
			_ = b.Remove(oid)
		}
	}
	if !reflect.DeepEqual(b.Snapshot(), before) {
		t.Errorf("snapshot after undo:\n%v\nwant:\n%v", b.Snapshot(), before)
	}
}

func TestFailWhen(t *testing.T) {
	b := New()
	_, is, _, we := populate(t, b)
	nope := errors.New("nope")
	b.FailWhen(func(op Op) error {
		if op.Kind == OpRemove && op.Type == sai.ObjectTypeWatchlistEntry {
			return nope
		}
		return nil
	})
	if err := b.Remove(we); !errors.Is(err, nope) {
		t.Errorf("Remove(entry) = %v, want nope", err)
	}
	if err := b.Set(is, sai.DefaultIntSessionAttrs()); err != nil {
		t.Errorf("Set(INT session) = %v", err)
	}
	b.FailWhen(nil)
	if err := b.Remove(we); err != nil {
		t.Errorf("Remove after clearing hook = %v", err)
	}
}

func TestLogAndCopies(t *testing.T) {
	b := New()
	d := sai.DefaultDTelAttrs()
	d.SinkPortList = []string{"eth0"}
	oid := mustCreate(t, b, d)
	d.SinkPortList[0] = "mutated" // caller reuses its slice
	d.SwitchID = 7
	if err := b.Set(oid, d); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(oid); err != nil {
		t.Fatal(err)
	}
	log := b.Log()
	want := []Op{
		{Kind: OpCreate, Type: sai.ObjectTypeDTel, OID: oid},
		{Kind: OpSet, Type: sai.ObjectTypeDTel, OID: oid},
		{Kind: OpRemove, Type: sai.ObjectTypeDTel, OID: oid},
	}
	for i := range want {
		got := log[i]
		got.Attrs = nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("log[%d] = %v, want %v", i, log[i], want[i])
		}
	}
	if got := log[0].Attrs.(sai.DTelAttrs).SinkPortList[0]; got != "eth0" {
		t.Errorf("logged create attrs alias the caller's slice: %q", got)
	}
	if log[1].Attrs.(sai.DTelAttrs).SwitchID != 7 || log[2].Attrs != nil {
		t.Errorf("logged attrs: %v", log)
	}
}

func TestCanonicalIgnoresOIDs(t *testing.T) {
	a, b := New(), New()
	populate(t, a)
	// Same objects in b, but created with a detour that shifts OIDs.
	mustCreate(t, b, sai.DefaultDTelAttrs())
	tmp := mustCreate(t, b, reportSession(1))
	if err := b.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	rs := mustCreate(t, b, reportSession(32766))
	tmpIS := mustCreate(t, b, sai.DefaultIntSessionAttrs())
	is := mustCreate(t, b, sai.DefaultIntSessionAttrs())
	mustCreate(t, b, sai.EventAttrs{Type: spec.EventFlowState, ReportSession: rs})
	mustCreate(t, b, entry(10, is))
	if err := b.Remove(tmpIS); err != nil {
		t.Fatal(err)
	}

	if reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
		t.Fatal("test setup: OIDs should differ")
	}
	ca, cb := a.Snapshot().Canonical(), b.Snapshot().Canonical()
	if !slices.Equal(ca, cb) {
		t.Errorf("Canonical differs:\n%q\n%q", ca, cb)
	}
	// A changed referenced object changes the referrer's rendering too.
	s := b.Snapshot()
	r := s[rs].(sai.ReportSessionAttrs)
	r.DSCP = 10
	s[rs] = r
	if slices.Equal(s.Canonical(), cb) {
		t.Error("Canonical did not change with a referenced object")
	}
}

func TestStats(t *testing.T) {
	b := New()
	rs, is, _, we := populate(t, b)
	q := sai.DefaultQueueReportAttrs("eth0", 0)
	q.LatencyThreshold = time.Microsecond
	qr := mustCreate(t, b, q)
	s, err := b.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.ReportSessions[rs]; !ok {
		t.Error("no stats entry for the report session")
	}
	if _, ok := s.IntSessions[is]; !ok {
		t.Error("no stats entry for the INT session")
	}
	if _, ok := s.Watchlist[we]; !ok {
		t.Error("no stats entry for the watchlist entry")
	}
	if s.QueueReports[qr].QuotaLeft != sai.DefaultBreachQuota {
		t.Errorf("queue quota left = %d", s.QueueReports[qr].QuotaLeft)
	}

	want := sai.Stats{Drops: map[sai.DropReason]uint64{spec.DropIPTTLZero: 3}}
	b.SetStats(want)
	want.Drops[spec.DropIPTTLZero] = 99 // SetStats copied
	got, _ := b.Stats(context.Background())
	if got.Drops[spec.DropIPTTLZero] != 3 {
		t.Errorf("SetStats did not copy: %v", got.Drops)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Stats(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stats(cancelled) = %v", err)
	}
}

func TestRejectsPointersAndNil(t *testing.T) {
	b := New()
	d := sai.DefaultDTelAttrs()
	if _, err := b.Create(&d); !errors.Is(err, sai.ErrInvalid) {
		t.Errorf("Create(pointer) = %v, want ErrInvalid", err)
	}
	if _, err := b.Create(nil); !errors.Is(err, sai.ErrInvalid) {
		t.Errorf("Create(nil) = %v, want ErrInvalid", err)
	}
	if len(b.Snapshot()) != 0 {
		t.Error("rejected creates left objects")
	}
}

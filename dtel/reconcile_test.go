package dtel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
)

func TestDependencyOrder(t *testing.T) {
	o, b := newTest(t)
	mustApply(t, o, full(t))
	want := []string{
		"create dtel",
		"create report session", "create report session",
		"create int session", "create int session",
		"create queue report",
		"create event", "create event", "create event", "create event", "create event", "create event",
		"create watchlist entry", "create watchlist entry", "create watchlist entry",
	}
	if got := kinds(b.Log()); !slices.Equal(got, want) {
		t.Errorf("create order:\n got %q\nwant %q", got, want)
	}
	b.ResetLog()
	mustApply(t, o, &gen.Device{})
	slices.Reverse(want)
	for i := range want {
		want[i] = "remove" + want[i][len("create"):]
	}
	if got := kinds(b.Log()); !slices.Equal(got, want) {
		t.Errorf("remove order:\n got %q\nwant %q", got, want)
	}
	if n := len(b.Snapshot()); n != 0 {
		t.Errorf("%d objects left", n)
	}
	// Applying the same configuration twice does nothing the second time.
	mustApply(t, o, full(t))
	b.ResetLog()
	mustApply(t, o, full(t))
	if log := b.Log(); len(log) != 0 {
		t.Errorf("idempotent Apply made calls: %v", log)
	}
}

// oneOp applies change on top of the full configuration and returns the
// single operation it must cause.
func TestInPlaceUpdates(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *gen.Device)
		want   []string
	}{
		{"report session dscp", func(d *gen.Device) { d.Int.ReportSessions.ReportSession["collector"].Config.Dscp = ptrTo(uint8(10)) },
			[]string{"set report session"}},
		{"report session collector added", func(d *gen.Device) {
			c := d.Int.ReportSessions.ReportSession["legacy"].Collectors.GetOrCreateCollector("2001:db8::8", 9555).GetOrCreateConfig()
			c.Address, c.Port = ptrTo("2001:db8::8"), ptrTo(uint16(9555))
		}, []string{"set report session"}},
		{"int session instructions", func(d *gen.Device) {
			d.Int.IntSessions.IntSession["md-5"].Config.Instructions = d.Int.IntSessions.IntSession["md-5"].Config.Instructions[:3]
		}, []string{"set int session"}},
		{"node id", func(d *gen.Device) { d.Int.Node.Config.NodeId = ptrTo(uint32(2)) }, []string{"set dtel"}},
		{"sink interface", func(d *gen.Device) { d.Int.Interfaces.Interface["eth1"].Config.IntSink = ptrTo(false) }, []string{"set dtel"}},
		{"entry action", func(d *gen.Device) { d.Int.Watchlist.Entries.Entry[10].Actions.Config.SamplePercent = ptrTo(uint8(10)) },
			[]string{"set watchlist entry"}},
		{"entry packet-interval", func(d *gen.Device) {
			d.Int.Watchlist.Entries.Entry[10].Actions.Config.PacketInterval = ptrTo(uint32(5000))
		},
			[]string{"set watchlist entry"}},
		{"entry description only", func(d *gen.Device) { d.Int.Watchlist.Entries.Entry[10].Config.Description = ptrTo("x") }, nil},
		{"entry moved to another int session", func(d *gen.Device) {
			d.Int.Watchlist.Entries.Entry[10].Actions.Config.IntSession = ptrTo("mx-probe")
		}, []string{"set watchlist entry"}},
		{"event moved to another report session", func(d *gen.Device) {
			d.Int.Events.Event[gen.IntdInt_DtelEventType_FLOW_STATE].Config.ReportSession = ptrTo("legacy")
		}, []string{"set event"}},
		{"queue report thresholds", func(d *gen.Device) {
			c := d.Int.QueueReports.QueueReport[gen.IntdInt_Int_QueueReports_QueueReport_Key{Interface: "eth1"}].Config
			c.LatencyThreshold, c.LatencyResetThreshold = ptrTo(uint32(200000)), nil
		}, []string{"set queue report"}},
		// Create-only changes: make-before-break.
		{"entry match", func(d *gen.Device) {
			d.Int.Watchlist.Entries.Entry[10].Match.Config.SourcePrefix = ptrTo("10.0.3.0/24")
		},
			[]string{"create watchlist entry", "remove watchlist entry"}},
		{"entry vxlan match", func(d *gen.Device) { d.Int.Watchlist.Entries.Entry[20].VxlanMatch.Config.Vni = ptrTo(uint32(7)) },
			[]string{"create watchlist entry", "remove watchlist entry"}},
		// A new session is created before the entry is pointed at it,
		// and the old one is removed after.
		{"entry moved to a new session replacing the old", func(d *gen.Device) {
			s := d.Int.IntSessions.IntSession["md-5"]
			delete(d.Int.IntSessions.IntSession, "md-5")
			s.Name, s.Config.Name = ptrTo("md-6"), ptrTo("md-6")
			d.Int.IntSessions.IntSession["md-6"] = s
			d.Int.Watchlist.Entries.Entry[10].Actions.Config.IntSession = ptrTo("md-6")
		}, []string{"create int session", "set watchlist entry", "remove int session"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, b := newTest(t)
			mustApply(t, o, full(t))
			before := b.Snapshot()
			b.ResetLog()
			d := full(t)
			tc.change(d)
			mustApply(t, o, d)
			log := b.Log()
			if got := kinds(log); !slices.Equal(got, tc.want) {
				t.Fatalf("operations:\n got %q\nwant %q", got, tc.want)
			}
			for _, op := range log {
				if op.Kind == saitest.OpSet {
					if _, ok := before[op.OID]; !ok {
						t.Errorf("set of %v, which did not exist", op.OID)
					}
				}
			}
			// The result is what a fresh backend gets.
			fo, fb := newTest(t)
			mustApply(t, fo, d)
			if canon(b) != canon(fb) {
				t.Errorf("backend differs from a fresh Apply:\n%s\n---\n%s", canon(b), canon(fb))
			}
		})
	}
}

func sharedSessionConfig(t *testing.T, seqs ...uint32) *gen.Device {
	d := full(t)
	es := d.Int.Watchlist.Entries.Entry
	clear(es)
	for _, seq := range seqs {
		e := d.Int.Watchlist.Entries.GetOrCreateEntry(seq)
		e.GetOrCreateConfig().SequenceId = ptrTo(seq)
		e.GetOrCreateMatch().GetOrCreateConfig().Protocol = ptrTo(uint8(seq))
		a := e.GetOrCreateActions().GetOrCreateConfig()
		a.FlowOp, a.IntSession = gen.IntdInt_FlowOp_INT, ptrTo("md-5")
	}
	return d
}

func users(o *Orchestrator, k key) int {
	for inst := range o.live {
		if inst.key == k {
			return inst.users
		}
	}
	return -1
}

// TestSharedSessionRefcount: an INT session used by several entries is
// created once and removed only when nothing uses it any more.
func TestSharedSessionRefcount(t *testing.T) {
	o, b := newTest(t)
	mustApply(t, o, sharedSessionConfig(t, 1, 2, 3))
	var created []sai.OID
	for _, op := range b.Log() {
		if op.Kind == saitest.OpCreate && op.Type == sai.ObjectTypeIntSession {
			created = append(created, op.OID)
		}
	}
	if len(created) != 2 { // md-5 and mx-probe, once each
		t.Fatalf("INT sessions created %d times, want 2", len(created))
	}
	if n := users(o, kMD5); n != 3 {
		t.Errorf("md-5 has %d users, want 3", n)
	}
	md5 := o.snap.oids[kMD5]
	if refs := b.Referrers(md5); len(refs) != 3 {
		t.Errorf("backend: md-5 referenced by %v", refs)
	}

	b.ResetLog()
	mustApply(t, o, sharedSessionConfig(t, 2, 3))
	if got, want := kinds(b.Log()), []string{"remove watchlist entry"}; !slices.Equal(got, want) {
		t.Errorf("removing one entry: %q, want %q", got, want)
	}
	if n := users(o, kMD5); n != 2 || o.snap.oids[kMD5] != md5 {
		t.Errorf("md-5: %d users, oid %v; want 2 users, oid %v", n, o.snap.oids[kMD5], md5)
	}

	// Entries gone, session still configured: kept, unused.
	b.ResetLog()
	mustApply(t, o, sharedSessionConfig(t))
	if got, want := kinds(b.Log()), []string{"remove watchlist entry", "remove watchlist entry"}; !slices.Equal(got, want) {
		t.Errorf("removing the entries: %q, want %q", got, want)
	}
	if n := users(o, kMD5); n != 0 {
		t.Errorf("md-5 has %d users, want 0", n)
	}

	// Session and entries removed together: entries first.
	mustApply(t, o, sharedSessionConfig(t, 1, 2))
	b.ResetLog()
	d := sharedSessionConfig(t)
	delete(d.Int.IntSessions.IntSession, "md-5")
	mustApply(t, o, d)
	if got, want := kinds(b.Log()), []string{"remove watchlist entry", "remove watchlist entry", "remove int session"}; !slices.Equal(got, want) {
		t.Errorf("removing session and entries: %q, want %q", got, want)
	}

	// Report sessions shared by events likewise.
	if n := users(o, kCollector); n != 5 {
		t.Errorf("collector report session has %d users, want 5", n)
	}
}

// multiChange is a change touching every kind of operation: creates,
// in-place sets, make-before-break recreation, re-pointing and removals.
func multiChange(t *testing.T) *gen.Device {
	d := full(t)
	in := d.Int
	in.Node.Config.LatencySensitivity = ptrTo(uint8(4))
	in.ReportSessions.ReportSession["collector"].Config.Dscp = ptrTo(uint8(8))
	// New report session for the drop event, legacy removed.
	delete(in.ReportSessions.ReportSession, "legacy")
	rs := in.ReportSessions.GetOrCreateReportSession("drops")
	rc := rs.GetOrCreateConfig()
	rc.Name, rc.SourceAddress = ptrTo("drops"), ptrTo("192.0.2.1")
	cc := rs.GetOrCreateCollectors().GetOrCreateCollector("192.0.2.55", 4000).GetOrCreateConfig()
	cc.Address, cc.Port = ptrTo("192.0.2.55"), ptrTo(uint16(4000))
	in.Events.Event[gen.IntdInt_DtelEventType_DROP_REPORT].Config.ReportSession = ptrTo("drops")
	delete(in.Events.Event, gen.IntdInt_DtelEventType_FLOW_TCPFLAG)
	// Entry 10 moves to mx-probe and md-5 goes; entry 20 is recreated;
	// entry 30 goes; entry 40 comes.
	delete(in.IntSessions.IntSession, "md-5")
	in.Watchlist.Entries.Entry[10].Actions.Config.IntSession = ptrTo("mx-probe")
	in.Watchlist.Entries.Entry[20].Match.Config.DestinationPortMax = ptrTo(uint16(4790))
	delete(in.Watchlist.Entries.Entry, 30)
	e := in.Watchlist.Entries.GetOrCreateEntry(40)
	e.GetOrCreateConfig().SequenceId = ptrTo(uint32(40))
	e.GetOrCreateActions().GetOrCreateConfig().DropReport = ptrTo(true)
	qc := in.QueueReports.GetOrCreateQueueReport("eth0", 3).GetOrCreateConfig()
	qc.Interface, qc.QueueId, qc.TailDrop = ptrTo("eth0"), ptrTo(uint8(3)), ptrTo(true)
	return d
}

// TestRollbackAtEveryStep injects a failure at each operation of a
// multi-object change and checks that the backend is left exactly as it
// was, and that the orchestrator can go on.
func TestRollbackAtEveryStep(t *testing.T) {
	from, to := full(t), multiChange(t)
	o, b := newTest(t)
	mustApply(t, o, from)
	b.ResetLog()
	mustApply(t, o, to)
	total := len(b.Log())
	wantTo := canon(b)
	if total < 10 {
		t.Fatalf("change has only %d operations: %q", total, kinds(b.Log()))
	}
	t.Logf("change: %q", kinds(b.Log()))
	for n := 1; n <= total; n++ {
		o, b := newTest(t)
		mustApply(t, o, from)
		before, beforeSnap := canon(b), b.Snapshot()
		b.ResetLog()
		b.FailAt(n, errBoom)
		err := o.Apply(context.Background(), to)
		if !errors.Is(err, errBoom) || errors.Is(err, ErrInvalid) {
			t.Fatalf("step %d: Apply = %v, want the injected error", n, err)
		}
		if got := canon(b); got != before {
			t.Fatalf("step %d: backend changed:\n%s\n--- want\n%s\nops: %q", n, got, before, kinds(b.Log()))
		}
		// Only recreated objects may have new OIDs: those the
		// rollback removed and recreated.
		after := b.Snapshot()
		if len(after) != len(beforeSnap) {
			t.Fatalf("step %d: %d objects, want %d", n, len(after), len(beforeSnap))
		}
		objs, _ := applied(t, o, b) // the orchestrator's map is consistent
		if len(objs) != len(beforeSnap) {
			t.Fatalf("step %d: orchestrator tracks %d objects", n, len(objs))
		}
		checkRefcounts(t, o, b)
		// The previous configuration is still what State echoes.
		st, err := o.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.GetInt().GetIntSessions().GetIntSession("md-5") == nil {
			t.Errorf("step %d: State lost the previous configuration", n)
		}
		// And the change goes through once the backend accepts it.
		mustApply(t, o, to)
		if got := canon(b); got != wantTo {
			t.Fatalf("step %d: retry differs:\n%s\n--- want\n%s", n, got, wantTo)
		}
	}
}

// TestUndoFailure: when the backend also refuses the undo, Apply reports
// both errors, and the next Apply converges anyway.
func TestUndoFailure(t *testing.T) {
	o, b := newTest(t)
	mustApply(t, o, full(t))
	calls := 0
	b.FailWhen(func(op saitest.Op) error {
		calls++
		if calls >= 5 {
			return errBoom
		}
		return nil
	})
	err := o.Apply(context.Background(), multiChange(t))
	if err == nil || !errors.Is(err, errBoom) {
		t.Fatalf("Apply = %v", err)
	}
	b.FailWhen(nil)
	checkRefcounts(t, o, b)
	mustApply(t, o, multiChange(t))
	fo, fb := newTest(t)
	mustApply(t, fo, multiChange(t))
	if canon(b) != canon(fb) {
		t.Errorf("did not converge:\n%s\n---\n%s", canon(b), canon(fb))
	}
}

// checkRefcounts verifies the orchestrator's bookkeeping against the
// backend: every live instance exists with its attributes, and its
// reference count is the number of its referrers.
func checkRefcounts(t *testing.T, o *Orchestrator, b *saitest.Backend) {
	t.Helper()
	snap := b.Snapshot()
	if len(snap) != len(o.live) {
		t.Fatalf("backend holds %d objects, orchestrator %d", len(snap), len(o.live))
	}
	for inst := range o.live {
		a, ok := snap[inst.oid]
		if !ok {
			t.Fatalf("%v (%v) not in backend", inst.key, inst.oid)
		}
		if !equalAttrs(a, inst.resolved()) {
			t.Errorf("%v: backend %+v, orchestrator %+v", inst.key, a, inst.resolved())
		}
		if n := len(b.Referrers(inst.oid)); n != inst.users {
			t.Errorf("%v: %d referrers, refcount %d", inst.key, n, inst.users)
		}
	}
}

// TestLimits: at the backend's watchlist limit, recreation becomes
// break-before-make and deletions go first, instead of failing.
func TestLimits(t *testing.T) {
	caps := testCaps()
	caps.MaxWatchlistEntries = 3
	o, b := newTest(t, saitest.WithCapabilities(caps))
	mustApply(t, o, full(t))
	b.ResetLog()
	d := full(t)
	d.Int.Watchlist.Entries.Entry[10].Match.Config.SourcePrefix = ptrTo("10.0.3.0/24")
	mustApply(t, o, d)
	if got, want := kinds(b.Log()), []string{"remove watchlist entry", "create watchlist entry"}; !slices.Equal(got, want) {
		t.Errorf("recreate at the limit: %q, want %q", got, want)
	}
	// Replace one entry by another: the deletion goes first.
	b.ResetLog()
	d = full(t)
	e := d.Int.Watchlist.Entries.Entry[30]
	delete(d.Int.Watchlist.Entries.Entry, 30)
	e.SequenceId, e.Config.SequenceId = ptrTo(uint32(31)), ptrTo(uint32(31))
	d.Int.Watchlist.Entries.Entry[31] = e
	mustApply(t, o, d)
	if got, want := kinds(b.Log()), []string{"remove watchlist entry", "remove watchlist entry", "create watchlist entry", "create watchlist entry"}; !slices.Equal(got, want) {
		t.Errorf("replace at the limit: %q, want %q", got, want)
	}
	fo, fb := newTest(t, saitest.WithCapabilities(caps))
	mustApply(t, fo, d)
	if canon(b) != canon(fb) {
		t.Errorf("differs from a fresh Apply")
	}
	// Rollback still restores everything (31 -> 30 is two operations).
	for n := 1; n <= 2; n++ {
		before := canon(b)
		b.FailAt(n, errBoom)
		if err := o.Apply(context.Background(), full(t)); !errors.Is(err, errBoom) {
			t.Fatalf("step %d: %v", n, err)
		}
		if canon(b) != before {
			t.Fatalf("step %d: backend changed", n)
		}
	}
}

// TestBackendRefusal: a backend refusing valid-looking configuration with
// sai.ErrUnsupported yields ErrInvalid naming the configuration, after the
// rollback; other backend errors are not ErrInvalid and say which step
// failed.
func TestBackendRefusal(t *testing.T) {
	o, b := newTest(t)
	mustApply(t, o, full(t))
	before := canon(b)
	b.FailWhen(func(op saitest.Op) error {
		if op.Kind == saitest.OpCreate && op.Type == sai.ObjectTypeQueueReport {
			return sai.ErrUnsupported
		}
		return nil
	})
	err := o.Apply(context.Background(), multiChange(t))
	b.FailWhen(nil)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, sai.ErrUnsupported) {
		t.Fatalf("Apply = %v, want ErrInvalid wrapping sai.ErrUnsupported", err)
	}
	if want := "/int/queue-reports/queue-report[interface=eth0][queue-id=3]: the dataplane refused to create the queue report"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if canon(b) != before {
		t.Error("backend changed")
	}
	b.FailAt(1, errBoom)
	err = o.Apply(context.Background(), multiChange(t))
	if errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "dtel: step 1 of 13: create report session drops (/int/report-sessions/report-session[name=drops]): ") {
		t.Errorf("Apply = %v", err)
	}
}

// TestBackendRefusalOfAttr: a dataplane refusal naming the attribute at
// fault (a *sai.AttrError) is reported at that attribute's leaf.
func TestBackendRefusalOfAttr(t *testing.T) {
	o, b := newTest(t)
	b.FailWhen(func(op saitest.Op) error {
		if op.Kind == saitest.OpCreate && op.Type == sai.ObjectTypeDTel {
			return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: sai.AttrDTelTunnelAddress, Index: -1, Msg: "tunnels here are not supported", Err: sai.ErrUnsupported}
		}
		return nil
	})
	err := o.Apply(context.Background(), full(t))
	b.FailWhen(nil)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, sai.ErrUnsupported) {
		t.Fatalf("Apply = %v, want ErrInvalid wrapping sai.ErrUnsupported", err)
	}
	if want := "/int/node/config/tunnel-address: tunnels here are not supported by the dataplane"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

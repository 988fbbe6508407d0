package sai

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/sai/spec"
)

func testReportSession() ReportSessionAttrs {
	return ReportSessionAttrs{
		SrcIP:        netip.MustParseAddr("192.0.2.1"),
		Destinations: []ReportDestination{{IP: netip.MustParseAddr("192.0.2.9"), UDPPort: 32766}},
	}
}

func TestStoreReferences(t *testing.T) {
	s := NewStore(FullCapabilities(), nil)
	rs, err := s.Create(testReportSession())
	if err != nil {
		t.Fatal(err)
	}
	if rs != MakeOID(ObjectTypeReportSession, 1) {
		t.Errorf("first report session is %v", rs)
	}
	if _, err := s.Create(EventAttrs{Type: spec.EventDropReport, ReportSession: MakeOID(ObjectTypeReportSession, 7)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("event on a missing session: %v, want ErrNotFound", err)
	}
	ev, err := s.Create(EventAttrs{Type: spec.EventDropReport, ReportSession: rs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(EventAttrs{Type: spec.EventDropReport, ReportSession: rs}); !errors.Is(err, ErrExists) {
		t.Errorf("second drop event: %v, want ErrExists", err)
	}
	if _, err := s.Remove(rs); !errors.Is(err, ErrInUse) {
		t.Errorf("remove a referenced session: %v, want ErrInUse", err)
	}
	if got := s.Referrers(rs); len(got) != 1 || got[0] != ev {
		t.Errorf("referrers of %v = %v, want [%v]", rs, got, ev)
	}
	// Pointing the event elsewhere releases the first session.
	rs2, err := s.Create(testReportSession())
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Set(ev, EventAttrs{Type: spec.EventDropReport, ReportSession: rs2})
	if err != nil {
		t.Fatal(err)
	}
	if old.(EventAttrs).ReportSession != rs {
		t.Errorf("Set returned %+v, want the attributes it replaced", old)
	}
	if _, err := s.Remove(rs); err != nil {
		t.Errorf("remove a released session: %v", err)
	}
	if _, err := s.Remove(rs); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove twice: %v, want ErrNotFound", err)
	}
	if _, err := s.Set(ev, EventAttrs{Type: spec.EventDropReport, ReportSession: rs}); !errors.Is(err, ErrNotFound) {
		t.Errorf("set a reference to a removed session: %v, want ErrNotFound", err)
	}
	if _, err := s.Remove(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(rs2); err != nil {
		t.Errorf("remove after its referrer: %v", err)
	}
	if n := s.Len(ObjectTypeReportSession) + s.Len(ObjectTypeEvent); n != 0 {
		t.Errorf("%d objects left", n)
	}
	// OIDs are not reused.
	if rs3, _ := s.Create(testReportSession()); rs3 != MakeOID(ObjectTypeReportSession, 3) {
		t.Errorf("third report session is %v", rs3)
	}
}

func TestStoreUniqueAndLimits(t *testing.T) {
	caps := FullCapabilities()
	caps.MaxQueueReports = 2
	var checked []OID
	refuse := errors.New("refused by the backend")
	s := NewStore(caps, func(self OID, a Attrs) error {
		checked = append(checked, self)
		if q, ok := a.(QueueReportAttrs); ok && q.Port == "bad" {
			return refuse
		}
		return nil
	})
	if _, err := s.Create(DefaultDTelAttrs()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(DefaultDTelAttrs()); !errors.Is(err, ErrExists) {
		t.Errorf("second DTel object: %v, want ErrExists", err)
	}
	q := QueueReportAttrs{Port: "eth0", LatencyThreshold: time.Microsecond, BreachQuota: 1}
	q1, err := s.Create(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(q); !errors.Is(err, ErrExists) {
		t.Errorf("same port and queue: %v, want ErrExists", err)
	}
	q.Port = "bad"
	if _, err := s.Create(q); !errors.Is(err, refuse) {
		t.Errorf("backend check: %v, want %v", err, refuse)
	}
	q.Port = "eth1"
	if _, err := s.Create(q); err != nil {
		t.Fatal(err)
	}
	q.Port = "eth2"
	if _, err := s.Create(q); !errors.Is(err, ErrUnsupported) {
		t.Errorf("third queue report with a limit of 2: %v, want ErrUnsupported", err)
	}
	q.Port = "eth0"
	q.BreachQuota = 5
	if _, err := s.Set(q1, q); err != nil {
		t.Errorf("set its own key: %v", err)
	}
	if checked[len(checked)-1] != q1 {
		t.Errorf("the backend check saw self %v on Set, want %v", checked[len(checked)-1], q1)
	}
	q.Port = "eth1"
	if _, err := s.Set(q1, q); !errors.Is(err, ErrCreateOnly) {
		t.Errorf("move to another port: %v, want ErrCreateOnly", err)
	}
	if _, err := s.Create(QueueReportAttrs{Port: "eth3"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid attributes: %v, want ErrInvalid", err)
	}
	noQueues := FullCapabilities()
	noQueues.QueueReport = false
	if _, err := NewStore(noQueues, nil).Create(q); !errors.Is(err, ErrUnsupported) {
		t.Errorf("queue report without the capability: %v, want ErrUnsupported", err)
	}
	if oid, a, ok := s.First(ObjectTypeDTel); !ok || oid != MakeOID(ObjectTypeDTel, 1) || a.ObjectType() != ObjectTypeDTel {
		t.Errorf("First(DTel) = %v, %v, %v", oid, a, ok)
	}
	stored, _ := s.Get(q1)
	if stored.(QueueReportAttrs).BreachQuota != 5 {
		t.Errorf("Get after Set = %+v", stored)
	}
}

func TestStoreNewStats(t *testing.T) {
	s := NewStore(FullCapabilities(), nil)
	rs, _ := s.Create(testReportSession())
	qr, err := s.Create(QueueReportAttrs{Port: "eth0", TailDrop: true, BreachQuota: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := s.NewStats()
	if _, ok := st.ReportSessions[rs]; !ok || len(st.ReportSessions) != 1 {
		t.Errorf("report sessions %v, want an entry for %v", st.ReportSessions, rs)
	}
	if _, ok := st.QueueReports[qr]; !ok || len(st.QueueReports) != 1 {
		t.Errorf("queue reports %v, want an entry for %v", st.QueueReports, qr)
	}
	if len(st.Watchlist)+len(st.IntSessions) != 0 || st.Interfaces == nil || st.Drops == nil || st.Reports == nil {
		t.Errorf("NewStats() = %+v", st)
	}
}

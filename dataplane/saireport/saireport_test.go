package saireport

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

func TestConfig(t *testing.T) {
	dt := sai.DefaultDTelAttrs()
	dt.SwitchID, dt.HWID, dt.DropReportEnable = 7, 9, true
	dt.FlowReport.HopLatencyChange = 300 * time.Nanosecond
	rs := sai.DefaultReportSessionAttrs()
	rs.SrcIP = netip.MustParseAddr("192.0.2.1")
	rs.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("192.0.2.9"), UDPPort: 9999}}
	rsOID := sai.MakeOID(sai.ObjectTypeReportSession, 1)
	objs := map[sai.OID]sai.Attrs{
		rsOID:                               rs,
		sai.MakeOID(sai.ObjectTypeEvent, 1): sai.EventAttrs{Type: spec.EventDropReport, ReportSession: rsOID, DSCP: 26},
		sai.MakeOID(sai.ObjectTypeQueueReport, 1): sai.QueueReportAttrs{Port: "eth2", Queue: 1,
			LatencyThreshold: 10 * time.Microsecond, ResetThreshold: 5 * time.Microsecond, BreachQuota: 5},
	}
	seq := func(yield func(sai.OID, sai.Attrs) bool) {
		for k, v := range objs {
			if !yield(k, v) {
				return
			}
		}
	}
	cfg := Config(&dt, seq, func(name string) uint16 {
		if name == "eth2" {
			return 42
		}
		return 0
	})
	if cfg.NodeID != 7 || cfg.HWID != 9 || !cfg.DropReports || cfg.Filter.HopLatencyChange != 300 {
		t.Errorf("node settings: %+v", cfg)
	}
	if len(cfg.Sessions) != 1 || cfg.Sessions[0].Name != rsOID.String() ||
		cfg.Sessions[0].Collectors[0].Addr != netip.MustParseAddrPort("192.0.2.9:9999") {
		t.Errorf("sessions: %+v", cfg.Sessions)
	}
	if r := cfg.Events[spec.EventDropReport]; r.Session != rsOID.String() || r.DSCP != 26 {
		t.Errorf("drop event route: %+v", r)
	}
	if len(cfg.Queues) != 1 || cfg.Queues[0].Port != 42 || cfg.Queues[0].LatencyThreshold != 10000 || cfg.Queues[0].ResetThreshold != 5000 {
		t.Errorf("queues: %+v", cfg.Queues)
	}
}

func TestReportCounters(t *testing.T) {
	var ps report.Stats
	ps.ByType[spec.EventFlowState] = report.Counters{Generated: 5, Suppressed: 3, Sent: 2}
	ps.ByType[spec.EventFlowTCPFlag] = report.Counters{Generated: 1, Sent: 1}
	ps.ByType[spec.EventQueueReportTailDrop] = report.Counters{Generated: 4, Dropped: 4}
	ps.ByType[spec.EventQueueReportThresholdBreach] = report.Counters{Generated: 9, Sent: 9}
	got := ReportCounters(ps)
	want := map[sai.ReportType]sai.ReportCounters{
		sai.ReportFlow:  {Generated: 6, Suppressed: 3, Sent: 3},
		sai.ReportDrop:  {Generated: 4, Dropped: 4},
		sai.ReportQueue: {Generated: 9, Sent: 9},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%v: got %+v, want %+v", k, got[k], w)
		}
	}
}

type noRawSocket struct{}

func (noRawSocket) Report(*report.Event)   {}
func (noRawSocket) SourcePorts(bool) error { return errors.New("no raw socket") }

// A report session asking for a chosen source port is refused, naming
// the attribute, when the reporter cannot send from one.
func TestCheckReportSession(t *testing.T) {
	a := sai.DefaultReportSessionAttrs()
	a.SrcIP = netip.MustParseAddr("192.0.2.1")
	if err := CheckReportSession(noRawSocket{}, a); err != nil {
		t.Errorf("kernel source port: %v", err)
	}
	a.SrcPort = sai.SrcPorts{Mode: sai.SrcPortFlowHash, Min: 1000, Max: 2000}
	var ae *sai.AttrError
	err := CheckReportSession(noRawSocket{}, a)
	if !errors.As(err, &ae) || ae.Attr != sai.AttrReportSessionSrcPortMode || !errors.Is(err, sai.ErrUnsupported) || !strings.Contains(err.Error(), "no raw socket") {
		t.Errorf("flow-hash source port without raw socket: %v", err)
	}
}

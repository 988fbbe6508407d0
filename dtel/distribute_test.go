package dtel

import (
	"testing"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

// TestCollectorSelection maps collector-selection onto the session's
// DistributeByFlow.
func TestCollectorSelection(t *testing.T) {
	for _, tc := range []struct {
		sel  gen.E_IntdInt_CollectorSelection
		want bool
	}{{gen.IntdInt_CollectorSelection_UNSET, false}, {gen.IntdInt_CollectorSelection_REPLICATE, false}, {gen.IntdInt_CollectorSelection_FLOW_HASH, true}} {
		rs := &gen.IntdInt_Int_ReportSessions_ReportSession{Config: &gen.IntdInt_Int_ReportSessions_ReportSession_Config{
			SourceAddress: ygot.String("192.0.2.1"), CollectorSelection: tc.sel}}
		a, err := reportSession("/int/report-sessions/report-session[name=r]", rs)
		if err != nil {
			t.Fatal(err)
		}
		if a.DistributeByFlow != tc.want {
			t.Errorf("%v: DistributeByFlow = %v", tc.sel, a.DistributeByFlow)
		}
	}
}

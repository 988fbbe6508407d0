package saitest_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/sai/spec"
)

// A rollback test: the second step of a change fails, the code under test
// undoes the first, and the backend ends where it started.
func Example_rollback() {
	b := saitest.New()
	rs := sai.DefaultReportSessionAttrs()
	rs.SrcIP = netip.MustParseAddr("10.0.0.1")
	rs.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("10.0.9.9"), UDPPort: 32766}}
	rsOID, _ := b.Create(rs)
	before := b.Snapshot().Canonical()

	b.FailAt(2, errors.New("injected"))
	evOID, _ := b.Create(sai.EventAttrs{Type: spec.EventDropReport, ReportSession: rsOID})
	if _, err := b.Create(sai.EventAttrs{Type: spec.EventFlowState, ReportSession: rsOID}); err != nil {
		_ = b.Remove(evOID) // roll back
	}

	fmt.Println(fmt.Sprint(b.Snapshot().Canonical()) == fmt.Sprint(before))
	for _, op := range b.Log()[1:] {
		fmt.Println(op.Kind, op.Type, op.OID, op.Err != nil)
	}
	// Output:
	// true
	// create event event:1 false
	// create event null true
	// remove event event:1 false
}

package collector

import (
	"testing"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/internal/reporttest"
)

// TestFlowCountIsTableSize checks that flow-count is the flow table's
// size when fewer flows are exported.
func TestFlowCountIsTableSize(t *testing.T) {
	c := collector.New(collector.Config{})
	for i := 0; i < 3; i++ {
		f := reporttest.Flow{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Proto: 17, SrcPort: uint16(1000 + i), DstPort: 2000}
		c.HandlePacket(reporttest.Group(uint32(i), reporttest.MDFrame(t, f, reporttest.Hop{Node: 1}), 100), 1)
	}
	d := Tree(c.Snapshot(1))
	if got := d.GetCollector().GetState().GetFlowCount(); got != 3 {
		t.Errorf("flow-count = %d, want 3", got)
	}
	if n := len(d.GetCollector().GetFlows().Flow); n != 1 {
		t.Errorf("%d flows exported, want 1", n)
	}
}

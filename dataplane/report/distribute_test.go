package report

import (
	"net/netip"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// TestDistributeByFlow sends every packet of 200 flows through two
// "nodes" whose session lists three collectors in different orders and
// distributes by flow: each flow's reports, from both nodes, land at one
// collector, every collector gets flows, and each collector's sequence
// numbers have no gap.
func TestDistributeByFlow(t *testing.T) {
	coll3 := netip.AddrPortFrom(coll2.Addr(), coll2.Port()+1)
	orders := [][]Collector{{{coll1}, {coll2}, {coll3}}, {{coll3}, {coll1}, {coll2}}}
	owner := map[int]any{}
	perColl := map[any]int{}
	for node, order := range orders {
		cfg := baseConfig(4)
		cfg.NodeID = uint32(node + 1)
		cfg.Sessions[0].Collectors = order
		cfg.Sessions[0].DistributeByFlow = true
		p, c := newTest(t, cfg)
		var ev Event
		for i := 0; i < 200; i++ {
			f := newFrame(i, []uint32{1, 2}, []uint32{10, 20})
			for k := 0; k < 3; k++ {
				f.setID(i, uint32(k))
				f.event(&ev, int64(k), 10)
				ev.ReportAll = true
				p.Report(&ev)
			}
		}
		seqs := map[any]uint32{}
		for _, d := range finish(t, p, c) {
			flow, _, ok := innerID(d.inner, 2)
			if !ok {
				t.Fatal("inner frame truncated")
			}
			dst := d.pkt.Dst
			if o, seen := owner[flow]; seen && o != dst {
				t.Fatalf("node %d: flow %d reported to %v and %v", node+1, flow, o, dst)
			}
			owner[flow] = dst
			perColl[dst]++
			if last, ok := seqs[dst]; ok && d.group.Seq != last && d.group.Seq != last+1 {
				t.Errorf("node %d collector %v: sequence %d after %d", node+1, dst, d.group.Seq, last)
			}
			seqs[dst] = d.group.Seq
		}
		st := p.Stats().ByType[spec.EventFlowReportAllPackets]
		if st.Sent != 600 {
			t.Errorf("node %d: %d reports sent, want 600 (one per packet, not per collector)", node+1, st.Sent)
		}
	}
	if len(owner) != 200 || len(perColl) != 3 {
		t.Fatalf("%d flows over %d collectors", len(owner), len(perColl))
	}
	for c, n := range perColl {
		if n < 200 { // 1200 reports over 3: about 400 each
			t.Errorf("collector %v got %d reports", c, n)
		}
	}
}

func TestJumpHash(t *testing.T) {
	// Growing from 3 to 4 buckets moves only keys to the new bucket.
	moved := 0
	for k := uint64(0); k < 10000; k++ {
		a, b := jumpHash(k*0x9e3779b97f4a7c15, 3), jumpHash(k*0x9e3779b97f4a7c15, 4)
		if a != b {
			if b != 3 {
				t.Fatalf("key %d moved from %d to %d", k, a, b)
			}
			moved++
		}
	}
	if moved < 2000 || moved > 3000 {
		t.Errorf("%d of 10000 keys moved, want about 2500", moved)
	}
}

package collector_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/reporttest"
)

// TestJSONLines: every report of a packet becomes one line carrying the
// group header and that report, and Close writes what is still buffered
// (the interval is far longer than the test).
func TestJSONLines(t *testing.T) {
	c := collector.New(collector.Config{})
	var out bytes.Buffer
	jl := collector.WriteJSONLines(c, &out, time.Hour)
	f := reporttest.MDFrame(t, reporttest.Flow{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Proto: wire.ProtoUDP, SrcPort: 1111, DstPort: 2222},
		reporttest.Hop{Node: 3, Latency: 300, Queue: 3}, reporttest.Hop{Node: 2, Latency: 200, Queue: 2}, reporttest.Hop{Node: 1, Latency: 100, Queue: 1})
	c.HandlePacket(reporttest.Group(77, f, 400, reporttest.Drop(132)), time.Now().UnixNano())
	c.Do(func() {
		if out.Len() != 0 {
			t.Errorf("%d bytes written before a flush", out.Len())
		}
	})
	if err := jl.Close(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	var lines []collector.ReportJSON
	for sc.Scan() {
		var l struct {
			Report collector.ReportJSON `json:"report"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l.Report)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (flow and drop report):\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		if l.Version != 2 || l.Sequence != 77 || l.NodeID != 4 || len(l.Reports) != 1 {
			t.Errorf("line %d: %+v, want version 2, sequence 77, node 4 and one report", i, l)
		}
	}
	if r := lines[0].Reports[0]; !r.F || r.Inner == nil || r.Inner.INT == nil || len(r.Inner.INT.Hops) != 3 || r.Inner.INT.Hops[0].NodeID == nil || *r.Inner.INT.Hops[0].NodeID != 3 {
		t.Errorf("flow report %+v, want the 3-hop stack from node 3 down", r)
	}
	if r := lines[1].Reports[0]; !r.D || r.DropReason == nil || *r.DropReason != 132 {
		t.Errorf("drop report %+v, want reason 132", r)
	}
}

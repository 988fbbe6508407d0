//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/spec"
)

// queueConfig: INT-MD (node id, hop latency, queue, timestamps) on UDP to
// port 9000, postcards for every packet to port 9001, queue reports on s2
// above 20 ms.
var queueConfig = `{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "int-transit": true,
		"postcard": true, "queue-report": true}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63}},
	"int-sessions": {"int-session": [{"name": "md", "config": {"name": "md", "mode": "INT_MD",
		"instructions": ` + wiretest.InstructionsJSON(spec.InstAll&^spec.InstChecksumComplement) + `, "remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0"},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "c"}},
		{"type": "QUEUE_REPORT_THRESHOLD_BREACH", "config": {"type": "QUEUE_REPORT_THRESHOLD_BREACH", "report-session": "c"}}]},
	"queue-reports": {"queue-report": [{"interface": "s2", "queue-id": 0,
		"config": {"interface": "s2", "queue-id": 0, "latency-threshold": 20000000}}]},
	"watchlist": {"entries": {"entry": [
		{"sequence-id": 10, "config": {"sequence-id": 10},
		"match": {"config": {"destination-prefix": "10.2.0.0/16", "protocol": 17, "destination-port-min": 9000, "destination-port-max": 9000}},
		"actions": {"config": {"flow-op": "INT", "int-session": "md", "sample-percent": 100}}},
		{"sequence-id": 20, "config": {"sequence-id": 20},
		"match": {"config": {"destination-prefix": "10.2.0.0/16", "protocol": 17, "destination-port-min": 9001, "destination-port-max": 9001}},
		"actions": {"config": {"flow-op": "POSTCARD", "int-session": "md", "sample-percent": 100, "report-all-packets": true}}}]}}
}}`

// eventLog keeps copies of report events.
type eventLog struct {
	mu  sync.Mutex
	evs []report.Event
}

func (r *eventLog) Report(ev *report.Event) {
	e := *ev
	e.Packet = nil
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

// applyConfig configures sw through the dtel orchestrator from YANG JSON.
func applyConfig(t *testing.T, sw *soft.Switch, cfgJSON string) {
	t.Helper()
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(cfgJSON), dev); err != nil {
		t.Fatal(err)
	}
	if err := dtel.New(sw).Apply(context.Background(), dev); err != nil {
		t.Fatal(err)
	}
}

// runNode runs node until the returned function stops it.
func runNode(t *testing.T, node *Node) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestQueueMetadataSoft is the eBPF dataplane's TestQueueMetadata for the
// software switch, with real frames through AF_PACKET ports: s2 is shaped
// below the offered load (as afpacket.New shapes a port with a tbf root
// qdisc: the switch's own egress queue at the tbf's rate and limit), and
// its standing queue must show in the INT-MD hop leaving s2 (occupancy
// growing, hop latency), in the postcards' egress time and in breach
// reports, within 20 % of what the queue's backlog / rate predicts.
func TestQueueMetadataSoft(t *testing.T) {
	const (
		rate     = 8e6
		offered  = 12e6
		size     = 1000
		limit    = 60000
		duration = 1500 * time.Millisecond
	)
	ph1, ph2, ps1, ps2 := twoLinks(t, PortConfig{})
	rec := &eventLog{}
	sw, err := soft.New(soft.Config{Name: "s", Reporter: rec, Ports: []soft.PortConfig{
		{Name: "s1", MAC: ps1.MAC}, {Name: "s2", MAC: ps2.MAC, Rate: rate, QueueBytes: limit}},
		Routes: []soft.Route{{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Ports: []string{"s2"}, NextHopMAC: ph2.MAC}}})
	if err != nil {
		t.Fatal(err)
	}
	applyConfig(t, sw, queueConfig)
	node, err := NewNode(sw, []*Port{ps1, ps2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer runNode(t, node)()

	// h2 keeps what arrives; the backlog of s2's queue is sampled.
	type sample struct {
		at      time.Time
		backlog int
	}
	var samples []sample
	var got [][]byte
	recvDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			got = append(got, readAll(t, ph2, 1<<20, 10*time.Millisecond)...)
			samples = append(samples, sample{time.Now(), sw.QueueBytes(1)})
		}
	}()
	frame := func(dport uint16) []byte {
		f := udpFrame(ps1.MAC, ph1.MAC, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1"), make([]byte, size))
		binary.BigEndian.PutUint16(f[14+20+2:], dport)
		return f
	}
	frames := [][]byte{frame(9000), frame(9001)}
	perPkt := time.Duration(int64(time.Second) * (size + 42) * 8 / offered)
	start := time.Now()
	for sent := 0; time.Since(start) < duration; time.Sleep(time.Millisecond) {
		for due := int(time.Since(start) / perPkt); sent < due; sent++ {
			ph1.Transmit(frames[sent%2])
		}
		ph1.Flush()
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-recvDone

	steady := start.Add(duration / 2)
	var bl []float64
	for _, s := range samples {
		if s.at.After(steady) && s.at.Before(start.Add(duration)) {
			bl = append(bl, float64(s.backlog))
		}
	}
	want := wiretest.Median(bl) * 8 / rate * 1e9
	if want < 20e6 {
		t.Fatalf("no standing queue: the backlog predicts %.1f ms", want/1e6)
	}
	within := func(what string, got float64) {
		t.Helper()
		if got < want*0.8 || got > want*1.2 {
			t.Errorf("%s %.1f ms, the backlog predicts %.1f ms (not within 20 %%)", what, got/1e6, want/1e6)
		} else {
			t.Logf("%s %.1f ms, the backlog predicts %.1f ms", what, got/1e6, want/1e6)
		}
	}

	// INT-MD: the hop s added, in the frames h2 got.
	pr := &wire.Parser{DSCP: 23, DSCPMask: 63}
	var mdLat, mdOcc []float64
	var firstOcc, maxOcc uint32
	n := 0
	for _, f := range got {
		var p wire.Packet
		if pr.Parse(f, &p) != nil || p.INT < 0 {
			continue
		}
		b := f[p.INT : p.INT+p.INTLen]
		_, st, err := wire.DecodeMD(b, 0)
		if err != nil || st.Count() != 1 {
			continue
		}
		var m wire.HopMetadata
		inst := wire.Instructions(uint16(b[4])<<8 | uint16(b[5]))
		if wire.DecodeHop(st.Hop(0), inst, &m) != nil {
			continue
		}
		// The metadata semantics say what is produced: those fields have
		// values (once the queue is steady), the others are always all ones.
		steadyHop := time.Unix(0, int64(m.EgressTimestamp)).After(steady)
		if u, want := wiretest.Unavailable(st.Hop(0), inst), inst&^wire.Instructions(sw.Capabilities().Produced()); u&want != want || steadyHop && u != want {
			t.Fatalf("INT-MD hop %d: fields %v all ones, the metadata semantics say %v", n, u, want)
		}
		if n == 0 {
			firstOcc = m.QueueOccupancy
		}
		n++
		maxOcc = max(maxOcc, m.QueueOccupancy)
		if steadyHop {
			mdLat = append(mdLat, float64(m.HopLatency))
			mdOcc = append(mdOcc, float64(m.QueueOccupancy))
		}
	}
	t.Logf("INT-MD: %d hops, occupancy %d first, %d max, %.0f median in the steady state (backlog %.0f)",
		n, firstOcc, maxOcc, wiretest.Median(mdOcc), wiretest.Median(bl))
	if len(mdLat) < 10 {
		t.Fatalf("INT-MD: %d hops in the steady state (%d frames at h2)", len(mdLat), len(got))
	}
	if firstOcc >= maxOcc/4 {
		t.Errorf("INT-MD occupancy did not grow with the queue: first %d, max %d", firstOcc, maxOcc)
	}
	if o, b := wiretest.Median(mdOcc), wiretest.Median(bl); o < b*0.8 || o > b*1.2 {
		t.Errorf("INT-MD occupancy %.0f bytes, backlog %.0f", o, b)
	}
	within("INT-MD hop latency", wiretest.Median(mdLat))

	rec.mu.Lock()
	evs := slices.Clone(rec.evs)
	rec.mu.Unlock()
	var xd []float64
	var qrs, qrBreach int
	for _, ev := range evs {
		switch ev.Kind {
		case report.KindFlow:
			if ev.Flow.DstPort == 9001 && time.Unix(0, int64(ev.Hop.EgressTimestamp)).After(steady) {
				xd = append(xd, float64(ev.Hop.EgressTimestamp-ev.Hop.IngressTimestamp))
			}
		case report.KindQueue:
			// Soft hands every packet of the queue to the pipeline,
			// which applies the threshold: count those above it.
			qrs++
			if ev.Hop.HopLatency >= 20_000_000 {
				qrBreach++
			}
		}
	}
	if len(xd) < 10 {
		t.Fatalf("INT-XD: %d postcards in the steady state", len(xd))
	}
	within("INT-XD egress - ingress time", wiretest.Median(xd))
	st, err := sw.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var breaches, reports uint64
	for _, q := range st.QueueReports {
		breaches, reports = breaches+q.Breaches, reports+q.Reports
	}
	t.Logf("queue events %d, %d above the threshold; breaches %d, reports %d", qrs, qrBreach, breaches, reports)
	if breaches == 0 || reports == 0 || qrBreach == 0 {
		t.Errorf("no queue reports: breaches %d, reports %d, %d events above the threshold", breaches, reports, qrBreach)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/collector/stream"
	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/natstest"
)

// kill stops a collector as a killed process would: no last summaries,
// no waiting for acknowledgements.
func (s *service) kill() {
	s.closeReceivers()
	if s.pub != nil {
		s.pub.Abort()
	}
	if s.metrics != nil {
		s.metrics.Close()
	}
	s.wg.Wait()
}

// TestFleetJetStream runs the in-process lab (three soft switches s1, s2,
// s3) reporting to two collectors that share one report session by flow
// hash, each publishing to a 3-server JetStream cluster (stream with 3
// replicas). Every flow's reports land at one collector. Mid-run one
// collector is killed and restarted on its port, and the NATS server
// leading the stream is killed: the collectors' publishing rides out the
// election of a new leader (re-sending what was not acknowledged), every
// message JetStream acknowledged is in the stream at the end, and
// `intcollector query` answers which flows went through s2 above a
// latency from the stream.
func TestFleetJetStream(t *testing.T) {
	cl := natstest.Start(t, 3)
	var mu sync.Mutex
	acked := map[string]bool{}
	onAck := func(id string) { mu.Lock(); acked[id] = true; mu.Unlock() }
	// stop stops a collector once, cleanly or not.
	stopped := map[*service]bool{}
	stop := func(s *service, kill bool) {
		if stopped[s] {
			return
		}
		stopped[s] = true
		if kill {
			s.kill()
		} else {
			s.stop()
		}
	}
	startCollector := func(id, listen string) (*collector.Collector, *service) {
		c := collector.New(collector.Config{})
		s, err := start(c, &serveConfig{listen: listen, metrics: "127.0.0.1:0", stream: stream.Config{URLs: cl.URLs(), Replicas: 3,
			CollectorID: id, SummaryInterval: 100 * time.Millisecond, CongestionWindow: 100 * time.Millisecond, OnAck: onAck}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(s, false) })
		return c, s
	}
	cA, sA := startCollector("a1", "127.0.0.1:0")
	cB, sB := startCollector("b", "127.0.0.1:0")

	flows := lab.DefaultFlows("h1", "h2")
	flows[1].Duration = 250 * time.Millisecond // the bursts congest s2 early on
	for i := 0; i < 14; i++ {
		flows = append(flows, lab.Flow{Name: fmt.Sprintf("f%d", i), From: "h1", To: "h2", Proto: wire.ProtoUDP,
			SrcPort: uint16(41000 + i), DstPort: 6000, Size: 200, PPS: 200})
	}
	clk := soft.NewManualClock(1_700_000_000_000_000_000)
	l, err := lab.New(lab.Options{Clock: clk, Collector: sA.reports, MoreCollectors: []string{sB.reports}, DistributeByFlow: true, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	run := func(d time.Duration) {
		for end := clk.Now() + int64(d); clk.Now() < end; {
			l.RunUntil(min(end, clk.Now()+int64(2*time.Millisecond)))
			time.Sleep(time.Millisecond)
		}
	}
	settle := func(cs ...*collector.Collector) {
		var last uint64
		for i := 0; i < 100; i++ {
			time.Sleep(20 * time.Millisecond)
			var n uint64
			for _, c := range cs {
				n += c.Snapshot(1).Counters.Packets
			}
			if n != 0 && n == last {
				return
			}
			last = n
		}
	}
	keys := make([]wire.FlowKey, len(flows))
	for i, f := range flows {
		k, ok := l.FlowKey(f.Name)
		if !ok {
			t.Fatalf("flow %s has no key", f.Name)
		}
		keys[i] = k
	}

	run(300 * time.Millisecond)
	settle(cA, cB)
	// Every flow is at exactly one collector, and both have flows.
	owners := map[string]int{}
	for i, k := range keys {
		_, inA := cA.Flow(k)
		_, inB := cB.Flow(k)
		if inA == inB {
			t.Fatalf("flow %s: at collector a %v, at collector b %v", flows[i].Name, inA, inB)
		}
		if inA {
			owners["a"]++
		} else {
			owners["b"]++
		}
	}
	if owners["a"] == 0 || owners["b"] == 0 {
		t.Fatalf("flows per collector %v", owners)
	}
	t.Logf("flows per collector %v", owners)

	// Kill collector a and one NATS server; s2 drops packets for a while.
	stop(sA, true)
	before := cA.Snapshot(0).Flows // what a had handled when it died
	elected := killLeader(t, cl)
	if err := l.Switch("s2").SetRoutes(nil); err != nil {
		t.Fatal(err)
	}
	run(20 * time.Millisecond)
	if err := l.Reroute(); err != nil {
		t.Fatal(err)
	}
	run(100 * time.Millisecond)
	cA2, sA2 := startCollector("a2", sA.reports)
	// Past the flows' 1 s report interval: every flow reports again.
	run(1200 * time.Millisecond)
	settle(cA2, cB)
	l.Close()
	settle(cA2, cB)
	for _, n := range []string{"s1", "s2", "s3"} {
		st, _ := l.Switch(n).Stats(context.Background())
		t.Logf("%s: %+v", n, st.ReportSessions)
	}
	for _, c := range []*collector.Collector{cA, cA2, cB} {
		n := c.Snapshot(1).Counters
		t.Logf("collector: packets %d reports %d congestion %d drops %d flows %d", n.Packets, n.Reports, n.Congestion, n.Drops, n.FlowsCreated)
	}
	stop(sA2, false)
	stop(sB, false)
	var resent uint64
	for _, s := range []*service{sA2, sB} {
		n := s.pub.Counters()
		t.Logf("collector %s publisher: %+v", s.reports, n)
		if n.Failed != 0 || n.Acked != n.Published {
			t.Errorf("collector %s: %+v", s.reports, n)
		}
		resent += n.Retried
	}
	// The drop events right after the kill met no leader.
	if resent == 0 {
		t.Error("no message was re-sent: publishing never waited for the new stream leader")
	}
	if d := <-elected; d < 0 {
		t.Fatal("no new stream leader 2 minutes after its server was killed")
	} else {
		t.Logf("a new stream leader was elected %v after its server was killed", d)
	}

	// Every acknowledged message is in the stream.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js, err := stream.Connect(cl.URLs(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inStream := map[string]bool{}
	events := map[string]map[string]stream.EventMessage{} // by kind and message ID
	// Every message, read one by one from the stream's leader.
	st, info := streamInfo(ctx, t, js)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if inStream[id] {
			t.Errorf("message %s is in the stream twice (a re-sent message stored again)", id)
		}
		inStream[id] = true
		if strings.Contains(m.Subject, ".event.") {
			var e stream.EventMessage
			if err := json.Unmarshal(m.Data, &e); err != nil {
				t.Fatal(err)
			}
			if events[e.Kind] == nil {
				events[e.Kind] = map[string]stream.EventMessage{}
			}
			events[e.Kind][id] = e
		}
	}
	mu.Lock()
	lost, byCollector := 0, map[string]int{}
	for id := range acked {
		byCollector[id[:strings.IndexByte(id, '-')]]++
		if !inStream[id] {
			lost++
		}
	}
	mu.Unlock()
	t.Logf("acknowledged messages per collector %v, %d in the stream, events %d drop %d congestion %d latency %d path-change",
		byCollector, len(inStream), len(events["drop"]), len(events["congestion"]), len(events["latency"]), len(events["path-change"]))
	if lost != 0 {
		t.Errorf("%d acknowledged messages are not in the stream", lost)
	}
	for _, c := range []string{"a1", "a2", "b"} {
		if byCollector[c] == 0 {
			t.Errorf("no acknowledged message from collector %s", c)
		}
	}
	drop2 := false
	for _, e := range events["drop"] {
		drop2 = drop2 || e.Node == 2 && e.DropReasonName == "ROUTING_MISS"
	}
	cong2 := false
	for _, e := range events["congestion"] {
		cong2 = cong2 || e.Node == 2 && len(e.Culprits) > 0
	}
	if !drop2 || !cong2 {
		t.Errorf("routing-miss drop events at s2: %v, congestion events at s2 with culprits: %v", drop2, cong2)
	}

	// After the restart too, each flow is at one collector.
	after := append(cA2.Snapshot(0).Flows, cB.Snapshot(0).Flows...)
	at := map[wire.FlowKey]int{}
	for _, f := range after {
		if at[f.Key]++; at[f.Key] > 1 {
			t.Errorf("flow %v at both a2 and b", f.Key)
		}
	}

	// The query: flows through s2 above a bound in the last 10 minutes,
	// the bound the median of the flows' largest latencies, so that it
	// splits them. It must name every flow the running collectors saw
	// above the bound, and no flow no collector ever saw above it.
	var maxima []uint64
	for _, f := range append(before, after...) {
		maxima = append(maxima, f.E2E.Max)
	}
	slices.Sort(maxima)
	above := maxima[len(maxima)/2]
	must, seen := map[wire.FlowKey]bool{}, map[wire.FlowKey]bool{}
	for i, f := range append(before, after...) {
		if f.E2E.Max > above && hasNode(&f, 2) {
			seen[f.Key] = true
			if i >= len(before) {
				must[f.Key] = true
			}
		}
	}
	var out, errOut bytes.Buffer
	began := time.Now()
	defer func() { t.Logf("query took %v", time.Since(began)) }()
	if code := queryMain([]string{"-nats", cl.URLs(), "-node", "2", "-latency-above", fmt.Sprintf("%dns", above), "-since", "10m", "-timeout", "60s"}, &out, &errOut); code != 0 {
		t.Fatalf("query exited %d: %s", code, errOut.String())
	}
	got := map[wire.FlowKey]bool{}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r stream.FlowResult
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.MaxLatency <= above {
			t.Errorf("query: %+v is not above the bound", r)
		}
		got[keyOf(t, r.Flow)] = true
	}
	t.Logf("query: %d flows above %d ns through s2 (%d must, %d may, of %d)", len(got), above, len(must), len(seen), len(keys))
	if len(must) == 0 || len(got) == len(keys) {
		t.Fatalf("the bound %d ns does not split the flows: %v", above, maxima)
	}
	for k := range must {
		if !got[k] {
			t.Errorf("query misses flow %v", k)
		}
	}
	for k := range got {
		if !seen[k] {
			t.Errorf("query names flow %v, never above the bound", k)
		}
	}
}

// killLeader kills the server leading the stream and returns a channel
// that gets how long the others took to elect a new leader.
func killLeader(t *testing.T, cl *natstest.Cluster) <-chan time.Duration {
	nc, js, err := stream.Connect(cl.URLs(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, info := streamInfo(ctx, t, js)
	s := cl.Server(info.Cluster.Leader)
	if s == nil {
		t.Fatalf("stream leader %q is none of the servers", info.Cluster.Leader)
	}
	s.Kill()
	killed := time.Now()
	t.Logf("killed nats-server %s, the stream's leader", s.Name)
	out := make(chan time.Duration, 1)
	go func() {
		defer nc.Close()
		for time.Since(killed) < 2*time.Minute {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := js.Stream(ctx, stream.DefaultStream)
			if err == nil {
				var info *jetstream.StreamInfo
				if info, err = st.Info(ctx); err == nil && info.Cluster.Leader != "" && info.Cluster.Leader != s.Name {
					cancel()
					out <- time.Since(killed)
					return
				}
			}
			cancel()
			time.Sleep(100 * time.Millisecond)
		}
		out <- -1
	}()
	return out
}

// streamInfo is the stream the collectors publish to, and its state.
func streamInfo(ctx context.Context, t *testing.T, js jetstream.JetStream) (jetstream.Stream, *jetstream.StreamInfo) {
	t.Helper()
	st, err := js.Stream(ctx, stream.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, info
}

func hasNode(f *collector.FlowState, node uint32) bool {
	for i := 0; i < f.NHops; i++ {
		if f.Path[i].NodeID == node {
			return true
		}
	}
	return false
}

func keyOf(t *testing.T, f stream.Flow) wire.FlowKey {
	k := wire.FlowKey{Proto: f.Proto, SrcPort: f.SrcPort, DstPort: f.DstPort}
	var err error
	if k.Src, err = netip.ParseAddr(f.Src); err != nil {
		t.Fatal(err)
	}
	if k.Dst, err = netip.ParseAddr(f.Dst); err != nil {
		t.Fatal(err)
	}
	return k
}

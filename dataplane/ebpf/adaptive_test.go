package ebpf

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestAdaptiveFilterBehaviour: a sink's adaptive flow filter learns the
// stack's jittering hop latencies and reports a lasting jump, a one-packet
// spike and its end, nothing else; the BPF pre-filter with the report
// pipeline behind it reports exactly the packets the software dataplane's
// pipeline does.
func TestAdaptiveFilterBehaviour(t *testing.T) {
	const pkts = 80
	frames := make([][]byte, pkts)
	for i := range frames {
		hop1 := uint32(10000 + (i*7919)%800) // ±400 ns jitter
		hop2 := uint32(20000 + (i*104729)%600)
		if i >= 30 {
			hop1 += 3000000 // a lasting jump of 3 ms
		}
		if i == 50 {
			hop2 += 5000000 // one packet 5 ms late
		}
		frames[i] = latencyFrame(t, adaptiveSession, fmt.Sprintf("packet %06d", i), hop2, hop1)
	}
	got := adaptiveReports(t, frames, 8)
	if want := []int{0, 30, 50, 51}; !slices.Equal(got[0], want) {
		t.Errorf("soft reported packets %v, want %v", got[0], want)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("reported packets differ: soft %v, ebpf %v", got[0], got[1])
	}
}

// TestAdaptiveBandDecaysInTime: the learned deviation decays with time,
// not with packets, alike in both dataplanes. A 5 ms swing of one hop is
// reported the first time; 2,000 packets sent back to back later (tens of
// milliseconds: a few decay steps), the same swing is still inside the
// band. Had the deviation decayed per packet it would have shrunk a
// hundredfold and the swing would be reported again.
func TestAdaptiveBandDecaysInTime(t *testing.T) {
	const pkts = 2010
	frames := make([][]byte, pkts)
	for i := range frames {
		hop1 := uint32(10000 + (i*7919)%800)
		if i == 5 || i == pkts-5 {
			hop1 += 5000000
		}
		frames[i] = latencyFrame(t, adaptiveSession, fmt.Sprintf("packet %06d", i), 20000, hop1)
	}
	got := adaptiveReports(t, frames, 32)
	if want := []int{0, 5}; !slices.Equal(got[0], want) {
		t.Errorf("soft reported packets %v, want %v", got[0], want)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("reported packets differ: soft %v, ebpf %v", got[0], got[1])
	}
}

// adaptiveSession is the INT-MD session of the adaptive filter tests'
// frames: node ids and hop latencies.
var adaptiveSession = sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID | spec.InstHopLatency}

// adaptiveReports runs frames through a sink of each backend with the
// adaptive filter (factor, 1 ms floor, intervals of an hour) and the
// report pipeline, and returns per backend (soft, ebpf) the indexes of
// the reported frames (their payload is "packet NNNNNN").
func adaptiveReports(t *testing.T, frames [][]byte, factor uint32) [][]int {
	t.Helper()
	// This node's own latency is real (and differs by backend); a floor of
	// 1 ms keeps its scheduling noise out, the injected moves are larger.
	adaptive := func(a *sai.DTelAttrs) {
		a.FlowReport.Adaptive, a.FlowReport.LatencyFactor, a.FlowReport.LatencyFloor = true, factor, time.Millisecond
	}
	var got [][]int
	for _, n := range nodes(t, setup{sink: true, dt: adaptive}) {
		for _, f := range frames {
			n.process(t, bytes.Clone(f))
		}
		evs := recorderOf(n).wait(t, len(frames))
		cfg := report.Config{NodeID: nodeID, Filter: report.Filter{Interval: time.Hour, Adaptive: true, LatencyFactor: factor,
			LatencyFloor: uint32(time.Millisecond), OnPortChange: true, OnPathChange: true, OnQueueChange: true},
			Sessions: []report.Session{{Name: "s", Src: netip.MustParseAddr("192.0.2.1"), TruncateSize: 256,
				Collectors: []report.Collector{{Addr: netip.MustParseAddrPort("192.0.2.2:32766")}}}},
			Events: map[report.EventType]report.Route{spec.EventFlowState: {Session: "s"}}}
		c := &report.Capture{}
		p, err := report.New(cfg, report.Options{Sender: c, TickInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			p.Report(&evs[i])
		}
		p.Flush()
		_ = p.Close()
		var ids []int
		for _, r := range c.Packets() {
			for off := 0; ; {
				i := bytes.Index(r.Payload[off:], []byte("packet "))
				if i < 0 || off+i+13 > len(r.Payload) {
					break
				}
				if id, err := strconv.Atoi(string(r.Payload[off+i+7 : off+i+13])); err == nil {
					ids = append(ids, id)
				}
				off += i + 13
			}
		}
		t.Logf("%s: %d events, reported packets %v", n.name(), len(evs), ids)
		got = append(got, ids)
	}
	return got
}

// latencyFrame is a UDP frame with payload and an INT-MD stack of node id
// and hop latency written by wire, one hop per latency (the first is the
// oldest hop).
func latencyFrame(t testing.TB, sa sai.IntSessionAttrs, payload string, lat ...uint32) []byte {
	t.Helper()
	inst := wire.Instructions(sa.Instructions)
	hdr := make([]byte, 256)
	h := wire.MDHeader{Version: 2, HopML: uint8(inst.Words()), RemainingHops: sa.MaxHopCount - uint8(len(lat)), Instructions: inst}
	_ = h.Put(hdr)
	n := wire.MDHeaderLen
	for i := len(lat) - 1; i >= 0; i-- {
		m := wire.HopMetadata{NodeID: uint32(i + 1), HopLatency: lat[i], Valid: spec.InstNodeID | spec.InstHopLatency}
		k, err := wire.PutHop(hdr[n:], inst, 0, &m)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return sourceMD(t, udpFrame("10.0.1.1", "10.0.2.1", 4321, 53, []byte(payload), true), hdr[:n])
}

package ebpf

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// queueConfig is r1's or r3's configuration for the queue tests: r1
// watches UDP to h2 port 9000 with INT-MD (node id, hop latency, queue,
// timestamps) and port 9001 with postcards (every packet), and reports
// breaches of tx queues 0 to queues-1 of r1-r2 above latencyNs; r3 is
// the sink. The sink's flow filter is in fixed mode (every latency change
// of 256 ns or more is reported), so that every packet of the growing
// queue gives a sample.
func queueConfig(node int, sink string, queues, latencyNs int) string {
	ifs, wl, qr := "", "", ""
	if sink != "" {
		ifs = fmt.Sprintf(`"interfaces": {"interface": [{"name": %q, "config": {"name": %q, "int-sink": true}}]},`, sink, sink)
	} else {
		entry := func(seq, port int, op string) string {
			return fmt.Sprintf(`{"sequence-id": %d, "config": {"sequence-id": %d},
			"match": {"config": {"destination-prefix": "10.0.2.0/24", "protocol": 17, "destination-port-min": %d, "destination-port-max": %d}},
			"actions": {"config": {"flow-op": %q, "int-session": "md", "sample-percent": 100, "report-all-packets": true}}}`, seq, seq, port, port, op)
		}
		wl = `"watchlist": {"entries": {"entry": [` + entry(10, 9000, "INT") + `,` + entry(20, 9001, "POSTCARD") + `]}},`
		var qrs []string
		for q := range queues {
			qrs = append(qrs, fmt.Sprintf(`{"interface": "r1-r2", "queue-id": %d,
			"config": {"interface": "r1-r2", "queue-id": %d, "latency-threshold": %d}}`, q, q, latencyNs))
		}
		qr = `"queue-reports": {"queue-report": [` + strings.Join(qrs, ",") + `]},`
	}
	return fmt.Sprintf(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true,
		"postcard": true, "queue-report": true, "latency-sensitivity": 8}},
	"flow-report-filter": {"config": {"latency-filter-mode": "fixed", "hop-latency-threshold": 256}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63, "vxlan-gpe-next-protocol": 0, "geneve-option-class": 0}},
	%s %s %s
	"int-sessions": {"int-session": [{"name": "md", "config": {"name": "md", "mode": "INT_MD",
		"instructions": %s,
		"remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "collector",
		"config": {"name": "collector", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0", "truncate-size": 512},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "collector"}},
		{"type": "QUEUE_REPORT_THRESHOLD_BREACH", "config": {"type": "QUEUE_REPORT_THRESHOLD_BREACH", "report-session": "collector"}}]}
}}`, node, ifs, wl, qr, wiretest.InstructionsJSON(spec.InstAll&^spec.InstChecksumComplement))
}

// qdiscSample is the backlog of each qdisc of a device, as `tc -s
// qdisc` shows it.
type qdiscSample struct {
	at      time.Time
	backlog map[string]int // handle as tc writes it ("1:", "11:") -> bytes
}

// qdiscs reads the qdisc statistics of dev through h, the netlink dump
// `tc -s qdisc` prints (read directly: running tc takes tens of
// milliseconds on a busy machine, and the samples must be close in time
// to the packets they are compared with).
func qdiscs(t testing.TB, h *netlink.Handle, dev string) qdiscSample {
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	qs, err := h.QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	s := qdiscSample{at: t0.Add(time.Since(t0) / 2), backlog: map[string]int{}}
	for _, q := range qs {
		if st := q.Attrs().Statistics; st != nil && st.Queue != nil {
			s.backlog[fmt.Sprintf("%x:", q.Attrs().Handle>>16)] = int(st.Queue.Backlog)
		}
	}
	return s
}

// blast sends UDP from h1 to 10.0.2.2 ports 9000 and 9001 (source ports
// from sport), size-byte payloads, at rate bits/s in all, for d.
func (l *lab) blast(t testing.TB, sports []int, size int, rate float64, d time.Duration) {
	t.Helper()
	var conns []*net.UDPConn
	for _, sp := range sports {
		for _, dp := range []int{9000, 9001} {
			if err := l.in("h1", func() error {
				c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 1, 2), Port: sp + dp - 9000},
					&net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: dp})
				conns = append(conns, c)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	payload := make([]byte, size)
	perPkt := time.Duration(float64(time.Second) * float64(size+42) * 8 / rate)
	start := time.Now()
	sent := 0
	for time.Since(start) < d {
		// Paced in 1 ms steps: what is due by now goes out.
		due := int(time.Since(start) / perPkt)
		for ; sent < due; sent++ {
			_, _ = conns[sent%len(conns)].Write(payload)
		}
		time.Sleep(time.Millisecond)
	}
}

// hopOfNode returns node's hop of the INT-MD stack in a sink event,
// decoded and as its words, and the stack's instructions.
func hopOfNode(ev *report.Event, node uint32) (wire.HopMetadata, []byte, wire.Instructions, bool) {
	var p wire.Packet
	if (&wire.Parser{DSCP: 23, DSCPMask: 63, AllowTruncated: true}).Parse(ev.Packet, &p) != nil || p.INT < 0 {
		return wire.HopMetadata{}, nil, 0, false
	}
	b := ev.Packet[p.INT : p.INT+p.INTLen]
	_, st, err := wire.DecodeMD(b, 0)
	if err != nil {
		return wire.HopMetadata{}, nil, 0, false
	}
	inst := wire.Instructions(uint16(b[4])<<8 | uint16(b[5]))
	for i := 0; i < st.Count(); i++ {
		var m wire.HopMetadata
		if wire.DecodeHop(st.Hop(i), inst, &m) == nil && m.NodeID == node {
			return m, st.Hop(i), inst, true
		}
	}
	return wire.HopMetadata{}, nil, 0, false
}

// timedValue is a packet's value and its ingress time.
type timedValue struct {
	at time.Time
	v  float64
}

func sortedByTime(v []timedValue) []timedValue {
	slices.SortFunc(v, func(a, b timedValue) int { return a.at.Compare(b.at) })
	return v
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// TestQueueMetadata: kernel forwarding through r1, whose egress to r2 is
// shaped below the offered load, builds a standing queue. INT-MD hops of
// r1 (read at the sink r3), r1's postcards and its queue reports must show
// it: queue occupancy growing from 0 to what tc shows, hop latency and the
// egress time including the queueing delay tc's backlog / rate predicts
// (within 20 %), breach reports above the latency threshold. Once with
// tbf on a single-queue veth, once with mq over four tx queues, each a
// tbf with fq_codel under it.
func TestQueueMetadata(t *testing.T) {
	const (
		offered  = 12e6
		size     = 1000 // UDP payload
		limit    = 60000
		thresh   = 20_000_000 // ns, queue report latency threshold
		duration = 1500 * time.Millisecond
	)
	for _, tc := range []struct {
		name string
		mq   bool
	}{{"tbf", false}, {"mq-fq_codel", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			rate := 8e6 // shaper, bits/s
			if tc.mq {
				// r1-r2 again, with four tx queues.
				l.exec(t, "r1", "ip", "link", "del", "r1-r2")
				ipCmd(t, "link", "add", "r1-r2", "netns", l.prefix+"r1", "numtxqueues", "4", "numrxqueues", "4", "type", "veth",
					"peer", "name", "r2-r1", "netns", l.prefix+"r2", "numtxqueues", "4", "numrxqueues", "4")
				l.exec(t, "r1", "ip", "addr", "add", "10.0.12.1/24", "dev", "r1-r2")
				l.exec(t, "r2", "ip", "addr", "add", "10.0.12.2/24", "dev", "r2-r1")
				l.exec(t, "r1", "ip", "link", "set", "r1-r2", "up")
				l.exec(t, "r2", "ip", "link", "set", "r2-r1", "up")
				l.exec(t, "r1", "ip", "route", "add", "default", "via", "10.0.12.2")
				l.exec(t, "r2", "ip", "route", "add", "10.0.1.0/24", "via", "10.0.12.1")
				l.exec(t, "r1", "tc", "qdisc", "replace", "dev", "r1-r2", "root", "handle", "1:", "mq")
				rate = 4e6 // per queue: each flow alone is above it
				for q := 1; q <= 4; q++ {
					h := fmt.Sprintf("1%d:", q)
					l.exec(t, "r1", "tc", "qdisc", "replace", "dev", "r1-r2", "parent", fmt.Sprintf("1:%d", q), "handle", h,
						"tbf", "rate", "4mbit", "burst", "4kb", "limit", strconv.Itoa(limit))
					// fq_codel as a FIFO for the test's second (its AQM
					// would hold the queue at 5 ms), when the kernel has
					// it; tbf's own FIFO otherwise.
					if err := exec.Command("ip", "netns", "exec", l.prefix+"r1", "tc", "qdisc", "replace", "dev", "r1-r2", "parent", h+"1",
						"fq_codel", "target", "2s", "interval", "10s", "limit", "60").Run(); err != nil && q == 1 {
						t.Log("no fq_codel in this kernel: tbf's FIFO under mq")
					}
				}
			} else {
				l.exec(t, "r1", "tc", "qdisc", "replace", "dev", "r1-r2", "root", "handle", "1:",
					"tbf", "rate", "8mbit", "burst", "4kb", "limit", strconv.Itoa(limit))
			}
			queues := 1
			if tc.mq {
				queues = 4
			}
			r1rec, r3rec := &recorder{}, &recorder{}
			r1 := l.router(t, "r1", []string{"r1-h1", "r1-r2"}, r1rec, queueConfig(1, "", queues, thresh))
			l.router(t, "r3", []string{"r3-r2", "r3-h2"}, r3rec, queueConfig(3, "r3-h2", 0, thresh))
			l.udpOnce(t, "udp4", "10.0.2.2:9999", []byte("neighbours"))

			var samples []qdiscSample
			// r1-r2's queues in the steady state, when the flow's held most
			var queueState []sai.QueueStats
			nl, err := netlink.NewHandleAt(l.ns["r1"])
			if err != nil {
				t.Fatal(err)
			}
			defer nl.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				l.blast(t, []int{40000}, size, offered, duration)
			}()
			for {
				select {
				case <-done:
				default:
					samples = append(samples, qdiscs(t, nl, "r1-r2"))
					if time.Since(samples[0].at) > duration/2 {
						st, err := r1.Stats(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						var held, most uint32
						for _, q := range st.Queues["r1-r2"] {
							held = max(held, q.Occupancy)
						}
						for _, q := range queueState {
							most = max(most, q.Occupancy)
						}
						if held > most {
							queueState = st.Queues["r1-r2"]
						}
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
			start := samples[0].at
			// Steady state: the second half of the run.
			steady := start.Add(duration / 2)
			// tc's prediction for tx queue q: the backlog ahead of a
			// packet drains at the shaper's rate.
			predict := func(q uint8) float64 {
				h := "1:"
				if tc.mq {
					h = fmt.Sprintf("1%d:", q+1)
				}
				var v []float64
				for _, s := range samples {
					if s.at.After(steady) {
						v = append(v, float64(s.backlog[h])*8/rate*1e9)
					}
				}
				return wiretest.Median(v)
			}
			{
				var all []string
				for i := range queues {
					all = append(all, fmt.Sprintf("%d: %.1f ms", i, predict(uint8(i))/1e6))
				}
				t.Logf("tc backlog / rate per tx queue: %s", strings.Join(all, ", "))
			}
			// within compares the latencies of packets (by ingress time)
			// with what tc predicted for their queue when they arrived: each
			// steady-state tc sample against the packet that came closest
			// to it (the sender may stall on a busy machine and let the
			// queue drain; such moments count on both sides).
			within := func(what string, q uint8, got []timedValue) {
				t.Helper()
				h := "1:"
				if tc.mq {
					h = fmt.Sprintf("1%d:", q+1)
				}
				var tcv, intv []float64
				for _, s := range samples {
					if !s.at.After(steady) {
						continue
					}
					i := sort.Search(len(got), func(i int) bool { return !got[i].at.Before(s.at) })
					best := -1
					for _, j := range []int{i - 1, i} {
						if j >= 0 && j < len(got) && (best < 0 || absDur(got[j].at.Sub(s.at)) < absDur(got[best].at.Sub(s.at))) {
							best = j
						}
					}
					if best < 0 || absDur(got[best].at.Sub(s.at)) > 10*time.Millisecond {
						continue
					}
					tcv = append(tcv, float64(s.backlog[h])*8/rate*1e9)
					intv = append(intv, got[best].v)
				}
				want, g := wiretest.Median(tcv), wiretest.Median(intv)
				switch {
				case len(tcv) < 3:
					t.Errorf("%s: %d tc samples with a packet within 10 ms", what, len(tcv))
				case want < 20e6:
					t.Errorf("%s %.1f ms: no standing queue at tx queue %d: tc predicts %.1f ms", what, g/1e6, q, want/1e6)
				case g < want*0.8 || g > want*1.2:
					t.Errorf("%s %.1f ms at tx queue %d, tc predicts %.1f ms (not within 20 %%; %d samples)", what, g/1e6, q, want/1e6, len(tcv))
				default:
					t.Logf("%s %.1f ms at tx queue %d, tc predicts %.1f ms (%d samples)", what, g/1e6, q, want/1e6, len(tcv))
				}
			}

			// INT-MD: r1's hop as the sink saw it.
			var mdLat []timedValue
			var mdOcc, mdUtil, mdBuf []float64
			var firstOcc, maxOcc uint32
			mdQ := -1
			n := 0
			for _, ev := range r3rec.wait(t, 1) {
				h, raw, inst, ok := hopOfNode(&ev, 1)
				if !ok {
					continue
				}
				// The metadata semantics say what is produced: those fields
				// have values (once the queue is steady), the others are
				// always all ones.
				steadyHop := time.Unix(0, int64(h.EgressTimestamp)).After(steady)
				if u, want := wiretest.Unavailable(raw, inst), inst&^wire.Instructions(r1.Capabilities().Produced()); u&want != want || steadyHop && u != want {
					t.Fatalf("INT-MD hop %d of r1: fields %v all ones, the metadata semantics say %v", n, u, want)
				}
				if mdQ >= 0 && int(h.QueueID) != mdQ {
					t.Fatalf("INT-MD queue id %d, then %d: one flow, one queue", mdQ, h.QueueID)
				}
				mdQ = int(h.QueueID)
				if n == 0 {
					firstOcc = h.QueueOccupancy
				}
				n++
				maxOcc = max(maxOcc, h.QueueOccupancy)
				if steadyHop {
					mdLat = append(mdLat, timedValue{time.Unix(0, int64(h.IngressTimestamp)), float64(h.HopLatency)})
					mdOcc = append(mdOcc, float64(h.QueueOccupancy))
					mdUtil = append(mdUtil, float64(h.TxUtilization))
					mdBuf = append(mdBuf, float64(h.BufferOccupancy))
				}
			}
			t.Logf("INT-MD: %d hops of r1, tx queue %d, occupancy %d first, %d max, %.0f median in the steady state", n, mdQ, firstOcc, maxOcc, wiretest.Median(mdOcc))
			if len(mdLat) < 10 {
				t.Fatalf("INT-MD: %d hops of r1 in the steady state", len(mdLat))
			}
			if firstOcc >= maxOcc/4 || maxOcc == 0 {
				t.Errorf("INT-MD occupancy did not grow with the queue: first %d, max %d", firstOcc, maxOcc)
			}
			if o, b := wiretest.Median(mdOcc), predict(uint8(mdQ))*rate/8/1e9; o < b*0.8 || o > b*1.2 {
				t.Errorf("INT-MD occupancy %.0f bytes, tc backlog %.0f", o, b)
			}
			within("INT-MD hop latency", uint8(mdQ), sortedByTime(mdLat))
			// Buffer occupancy: every queue of r1-r2, so at least the
			// flow's own (mq: both flows' queues when they differ).
			if b, o := wiretest.Median(mdBuf), wiretest.Median(mdOcc); b < o*0.9 || b > float64(queues*limit)*1.1 {
				t.Errorf("INT-MD buffer occupancy %.0f bytes, the queue's %.0f", b, o)
			} else {
				t.Logf("INT-MD buffer occupancy %.0f bytes, the queue's %.0f", b, o)
			}
			// Tx utilisation: the tbf's rate is r1-r2's capacity, and it
			// sends at that rate (mq: four shapers under a 10 Gbit/s veth).
			if u := wiretest.Median(mdUtil); !tc.mq && (u < 900 || u > 1000) || tc.mq && u > 10 {
				t.Errorf("INT-MD tx utilisation %.0f tenths of a percent", u)
			} else {
				t.Logf("INT-MD tx utilisation %.1f %%", u/10)
			}

			// The queues' state: the queue the flow used holds about the
			// limit and delays by its drain time.
			if len(queueState) != queues {
				t.Fatalf("queue state of r1-r2: %d queues, want %d", len(queueState), queues)
			}
			if q := queueState[mdQ]; q.Occupancy < limit/4 || float64(q.Delay) < float64(q.Occupancy)*8/rate*1e9*0.8 || float64(q.Delay) > float64(q.Occupancy)*8/rate*1e9*1.2 {
				t.Errorf("queue %d state %+v: want at least %d bytes and their drain time at %.0f bit/s", mdQ, q, limit/4, rate)
			} else {
				t.Logf("queue %d state: %d bytes, delay %v", mdQ, q.Occupancy, q.Delay)
			}

			// INT-XD: r1's postcards, egress minus ingress time; queue
			// reports of the queues the flows use.
			var xd []timedValue
			xdQ := -1
			var qrs, qrBelow int
			for _, ev := range r1rec.wait(t, 1) {
				switch ev.Kind {
				case report.KindFlow:
					if ev.Flow.DstPort != 9001 || ev.Hop.IngressTimestamp == 0 {
						continue
					}
					if xdQ >= 0 && int(ev.Hop.QueueID) != xdQ {
						t.Errorf("INT-XD queue id %d, then %d: one flow, one queue", xdQ, ev.Hop.QueueID)
					}
					xdQ = int(ev.Hop.QueueID)
					if time.Unix(0, int64(ev.Hop.EgressTimestamp)).After(steady) {
						xd = append(xd, timedValue{time.Unix(0, int64(ev.Hop.IngressTimestamp)), float64(ev.Hop.EgressTimestamp - ev.Hop.IngressTimestamp)})
					}
				case report.KindQueue:
					qrs++
					if ev.Hop.HopLatency < thresh {
						qrBelow++
					}
				}
			}
			if len(xd) < 10 {
				t.Fatalf("INT-XD: %d postcards of r1 in the steady state", len(xd))
			}
			within("INT-XD egress - ingress time", uint8(xdQ), sortedByTime(xd))
			st, err := r1.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var breaches uint64
			for _, q := range st.QueueReports {
				breaches += q.Breaches
			}
			// Every breach's end is reported too, below the threshold.
			t.Logf("queue reports: %d in %d breaches, %d of them below the threshold", qrs, breaches, qrBelow)
			if qrs == 0 || breaches == 0 || uint64(qrBelow) > breaches {
				t.Errorf("queue reports: %d in %d breaches, %d below the %d ns threshold", qrs, breaches, qrBelow, thresh)
			}
		})
	}
}

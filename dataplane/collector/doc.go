// Package collector decodes INT telemetry reports (Telemetry Report v2.0
// and 0.5, with INT v2.1, INT 0.5 and INT 2016 stacks in the embedded
// packets) and aggregates them into per-flow state: the path with per-hop
// latency and queue occupancy, end-to-end latency, first and last seen,
// drops by reason, congestion events, and report loss from sequence gaps
// per (node, hw_id). The flow table is bounded (LRU eviction). Malformed
// input is counted by kind of error. Independently of flows, it keeps per
// node histograms of hop latency and of the end-to-end latency of the
// paths the node ends, drops by reason, and congested-queue reports per
// (node, egress port, queue) (Aggregates): what a dashboard needs without
// a series per flow. It knows packets, not gNMI or Prometheus;
// cmd/intcollector exposes it, over Prometheus through the metrics
// subpackage.
//
// The histograms are plain counters updated under the collector's lock
// (one bucket index from the sample's bit length, one compare), with each
// hop's NodeStats cached in its HopState, and are turned into Prometheus
// histograms at scrape time. Cached client_golang Observer children (one
// per node) were measured too: their atomic updates cost more on this
// path. BenchmarkDecodeAggregate -cpu 1, 2,000,000 iterations, five
// interleaved rounds, load average 1.7-1.9: without the histograms 10.07M
// reports/cpu-s (10.04-10.13M); with them 8.62M (8.53-8.69M, 0.86); with
// Observer children instead 6.31M (5.74-6.40M, 0.63). 0 allocs/op in all.
//
// A flow's path comes from the reports that describe all of it: the sink's
// INT-MD reports (an embedded INT-MD stack; I, Q and D clear). Reports
// from transit nodes (I set: intermediate INT-MD reports, per the
// Telemetry Report spec) and queue-congestion (Q) and drop (D) reports
// carry a truncated packet whose stack ends at the reporting node: they
// update that node's hop (its metadata, congestion and drop counts) and
// never shrink the path or count a path change; before the first sink
// report they build a provisional path that only grows. Reports without a
// stack (INT-MX, postcards, local reports) add their node to a provisional
// path ordered by the inner packet's TTL (higher first), then by the
// node's first ingress timestamp (or arrival). FlowState.PathComplete says
// whether the path came from a sink report.
//
// Figures (2-core shared AMD EPYC VM; reports/cpu-s divides by the
// process CPU time):
//
//	go test -run '^$' -bench DecodeAggregate -cpu 1 -count 5 ./dataplane/collector/
//	  5.3-7.8M reports/cpu-s over ten runs, median 6.5M (3.2-5.4M, median
//	  4.6M, for the previous code interleaved in the same session, load
//	  average 0.8-0.9), 0 allocs/op (sink reports with a 3-hop INT-MD
//	  stack, 8 per packet). Load-independent: 1693 instructions per
//	  report, down from 2259 (callgrind, GODEBUG=asyncpreemptoff=1
//	  GOGC=off, (Ir at -test.benchtime 60000x - Ir at 10000x) / 50000 /
//	  8; 3117 before the earlier round). This round: sink reports' hops
//	  decoded straight into the flow path when the collector decodes for
//	  itself (no OnReport: Report.raw instead of INT.Hops, mdPathRaw; the
//	  exported Report and Handler are unchanged; 2259 -> 1874), and report
//	  inner packets of the common shape (Ethernet or bare IPv4, TCP/UDP,
//	  no parser, INT 0.5 or INT 2016 marking matching) decoded without
//	  wire.Parser and wire.Packet, finding only the flow key, TTL and an
//	  unmarked INT v2.1 stack (innerFast; -> 1693). Both are checked
//	  against the reference paths by differential tests on the fuzz
//	  corpus, crafted stacks and random mutations (fastpath_test.go). What
//	  is left per report (callgrind, self cost): fused hop decode and path
//	  aggregation (mdPathRaw, 3 hops and the sink's) ~410, report walk and
//	  Report reset (decodeV2) ~310, inner packet (innerFast) ~235, stack
//	  header (decodeV21) ~155,
//	  report metadata fields ~100, unmarked INT v2.1 detection
//	  (looksV21Shim) ~70, flow index and LRU ~195, HandleReport ~65, the
//	  sink's hop (updateLat) ~35. By instruction count the 5M/s/core
//	  target needs about 1400-1800 on this machine; 1693 is inside that
//	  range, and the quiet-core runs above meet it. Next candidates: a
//	  cheaper LRU touch (clock bits), one Report reset for what a report
//	  can set instead of the whole struct, hashing the flow key from the
//	  packet bytes before building netip.Addr values, the fast inner path
//	  for DSCP-marked INT (Parser.DSCPMask set: currently the parser path).
//	go test -run '^$' -bench ReceiveLoopback -benchtime 200000x ./dataplane/collector/
//	  1.57-2.10M reports/s received on 127.0.0.1 over five runs, 0% lost,
//	  0 allocs/op; the receiver thread handles 2.2-3.1M reports/cpu-s
//	  (recvmmsg batches of 256, SO_RCVBUFFORCE 8 MB). Before: 0.70M/s with
//	  13.6% lost (batches of 64, one write per datagram). The sender uses
//	  sendmmsg with UDP GSO messages (32 datagrams of 8 reports each) and
//	  keeps at most 1024 datagrams in flight, so the figure is the
//	  receiver's loss-free rate; unpaced, the sender takes the CPU the
//	  receiver needs on two shared cores and 80% is lost in the socket.
//	  No separate reader goroutine: the receiver thread is not the
//	  bottleneck, and a hand-off would add work on the same two cores.
package collector

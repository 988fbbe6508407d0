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
// histograms at scrape time (cheaper on this path than client_golang's
// atomic Observers).
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
// Measured figures and their history: docs/performance.md.
package collector

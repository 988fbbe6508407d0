// Package collector decodes INT telemetry reports (Telemetry Report v2.0
// and 0.5, with INT v2.1, INT 0.5 and INT 2016 stacks in the embedded
// packets) and aggregates them into per-flow state: the path with per-hop
// latency and queue occupancy, end-to-end latency, first and last seen,
// drops by reason, congestion events, and report loss from sequence gaps
// per (node, hw_id). The flow table is bounded (LRU eviction). Malformed
// input is counted by kind of error. It knows packets, not gNMI;
// cmd/intcollector exposes it.
//
// Figures (2-core shared VM, heavily loaded by other builds while
// measured, so wall-clock rates are pessimistic; reports/cpu-s divides by
// the process CPU time):
//
//	go test -run '^$' -bench DecodeAggregate -cpu 1 ./dataplane/collector/
//	  ~1.9M reports/cpu-s, 0 allocs/op (sink reports with a 3-hop INT-MD
//	  stack, 8 per packet); target 5M/s/core not yet reached.
//	go test -run '^$' -bench ReceiveLoopback -benchtime 200000x ./dataplane/collector/
//	  ~0.34M reports/s received on 127.0.0.1 with recvmmsg batches of 64,
//	  0 allocs/op; target 1M/s not yet reached on this loaded machine.
package collector

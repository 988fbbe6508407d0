package tests

import (
	"encoding/json"
	"os"
	"testing"
)

// tc/eBPF benchmark modes.
const (
	modeNoProgs   = "no programs (Linux forwarding)"
	modeAttached  = "programs attached, empty watchlist"
	modeXD        = "INT-XD, postcards from every hop"
	modeMDSampled = "INT-MD, packet-interval 10 ms"
	modeMDEvery   = "INT-MD on every packet"
	// The bound of INT-MD on every TCP packet: no INT, but s1 cuts
	// every super-packet into segments in the kernel before sending it
	// (gso_max_segs 1 on its link to s2), as INT over TCP requires.
	modeSegmented = "no INT, s1 segments in software"
)

// ebpfBenchConfig is switch n's /int configuration for a tc/eBPF
// benchmark mode: the soft test's configuration, the watchlist changed
// as the mode asks.
func ebpfBenchConfig(t *testing.T, n int, mode string) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(intConfig(n, mode != modeAttached && mode != modeSegmented), &cfg); err != nil {
		t.Fatal(err)
	}
	var src map[string]any
	if err := json.Unmarshal(intConfig(1, true), &src); err != nil {
		t.Fatal(err)
	}
	entry := func(c map[string]any) map[string]any {
		return c["watchlist"].(map[string]any)["entries"].(map[string]any)["entry"].([]any)[0].(map[string]any)["actions"].(map[string]any)["config"].(map[string]any)
	}
	switch mode {
	case modeMDSampled:
		if n == 1 {
			entry(cfg)["packet-interval"] = 10000
		}
	case modeXD:
		// Every switch watches the flow and sends postcards.
		cfg["node"].(map[string]any)["config"].(map[string]any)["postcard"] = true
		cfg["watchlist"], cfg["int-sessions"] = src["watchlist"], src["int-sessions"]
		entry(cfg)["flow-op"] = "POSTCARD"
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBenchEBPF measures iperf3 TCP throughput h1 -> h2 across three
// switches forwarding by Linux, without programs and with `intd run
// --dataplane ebpf` in five modes (empty watchlist, INT-XD, INT-MD
// sampled, INT-MD on every packet, and the bound of the last: no INT
// with s1 segmenting in software), interleaved round by round. With
// INTD_BENCH=1 (make bench-ebpf) it runs INTD_BENCH_ROUNDS rounds of
// INTD_BENCH_SECS seconds and prints the ratios; otherwise one
// one-second round checks that it measures.
func TestBenchEBPF(t *testing.T) {
	rounds, secs, full := benchParams()
	kernel := buildFabric(t, false, 0)
	e := ebpfFabric(t)
	current, segmented := "", false
	set := func(mode string) func(t *testing.T) {
		return func(t *testing.T) {
			if current != mode {
				e.configureWith(t, func(n int) []byte { return ebpfBenchConfig(t, n, mode) })
				current = mode
			}
			if seg := mode == modeSegmented; seg != segmented {
				n := "65535"
				if seg {
					n = "1"
				}
				e.ip("-n", e.ns("s1"), "link", "set", "dev", "p2", "gso_max_segs", n)
				segmented = seg
			}
		}
	}
	run := func(t *testing.T) float64 { return e.iperf3(t, secs) }
	modes := []benchMode{
		{name: modeNoProgs, run: func(t *testing.T) float64 { return kernel.iperf3(t, secs) }},
		{name: modeAttached, setup: set(modeAttached), run: run},
		{name: modeXD, setup: set(modeXD), run: run},
		{name: modeMDSampled, setup: set(modeMDSampled), run: run},
		{name: modeMDEvery, setup: set(modeMDEvery), run: run},
		{name: modeSegmented, setup: set(modeSegmented), run: run},
	}
	ratios := [][2]string{{modeAttached, modeNoProgs}, {modeXD, modeAttached}, {modeMDSampled, modeAttached},
		{modeMDEvery, modeAttached}, {modeSegmented, modeAttached}, {modeMDEvery, modeSegmented}}
	r := interleave(t, rounds, modes)
	r.checkShape(t, rounds, ratios)
	if full {
		r.print(os.Stdout, "bench-ebpf: iperf3 TCP h1 -> h2 across 3 switches, MSS 1340, hosts' TSO/GSO on", "Mbit/s", 1e6, ratios)
	}
}

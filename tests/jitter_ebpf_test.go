package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestEBPFHopLatencyJitter measures the jitter of the hop latency the eBPF
// dataplane reports on kernel forwarding: every switch of the fabric
// (h1 - s1 - s2 - s3 - h2, `intd run --dataplane ebpf`) sends a postcard
// for every packet of a steady UDP flow of 2,000 packets per second, and
// the test logs, per node and for all nodes, the distribution of the
// difference |Δ| between consecutive packets' hop latencies (median, 90th,
// 99th, 99.9th percentile, maximum). report's accuracy test injects that
// distribution (kernelJitter). The flow runs 1 s; with INTD_BENCH=1 it
// runs INTD_BENCH_SECS seconds (default 10):
//
//	INTD_BENCH=1 go test ./tests -run TestEBPFHopLatencyJitter -count=1 -v -timeout 300s
func TestEBPFHopLatencyJitter(t *testing.T) {
	secs := 1
	if os.Getenv("INTD_BENCH") != "" {
		secs = 10
		if n, err := strconv.Atoi(os.Getenv("INTD_BENCH_SECS")); err == nil && n > 0 {
			secs = n
		}
	}
	f := ebpfFabric(t)
	f.configureWith(t, func(n int) []byte {
		var cfg map[string]any
		if err := json.Unmarshal(ebpfBenchConfig(t, n, modeXD), &cfg); err != nil {
			t.Fatal(err)
		}
		act := cfg["watchlist"].(map[string]any)["entries"].(map[string]any)["entry"].([]any)[0].(map[string]any)["actions"].(map[string]any)["config"].(map[string]any)
		act["report-all-packets"] = true
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	sink := f.udpSink(t)
	const port = 40077
	tx := f.udpSender(t, port)
	const warm = 1 << 62
	eventually(t, 10*time.Second, "first datagram h1 -> h2", func() (bool, string) {
		tx.Write(payload(warm, 64))
		time.Sleep(20 * time.Millisecond)
		return sink.has(warm), ""
	})

	// The steady flow: one 200-byte datagram every 500 µs, paced on the
	// clock (a late packet is sent at once, the next ones keep the pace).
	const gap = 500 * time.Microsecond
	pkts := secs * int(time.Second/gap)
	f.reports.mu.Lock()
	from := len(f.reports.reports)
	f.reports.mu.Unlock()
	start := time.Now()
	for i := 0; i < pkts; i++ {
		if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
			time.Sleep(d)
		}
		if _, err := tx.Write(payload(uint64(i+1), 200)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d packets in %v", pkts, time.Since(start))

	// Each node's hop latencies in the order it reported them.
	lat := map[uint32][]int64{}
	// A loaded host loses a few postcards (a |Δ| across a lost one spans
	// two packets: no matter for the distribution).
	eventually(t, 30*time.Second, "a postcard from every node for most packets", func() (bool, string) {
		f.reports.mu.Lock()
		defer f.reports.mu.Unlock()
		clear(lat)
		for _, r := range f.reports.reports[from:] {
			for _, x := range r.Reports {
				if x.F && !x.D && !x.Q && x.MD != nil && x.MD.HopLatency != nil && x.Inner != nil &&
					x.Inner.SrcPort != nil && *x.Inner.SrcPort == port {
					lat[r.NodeID] = append(lat[r.NodeID], int64(*x.MD.HopLatency))
				}
			}
		}
		for n := uint32(1); n <= 3; n++ {
			if len(lat[n]) < pkts*8/10 {
				return false, fmt.Sprintf("postcards per node %d/%d/%d of %d packets", len(lat[1]), len(lat[2]), len(lat[3]), pkts)
			}
		}
		return true, ""
	})
	var all []int64
	for n := uint32(1); n <= 3; n++ {
		d := deltas(lat[n])
		all = append(all, d...)
		t.Logf("s%d: %d postcards, hop latency median %d ns; |Δ| %s", n, len(lat[n]), quantile(slices.Clone(lat[n]), 0.5), jitterOf(d))
		if quantile(slices.Clone(lat[n]), 0.5) == 0 {
			t.Errorf("s%d reports no hop latency", n)
		}
	}
	t.Logf("all nodes: |Δ| %s", jitterOf(all))
}

// deltas returns the absolute differences of consecutive values.
func deltas(v []int64) []int64 {
	var d []int64
	for i := 1; i < len(v); i++ {
		x := v[i] - v[i-1]
		if x < 0 {
			x = -x
		}
		d = append(d, x)
	}
	return d
}

// quantile returns the q-quantile of v (sorting v).
func quantile(v []int64, q float64) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// jitterOf formats the distribution of v.
func jitterOf(v []int64) string {
	s := slices.Clone(v)
	return fmt.Sprintf("median %d ns, p90 %d, p99 %d, p99.9 %d, max %d (%d samples)",
		quantile(s, 0.5), quantile(s, 0.9), quantile(s, 0.99), quantile(s, 0.999), quantile(s, 1), len(s))
}

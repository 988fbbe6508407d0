package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestBenchE2E measures iperf3 TCP throughput h1 -> h2 through the three
// intd soft switches with INT on and off, and through plain Linux
// forwarding in the same namespaces. It runs only with INTD_BENCH_E2E=1
// (make bench-e2e).
func TestBenchE2E(t *testing.T) {
	if os.Getenv("INTD_BENCH_E2E") == "" {
		t.Skip("set INTD_BENCH_E2E=1 (make bench-e2e)")
	}
	needRoot(t)
	iperf, err := exec.LookPath("iperf3")
	if err != nil {
		t.Skip("iperf3 not installed")
	}
	secs := 5
	run := func(f *fabric, name string) float64 {
		f.start("h2", iperf, nil, "-s", "-1", "-B", "10.0.2.1")
		var out []byte
		eventually(t, 10*time.Second, "iperf3 "+name, func() (bool, string) {
			out, err = exec.Command("ip", "netns", "exec", f.ns("h1"), iperf, "-c", "10.0.2.1", "-t", fmt.Sprint(secs),
				"-M", "1340", "-J").Output()
			return err == nil, fmt.Sprint(err)
		})
		var r struct {
			End struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
				SumSent struct {
					Retransmits int `json:"retransmits"`
				} `json:"sum_sent"`
			} `json:"end"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("iperf3 output: %v\n%s", err, out)
		}
		bps := r.End.SumReceived.BitsPerSecond
		t.Logf("%-28s %8.1f Mbit/s  (%d retransmits)", name, bps/1e6, r.End.SumSent.Retransmits)
		return bps
	}
	var on, off, kernel float64
	t.Run("intd", func(t *testing.T) {
		f := buildFabric(t, true, 0)
		f.configure(t, true)
		on = run(f, "intd soft, INT on")
		m := f.scrape(t)
		t.Logf("collector after INT on: %s", regexp.MustCompile(`(?m)^intcollector_(packets_total|reports_total\{version="2.0"\}|congestion_reports_total) .*$`).FindAllString(m, -1))
		f.configure(t, false)
		off = run(f, "intd soft, INT off")
	})
	t.Run("kernel", func(t *testing.T) {
		f := buildFabric(t, false, 0)
		kernel = run(f, "Linux forwarding")
	})
	if kernel > 0 {
		fmt.Printf("\nbench-e2e: iperf3 TCP h1 -> h2, 3 routers, %ds, MSS 1340, hosts TSO/GSO off\n", secs)
		fmt.Printf("  Linux forwarding (ip_forward=1)  %8.1f Mbit/s  1.00\n", kernel/1e6)
		fmt.Printf("  intd soft, INT off               %8.1f Mbit/s  %.2f\n", off/1e6, off/kernel)
		fmt.Printf("  intd soft, INT on                %8.1f Mbit/s  %.2f  (%.2f of INT off)\n", on/1e6, on/kernel, on/off)
	}
}

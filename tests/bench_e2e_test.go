package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
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
	run := func(t *testing.T, f *fabric, name string) float64 {
		var r struct {
			Error string `json:"error"`
			End   struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
				SumSent struct {
					Retransmits int `json:"retransmits"`
				} `json:"sum_sent"`
			} `json:"end"`
		}
		eventually(t, 30*time.Second, "iperf3 "+name, func() (bool, string) {
			// A one-off server per attempt, listening before the client
			// starts.
			srv := exec.Command("ip", "netns", "exec", f.ns("h2"), iperf, "-s", "-1", "-B", "10.0.2.1")
			srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := srv.Start(); err != nil {
				return false, err.Error()
			}
			defer func() { syscall.Kill(-srv.Process.Pid, syscall.SIGKILL); srv.Wait() }()
			for i := 0; i < 100; i++ {
				o, _ := exec.Command("ip", "netns", "exec", f.ns("h2"), "ss", "-Hltn", "sport", "=", ":5201").Output()
				if len(o) > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			out, _ := exec.Command("ip", "netns", "exec", f.ns("h1"), iperf, "-c", "10.0.2.1", "-t", fmt.Sprint(secs),
				"-M", "1340", "-J").Output()
			if err := json.Unmarshal(out, &r); err != nil {
				return false, fmt.Sprintf("%v: %.200s", err, out)
			}
			return r.Error == "" && r.End.SumReceived.BitsPerSecond > 0, r.Error
		})
		bps := r.End.SumReceived.BitsPerSecond
		t.Logf("%-28s %8.1f Mbit/s  (%d retransmits)", name, bps/1e6, r.End.SumSent.Retransmits)
		return bps
	}
	var on, off, kernel float64
	t.Run("intd", func(t *testing.T) {
		f := buildFabric(t, true, 0)
		f.configure(t, true)
		on = run(t, f, "intd soft, INT on")
		m := f.scrape(t)
		t.Logf("collector after INT on: %s", regexp.MustCompile(`(?m)^intcollector_(packets_total|reports_total\{version="2.0"\}|congestion_reports_total) .*$`).FindAllString(m, -1))
		f.configure(t, false)
		off = run(t, f, "intd soft, INT off")
	})
	t.Run("kernel", func(t *testing.T) {
		f := buildFabric(t, false, 0)
		kernel = run(t, f, "Linux forwarding")
	})
	if kernel > 0 {
		fmt.Printf("\nbench-e2e: iperf3 TCP h1 -> h2, 3 routers, %ds, MSS 1340, hosts' TSO/GSO on\n", secs)
		fmt.Printf("  Linux forwarding (ip_forward=1)  %8.1f Mbit/s  1.00\n", kernel/1e6)
		fmt.Printf("  intd soft, INT off               %8.1f Mbit/s  %.2f\n", off/1e6, off/kernel)
		fmt.Printf("  intd soft, INT on                %8.1f Mbit/s  %.2f  (%.2f of INT off)\n", on/1e6, on/kernel, on/off)
	}
}

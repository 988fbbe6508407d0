package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchMode is one of the configurations a benchmark compares: setup
// switches to it (nil: nothing to do), run measures it once.
type benchMode struct {
	name  string
	setup func(t *testing.T)
	run   func(t *testing.T) float64
}

// benchResult holds what interleave measured: per mode one value per
// round, and the 1-minute load average before each round.
type benchResult struct {
	modes []string
	vals  map[string][]float64
	load  []float64
}

// benchParams returns the rounds and the seconds per run: with
// INTD_BENCH=1 (make bench-*) INTD_BENCH_ROUNDS (default 5) and
// INTD_BENCH_SECS (default 4); otherwise one round of one second, a
// smoke test of the driver.
func benchParams() (rounds, secs int, full bool) {
	if os.Getenv("INTD_BENCH") == "" {
		return 1, 1, false
	}
	rounds, secs = 5, 4
	if n, err := strconv.Atoi(os.Getenv("INTD_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	if n, err := strconv.Atoi(os.Getenv("INTD_BENCH_SECS")); err == nil && n > 0 {
		secs = n
	}
	return rounds, secs, true
}

// interleave measures every mode once per round, round after round, so
// that load changing over the run weighs on every mode alike; each round
// starts one mode further, so no mode always runs first.
func interleave(t *testing.T, rounds int, modes []benchMode) *benchResult {
	t.Helper()
	r := &benchResult{vals: map[string][]float64{}}
	for _, m := range modes {
		r.modes = append(r.modes, m.name)
	}
	for round := 0; round < rounds; round++ {
		r.load = append(r.load, loadAverage())
		for i := range modes {
			m := modes[(i+round)%len(modes)]
			if m.setup != nil {
				m.setup(t)
			}
			v := m.run(t)
			t.Logf("round %d: %-34s %.4g", round+1, m.name, v)
			r.vals[m.name] = append(r.vals[m.name], v)
		}
	}
	r.load = append(r.load, loadAverage())
	return r
}

// loadAverage returns the 1-minute load average (NaN if unreadable).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// spread is a median with its range.
type spread struct{ med, min, max float64 }

func spreadOf(v []float64) spread {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med, s[0], s[len(s)-1]}
}

func (s spread) String(format string) string {
	return fmt.Sprintf(format+" ("+format+"-"+format+")", s.med, s.min, s.max)
}

// ratio returns a's value over b's, round by round.
func (r *benchResult) ratio(a, b string) spread {
	var q []float64
	for i, v := range r.vals[a] {
		q = append(q, v/r.vals[b][i])
	}
	return spreadOf(q)
}

// print writes each mode's value (scaled by scale, in unit) and each
// ratio as median (min-max) over the rounds, and the load average.
func (r *benchResult) print(w io.Writer, title, unit string, scale float64, ratios [][2]string) {
	fmt.Fprintf(w, "\n%s\n", title)
	for _, m := range r.modes {
		var v []float64
		for _, x := range r.vals[m] {
			v = append(v, x/scale)
		}
		fmt.Fprintf(w, "  %-40s %s %s\n", m, spreadOf(v).String("%.1f"), unit)
	}
	for _, q := range ratios {
		fmt.Fprintf(w, "  %-72s %s\n", q[0]+" / "+q[1], r.ratio(q[0], q[1]).String("%.3f"))
	}
	fmt.Fprintf(w, "  rounds %d, interleaved; load average (1 min) %s\n", len(r.vals[r.modes[0]]), spreadOf(r.load).String("%.2f"))
}

// checkShape fails unless every mode has one positive value per round
// and every ratio is a positive number.
func (r *benchResult) checkShape(t *testing.T, rounds int, ratios [][2]string) {
	t.Helper()
	for _, m := range r.modes {
		v := r.vals[m]
		if len(v) != rounds {
			t.Errorf("%s: %d values, want %d", m, len(v), rounds)
		}
		for _, x := range v {
			if !(x > 0) || math.IsInf(x, 0) {
				t.Errorf("%s: value %v, want a positive number", m, x)
			}
		}
	}
	for _, q := range ratios {
		if s := r.ratio(q[0], q[1]); !(s.min > 0 && s.min <= s.med && s.med <= s.max) || math.IsInf(s.max, 0) {
			t.Errorf("ratio %s / %s: %+v", q[0], q[1], s)
		}
	}
	if len(r.load) != rounds+1 || math.IsNaN(r.load[0]) {
		t.Errorf("load averages %v", r.load)
	}
}

// iperf3 runs one TCP transfer of secs seconds from h1 to h2 (10.0.2.1)
// and returns the bits per second received. Segments are at most 1340
// bytes (MSS), leaving room for INT-MD with three hops.
func (f *fabric) iperf3(t *testing.T, secs int) float64 {
	t.Helper()
	iperf, err := exec.LookPath("iperf3")
	if err != nil {
		t.Skip("iperf3 not installed")
	}
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	eventually(t, 30*time.Second, "iperf3", func() (bool, string) {
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
	return r.End.SumReceived.BitsPerSecond
}

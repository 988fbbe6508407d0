package ebpf

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// BenchmarkProgramProfile shows where one role of intd_egress
// (INTD_PROGRAM_ROLE: unwatched, source, transit or sink; transit when
// unset) spends its time: it runs the role on b.N fresh packets as
// BenchmarkProgram does, under perf record (software clock, call graphs),
// maps the samples taken in the program to source lines by the JIT's line
// table, and logs each C function's share of the samples of the test runs
// (its own instructions, inlined code included), the helpers' by the
// function that calls them, and the rest (the test run's own timing).
// The shares say where to look; side by side runs (BenchmarkProgram with
// INTD_PROGRAM_BASELINE) say what a change is worth.
//
//	sudo INTD_PROGRAM_ROLE=sink go test ./dataplane/ebpf -run '^$' -bench ProgramProfile -benchtime 400000x -v
func BenchmarkProgramProfile(b *testing.B) {
	needRoot(b)
	perf, err := exec.LookPath("perf")
	if err != nil {
		b.Skip("perf is not installed")
	}
	roles, _, _ := programRoles(b)
	want := cmp.Or(os.Getenv("INTD_PROGRAM_ROLE"), "transit")
	i := slices.IndexFunc(roles, func(r programRole) bool { return r.name == want })
	if i < 0 {
		b.Fatalf("INTD_PROGRAM_ROLE %q: not a role (unwatched, source, transit, sink)", want)
	}
	n := newBPFNode(b)
	n.setMTU(1500)
	roles[i].s.apply(b, n)
	p, frame := n.objs.IntdEgress, roles[i].frame
	if b.N == 1 {
		// The probe run: nothing to profile.
		if _, err := timedRun(p, bytes.Clone(frame), inIfindex); err != nil {
			b.Fatal(err)
		}
		return
	}
	prof, err := newProgProfile("bpf/intd.c", p, n.objs.IntdTransit, n.objs.IntdSink, n.objs.IntdSource)
	if err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(b.TempDir(), "perf.data")
	rec := exec.Command(perf, "record", "-q", "-e", "cpu-clock", "-F", "20000", "-g", "-p", strconv.Itoa(os.Getpid()), "-o", data)
	if err := rec.Start(); err != nil {
		b.Fatal(err)
	}
	// perf writes its file once it is attached.
	for t := time.Now(); time.Since(t) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		if st, err := os.Stat(data); err == nil && st.Size() > 0 {
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	b.ResetTimer()
	for range b.N {
		if _, err := timedRun(p, bytes.Clone(frame), inIfindex); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := rec.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	// perf record ends at SIGINT, which may show in its exit status.
	if err := rec.Wait(); err != nil && rec.ProcessState.ExitCode() != -1 && !rec.ProcessState.Success() {
		b.Fatalf("perf record: %v", err)
	}
	script, err := exec.Command(perf, "script", "-i", data, "-F", "ip,sym").Output()
	if err != nil {
		b.Fatalf("perf script: %v", err)
	}
	b.Logf("%s, %d packets, load average %s", want, b.N, loadAvg())
	for _, l := range prof.shares(script) {
		b.Log(l)
	}
}

// progProfile maps addresses of loaded programs' JIT images (a program
// and those it reaches by tail calls) to the C function of their source
// line.
type progProfile struct {
	addrs []uint64 // JIT line table, ascending
	funcs []string // the function of each line
	lines []string // and its number and text
	image [][2]uint64
}

// cDef is a function definition's first line in bpf/intd.c.
var cDef = regexp.MustCompile(`^(?:static __always_inline |GLOBAL |int |SEC)[^;]*?(\w+)\(`)

func newProgProfile(src string, ps ...*ebpf.Program) (*progProfile, error) {
	text, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var starts []int // line numbers of definitions
	var names []string
	for i, l := range strings.Split(string(text), "\n") {
		if m := cDef.FindStringSubmatch(l); m != nil && !strings.HasSuffix(strings.TrimSpace(l), ";") {
			starts = append(starts, i+1)
			names = append(names, m[1])
		}
	}
	type entry struct {
		addr     uint64
		fn, line string
	}
	var es []entry
	pp := &progProfile{}
	for _, p := range ps {
		info, err := p.Info()
		if err != nil {
			return nil, err
		}
		lines, err := info.LineInfos()
		if err != nil {
			return nil, fmt.Errorf("line info: %w", err)
		}
		jited, ok1 := info.JitedLineInfos()
		syms, ok2 := info.JitedKsymAddrs()
		lens, ok3 := info.JitedFuncLens()
		if !ok1 || !ok2 || !ok3 || len(jited) != len(lines) || len(syms) != len(lens) {
			return nil, fmt.Errorf("the kernel gives no JIT line table for %s", p)
		}
		for i, l := range lines {
			fn := "?"
			if k, found := slices.BinarySearch(starts, int(l.Line.LineNumber())); found {
				fn = names[k]
			} else if k > 0 {
				fn = names[k-1]
			}
			es = append(es, entry{jited[i], fn, fmt.Sprintf("%d %s", l.Line.LineNumber(), strings.TrimSpace(l.Line.Line()))})
		}
		for i, s := range syms {
			pp.image = append(pp.image, [2]uint64{uint64(s), uint64(s) + uint64(lens[i])})
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.addr, b.addr) })
	for i, e := range es {
		if e.fn == "?" && i > 0 {
			e.fn, e.line = pp.funcs[i-1], pp.lines[i-1] // compiler-made code (line 0): its neighbour's
		}
		pp.addrs = append(pp.addrs, e.addr)
		pp.funcs = append(pp.funcs, e.fn)
		pp.lines = append(pp.lines, e.line)
	}
	return pp, nil
}

// at is the index of the line table entry of address a, -1 outside the
// program.
func (pp *progProfile) at(a uint64) int {
	in := false
	for _, r := range pp.image {
		in = in || (a >= r[0] && a < r[1])
	}
	if !in {
		return -1
	}
	k, found := slices.BinarySearch(pp.addrs, a)
	if !found {
		k--
	}
	return max(k, 0)
}

// shares sums perf script's samples (-F ip,sym, call graphs) of the test
// runs by where they fall and returns lines of shares, largest first.
func (pp *progProfile) shares(script []byte) []string {
	own, lines, calls, rest := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	total := 0
	for _, block := range strings.Split(string(script), "\n\n") {
		var ips []uint64
		var syms []string
		sc := bufio.NewScanner(strings.NewReader(block))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			ip, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				continue
			}
			ips = append(ips, ip)
			syms = append(syms, f[1])
		}
		if !slices.Contains(syms, "bpf_test_run") {
			continue
		}
		total++
		switch k := slices.IndexFunc(ips, func(a uint64) bool { return pp.at(a) >= 0 }); {
		case k == 0:
			j := pp.at(ips[0])
			own[pp.funcs[j]]++
			lines[pp.lines[j]]++
		case k > 0:
			// A return address: the call is just before it.
			calls[pp.funcs[pp.at(ips[k]-1)]+" -> "+syms[0]]++
		default:
			rest[syms[0]]++
		}
	}
	if total == 0 {
		return []string{"no samples of the test runs"}
	}
	var out []string
	add := func(title string, m map[string]int, top int) {
		keys := make([]string, 0, len(m))
		sum := 0
		for k, v := range m {
			keys = append(keys, k)
			sum += v
		}
		slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
		out = append(out, fmt.Sprintf("%s: %.1f %%", title, 100*float64(sum)/float64(total)))
		for _, k := range keys[:min(top, len(keys))] {
			if s := 100 * float64(m[k]) / float64(total); s >= 0.5 {
				out = append(out, fmt.Sprintf("  %5.1f %%  %s", s, k))
			}
		}
	}
	out = append(out, fmt.Sprintf("%d samples of the test runs", total))
	add("the program's own instructions, by C function", own, len(own))
	add("and by source line (the top 20)", lines, 20)
	add("helpers, by calling function", calls, len(calls))
	add("the rest (the test run's own work and timing)", rest, len(rest))
	return out
}

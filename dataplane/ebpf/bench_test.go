package ebpf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// benchProg measures one program on fresh copies of frame with
// BPF_PROG_TEST_RUN (repeat 1, so every run sees the original packet) and
// reports the kernel-measured ns per packet. The frame comes in through
// "in" (a port inside the domain) and leaves through lo.
func benchProg(b *testing.B, p *ebpf.Program, frame []byte) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d, err := timedRun(p, bytes.Clone(frame), inIfindex)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/pkt")
}

// timedRun runs p once on frame, with an skb context that came in on
// ifindex in and leaves through lo, and returns the kernel's run time
// (Program.Benchmark takes no context, and Program.Run returns no time).
func timedRun(p *ebpf.Program, frame []byte, in uint32) (time.Duration, error) {
	return timedRuns(p, frame, in, 1)
}

// timedRuns is timedRun with the program run repeat times on the one skb
// (each run on what the one before made of it) and the mean time per run.
func timedRuns(p *ebpf.Program, frame []byte, in, repeat uint32) (time.Duration, error) {
	ctx := skbCtx{IngressIfindex: in, Ifindex: 1}
	// union bpf_attr, the BPF_PROG_TEST_RUN member.
	attr := struct {
		progFd, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration, ctxSizeIn, ctxSizeOut uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize, _                uint32
	}{
		progFd: uint32(p.FD()), dataSizeIn: uint32(len(frame)), dataIn: uint64(uintptr(unsafe.Pointer(&frame[0]))),
		repeat: repeat, ctxSizeIn: uint32(unsafe.Sizeof(ctx)), ctxIn: uint64(uintptr(unsafe.Pointer(&ctx))),
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		runtime.KeepAlive(frame)
		runtime.KeepAlive(&ctx)
		switch errno {
		case 0:
			return time.Duration(attr.duration), nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
	}
}

// BenchmarkProgram measures intd_egress's roles against the empty program
// and the floor (bpf/floor.c: the one bpf_skb_adjust_room each role cannot
// avoid, one read of the program's clock, and the sink's room and clock
// read in one program) and two transits that do nothing else (bpf/lean.c:
// transit's own step on the one packet shape, and a transit written by
// hand for that packet with constant offsets), all in the same run: every
// round runs b.N fresh packets through each program in turn, starting one
// program later each round, so that a change of load hits every program
// alike. Per round it takes the mean ns/pkt and the interquartile mean
// (the mean of the middle half of the packets' times: preemptions and
// interrupts, frequent under load, fall outside it). It logs each
// program's mean and each role's cost over the empty program by both, as
// median (min-max) over the rounds, with the load average, and reports the
// medians as metrics.
//
// Every run above is cold: between two packets the syscall and the test
// run's setup evict the program's code and data, and the helpers', from
// the first-level caches. The programs whose second run on one skb does
// the same work (unwatched, transit, transit-least, transit-hand, the
// transit and clock floors) also run three times per skb; their warm
// cost, of the second and third runs, is logged beside the cold one.
//
// With INTD_PROGRAM_BASELINE naming another build of intd_bpfel.o (git
// show REV:dataplane/ebpf/intd_bpfel.o > old.o), every role runs that
// build's intd_egress too, on the same maps (those whose layout is
// unchanged), in the same rounds: before and after side by side, and
// after/before, the ratio of their costs over the empty program round by
// round. Several builds, separated by commas, are baselines 0, 1, ... (test
// builds that each stop at one point of a role, for instance).
// INTD_PROGRAM_LOADS=k loads each role (and baseline) k times and takes
// the mean of the loads per round.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench 'Program$' -benchtime 20000x
func BenchmarkProgram(b *testing.B) {
	const rounds = 7
	roles, tcp80, in := programRoles(b)
	baselines := slices.DeleteFunc(strings.Split(os.Getenv("INTD_PROGRAM_BASELINE"), ","),
		func(p string) bool { return p == "" })
	// Where the JIT puts a program moves its cost by up to about 10 ns
	// from one load to the next: with INTD_PROGRAM_LOADS=k every role and
	// baseline is loaded k times and each round takes the mean of the
	// loads.
	loads := 1
	if v := os.Getenv("INTD_PROGRAM_LOADS"); v != "" {
		var err error
		if loads, err = strconv.Atoi(v); err != nil || loads < 1 {
			b.Fatalf("INTD_PROGRAM_LOADS=%q: want a count of at least 1", v)
		}
	}
	type bcase struct {
		name, over string
		p          *ebpf.Program
		frame      []byte
		repeat     uint32 // runs per skb; 0 is 1
	}
	var old []bcase
	node := func(s setup) *bpfNode {
		n := newBPFNode(b)
		n.setMTU(1500)
		s.apply(b, n)
		return n
	}
	var fl floorObjects
	if err := loadFloorObjects(&fl, nil); err != nil {
		b.Fatal(err)
	}
	defer fl.Close()
	// over names the program a case's cost is taken over ("" none).
	cases := []bcase{
		{"empty", "", fl.FloorEmpty, tcp80, 0},
		{"pass", "empty", node(setup{}).objs.IntdPass, tcp80, 0},
	}
	var more []bcase // the further loads of the roles
	// loaded adds the loads of a role, each made by load: the first to
	// cases (which the report lists), the others to more.
	loaded := func(name string, frame []byte, load func() *ebpf.Program) {
		for k := range loads {
			c := bcase{name, "empty", load(), frame, 0}
			if k == 0 {
				cases = append(cases, c)
			} else {
				more = append(more, c)
			}
		}
	}
	for _, r := range roles {
		loaded(r.name, r.frame, func() *ebpf.Program {
			n := node(r.s)
			for j, path := range baselines {
				old = append(old, bcase{oldName(j, r.name), "empty", loadBaseline(b, n, path), r.frame, 0})
			}
			return n.objs.IntdEgress
		})
		if r.name != "transit" {
			continue
		}
		// The least a transit costs (bpf/lean.c), on a transit node's
		// maps; it must push the hop transit pushes.
		_, want := runProgFrom(b, cases[len(cases)-1].p, bytes.Clone(r.frame), inIfindex)
		loaded("transit-least", r.frame, func() *ebpf.Program {
			ls, err := loadLean()
			if err != nil {
				b.Fatal(err)
			}
			p := loadOn(b, node(r.s), ls, "lean_transit")
			if _, got := runProgFrom(b, p, bytes.Clone(r.frame), inIfindex); len(got) != len(want) || len(got) <= len(r.frame) {
				b.Fatalf("lean_transit made %d bytes of %d, transit %d", len(got), len(r.frame), len(want))
			}
			return p
		})
		// The transit written by hand for this one packet, every offset
		// a constant; it must make transit's bytes.
		loaded("transit-hand", r.frame, func() *ebpf.Program {
			ls, err := loadLean()
			if err != nil {
				b.Fatal(err)
			}
			p := loadOn(b, node(r.s), ls, "hand_transit")
			if _, got := runProgFrom(b, p, bytes.Clone(r.frame), inIfindex); !bytes.Equal(got, want) {
				b.Fatalf("hand_transit made\n%x\nintd_egress\n%x", got, want)
			}
			return p
		})
	}
	cases = append(cases, []bcase{
		{"floor-source", "empty", fl.FloorSourceGrow, tcp80, 0},
		{"floor-transit", "empty", fl.FloorTransitGrow, in, 0},
		{"floor-sink", "empty", fl.FloorSinkShrink, in, 0},
		{"floor-clock", "empty", fl.FloorKtime, tcp80, 0},
		{"floor-sink-clock", "empty", fl.FloorSink, in, 0},
	}...)
	// Warm: the programs whose runs on one skb do the same work again
	// (transit pushes one more hop) also run three times per skb: the
	// second and third runs find the program's code and data, the
	// helper's and the packet in the caches, as back-to-back packets
	// would; the first, like every run above, does not.
	var warm []bcase
	for _, c := range slices.Concat(cases, more) {
		switch c.name {
		case "empty", "unwatched", "transit", "transit-least", "transit-hand", "floor-transit", "floor-clock":
			warm = append(warm, bcase{c.name + warmSuffix, "empty" + warmSuffix, c.p, c.frame, warmRepeat})
		}
	}
	all := slices.Concat(cases, more, old, warm)
	// Per name and round, the mean over the name's loads.
	mean := make(map[string][]float64)
	iq := make(map[string][]float64)
	nloads := make(map[string]float64)
	for _, c := range all {
		mean[c.name], iq[c.name] = make([]float64, rounds), make([]float64, rounds)
		nloads[c.name]++
	}
	load := []float64{load1()}
	ds := make([]float64, b.N)
	for r := range rounds {
		for i := range all {
			c := all[(i+r)%len(all)]
			var total float64
			for k := range b.N {
				d, err := timedRuns(c.p, bytes.Clone(c.frame), inIfindex, max(c.repeat, 1))
				if err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
				ds[k] = float64(d.Nanoseconds())
				total += ds[k]
			}
			mean[c.name][r] += total / float64(b.N) / nloads[c.name]
			slices.Sort(ds)
			mid := ds[b.N/4 : b.N-b.N/4]
			var sum float64
			for _, v := range mid {
				sum += v
			}
			iq[c.name][r] += sum / float64(len(mid)) / nloads[c.name]
		}
		load = append(load, load1())
	}
	over := func(m map[string][]float64, name, base string) spread {
		d := make([]float64, rounds)
		for r := range d {
			d[r] = m[name][r] - m[base][r]
		}
		return medRange(d)
	}
	// ratio is name's cost over base against old's, round by round.
	ratio := func(m map[string][]float64, name, old, base string) ratioSpread {
		d := make([]float64, rounds)
		for r := range d {
			d[r] = (m[name][r] - m[base][r]) / (m[old][r] - m[base][r])
		}
		return ratioSpread(medRange(d))
	}
	// The probe run (b.N 1) measures nothing worth a line.
	logf := func(format string, args ...any) {
		if b.N > 1 {
			b.Logf(format, args...)
		}
	}
	for _, c := range cases {
		m := medRange(mean[c.name])
		b.ReportMetric(m.med, "ns/pkt-"+c.name)
		if c.over == "" {
			l := medRange(load)
			logf("%d rounds of %d packets per program, %d load(s) of each role, load average %.2f (%.2f-%.2f); %s %s ns/pkt (interquartile %s)",
				rounds, b.N, loads, l.med, l.min, l.max, c.name, m, medRange(iq[c.name]))
			continue
		}
		o, oi := over(mean, c.name, c.over), over(iq, c.name, c.over)
		b.ReportMetric(o.med, "ns-over-"+c.over+"-"+c.name)
		b.ReportMetric(oi.med, "iq-ns-over-"+c.over+"-"+c.name)
		line := fmt.Sprintf("%-16s %s ns/pkt, over %s %s, interquartile %s", c.name, m, c.over, o, oi)
		for j := 0; ; j++ {
			old := oldName(j, c.name)
			if _, ok := mean[old]; !ok {
				break
			}
			line += fmt.Sprintf("; baseline %d over %s %s, interquartile %s; after/before %s, interquartile %s", j, c.over,
				over(mean, old, c.over), over(iq, old, c.over), ratio(mean, c.name, old, c.over), ratio(iq, c.name, old, c.over))
		}
		logf("%s", line)
	}
	// The warm cost of a run: of three runs on one skb over the empty
	// program's three, the first costs what the cold run costs.
	logged := map[string]bool{"empty" + warmSuffix: true}
	for _, c := range warm {
		name := strings.TrimSuffix(c.name, warmSuffix)
		if logged[c.name] {
			continue
		}
		logged[c.name] = true
		w := make([]float64, rounds)
		for r := range w {
			cold := iq[name][r] - iq["empty"][r]
			w[r] = (warmRepeat*(iq[c.name][r]-iq[c.over][r]) - cold) / (warmRepeat - 1)
		}
		m := medRange(w)
		b.ReportMetric(m.med, "iq-ns-warm-over-empty-"+name)
		logf("%-16s warm (runs 2-%d of %d on one skb), interquartile ns over empty %s; cold %s", name, warmRepeat, warmRepeat,
			m, over(iq, name, "empty"))
	}
}

// warmRepeat is how many times BenchmarkProgram's warm cases run on one
// skb: transit's third hop still fits the test run's 66 bytes of
// headroom, so no run reallocates the head.
const (
	warmRepeat = 3
	warmSuffix = "-warm"
)

// oldName names the case of baseline j (INTD_PROGRAM_BASELINE's j-th
// file) for role name.
func oldName(j int, name string) string {
	if j == 0 {
		return "old-" + name
	}
	return fmt.Sprintf("old%d-%s", j, name)
}

// programRole is one role BenchmarkProgram measures: the node's setup and
// the packet it runs on.
type programRole struct {
	name  string
	s     setup
	frame []byte
}

// programRoles are the roles of BenchmarkProgram and
// BenchmarkProgramProfile, with tcp80, the TCP packet the source gives
// INT, and in, that packet with INT-MD from two hops before (transit and
// sink).
func programRoles(tb testing.TB) (roles []programRole, tcp80, in []byte) {
	tcp80 = tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 64))
	in = intFrame(tb, tcp80, sai.IntSessionAttrs{MaxHopCount: 8, Instructions: detInst}, 2, false)
	sess := sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID | spec.InstQueue}
	return []programRole{
		{"unwatched", setup{sess: &sess, match: port80()}, tcpFrame("10.0.1.1", "10.0.2.1", 1, 81, 0, make([]byte, 64))},
		{"source", setup{sess: &sess, match: port80()}, tcp80},
		{"transit", setup{}, in},
		{"sink", setup{sink: true}, in},
	}, tcp80, in
}

// loadBaseline loads intd_egress of the object file at path on n's maps,
// those whose key, value and size are unchanged (others are the file's
// own, empty).
func loadBaseline(b *testing.B, n *bpfNode, path string) *ebpf.Program {
	cs, err := ebpf.LoadCollectionSpec(path)
	if err != nil {
		b.Fatal(err)
	}
	return loadOn(b, n, cs, "intd_egress")
}

// loadOn loads the program prog of cs on n's maps, as loadBaseline.
func loadOn(b *testing.B, n *bpfNode, cs *ebpf.CollectionSpec, prog string) *ebpf.Program {
	repl := map[string]*ebpf.Map{}
	maps := reflect.ValueOf(n.objs.intdMaps)
	for i := range maps.NumField() {
		name := maps.Type().Field(i).Tag.Get("ebpf")
		m, ok := maps.Field(i).Interface().(*ebpf.Map)
		ms := cs.Maps[name]
		if !ok || m == nil || ms == nil {
			continue
		}
		info, err := m.Info()
		if err != nil {
			b.Fatal(err)
		}
		// Tail calls stay within the file: its own program arrays.
		if ms.Type != ebpf.ProgramArray && ms.Type == info.Type && ms.KeySize == info.KeySize &&
			ms.ValueSize == info.ValueSize && ms.MaxEntries == info.MaxEntries {
			repl[name] = m
		}
	}
	// prog and the programs it reaches by tail calls; program arrays it
	// does not use are left out.
	keep := map[string]bool{prog: true}
	uses := func(name string) bool {
		for p := range keep {
			for _, ins := range cs.Programs[p].Instructions {
				if ins.Reference() == name {
					return true
				}
			}
		}
		return false
	}
	for more := true; more; {
		more = false
		for name, ms := range cs.Maps {
			if ms.Type != ebpf.ProgramArray || !uses(name) {
				continue
			}
			for _, kv := range ms.Contents {
				if pn, ok := kv.Value.(string); ok && !keep[pn] {
					keep[pn], more = true, true
				}
			}
		}
	}
	for name, ms := range cs.Maps {
		if ms.Type == ebpf.ProgramArray && !uses(name) {
			delete(cs.Maps, name)
		}
	}
	for name := range cs.Programs {
		if !keep[name] {
			delete(cs.Programs, name)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(cs, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		b.Fatalf("%s: %v", prog, err)
	}
	p := coll.DetachProgram(prog)
	for name, ms := range cs.Maps {
		if ms.Type == ebpf.ProgramArray {
			// A program array loses its entries with its last file.
			m := coll.DetachMap(name)
			b.Cleanup(func() { m.Close() })
		}
	}
	coll.Close()
	b.Cleanup(func() { p.Close() })
	return p
}

// spread is a median with its range.
type spread struct{ med, min, max float64 }

func (s spread) String() string { return fmt.Sprintf("%.0f (%.0f-%.0f)", s.med, s.min, s.max) }

// ratioSpread is a spread of ratios.
type ratioSpread spread

func (s ratioSpread) String() string { return fmt.Sprintf("%.3f (%.3f-%.3f)", s.med, s.min, s.max) }

// medRange is the median (min-max) of v.
func medRange(v []float64) spread {
	s := slices.Clone(v)
	slices.Sort(s)
	return spread{s[len(s)/2], s[0], s[len(s)-1]}
}

// loadAvg is the load average /proc/loadavg gives: 1, 5 and 15 minutes.
func loadAvg() string {
	s, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(s))[:3], " ")
}

// load1 is the 1-minute load average.
func load1() float64 {
	v, _ := strconv.ParseFloat(strings.Fields(loadAvg())[0], 64)
	return v
}

// BenchmarkClassifyMiss measures intd_egress on packets of new flows
// (every run a flow cache miss, so the watchlist is classified, and an LRU
// insert) with 1 and with 1024 watchlist entries (NOP, each a TCP
// destination port; the packets match the last one), against a cached
// flow: the cost of classification and whether it depends on the list's
// length. The inner-* runs do the same with tunnel matches: entries on
// the inner TCP destination port of VXLAN traffic; plain TCP packets
// (inner-plain: what turning tunnel matching on costs the rest) and VXLAN
// packets, each a new user flow in one tunnel (inner-vxlan). outer-vxlan
// is inner-vxlan's packets classified on their outer headers only
// (entries on the outer UDP source port, each packet from a new tunnel
// end): what looking inside adds to the same packet.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench ClassifyMiss -benchtime 20000x
func BenchmarkClassifyMiss(b *testing.B) {
	for _, n := range []int{1, maxWatchlist} {
		for _, mode := range []string{"", "inner-plain/", "inner-vxlan/", "outer-vxlan/"} {
			// Set up only for the runs -bench selects.
			name := fmt.Sprintf("entries-%d", n)
			if mode != "" {
				name += "/" + strings.TrimSuffix(mode, "/")
			}
			b.Run(name, func(b *testing.B) {
				node := newBPFNode(b)
				node.setMTU(1500)
				setup{}.apply(b, node)
				frame := classifyBench(b, node, n, mode)
				b.Run("new-flow", func(b *testing.B) {
					frames := make([][]byte, b.N)
					for i := range frames {
						frames[i] = frame(i)
					}
					var total time.Duration
					for i := 0; i < b.N; i++ {
						d, err := timedRun(node.objs.IntdEgress, frames[i], inIfindex)
						if err != nil {
							b.Fatal(err)
						}
						total += d
					}
					b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/pkt")
				})
				b.Run("cached-flow", func(b *testing.B) { benchProg(b, node.objs.IntdEgress, frame(0)) })
			})
		}
	}
}

// BenchmarkClassifyInner is BenchmarkClassifyMiss's entries-1024
// inner-vxlan and outer-vxlan new flows, the two nodes taking turns packet
// by packet, so that both see the same load: ns/pkt of each and their
// ratio, what looking inside costs the same packet.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench ClassifyInner -benchtime 20000x
func BenchmarkClassifyInner(b *testing.B) {
	var nodes [2]*bpfNode
	var frames [2][][]byte
	for j, mode := range []string{"inner-vxlan/", "outer-vxlan/"} {
		nodes[j] = newBPFNode(b)
		nodes[j].setMTU(1500)
		setup{}.apply(b, nodes[j])
		frame := classifyBench(b, nodes[j], maxWatchlist, mode)
		for i := 0; i < b.N; i++ {
			frames[j] = append(frames[j], frame(i))
		}
	}
	b.ResetTimer()
	var total [2]time.Duration
	for i := 0; i < b.N; i++ {
		for j := range nodes {
			d, err := timedRun(nodes[j].objs.IntdEgress, frames[j][i], inIfindex)
			if err != nil {
				b.Fatal(err)
			}
			total[j] += d
		}
	}
	b.ReportMetric(float64(total[0].Nanoseconds())/float64(b.N), "ns/pkt-inner")
	b.ReportMetric(float64(total[1].Nanoseconds())/float64(b.N), "ns/pkt-outer")
	b.ReportMetric(float64(total[0])/float64(total[1]), "inner/outer")
}

// classifyBench gives node BenchmarkClassifyMiss's n entries of mode and
// returns the frame of its i-th flow, which matches the last entry.
func classifyBench(b *testing.B, node *bpfNode, n int, mode string) func(i int) []byte {
	node.Defer() // the maps programmed once
	for i := 0; i < n; i++ {
		ports := sai.PortRange{Lo: uint16(1000 + i), Hi: uint16(1000 + i)}
		m := sai.WatchlistMatch{IPProtocol: sai.IPProtocolTCP, L4DstPort: ports}
		switch {
		case mode == "outer-vxlan/":
			m = sai.WatchlistMatch{IPProtocol: sai.IPProtocolUDP, L4SrcPort: ports}
		case mode == "inner-plain/" && i < n/2:
		case mode != "":
			m = sai.WatchlistMatch{Inner: sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelVXLAN, IPProtocol: sai.IPProtocolTCP, L4DstPort: ports}}
		}
		if _, err := node.Create(sai.WatchlistEntryAttrs{Priority: uint16(n - i), Match: m}); err != nil {
			b.Fatal(err)
		}
	}
	if err := node.Flush(); err != nil {
		b.Fatal(err)
	}
	dport := uint16(1000 + n - 1)
	if mode == "inner-plain/" {
		dport = uint16(1000 + (n-1)/2) // the last outer entry
	}
	return func(i int) []byte {
		src := fmt.Sprintf("10.%d.%d.%d", 1+i>>16, (i>>8)&0xff, i&0xff)
		f := tcpFrame(src, "10.0.2.1", 1234, dport, 0, make([]byte, 64))
		switch mode {
		case "inner-vxlan/":
			f = wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelVXLAN, ID: 5001}, "172.16.0.1", "172.16.0.2", 0, f[wire.EthernetLen:])
		case "outer-vxlan/":
			osrc := fmt.Sprintf("172.%d.%d.%d", 16+i>>16, (i>>8)&0xff, i&0xff)
			f = wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelVXLAN, ID: 5001, SrcPort: uint16(1000 + n - 1)}, osrc, "172.16.0.2", 0, f[wire.EthernetLen:])
		}
		return f
	}
}

// BenchmarkApplyWatchlist measures configuring a watchlist of 1000
// entries through the orchestrator (one Apply, as a gNMI Set does): the
// operations are deferred and the maps programmed once.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench ApplyWatchlist -benchtime 3x
func BenchmarkApplyWatchlist(b *testing.B) {
	var ents []string
	for i := 0; i < 1000; i++ {
		ents = append(ents, fmt.Sprintf(`{"sequence-id": %d, "config": {"sequence-id": %d},
			"match": {"config": {"source-prefix": "10.%d.%d.0/24", "protocol": 6, "destination-port-min": %d, "destination-port-max": %d}},
			"actions": {"config": {"flow-op": "INT", "int-session": "default"}}}`, i+1, i+1, i/256, i%256, 1000+i, 1010+i))
	}
	cfg := strings.Replace(routerConfig(1, "", false), `"int-sessions"`,
		`"watchlist": {"entries": {"entry": [`+strings.Join(ents, ",")+`]}}, "int-sessions"`, 1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d, err := New(Config{NoAttach: true})
		if err != nil {
			b.Fatal(err)
		}
		dev := &gen.Device{}
		if err := gen.Unmarshal([]byte(cfg), dev); err != nil {
			b.Fatal(err)
		}
		o := dtel.New(d)
		b.StartTimer()
		if err := o.Apply(context.Background(), dev); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d.Close()
	}
}

// BenchmarkIperf3 measures TCP throughput h1 -> h2 through r1-r3 (kernel
// forwarding over veth) with the eBPF dataplane off and on; each iteration
// is a 3 s iperf3 run. The ratio on/off is the throughput cost of INT.
// int-off-segmented is int-off with r1 segmenting the stream in software
// (TSO/GSO off on r1-r2), as INT requires: every segment then crosses
// r2, r3 and h2's stack on its own. int-on instruments every packet;
// int-on-1ms, -10ms and -1s instrument one packet of the flow per 1 ms,
// 10 ms or 1 s (watchlist packet-interval), so the other super-packets
// stay whole. int-xd is INT-XD: r1, r2 and r3 watch the flow and send
// postcards for every packet (through the BPF flow filter), without
// touching the packets.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench Iperf3 -benchtime 1x
//
// The routers' flow report filter counts hop-latency changes from
// iperfLatThreshold up (the default, 256 ns, is below the jitter of
// kernel forwarding, so every packet would be reported).
func BenchmarkIperf3(b *testing.B) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Skip("needs iperf3")
	}
	modes := []struct {
		name       string
		intOn      bool
		intervalUs int
		postcards  bool
	}{{"int-off", false, 0, false}, {"int-off-segmented", false, 0, false}, {"int-on", true, 0, false},
		{"int-on-1ms", true, 1000, false}, {"int-on-10ms", true, 10000, false}, {"int-on-1s", true, 1_000_000, false},
		{"int-xd", true, 0, true}}
	for _, m := range modes {
		mode := m.name
		b.Run(mode, func(b *testing.B) {
			e := newE2EMode(b, m.intOn, m.intervalUs, m.postcards, iperfLatThreshold)
			if mode == "int-off-segmented" {
				// Without INT, but r1 segments in software as the GSO
				// detour does: the per-segment forwarding cost alone.
				if err := e.in("r1", func() error {
					return ethtool.SetFeatures("r1-r2", func(f string) bool { return strings.HasSuffix(f, "-segmentation") }, false)
				}); err != nil {
					b.Fatal(err)
				}
			}
			var bps, retr float64
			for i := 0; i < b.N; i++ {
				r, n := iperf3(b, e)
				bps += r
				retr += n
			}
			b.ReportMetric(bps/float64(b.N)/1e9, "Gbit/s")
			b.ReportMetric(retr/float64(b.N), "retransmits/op")
		})
	}
}

// iperfLatThreshold is BenchmarkIperf3's hop-latency threshold, ns.
const iperfLatThreshold = 100_000

// iperf3 runs one 3 s transfer and returns the bits/s received and the
// sender's TCP retransmissions.
func iperf3(b *testing.B, e *e2e) (float64, float64) {
	b.Helper()
	srv := exec.Command("ip", "netns", "exec", e.prefix+"h2", "iperf3", "-s", "-1", "-B", "10.0.2.2")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	time.Sleep(300 * time.Millisecond)
	out := e.exec(b, "h1", "iperf3", "-c", "10.0.2.2", "-t", "3", "-J")
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits float64 `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.Fatalf("iperf3 output: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond, r.End.SumSent.Retransmits
}

// BenchmarkForwardingCost measures the programs' cost per packet in real
// forwarding (warm caches, unlike BenchmarkProgram's one run per syscall):
// the kernel's BPF run-time statistics of intd_egress and intd_ingress on
// r1 (source), r2 (transit) and r3 (sink) during an iperf3 TCP run.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench ForwardingCost -benchtime 1x
func BenchmarkForwardingCost(b *testing.B) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Skip("needs iperf3")
	}
	e := newE2E(b, true)
	st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Skip("BPF run-time statistics unavailable:", err)
	}
	defer st.Close()
	for i := 0; i < b.N; i++ {
		iperf3(b, e)
	}
	for i, role := range []string{"source", "transit", "sink"} {
		for _, p := range []struct {
			name string
			prog *ebpf.Program
		}{{"egress", e.r[i].objs.IntdEgress}, {"ingress", e.r[i].objs.IntdIngress}} {
			s, err := p.prog.Stats()
			if err != nil || s.RunCount == 0 {
				continue
			}
			b.ReportMetric(float64(s.Runtime.Nanoseconds())/float64(s.RunCount), "ns/pkt-"+role+"-"+p.name)
		}
	}
}

// BenchmarkForwardingCostUDP is BenchmarkForwardingCost with warm caches:
// h1 sends 64-byte UDP datagrams to h2 (watched: INT over UDP at r1,
// pushed at r2, stripped at r3), each forwarded through r1-r3 within its
// sendto. intd_pass on h2's ingress gives the baseline under the same
// conditions (the kernel's run-time statistics add their own clock reads
// to every program); "-over-pass" metrics subtract it.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench ForwardingCostUDP -benchtime 200000x
func BenchmarkForwardingCostUDP(b *testing.B) {
	e := newE2E(b, true)
	var pass *ebpf.Program
	if err := e.in("h2", func() error {
		d, err := New(Config{Interfaces: []Interface{{Name: "h2-r3"}}, NoDropTrace: true, NoGSODetour: true})
		if err != nil {
			return err
		}
		b.Cleanup(func() { _ = e.in("h2", d.Close) })
		pass = d.objs.IntdPass
		l, err := netlink.LinkByName("h2-r3")
		if err != nil {
			return err
		}
		return netlink.FilterReplace(&netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
				Handle: filterHandle, Protocol: unix.ETH_P_ALL, Priority: filterPrio},
			Fd: pass.FD(), Name: "intd_pass", DirectAction: true})
	}); err != nil {
		b.Fatal(err)
	}
	var conn *net.UDPConn
	if err := e.in("h1", func() error {
		var err error
		conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 9})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	msg := make([]byte, 64)
	for i := 0; i < 1000; i++ { // warm up: flow cache, filter state
		_, _ = conn.Write(msg)
	}
	st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Skip("BPF run-time statistics unavailable:", err)
	}
	defer st.Close()
	base := func(p *ebpf.Program) (time.Duration, uint64) {
		s, _ := p.Stats()
		return s.Runtime, s.RunCount
	}
	type prog struct {
		name string
		p    *ebpf.Program
		t0   time.Duration
		n0   uint64
		ns   float64
	}
	progs := []*prog{{name: "pass", p: pass}}
	for i, role := range []string{"source", "transit", "sink"} {
		progs = append(progs, &prog{name: role + "-egress", p: e.r[i].objs.IntdEgress}, &prog{name: role + "-ingress", p: e.r[i].objs.IntdIngress})
	}
	for _, p := range progs {
		p.t0, p.n0 = base(p.p)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = conn.Write(msg) // ECONNREFUSED from h2's ICMP errors
	}
	b.StopTimer()
	for _, p := range progs {
		t, n := base(p.p)
		if n > p.n0 {
			p.ns = float64((t - p.t0).Nanoseconds()) / float64(n-p.n0)
		}
		b.ReportMetric(p.ns, "ns/pkt-"+p.name)
	}
	for _, p := range progs[1:] {
		if strings.HasSuffix(p.name, "egress") {
			b.ReportMetric(p.ns-progs[0].ns, "ns/pkt-"+p.name+"-over-pass")
		}
	}
}

package ebpf

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
)

// dropReportConfig turns drop reporting on (the drop tracer then works
// on every drop of the host).
const dropReportConfig = `{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "drop-report": true}},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "10.9.9.1", "report-format": "TELEMETRY_REPORT_V2_0"},
		"collectors": {"collector": [{"address": "10.9.9.2", "port": 32766, "config": {"address": "10.9.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "DROP_REPORT", "config": {"type": "DROP_REPORT", "report-session": "c"}}]}
}}`

// transitDropConfig adds INT transit, which needs the queueing delay
// (intd_xmit attached too).
var transitDropConfig = strings.Replace(dropReportConfig, `"int-endpoint": true,`, `"int-endpoint": true, "int-transit": true,`, 1)

// BenchmarkDropTracerOtherNS measures what intd's drop tracer costs
// traffic that is none of its business: a sender in namespace "a" sends
// 64-byte UDP datagrams as fast as it can through kernel forwarding in
// "fwd" to "b", where no socket listens, so every packet ends in
// kfree_skb (the tracepoint fires once per packet). Each round sends
// 200,000 datagrams with no intd (detached), then with intd running in a
// namespace of its own with drop reporting on (attached); b.N rounds, at
// least 3; "drop" with drop reporting alone (intd_xmit not attached),
// "drop+transit" with INT transit too (both attached). The figure is the sender thread's CPU time per datagram "b"
// counted (Udp NoPorts), which holds the whole path; a third blast, still
// attached, times the tracing programs themselves with the kernel's BPF
// run-time statistics.
//
//	sudo go test ./dataplane/ebpf -run '^$' -bench DropTracerOtherNS -benchtime 5x
func BenchmarkDropTracerOtherNS(b *testing.B) {
	needRoot(b)
	for _, c := range []struct{ name, cfg string }{{"drop", dropReportConfig}, {"drop+transit", transitDropConfig}} {
		b.Run(c.name, func(b *testing.B) { benchTracersOtherNS(b, c.cfg) })
	}
}

func benchTracersOtherNS(b *testing.B, cfg string) {
	prefix := fmt.Sprintf("intdd%d-", os.Getpid()%100000)
	names := []string{"a", "fwd", "b", "own"}
	ns := map[string]netns.NsHandle{}
	b.Cleanup(func() {
		for _, n := range names {
			if h, ok := ns[n]; ok {
				h.Close()
			}
			_ = exec.Command("ip", "netns", "del", prefix+n).Run()
		}
	})
	run := func(n string, args ...string) string {
		b.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", prefix + n}, args...)...).CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %s: %v: %s", n, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, n := range names {
		ipCmd(b, "netns", "add", prefix+n)
		h, err := netns.GetFromName(prefix + n)
		if err != nil {
			b.Fatal(err)
		}
		ns[n] = h
		run(n, "ip", "link", "set", "lo", "up")
	}
	link := func(a, ia, addrA, bn, ib, addrB string) {
		ipCmd(b, "link", "add", ia, "netns", prefix+a, "type", "veth", "peer", "name", ib, "netns", prefix+bn)
		run(a, "ip", "addr", "add", addrA, "dev", ia)
		run(bn, "ip", "addr", "add", addrB, "dev", ib)
		run(a, "ip", "link", "set", ia, "up")
		run(bn, "ip", "link", "set", ib, "up")
	}
	link("a", "a-fwd", "10.7.1.2/24", "fwd", "fwd-a", "10.7.1.1/24")
	link("fwd", "fwd-b", "10.7.2.1/24", "b", "b-fwd", "10.7.2.2/24")
	link("own", "own-x", "10.9.9.1/24", "own", "own-y", "10.9.9.2/24")
	run("a", "ip", "route", "add", "default", "via", "10.7.1.1")
	run("b", "ip", "route", "add", "default", "via", "10.7.2.1")
	run("fwd", "sysctl", "-qw", "net.ipv4.ip_forward=1")
	// b's port-unreachable errors are rate-limited by the kernel (and
	// ignored by the unconnected sender): the cost is forwarding and drop.

	noPorts := func() uint64 {
		out := run("b", "cat", "/proc/net/snmp")
		var v uint64
		_, _ = fmt.Sscan(snmpCounter(out, "Udp:", "NoPorts"), &v)
		return v
	}
	// blast sends n datagrams from a thread of its own and returns the CPU
	// time that thread spent per packet that reached b: sending,
	// forwarding and dropping all run in its system calls (veth hands
	// packets on in the softirq the sender's syscall runs), so the time
	// is the per-packet cost of the path, however busy the machine is.
	blast := func(n int) float64 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, _ := netns.Get()
		defer orig.Close()
		if err := netns.Set(ns["a"]); err != nil {
			b.Fatal(err)
		}
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 7, 1, 2)})
		_ = netns.Set(orig)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		dst := &net.UDPAddr{IP: net.IPv4(10, 7, 2, 2), Port: 9}
		msg := make([]byte, 64)
		for range 1000 { // neighbours resolved
			_, _ = c.WriteToUDP(msg, dst)
		}
		time.Sleep(50 * time.Millisecond)
		n0 := noPorts()
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		for range n {
			_, _ = c.WriteToUDP(msg, dst)
		}
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		time.Sleep(20 * time.Millisecond)
		got := noPorts() - n0
		if got < uint64(n)*9/10 {
			b.Fatalf("b counted %d of %d datagrams", got, n)
		}
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		return float64(cpu.Nanoseconds()) / float64(got)
	}
	inOwn := func(f func()) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, _ := netns.Get()
		defer orig.Close()
		if err := netns.Set(ns["own"]); err != nil {
			b.Fatal(err)
		}
		defer netns.Set(orig)
		f()
	}
	attach := func() *Dataplane {
		var d *Dataplane
		inOwn(func() {
			var err error
			if d, err = New(Config{Interfaces: []Interface{{Name: "own-x"}}, NoGSODetour: true}); err != nil {
				b.Fatal(err)
			}
		})
		dev := &gen.Device{}
		if err := gen.Unmarshal([]byte(cfg), dev); err != nil {
			b.Fatal(err)
		}
		if err := dtel.New(d).Apply(context.Background(), dev); err != nil {
			b.Fatal(err)
		}
		return d
	}
	const n = 200_000
	rounds := max(b.N, 3)
	var off, on []float64
	// The tracing programs' own cost per run, by the kernel's BPF run-time
	// statistics (nearly every run is for the other namespaces' packets),
	// in a third blast: the statistics' clock reads slow every program.
	progNs := map[string][]float64{}
	progRuns := map[string]uint64{}
	for r := range rounds {
		off = append(off, blast(n))
		d := attach()
		on = append(on, blast(n))
		stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			b.Fatal(err)
		}
		progs := tracers(d)
		before := map[string]*ebpf.ProgramStats{}
		for name, p := range progs {
			before[name], _ = p.Stats()
		}
		blast(n)
		for name, p := range progs {
			if s, err := p.Stats(); err == nil {
				progRuns[name] += s.RunCount - before[name].RunCount
			}
			if s, err := p.Stats(); err == nil && s.RunCount > before[name].RunCount {
				progNs[name] = append(progNs[name], float64((s.Runtime-before[name].Runtime).Nanoseconds())/float64(s.RunCount-before[name].RunCount))
			}
		}
		stats.Close()
		inOwn(func() {
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
		})
		b.Logf("round %d: detached %.0f ns/pkt, attached %.0f ns/pkt (load %s)", r+1, off[r], on[r], loadAvg())
	}
	stat := func(v []float64) (float64, float64, float64) {
		m := medRange(v)
		return m.med, m.min, m.max
	}
	m0, lo0, hi0 := stat(off)
	m1, lo1, hi1 := stat(on)
	var ratio []float64
	for i := range off {
		ratio = append(ratio, on[i]/off[i])
	}
	mr, lor, hir := stat(ratio)
	b.Logf("CPU per packet: detached %.0f (%.0f-%.0f) ns, attached %.0f (%.0f-%.0f) ns, attached/detached %.3f (%.3f-%.3f), load %s",
		m0, lo0, hi0, m1, lo1, hi1, mr, lor, hir, loadAvg())
	b.ReportMetric(m0, "cpu-ns/pkt-detached")
	b.ReportMetric(m1, "cpu-ns/pkt-attached")
	b.ReportMetric(mr, "attached/detached")
	for name, runs := range progRuns {
		b.Logf("%s: %d runs in %d blasts of %d datagrams", name, runs, rounds, n)
	}
	for name, v := range progNs {
		m, lo, hi := stat(v)
		b.Logf("%s: %.1f (%.1f-%.1f) ns per run", name, m, lo, hi)
		b.ReportMetric(m, "ns/run-"+name)
	}
}

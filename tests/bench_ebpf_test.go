package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

//go:generate sh -c "clang -O2 -g -fdebug-compilation-dir=. -Wall -Werror -target bpf -I/usr/include/$(uname -m)-linux-gnu -c testdata/gpe_encap.c -o testdata/gpe_encap.o && llvm-strip -g testdata/gpe_encap.o"

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
	// What an encapsulation mode can reach: no intd, s1 puts INT-MD in
	// a VXLAN-GPE encapsulation of every TCP packet (test programs,
	// testdata/gpe_encap.c), GSO copies it onto every segment, s3
	// removes it.
	modeGPE = "INT-MD in VXLAN-GPE, s1 to s3 (test programs)"
	// intd's encapsulation mode: s1's INT session puts every TCP packet
	// into a VXLAN-GPE tunnel to s3 with INT-MD (encapsulation
	// VXLAN_GPE), s2 adds its hop to single packets, s3 reports and
	// removes the tunnel.
	modeTunnel = "INT-MD in a VXLAN-GPE session tunnel, s1 to s3"
)

// gpeEncap attaches (on) or detaches the test encapsulation programs on
// the fabric without intd: gpe_encap on s1's egress to s2, gpe_decap on
// s3's ingress from s2.
func gpeEncap(t *testing.T, f *fabric, on bool) {
	t.Helper()
	obj, err := filepath.Abs("testdata/gpe_encap.o")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct{ sw, dir, sec string }{{"s1", "egress", "tc/encap"}, {"s3", "ingress", "tc/decap"}} {
		dev := map[string]string{"s1": "p2", "s3": "p1"}[a.sw]
		if on {
			f.sh(a.sw, "tc qdisc replace dev "+dev+" clsact && tc filter replace dev "+dev+" "+a.dir+
				" pref 1 handle 1 bpf direct-action obj "+obj+" sec "+a.sec)
		} else {
			f.sh(a.sw, "tc qdisc del dev "+dev+" clsact 2>/dev/null; true")
		}
	}
}

// gpeSuperPackets captures at s2 while run runs and returns the length
// of the largest VXLAN-GPE packet seen (0: none): above the MTU when
// super-packets cross whole with the encapsulation on each.
func gpeSuperPackets(t *testing.T, f *fabric, run func()) int {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	cmd := exec.Command("ip", "netns", "exec", f.ns("s2"), tshark, "-i", "p1", "-n", "-a", "duration:20", "-c", "50",
		"-f", "udp dst port 4790", "-T", "fields", "-e", "frame.len")
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// tshark says when it captures; the rest of what it says is read
	// until it exits.
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		said := []byte{}
		buf := make([]byte, 4096)
		for {
			n, err := stderr.Read(buf)
			if said != nil {
				if said = append(said, buf[:n]...); strings.Contains(string(said), "Capturing on") {
					said = nil
					close(ready)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
	case <-time.After(20 * time.Second):
	}
	run()
	<-done
	cmd.Wait()
	largest := 0
	for _, l := range strings.Fields(out.String()) {
		if n, err := strconv.Atoi(l); err == nil && n > largest {
			largest = n
		}
	}
	return largest
}

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
	case modeTunnel:
		node := cfg["node"].(map[string]any)["config"].(map[string]any)
		switch n {
		case 1:
			node["tunnel-address"] = "10.0.12.1"
			sc := cfg["int-sessions"].(map[string]any)["int-session"].([]any)[0].(map[string]any)["config"].(map[string]any)
			sc["encapsulation"], sc["tunnel-destination"] = "VXLAN_GPE", "10.0.23.3"
		case 3:
			node["tunnel-address"] = "10.0.23.3"
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
// sampled, INT-MD on every packet, the bound of the last: no INT with s1
// segmenting in software, and INT-MD in a VXLAN-GPE session tunnel), and
// with test programs carrying
// INT-MD in a VXLAN-GPE encapsulation from s1 to s3 (what an
// encapsulation mode can reach), interleaved round by round. With
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
	gpe := false
	setGPE := func(on bool) func(t *testing.T) {
		return func(t *testing.T) {
			if gpe != on {
				gpeEncap(t, kernel, on)
				gpe = on
			}
		}
	}
	modes := []benchMode{
		{name: modeNoProgs, setup: setGPE(false), run: func(t *testing.T) float64 { return kernel.iperf3(t, secs) }},
		{name: modeGPE, setup: setGPE(true), run: func(t *testing.T) float64 {
			if full {
				return kernel.iperf3(t, secs)
			}
			// One round checks that super-packets crossed s2 whole, each
			// in the encapsulation.
			var v float64
			n := gpeSuperPackets(t, kernel, func() { v = kernel.iperf3(t, secs) })
			t.Logf("largest VXLAN-GPE packet at s2: %d bytes", n)
			if n <= 1500 {
				t.Errorf("%s: largest VXLAN-GPE packet at s2 %d bytes, want super-packets above the MTU", modeGPE, n)
			}
			return v
		}},
		{name: modeAttached, setup: set(modeAttached), run: run},
		{name: modeXD, setup: set(modeXD), run: run},
		{name: modeMDSampled, setup: set(modeMDSampled), run: run},
		{name: modeMDEvery, setup: set(modeMDEvery), run: run},
		{name: modeTunnel, setup: set(modeTunnel), run: func(t *testing.T) float64 {
			if full {
				return run(t)
			}
			var v float64
			n := gpeSuperPackets(t, e, func() { v = run(t) })
			t.Logf("largest session tunnel packet at s2: %d bytes", n)
			if n <= 1500 {
				t.Errorf("%s: largest VXLAN-GPE packet at s2 %d bytes, want super-packets above the MTU", modeTunnel, n)
			}
			return v
		}},
		{name: modeSegmented, setup: set(modeSegmented), run: run},
	}
	ratios := [][2]string{{modeAttached, modeNoProgs}, {modeXD, modeAttached}, {modeMDSampled, modeAttached},
		{modeMDEvery, modeAttached}, {modeSegmented, modeAttached}, {modeMDEvery, modeSegmented}, {modeGPE, modeNoProgs},
		{modeTunnel, modeNoProgs}, {modeTunnel, modeAttached}, {modeTunnel, modeGPE}}
	r := interleave(t, rounds, modes)
	r.checkShape(t, rounds, ratios)
	if full {
		r.print(os.Stdout, "bench-ebpf: iperf3 TCP h1 -> h2 across 3 switches, MSS 1340, hosts' TSO/GSO on", "Mbit/s", 1e6, ratios)
	}
}

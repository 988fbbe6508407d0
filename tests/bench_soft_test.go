package tests

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// Soft-switch benchmark modes.
const (
	modeLinux   = "Linux forwarding"
	modeVnetFwd = "AF_PACKET forwarder, vnet headers"
	// The forwarder with INT-MD in a VXLAN-GPE tunnel s1 -> s3, sent
	// through TAPs with UDP tunnel GSO (tunfwd_test.go).
	modeTunFwd  = "AF_PACKET forwarder, INT-MD tunnel via TAP"
	modeSoftOff = "intd soft, INT off"
	modeSoftOn  = "intd soft, INT on"
	// INT-MD in a VXLAN-GPE session tunnel s1 -> s3 (sessionTunnelConfig).
	modeSoftTunnel = "intd soft, INT on, session tunnel"
	// h1 sends MSS-sized frames (gso_max_segs 1 on its veth), so both
	// cross the switches segment by segment: INT's own cost.
	modeVnetFwdFrames = "AF_PACKET forwarder, h1 sends frames"
	modeSoftOffFrames = "intd soft, INT off, h1 sends frames"
	modeSoftOnFrames  = "intd soft, INT on, h1 sends frames"
	// The same four intd modes with the binaries of INTD_SOFT_BASELINE.
	baselinePrefix = "baseline "
)

// TestBenchSoft measures iperf3 TCP throughput h1 -> h2 across three
// switches (hosts' TSO/GSO on) forwarding by Linux (ip_forward=1), by a
// minimal AF_PACKET forwarder with vnet headers (vnetFwd), and by intd's
// soft switch with INT off (empty watchlist) and on (the flow watched at
// s1, transit s2, sink s3), the forwarder and intd also with h1 sending
// MSS-sized frames instead of super-packets; each forwarder on its own fabric, the
// modes interleaved round by round. With INTD_BENCH=1 (make bench-soft) it runs
// INTD_BENCH_ROUNDS rounds of INTD_BENCH_SECS seconds and prints the
// ratios; otherwise one one-second round checks that it measures.
// INTD_SOFT_BASELINE names a directory with other intd and intcollector
// binaries (say, built from main): their soft switch then runs in the
// same rounds on a fabric of its own, and each intd mode is compared
// with it.
func TestBenchSoft(t *testing.T) {
	rounds, secs, full := benchParams()
	kernel := buildFabric(t, false, 0)
	fwd := forwarderFabric(t, false)
	// The same forwarders carrying INT-MD in a VXLAN-GPE tunnel from s1
	// to s3 through TAPs with UDP tunnel GSO.
	tun := forwarderFabric(t, true)
	soft := buildFabric(t, true, 0)
	soft.configure(t, false)
	// h1's veth hands TCP super-packets (gso_max_segs 65535, the
	// default) or MSS-sized frames (1).
	segs := map[*fabric]bool{}
	setFrames := func(f *fabric, fr bool) {
		if segs[f] != fr {
			n := "65535"
			if fr {
				n = "1"
			}
			f.ip("-n", f.ns("h1"), "link", "set", "dev", "eth0", "gso_max_segs", n)
			segs[f] = fr
		}
	}
	// What soft is configured with: INT off, on, on in a session tunnel.
	const off, on, tunnel = 0, 1, 2
	watched := off
	setSoftTo := func(to int, fr bool) func(t *testing.T) {
		return func(t *testing.T) {
			if watched != to {
				if to == tunnel {
					soft.configureWith(t, sessionTunnelConfig)
				} else {
					soft.configure(t, to == on)
				}
				watched = to
			}
			setFrames(soft, fr)
		}
	}
	setSoft := func(w, fr bool) func(t *testing.T) {
		if w {
			return setSoftTo(on, fr)
		}
		return setSoftTo(off, fr)
	}
	run := func(t *testing.T) float64 { return soft.iperf3(t, secs) }
	modes := []benchMode{
		{name: modeLinux, run: func(t *testing.T) float64 { return kernel.iperf3(t, secs) }},
		{name: modeVnetFwd, setup: func(*testing.T) { setFrames(fwd, false) }, run: func(t *testing.T) float64 { return fwd.iperf3(t, secs) }},
		{name: modeTunFwd, run: func(t *testing.T) float64 { return tun.iperf3(t, secs) }},
		{name: modeVnetFwdFrames, setup: func(*testing.T) { setFrames(fwd, true) }, run: func(t *testing.T) float64 { return fwd.iperf3(t, secs) }},
		{name: modeSoftOff, setup: setSoft(false, false), run: run},
		{name: modeSoftOn, setup: setSoft(true, false), run: run},
		{name: modeSoftTunnel, setup: setSoftTo(tunnel, false), run: func(t *testing.T) float64 {
			before := sessionCounters(t, soft)
			v := run(t)
			sessionTunnelCovered(t, before, sessionCounters(t, soft))
			return v
		}},
		{name: modeSoftOffFrames, setup: setSoft(false, true), run: run},
		{name: modeSoftOnFrames, setup: setSoft(true, true), run: run},
	}
	ratios := [][2]string{{modeSoftOff, modeVnetFwd}, {modeSoftOff, modeLinux}, {modeSoftOn, modeSoftOff}, {modeSoftTunnel, modeSoftOff},
		{modeSoftOffFrames, modeVnetFwdFrames}, {modeSoftOnFrames, modeSoftOffFrames}, {modeVnetFwd, modeLinux}, {modeTunFwd, modeVnetFwd}}
	if dir := os.Getenv("INTD_SOFT_BASELINE"); dir != "" {
		base := buildFabric(t, false, 0)
		base.bin = dir
		base.startNodes(t, "soft")
		base.configure(t, false)
		baseWatched := false
		for _, m := range []struct {
			name   string
			on, fr bool
		}{{modeSoftOff, false, false}, {modeSoftOn, true, false}, {modeSoftOffFrames, false, true}, {modeSoftOnFrames, true, true}} {
			modes = append(modes, benchMode{name: baselinePrefix + m.name, setup: func(t *testing.T) {
				if baseWatched != m.on {
					base.configure(t, m.on)
					baseWatched = m.on
				}
				setFrames(base, m.fr)
			}, run: func(t *testing.T) float64 { return base.iperf3(t, secs) }})
			ratios = append(ratios, [2]string{m.name, baselinePrefix + m.name})
		}
	}
	r := interleave(t, rounds, modes)
	r.checkShape(t, rounds, ratios)
	if full {
		r.print(os.Stdout, "bench-soft: iperf3 TCP h1 -> h2 across 3 switches, MSS 1340, hosts' TSO/GSO on", "Mbit/s", 1e6, ratios)
	}
}

// forwarderFabric builds the 3-switch lab with a vnetFwd in every switch
// (IP forwarding off), plain or, with tunnel, as the tunnel's source,
// transit and sink.
func forwarderFabric(t *testing.T, tunnel bool) *fabric {
	f := buildFabric(t, false, 0)
	for i, s := range switches {
		f.sh(s, "echo 0 > /proc/sys/net/ipv4/ip_forward")
		left, right := [2]string{"h1", "eth0"}, [2]string{"h2", "eth0"}
		if i > 0 {
			left = [2]string{switches[i-1], "p2"}
		}
		if i < len(switches)-1 {
			right = [2]string{switches[i+1], "p1"}
		}
		role := tunPlain
		if tunnel {
			role = tunSource + i
		}
		startVnetFwd(t, f.lab, s, [2]string{"p1", "p2"}, [2][6]byte{macOf(t, f.lab, left[0], left[1]), macOf(t, f.lab, right[0], right[1])}, role)
	}
	return f
}

// macOf returns the MAC of interface dev in namespace n.
func macOf(t *testing.T, l *lab, n, dev string) (mac [6]byte) {
	t.Helper()
	l.in(n, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			copy(mac[:], ifi.HardwareAddr)
		}
		return err
	})
	return mac
}

// sessionTunnelConfig is intConfig with the watched flow's INT-MD in a
// VXLAN-GPE session tunnel from s1 (tunnel-address 10.0.12.1) to s3
// (10.0.23.3), MSS clamped for it.
func sessionTunnelConfig(n int) []byte {
	var cfg map[string]any
	if err := json.Unmarshal(intConfig(n, true), &cfg); err != nil {
		panic(err)
	}
	node := cfg["node"].(map[string]any)["config"].(map[string]any)
	switch n {
	case 1:
		node["tunnel-address"] = "10.0.12.1"
		s := cfg["int-sessions"].(map[string]any)["int-session"].([]any)[0].(map[string]any)["config"].(map[string]any)
		s["encapsulation"], s["tunnel-destination"], s["clamp-tcp-mss"] = "VXLAN_GPE", "10.0.23.3", true
	case 3:
		node["tunnel-address"] = "10.0.23.3"
	}
	b, _ := json.Marshal(cfg)
	return b
}

// sessionCounters reads the counters of s1's INT session md over gNMI.
func sessionCounters(t *testing.T, f *fabric) map[string]uint64 {
	t.Helper()
	p := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "int-sessions"},
		{Name: "int-session", Key: map[string]string{"name": "md"}}, {Name: "state"}, {Name: "counters"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := f.sw["s1"].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "s1"}, Path: []*gpb.Path{p}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("gNMI Get of s1's session counters: %v", err)
	}
	c := map[string]uint64{}
	for _, n := range r.GetNotification() {
		for _, u := range n.GetUpdate() {
			var m map[string]any
			if json.Unmarshal(u.GetVal().GetJsonIetfVal(), &m) != nil {
				continue
			}
			for k, v := range m {
				if _, name, ok := strings.Cut(k, ":"); ok {
					k = name
				}
				switch v := v.(type) {
				case string: // counter64 in JSON_IETF
					c[k], _ = strconv.ParseUint(v, 10, 64)
				case float64:
					c[k] = uint64(v)
				}
			}
		}
	}
	return c
}

// sessionTunnelCovered fails unless s1 put the run's packets into the
// session tunnel: some initiated, at most 1 % left without INT.
func sessionTunnelCovered(t *testing.T, before, after map[string]uint64) {
	t.Helper()
	in := after["packets-initiated"] - before["packets-initiated"]
	out := after["packets-not-initiated"] - before["packets-not-initiated"]
	t.Logf("s1's session tunnel: %d packets (super-packets counted once) initiated, %d not", in, out)
	if in == 0 || out*100 > in+out {
		t.Errorf("s1's session tunnel: %d packets initiated, %d not (counters %v): want INT on >= 99 %%", in, out, after)
	}
}

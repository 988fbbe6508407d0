package ebpf

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// tunnelFrames are packets in each INT tunnel encapsulation, without INT:
// VXLAN-GPE and Geneve over IPv4 and IPv6 (UDP with and without a
// checksum), GRE over IPv4 (with a key), each carrying an inner IPv4 TCP
// segment.
func tunnelFrames(t *testing.T) map[string][]byte {
	inner := tcpFrame("192.168.1.1", "192.168.2.1", 1234, 80, 0, []byte("inner payload"))[wire.EthernetLen:]
	gpe := make([]byte, wire.VXLANLen, 64)
	if err := (wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: 1, VNI: 42}).Put(gpe); err != nil {
		t.Fatal(err)
	}
	gpe = append(gpe, inner...)
	gen := make([]byte, wire.GeneveLen+8, 64) // one 8-byte option of another class first
	if err := (wire.Geneve{OptLen: 2, Protocol: 0x0800, VNI: 42}).Put(gen); err != nil {
		t.Fatal(err)
	}
	copy(gen[wire.GeneveLen:], []byte{0x01, 0x02, 0x05, 0x01, 0xaa, 0xbb, 0xcc, 0xdd})
	gen = append(gen, inner...)
	gre := []byte{0x20, 0, 0x08, 0, 0, 0, 0, 7} // key 7, IPv4
	gre = append(gre, inner...)
	const a4, b4, a6, b6 = "10.0.1.1", "10.0.2.1", "2001:db8:1::1", "2001:db8:2::1"
	return map[string][]byte{
		"VXLAN-GPE over IPv4":                 udpFrame(a4, b4, 0xc001, spec.PortVXLANGPE, gpe, true),
		"VXLAN-GPE over IPv6":                 udpFrame(a6, b6, 0xc001, spec.PortVXLANGPE, gpe, true),
		"Geneve over IPv4, no UDP checksum":   udpFrame(a4, b4, 0xc002, spec.PortGeneve, gen, false),
		"Geneve over IPv6":                    udpFrame(a6, b6, 0xc002, spec.PortGeneve, gen, true),
		"GRE over IPv4":                       ipv4Frame(a4, b4, wire.ProtoGRE, 0, gre, false),
		"GRE over IPv4, INT-MX (no transits)": ipv4Frame(a4, b4, wire.ProtoGRE, 0, gre, false),
	}
}

// TestTunnelRoles runs a packet in each tunnel through source, two
// transits and a sink of both backends: every step's output must be the
// same bytes on both, carry INT in the tunnel header with the expected
// number of hops, and the sink must give back the original packet and
// report the same frame with the stack (its own hop pushed) found in the
// tunnel.
func TestTunnelRoles(t *testing.T) {
	all := sai.WatchlistMatch{} // every packet
	for name, orig := range tunnelFrames(t) {
		t.Run(name, func(t *testing.T) {
			sess := mdSession
			hops := []int{1, 2, 3}
			if bytes.Contains([]byte(name), []byte("INT-MX")) {
				sess = sai.IntSessionAttrs{Mode: sai.IntModeMX, Instructions: detInst}
				hops = []int{0, 0, 0}
			}
			step := func(s setup, in []byte, wantHops int) []byte {
				t.Helper()
				outs := [][]byte{sameOnBoth(t, s, in)}
				if wantHops < 0 {
					return outs[0]
				}
				p := tunnelParser()
				var pk wire.Packet
				if err := p.Parse(outs[0], &pk); err != nil || pk.INT < 0 {
					t.Fatalf("no INT after the step (%v): %x", err, outs[0])
				}
				if pk.Encap == spec.EncapDSCP || pk.Encap == spec.EncapUDPPort {
					t.Fatalf("INT over L4, not in the tunnel: %+v", pk)
				}
				if pk.INTType == spec.TypeMD {
					_, st, err := wire.DecodeMD(outs[0][pk.INT:pk.INT+pk.INTLen], 0)
					if err != nil || st.Count() != wantHops {
						t.Fatalf("hops %d, want %d (%v)", st.Count(), wantHops, err)
					}
				}
				return outs[0]
			}
			src := step(setup{sess: &sess, match: all, dt: withGRE}, orig, hops[0])
			tr := step(setup{dt: withGRE}, src, hops[1])
			tr = step(setup{dt: withGRE}, tr, hops[2])
			// The sink gives back the original packet and reports the
			// INT it removed, found in the tunnel.
			var reported [][]byte
			for _, n := range nodes(t, setup{sink: true, dt: withGRE}) {
				if back := n.process(t, bytes.Clone(tr)); !bytes.Equal(back, orig) {
					t.Fatalf("%s: sink:\n got %x\nwant %x", n.name(), back, orig)
				}
				rec := recorderOf(n)
				evs := rec.wait(t, 1)
				if len(evs) != 1 || evs[0].INT < 0 {
					t.Fatalf("%s: sink events %+v", n.name(), evs)
				}
				ev := evs[0]
				var pk wire.Packet
				if err := tunnelParser().Parse(ev.Packet, &pk); err != nil || pk.INT != ev.INT {
					t.Fatalf("%s: reported frame: INT at %d, event says %d (%v)", n.name(), pk.INT, ev.INT, err)
				}
				if pk.INTType == spec.TypeMD { // source, two transits and the sink's own hop
					if _, st, err := wire.DecodeMD(ev.Packet[pk.INT:pk.INT+pk.INTLen], 0); err != nil || st.Count() != 4 {
						t.Fatalf("%s: reported stack: %d hops, %v", n.name(), st.Count(), err)
					}
				}
				reported = append(reported, ev.Packet)
			}
			if !bytes.Equal(reported[0], reported[1]) {
				t.Fatalf("reported frames differ:\nsoft %x\nebpf %x", reported[0], reported[1])
			}
		})
	}
}

// testGREProto is the GRE protocol type announcing INT in these tests
// (the spec leaves it to the domain): an IEEE local experimental EtherType.
const testGREProto = 0x88b5

// withGRE turns on INT over GRE; VXLAN-GPE and Geneve are on by default.
func withGRE(a *sai.DTelAttrs) { a.GREProtocolType = testGREProto }

// tunnelParser finds INT in the tunnels as the test nodes are configured.
func tunnelParser() *wire.Parser {
	return &wire.Parser{VXLANGPEPort: spec.PortVXLANGPE, GenevePort: spec.PortGeneve, GREProto: testGREProto}
}

// TestProbeMarker: INT over TCP and UDP announced by a 64-bit probe marker
// after the L4 header (DSCP marking off): the source's output is what wire
// builds, transit and sink agree on both backends, and the sink gives back
// the original packet.
func TestProbeMarker(t *testing.T) {
	const marker = 0x1234_5678_9abc_def0
	probe := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.ProbeMarker = marker
	}
	for name, orig := range map[string][]byte{
		"TCP over IPv4": tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("probe-marked payload")),
		"UDP over IPv6": udpFrame("2001:db8:1::1", "2001:db8:2::1", 4321, 80, []byte("probe-marked payload"), true),
	} {
		t.Run(name, func(t *testing.T) {
			step := func(s setup, in []byte) []byte {
				t.Helper()
				s.dt = probe
				var outs [][]byte
				for _, n := range nodes(t, s) {
					outs = append(outs, n.process(t, bytes.Clone(in)))
				}
				if outs[0] == nil || !bytes.Equal(outs[0], outs[1]) {
					t.Fatalf("soft and ebpf differ:\n soft %x\nebpf %x", outs[0], outs[1])
				}
				return outs[0]
			}
			match := sai.WatchlistMatch{}
			src := step(setup{sess: &mdSession, match: match}, orig)
			if want := insertINT(t, orig, mdSession, wire.SourceOptions{Encap: spec.EncapProbeMarker, ProbeMarker: marker}); !bytes.Equal(src, want) {
				t.Fatalf("source:\n got %x\nwant %x", src, want)
			}
			tr := step(setup{}, src)
			var pk wire.Packet
			if err := (&wire.Parser{ProbeMarker: marker}).Parse(tr, &pk); err != nil || pk.Encap != spec.EncapProbeMarker {
				t.Fatalf("transit output: %+v %v", pk, err)
			}
			if _, st, err := wire.DecodeMD(tr[pk.INT:pk.INT+pk.INTLen], 0); err != nil || st.Count() != 2 {
				t.Fatalf("transit: %d hops, %v", st.Count(), err)
			}
			if back := step(setup{sink: true}, tr); !bytes.Equal(back, orig) {
				t.Fatalf("sink:\n got %x\nwant %x", back, orig)
			}
		})
	}
}

// TestEndToEndVXLANGPE: h1 and h2 talk through a kernel VXLAN-GPE tunnel
// (ip link type vxlan gpe, routes with lightweight tunnel encap) across
// r1-r3: r1 puts INT into the tunnel's packets (GPE next protocol INT,
// the shim keeping IPv4), r2 pushes its hop, r3 removes it before h2's
// VXLAN device decapsulates. UDP and 1 MiB of TCP (GSO super-packets
// segmented through the detour) arrive intact and r3 reports the path 3,
// 2, 1 found in the tunnel. With the tunnel MTU lowered for INT every
// tunnel packet from h1 carries it; at the full MTU (1450 on a 1500-byte
// underlay) the detour lowers the super-packets' inner GSO size so that
// their segments do too (only full-size packets sent whole may not).
func TestEndToEndVXLANGPE(t *testing.T) {
	t.Run("MTU with room for INT", func(t *testing.T) { vxlanGPE(t, "1350", true) })
	t.Run("full MTU", func(t *testing.T) { vxlanGPE(t, "1450", false) })
}

func vxlanGPE(t *testing.T, mtu string, all bool) {
	l := newLab(t)
	for _, h := range []struct{ ns, remote, addr, peer string }{
		{"h1", "10.0.2.2", "192.168.100.1", "192.168.100.2"}, {"h2", "10.0.1.2", "192.168.100.2", "192.168.100.1"},
	} {
		l.exec(t, h.ns, "ip", "link", "add", "vx0", "type", "vxlan", "gpe", "external", "dstport", "4790")
		l.exec(t, h.ns, "ip", "link", "set", "vx0", "mtu", mtu, "up")
		l.exec(t, h.ns, "ip", "addr", "add", h.addr+"/32", "dev", "vx0")
		l.exec(t, h.ns, "ip", "route", "add", h.peer+"/32", "encap", "ip", "id", "42", "dst", h.remote, "dev", "vx0")
	}
	gpe := func(cfg string) string {
		return strings.Replace(cfg, `"vxlan-gpe-next-protocol": 0`, `"vxlan-gpe-next-protocol": 130`, 1)
	}
	rec3 := &recorder{}
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, gpe(routerConfig(1, "", true)))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, gpe(routerConfig(2, "", false)))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, rec3, gpe(routerConfig(3, "r3-h2", false)))

	l.udpOnce(t, "udp4", "192.168.100.2:9999", []byte("hello over INT in VXLAN-GPE"))
	l.tcpEcho(t, "tcp4", "192.168.100.2:9998", r)
	// The last packets may still be on their way: counts settle.
	var cnt [3]uint64
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for i, d := range r {
			s, _ := d.Stats(context.Background())
			cnt[i] = [3]uint64{s.Node.IntInserted, s.Node.IntTransited, s.Node.IntStripped}[i]
		}
		if cnt[0] != 0 && cnt[1] == cnt[0] && cnt[2] == cnt[0] {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("inserted at r1 %d, transited at r2 %d, stripped at r3 %d", cnt[0], cnt[1], cnt[2])
		}
	}
	s, _ := r[0].Stats(context.Background())
	for _, ss := range s.IntSessions {
		t.Logf("r1 session %+v", ss)
		if all && ss.NotInitiated() != 0 || ss.NotInitiated() > ss.PacketsInitiated/10 {
			t.Fatalf("r1 session: %+v", ss)
		}
	}
	if det := r[0].rawCounters(0)[intdCounterC_GSO] + r[0].rawCounters(1)[intdCounterC_GSO] + r[0].rawCounters(2)[intdCounterC_GSO]; det == 0 {
		t.Fatal("no tunnel GSO super-packet took the detour")
	}
	for _, ev := range rec3.wait(t, 1) {
		if ev.Kind != report.KindFlow || ev.INT < 0 {
			continue
		}
		var pk wire.Packet
		if err := (&wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}).Parse(ev.Packet, &pk); err != nil || pk.Encap != spec.EncapVXLANGPE {
			t.Fatalf("report frame: %+v %v", pk, err)
		}
		path, err := nodePath(ev.Packet, pk.INT, pk.INTLen)
		if err != nil {
			t.Fatal(err)
		}
		if len(path) == 3 && path[0] == 3 && path[1] == 2 && path[2] == 1 {
			t.Logf("inserted %d transited %d stripped %d; report path %v", cnt[0], cnt[1], cnt[2], path)
			return
		}
	}
	t.Fatalf("no report with the path 3, 2, 1 in the VXLAN-GPE tunnel at r3 (%d events)", len(rec3.wait(t, 0)))
}

// TestGeneveHopRoom: a source caps Remaining Hop Count at what fits in the
// 31-word Geneve option, so the hop that finds the option full sets E
// (hop count exceeded), and M keeps meaning "MTU exceeded".
func TestGeneveHopRoom(t *testing.T) {
	frames := tunnelFrames(t)
	orig := frames["Geneve over IPv6"]
	hopML := wire.Instructions(mdSession.Instructions).Words() // 5 words: 5 hops after the 3-word header
	limit := wire.GeneveHopLimit(hopML, 2)
	if limit != (31-3)/hopML {
		t.Fatalf("GeneveHopLimit(%d, 2) = %d", hopML, limit)
	}
	hdr := func(f []byte) wire.MDHeader {
		t.Helper()
		var pk wire.Packet
		if err := tunnelParser().Parse(f, &pk); err != nil || pk.INT < 0 {
			t.Fatalf("no INT: %v", err)
		}
		h, err := wire.DecodeMDHeader(f[pk.INT:])
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	f := sameOnBoth(t, setup{sess: &mdSession, match: sai.WatchlistMatch{}}, orig)
	if h := hdr(f); int(h.RemainingHops) != limit-1 || mdSession.MaxHopCount <= uint8(limit) {
		t.Fatalf("after the source: Remaining Hop Count %d, want %d", h.RemainingHops, limit-1)
	}
	for i := 1; i < limit; i++ {
		f = sameOnBoth(t, setup{}, f)
	}
	f = sameOnBoth(t, setup{}, f) // the option is full: E, not M
	if h := hdr(f); !h.HopCountExceeded || h.MTUExceeded || h.RemainingHops != 0 {
		t.Fatalf("last hop: %+v, want E without M", h)
	}
}

// sameOnBoth runs in through both backends configured by s and returns
// what leaves, failing when either drops it or they differ.
func sameOnBoth(t *testing.T, s setup, in []byte) []byte {
	t.Helper()
	var outs [][]byte
	for _, n := range nodes(t, s) {
		out := n.process(t, bytes.Clone(in))
		if out == nil {
			t.Fatalf("%s: dropped", n.name())
		}
		outs = append(outs, out)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("soft and ebpf differ:\n soft %x\nebpf %x", outs[0], outs[1])
	}
	return outs[0]
}

package soft

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

const greINT = 0x88b6 // TBD_INT for the tests

// TestMarkingsAndTunnels runs INT-MD end to end over every marking and
// tunnel type: s1 inserts, s2 pushes, s3 strips, h2 gets the original.
func TestMarkingsAndTunnels(t *testing.T) {
	innerTCP := tcpFrame("192.168.0.1", "192.168.0.2", 5555, 80, 0, []byte("inner payload"))
	cases := []struct {
		name   string
		dtel   func(a *sai.DTelAttrs)
		frame  []byte
		parser wire.Parser
		encap  spec.Encap
	}{
		{"dscp", func(a *sai.DTelAttrs) {}, tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 5, []byte("tcp")),
			wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}, spec.EncapDSCP},
		{"udp-npt1", func(a *sai.DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTUDPPort },
			udpFrame("10.0.1.1", "10.0.2.1", 1, 53, []byte("udp"), true), wire.Parser{UDPPort: 5000}, spec.EncapUDPPort},
		{"udp-npt1-tcp-gets-npt2", func(a *sai.DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTUDPPort },
			tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("tcp")), wire.Parser{UDPPort: 5000}, spec.EncapUDPPort},
		{"udp-npt2-tcp", func(a *sai.DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTIPProto },
			tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("tcp")), wire.Parser{UDPPort: 5000}, spec.EncapUDPPort},
		{"udp-npt2-udp", func(a *sai.DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = 5000, spec.NPTIPProto },
			udpFrame("10.0.1.1", "10.0.2.1", 1, 53, []byte("udp!"), true), wire.Parser{UDPPort: 5000}, spec.EncapUDPPort},
		{"probe", func(a *sai.DTelAttrs) { a.ProbeMarker = 0xaaaa_aaaa_bbbb_bbbb },
			tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 9, []byte("tcp")), wire.Parser{ProbeMarker: 0xaaaa_aaaa_bbbb_bbbb}, spec.EncapProbeMarker},
		{"gre", func(a *sai.DTelAttrs) { a.GREProtocolType = greINT },
			greFrame("10.0.1.1", "10.0.2.1", innerTCP[wire.EthernetLen:]), wire.Parser{GREProto: greINT}, spec.EncapGRE},
		{"vxlan-gpe", func(a *sai.DTelAttrs) {},
			tunnelFrame("gpe", "10.0.1.1", "10.0.2.1", 42, innerTCP, true), wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}, spec.EncapVXLANGPE},
		{"vxlan-gpe-nocsum", func(a *sai.DTelAttrs) {},
			tunnelFrame("gpe", "10.0.1.1", "10.0.2.1", 42, innerTCP, false), wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}, spec.EncapVXLANGPE},
		{"geneve", func(a *sai.DTelAttrs) {},
			tunnelFrame("geneve", "10.0.1.1", "10.0.2.1", 42, innerTCP, true), wire.Parser{GenevePort: spec.PortGeneve}, spec.EncapGeneve},
	}
	for _, tc := range cases {
		for _, mode := range []sai.IntMode{sai.IntModeMD, sai.IntModeMX} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				sa := sai.DefaultIntSessionAttrs()
				sa.Mode = mode
				sa.Instructions |= spec.InstQueue | spec.InstEgressTimestamp
				l := newLine(t, lineOpts{session: sa, dtel: func(i int, a *sai.DTelAttrs) {
					a.IntL4DSCP = sai.DSCPMatch{}
					if tc.name == "dscp" {
						a.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
					}
					tc.dtel(a)
				}})
				l.send(tc.frame)
				for i, want := range []int{1, 2} {
					f := l.taps[i].last(t)
					p := parse(t, &tc.parser, f)
					if p.Encap != tc.encap || !p.HasINT() {
						t.Fatalf("s%d output: encap %v INT %v", i+1, p.Encap, p.HasINT())
					}
					if !wire.VerifyL4Checksum(f, &p) || wire.IPv4HeaderChecksum(f[14:34]) != uint16(f[24])<<8|uint16(f[25]) {
						t.Fatalf("s%d output: bad checksum", i+1)
					}
					if mode == sai.IntModeMX {
						continue
					}
					_, st, err := wire.DecodeMD(f[p.INT:p.INT+p.INTLen], 0)
					if err != nil || st.Count() != want {
						t.Fatalf("s%d output: %d hops (%v), want %d", i+1, st.Count(), err, want)
					}
				}
				if got, want := l.h2().last(t), expectTTL(tc.frame, 3); !bytes.Equal(got, want) {
					t.Fatalf("h2 got\n%x\nwant\n%x", got, want)
				}
				// MD: one report at the sink; MX: one per hop.
				n := 0
				for _, r := range l.rec {
					n += len(r.kind(report.KindFlow))
				}
				if want := map[sai.IntMode]int{sai.IntModeMD: 1, sai.IntModeMX: 3}[mode]; n != want {
					t.Fatalf("%d flow reports, want %d", n, want)
				}
				ev := l.rec[2].kind(report.KindFlow)[0]
				if ev.Flow.DstPort != 80 && ev.Flow.DstPort != 53 {
					t.Fatalf("report flow %+v is not the original flow", ev.Flow)
				}
			})
		}
	}
}

// TestUnchangedBytes checks that unwatched flows and non-INT traffic cross
// the fabric untouched, and with NoTTLDecrement bit for bit.
func TestUnchangedBytes(t *testing.T) {
	l := newLine(t, lineOpts{match: port80()})
	frames := [][]byte{
		tcpFrame("10.0.1.1", "10.0.2.1", 1, 443, 3, []byte("not watched")),
		udpFrame("10.0.1.1", "10.0.2.1", 1, 53, []byte("dns?"), false),
		tunnelFrame("vxlan", "10.0.1.1", "10.0.2.1", 7, tcpFrame("1.1.1.1", "2.2.2.2", 1, 2, 0, nil), true),
		tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 3, []byte("watched")),
	}
	for _, f := range frames {
		l.send(f)
		if got := l.h2().last(t); !bytes.Equal(got, expectTTL(f, 3)) {
			t.Fatalf("h2 got\n%x\nwant\n%x", got, expectTTL(f, 3))
		}
	}
	// Bump-in-the-wire switches: exact bytes.
	sw, err := New(Config{Name: "bw", Clock: NewManualClock(0), NoTTLDecrement: true,
		Ports:  []PortConfig{{Name: "a"}, {Name: "b"}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Ports: []string{"b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	sw.SetLink(1, c)
	for _, f := range frames {
		sw.Receive(0, f)
		if !bytes.Equal(c.last(t), f) {
			t.Fatal("bump in the wire changed bytes")
		}
	}
}

func TestVXLANInnerMatchPostcard(t *testing.T) {
	l := newLine(t, lineOpts{
		match: sai.WatchlistMatch{Inner: sai.InnerMatch{Enabled: true, TunnelID: 5,
			DstPrefix: netip.MustParsePrefix("192.168.7.0/24"), IPProtocol: sai.IPProtocolTCP,
			L4DstPort: sai.PortRange{Lo: 22, Hi: 22}}},
		action: func(a *sai.WatchlistAction) { a.FlowOp = sai.FlowOpPostcard },
	})
	in := tcpFrame("192.168.7.1", "192.168.7.2", 1000, 22, 0, nil)
	watched := tunnelFrame("vxlan", "10.0.1.1", "10.0.2.1", 5, in, true)
	other := tunnelFrame("vxlan", "10.0.1.1", "10.0.2.1", 6, in, true)
	for i := 0; i < 3; i++ {
		l.send(watched)
		l.send(other)
	}
	evs := l.rec[0].kind(report.KindFlow)
	if len(evs) != 3 || evs[0].Flow.DstPort != 22 {
		t.Fatalf("%d postcards, flow %+v", len(evs), evs)
	}
	st, _ := l.sw[0].Stats(t.Context())
	if st.Watchlist[l.entry].MatchedPackets != 3 || st.Node.Postcards != 3 {
		t.Fatalf("watchlist %+v postcards %d", st.Watchlist, st.Node.Postcards)
	}
	if got := l.h2().last(t); !bytes.Equal(got, expectTTL(other, 3)) {
		t.Fatal("postcard flow modified")
	}
}

package collector

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// intBlock is an INT-MD header and the stack of testHops.
func intBlock(t *testing.T) []byte {
	hops := testHops()
	hl := testInst.Words() * 4
	b := make([]byte, wire.MDHeaderLen+len(hops)*hl)
	must(t, wire.MDHeader{Version: 2, HopML: uint8(testInst.Words()), RemainingHops: 5, Instructions: testInst}.Put(b))
	for i := range hops {
		_, err := wire.PutHop(b[wire.MDHeaderLen+i*hl:], testInst, 0, &hops[i])
		must(t, err)
	}
	return b
}

// TestCollectorGREAndProbe aggregates sink reports embedding INT over GRE
// and INT after a probe marker: with the markings configured, the flow's
// path comes from the stack.
func TestCollectorGREAndProbe(t *testing.T) {
	in := intBlock(t)
	g := make([]byte, 4+wire.ShimLen)
	must(t, wire.PutGRE(g, 0x88b6))
	must(t, wire.GREShim{Type: spec.TypeMD, Length: uint8(len(in) / 4), NextProto: wire.EtherTypeIPv4}.Put(g[4:]))
	inner := wiretest.UDPFrame("192.0.2.1", "192.0.2.2", 7, 8, nil, false)
	gre := wiretest.IPFrame("10.0.0.1", "10.0.0.2", wire.ProtoGRE, 0, append(append(g, in...), inner[wire.EthernetLen:]...), false)

	var pm [wire.ProbeLen + wire.ShimLen]byte
	binary.BigEndian.PutUint64(pm[:], 0x1122334455667788)
	must(t, wire.Shim{Type: spec.TypeMD, Length: uint8(len(in) / 4)}.Put(pm[wire.ProbeLen:]))
	udp := append(make([]byte, wire.UDPLen), append(pm[:], in...)...)
	must(t, wire.UDPHeader{SrcPort: 3000, DstPort: 4000, Length: uint16(len(udp))}.Put(udp))
	probe := wiretest.IPFrame("10.0.0.3", "10.0.0.4", wire.ProtoUDP, 0, udp, false)

	for _, configured := range []bool{false, true} {
		c := New(Config{})
		if configured {
			c.Decoder().Parser.GREProto = 0x88b6
			c.Decoder().Parser.ProbeMarker = 0x1122334455667788
		}
		for i, f := range [][]byte{gre, probe} {
			b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(i), NodeID: 4})
			h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, RepMdBits: wire.RepHopLatency}
			b, _ = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: 4000}, nil, f)
			c.HandlePacket(b, 1)
		}
		// Configured, INT in the GRE header keys the flow on the inner
		// packet, as the nodes do; unconfigured, GRE is the flow.
		greKey, greTun := wire.FlowKey{Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2"), Proto: wire.ProtoGRE}, wire.TunnelNone
		if configured {
			greKey, greTun = wire.FlowKey{Src: mustAddr("192.0.2.1"), Dst: mustAddr("192.0.2.2"), Proto: wire.ProtoUDP, SrcPort: 7, DstPort: 8}, wire.TunnelGRE
		}
		for i, k := range []wire.FlowKey{
			greKey,
			{Src: mustAddr("10.0.0.3"), Dst: mustAddr("10.0.0.4"), Proto: wire.ProtoUDP, SrcPort: 3000, DstPort: 4000},
		} {
			tun := wire.TunnelNone
			if i == 0 {
				tun = greTun
			}
			f, ok := c.TunnelFlow(k, tun, 0)
			if !ok {
				t.Fatalf("configured %v: no flow %v", configured, k)
			}
			want := 1 // the sink alone
			if configured {
				want = 4
			}
			if f.NHops != want {
				t.Errorf("configured %v: flow %v has %d hops, want %d", configured, k, f.NHops, want)
			}
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

package wire_test

import (
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// TestParserNoINT: a parser for packets from outside the INT domain finds
// no INT however the packet is marked, and still finds its tunnel header.
func TestParserNoINT(t *testing.T) {
	insert := func(f []byte, opt wire.SourceOptions) []byte { return sourceINT(t, f, opt) }
	tcp := wiretest.TCPFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("x"))
	udp := wiretest.UDPFrame("10.0.1.1", "10.0.2.1", 1, 53, []byte("x"), true)
	gpe := wiretest.UDPFrame("10.0.1.1", "10.0.2.1", 1, spec.PortVXLANGPE, []byte{wire.GPEFlagI | wire.GPEFlagP, 0, 0, spec.VXLANGPENextProtoINT,
		0, 0, 1, 0, 0x10, 3, 0, 3, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	marked := &wire.Parser{DSCP: 0x17, DSCPMask: 0x3f, UDPPort: 5000, VXLANGPEPort: spec.PortVXLANGPE}
	edge := *marked
	edge.NoINT = true
	for _, c := range []struct {
		name string
		f    []byte
		tun  bool
	}{
		{"DSCP", insert(tcp, wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f}), false},
		{"UDP port", insert(udp, wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTUDPPort}), false},
		{"VXLAN-GPE", gpe, true},
	} {
		var p wire.Packet
		if err := marked.Parse(c.f, &p); err != nil || p.INT < 0 {
			t.Fatalf("%s: the marked parser finds no INT: %v", c.name, err)
		}
		if err := edge.Parse(c.f, &p); err != nil || p.INT >= 0 || (p.Tunnel >= 0) != c.tun {
			t.Errorf("%s: NoINT parser: err %v, INT at %d, tunnel at %d", c.name, err, p.INT, p.Tunnel)
		}
	}
}

// TestParseInnerPastL4INT: INT over UDP inserted in a GTP-U G-PDU (DSCP
// or probe marker) sits between the UDP and GTP-U headers; a parser with
// PastL4INT finds the TEID and the user's flow behind it, one without
// does not look there.
func TestParseInnerPastL4INT(t *testing.T) {
	inner := wiretest.UDPFrame("10.250.0.1", "192.0.2.53", 4000, 53, []byte("user"), true)[wire.EthernetLen:]
	f := wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: 0x2002, GTPUExt: 1}, "10.0.1.1", "10.0.2.1", 0, inner)
	marked := &wire.Parser{DSCP: 0x17, DSCPMask: 0x3f, ProbeMarker: 0x1122334455667788}
	for _, opt := range []wire.SourceOptions{
		{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f},
		{Encap: spec.EncapProbeMarker, ProbeMarker: 0x1122334455667788},
	} {
		g := sourceINT(t, f, opt)
		var p wire.Packet
		if err := marked.Parse(g, &p); err != nil || p.INT < 0 {
			t.Fatalf("%v: no INT found: %v", opt.Encap, err)
		}
		var in wire.Packet
		past := wire.Parser{NoINT: true, PastL4INT: true}
		tun, ok := past.ParseInner(g, &p, &in)
		if !ok || tun.Kind != wire.TunnelGTPU || tun.ID != 0x2002 || in.Flow.Src.String() != "10.250.0.1" || in.Flow.DstPort != 53 {
			t.Errorf("%v: PastL4INT: ok %v, tunnel %v %#x, flow %v", opt.Encap, ok, tun.Kind, tun.ID, in.Flow)
		}
		if _, ok := (&wire.Parser{NoINT: true}).ParseInner(g, &p, &in); ok {
			t.Errorf("%v: without PastL4INT the INT shim was taken for a GTP-U header", opt.Encap)
		}
	}
}

// sourceINT is a copy of frame f with an INT-MD header (node id, no hop
// yet) inserted over its L4 header, marked as opt says.
func sourceINT(t *testing.T, f []byte, opt wire.SourceOptions) []byte {
	t.Helper()
	hdr := make([]byte, wire.MDHeaderLen)
	_ = wire.MDHeader{Version: 2, HopML: 1, RemainingHops: 4, Instructions: spec.InstNodeID}.Put(hdr)
	g := make([]byte, len(f), len(f)+64)
	copy(g, f)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(g, &p); err != nil {
		t.Fatal(err)
	}
	out, err := wire.InsertINT(g, &p, spec.TypeMD, hdr, &opt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package soft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestSessionTunnelRefused: a switch told that its links cannot send
// tunnel super-packets (Config.NoSessionTunnels, as the AF_PACKET
// dataplane says on a kernel whose TAP takes no UDP tunnel GSO) refuses
// a node tunnel address with the YANG path and the reason, and nothing
// of the configuration is applied.
func TestSessionTunnelRefused(t *testing.T) {
	sw, err := New(Config{Name: "s1", Ports: []PortConfig{{Name: "p1", ID: 1}}, NoSessionTunnels: "no TAP tunnel GSO"})
	if err != nil {
		t.Fatal(err)
	}
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "tunnel-address": "192.0.2.1"}},
	"int-sessions": {"int-session": [{"name": "t", "config": {"name": "t",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"],
		"encapsulation": "VXLAN_GPE", "tunnel-destination": "192.0.2.3"}}]}}}`), dev); err != nil {
		t.Fatal(err)
	}
	err = dtel.New(sw).Apply(context.Background(), dev)
	const want = "/int/node/config/tunnel-address: INT session tunnels (VXLAN-GPE added by the source; no TAP tunnel GSO) are not supported by the dataplane"
	if !errors.Is(err, sai.ErrUnsupported) || err.Error() != want {
		t.Fatalf("Apply = %v, want %s", err, want)
	}
	n := 0
	for range sw.store.Of(sai.ObjectTypeIntSession) {
		n++
	}
	if n != 0 {
		t.Errorf("%d INT sessions applied after the refusal", n)
	}
}

// tunnelTap records what a TunnelLink and TCPLink are given.
type tunnelTap struct {
	wholeTap
	tunnel, tcp [][]byte
	offs        [][3]int // outer L4, inner L3, mss; l3, mss
	keep        bool
}

func (w *tunnelTap) CanTunnel() bool { return true }
func (w *tunnelTap) TransmitTunnel(f []byte, outerL4, innerL3, mss int) {
	if w.keep {
		w.tunnel = append(w.tunnel, append([]byte(nil), f...))
		w.offs = append(w.offs, [3]int{outerL4, innerL3, mss})
	}
}
func (w *tunnelTap) TransmitTCP(f []byte, l3, mss int) {
	if w.keep {
		w.tcp = append(w.tcp, append([]byte(nil), f...))
		w.offs = append(w.offs, [3]int{l3, mss})
	}
}

// TestSessionTunnelWhole runs a TCP super-packet through a session tunnel
// source, transit and sink switch whole: s1 hands its TunnelLink the
// packet in the tunnel with its hop, outer UDP and inner IP offsets and a
// segment size lowered for the tunnel and 8 hops; s2 its own with both
// hops, the same offsets past the hop and segment size; s3 its TCPLink the
// original packet (one TTL lower: s1 routed it) with that segment size.
// None of it allocates.
func TestSessionTunnelWhole(t *testing.T) {
	taps := [3]*tunnelTap{{keep: true}, {keep: true}, {keep: true}}
	var sw [3]*Switch
	for i := range sw {
		var err error
		sw[i], err = New(Config{Name: "s", Clock: NewManualClock(1), Reporter: nopReporter{},
			Ports: []PortConfig{{Name: "p1"}, {Name: "p2", Link: taps[i]}},
			Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}},
				{Prefix: netip.MustParsePrefix("10.0.23.0/24"), Ports: []string{"p2"}}}})
		if err != nil {
			t.Fatal(err)
		}
		d := sai.DefaultDTelAttrs()
		d.SwitchID = uint32(i + 1)
		d.IntEndpointEnable, d.IntTransitEnable = true, true
		d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
		switch i {
		case 0:
			d.TunnelAddress = netip.MustParseAddr("10.0.12.1")
		case 2:
			d.TunnelAddress = netip.MustParseAddr("10.0.23.3")
			d.SinkPortList = []string{"p2"}
		}
		if _, err := sw[i].Create(d); err != nil {
			t.Fatal(err)
		}
	}
	sess := sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID,
		Encapsulation: sai.SessionEncapVXLANGPE, TunnelDestination: netip.MustParseAddr("10.0.23.3")}
	so, err := sw[0].Create(sess)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw[0].Create(sai.WatchlistEntryAttrs{Match: port80(),
		Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: so, FlowSamplePercent: 100}}); err != nil {
		t.Fatal(err)
	}
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, bytes.Repeat([]byte{7}, 60000))
	const gso, hdrs = 1448, 40 // IPv4 and TCP headers
	buf := make([]byte, len(orig), len(orig)+512)
	b2, b3 := make([]byte, len(orig)+512), make([]byte, len(orig)+512)
	run := func() {
		copy(buf, orig)
		o := Offload{}
		if !sw[0].ReceiveWhole(0, buf[:len(orig)], 0, &o, hdrs+gso) {
			t.Fatal("s1 did not take the super-packet whole")
		}
		f := taps[0].tunnel[len(taps[0].tunnel)-1]
		in := taps[0].offs[len(taps[0].offs)-1]
		f2 := b2[:copy(b2, f)]
		if !sw[1].ReceiveWhole(0, f2, 0, &o, in[1]-14+hdrs+in[2]) {
			t.Fatal("s2 did not take the tunnel super-packet whole")
		}
		f = taps[1].tunnel[len(taps[1].tunnel)-1]
		in = taps[1].offs[len(taps[1].offs)-1]
		f3 := b3[:copy(b3, f)]
		if !sw[2].ReceiveWhole(0, f3, 0, &o, in[1]-14+hdrs+in[2]) {
			t.Fatal("s3 did not take the tunnel super-packet whole")
		}
	}
	run()
	tunLen := 20 + wire.SessionTunnelLen + 4 // IPv4, UDP, GPE, shim, MD header, one hop
	// Room for the tunnel and 8 hops of one word in every segment.
	mss := 1500 - hdrs - (tunLen + 7*4)
	if got, want := taps[0].offs[0], [3]int{14 + 20, 14 + tunLen, mss}; got != want {
		t.Errorf("s1: offsets and segment size %v, want %v", got, want)
	}
	if in, hops := tunnelHopCount(taps[0].tunnel[0]); in != 14+tunLen || hops != 1 {
		t.Errorf("s1: tunnel frame with inner packet at %d, %d hops", in, hops)
	}
	if got, want := taps[1].offs[0], [3]int{14 + 20, 14 + tunLen + 4, mss}; got != want {
		t.Errorf("s2: offsets and segment size %v, want %v", got, want)
	}
	if _, hops := tunnelHopCount(taps[1].tunnel[0]); hops != 2 {
		t.Errorf("s2: %d hops", hops)
	}
	want := append([]byte(nil), orig...)
	want[14+8]--                    // TTL
	want[14+10], want[14+11] = 0, 0 // header checksum
	binary.BigEndian.PutUint16(want[14+10:], ^wire.Fold(wire.Sum(0, want[14:34])))
	if len(taps[2].tcp) != 1 || !bytes.Equal(taps[2].tcp[0], want) || taps[2].offs[0] != [3]int{14, mss} {
		t.Fatalf("s3: %d super-packets out of the tunnel, offsets %v; want the original one", len(taps[2].tcp), taps[2].offs)
	}
	for _, tp := range taps {
		tp.keep = false
	}
	taps[0].tunnel, taps[0].offs = taps[0].tunnel[:1], taps[0].offs[:1]
	taps[1].tunnel, taps[1].offs = taps[1].tunnel[:1], taps[1].offs[:1]
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("%v allocations per super-packet through the three switches", a)
	}
}

// tunnelHopCount returns the inner IP header offset and the hop count of
// an IPv4 session tunnel frame.
func tunnelHopCount(f []byte) (int, int) {
	shim := 14 + 20 + 16
	words, hopML := int(f[shim+1]), int(f[shim+6]&0x1f)
	return shim + 4 + words*4, (words - 3) / hopML
}

// sessionTunnelSuper returns a TCP super-packet of about 60 kB in a
// VXLAN-GPE session tunnel with one hop, as a source switch sends it, its
// largest segment's IP length, and a maker of two-port switches routing
// it out of port p2 through l.
func sessionTunnelSuper(t *testing.T) ([]byte, int, func(l *tunnelTap, p2 PortConfig, clk Clock) *Switch) {
	t.Helper()
	mk := func(l *tunnelTap, p2 PortConfig, clk Clock) *Switch {
		p2.Name, p2.Link = "p2", l
		sw, err := New(Config{Name: "s", Clock: clk, Reporter: nopReporter{},
			Ports: []PortConfig{{Name: "p1"}, p2},
			Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}},
				{Prefix: netip.MustParsePrefix("10.0.23.0/24"), Ports: []string{"p2"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return sw
	}
	st := &tunnelTap{keep: true}
	s0 := mk(st, PortConfig{}, NewManualClock(1))
	d := sai.DefaultDTelAttrs()
	d.SwitchID = 1
	d.IntEndpointEnable, d.IntTransitEnable = true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	d.TunnelAddress = netip.MustParseAddr("10.0.12.1")
	if _, err := s0.Create(d); err != nil {
		t.Fatal(err)
	}
	so, err := s0.Create(sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID,
		Encapsulation: sai.SessionEncapVXLANGPE, TunnelDestination: netip.MustParseAddr("10.0.23.3")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s0.Create(sai.WatchlistEntryAttrs{Match: port80(),
		Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: so, FlowSamplePercent: 100}}); err != nil {
		t.Fatal(err)
	}
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, bytes.Repeat([]byte{7}, 60000))
	buf := make([]byte, len(orig), len(orig)+512)
	copy(buf, orig)
	if !s0.ReceiveWhole(0, buf, 0, &Offload{}, 40+1448) {
		t.Fatal("the source did not take the super-packet whole")
	}
	in := st.offs[0]
	f := make([]byte, len(st.tunnel[0]), len(st.tunnel[0])+512)
	copy(f, st.tunnel[0])
	return f, in[1] - 14 + 40 + in[2], mk
}

// TestTunnelSuperPacketIdleNode: a TCP super-packet in a VXLAN-GPE session
// tunnel reaching a node with no INT configuration is not handed whole to
// the port's WholeLink (whose device would take it for plain TCP and cut
// it by the wrong headers); ReceiveWhole refuses it, so the port cuts it.
func TestTunnelSuperPacketIdleNode(t *testing.T) {
	f, segIP, mk := sessionTunnelSuper(t)
	tap := &tunnelTap{keep: true}
	idle := mk(tap, PortConfig{}, NewManualClock(1))
	if idle.ReceiveWhole(0, f, 0, &Offload{}, segIP) || len(tap.whole) != 0 || len(tap.tunnel) != 0 {
		t.Fatalf("an idle node forwarded a tunnel super-packet whole (%d through WholeLink, %d through TunnelLink)", len(tap.whole), len(tap.tunnel))
	}
}

// TestTunnelSuperPacketConfigChangedQueued: a tunnel super-packet a
// transit node took whole, still queued when the node stops being a
// transit node, is dropped and counted, not handed to the WholeLink.
func TestTunnelSuperPacketConfigChangedQueued(t *testing.T) {
	f, segIP, mk := sessionTunnelSuper(t)
	tap := &tunnelTap{keep: true}
	clk := NewManualClock(1)
	sw := mk(tap, PortConfig{Rate: 1_000_000_000, QueueBytes: 1 << 20}, clk)
	d := sai.DefaultDTelAttrs()
	d.SwitchID = 2
	d.IntEndpointEnable, d.IntTransitEnable = true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	oid, err := sw.Create(d)
	if err != nil {
		t.Fatal(err)
	}
	// The first leaves at once and keeps the port busy (about 0.5 ms at
	// 1 Gbit/s); a frame waits behind it, and the second behind that.
	for i := range 2 {
		g := make([]byte, len(f), cap(f))
		copy(g, f)
		if !sw.ReceiveWhole(0, g, 0, &Offload{}, segIP) {
			t.Fatalf("super-packet %d not taken whole", i)
		}
		if i == 0 {
			sw.Receive(0, tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 100)))
		}
	}
	if len(tap.tunnel) != 1 {
		t.Fatalf("%d super-packets left at once, want 1", len(tap.tunnel))
	}
	if err := sw.Remove(oid); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Millisecond)
	sw.Poll()
	st, err := sw.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(tap.tunnel) != 1 || len(tap.whole) != 0 || len(tap.frames) != 1 || st.Drops[spec.DropUnknown] != 1 {
		t.Fatalf("%d through TunnelLink, %d through WholeLink, %d frames, %d dropped; want 1, 0, 1, 1",
			len(tap.tunnel), len(tap.whole), len(tap.frames), st.Drops[spec.DropUnknown])
	}
}

// TestTunnelSourceRefusedWholeSampled: a watched super-packet a session
// tunnel source cannot send whole (its segments do not fit the egress
// MTU) leaves the packet-interval sampler untouched, so that the first of
// its segments, which the port cuts and hands in again, gets INT.
func TestTunnelSourceRefusedWholeSampled(t *testing.T) {
	_, _, mk := sessionTunnelSuper(t)
	tap := &tunnelTap{keep: true}
	sw := mk(tap, PortConfig{MTU: 1000}, NewManualClock(1))
	d := sai.DefaultDTelAttrs()
	d.SwitchID = 1
	d.IntEndpointEnable, d.IntTransitEnable = true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
	d.TunnelAddress = netip.MustParseAddr("10.0.12.1")
	if _, err := sw.Create(d); err != nil {
		t.Fatal(err)
	}
	so, err := sw.Create(sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: spec.InstNodeID,
		Encapsulation: sai.SessionEncapVXLANGPE, TunnelDestination: netip.MustParseAddr("10.0.23.3")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Create(sai.WatchlistEntryAttrs{Match: port80(), Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt,
		IntSession: so, FlowSamplePercent: 100, PacketInterval: 10 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	big := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, bytes.Repeat([]byte{7}, 60000))
	if sw.ReceiveWhole(0, append(make([]byte, 0, len(big)+512), big...), 0, &Offload{}, 40+1448) {
		t.Fatal("a super-packet whose segments exceed the MTU was taken whole")
	}
	sw.Receive(0, tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, bytes.Repeat([]byte{7}, 500)))
	st, err := sw.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ss := st.IntSessions[so]; ss.PacketsInitiated != 1 || ss.NotInitiatedSampled != 0 {
		t.Fatalf("first segment: %d initiated, %d sampled out; want 1, 0", ss.PacketsInitiated, ss.NotInitiatedSampled)
	}
}

// TestTunnelOutputOnDemand: Config.TunnelOutput is turned on by the
// first configuration with a tunnel address (or INT transit), once, and
// off when none needs it. An error refuses the change with the path of
// the leaf that asked for it, the previous configuration kept; one that
// says the host can never give it leaves transit configured (its tunnel
// super-packets are cut) and refuses tunnel addresses from then on.
func TestTunnelOutputOnDemand(t *testing.T) {
	var calls []bool
	var fail error
	sw, err := New(Config{Name: "s1", Ports: []PortConfig{{Name: "p1", ID: 1}}, TunnelOutput: func(on bool) error {
		calls = append(calls, on)
		if on {
			return fail
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := dtel.New(sw)
	apply := func(node string) error {
		dev := &gen.Device{}
		if err := gen.Unmarshal([]byte(`{"intd-int:int": {"node": {"config": {"enabled": true, "node-id": 1`+node+`}}}}`), dev); err != nil {
			t.Fatal(err)
		}
		return o.Apply(context.Background(), dev)
	}
	const addr = `, "int-endpoint": true, "tunnel-address": "192.0.2.1"`
	end := netip.MustParseAddr("192.0.2.1")
	for i, s := range []struct {
		node  string
		calls []bool
	}{{`, "int-endpoint": true`, nil}, {addr, []bool{true}}, {addr + `, "tunnel-address-ipv6": "2001:db8::1"`, []bool{true}},
		{`, "int-endpoint": true, "int-transit": true`, []bool{true}}, {`, "int-endpoint": true`, []bool{true, false}}} {
		if err := apply(s.node); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !slices.Equal(calls, s.calls) {
			t.Fatalf("%d %s: TunnelOutput calls %v, want %v", i, s.node, calls, s.calls)
		}
	}

	fail = errors.New("no TAP for p1")
	err = apply(addr)
	const want = "/int/node/config/tunnel-address: INT session tunnels need their output on every port, which could not be set up (no TAP for p1), so they are not supported by the dataplane"
	if err == nil || err.Error() != want {
		t.Fatalf("Apply, output failing = %v, want %s", err, want)
	}
	if sw.IsTunnelEnd(0, end) || sw.tunnelsOn {
		t.Error("refused, yet the tunnel address is applied")
	}

	fail = fmt.Errorf("%w: no UDP tunnel GSO", ErrNoSessionTunnels)
	if err := apply(`, "int-transit": true`); err != nil {
		t.Fatalf("transit, output never possible: %v", err)
	}
	err = apply(addr)
	const never = "/int/node/config/tunnel-address: INT session tunnels (VXLAN-GPE added by the source; session tunnels cannot leave whole on this host: no UDP tunnel GSO) are not supported by the dataplane"
	if err == nil || err.Error() != never {
		t.Fatalf("Apply, output never possible = %v, want %s", err, never)
	}
	if want := []bool{true, false, true, true}; !slices.Equal(calls, want) {
		t.Errorf("TunnelOutput calls %v, want %v (none once it can never be)", calls, want)
	}
}

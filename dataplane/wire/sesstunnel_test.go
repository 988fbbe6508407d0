package wire

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// Session tunnel frames as int-spec-v2.1 §5.7 (VXLAN-GPE) and RFC 768 /
// RFC 791 / RFC 8200 lay them out, written by hand: a TCP packet with 4
// bytes of payload from 10.0.1.1 (fd00:1::1) to 10.0.2.1 (fd00:2::1),
// ECT(0), in a tunnel from 10.0.12.1 (fd00:12::1) to 10.0.23.2
// (fd00:23::2) with one hop of node id 1. The UDP source port (bytes
// 34-35, 54-55) is the inner flow's entropy port, left 0 here.
const (
	exSessionTunnel4 = `
02 00 00 00 00 02 02 00 00 00 00 01 08 00 // Ethernet, IPv4
45 02 00 64 // outer IPv4: IHL 5, DSCP 0 ECT(0) as the inner packet, Length 100
00 00 40 00 // Identification 0, DF
40 11 03 85 // TTL 64, UDP, Header Checksum
0a 00 0c 01 // 10.0.12.1
0a 00 17 02 // 10.0.23.2
00 00 12 b6 // UDP: source port, destination port 4790
00 50 00 00 // Length 80, Checksum 0
0c 00 00 82 // VXLAN-GPE: I and P, Next Protocol 0x82 (INT)
00 00 00 00 // VNI 0
10 04 00 01 // INT shim: Type 1 (MD), Length 4 (INT-MD header and stack), Next Protocol 1 (IPv4)
20 00 01 07 // INT-MD: Ver 2, HopML 1, Remaining Hop Count 7
80 00 00 00 // Instruction Bitmap: node id; Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 01 // node id of hop 1
45 02 00 2c 00 01 40 00 40 06 23 c8 0a 00 01 01 0a 00 02 01 // inner IPv4
04 d2 00 50 00 00 00 01 00 00 00 00 50 18 ff ff b1 0d 00 00 // TCP
74 75 6e 21 // payload`
	exSessionTunnel6 = `
02 00 00 00 00 02 02 00 00 00 00 01 86 dd // Ethernet, IPv6
60 20 00 00 // outer IPv6: Traffic Class ECT(0) as the inner packet, Flow Label 0
00 64 11 40 // Payload Length 100, Next Header UDP, Hop Limit 64
fd 00 00 12 00 00 00 00 00 00 00 00 00 00 00 01 // fd00:12::1
fd 00 00 23 00 00 00 00 00 00 00 00 00 00 00 02 // fd00:23::2
00 00 12 b6 // UDP: source port, destination port 4790
00 64 00 00 // Length 100, Checksum 0
0c 00 00 82 // VXLAN-GPE: I and P, Next Protocol 0x82 (INT)
00 00 00 00 // VNI 0
10 04 00 02 // INT shim: Type 1 (MD), Length 4, Next Protocol 2 (IPv6)
20 00 01 07 // INT-MD: Ver 2, HopML 1, Remaining Hop Count 7
80 00 00 00 // Instruction Bitmap: node id; Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 01 // node id of hop 1
60 20 00 00 00 18 06 40 // inner IPv6: Payload Length 24, TCP, Hop Limit 64
fd 00 00 01 00 00 00 00 00 00 00 00 00 00 00 01 // fd00:1::1
fd 00 00 02 00 00 00 00 00 00 00 00 00 00 00 01 // fd00:2::1
04 d2 00 50 00 00 00 01 00 00 00 00 50 18 ff ff ce 08 00 00 // TCP
74 75 6e 21 // payload`
)

// TestParseSessionTunnel: the hand-written frames' layout, found from
// the outer IP header; EncapSessionTunnel writes them byte for byte (its
// UDP source port the inner flow's entropy port) and the parser finds
// the same layout in what it wrote, with the inner destination.
func TestParseSessionTunnel(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame string
		want  SessionTunnelLayout
		dst   string
		sport int // offset of the UDP source port
	}{
		{"IPv4", exSessionTunnel4, SessionTunnelLayout{L3: 14, L4: 34, Shim: 50, Inner: 70, InnerL4: 90, InnerProto: ProtoTCP, IPVersion: 4},
			"10.0.2.1", 34},
		{"IPv6", exSessionTunnel6, SessionTunnelLayout{L3: 14, L4: 54, Shim: 70, Inner: 90, InnerL4: 130, InnerProto: ProtoTCP, IPVersion: 6},
			"fd00:2::1", 54},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := hx(t, c.frame)
			got, ok := ParseSessionTunnel(f, 14)
			if !ok || got != c.want {
				t.Fatalf("ParseSessionTunnel = %+v, %v; want %+v", got, ok, c.want)
			}
			if d := got.InnerDst(f); d != netip.MustParseAddr(c.dst) {
				t.Errorf("inner destination %v, want %s", d, c.dst)
			}

			// The original frame: Ethernet and the inner packet.
			orig := append(bytes.Clone(f[:14]), f[c.want.Inner:]...)
			var p Packet
			if err := (&Parser{}).Parse(orig, &p); err != nil {
				t.Fatal(err)
			}
			src, dst := netip.MustParseAddr("10.0.12.1"), netip.MustParseAddr("10.0.23.2")
			if c.want.IPVersion == 6 {
				src, dst = netip.MustParseAddr("fd00:12::1"), netip.MustParseAddr("fd00:23::2")
			}
			md := f[c.want.Shim+ShimLen : c.want.Inner]
			out, err := EncapSessionTunnel(withRoom(orig, 128), &p, src, dst, md)
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.Clone(f)
			binary.BigEndian.PutUint16(want[c.sport:], p.Flow.EntropyPort())
			mustEqual(t, "EncapSessionTunnel", out, want)
			if p.L4 != c.want.L4 || p.Shim != c.want.Shim || p.Next != c.want.Inner || p.End != len(out) {
				t.Errorf("EncapSessionTunnel's packet: L4 %d Shim %d Next %d End %d; want %d %d %d %d",
					p.L4, p.Shim, p.Next, p.End, c.want.L4, c.want.Shim, c.want.Inner, len(out))
			}
			if got, ok := ParseSessionTunnel(out, 14); !ok || got != c.want {
				t.Errorf("ParseSessionTunnel(EncapSessionTunnel) = %+v, %v", got, ok)
			}
			// A parsed tunnel packet, as the switch sees it.
			var q Packet
			if err := (&Parser{VXLANGPEPort: 4790}).Parse(out, &q); err != nil {
				t.Fatal(err)
			}
			if d, ok := SessionTunnelInner(out, &q); !ok || d != netip.MustParseAddr(c.dst) {
				t.Errorf("SessionTunnelInner = %v, %v; want %s", d, ok, c.dst)
			}
		})
	}
}

// TestParseSessionTunnelMalformed: every departure from the layout, and
// every frame cut short of the inner IP header, is refused.
func TestParseSessionTunnelMalformed(t *testing.T) {
	set := func(off int, v ...byte) func([]byte) {
		return func(b []byte) { copy(b[off:], v) }
	}
	for _, c := range []struct {
		name  string
		frame string
		edit  func([]byte)
	}{
		{"outer IPv4 options", exSessionTunnel4, set(14, 0x46)},
		{"outer IP version 5", exSessionTunnel4, set(14, 0x55)},
		{"outer IPv4 not UDP", exSessionTunnel4, set(23, ProtoTCP)},
		{"outer IPv4 first fragment", exSessionTunnel4, set(20, 0x20, 0)},
		{"outer IPv4 later fragment", exSessionTunnel4, set(20, 0, 1)},
		{"outer IPv6 extension header", exSessionTunnel6, set(20, 0)},
		{"UDP to 4789", exSessionTunnel4, set(36, 0x12, 0xb5)},
		{"VXLAN-GPE next protocol IPv4", exSessionTunnel4, set(45, 1)},
		{"INT-MX shim", exSessionTunnel4, set(50, 0x20)},
		{"INT destination shim", exSessionTunnel4, set(50, 0x30)},
		{"shim next protocol IPv6 in IPv4", exSessionTunnel4, set(53, 2)},
		{"shim next protocol IPv4 in IPv6", exSessionTunnel6, set(73, 1)},
		{"shim next protocol Ethernet", exSessionTunnel4, set(53, 3)},
		{"shim length short of the INT-MD header", exSessionTunnel4, set(51, 2)},
		{"inner IPv6 in IPv4", exSessionTunnel4, set(70, 0x65)},
		{"inner IPv4 in IPv6", exSessionTunnel6, set(90, 0x45)},
		{"inner IPv4 header length 4", exSessionTunnel4, set(70, 0x44)},
	} {
		f := hx(t, c.frame)
		c.edit(f)
		if got, ok := ParseSessionTunnel(f, 14); ok {
			t.Errorf("%s: parsed as %+v", c.name, got)
		}
	}
	for _, c := range []struct {
		frame string
		inner int // end of the inner IP header
	}{{exSessionTunnel4, 90}, {exSessionTunnel6, 130}} {
		f := hx(t, c.frame)
		for n := range c.inner {
			if got, ok := ParseSessionTunnel(f[:n], 14); ok {
				t.Errorf("cut to %d bytes: parsed as %+v", n, got)
			}
		}
		if _, ok := ParseSessionTunnel(f[:c.inner], 14); !ok {
			t.Errorf("cut after the inner IP header (%d bytes): refused", c.inner)
		}
		if _, ok := ParseSessionTunnel(f, -1); ok {
			t.Error("outer IP header at -1: parsed")
		}
		if _, ok := ParseSessionTunnel(f, 0); ok {
			t.Error("from the Ethernet header: parsed")
		}
	}
}

// TestParseSessionTunnelAllocs: parsing allocates nothing.
func TestParseSessionTunnelAllocs(t *testing.T) {
	f := hx(t, exSessionTunnel6)
	var sink netip.Addr
	if a := testing.AllocsPerRun(100, func() {
		if st, ok := ParseSessionTunnel(f, 14); ok {
			sink = st.InnerDst(f)
		}
	}); a != 0 || !sink.IsValid() {
		t.Errorf("%v allocations per parse", a)
	}
}

// TestEncapSessionTunnelAllocs: putting a packet into a session tunnel
// allocates nothing.
func TestEncapSessionTunnelAllocs(t *testing.T) {
	for _, frame := range []string{exSessionTunnel4, exSessionTunnel6} {
		f := hx(t, frame)
		st, _ := ParseSessionTunnel(f, 14)
		orig := append(bytes.Clone(f[:14]), f[st.Inner:]...)
		src, dst := netip.MustParseAddr("10.0.12.1"), netip.MustParseAddr("10.0.23.2")
		if st.IPVersion == 6 {
			src, dst = netip.MustParseAddr("fd00:12::1"), netip.MustParseAddr("fd00:23::2")
		}
		md := f[st.Shim+ShimLen : st.Inner]
		buf := withRoom(orig, 128)
		var p Packet
		var pr Parser
		if a := testing.AllocsPerRun(100, func() {
			b := buf[:len(orig)]
			copy(b, orig)
			if pr.Parse(b, &p) != nil {
				t.Fatal("parse")
			}
			if _, err := EncapSessionTunnel(b, &p, src, dst, md); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("IPv%d: %v allocations per packet", st.IPVersion, a)
		}
	}
}

// BenchmarkEncapSessionTunnel: one IPv4 TCP packet put into a session
// tunnel per op (parsed first, as the switch has it).
func BenchmarkEncapSessionTunnel(b *testing.B) {
	f := hx(b, exSessionTunnel4)
	st, _ := ParseSessionTunnel(f, 14)
	orig := append(bytes.Clone(f[:14]), f[st.Inner:]...)
	src, dst := netip.MustParseAddr("10.0.12.1"), netip.MustParseAddr("10.0.23.2")
	md := f[st.Shim+ShimLen : st.Inner]
	buf := withRoom(orig, 128)
	var p Packet
	var pr Parser
	for b.Loop() {
		pkt := buf[:len(orig)]
		copy(pkt, orig)
		_ = pr.Parse(pkt, &p)
		_, _ = EncapSessionTunnel(pkt, &p, src, dst, md)
	}
}

package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// pkt describes one packet; build lays it out with every length and
// checksum computed the plain way (16-bit words, RFC 1071), independently
// of Segment.
type pkt struct {
	vlan     bool
	src, dst netip.Addr
	udp      bool
	id       uint16
	fragOff  uint16 // IPv4 flags and fragment offset (UFO)
	seq      uint32
	flags    byte
	tcpOpt   []byte
	hbh      bool // IPv6 hop-by-hop options header
	payload  []byte
	udpLen   int // UFO: the whole datagram's UDP length; 0: from payload
	noL4     bool
	l4csum   func(f []byte, l4 int) // overrides the L4 checksum
	ipLenFix int                    // IPv4 total length / IPv6 payload length override
}

func refSum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func refFold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0xa}
	macB = []byte{0x02, 0, 0, 0, 0, 0xb}
)

// build returns the frame and the offset of its L4 header.
func (p pkt) build() ([]byte, int) {
	var f []byte
	f = append(f, macB...)
	f = append(f, macA...)
	if p.vlan {
		f = append(f, 0x81, 0x00, 0x00, 0x2a)
	}
	l3 := len(f) + 2
	var l4hdr []byte
	if !p.noL4 {
		if p.udp {
			l4hdr = make([]byte, 8)
			binary.BigEndian.PutUint16(l4hdr[0:], 4000)
			binary.BigEndian.PutUint16(l4hdr[2:], 5000)
			ul := 8 + len(p.payload)
			if p.udpLen > 0 {
				ul = p.udpLen
			}
			binary.BigEndian.PutUint16(l4hdr[4:], uint16(ul))
		} else {
			l4hdr = make([]byte, 20+len(p.tcpOpt))
			binary.BigEndian.PutUint16(l4hdr[0:], 40000)
			binary.BigEndian.PutUint16(l4hdr[2:], 5002)
			binary.BigEndian.PutUint32(l4hdr[4:], p.seq)
			binary.BigEndian.PutUint32(l4hdr[8:], 0x11223344)
			l4hdr[12] = byte(len(l4hdr)/4) << 4
			l4hdr[13] = p.flags
			binary.BigEndian.PutUint16(l4hdr[14:], 502)
			copy(l4hdr[20:], p.tcpOpt)
		}
	}
	proto := byte(6)
	if p.udp {
		proto = 17
	}
	var l4 int
	if p.src.Is4() {
		f = append(f, 0x08, 0x00)
		ip := make([]byte, 20)
		ip[0], ip[1], ip[8], ip[9] = 0x45, 0x82, 64, proto
		tot := 20 + len(l4hdr) + len(p.payload)
		if p.ipLenFix > 0 {
			tot = p.ipLenFix
		}
		binary.BigEndian.PutUint16(ip[2:], uint16(tot))
		binary.BigEndian.PutUint16(ip[4:], p.id)
		binary.BigEndian.PutUint16(ip[6:], p.fragOff)
		s, d := p.src.As4(), p.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], ^refFold(refSum(ip, 0)))
		f = append(f, ip...)
	} else {
		f = append(f, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0], ip[1], ip[6], ip[7] = 0x60, 0x0b, proto, 64
		var ext []byte
		if p.hbh {
			ip[6] = 0
			ext = []byte{proto, 0, 1, 4, 0, 0, 0, 0} // PadN
		}
		pl := len(ext) + len(l4hdr) + len(p.payload)
		if p.ipLenFix > 0 {
			pl = p.ipLenFix
		}
		binary.BigEndian.PutUint16(ip[4:], uint16(pl))
		s, d := p.src.As16(), p.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		f = append(f, ip...)
		f = append(f, ext...)
	}
	l4 = len(f)
	f = append(f, l4hdr...)
	f = append(f, p.payload...)
	if p.noL4 {
		return f, l4
	}
	if p.l4csum != nil {
		p.l4csum(f, l4)
		return f, l4
	}
	ck := l4 + 16
	if p.udp {
		ck = l4 + 6
	}
	binary.BigEndian.PutUint16(f[ck:], 0)
	c := ^refFold(refSum(f[l4:], pseudo(f, l3, l4, proto, len(f)-l4)))
	if p.udp && c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(f[ck:], c)
	return f, l4
}

// pseudo is the pseudo-header sum (RFC 768/793, RFC 8200 8.1).
func pseudo(f []byte, l3, l4 int, proto byte, l4len int) uint32 {
	var s uint32
	if f[l3]>>4 == 4 {
		s = refSum(f[l3+12:l3+20], 0)
	} else {
		s = refSum(f[l3+8:l3+40], 0)
	}
	return s + uint32(proto) + uint32(l4len)
}

// partialCsum leaves the pseudo-header sum in the checksum field, as a
// sender with checksum offload (CHECKSUM_PARTIAL) does.
func partialCsum(off int, proto byte) func(f []byte, l4 int) {
	return func(f []byte, l4 int) {
		l3 := 14
		if f[12] == 0x81 {
			l3 = 18
		}
		binary.BigEndian.PutUint16(f[l4+off:], refFold(pseudo(f, l3, l4, proto, len(f)-l4)))
	}
}

func payloadBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

const (
	tcpACK = 0x10
	tcpECE = 0x40
)

// segmentAll runs Segment and returns copies of the segments.
func segmentAll(t testing.TB, h VnetHdr, f []byte) ([][]byte, error) {
	var segs [][]byte
	n, err := Segment(h, f, func(s []byte) { segs = append(segs, bytes.Clone(s)) })
	if err == nil && n != len(segs) {
		t.Fatalf("Segment returned %d, emitted %d", n, len(segs))
	}
	return segs, err
}

func compareSegs(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d segments, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			n := min(len(got[i]), len(want[i]), 80)
			t.Fatalf("segment %d of %d differs (len %d, want %d)\ngot  %x\nwant %x", i, len(want), len(got[i]), len(want[i]), got[i][:n], want[i][:n])
		}
	}
}

func TestSegmentTCP(t *testing.T) {
	v4a, v4b := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:2::1")
	ts := []byte{1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78} // NOP NOP timestamps
	for _, c := range []struct {
		name     string
		src, dst netip.Addr
		vlan     bool
		hbh      bool
		opt      []byte
		mss, len int
		flags    byte
		ecn      bool
		partial  bool
	}{
		{name: "v4", src: v4a, dst: v4b, mss: 1448, len: 65160, flags: tcpACK | tcpPSH, partial: true},
		{name: "v4 odd mss, FIN, CWR", src: v4a, dst: v4b, opt: ts, mss: 1339, len: 20001, flags: tcpACK | tcpPSH | tcpFIN | tcpCWR | tcpECE, ecn: true, partial: true},
		{name: "v4 vlan exact multiple", src: v4a, dst: v4b, vlan: true, opt: ts, mss: 1000, len: 8000, flags: tcpACK | tcpPSH, partial: true},
		{name: "v4 single segment", src: v4a, dst: v4b, mss: 1448, len: 700, flags: tcpACK | tcpPSH | tcpFIN},
		{name: "v4 full checksum left", src: v4a, dst: v4b, mss: 536, len: 5000, flags: tcpACK},
		{name: "v6", src: v6a, dst: v6b, mss: 1428, len: 64260, flags: tcpACK | tcpPSH, partial: true},
		{name: "v6 hop-by-hop vlan", src: v6a, dst: v6b, vlan: true, hbh: true, opt: ts, mss: 1211, len: 9999, flags: tcpACK | tcpFIN | tcpCWR, partial: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := payloadBytes(c.len)
			base := pkt{vlan: c.vlan, src: c.src, dst: c.dst, hbh: c.hbh, id: 0xfff0, seq: 0xfffff000, tcpOpt: c.opt}
			sp := base
			sp.payload, sp.flags = data, c.flags
			if c.partial {
				sp.l4csum = partialCsum(16, 6)
			}
			f, l4 := sp.build()
			h := VnetHdr{GSOType: GSOTCPv4, GSOSize: uint16(c.mss), HdrLen: uint16(l4 + 20 + len(c.opt)), CsumStart: uint16(l4), CsumOffset: 16}
			if c.partial {
				h.Flags = VnetNeedsCsum
			}
			if c.src.Is6() {
				h.GSOType = GSOTCPv6
			}
			if c.ecn {
				h.GSOType |= GSOECN
			}
			var want [][]byte
			for i, off := 0, 0; off < c.len; i, off = i+1, off+c.mss {
				s := base
				s.payload = data[off:min(off+c.mss, c.len)]
				s.seq += uint32(off)
				s.id += uint16(i) // wraps past 0xffff
				s.flags = c.flags
				if off+c.mss < c.len {
					s.flags &^= tcpFIN | tcpPSH
				}
				if i > 0 {
					s.flags &^= tcpCWR
				}
				w, _ := s.build()
				want = append(want, w)
			}
			got, err := segmentAll(t, h, f)
			if err != nil {
				t.Fatal(err)
			}
			compareSegs(t, got, want)
		})
	}
}

func TestSegmentUDP(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst netip.Addr
		mss, len int
	}{
		{"v4 USO", netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1"), 1472, 63000},
		{"v4 USO odd", netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1"), 999, 3001},
		{"v6 USO", netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:2::1"), 1452, 60000},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := payloadBytes(c.len)
			base := pkt{src: c.src, dst: c.dst, udp: true, id: 7}
			sp := base
			sp.payload, sp.l4csum = data, partialCsum(6, 17)
			f, l4 := sp.build()
			h := VnetHdr{Flags: VnetNeedsCsum, GSOType: GSOUDPL4, GSOSize: uint16(c.mss), CsumStart: uint16(l4), CsumOffset: 6}
			var want [][]byte
			for i, off := 0, 0; off < c.len; i, off = i+1, off+c.mss {
				s := base
				s.payload = data[off:min(off+c.mss, c.len)]
				s.id += uint16(i)
				w, _ := s.build()
				want = append(want, w)
			}
			got, err := segmentAll(t, h, f)
			if err != nil {
				t.Fatal(err)
			}
			compareSegs(t, got, want)
		})
	}
}

// TestSegmentUFO: legacy UFO is IPv4 fragmentation of the UDP datagram.
func TestSegmentUFO(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	data := payloadBytes(4000)
	whole := pkt{src: src, dst: dst, udp: true, id: 99, fragOff: 0x4000, payload: data}
	f, l4 := whole.build()
	// The reference checksum of the whole datagram, then its bytes (UDP
	// header included) cut into fragments of 1480 bytes.
	dgram := bytes.Clone(f[l4:])
	binary.BigEndian.PutUint16(f[l4+6:], 0x1234) // whatever the sender left
	h := VnetHdr{GSOType: GSOUDP, GSOSize: 1485, CsumStart: uint16(l4), CsumOffset: 6, Flags: VnetNeedsCsum}
	var want [][]byte
	for off := 0; off < len(dgram); off += 1480 {
		fo := uint16(off / 8)
		if off+1480 < len(dgram) {
			fo |= 0x2000
		}
		s := pkt{src: src, dst: dst, udp: true, id: 99, fragOff: fo, noL4: true, payload: dgram[off:min(off+1480, len(dgram))]}
		w, _ := s.build()
		want = append(want, w)
	}
	got, err := segmentAll(t, h, f)
	if err != nil {
		t.Fatal(err)
	}
	compareSegs(t, got, want)
	// IPv6 UFO would need fragment headers: refused.
	f6, l46 := pkt{src: netip.MustParseAddr("2001:db8::1"), dst: netip.MustParseAddr("2001:db8::2"), udp: true, payload: data}.build()
	if _, err := segmentAll(t, VnetHdr{GSOType: GSOUDP, GSOSize: 1448, CsumStart: uint16(l46), CsumOffset: 6}, f6); err == nil {
		t.Error("IPv6 UFO accepted")
	}
}

func TestSegmentNoGSO(t *testing.T) {
	p := pkt{src: netip.MustParseAddr("10.0.1.1"), dst: netip.MustParseAddr("10.0.2.1"), udp: true, payload: payloadBytes(333)}
	want, l4 := p.build()
	p.l4csum = partialCsum(6, 17)
	f, _ := p.build()
	got, err := segmentAll(t, VnetHdr{Flags: VnetNeedsCsum, CsumStart: uint16(l4), CsumOffset: 6}, f)
	if err != nil {
		t.Fatal(err)
	}
	compareSegs(t, got, [][]byte{want})
	if _, err := segmentAll(t, VnetHdr{Flags: VnetNeedsCsum, CsumStart: uint16(len(f)), CsumOffset: 6}, f); err == nil {
		t.Error("checksum start beyond the frame accepted")
	}
}

func TestSegmentErrors(t *testing.T) {
	v4a, v4b := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	tcp4, l4 := pkt{src: v4a, dst: v4b, payload: payloadBytes(5000), flags: tcpACK}.build()
	udp4, _ := pkt{src: v4a, dst: v4b, udp: true, payload: payloadBytes(5000)}.build()
	frag, _ := pkt{src: v4a, dst: v4b, fragOff: 0x2000, payload: payloadBytes(5000)}.build()
	tcp6, _ := pkt{src: netip.MustParseAddr("::1"), dst: netip.MustParseAddr("::2"), payload: payloadBytes(5000)}.build()
	ok := VnetHdr{GSOType: GSOTCPv4, GSOSize: 1000}
	for _, c := range []struct {
		name string
		h    VnetHdr
		f    []byte
	}{
		{"unknown type", VnetHdr{GSOType: 2, GSOSize: 1000}, tcp4},
		{"TCPv4 on UDP", ok, udp4},
		{"TCPv4 on IPv6", ok, tcp6},
		{"TCPv6 on IPv4", VnetHdr{GSOType: GSOTCPv6, GSOSize: 1000}, tcp4},
		{"UDP_L4 on TCP", VnetHdr{GSOType: GSOUDPL4, GSOSize: 1000}, tcp4},
		{"fragment", ok, frag},
		{"gso size 0", VnetHdr{GSOType: GSOTCPv4}, tcp4},
		{"too many segments", VnetHdr{GSOType: GSOTCPv4, GSOSize: 2}, tcp4},
		{"csum start elsewhere", VnetHdr{GSOType: GSOTCPv4, GSOSize: 1000, Flags: VnetNeedsCsum, CsumStart: uint16(l4 - 2), CsumOffset: 16}, tcp4},
		{"truncated", ok, tcp4[:l4+10]},
		{"ARP", ok, append(bytes.Clone(tcp4[:12]), 0x08, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
	} {
		n := 0
		_, err := Segment(c.h, bytes.Clone(c.f), func([]byte) { n++ })
		if err == nil || n != 0 {
			t.Errorf("%s: err %v, %d emitted", c.name, err, n)
		}
	}
}

// TestSegmentAllocs: no allocation per super-packet.
func TestSegmentAllocs(t *testing.T) {
	f, h := superPacket(65160, 1448)
	work := make([]byte, len(f))
	n := 0
	emit := func(s []byte) { n += len(s) }
	a := testing.AllocsPerRun(100, func() {
		copy(work, f)
		if _, err := Segment(h, work, emit); err != nil {
			t.Fatal(err)
		}
	})
	if a != 0 {
		t.Errorf("%v allocations per super-packet", a)
	}
}

func superPacket(size, mss int) ([]byte, VnetHdr) {
	p := pkt{src: netip.MustParseAddr("10.0.1.1"), dst: netip.MustParseAddr("10.0.2.1"), payload: payloadBytes(size),
		flags: tcpACK | tcpPSH, tcpOpt: []byte{1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78}, l4csum: partialCsum(16, 6)}
	f, l4 := p.build()
	return f, VnetHdr{Flags: VnetNeedsCsum, GSOType: GSOTCPv4, GSOSize: uint16(mss), CsumStart: uint16(l4), CsumOffset: 16}
}

// BenchmarkSegment: one 64 KB TCP super-packet (45 segments of 1448
// bytes) per op, copied back into place first (the copy, about 1.5 µs, is part of
// the figure; BenchmarkSegmentCopy measures it alone).
func BenchmarkSegment(b *testing.B) {
	for _, mss := range []int{1448, 8948} {
		b.Run(fmt.Sprintf("mss=%d", mss), func(b *testing.B) {
			f, h := superPacket(65160, mss)
			work := make([]byte, len(f))
			emit := func([]byte) {}
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				copy(work, f)
				if _, err := Segment(h, work, emit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSegmentCopy(b *testing.B) {
	f, _ := superPacket(65160, 1448)
	work := make([]byte, len(f))
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		copy(work, f)
	}
}

// FuzzSegment: any virtio_net_hdr and frame; no panic, segments within
// the frame, and every segment of a TCP or UDP_L4 super-packet carries
// valid IPv4 header and L4 checksums and the lengths of its size.
func FuzzSegment(f *testing.F) {
	sp, h := superPacket(5000, 1448)
	seed := func(h VnetHdr, fr []byte) {
		b := make([]byte, vnetHdrLen, vnetHdrLen+len(fr))
		h.Put(b)
		f.Add(append(b, fr...))
	}
	seed(h, sp)
	u, l4 := pkt{src: netip.MustParseAddr("2001:db8::1"), dst: netip.MustParseAddr("2001:db8::2"), udp: true, hbh: true, vlan: true, payload: payloadBytes(3000)}.build()
	seed(VnetHdr{GSOType: GSOUDPL4, GSOSize: 1000, Flags: VnetNeedsCsum, CsumStart: uint16(l4), CsumOffset: 6}, u)
	seed(VnetHdr{GSOType: GSOUDP, GSOSize: 1000}, u)
	u4, l4 := pkt{src: netip.MustParseAddr("10.0.0.1"), dst: netip.MustParseAddr("10.0.0.2"), udp: true, payload: payloadBytes(3000)}.build()
	seed(VnetHdr{GSOType: GSOUDP, GSOSize: 1000, CsumStart: uint16(l4)}, u4)
	seed(VnetHdr{Flags: VnetNeedsCsum, CsumStart: 34, CsumOffset: 6}, u4)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < vnetHdrLen {
			return
		}
		h := ParseVnetHdr(b)
		fr := b[vnetHdrLen:]
		size := len(fr)
		gt := h.GSOType &^ GSOECN
		total := 0
		n, err := Segment(h, fr, func(s []byte) {
			if len(s) > size || len(s) > MaxGSOHeader+int(h.GSOSize) && gt != GSONone {
				t.Fatalf("segment of %d bytes from a %d-byte frame, gso size %d", len(s), size, h.GSOSize)
			}
			total += len(s)
			if gt != GSOTCPv4 && gt != GSOTCPv6 && gt != GSOUDPL4 {
				return
			}
			hd, ok := parseHeaders(s)
			if !ok {
				t.Fatalf("segment does not parse: %x", s)
			}
			proto := hd.proto
			if hd.v4 {
				if refFold(refSum(s[hd.l3:hd.l3+int(s[hd.l3]&15)*4], 0)) != 0xffff {
					t.Fatalf("bad IPv4 header checksum")
				}
				if int(binary.BigEndian.Uint16(s[hd.l3+2:])) != len(s)-hd.l3 {
					t.Fatalf("IPv4 total length")
				}
			} else if int(binary.BigEndian.Uint16(s[hd.l3+4:])) != len(s)-hd.l3-40 {
				t.Fatalf("IPv6 payload length")
			}
			if refFold(refSum(s[hd.l4:], pseudo(s, hd.l3, hd.l4, proto, len(s)-hd.l4))) != 0xffff {
				t.Fatalf("bad L4 checksum")
			}
		})
		if err != nil && n != 0 {
			t.Fatalf("error %v after %d segments", err, n)
		}
		if err == nil && gt == GSONone && total != size {
			t.Fatalf("frame without GSO emitted as %d bytes of %d", total, size)
		}
	})
}

package wire

import (
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// Tunnel examples of int-spec-v2.1.mdk §6: IPv4/GRE (original packet IPv4,
// or CE/Ethernet), VXLAN-GPE and Geneve. Outer addresses 192.0.2.1 ->
// 192.0.2.2, MACs 02:00:00:00:00:0x, VNI 0x123456 and TBD_INT 0x88b5 are
// chosen. For VXLAN-GPE and Geneve the spec shows the headers from the
// tunnel header to the end of the stack; the tests wrap them in IPv4/UDP
// (with a non-zero UDP checksum, to exercise the incremental update) and
// compare that part. As in the spec, the source inserts no metadata and
// the three switches push theirs with PushHop.

var (
	outerA = [4]byte{192, 0, 2, 1}
	outerB = [4]byte{192, 0, 2, 2}
	macO1  = [6]byte{2, 0, 0, 0, 0, 1}
	macO2  = [6]byte{2, 0, 0, 0, 0, 2}
	macI3  = [6]byte{2, 0, 0, 0, 0, 3}
	macI4  = [6]byte{2, 0, 0, 0, 0, 4}
)

const exMDOverGRE = `
45 00 00 58 // outer IPv4: Ver 4, IHL 5, DSCP 0, Length 88
00 01 40 00 // Identification 1, Flags DF
40 2f b6 72 // TTL 64, Proto 0x2F (GRE), Header Checksum
c0 00 02 01 // (Outer) Source Address 192.0.2.1
c0 00 02 02 // (Outer) Destination Address 192.0.2.2
00 00 88 b5 // GRE: C R K S s Recur Flags Ver all 0, Protocol Type TBD_INT
18 07 08 00 // INT shim: Type 1 (MD), G 1, Rsvd, Length 7, Next Protocol 0x0800
20 00 02 06 // INT-MD: Ver 2, D E M 0, HopML 2, Remaining Hop Count 6
90 00 00 00 // Instruction Bitmap node id + queue occupancy, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
45 00 00 20 // inner IPv4: Length 32
00 01 40 00
40 11 26 ca // Proto 17, Header Checksum
0a 00 00 01
0a 00 00 02
c3 50 13 88 // inner UDP 50000 -> 5000
00 0c 7c 78 // Length 12, Checksum
44 41 54 41 // payload
`

const exMXOverGRE = `
45 00 00 48 // outer IPv4: Length 72
00 01 40 00
40 2f b6 82 // TTL 64, Proto 0x2F (GRE), Header Checksum
c0 00 02 01
c0 00 02 02
00 00 88 b5 // GRE, Protocol Type TBD_INT
38 03 08 00 // INT shim: Type 3 (MX), G 1, Length 3, Next Protocol 0x0800
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
45 00 00 20 // inner IPv4 + UDP + payload
00 01 40 00
40 11 26 ca 
0a 00 00 01
0a 00 00 02
c3 50 13 88
00 0c 7c 78 
44 41 54 41
`

const exMDOverGRECE = `
02 00 00 00 // outer Ethernet: destination 02:00:00:00:00:02
00 02 02 00 //   source 02:00:00:00:00:01
00 00 00 01
08 00 45 00 //   EtherType 0x0800 | outer IPv4: Ver 4, IHL 5, DSCP 0
00 66 00 01 // Length 102, Identification 1
40 00 40 2f // Flags DF, TTL 64, Proto 0x2F (GRE)
b6 64 c0 00 // Header Checksum, Source Address 192.0.2.1
02 01 c0 00 //   Destination Address 192.0.2.2
02 02 00 00 //   GRE flags and version 0
88 b5 18 07 // GRE Protocol Type TBD_INT | INT shim: Type 1, G 1, Length 7
65 58 20 00 // shim Next Protocol 0x6558 (Ethernet) | INT-MD: Ver 2, D E M 0
02 06 90 00 //   HopML 2, Remaining Hop Count 6, Instruction Bitmap 1001 0000 0000 0000
00 00 00 00 // Domain Specific ID 0, DS Instruction 0
00 00 00 00 // DS Flags 0 | node id of hop2 (2)
00 02 00 00 //   | queue occupancy of hop2 (0x200)
02 00 00 00 //   | node id of hop1 (1)
00 01 00 00 //   | queue occupancy of hop1 (0x100)
01 00 02 00 //   | inner Ethernet frame: destination 02:00:00:00:00:04
00 00 00 04
02 00 00 00 //   source 02:00:00:00:00:03
00 03 08 00 //   EtherType 0x0800
45 00 00 20 // inner IPv4: Length 32
00 01 40 00
40 11 26 ca // Proto 17, Header Checksum
0a 00 00 01
0a 00 00 02
c3 50 13 88 // inner UDP 50000 -> 5000
00 0c 7c 78 // Length 12, Checksum
44 41 54 41 // payload
`

const exMXOverGRECE = `
02 00 00 00 // outer Ethernet: destination 02:00:00:00:00:02
00 02 02 00 //   source 02:00:00:00:00:01
00 00 00 01
08 00 45 00 //   EtherType 0x0800 | outer IPv4
00 56 00 01 // Length 86, Identification 1
40 00 40 2f // Flags DF, TTL 64, Proto 0x2F (GRE)
b6 74 c0 00 // Header Checksum, Source Address
02 01 c0 00
02 02 00 00 // GRE flags and version 0
88 b5 38 03 // GRE Protocol Type TBD_INT | INT shim: Type 3 (MX), G 1, Length 3
65 58 20 00 // shim Next Protocol 0x6558 | INT-MX: Ver 2, D 0
00 00 90 00 //   Reserved, Instruction Bitmap 1001 0000 0000 0000
00 00 00 00 // Domain Specific ID 0, DS Instruction 0
00 00 02 00 // DS Flags 0 | inner Ethernet frame
00 00 00 04
02 00 00 00
00 03 08 00
45 00 00 20
00 01 40 00
40 11 26 ca 
0a 00 00 01
0a 00 00 02
c3 50 13 88
00 0c 7c 78 
44 41 54 41
`

func innerEthernet(t testing.TB) []byte {
	in := udpPacket(t, exOrigPort, payld, false)
	b := make([]byte, EthernetLen+len(in))
	must(t, PutEthernet(b, macI4, macI3, EtherTypeIPv4))
	copy(b[EthernetLen:], in)
	return b
}

// greFrame builds [Ethernet] outer IPv4 / GRE(proto) / tail.
func greFrame(t testing.TB, withEth bool, proto uint16, tail []byte) []byte {
	l2 := 0
	if withEth {
		l2 = EthernetLen
	}
	b := make([]byte, l2+24+len(tail))
	if withEth {
		must(t, PutEthernet(b, macO2, macO1, EtherTypeIPv4))
	}
	must(t, IPv4Header{TotalLen: uint16(24 + len(tail)), ID: 1, Flags: 2, TTL: 64, Proto: ProtoGRE, Src: outerA, Dst: outerB}.Put(b[l2:]))
	must(t, PutGRE(b[l2+20:], proto))
	copy(b[l2+24:], tail)
	return b
}

func parseFrame(t testing.TB, c *Parser, withEth bool, b []byte, p *Packet) {
	t.Helper()
	if withEth {
		must(t, c.Parse(b, p))
	} else {
		must(t, c.ParseIP(b, p))
	}
}

func TestSpecExampleOverGRE(t *testing.T) {
	for _, tc := range []struct {
		name, lit string
		typ       spec.HeaderType
		ce        bool
	}{
		{"MD-IPv4", exMDOverGRE, spec.TypeMD, false},
		{"MX-IPv4", exMXOverGRE, spec.TypeMX, false},
		{"MD-CE", exMDOverGRECE, spec.TypeMD, true},
		{"MX-CE", exMXOverGRECE, spec.TypeMX, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.lit)
			inner, next := udpPacket(t, exOrigPort, payld, false), uint16(EtherTypeIPv4)
			if tc.ce {
				inner, next = innerEthernet(t), EtherTypeTEB
			}
			var intPart []byte
			if tc.typ == spec.TypeMD {
				// Source Switch1 adds GRE, the shim and INT-MD with its hop.
				intPart = mdSource(t, exMD(7), hopNQ(1))
			} else {
				intPart = mxSource(t, exMX, nil)
			}
			shim := make([]byte, 4)
			must(t, GREShim{Type: tc.typ, G: true, Length: uint8(len(intPart) / 4), NextProto: next}.Put(shim))
			tail := append(append(shim, intPart...), inner...)
			pkt := withRoom(greFrame(t, tc.ce, exGREProto, tail), 64)
			c := Parser{GREProto: exGREProto}
			var p Packet
			parseFrame(t, &c, tc.ce, pkt, &p)
			if p.Encap != spec.EncapGRE {
				t.Fatalf("parse: %+v", p)
			}
			var err error
			if tc.typ == spec.TypeMD {
				pkt, err = PushHop(pkt, &p, hopNQ(2), PushOptions{})
				must(t, err)
			}
			mustEqual(t, "INT over GRE", pkt, want)
			parseFrame(t, &c, tc.ce, pkt, &p)
			checkIPv4Checksum(t, pkt, &p)
			s, _ := DecodeGREShim(pkt[p.Shim:])
			if !s.G || s.NextProto != next || s.Type != tc.typ {
				t.Fatalf("GRE shim %+v", s)
			}
			if tc.typ == spec.TypeMD {
				checkMD(t, pkt, &p, 6, 2, 1)
			} else {
				checkMX(t, pkt, &p, exMX)
			}
			// The sink strips INT; GRE is left with the original protocol.
			pkt, err = Strip(pkt, &p, SinkOptions{})
			must(t, err)
			mustEqual(t, "stripped", pkt, greFrame(t, tc.ce, next, inner))
		})
	}
}

const exMDOverGPE = `
0c 00 00 82 // VXLAN-GPE: R R Ver 0 I 1 P 1 B 0 O 0, Reserved, NextProto 0x82 (INT)
12 34 56 00 // VNI 0x123456, Reserved
10 09 00 03 // INT shim: Type 1 (MD), Rsvd 0, Length 9, G 0, Reserved, NextProto 0x3 (Ethernet)
20 00 02 05 // INT-MD: Ver 2, D E M 0, HopML 2, Remaining Hop Count 5
90 00 00 00 // Instruction Bitmap 1001 0000 0000 0000, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 03 // node id of hop3
00 00 03 00 // queue occupancy of hop3
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
`

const exMXOverGPE = `
0c 00 00 82 // VXLAN-GPE: I 1 P 1, NextProto 0x82 (INT)
12 34 56 00 // VNI 0x123456
30 03 00 03 // INT shim: Type 3 (MX), Length 3, G 0, NextProto 0x3 (Ethernet)
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
`

// The spec figure shows Geneve Opt Len 9 in both Geneve examples, but Opt
// Len counts option headers too (RFC 8926): the INT option is 1 + 9 words
// for MD and 1 + 3 words for MX, so the consistent values are 10 and 4.
const exMDOverGeneve = `
0a 00 65 58 // Geneve: Ver 0, Opt Len 10, O 0, C 0, Protocol Type 0x6558 (Ethernet)
12 34 56 00 // VNI 0x123456, Reserved
01 03 01 09 // INT option: Class 0x0103, Type 1 (MD), R R R, Len 9
20 00 02 05 // INT-MD: Ver 2, HopML 2, Remaining Hop Count 5
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 03 // node id of hop3
00 00 03 00 // queue occupancy of hop3
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
`

const exMXOverGeneve = `
04 00 65 58 // Geneve: Ver 0, Opt Len 4, Protocol Type 0x6558
12 34 56 00 // VNI 0x123456
01 03 03 03 // INT option: Class 0x0103, Type 3 (MX), Len 3
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
`

// udpTunnel wraps tunnel header + INT + inner frame in IPv4/UDP with a
// computed UDP checksum.
func udpTunnel(t testing.TB, dport uint16, body []byte) []byte {
	b := make([]byte, 28+len(body))
	must(t, IPv4Header{TotalLen: uint16(len(b)), ID: 1, Flags: 2, TTL: 64, Proto: ProtoUDP, Src: outerA, Dst: outerB}.Put(b))
	must(t, UDPHeader{SrcPort: 0xc001, DstPort: dport, Length: uint16(8 + len(body))}.Put(b[20:]))
	copy(b[28:], body)
	var p Packet
	must(t, (&Parser{}).ParseIP(b, &p))
	SetL4Checksum(b, &p, true)
	return b
}

func TestSpecExampleOverVXLANGPE(t *testing.T) {
	for _, tc := range []struct {
		name, lit string
		typ       spec.HeaderType
	}{
		{"MD", exMDOverGPE, spec.TypeMD},
		{"MX", exMXOverGPE, spec.TypeMX},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.lit)
			inner := innerEthernet(t)
			intPart := mxSource(t, exMX, nil)
			if tc.typ == spec.TypeMD {
				intPart = mdSource(t, exMD(8)) // Host1 inserts no metadata
			}
			body := make([]byte, VXLANLen+ShimLen, 64)
			must(t, VXLANGPE{Flags: GPEFlagI | GPEFlagP, NextProto: spec.VXLANGPENextProtoINT, VNI: exVNI}.Put(body))
			must(t, GPEShim{Type: tc.typ, Length: uint8(len(intPart) / 4), NextProto: 3}.Put(body[VXLANLen:]))
			body = append(append(body, intPart...), inner...)
			pkt := withRoom(udpTunnel(t, spec.PortVXLANGPE, body), 64)
			c := Parser{VXLANGPEPort: spec.PortVXLANGPE}
			var p Packet
			if tc.typ == spec.TypeMD {
				for _, n := range []uint32{1, 2, 3} {
					must(t, c.ParseIP(pkt, &p))
					var err error
					pkt, err = PushHop(pkt, &p, hopNQ(n), PushOptions{})
					must(t, err)
					checkChecksums(t, pkt, &p)
				}
			}
			must(t, c.ParseIP(pkt, &p))
			if p.Encap != spec.EncapVXLANGPE {
				t.Fatalf("parse: %+v", p)
			}
			mustEqual(t, "INT over VXLAN-GPE", pkt[p.Tunnel:p.Next], want)
			checkChecksums(t, pkt, &p)
			if tc.typ == spec.TypeMD {
				checkMD(t, pkt, &p, 5, 3, 2, 1)
			} else {
				checkMX(t, pkt, &p, exMX)
			}
			pkt, err := Strip(pkt, &p, SinkOptions{})
			must(t, err)
			plain := make([]byte, VXLANLen, 64)
			must(t, VXLANGPE{Flags: GPEFlagI | GPEFlagP, NextProto: 3, VNI: exVNI}.Put(plain))
			mustEqual(t, "stripped", pkt, udpTunnel(t, spec.PortVXLANGPE, append(plain, inner...)))
		})
	}
}

func TestSpecExampleOverGeneve(t *testing.T) {
	for _, tc := range []struct {
		name, lit string
		typ       spec.HeaderType
	}{
		{"MD", exMDOverGeneve, spec.TypeMD},
		{"MX", exMXOverGeneve, spec.TypeMX},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.lit)
			inner := innerEthernet(t)
			intPart := mxSource(t, exMX, nil)
			if tc.typ == spec.TypeMD {
				intPart = mdSource(t, exMD(8))
			}
			words := uint8(len(intPart) / 4)
			body := make([]byte, GeneveLen+4, 64)
			must(t, Geneve{OptLen: 1 + words, Protocol: EtherTypeTEB, VNI: exVNI}.Put(body))
			must(t, GeneveOption{Class: spec.GeneveClassINT, Type: uint8(tc.typ), Length: words}.Put(body[GeneveLen:]))
			body = append(append(body, intPart...), inner...)
			pkt := withRoom(udpTunnel(t, spec.PortGeneve, body), 64)
			c := Parser{GenevePort: spec.PortGeneve}
			var p Packet
			if tc.typ == spec.TypeMD {
				for _, n := range []uint32{1, 2, 3} {
					must(t, c.ParseIP(pkt, &p))
					var err error
					pkt, err = PushHop(pkt, &p, hopNQ(n), PushOptions{})
					must(t, err)
					checkChecksums(t, pkt, &p)
				}
			}
			must(t, c.ParseIP(pkt, &p))
			if p.Encap != spec.EncapGeneve {
				t.Fatalf("parse: %+v", p)
			}
			mustEqual(t, "INT over Geneve", pkt[p.Tunnel:p.Next], want)
			checkChecksums(t, pkt, &p)
			if tc.typ == spec.TypeMD {
				checkMD(t, pkt, &p, 5, 3, 2, 1)
			} else {
				checkMX(t, pkt, &p, exMX)
			}
			pkt, err := Strip(pkt, &p, SinkOptions{})
			must(t, err)
			plain := make([]byte, GeneveLen, 64)
			must(t, Geneve{Protocol: EtherTypeTEB, VNI: exVNI}.Put(plain))
			mustEqual(t, "stripped", pkt, udpTunnel(t, spec.PortGeneve, append(plain, inner...)))
		})
	}
}

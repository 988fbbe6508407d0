package wire

import (
	"bytes"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// Worked examples of int-spec-v2.1.mdk §6 "Examples". Each literal is
// transcribed from the spec's figures; values the spec leaves open are
// chosen once in helpers_test.go (addresses 10.0.0.1 -> 10.0.0.2, TCP ports
// 50000 -> 80, payload "DATA", INT_TBD 10000, hop n = node id n with queue
// occupancy n*0x100). Checksums are whatever the chosen values give; the
// tests verify them by full recomputation. INT-MD examples over TCP/UDP are
// built the way the network builds them: the source inserts INT with its
// own hop (InsertINT), Switch2 pushes its hop (PushHop), and the sink
// strips everything back to the original packet (Strip).

const exMDOverTCP = `
// IPv4 header
45 5c 00 4c // Ver 4, IHL 5, DSCP 0x17 (INT), ECN 0, Length 76
00 01 40 00 // Identification 1, Flags DF, Fragment Offset 0
40 06 26 4d // TTL 64, Proto 6 (TCP), Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
// TCP header
c3 50 00 50 // Source Port 50000, Destination Port 80
00 00 00 01 // Sequence Number 1
00 00 00 00 // Acknowledgment Number 0
50 18 ff ff // Data Offset 5, flags ACK|PSH, Window 65535
7a 49 00 00 // Checksum, Urgent Pointer 0
// INT shim for TCP/UDP
10 07 00 28 // Type 1 (INT-MD), NPT 0, Length 7, Reserved, original DSCP 0x0a
// INT-MD metadata header
20 00 02 06 // Ver 2, D 0, E 0, M 0, Reserved, HopML 2, Remaining Hop Count 6
90 00 00 00 // Instruction Bitmap 1001 0000 0000 0000, Domain Specific ID 0
00 00 00 00 // DS Instruction 0, DS Flags 0
// INT metadata stack
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2 (queue id 0)
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
44 41 54 41 // TCP payload "DATA"
`

const exMXOverTCP = `
45 5c 00 3c // Ver 4, IHL 5, DSCP 0x17 (INT), ECN 0, Length 60
00 01 40 00 // Identification 1, Flags DF
40 06 26 5d // TTL 64, Proto 6 (TCP), Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
c3 50 00 50 // TCP Source Port 50000, Destination Port 80
00 00 00 01 // Sequence Number
00 00 00 00 // Acknowledgment Number
50 18 ff ff // Data Offset 5, ACK|PSH, Window
5f 66 00 00 // Checksum, Urgent Pointer
30 03 00 28 // shim: Type 3 (INT-MX), NPT 0, Length 3, original DSCP 0x0a
20 00 00 00 // INT-MX: Ver 2, D 0, Reserved
90 00 00 00 // Instruction Bitmap 1001 0000 0000 0000, Domain Specific ID 0
00 00 00 00 // DS Instruction 0, DS Flags 0
44 41 54 41 // TCP payload
`

const exMDNewUDPBeforeTCP = `
45 00 00 54 // Ver 4, IHL 5, DSCP 0, Length 84
00 01 40 00 // Identification 1, Flags DF
40 11 26 96 // TTL 64, Proto 17 (UDP), Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
c4 82 27 10 // UDP Source Port (entropy: hash of the original 5-tuple), Destination Port INT_TBD (10000)
00 40 00 00 // UDP Length 64, Checksum 0 (recommended for the new header)
18 07 00 06 // shim: Type 1 (INT-MD), NPT 2, Length 7, Reserved, IP proto 6
20 00 02 06 // INT-MD: Ver 2, D E M 0, HopML 2, Remaining Hop Count 6
90 00 00 00 // Instruction Bitmap node id + queue occupancy, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
c3 50 00 50 // original TCP header: ports 50000 -> 80
00 00 00 01 // Sequence Number
00 00 00 00 // Acknowledgment Number
50 18 ff ff // Data Offset 5, ACK|PSH, Window
3f a2 00 00 // TCP Checksum (unchanged from the original), Urgent Pointer
44 41 54 41 // TCP payload
`

const exMXNewUDPBeforeTCP = `
45 00 00 44 // Ver 4, IHL 5, DSCP 0, Length 68
00 01 40 00 // Identification 1, Flags DF
40 11 26 a6 // TTL 64, Proto 17, Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
c4 82 27 10 // UDP Source Port (entropy), Destination Port INT_TBD
00 30 00 00 // UDP Length 48, Checksum 0
38 03 00 06 // shim: Type 3 (INT-MX), NPT 2, Length 3, IP proto 6
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
c3 50 00 50 // TCP header
00 00 00 01
00 00 00 00
50 18 ff ff
3f a2 00 00 
44 41 54 41 // TCP payload
`

const exMDBetweenUDPAndPayload = `
45 00 00 40 // Ver 4, IHL 5, DSCP 0, Length 64
00 01 40 00 // Identification 1, Flags DF
40 11 26 aa // TTL 64, Proto 17, Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
c3 50 27 10 // UDP Source Port 50000, Destination Port INT_TBD
00 2c 8c 17 // UDP Length 44, Checksum
14 07 13 88 // shim: Type 1 (INT-MD), NPT 1, Length 7, UDP port XYZ = 5000
20 00 02 06 // INT-MD: Ver 2, HopML 2, Remaining Hop Count 6
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
00 00 00 02 // node id of hop2
00 00 02 00 // queue occupancy of hop2
00 00 00 01 // node id of hop1
00 00 01 00 // queue occupancy of hop1
44 41 54 41 // UDP payload
`

const exMXBetweenUDPAndPayload = `
45 00 00 30 // Ver 4, IHL 5, DSCP 0, Length 48
00 01 40 00 // Identification 1, Flags DF
40 11 26 ba // TTL 64, Proto 17, Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
c3 50 27 10 // UDP Source Port 50000, Destination Port INT_TBD
00 1c 71 44 // UDP Length 28, Checksum
34 03 13 88 // shim: Type 3 (INT-MX), NPT 1, Length 3, UDP port XYZ = 5000
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
44 41 54 41 // UDP payload
`

const exMXBeforeIPsec = `
45 00 00 5c // outer IPv4: Ver 4, IHL 5, DSCP 0, Length 92
00 01 40 00 // Identification 1, Flags DF
40 11 26 8e // TTL 64, Proto 17, Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
ed ae 27 10 // UDP Source Port (entropy), Destination Port INT_TBD
00 48 00 00 // UDP Length 72, Checksum 0
38 03 00 04 // shim: Type 3 (INT-MX), NPT 2, Length 3, IP proto 4 (IPv4 follows)
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 00 00 // Instruction Bitmap, Domain Specific ID 0
00 00 00 00 // DS Instruction, DS Flags
45 00 00 30 // inner IPv4: Ver 4, IHL 5, DSCP 0, Length 48
00 02 40 00 // Identification 2, Flags DF
40 33 26 97 // TTL 64, Proto 51 (AH), Header Checksum
0a 00 00 01 // Source Address
0a 00 00 02 // Destination Address
3b 04 00 00 // AH: Next Header 59, Payload Len 4, Reserved
00 00 10 00 // SPI 0x1000
00 00 00 01 // Sequence Number 1
aa aa aa aa // ICV (96 bits, chosen)
aa aa aa aa
aa aa aa aa
44 41 54 41 // IP payload
`

// mkIPsecInner builds the inner IPv4 + AH + payload of the IPsec example.
func mkIPsecInner(t testing.TB) []byte {
	b := make([]byte, 48)
	must(t, IPv4Header{TotalLen: 48, ID: 2, Flags: 2, TTL: 64, Proto: 51, Src: hostA, Dst: hostB}.Put(b))
	copy(b[20:], []byte{59, 4, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 1})
	copy(b[32:], bytes.Repeat([]byte{0xaa}, 12))
	copy(b[44:], payld)
	return b
}

func TestSpecExampleMDOverTCP(t *testing.T) {
	want := hx(t, exMDOverTCP)
	orig := tcpPacket(t, exOrigDSCP<<2, payld)
	c := Parser{DSCP: exINTDSCP, DSCPMask: 0x3f}
	pkt := withRoom(orig, 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	if p.HasINT() {
		t.Fatal("original packet parsed as INT")
	}
	// Switch1 (source) inserts INT-MD with its own hop: 8 -> 7.
	pkt, err := InsertINT(pkt, &p, spec.TypeMD, mdSource(t, exMD(7), hopNQ(1)),
		&SourceOptions{Encap: spec.EncapDSCP, DSCP: exINTDSCP, Mask: 0x3f})
	must(t, err)
	checkChecksums(t, pkt, &p)
	// Switch2 (transit) parses and pushes: 7 -> 6.
	must(t, c.ParseIP(pkt, &p))
	pkt, err = PushHop(pkt, &p, hopNQ(2), PushOptions{})
	must(t, err)
	mustEqual(t, "INT-MD over TCP", pkt, want)
	checkChecksums(t, pkt, &p)
	// Switch3 (sink) decodes and strips.
	must(t, c.ParseIP(pkt, &p))
	if p.Encap != spec.EncapDSCP || p.Shim != 40 {
		t.Fatalf("parse: %+v", p)
	}
	s, _ := DecodeShim(pkt[p.Shim:])
	if s != (Shim{Type: spec.TypeMD, NPT: 0, Length: 7, Value: ShimDSCP(exOrigDSCP)}) || s.DSCP() != exOrigDSCP {
		t.Fatalf("shim %+v", s)
	}
	checkMD(t, pkt, &p, 6, 2, 1)
	pkt, err = Strip(pkt, &p, SinkOptions{RestoreDSCP: true})
	must(t, err)
	mustEqual(t, "stripped packet", pkt, orig)
}

func TestSpecExampleMXOverTCP(t *testing.T) {
	want := hx(t, exMXOverTCP)
	orig := tcpPacket(t, exOrigDSCP<<2, payld)
	c := Parser{DSCP: exINTDSCP, DSCPMask: 0x3f}
	pkt := withRoom(orig, 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	pkt, err := InsertINT(pkt, &p, spec.TypeMX, mxSource(t, exMX, nil),
		&SourceOptions{Encap: spec.EncapDSCP, DSCP: exINTDSCP, Mask: 0x3f})
	must(t, err)
	mustEqual(t, "INT-MX over TCP", pkt, want)
	checkChecksums(t, pkt, &p)
	must(t, c.ParseIP(pkt, &p))
	checkMX(t, pkt, &p, exMX)
	pkt, err = Strip(pkt, &p, SinkOptions{RestoreDSCP: true})
	must(t, err)
	mustEqual(t, "stripped packet", pkt, orig)
}

func TestSpecExampleNewUDPBeforeTCP(t *testing.T) {
	for _, tc := range []struct {
		name, lit string
		typ       spec.HeaderType
	}{
		{"MD", exMDNewUDPBeforeTCP, spec.TypeMD},
		{"MX", exMXNewUDPBeforeTCP, spec.TypeMX},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.lit)
			orig := tcpPacket(t, 0, payld)
			c := Parser{UDPPort: exINTPort}
			pkt := withRoom(orig, 64)
			var p Packet
			must(t, c.ParseIP(pkt, &p))
			entropy := p.Flow.EntropyPort()
			hdr := mxSource(t, exMX, nil)
			if tc.typ == spec.TypeMD {
				hdr = mdSource(t, exMD(7), hopNQ(1))
			}
			pkt, err := InsertINT(pkt, &p, tc.typ, hdr, &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTIPProto, UDPPort: exINTPort})
			must(t, err)
			if tc.typ == spec.TypeMD {
				must(t, c.ParseIP(pkt, &p))
				pkt, err = PushHop(pkt, &p, hopNQ(2), PushOptions{})
				must(t, err)
			}
			if be16(pkt, 20) != entropy || entropy < 0xc000 {
				t.Fatalf("source port %#x, want entropy %#x", be16(pkt, 20), entropy)
			}
			mustEqual(t, "new UDP + INT before TCP", pkt, want)
			must(t, c.ParseIP(pkt, &p))
			checkChecksums(t, pkt, &p) // outer UDP checksum is zero
			if p.Encap != spec.EncapUDPPort || p.Flow.Proto != ProtoTCP || p.Flow.SrcPort != 50000 || p.Flow.DstPort != 80 {
				t.Fatalf("parse: %+v", p)
			}
			s, _ := DecodeShim(pkt[p.Shim:])
			if s.NPT != spec.NPTIPProto || s.OrigProto() != ProtoTCP {
				t.Fatalf("shim %+v", s)
			}
			if tc.typ == spec.TypeMD {
				checkMD(t, pkt, &p, 6, 2, 1)
			} else {
				checkMX(t, pkt, &p, exMX)
			}
			// The original TCP checksum must still verify behind the INT stack.
			var inner Packet
			must(t, (&Parser{}).ParseIP(orig, &inner))
			pkt, err = Strip(pkt, &p, SinkOptions{})
			must(t, err)
			mustEqual(t, "stripped packet", pkt, orig)
		})
	}
}

func TestSpecExampleBetweenUDPAndPayload(t *testing.T) {
	for _, tc := range []struct {
		name, lit string
		typ       spec.HeaderType
	}{
		{"MD", exMDBetweenUDPAndPayload, spec.TypeMD},
		{"MX", exMXBetweenUDPAndPayload, spec.TypeMX},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(t, tc.lit)
			orig := udpPacket(t, exOrigPort, payld, false)
			c := Parser{UDPPort: exINTPort}
			pkt := withRoom(orig, 64)
			var p Packet
			must(t, c.ParseIP(pkt, &p))
			hdr := mxSource(t, exMX, nil)
			if tc.typ == spec.TypeMD {
				hdr = mdSource(t, exMD(7), hopNQ(1))
			}
			pkt, err := InsertINT(pkt, &p, tc.typ, hdr, &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTUDPPort, UDPPort: exINTPort})
			must(t, err)
			checkChecksums(t, pkt, &p)
			if tc.typ == spec.TypeMD {
				must(t, c.ParseIP(pkt, &p))
				pkt, err = PushHop(pkt, &p, hopNQ(2), PushOptions{})
				must(t, err)
			}
			mustEqual(t, "INT between UDP header and payload", pkt, want)
			must(t, c.ParseIP(pkt, &p))
			checkChecksums(t, pkt, &p)
			if p.Flow.DstPort != exOrigPort {
				t.Fatalf("flow %+v: want original port", p.Flow)
			}
			if tc.typ == spec.TypeMD {
				checkMD(t, pkt, &p, 6, 2, 1)
			} else {
				checkMX(t, pkt, &p, exMX)
			}
			pkt, err = Strip(pkt, &p, SinkOptions{})
			must(t, err)
			mustEqual(t, "stripped packet", pkt, orig)
		})
	}
}

func TestSpecExampleMXBeforeIPsec(t *testing.T) {
	want := hx(t, exMXBeforeIPsec)
	inner := mkIPsecInner(t)
	// The source adds a new outer IPv4 header (IP-in-IP), then the UDP
	// header and INT-MX with NPT 2 / IP proto 4.
	orig := make([]byte, 20+len(inner))
	must(t, IPv4Header{TotalLen: uint16(len(orig)), ID: 1, Flags: 2, TTL: 64, Proto: ProtoIPv4, Src: hostA, Dst: hostB}.Put(orig))
	copy(orig[20:], inner)
	c := Parser{UDPPort: exINTPort}
	pkt := withRoom(orig, 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	pkt, err := InsertINT(pkt, &p, spec.TypeMX, mxSource(t, exMX, nil), &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTIPProto, UDPPort: exINTPort})
	must(t, err)
	mustEqual(t, "INT-MX before IPsec", pkt, want)
	must(t, c.ParseIP(pkt, &p))
	checkChecksums(t, pkt, &p)
	checkMX(t, pkt, &p, exMX)
	s, _ := DecodeShim(pkt[p.Shim:])
	if s.OrigProto() != ProtoIPv4 || !bytes.Equal(pkt[p.Next:], inner) {
		t.Fatalf("shim %+v / inner packet not found after INT", s)
	}
	pkt, err = Strip(pkt, &p, SinkOptions{})
	must(t, err)
	mustEqual(t, "stripped packet", pkt, orig)
}

const exMXSourceInsertedDS = `
45 00 00 4c // IPv4 as in the new-UDP-before-TCP example, Length 76
00 01 40 00
40 11 26 9e 
0a 00 00 01
0a 00 00 02
c4 82 27 10 // UDP Source Port (entropy), Destination Port INT_TBD
00 38 00 00 // UDP Length 56, Checksum 0
38 05 00 06 // shim: Type 3 (INT-MX), NPT 2, Length 5, IP proto 6
20 00 00 00 // INT-MX: Ver 2, D 0
90 00 ab cd // Instruction Bitmap 1001 0000 0000 0000, Domain Specific ID 0xabcd
c0 00 00 00 // DS Instruction 1100 0000 0000 0000, DS Flags 0
00 00 00 0f // Sequence Number (source-inserted) 15
12 34 56 78 // Flow ID (source-inserted) 0x12345678
c3 50 00 50 // TCP header
00 00 00 01
00 00 00 00
50 18 ff ff
3f a2 00 00 
44 41 54 41 // TCP payload
`

func TestSpecExampleMXSourceInsertedDS(t *testing.T) {
	want := hx(t, exMXSourceInsertedDS)
	mx := MXHeader{Version: 2, Instructions: spec.InstNodeID | spec.InstQueue, DomainID: 0xabcd, DSInstructions: 0xc000}
	ds := []byte{0, 0, 0, 15, 0x12, 0x34, 0x56, 0x78}
	orig := tcpPacket(t, 0, payld)
	c := Parser{UDPPort: exINTPort}
	pkt := withRoom(orig, 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	pkt, err := InsertINT(pkt, &p, spec.TypeMX, mxSource(t, mx, ds), &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTIPProto, UDPPort: exINTPort})
	must(t, err)
	mustEqual(t, "INT-MX with source-inserted metadata", pkt, want)
	must(t, c.ParseIP(pkt, &p))
	checkMX(t, pkt, &p, mx)
	if got := pkt[p.INT+MXHeaderLen : p.Next]; !bytes.Equal(got, ds) {
		t.Fatalf("source-inserted metadata % x", got)
	}
	pkt, err = Strip(pkt, &p, SinkOptions{})
	must(t, err)
	mustEqual(t, "stripped packet", pkt, orig)
}

// The spec shows only the INT-MD header and stack as transmitted by hop2.
const exMDSourceOnlyDS = `
20 00 01 05 // Ver 2, D E M 0, HopML 1, Remaining Hop Count 5
80 00 54 53 // Instruction Bitmap 1000 0000 0000 0000, Domain Specific ID 0x5453 ("TS")
80 00 40 00 // DS Instruction bit 0 (source-only device MAC), DS Flags bit 1 (set by gateway)
00 00 00 02 // node id of hop2
00 00 00 01 // node id of hop1
00 00 00 0a // node id of gateway (chosen: 10)
a6 1a f6 b1 // first 4 bytes of host1 MAC
64 7d 00 00 // last 2 bytes of host1 MAC, reserved
`

func TestSpecExampleMDSourceOnlyDS(t *testing.T) {
	want := hx(t, exMDSourceOnlyDS)
	h := MDHeader{Version: 2, HopML: 1, RemainingHops: 7, Instructions: spec.InstNodeID, DomainID: 0x5453, DSInstructions: 0x8000, DSFlags: 0x4000}
	mac := []byte{0xa6, 0x1a, 0xf6, 0xb1, 0x64, 0x7d, 0, 0}
	node := func(n uint32) *HopMetadata { return &HopMetadata{NodeID: n, Valid: spec.InstNodeID} }
	// The gateway (source) writes its hop then the source-only metadata,
	// which is excluded from Hop ML and stays at the bottom of the stack.
	src := append(mdSource(t, h, node(10)), mac...)
	orig := udpPacket(t, exOrigPort, payld, false)
	c := Parser{UDPPort: exINTPort}
	pkt := withRoom(orig, 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	pkt, err := InsertINT(pkt, &p, spec.TypeMD, src, &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTUDPPort, UDPPort: exINTPort})
	must(t, err)
	for _, n := range []uint32{1, 2} {
		must(t, c.ParseIP(pkt, &p))
		pkt, err = PushHop(pkt, &p, node(n), PushOptions{})
		must(t, err)
	}
	must(t, c.ParseIP(pkt, &p))
	checkChecksums(t, pkt, &p)
	mustEqual(t, "INT-MD with source-only metadata", pkt[p.INT:p.Next], want)
	hd, s, err := DecodeMD(pkt[p.INT:p.Next], len(mac))
	must(t, err)
	h.RemainingHops = 5
	if hd != h || s.Count() != 3 || !bytes.Equal(s.SourceOnly, mac) {
		t.Fatalf("decoded %+v, %d hops, source-only % x", hd, s.Count(), s.SourceOnly)
	}
	for i, n := range []uint32{2, 1, 10} {
		var m HopMetadata
		must(t, DecodeHop(s.Hop(i), hd.Instructions, &m))
		if m.NodeID != n {
			t.Fatalf("hop %d node %d, want %d", i, m.NodeID, n)
		}
	}
	pkt, err = Strip(pkt, &p, SinkOptions{})
	must(t, err)
	mustEqual(t, "stripped packet", pkt, orig)
}

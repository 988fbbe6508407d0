package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// hx decodes a commented hex literal: "//" starts a comment, whitespace is
// ignored.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad hex literal: %v", err)
	}
	return b
}

func dump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&sb, "%4d: % x\n", i, b[i:min(i+4, len(b))])
	}
	return sb.String()
}

func mustEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the spec literal\ngot:\n%swant:\n%s", what, dump(got), dump(want))
	}
}

// withRoom copies b into a buffer with spare capacity for in-place growth.
func withRoom(b []byte, room int) []byte {
	out := make([]byte, len(b), len(b)+room)
	copy(out, b)
	return out
}

func checkIPv4Checksum(t testing.TB, pkt []byte, p *Packet) {
	t.Helper()
	if p.IPVersion != 4 {
		return
	}
	if got := Fold(Sum(0, pkt[p.L3:p.L3+p.IPHeaderLen])); got != 0xffff {
		t.Fatalf("IPv4 header checksum wrong (sum %#x)", got)
	}
}

func checkChecksums(t testing.TB, pkt []byte, p *Packet) {
	t.Helper()
	checkIPv4Checksum(t, pkt, p)
	if !VerifyL4Checksum(pkt, p) {
		t.Fatalf("L4 checksum wrong\n%s", dump(pkt))
	}
}

var (
	hostA = [4]byte{10, 0, 0, 1}
	hostB = [4]byte{10, 0, 0, 2}
	payld = []byte("DATA")
)

// Example parameters the spec leaves open (chosen here):
const (
	exINTPort  = 10000  // INT_TBD UDP destination port
	exGREProto = 0x88b5 // TBD_INT GRE protocol type (IEEE local experimental EtherType)
	exOrigPort = 5000   // XYZ, the original UDP destination port
	exOrigDSCP = 0x0a   // original DSCP kept in the NPT 0 shim
	exINTDSCP  = 0x17   // DSCP value marking INT (given by the spec)
	exVNI      = 0x123456
)

// tcpPacket builds IPv4/TCP/payload with correct checksums.
func tcpPacket(t testing.TB, tos uint8, data []byte) []byte {
	b := make([]byte, 40+len(data))
	must(t, IPv4Header{TOS: tos, TotalLen: uint16(len(b)), ID: 1, Flags: 2, TTL: 64, Proto: ProtoTCP, Src: hostA, Dst: hostB}.Put(b))
	must(t, TCPHeader{SrcPort: 50000, DstPort: 80, Seq: 1, Flags: 0x18, Window: 0xffff}.Put(b[20:]))
	copy(b[40:], data)
	var p Packet
	var c Parser
	must(t, c.ParseIP(b, &p))
	SetL4Checksum(b, &p, false)
	return b
}

// udpPacket builds IPv4/UDP/payload with a UDP checksum (unless zeroCsum).
func udpPacket(t testing.TB, dport uint16, data []byte, zeroCsum bool) []byte {
	b := make([]byte, 28+len(data))
	must(t, IPv4Header{TOS: 0, TotalLen: uint16(len(b)), ID: 1, Flags: 2, TTL: 64, Proto: ProtoUDP, Src: hostA, Dst: hostB}.Put(b))
	must(t, UDPHeader{SrcPort: 50000, DstPort: dport, Length: uint16(8 + len(data))}.Put(b[20:]))
	copy(b[28:], data)
	if !zeroCsum {
		var p Packet
		var c Parser
		must(t, c.ParseIP(b, &p))
		SetL4Checksum(b, &p, true)
	}
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hopNQ is the metadata of example hop n: node id n, queue id 0 and
// occupancy n*0x100 (values chosen; the spec names the fields only).
func hopNQ(n uint32) *HopMetadata {
	return &HopMetadata{NodeID: n, QueueOccupancy: n * 0x100, Valid: spec.InstNodeID | spec.InstQueue}
}

// mdSource encodes the INT-MD header plus the source's own hop (if any).
func mdSource(t testing.TB, h MDHeader, hops ...*HopMetadata) []byte {
	b := make([]byte, MDHeaderLen+len(hops)*int(h.HopML)*4)
	must(t, h.Put(b))
	off := MDHeaderLen
	for _, m := range hops {
		n, err := PutHop(b[off:], h.Instructions, int(h.HopML)-h.Instructions.Words(), m)
		must(t, err)
		off += n
	}
	return b
}

func mxSource(t testing.TB, h MXHeader, ds []byte) []byte {
	b := make([]byte, MXHeaderLen+len(ds))
	must(t, h.Put(b))
	copy(b[MXHeaderLen:], ds)
	return b
}

// exMD is the example INT-MD header: HopML 2, node id + queue occupancy.
func exMD(remaining uint8) MDHeader {
	return MDHeader{Version: 2, HopML: 2, RemainingHops: remaining, Instructions: spec.InstNodeID | spec.InstQueue}
}

var exMX = MXHeader{Version: 2, Instructions: spec.InstNodeID | spec.InstQueue}

// checkMD decodes the INT-MD block of a parsed packet and checks the
// example's values: hops listed most recent first.
func checkMD(t testing.TB, pkt []byte, p *Packet, remaining uint8, hops ...uint32) {
	t.Helper()
	if p.INTType != spec.TypeMD {
		t.Fatalf("INT type %d, want MD", p.INTType)
	}
	h, s, err := DecodeMD(pkt[p.INT:p.Next], 0)
	must(t, err)
	if want := exMD(remaining); h != want {
		t.Fatalf("MD header %+v, want %+v", h, want)
	}
	if s.Count() != len(hops) {
		t.Fatalf("%d hops, want %d", s.Count(), len(hops))
	}
	for i, n := range hops {
		var m HopMetadata
		must(t, DecodeHop(s.Hop(i), h.Instructions, &m))
		if m.NodeID != n || m.QueueOccupancy != n*0x100 || m.QueueID != 0 || m.Valid != spec.InstNodeID|spec.InstQueue {
			t.Fatalf("hop %d: %+v, want node %d", i, m, n)
		}
	}
}

func checkMX(t testing.TB, pkt []byte, p *Packet, want MXHeader) {
	t.Helper()
	if p.INTType != spec.TypeMX {
		t.Fatalf("INT type %d, want MX", p.INTType)
	}
	h, err := DecodeMXHeader(pkt[p.INT:])
	must(t, err)
	if h != want {
		t.Fatalf("MX header %+v, want %+v", h, want)
	}
}

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

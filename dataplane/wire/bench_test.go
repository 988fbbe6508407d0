package wire

import (
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// Benchmarks of the per-packet paths. Run:
//
//	go test -run='^$' -bench=. -benchmem ./dataplane/wire/

const inst5 = spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTxUtil

func hop5(n uint32) *HopMetadata {
	return &HopMetadata{NodeID: n, IngressPort: 1, EgressPort: 2, HopLatency: 1000 + n, QueueID: 3,
		QueueOccupancy: 40 * n, TxUtilization: 50, Valid: inst5}
}

type benchCase struct {
	c   Parser
	pkt []byte // frame with INT
	p   Packet // parsed
}

// mdUDPPacket builds an IPv4/UDP packet (UDP port marking, NPT 1, non-zero
// UDP checksum, 64-byte payload) carrying INT-MD with hops 5-field hops.
func mdUDPPacket(tb testing.TB, hops int, tcp bool) benchCase {
	payload := make([]byte, 64)
	var orig []byte
	c := Parser{UDPPort: exINTPort}
	opt := SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTUDPPort, UDPPort: exINTPort}
	if tcp {
		orig = tcpPacket(tb, 0, payload)
		c = Parser{DSCP: exINTDSCP, DSCPMask: 0x3f}
		opt = SourceOptions{Encap: spec.EncapDSCP, DSCP: exINTDSCP, Mask: 0x3f}
	} else {
		orig = udpPacket(tb, exOrigPort, payload, false)
	}
	pkt := withRoom(orig, 512)
	var p Packet
	must(tb, c.ParseIP(pkt, &p))
	h := MDHeader{Version: 2, HopML: 5, RemainingHops: 16, Instructions: inst5}
	srcHops := []*HopMetadata{}
	if hops > 0 {
		h.RemainingHops--
		srcHops = append(srcHops, hop5(1))
	}
	pkt, err := InsertINT(pkt, &p, spec.TypeMD, mdSource(tb, h, srcHops...), &opt)
	must(tb, err)
	for i := 2; i <= hops; i++ {
		must(tb, c.ParseIP(pkt, &p))
		pkt, err = PushHop(pkt, &p, hop5(uint32(i)), PushOptions{})
		must(tb, err)
	}
	must(tb, c.ParseIP(pkt, &p))
	return benchCase{c: c, pkt: pkt, p: p}
}

func decodeMD5(bc *benchCase, p *Packet) (sum uint32, err error) {
	if err = bc.c.ParseIP(bc.pkt, p); err != nil {
		return 0, err
	}
	h, s, err := DecodeMD(bc.pkt[p.INT:p.Next], 0)
	if err != nil {
		return 0, err
	}
	var m HopMetadata
	for i := 0; i < s.Count(); i++ {
		if err = DecodeHop(s.Hop(i), h.Instructions, &m); err != nil {
			return 0, err
		}
		sum += m.HopLatency
	}
	return sum, nil
}

func BenchmarkDecodeMD_5Hops5Fields(b *testing.B) {
	bc := mdUDPPacket(b, 5, false)
	var p Packet
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeMD5(&bc, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPush(b *testing.B, tcp bool) {
	bc := mdUDPPacket(b, 1, tcp)
	tmpl := bc.pkt
	buf := make([]byte, len(tmpl), len(tmpl)+64)
	m := hop5(2)
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, tmpl) // reset the frame; ~150 bytes
		p := bc.p
		if _, err := PushHop(buf[:len(tmpl)], &p, m, PushOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPushHop_5Fields_IPv4UDPChecksum(b *testing.B) { benchPush(b, false) }
func BenchmarkPushHop_5Fields_IPv4TCP(b *testing.B)         { benchPush(b, true) }

func BenchmarkStripSink_5Hops_IPv4UDP(b *testing.B) {
	bc := mdUDPPacket(b, 5, false)
	tmpl := bc.pkt
	buf := make([]byte, len(tmpl))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, tmpl)
		p := bc.p
		if _, err := Strip(buf, &p, SinkOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

var benchReportHeader = ReportHeader{Type: spec.RepINT, InType: spec.InIPv4, TrackedFlow: true,
	RepMdBits: RepL1Ports | RepHopLatency | RepQueue | RepEgressTimestamp}

func benchReportMD() *ReportMetadata {
	return &ReportMetadata{IngressPort: 1, EgressPort: 2, HopLatency: 900, QueueOccupancy: 77, EgressTimestamp: 1e18}
}

// embedded3Hops is a truncated packet (up to the end of the INT stack)
// carrying a 3-hop INT-MD stack of 5 fields.
func embedded3Hops(tb testing.TB) []byte {
	bc := mdUDPPacket(tb, 3, false)
	return bc.pkt[:bc.p.Next]
}

func encodeReport(buf, inner []byte, md *ReportMetadata) ([]byte, error) {
	buf, err := AppendGroupHeader(buf[:0], GroupHeader{Version: 2, Seq: 7, NodeID: 9})
	if err != nil {
		return buf, err
	}
	return AppendReport(buf, &benchReportHeader, md, nil, inner)
}

func BenchmarkReportEncode_Embedded3Hops(b *testing.B) {
	inner := embedded3Hops(b)
	buf := make([]byte, 0, 512)
	md := benchReportMD()
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = encodeReport(buf, inner, md); err != nil {
			b.Fatal(err)
		}
	}
}

func decodeReport(payload []byte, md *ReportMetadata) (int, error) {
	_, rr, err := NewReportReader(payload)
	if err != nil {
		return 0, err
	}
	var r Report
	n := 0
	for rr.Next(&r) {
		if _, err := r.Baseline(md); err != nil {
			return n, err
		}
		n++
	}
	return n, rr.Err()
}

func BenchmarkReportDecode_Embedded3Hops(b *testing.B) {
	payload, _ := encodeReport(nil, embedded3Hops(b), benchReportMD())
	var md ReportMetadata
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeReport(payload, &md); err != nil {
			b.Fatal(err)
		}
	}
}

// ...and walking into the embedded stack, as a collector does.
func decodeReportDeep(payload []byte, c *Parser, md *ReportMetadata) (uint32, error) {
	_, rr, err := NewReportReader(payload)
	if err != nil {
		return 0, err
	}
	var r Report
	var p Packet
	var m HopMetadata
	var sum uint32
	for rr.Next(&r) {
		if _, err := r.Baseline(md); err != nil {
			return 0, err
		}
		if err := c.ParseIP(r.Inner, &p); err != nil {
			return 0, err
		}
		h, s, err := DecodeMD(r.Inner[p.INT:p.Next], 0)
		if err != nil {
			return 0, err
		}
		for i := 0; i < s.Count(); i++ {
			_ = DecodeHop(s.Hop(i), h.Instructions, &m)
			sum += m.HopLatency
		}
	}
	return sum, rr.Err()
}

func BenchmarkReportDecode_Embedded3Hops_WalkStack(b *testing.B) {
	payload, _ := encodeReport(nil, embedded3Hops(b), benchReportMD())
	c := Parser{UDPPort: exINTPort, AllowTruncated: true}
	var md ReportMetadata
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeReportDeep(payload, &c, &md); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFlowKeyHash(b *testing.B) {
	bc := mdUDPPacket(b, 1, false)
	k := bc.p.Flow
	var s uint64
	b.ReportAllocs()
	for b.Loop() {
		s += k.Hash(s)
	}
}

// TestZeroAllocs pins the per-packet paths at zero allocations.
func TestZeroAllocs(t *testing.T) {
	dec := mdUDPPacket(t, 5, false)
	push := mdUDPPacket(t, 1, false)
	pushTCP := mdUDPPacket(t, 1, true)
	inner := embedded3Hops(t)
	payload, _ := encodeReport(nil, inner, benchReportMD())
	buf := make([]byte, 0, 1024)
	frame := make([]byte, 0, 1024)
	md := benchReportMD()
	deep := Parser{UDPPort: exINTPort, AllowTruncated: true}
	cases := map[string]func(){
		"decode MD": func() {
			var p Packet
			_, _ = decodeMD5(&dec, &p)
		},
		"push UDP": func() {
			frame = append(frame[:0], push.pkt...)
			p := push.p
			_, _ = PushHop(frame, &p, hop5(2), PushOptions{})
		},
		"push TCP": func() {
			frame = append(frame[:0], pushTCP.pkt...)
			p := pushTCP.p
			_, _ = PushHop(frame, &p, hop5(2), PushOptions{})
		},
		"strip": func() {
			frame = append(frame[:0], dec.pkt...)
			p := dec.p
			_, _ = Strip(frame, &p, SinkOptions{})
		},
		"report encode": func() { buf, _ = encodeReport(buf, inner, md) },
		"report decode": func() {
			var m ReportMetadata
			_, _ = decodeReport(payload, &m)
			_, _ = decodeReportDeep(payload, &deep, &m)
		},
		"flow hash": func() { _ = dec.p.Flow.Hash(1) + uint64(dec.p.Flow.EntropyPort()) },
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}
	// Sanity: the benchmark helpers do real work.
	var p Packet
	if s, err := decodeMD5(&dec, &p); err != nil || s == 0 {
		t.Fatalf("decode: %v", err)
	}
	if n, err := decodeReport(payload, md); err != nil || n != 1 {
		t.Fatalf("report decode: %d %v", n, err)
	}
}

package wire

import (
	"bytes"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// Examples of telemetry-report-v2.0.mdk §5 "Examples of Telemetry Reports".
// Chosen values: hw_id 1, sequence number 42, node ID 3 (Switch3), ingress
// interface 5, egress interface 7, queue occupancy 0x300. The truncated
// packets are the example TCP packet of the INT spec, cut after the TCP
// header.

const exGroup = `
20 40 00 2a // Ver 2, hw_id 1, Sequence Number 42
00 00 00 03 // Node ID 3
`

const exReportBaseline = `
14 0e 02 20 // RepType 1 (INT), InType 4 (IPv4), Report Length 14, MD Length 2, D 0 Q 0 F 1 I 0
50 00 00 00 // RepMdBits 0101 0000 0000 0000 (L1 interfaces, queue), Domain Specific ID 0
00 00 00 00 // DSMdBits 0, DSMdstatus 0
00 05 00 07 // Ingress Interface ID 5, Egress Interface ID 7
00 00 03 00 // Queue ID 0, Queue Occupancy 0x300
45 00 00 2c // truncated IPv4 packet: IPv4 header (Length 44 as originally sent)
00 01 40 00
40 06 26 c9 
0a 00 00 01
0a 00 00 02
c3 50 00 50 // TCP header
00 00 00 01
00 00 00 00
50 18 ff ff
3f a2 00 00 
`

// The spec gives MD Length 2 in this example, but MD Length covers the
// domain-specific metadata too (§4.3): 2 words baseline + 1 word DS = 3.
// Report Length, Domain Specific ID, DSMdstatus, the DS metadata and the
// extension data are not given and are chosen here.
const exReportDSTLV = `
11 13 03 20 // RepType 1, InType 1 (TLV), Report Length 19, MD Length 3, F 1
50 00 ab cd // RepMdBits 0101 0000 0000 0000, Domain Specific ID 0xabcd
80 00 00 01 // DSMdBits 1000 0000 0000 0000, DSMdstatus 1
00 05 00 07 // Ingress Interface ID 5, Egress Interface ID 7
00 00 03 00 // Queue Occupancy 0x300
de ad be ef // Domain Specific Metadata (DSMdBits bit 0)
00 02 00 01 // TLV: Type 0 (DS extension data), Rsvd, TLVLength 2, TLV Data Template 1
01 02 03 04 // Variable TLV Data (Domain Specific Extension Data)
05 06 07 08
20 0a 00 00 // TLV: Type 2 (IPv4), Rsvd, TLVLength 10, Reserved
45 00 00 2c // Variable TLV Data (Truncated IPv4 Packet)
00 01 40 00
40 06 26 c9 
0a 00 00 01
0a 00 00 02
c3 50 00 50
00 00 00 01
00 00 00 00
50 18 ff ff
3f a2 00 00 
`

// The report the INT sink Switch3 sends for the "new UDP header and INT-MD
// before TCP" packet: its own queue occupancy in the report header, the
// stack of Switch1 and Switch2 inside the truncated packet.
const exReportEmbeddedMD = `
14 17 01 20 // RepType 1, InType 4 (IPv4), Report Length 23, MD Length 1, F 1
10 00 00 00 // RepMdBits 0001 0000 0000 0000 (queue), Domain Specific ID 0
00 00 00 00 // DSMdBits 0, DSMdstatus 0
00 00 03 00 // Queue ID 0, Queue Occupancy 0x300 (Switch3)
45 00 00 54 // truncated packet: original IP header
00 01 40 00
40 11 26 96 
0a 00 00 01
0a 00 00 02
c4 82 27 10 // UDP header for embedded INT
00 40 00 00
18 07 00 06 // INT shim: Type 1, NPT 2, Length 7, IP proto 6
20 00 02 06 // INT-MD fixed header: HopML 2, Remaining Hop Count 6
90 00 00 00
00 00 00 00
00 00 00 02 // INT metadata stack: hop2 node id, queue occupancy
00 00 02 00
00 00 00 01 // hop1
00 00 01 00
c3 50 00 50 // original TCP header
00 00 00 01
00 00 00 00
50 18 ff ff
3f a2 00 00 
`

var exGroupHeader = GroupHeader{Version: 2, HWID: 1, Seq: 42, NodeID: 3}

func exReportMD() *ReportMetadata {
	return &ReportMetadata{IngressPort: 5, EgressPort: 7, QueueOccupancy: 0x300}
}

func TestSpecReportBaselineTruncatedIPv4(t *testing.T) {
	want := append(hx(t, exGroup), hx(t, exReportBaseline)...)
	trunc := tcpPacket(t, 0, payld)[:40]
	buf := make([]byte, 0, 256)
	buf, err := AppendGroupHeader(buf, exGroupHeader)
	must(t, err)
	h := ReportHeader{Type: spec.RepINT, InType: spec.InIPv4, TrackedFlow: true, RepMdBits: RepL1Ports | RepQueue}
	buf, err = AppendReport(buf, &h, exReportMD(), nil, trunc)
	must(t, err)
	mustEqual(t, "report", buf, want)

	g, rr, err := NewReportReader(want)
	must(t, err)
	if g != exGroupHeader {
		t.Fatalf("group %+v", g)
	}
	var r Report
	if !rr.Next(&r) {
		t.Fatalf("no report: %v", rr.Err())
	}
	if r.ReportHeader != h || r.Length != 14 || r.MDLength != 2 || !bytes.Equal(r.Inner, trunc) {
		t.Fatalf("report %+v", r)
	}
	var md ReportMetadata
	ds, err := r.Baseline(&md)
	must(t, err)
	if md != *exReportMD() || len(ds) != 0 {
		t.Fatalf("metadata %+v ds % x", md, ds)
	}
	if rr.Next(&r) || rr.Err() != nil {
		t.Fatalf("extra report or error %v", rr.Err())
	}
	// The truncated packet decodes as a flow.
	var p Packet
	must(t, (&Parser{AllowTruncated: true}).ParseIP(r.Inner, &p))
	if p.Flow.SrcPort != 50000 || p.Flow.DstPort != 80 || p.Flow.Proto != ProtoTCP {
		t.Fatalf("flow %+v", p.Flow)
	}
}

func TestSpecReportDSMetadataTLV(t *testing.T) {
	want := append(hx(t, exGroup), hx(t, exReportDSTLV)...)
	trunc := tcpPacket(t, 0, payld)[:40]
	ext := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	dsmd := []byte{0xde, 0xad, 0xbe, 0xef}
	var tlvs []byte
	tlvs, err := AppendTLV(tlvs, TLVDSExt, 1, ext)
	must(t, err)
	tlvs, err = AppendTLV(tlvs, TLVIPv4, 0, trunc)
	must(t, err)
	buf, err := AppendGroupHeader(make([]byte, 0, 256), exGroupHeader)
	must(t, err)
	h := ReportHeader{Type: spec.RepINT, InType: spec.InTLV, TrackedFlow: true, RepMdBits: RepL1Ports | RepQueue,
		DomainID: 0xabcd, DSMdBits: 0x8000, DSMdStatus: 1}
	buf, err = AppendReport(buf, &h, exReportMD(), dsmd, tlvs)
	must(t, err)
	mustEqual(t, "report", buf, want)

	_, rr, err := NewReportReader(want)
	must(t, err)
	var r Report
	if !rr.Next(&r) || r.ReportHeader != h || r.MDLength != 3 {
		t.Fatalf("report %+v err %v", r, rr.Err())
	}
	var md ReportMetadata
	ds, err := r.Baseline(&md)
	must(t, err)
	if md != *exReportMD() || !bytes.Equal(ds, dsmd) {
		t.Fatalf("metadata %+v ds % x", md, ds)
	}
	tr := NewTLVReader(r.Inner)
	var tlv TLV
	if !tr.Next(&tlv) || tlv.Type != TLVDSExt || tlv.Template != 1 || !bytes.Equal(tlv.Data, ext) {
		t.Fatalf("TLV 1 %+v", tlv)
	}
	if !tr.Next(&tlv) || tlv.Type != TLVIPv4 || !bytes.Equal(tlv.Data, trunc) {
		t.Fatalf("TLV 2 %+v", tlv)
	}
	if tr.Next(&tlv) || tr.Err() != nil {
		t.Fatal("extra TLV")
	}
}

// embeddedMDPacket is the packet Switch3 receives in the "new UDP header
// and INT-MD before TCP" example.
func embeddedMDPacket(t testing.TB) []byte {
	c := Parser{UDPPort: exINTPort}
	pkt := withRoom(tcpPacket(t, 0, payld), 64)
	var p Packet
	must(t, c.ParseIP(pkt, &p))
	pkt, err := InsertINT(pkt, &p, spec.TypeMD, mdSource(t, exMD(7), hopNQ(1)), &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTIPProto, UDPPort: exINTPort})
	must(t, err)
	must(t, c.ParseIP(pkt, &p))
	pkt, err = PushHop(pkt, &p, hopNQ(2), PushOptions{})
	must(t, err)
	return pkt
}

func TestSpecReportEmbeddedMD(t *testing.T) {
	want := append(hx(t, exGroup), hx(t, exReportEmbeddedMD)...)
	trunc := embeddedMDPacket(t)[:80] // ends after the original TCP header
	buf, err := AppendGroupHeader(make([]byte, 0, 256), exGroupHeader)
	must(t, err)
	h := ReportHeader{Type: spec.RepINT, InType: spec.InIPv4, TrackedFlow: true, RepMdBits: RepQueue}
	buf, err = AppendReport(buf, &h, &ReportMetadata{QueueOccupancy: 0x300}, nil, trunc)
	must(t, err)
	mustEqual(t, "report", buf, want)

	_, rr, err := NewReportReader(want)
	must(t, err)
	var r Report
	if !rr.Next(&r) || r.Length != 23 || r.MDLength != 1 || r.ReportHeader != h {
		t.Fatalf("report %+v err %v", r, rr.Err())
	}
	var md ReportMetadata
	if _, err := r.Baseline(&md); err != nil || md.QueueOccupancy != 0x300 {
		t.Fatalf("metadata %+v %v", md, err)
	}
	// A collector walks into the truncated packet to the embedded stack.
	var p Packet
	must(t, (&Parser{UDPPort: exINTPort, AllowTruncated: true}).ParseIP(r.Inner, &p))
	if !p.Truncated || p.Flow.DstPort != 80 {
		t.Fatalf("parse %+v", p)
	}
	checkMD(t, r.Inner, &p, 6, 2, 1)
}

func TestReportCoalescedAndToEnd(t *testing.T) {
	buf, _ := AppendGroupHeader(nil, exGroupHeader)
	h1 := ReportHeader{Type: spec.RepINT, InType: spec.InNone, Dropped: true, RepMdBits: RepDrop | RepHopLatency}
	buf, err := AppendReport(buf, &h1, &ReportMetadata{HopLatency: 99, DropQueueID: 4, DropReason: 71}, nil, nil)
	must(t, err)
	h2 := ReportHeader{Type: spec.RepInnerOnly, InType: spec.InEthernet, Congested: true}
	big := bytes.Repeat([]byte{0xab}, 1100) // > 254 words: Report Length 0xFF
	buf, err = AppendReport(buf, &h2, nil, nil, big)
	must(t, err)
	_, rr, err := NewReportReader(buf)
	must(t, err)
	var r Report
	var md ReportMetadata
	if !rr.Next(&r) || r.ReportHeader != h1 {
		t.Fatalf("report 1 %+v %v", r, rr.Err())
	}
	if _, err := r.Baseline(&md); err != nil || md.HopLatency != 99 || md.DropQueueID != 4 || md.DropReason != 71 {
		t.Fatalf("metadata %+v", md)
	}
	if !rr.Next(&r) || r.Length != ReportLengthToEnd || !bytes.Equal(r.Inner, big) || r.ReportHeader != h2 {
		t.Fatalf("report 2 len %d", r.Length)
	}
	if rr.Next(&r) || rr.Err() != nil {
		t.Fatal("extra report")
	}
}

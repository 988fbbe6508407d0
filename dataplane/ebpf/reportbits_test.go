package ebpf

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// reqInst asks for what both backends have in these single-node runs
// (node id, interfaces, queue, egress time) and for tx utilisation, which
// neither has without a measured rate: reports carry the first, not the
// last.
const reqInst = spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstEgressTimestamp |
	spec.InstL2Interfaces | spec.InstEgressTxUtil

// encodeReport runs ev through a real reporting pipeline and returns the
// one individual report it sends.
func encodeReport(t *testing.T, ev *report.Event) (wire.Report, []byte) {
	t.Helper()
	capt := &report.Capture{}
	col := netip.MustParseAddrPort("192.0.2.9:32766")
	cfg := report.Config{NodeID: nodeID, DropReports: true, Filter: report.DefaultFilter(),
		Sessions: []report.Session{{Name: "s", Src: netip.MustParseAddr("192.0.2.1"), Collectors: []report.Collector{{Addr: col}},
			TruncateSize: 256, Format: spec.ReportFormatV2}},
		Events: map[report.EventType]report.Route{
			spec.EventFlowState: {Session: "s"}, spec.EventDropReport: {Session: "s"}},
		DSValues: []report.DSValue{{DomainID: 0x1234, Bit: 0, Words: 2, Value: 0x0102030405060708}}}
	p, err := report.New(cfg, report.Options{Sender: capt, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	p.Report(ev)
	p.Close()
	got := capt.Packets()
	if len(got) != 1 {
		t.Fatalf("%d report packets, want 1", len(got))
	}
	_, rr, err := wire.NewReportReader(got[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.Report
	if !rr.Next(&r) {
		t.Fatalf("no individual report: %v", rr.Err())
	}
	return r, got[0].Payload[wire.GroupHeaderLen:]
}

// TestReportBits: in every mode the report's RepMdBits are the bitmap
// asked for (the INT header's at an INT-MD sink and an INT-MX hop, the
// watchlist session's for an INT-XD postcard) minus what the node does not
// have, MD Length follows from them, and both dataplanes send the same
// report (egress timestamps aside). A drop report has no egress time or
// latency and carries the drop reason (bit 15).
func TestReportBits(t *testing.T) {
	tcp80 := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("hello, INT world"))
	md := sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: reqInst}
	mx := sai.IntSessionAttrs{Mode: sai.IntModeMX, Instructions: reqInst}
	// The postcard's session also asks for two domain-specific fields, of
	// which the node has a value for the first (2 words).
	xd := sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8, Instructions: reqInst &^ spec.InstQueue,
		DomainSpecificID: 0x1234, DSInstruction: 0xc000}
	dscp := wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f}
	malformed := intFrame(t, tcp80, md, 2, false)
	malformed[wire.EthernetLen+wire.IPv4MinLen+20+4] = 0x30 // INT version 3
	const have = wire.RepL1Ports | wire.RepQueue | wire.RepEgressTimestamp | wire.RepL2Ports
	for _, c := range []struct {
		name  string
		s     setup
		in    []byte
		kind  report.Kind
		bits  uint16
		words int
		inter bool
	}{
		{"INT-MD sink", setup{sink: true}, intFrame(t, tcp80, md, 2, false), report.KindFlow, have, 6, false},
		{"INT-MX transit", setup{}, insertINT(t, tcp80, mx, dscp), report.KindFlow, have, 6, false},
		{"INT-XD postcard", setup{sess: &xd, match: port80(), postcard: true}, tcp80, report.KindFlow,
			have &^ wire.RepQueue, 5 + 2, false},
		// Nothing readable asked: every field the node has for a drop.
		{"drop", setup{dt: func(a *sai.DTelAttrs) { a.MalformedAction = sai.MalformedDrop; a.DropReportEnable = true }},
			malformed, report.KindDrop, wire.RepL1Ports | wire.RepL2Ports | wire.RepDrop, 4, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var reps [][]byte
			for _, n := range nodes(t, c.s) {
				n.process(t, bytes.Clone(c.in))
				evs := recorderOf(n).wait(t, 1)
				if len(evs) != 1 || evs[0].Kind != c.kind {
					t.Fatalf("%s: events %+v", n.name(), evs)
				}
				r, raw := encodeReport(t, &evs[0])
				wantDS := uint16(0)
				if c.s.postcard {
					wantDS = 0x8000
				}
				bits, words := c.bits, c.words
				if c.kind == report.KindDrop && n.name() == "soft" {
					// The drop's ingress time. The eBPF node has it when
					// intd_ingress saw the packet, which a test run of
					// intd_egress alone does not (TestStateCoverage
					// forwards for real).
					bits, words = bits|wire.RepIngressTimestamp, words+2
				}
				if r.RepMdBits != bits || int(r.MDLength) != words || r.Intermediate != c.inter || r.DSMdBits != wantDS {
					t.Fatalf("%s: RepMdBits %#04x DSMdBits %#04x MD Length %d I %v, want %#04x %#04x %d %v", n.name(),
						r.RepMdBits, r.DSMdBits, r.MDLength, r.Intermediate, bits, wantDS, words, c.inter)
				}
				var m wire.ReportMetadata
				ds, err := r.Baseline(&m)
				if err != nil {
					t.Fatal(err)
				}
				if wantDS != 0 && (r.DomainID != 0x1234 || !bytes.Equal(ds, []byte{1, 2, 3, 4, 5, 6, 7, 8})) {
					t.Fatalf("%s: domain %#x DS metadata %x", n.name(), r.DomainID, ds)
				}
				if r.RepMdBits&wire.RepL1Ports != 0 && (m.IngressPort != portID || m.EgressPort != portID) {
					t.Fatalf("%s: interfaces %d -> %d", n.name(), m.IngressPort, m.EgressPort)
				}
				// Times are the only values that differ between runs.
				if r.RepMdBits&wire.RepEgressTimestamp != 0 {
					off := wire.ReportHeaderLen + wire.INTReportFixedLen + 4*wire.RepMdWords(r.RepMdBits&0xf800)
					binary.BigEndian.PutUint64(raw[off:], 0)
				}
				if r.RepMdBits&wire.RepIngressTimestamp != 0 {
					// Taken out, with its bit and 2 words of MD Length.
					off := wire.ReportHeaderLen + wire.INTReportFixedLen + 4*wire.RepMdWords(r.RepMdBits&0xf000)
					raw = append(raw[:off:off], raw[off+8:]...)
					binary.BigEndian.PutUint16(raw[wire.ReportHeaderLen:], r.RepMdBits&^wire.RepIngressTimestamp)
					raw[1] -= 2
					raw[2] -= 2
					r.MDLength -= 2
				}
				// Main contents: the inner frames hold stacks with times.
				reps = append(reps, raw[:wire.ReportHeaderLen+wire.INTReportFixedLen+4*int(r.MDLength)])
			}
			if !bytes.Equal(reps[0], reps[1]) {
				t.Fatalf("report main contents differ:\nsoft %x\nebpf %x", reps[0], reps[1])
			}
		})
	}
}

package tests

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/collector/metrics"
	"github.com/intd-project/intd/dataplane/ebpf"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// sample is hop metadata with a distinct value in every field.
var sample = wire.HopMetadata{
	NodeID: 0x01020304, IngressPort: 0x0506, EgressPort: 0x0708, HopLatency: 0x090a0b0c,
	QueueID: 0x0d, QueueOccupancy: 0x0e0f10, IngressTimestamp: 0x1112131415161718,
	EgressTimestamp: 0x191a1b1c1d1e1f20, L2IngressPort: 0x21222324, L2EgressPort: 0x25262728,
	TxUtilization: 0x292a2b2c, BufferID: 0x2d, BufferOccupancy: 0x2e2f30,
	Valid: spec.InstAll,
}

// field is the part of m that instruction bit inst selects.
func field(m *wire.HopMetadata, inst spec.Instruction) []uint64 {
	switch inst {
	case spec.InstNodeID:
		return []uint64{uint64(m.NodeID)}
	case spec.InstL1Interfaces:
		return []uint64{uint64(m.IngressPort), uint64(m.EgressPort)}
	case spec.InstHopLatency:
		return []uint64{uint64(m.HopLatency)}
	case spec.InstQueue:
		return []uint64{uint64(m.QueueID), uint64(m.QueueOccupancy)}
	case spec.InstIngressTimestamp:
		return []uint64{m.IngressTimestamp}
	case spec.InstEgressTimestamp:
		return []uint64{m.EgressTimestamp}
	case spec.InstL2Interfaces:
		return []uint64{uint64(m.L2IngressPort), uint64(m.L2EgressPort)}
	case spec.InstEgressTxUtil:
		return []uint64{uint64(m.TxUtilization)}
	case spec.InstBuffer:
		return []uint64{uint64(m.BufferID), uint64(m.BufferOccupancy)}
	case spec.InstChecksumComplement:
		return []uint64{uint64(m.ChecksumComplement)}
	}
	return nil
}

type lastReport struct {
	n int
	r collector.Report
}

func (l *lastReport) HandleReport(r *collector.Report) { l.n++; l.r = *r }

// TestVocabularyRoundTrip: every row of sai/spec's tables goes through the
// INT codec, a telemetry report decoded by the collector and both
// dataplanes' capabilities, and the BPF program's header holds the same
// constants.
func TestVocabularyRoundTrip(t *testing.T) {
	caps := map[string]sai.Capabilities{
		"soft": (*soft.Switch)(nil).Capabilities(),
		"ebpf": (*ebpf.Dataplane)(nil).Capabilities(),
	}
	for _, row := range spec.Instructions {
		t.Run(row.Name, func(t *testing.T) {
			if row.Inst != spec.InstructionBit(row.Bit) || row.Inst.String() != row.Name || row.Inst.Words() != row.Words {
				t.Errorf("row %+v: bit %v, String %q, Words %d", row, spec.InstructionBit(row.Bit), row.Inst.String(), row.Inst.Words())
			}
			// INT: one hop with this bit alone.
			b := make([]byte, 64)
			n, err := wire.PutHop(b, row.Inst, 0, &sample)
			if err != nil || n != 4*row.Words {
				t.Fatalf("PutHop = %d, %v; want %d bytes", n, err, 4*row.Words)
			}
			var got wire.HopMetadata
			if err := wire.DecodeHop(b[:n], row.Inst, &got); err != nil {
				t.Fatal(err)
			}
			if row.Inst != spec.InstChecksumComplement && !slices.Equal(field(&got, row.Inst), field(&sample, row.Inst)) {
				t.Errorf("INT hop: %v decoded as %x, want %x", row.Inst, field(&got, row.Inst), field(&sample, row.Inst))
			}
			// Telemetry report: the field at RepMdBit, decoded by the collector.
			if row.RepMdBit >= 0 {
				if row.RepMdBit != row.Bit {
					t.Errorf("RepMdBit %d differs from bit %d", row.RepMdBit, row.Bit)
				}
				var l lastReport
				decodeReport(t, uint16(spec.InstructionBit(row.RepMdBit)), &l)
				if !l.r.HasMD || l.r.MD.Valid&row.Inst == 0 || !slices.Equal(field(&l.r.MD, row.Inst), field(&sample, row.Inst)) {
					t.Errorf("report: HasMD %v, Valid %v, %x; want %x", l.r.HasMD, l.r.MD.Valid, field(&l.r.MD, row.Inst), field(&sample, row.Inst))
				}
			}
			for name, c := range caps {
				if c.Instructions&row.Inst == 0 {
					t.Errorf("%s: instructions %v lack %v", name, c.Instructions, row.Inst)
				}
				if (c.ReportMetadata&row.Inst != 0) != row.InReports {
					t.Errorf("%s: report metadata %v, row says InReports %v", name, c.ReportMetadata, row.InReports)
				}
			}
		})
	}
	for name, c := range caps {
		if c.Instructions&spec.InstReserved != 0 {
			t.Errorf("%s: reserved instruction bits %v", name, c.Instructions&spec.InstReserved)
		}
		if !slices.Equal(c.EventTypes, spec.EventTypes()) {
			t.Errorf("%s: event types %v, table %v", name, c.EventTypes, spec.EventTypes())
		}
		for _, f := range spec.ReportFormatTable {
			if !slices.Contains(c.ReportFormats, f.Format) || f.Format.String() != f.Name {
				t.Errorf("%s: report formats %v lack %v (%q)", name, c.ReportFormats, f.Format, f.Name)
			}
		}
	}
	for _, row := range spec.EncapTable {
		for name, c := range caps {
			if !slices.Contains(c.Encaps, row.Encap) {
				t.Errorf("%s: encapsulations %v lack %v", name, c.Encaps, row.Encap)
			}
		}
	}
	for i, row := range spec.EventTypeTable {
		if int(row.Type) != i+1 || row.Type.String() != row.Name || row.SAI != "SAI_DTEL_EVENT_TYPE_"+row.Name {
			t.Errorf("event type row %d: %+v", i, row)
		}
	}
	for _, row := range spec.DropReasonTable {
		var l lastReport
		decodeReport(t, wire.RepDrop, &l, uint8(row.Reason))
		if !l.r.HasDrop || l.r.DropReason != uint8(row.Reason) {
			t.Errorf("%s: report decoded with HasDrop %v, reason %d", row.Name, l.r.HasDrop, l.r.DropReason)
		}
		if got := metrics.DropReason(l.r.DropReason); got != row.Name || row.Reason.Description() != row.Description {
			t.Errorf("%d: named %q, want %q", row.Reason, got, row.Name)
		}
	}
	h, err := os.ReadFile("../dataplane/ebpf/bpf/include/intd_spec.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(h, spec.CHeader()) {
		t.Error("dataplane/ebpf/bpf/include/intd_spec.h differs from sai/spec's tables: run go generate ./dataplane/ebpf")
	}
	for name, k := range map[string]report.Kind{"EV_FLOW": report.KindFlow, "EV_DROP": report.KindDrop, "EV_QUEUE": report.KindQueue} {
		if !bytes.Contains(h, fmt.Appendf(nil, "#define %s %d\n", name, k)) {
			t.Errorf("intd_spec.h: %s is not %d", name, k)
		}
	}
}

// decodeReport sends one INT report with RepMdBits bits through the
// collector's decoder (drop reason reason[0] when given).
func decodeReport(t *testing.T, bits uint16, l *lastReport, reason ...uint8) {
	t.Helper()
	md := wire.ReportMetadata{
		IngressPort: sample.IngressPort, EgressPort: sample.EgressPort, HopLatency: sample.HopLatency,
		QueueID: sample.QueueID, QueueOccupancy: sample.QueueOccupancy,
		IngressTimestamp: sample.IngressTimestamp, EgressTimestamp: sample.EgressTimestamp,
		L2IngressPort: sample.L2IngressPort, L2EgressPort: sample.L2EgressPort,
		TxUtilization: sample.TxUtilization, BufferID: sample.BufferID, BufferOccupancy: sample.BufferOccupancy,
		DropQueueID: 3,
	}
	if len(reason) > 0 {
		md.DropReason = reason[0]
	}
	p, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: wire.Version2, Seq: 1, NodeID: sample.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	p, err = wire.AppendReport(p, &wire.ReportHeader{Type: spec.RepINT, Dropped: len(reason) > 0, RepMdBits: bits}, &md, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collector.NewDecoder().Decode(p, l); err != nil || l.n != 1 {
		t.Fatalf("decode: %d reports, %v", l.n, err)
	}
}

// TestVocabularyCodePoints: every INT header type, NPT, report type, inner
// type and v0.5 next protocol of sai/spec goes through the wire codec and
// the collector's decoder unchanged, the YANG names the tables give exist,
// and the BPF program's header holds the same constants.
func TestVocabularyCodePoints(t *testing.T) {
	h, err := os.ReadFile("../dataplane/ebpf/bpf/include/intd_spec.h")
	if err != nil {
		t.Fatal(err)
	}
	define := func(name string, v int) {
		t.Helper()
		if !bytes.Contains(h, fmt.Appendf(nil, "#define %s %d\n", name, v)) {
			t.Errorf("intd_spec.h: %s is not %d", name, v)
		}
	}
	for _, row := range spec.HeaderTypeTable {
		define(row.C, int(row.Type))
		b := make([]byte, 4)
		if err := (wire.Shim{Type: row.Type, Length: 3}).Put(b); err != nil {
			t.Fatal(err)
		}
		if s, err := wire.DecodeShim(b); err != nil || s.Type != row.Type {
			t.Errorf("%v: shim decoded as %v, %v", row.Type, s.Type, err)
		}
		b = make([]byte, 16) // option header and 3 words
		if err := (wire.GeneveOption{Class: spec.GeneveClassINT, Type: uint8(row.Type), Length: 3}).Put(b); err != nil {
			t.Fatal(err)
		}
		if o, err := wire.DecodeGeneveOption(b); err != nil || spec.HeaderType(o.Type) != row.Type {
			t.Errorf("%v: Geneve option decoded as %d, %v", row.Type, o.Type, err)
		}
		if j := collector.INTToJSON(&collector.INTStack{Present: true, Type: row.Type}); j.Type != row.Name {
			t.Errorf("%v: the collector names it %q", row.Type, j.Type)
		}
	}
	npts := map[string]bool{}
	for _, d := range gen.ΛEnum["E_IntdInt_UdpNpt"] {
		npts[d.Name] = true
	}
	for _, row := range spec.NPTTable {
		define(row.C, int(row.NPT))
		b := make([]byte, 4)
		if err := (wire.Shim{Type: spec.TypeMD, NPT: row.NPT, Length: 3}).Put(b); err != nil {
			t.Fatal(err)
		}
		if s, err := wire.DecodeShim(b); err != nil || s.NPT != row.NPT {
			t.Errorf("%v: shim decoded as NPT %v, %v", row.NPT, s.NPT, err)
		}
		if row.YANG != "" && !npts[row.YANG] {
			t.Errorf("%v: intd-int's udp-npt has no %s", row.NPT, row.YANG)
		}
	}
	// Telemetry Report v2.0: one report of each type and inner type
	// through the collector.
	for rt := range spec.RepTypeTable {
		for it := range spec.InTypeTable {
			hdr := wire.ReportHeader{Type: spec.RepType(rt), InType: spec.InType(it)}
			p, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: wire.Version2, Seq: 1, NodeID: 7})
			if err != nil {
				t.Fatal(err)
			}
			var md *wire.ReportMetadata // main contents: RepType INT only
			if hdr.Type == spec.RepINT {
				md = &wire.ReportMetadata{}
			}
			if p, err = wire.AppendReport(p, &hdr, md, nil, nil); err != nil {
				t.Fatalf("%v/%v: %v", hdr.Type, hdr.InType, err)
			}
			var l lastReport
			if _, err := collector.NewDecoder().Decode(p, &l); err != nil || l.n != 1 || l.r.RepType != hdr.Type || l.r.InType != hdr.InType {
				t.Errorf("%v/%v: decoded %d reports as %v/%v, %v", hdr.Type, hdr.InType, l.n, l.r.RepType, l.r.InType, err)
			}
		}
	}
	// Telemetry Report v0.5: the collector maps each next protocol onto
	// the v2.0 code points.
	inner := make([]byte, wire.IPv4MinLen) // an IPv4 header for TR05IPv4
	inner[0] = 0x45
	want := map[spec.TR05Proto][2]any{
		spec.TR05Ethernet: {spec.RepInnerOnly, spec.InEthernet}, spec.TR05Drop: {spec.RepINT, spec.InEthernet},
		spec.TR05Local: {spec.RepINT, spec.InEthernet}, spec.TR05HostDrop: {spec.RepInnerOnly, spec.InNone},
		spec.TR05IPv4: {spec.RepInnerOnly, spec.InIPv4},
	}
	for np := range spec.TR05ProtoTable {
		th := wire.TR05Header{NextProto: spec.TR05Proto(np), Seq: 1}
		p := report.AppendTR05(nil, &th, &wire.TR05Switch{SwitchID: 7}, inner)
		r, err := wire.DecodeTR05(p)
		if err != nil || r.Header.NextProto != th.NextProto {
			t.Errorf("%v: decoded as %v, %v", th.NextProto, r.Header.NextProto, err)
			continue
		}
		var l lastReport
		_, err = collector.NewDecoder().Decode(p, &l)
		w, ok := want[th.NextProto]
		if err != nil || l.n != 1 || !ok || l.r.RepType != w[0] || l.r.InType != w[1] {
			t.Errorf("%v: the collector decoded %d reports as %v/%v (%v), want %v", th.NextProto, l.n, l.r.RepType, l.r.InType, err, w)
		}
	}
}

// TestVocabularyEncaps: the wire parser finds every encapsulation of
// sai/spec at the ports and code points of its table row (that both
// dataplanes offer each is TestVocabularyRoundTrip's).
func TestVocabularyEncaps(t *testing.T) {
	md := make([]byte, wire.MDHeaderLen)
	if err := (wire.MDHeader{Version: 2, HopML: 1, RemainingHops: 4, Instructions: spec.InstNodeID}).Put(md); err != nil {
		t.Fatal(err)
	}
	const greINT = 0x88b6 // TBD_INT for the test
	inner := wiretest.TCPFrame("192.168.0.1", "192.168.0.2", 5555, 80, 0, []byte("inner"))
	for _, row := range spec.EncapTable {
		t.Run(row.Name, func(t *testing.T) {
			var f []byte
			var c wire.Parser
			switch row.Encap {
			case spec.EncapDSCP, spec.EncapUDPPort, spec.EncapProbeMarker:
				f = append(make([]byte, 0, 256), wiretest.TCPFrame("10.0.0.1", "10.0.0.2", 1, 80, 0, []byte("tcp"))...) // room for INT
				var p wire.Packet
				if err := c.Parse(f, &p); err != nil {
					t.Fatal(err)
				}
				opt := wire.SourceOptions{Encap: row.Encap, DSCP: 0x17, Mask: 0x3f, UDPPort: 5000, NPT: spec.NPTIPProto, ProbeMarker: 0xaaaa_aaaa_bbbb_bbbb}
				var err error
				if f, err = wire.InsertINT(f, &p, spec.TypeMD, md, &opt); err != nil {
					t.Fatal(err)
				}
				c = wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}
				if row.Encap != spec.EncapDSCP {
					c = wire.Parser{UDPPort: opt.UDPPort, ProbeMarker: opt.ProbeMarker}
				}
			case spec.EncapVXLANGPE:
				b := make([]byte, wire.VXLANLen+wire.ShimLen)
				_ = wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: uint8(row.CodePoint), VNI: 42}.Put(b)
				_ = wire.GPEShim{Type: spec.TypeMD, Length: wire.MDHeaderLen / 4, NextProto: 3}.Put(b[wire.VXLANLen:])
				f = wiretest.UDPFrame("10.0.0.1", "10.0.0.2", 40000, row.Port, append(append(b, md...), inner...), true)
				c = wire.Parser{VXLANGPEPort: row.Port}
			case spec.EncapGeneve:
				b := make([]byte, wire.GeneveLen+wire.ShimLen)
				_ = wire.Geneve{OptLen: 1 + wire.MDHeaderLen/4, Protocol: wire.EtherTypeTEB, VNI: 42}.Put(b)
				_ = wire.GeneveOption{Class: row.CodePoint, Type: uint8(spec.TypeMD), Length: wire.MDHeaderLen / 4}.Put(b[wire.GeneveLen:])
				f = wiretest.UDPFrame("10.0.0.1", "10.0.0.2", 40000, row.Port, append(append(b, md...), inner...), true)
				c = wire.Parser{GenevePort: row.Port}
			case spec.EncapGRE:
				b := make([]byte, 4+wire.ShimLen)
				_ = wire.PutGRE(b, greINT)
				_ = wire.GREShim{Type: spec.TypeMD, Length: wire.MDHeaderLen / 4, NextProto: wire.EtherTypeIPv4}.Put(b[4:])
				f = wiretest.IPv4Frame("10.0.0.1", "10.0.0.2", row.IPProto, 0, append(append(b, md...), inner[wire.EthernetLen:]...), false)
				c = wire.Parser{GREProto: greINT}
			default:
				t.Fatalf("no frame for %v", row.Encap)
			}
			var p wire.Packet
			if err := c.Parse(f, &p); err != nil || p.Encap != row.Encap || !p.HasINT() || p.INTType != spec.TypeMD {
				t.Errorf("parsed as %v (INT %v, %v): %v", p.Encap, p.HasINT(), p.INTType, err)
			}
			if row.Tunnel && (p.Tunnel < 0 || p.Proto != row.IPProto) {
				t.Errorf("tunnel at %d, IP protocol %d", p.Tunnel, p.Proto)
			}
		})
	}
}

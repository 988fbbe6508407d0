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
	p, err = wire.AppendReport(p, &wire.ReportHeader{Type: wire.RepINT, Dropped: len(reason) > 0, RepMdBits: bits}, &md, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collector.NewDecoder().Decode(p, l); err != nil || l.n != 1 {
		t.Fatalf("decode: %d reports, %v", l.n, err)
	}
}

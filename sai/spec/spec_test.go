package spec

import (
	"strings"
	"testing"
)

// TestInstructionTable: rows in bit order, one bit each, unique names, and
// the derived masks and counts agree with INT v2.1 §5.8.
func TestInstructionTable(t *testing.T) {
	seen := map[string]bool{}
	last := -1
	for _, r := range Instructions {
		if r.Bit <= last || r.Inst != InstructionBit(r.Bit) {
			t.Errorf("%s: bit %d, mask %#04x out of order or wrong", r.Name, r.Bit, uint16(r.Inst))
		}
		last = r.Bit
		if r.Words != 1 && r.Words != 2 {
			t.Errorf("%s: %d words", r.Name, r.Words)
		}
		if r.RepMdBit != -1 && r.RepMdBit != r.Bit {
			t.Errorf("%s: RepMdBit %d", r.Name, r.RepMdBit)
		}
		if !strings.HasPrefix(r.YANG, "METADATA_FIELD_") || !strings.HasPrefix(r.C, "INST_") {
			t.Errorf("%s: YANG %q, C %q", r.Name, r.YANG, r.C)
		}
		for _, n := range []string{r.Name, r.YANG, r.C} {
			if seen[n] {
				t.Errorf("%q twice", n)
			}
			seen[n] = true
		}
	}
	// The spec's figures: bits 9-14 reserved, 4-6 eight bytes, and
	// telemetry reports carry all but the checksum complement.
	if InstReserved != 0x007e || InstAll != 0xff81 || InstDoubleWord != 0x0e00 || InstReportable != 0xff80 {
		t.Errorf("reserved %#04x, all %#04x, double %#04x, reportable %#04x", uint16(InstReserved), uint16(InstAll), uint16(InstDoubleWord), uint16(InstReportable))
	}
	for _, tt := range []struct {
		i     Instruction
		words int
		s     string
	}{
		{0, 0, "none"},
		{InstNodeID | InstHopLatency, 2, "node-id|hop-latency"},
		{InstAll, 13, "node-id|l1-interfaces|hop-latency|queue|ingress-timestamp|egress-timestamp|l2-interfaces|egress-tx-util|buffer|checksum-complement"},
		{InstReserved, 6, "bit9|bit10|bit11|bit12|bit13|bit14"},
	} {
		if tt.i.Words() != tt.words || tt.i.String() != tt.s {
			t.Errorf("%#04x: Words %d, String %q; want %d, %q", uint16(tt.i), tt.i.Words(), tt.i.String(), tt.words, tt.s)
		}
	}
	for n := 0; n < 16; n++ {
		if want := 1 + btoi(n >= 4 && n <= 6); FieldWords(n) != want || InstructionBit(n).Words() != want {
			t.Errorf("bit %d: FieldWords %d, Words %d; want %d", n, FieldWords(n), InstructionBit(n).Words(), want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEventAndDropTables(t *testing.T) {
	for i, r := range EventTypeTable {
		if int(r.Type) != i+1 || !r.Type.Valid() || r.Type.String() != r.Name {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if NumEventTypes.Valid() || EventType(0).Valid() || NumEventTypes.String() != "EventType(7)" {
		t.Errorf("NumEventTypes %v valid %v", NumEventTypes, NumEventTypes.Valid())
	}
	last := -1
	names := map[string]bool{}
	for _, r := range DropReasonTable {
		if int(r.Reason) <= last || names[r.Name] || !r.Reason.Known() || r.Reason.String() != r.Name || r.Description == "" {
			t.Errorf("drop reason row %+v", r)
		}
		last, names[r.Name] = int(r.Reason), true
	}
	if DropReason(27).Known() || DropReason(27).String() != "DropReason(27)" || DropReason(27).Description() != "" {
		t.Errorf("unknown code 27: %v", DropReason(27))
	}
}

func TestReportFormatTable(t *testing.T) {
	for i, r := range ReportFormatTable {
		if int(r.Format) != i || !r.Format.Valid() || r.Format.String() != r.Name || r.Format.Coalescing() != r.Coalescing {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if f := ReportFormat(len(ReportFormatTable)); f.Valid() || f.Coalescing() || f.String() != "ReportFormat(2)" {
		t.Errorf("undefined format %v valid", f)
	}
}

// TestEncapTable: rows in numeric order from 1, unique names, the tunnels
// last and in a row (the C program's ENC_IS_TUNNEL is a range), and the
// code points those of INT v2.1 §5.7 and IANA.
func TestEncapTable(t *testing.T) {
	names := map[string]bool{}
	tunnels := false
	for i, r := range EncapTable {
		if int(r.Encap) != i+1 || !r.Encap.Valid() || r.Encap.String() != r.Name || names[r.Name] || r.YANG == "" {
			t.Errorf("row %d: %+v", i, r)
		}
		names[r.Name] = true
		if got, _ := r.Encap.Info(); got != r {
			t.Errorf("%v: Info %+v", r.Encap, got)
		}
		if tunnels && !r.Tunnel {
			t.Errorf("%v: not a tunnel after a tunnel", r.Encap)
		}
		tunnels = tunnels || r.Tunnel
		if r.Tunnel != (r.IPProto != 0) || r.Tunnel != (r.Encap.TunnelBit() != 0) || r.Encap.Tunnel() != r.Tunnel {
			t.Errorf("%v: tunnel %v, IP protocol %d, bit %d", r.Encap, r.Tunnel, r.IPProto, r.Encap.TunnelBit())
		}
	}
	want := map[Encap][3]int{EncapVXLANGPE: {17, 4790, 0x82}, EncapGeneve: {17, 6081, 0x0103}, EncapGRE: {47, 0, 0}}
	for e, w := range want {
		r, _ := e.Info()
		if got := [3]int{int(r.IPProto), int(r.Port), int(r.CodePoint)}; got != w {
			t.Errorf("%v: protocol, port, code point %v; want %v", e, got, w)
		}
	}
	if EncapVXLANGPE.TunnelBit() != 1 || EncapGeneve.TunnelBit() != 2 || EncapGRE.TunnelBit() != 4 || EncapDSCP.TunnelBit() != 0 {
		t.Error("tunnel bits")
	}
	if EncapNone.Valid() || EncapNone.String() != "none" || NumEncaps.Valid() || NumEncaps.String() != "Encap(7)" || EncapVXLANGPE.C() != "ENC_VXLAN_GPE" {
		t.Errorf("none %v, %v, %s", EncapNone, NumEncaps, EncapVXLANGPE.C())
	}
}

// TestHeaderTables: the INT header types and NPTs of INT v2.1 §5.4 and
// §5.6.1, and the report code points of Telemetry Report v2.0 §3.3 and
// v0.5, each row named once and at its value.
func TestHeaderTables(t *testing.T) {
	names := map[string]bool{}
	for i, r := range HeaderTypeTable {
		if int(r.Type) != i+1 || !r.Type.Valid() || r.Type.String() != r.Name || !strings.HasPrefix(r.C, "INT_TYPE_") || names[r.C] {
			t.Errorf("header type row %d: %+v", i, r)
		}
		names[r.C] = true
	}
	if TypeMD != 1 || TypeDestination != 2 || TypeMX != 3 || HeaderType(0).Valid() || HeaderType(4).String() != "HeaderType(4)" {
		t.Error("header types")
	}
	for i, r := range NPTTable {
		if int(r.NPT) != i || !r.NPT.Valid() || r.NPT.String() != r.Name || !strings.HasPrefix(r.C, "NPT_") || names[r.C] {
			t.Errorf("NPT row %d: %+v", i, r)
		}
		names[r.C] = true
	}
	if NPTUDPPort != 1 || NPTIPProto != 2 || NPT(3).Valid() || NPT(3).String() != "NPT(3)" {
		t.Error("NPTs")
	}
	for _, tt := range []struct {
		table []string
		want  []string
		str   func(int) string
	}{
		{RepTypeTable[:], []string{"inner-only", "INT", "IOAM"}, func(i int) string { return RepType(i).String() }},
		{InTypeTable[:], []string{"none", "TLV", "domain-specific", "Ethernet", "IPv4", "IPv6"}, func(i int) string { return InType(i).String() }},
		{TR05ProtoTable[:], []string{"Ethernet", "drop", "switch-local", "host-drop", "IPv4"}, func(i int) string { return TR05Proto(i).String() }},
	} {
		if strings.Join(tt.table, ",") != strings.Join(tt.want, ",") {
			t.Errorf("table %q, want %q", tt.table, tt.want)
		}
		for i, n := range tt.table {
			if tt.str(i) != n {
				t.Errorf("%d: String %q, want %q", i, tt.str(i), n)
			}
		}
	}
	if RepType(3).String() != "RepType(3)" || InType(6).String() != "InType(6)" || TR05Proto(5).String() != "TR05Proto(5)" {
		t.Error("reserved code points named")
	}
	if RepINT != 1 || InEthernet != 3 || InIPv6 != 5 || TR05Drop != 1 || TR05IPv4 != 4 {
		t.Error("report code points")
	}
}

package spec

import (
	"fmt"
	"strings"
)

// CHeader is C with the tables' constants, part of the BPF program's
// generated header (see dataplane/ebpf/gen.go), so that C and Go never
// disagree.
func CHeader() []byte {
	var b strings.Builder
	b.WriteString("#ifndef INTD_SPEC_H\n#define INTD_SPEC_H\n\n")
	b.WriteString("/* INT v2.1 instruction bits, as masks of the 16-bit bitmap */\n")
	for _, r := range Instructions {
		fmt.Fprintf(&b, "#define %s 0x%04x /* bit %d, %d word(s) */\n", r.C, uint16(r.Inst), r.Bit, r.Words)
	}
	fmt.Fprintf(&b, "#define INST_ALL 0x%04x\n", uint16(InstAll))
	fmt.Fprintf(&b, "#define INST_RESERVED 0x%04x\n", uint16(InstReserved))
	fmt.Fprintf(&b, "#define INST_DOUBLE_WORD 0x%04x /* two-word metadata */\n", uint16(InstDoubleWord))
	defines(&b, "\n/* DTel event types (sai_dtel_event_type_t) */\n", EventTypeTable[:], func(r EventTypeInfo) (string, int) { return "EVENT_" + r.Name, int(r.Type) })
	defines(&b, "\n/* SD-Fabric drop reasons */\n", DropReasonTable[:], func(r DropReasonInfo) (string, int) { return "DROP_" + r.Name, int(r.Reason) })
	defines(&b, "\n/* INT header types (shim and Geneve option type) */\n", HeaderTypeTable[:], func(r HeaderTypeInfo) (string, int) { return r.C, int(r.Type) })
	defines(&b, "/* Next Protocol Types of the TCP/UDP shim */\n", NPTTable[:], func(r NPTInfo) (string, int) { return r.C, int(r.NPT) })
	defines(&b, "\n/* INT encapsulations (pkt.encap, pkt.tun); the tunnels are a range */\n", EncapTable[:], func(r EncapInfo) (string, int) { return r.Encap.C(), int(r.Encap) })
	lo, hi := NumEncaps, EncapNone
	for _, r := range EncapTable {
		if r.Tunnel {
			lo, hi = min(lo, r.Encap), max(hi, r.Encap)
		}
	}
	fmt.Fprintf(&b, "#define ENC_IS_TUNNEL(e) ((e) >= %s && (e) <= %s)\n", lo.C(), hi.C())
	b.WriteString("/* cfg.tunnels: bits of the tunnels INT is looked for in */\n")
	for _, r := range EncapTable {
		if r.Tunnel {
			fmt.Fprintf(&b, "#define TUN%s %d\n", strings.TrimPrefix(r.Encap.C(), "ENC"), r.Encap.TunnelBit())
		}
	}
	fmt.Fprintf(&b, "#define IPPROTO_GRE %d\n", IPProtoGRE)
	fmt.Fprintf(&b, "#define PORT_VXLAN_GPE %d\n#define PORT_GENEVE %d\n", PortVXLANGPE, PortGeneve)
	fmt.Fprintf(&b, "#define VXLAN_GPE_NP_INT 0x%02x\n#define GENEVE_CLASS_INT 0x%04x\n", VXLANGPENextProtoINT, GeneveClassINT)
	b.WriteString("\n#endif\n")
	return []byte(b.String())
}

// defines writes comment, then a #define of name and value for each row.
func defines[T any](b *strings.Builder, comment string, rows []T, f func(T) (name string, value int)) {
	b.WriteString(comment)
	for _, r := range rows {
		n, v := f(r)
		fmt.Fprintf(b, "#define %s %d\n", n, v)
	}
}

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
	b.WriteString("\n/* DTel event types (sai_dtel_event_type_t) */\n")
	for _, r := range EventTypeTable {
		fmt.Fprintf(&b, "#define EVENT_%s %d\n", r.Name, r.Type)
	}
	b.WriteString("\n/* SD-Fabric drop reasons */\n")
	for _, r := range DropReasonTable {
		fmt.Fprintf(&b, "#define DROP_%s %d\n", r.Name, r.Reason)
	}
	b.WriteString("\n#endif\n")
	return []byte(b.String())
}

package wireshark

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

// TestDissectorVocabulary: the dissector's drop reason names, reserved
// instruction bits and encapsulation names are sai/spec's.
func TestDissectorVocabulary(t *testing.T) {
	src, err := os.ReadFile("intd.lua")
	if err != nil {
		t.Fatal(err)
	}
	block := func(start string) string {
		s := string(src)
		i := strings.Index(s, start)
		if i < 0 {
			t.Fatalf("intd.lua has no %q", start)
		}
		return s[i : i+strings.Index(s[i:], "\n}")]
	}
	got := map[int]string{}
	for _, m := range regexp.MustCompile(`\[(\d+)\] = "([A-Z_]+)"`).FindAllStringSubmatch(block("local drop_reasons = {"), -1) {
		n, _ := strconv.Atoi(m[1])
		got[n] = m[2]
	}
	if len(got) != len(spec.DropReasonTable) {
		t.Errorf("dissector names %d drop reasons, the table has %d", len(got), len(spec.DropReasonTable))
	}
	for _, r := range spec.DropReasonTable {
		if got[int(r.Reason)] != r.Name {
			t.Errorf("drop reason %d: dissector says %q, table %q", r.Reason, got[int(r.Reason)], r.Name)
		}
	}
	names := regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(block("local inst_names = {"), -1)
	if len(names) != 16 {
		t.Fatalf("dissector names %d instruction bits, want 16", len(names))
	}
	for n, m := range names {
		if reserved := spec.InstReserved.Bit(n); reserved != strings.HasPrefix(m[1], "Reserved") {
			t.Errorf("bit %d: dissector says %q, reserved in the table: %v", n, m[1], reserved)
		}
	}
	encaps := map[string]bool{}
	for _, line := range regexp.MustCompile(`(?m)^.*(?:fi\.encap, |dissect_l4\(|dissect_int05\().*$`).FindAllString(string(src), -1) {
		for _, m := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(line, -1) {
			encaps[m[1]] = true
		}
	}
	for _, r := range spec.EncapTable {
		if !encaps[r.Name] {
			t.Errorf("the dissector never names encapsulation %q", r.Name)
		}
		delete(encaps, r.Name)
	}
	if len(encaps) != 0 {
		t.Errorf("the dissector names encapsulations the table lacks: %v", encaps)
	}
}

package ebpf

import (
	"strings"
	"testing"

	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// TestHostCheck checks the reasons given when the dataplane cannot run.
func TestHostCheck(t *testing.T) {
	all := func(cap.Value) bool { return true }
	none := func(cap.Value) bool { return false }
	sysAdmin := func(c cap.Value) bool { return c == cap.SYS_ADMIN || c == cap.NET_ADMIN }
	for _, tc := range []struct {
		release string
		btf     bool
		have    func(cap.Value) bool
		want    []string // empty: no error
	}{
		{"6.8.0-31-generic", true, all, nil},
		{"6.2.0", true, all, nil},
		{"6.2.0", true, sysAdmin, nil},
		{"6.1.0-18-amd64", true, all, []string{"Linux 6.2 or later", "6.1.0-18-amd64", "--dataplane soft"}},
		{"5.15.0", false, all, []string{"Linux 6.2", "BTF", "--dataplane soft"}},
		{"6.8.0", false, all, []string{"/sys/kernel/btf/vmlinux"}},
		{"6.8.0", true, none, []string{"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "root"}},
	} {
		err := Host{Release: tc.release, BTF: tc.btf, Has: tc.have}.Check()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s btf=%v: %v", tc.release, tc.btf, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s btf=%v: error %v, want it to say %q", tc.release, tc.btf, err, w)
			}
		}
	}
}

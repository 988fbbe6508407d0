package ebpf

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// Host is what decides whether the programs can run: the kernel release,
// its BTF, and the process's effective capabilities.
type Host struct {
	Release string               // uname -r
	BTF     bool                 // /sys/kernel/btf/vmlinux exists
	Has     func(cap.Value) bool // effective capability
}

// ThisHost describes the running kernel and process.
func ThisHost() Host {
	var u unix.Utsname
	release := ""
	if unix.Uname(&u) == nil {
		release = unix.ByteSliceToString(u.Release[:])
	}
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	return Host{Release: release, BTF: err == nil, Has: func(c cap.Value) bool {
		on, err := cap.GetProc().GetFlag(cap.Effective, c)
		return err == nil && on
	}}
}

// Check names everything that keeps the dataplane from running on h, so
// that one start tells the operator all there is to fix.
func (h Host) Check() error {
	var missing []string
	if maj, min, ok := parseRelease(h.Release); ok && (maj < 6 || maj == 6 && min < 2) {
		missing = append(missing, "Linux 6.2 or later (this kernel is "+h.Release+")")
	}
	if !h.BTF {
		missing = append(missing, "kernel BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)")
	}
	var caps []string
	for _, c := range []cap.Value{cap.BPF, cap.PERFMON, cap.NET_ADMIN} {
		// CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON.
		if !h.Has(c) && !(c != cap.NET_ADMIN && h.Has(cap.SYS_ADMIN)) {
			caps = append(caps, strings.ToUpper(c.String()))
		}
	}
	if len(caps) > 0 {
		missing = append(missing, strings.Join(caps, ", ")+" (run as root, or grant them)")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the ebpf dataplane cannot run here: it needs %s. "+
		"--dataplane soft runs on any Linux kernel (with CAP_NET_RAW and CAP_NET_ADMIN)", strings.Join(missing, "; "))
}

// parseRelease reads the major and minor version of a kernel release
// such as 6.8.0-31-generic.
func parseRelease(r string) (major, minor int, ok bool) {
	f := strings.FieldsFunc(r, func(c rune) bool { return c < '0' || c > '9' })
	if len(f) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(f[0])
	minor, err2 := strconv.Atoi(f[1])
	return major, minor, err1 == nil && err2 == nil
}

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/intd-project/intd/dataplane/ebpf"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/server/intdmodel"
)

// ebpfDataplane is tc/eBPF programs on the --interfaces, the kernel
// forwards (run it with net.ipv4.ip_forward=1), reports go out over UDP
// through the kernel's own stack. See dataplane/ebpf.
var ebpfDataplane = &dataplaneKind{
	summary: "tc/eBPF programs, the kernel forwards (default; Linux 6.2+ with BTF, CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN)",
	check: func() error {
		return ebpfCheck(kernelRelease(), fileExists("/sys/kernel/btf/vmlinux"), haveCap)
	},
	// Loading programs is over once attached; configuration and state
	// only update and read maps, which kernels before 6.5 allow
	// without CAP_BPF only when unprivileged BPF is enabled (most
	// distributions disable it). Detaching at exit changes qdiscs and
	// links (CAP_NET_ADMIN).
	keep: []capability{capBPF, capNetAdmin},
	open: newEBPFDataplane,
}

// ebpfCheck names what keeps the ebpf dataplane from running on a kernel
// of this release, with or without BTF and these capabilities.
func ebpfCheck(release string, btf bool, have func(capability) bool) error {
	var missing []string
	if maj, min, ok := parseRelease(release); ok && (maj < 6 || maj == 6 && min < 2) {
		missing = append(missing, "Linux 6.2 or later (this kernel is "+release+")")
	}
	if !btf {
		missing = append(missing, "kernel BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)")
	}
	var caps []string
	for _, c := range []capability{capBPF, capPerfmon, capNetAdmin} {
		if !have(c) && !(c != capNetAdmin && have(capSysAdmin)) {
			caps = append(caps, capName(c))
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

// ebpfApplier is the dtel orchestrator over an ebpf.Dataplane; Close
// detaches the programs (run.go closes appliers that are io.Closers on
// every exit) and then flushes and stops the report pipeline.
type ebpfApplier struct {
	*dtel.Orchestrator
	dp   *ebpf.Dataplane
	pipe *report.Pipeline
}

func (a *ebpfApplier) Close() error {
	err := a.dp.Close()
	return errors.Join(err, a.pipe.Close())
}

func newEBPFDataplane(_ context.Context, ifaces []string) (intdmodel.Applier, error) {
	if len(ifaces) == 0 {
		return nil, errors.New("--interfaces is required (comma-separated interface names)")
	}
	log := slog.Default().With("dataplane", "ebpf")
	pipe, err := report.New(report.Config{}, report.Options{})
	if err != nil {
		return nil, err
	}
	cfg := ebpf.Config{Reporter: pipe, Logger: log}
	for _, name := range ifaces {
		cfg.Interfaces = append(cfg.Interfaces, ebpf.Interface{Name: name})
	}
	dp, err := ebpf.New(cfg)
	if err != nil {
		pipe.Close()
		return nil, fmt.Errorf("%w (where this kernel cannot run the eBPF programs, use --dataplane soft)", err)
	}
	log.Info("tc/eBPF dataplane attached", "interfaces", dp.Interfaces())
	return &ebpfApplier{
		Orchestrator: dtel.New(dp, dtel.WithLogger(log), dtel.WithDataplaneName("ebpf")),
		dp:           dp,
		pipe:         pipe,
	}, nil
}

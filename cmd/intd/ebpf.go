//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
	check:   func() error { return ebpf.ThisHost().Check() },
	// Loading programs is over once attached; configuration and state
	// only update and read maps, which kernels before 6.5 allow
	// without CAP_BPF only when unprivileged BPF is enabled (most
	// distributions disable it). Detaching at exit changes qdiscs and
	// links (CAP_NET_ADMIN).
	keep: []capability{capBPF, capNetAdmin},
	open: newEBPFDataplane,
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

func newEBPFDataplane(_ context.Context, o dataplaneOptions) (intdmodel.Applier, error) {
	ifaces := o.Interfaces
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

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/server/intdmodel"
)

// softDataplane is the software INT switch on AF_PACKET sockets of the
// --interfaces, forwarding by the namespace's kernel routing and neighbour
// tables (see dataplane/afpacket, which also says what it changes on the
// host and restores at exit).
var softDataplane = &dataplaneKind{
	summary: "software switch on AF_PACKET sockets, intd forwards (any Linux kernel; CAP_NET_RAW, CAP_NET_ADMIN)",
	check: func() error {
		var missing []string
		for _, c := range []capability{capNetRaw, capNetAdmin} {
			if !haveCap(c) {
				missing = append(missing, capName(c))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the soft dataplane needs %s: run intd as root, or grant them", strings.Join(missing, " and "))
		}
		return nil
	},
	// The packet sockets are open once set up (CAP_NET_RAW is only
	// checked when opening them); host settings are restored at exit
	// (CAP_NET_ADMIN).
	keep: []capability{capNetAdmin},
	open: newSoftDataplane,
}

// softApplier is the dtel orchestrator over an afpacket.Dataplane; Close
// (run.go closes appliers that are io.Closers on every exit) stops
// forwarding, sends pending reports, closes the sockets and restores the
// host settings.
type softApplier struct {
	*dtel.Orchestrator
	dp     *afpacket.Dataplane
	failed chan error
}

func (a *softApplier) Close() error { return a.dp.Close() }

// Failed receives the error that stopped forwarding (a socket failed);
// run returns it, so that intd exits non-zero and a supervisor restarts
// it.
func (a *softApplier) Failed() <-chan error { return a.failed }

func newSoftDataplane(ctx context.Context, o dataplaneOptions) (intdmodel.Applier, error) {
	ifaces := o.Interfaces
	if len(ifaces) == 0 {
		return nil, errors.New("--interfaces is required (comma-separated interface names)")
	}
	log := slog.Default().With("dataplane", "soft")
	dp, err := afpacket.New(afpacket.Config{Interfaces: ifaces, Queues: o.SoftQueues, Logger: log})
	if err != nil {
		return nil, err
	}
	a := &softApplier{
		Orchestrator: dtel.New(dp, dtel.WithLogger(log), dtel.WithDataplaneName("soft")),
		dp:           dp,
		failed:       make(chan error, 1),
	}
	// Run ends with ctx, when Close (on every way out of run) stops it, or
	// when a socket fails.
	go func() {
		if err := dp.Run(ctx); err != nil {
			a.failed <- err
		}
	}()
	log.Info("soft dataplane on AF_PACKET", "interfaces", ifaces, "routes", dp.Routes())
	return a, nil
}

package lab

import (
	"context"
	"fmt"
	"io"
	"time"
)

// RunOptions configure Run (the `intd lab` subcommand).
type RunOptions struct {
	Options
	// TopologyFile, when set, is loaded instead of Options.Topology.
	TopologyFile string
	// Out receives the live summary (nil: none), every SummaryEvery
	// (default 2s).
	Out          io.Writer
	SummaryEvery time.Duration
	// Serve, when set, is called with the lab once it is configured,
	// before traffic starts; `intd lab` uses it to start the gNMI server
	// on 127.0.0.1:9339 with one target per switch (lab.Backends()).
	Serve func(ctx context.Context, l *Lab) error
}

// DefaultCollector is where `intd lab` sends reports by default.
const DefaultCollector = "127.0.0.1:32766"

// Run builds the lab and runs it on the real clock until ctx is done.
func Run(ctx context.Context, o RunOptions) error {
	if o.TopologyFile != "" {
		t, err := LoadTopology(o.TopologyFile)
		if err != nil {
			return err
		}
		o.Topology = t
	}
	if o.SummaryEvery == 0 {
		o.SummaryEvery = 2 * time.Second
	}
	l, err := New(o.Options)
	if err != nil {
		return err
	}
	if o.Out != nil {
		fmt.Fprintf(o.Out, "intd lab: switches %v, reports to %q; INT source on host ports, DSCP 0x17 marking\n",
			l.SwitchNames(), o.Collector)
	}
	if o.Serve != nil {
		if err := o.Serve(ctx, l); err != nil {
			_ = l.Close()
			return err
		}
	}
	return l.Run(ctx, o.Out, o.SummaryEvery)
}

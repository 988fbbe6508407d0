package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/intd-project/intd/cmd/internal/logging"
	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
)

// labOptions are `intd lab`'s flags.
type labOptions struct {
	Addr          string
	TLSCert       string
	TLSKey        string
	Topology      string
	Collector     string
	Rate          float64
	Burst         int
	Duration      time.Duration
	SummaryEvery  time.Duration
	SaveDir       string
	StateInterval time.Duration
	LogLevel      string
	Metrics       string
}

func parseLabArgs(args []string, stderr io.Writer) (*labOptions, error) {
	o := &labOptions{}
	fs := flag.NewFlagSet("intd lab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: intd lab [flags]

Runs software INT switches in this process, no root needed: by default
h1 - s1 - s2 - s3 - h2 with s1 the INT source, s2 transit and s3 the sink,
1 Gb/s links except a 100 Mb/s link from s2 to s3. h1 sends a steady TCP-like
flow and a bursty UDP flow to h2. Every switch is a gNMI target (s1, s2, s3)
of one server, configured through YANG: Get shows its configuration, Set
changes it, Subscribe streams its counters.

Congest s2's queue with a bigger UDP burst (--burst 300: tail drops) or a
rate above the 100 Mb/s link (--rate 12000).

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:9339", "gNMI listen address; plaintext on loopback, a non-loopback address needs --tls-cert and --tls-key")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (PEM), with --tls-key")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&o.Topology, "topology", "", "JSON topology file (switches, hosts, links; see dataplane/lab); default h1 - s1 - s2 - s3 - h2")
	fs.StringVar(&o.Collector, "collector", lab.DefaultCollector, "UDP address (IP:port) of the collector receiving telemetry reports (e.g. intcollector); empty sends none")
	fs.Float64Var(&o.Rate, "rate", 4000, "packets per second of the bursty UDP flow (1200-byte payloads)")
	fs.IntVar(&o.Burst, "burst", 40, "packets per burst of the UDP flow")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	fs.DurationVar(&o.SummaryEvery, "summary-every", 2*time.Second, "how often to print the summary (0: never)")
	fs.StringVar(&o.SaveDir, "save-dir", "", "directory the running configuration of each switch is saved to (SWITCH.json) after every Set and loaded from at start (empty: not saved)")
	fs.DurationVar(&o.StateInterval, "state-interval", time.Second, "how often state and counters are published over gNMI")
	fs.StringVar(&o.LogLevel, "log-level", "warn", "log level: debug, info, warn, error")
	fs.StringVar(&o.Metrics, "metrics", "", "HTTP address serving the switches' counters as Prometheus /metrics (label target), e.g. 127.0.0.1:23268 (empty: off)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case o.Rate <= 0:
		return nil, fmt.Errorf("--rate %v must be positive", o.Rate)
	case o.Burst <= 0:
		return nil, fmt.Errorf("--burst %d must be positive", o.Burst)
	case o.Duration < 0 || o.SummaryEvery < 0:
		return nil, errors.New("--duration and --summary-every must not be negative")
	case o.StateInterval <= 0:
		return nil, fmt.Errorf("--state-interval %v must be positive", o.StateInterval)
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together")
	case o.TLSCert == "" && !isLoopback(o.Addr):
		return nil, fmt.Errorf("plaintext gNMI is only allowed on a loopback address, not %q: give --tls-cert and --tls-key", o.Addr)
	}
	return o, nil
}

// labInstance is a started lab: switches configured through dtel, gNMI
// listening, traffic not yet running.
type labInstance struct {
	lab   *lab.Lab
	srv   *server.Server
	lis   net.Listener
	names []string
	tls   bool
}

// startLab builds the lab, one dtel orchestrator and gNMI target per
// switch with the lab's default configuration (or the saved one), and
// listens on o.Addr.
func startLab(ctx context.Context, o *labOptions, log *slog.Logger) (li *labInstance, err error) {
	var topo *lab.Topology
	if o.Topology != "" {
		if topo, err = lab.LoadTopology(o.Topology); err != nil {
			return nil, err
		}
	} else {
		topo = lab.DefaultTopology()
	}
	var collector netip.AddrPort
	if o.Collector != "" {
		if collector, err = netip.ParseAddrPort(o.Collector); err != nil {
			return nil, fmt.Errorf("--collector: %w", err)
		}
	}
	var flows []lab.Flow
	if len(topo.Hosts) >= 2 {
		flows = lab.DefaultFlows(topo.Hosts[0].Name, topo.Hosts[1].Name)
		for i := range flows {
			if flows[i].Proto == wire.ProtoUDP {
				flows[i].PPS, flows[i].Burst = o.Rate, o.Burst
			}
		}
	}
	l, err := lab.New(lab.Options{Topology: topo, Flows: flows, NoConfig: true})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = l.Close()
		}
	}()
	if o.SaveDir != "" {
		if err := os.MkdirAll(o.SaveDir, 0o755); err != nil {
			return nil, err
		}
	}
	opts := []server.Option{server.WithLogger(log), server.WithStatePollInterval(o.StateInterval)}
	if o.TLSCert != "" {
		host, _, _ := net.SplitHostPort(o.Addr)
		tlsCfg, err := server.TLSConfig(o.TLSCert, o.TLSKey, "", host)
		if err != nil {
			return nil, err
		}
		opts = append(opts, server.WithTLS(tlsCfg))
	}
	srv, err := intdmodel.New(opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			srv.Close()
		}
	}()
	backends := l.Backends()
	names := l.SwitchNames()
	for i, name := range names {
		cfg, err := labConfig(l, name, i, collector)
		if err != nil {
			return nil, err
		}
		orch := dtel.New(backends[name], dtel.WithLogger(log.With("switch", name)), dtel.WithDataplaneName("soft (intd lab)"))
		to := server.TargetOptions{Initial: cfg, InvalidErr: dtel.ErrInvalid}
		if o.SaveDir != "" {
			to.SavePath = filepath.Join(o.SaveDir, name+".json")
		}
		if err := srv.AddTarget(ctx, name, intdmodel.Target(orch), to); err != nil {
			return nil, fmt.Errorf("switch %s: %w", name, err)
		}
	}
	lis, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("gNMI: %w", err)
	}
	return &labInstance{lab: l, srv: srv, lis: lis, names: names, tls: o.TLSCert != ""}, nil
}

// banner tells the user how to reach the lab.
func (li *labInstance) banner(w io.Writer, collector string) {
	addr := li.lis.Addr().String()
	sec := "--insecure"
	if li.tls {
		sec = "--skip-verify"
	}
	fmt.Fprintf(w, "intd lab: gNMI on %s, targets %v; try: gnmic -a %s %s --target %s get --path /int/node/state\n",
		addr, li.names, addr, sec, li.names[0])
	if collector != "" {
		fmt.Fprintf(w, "intd lab: telemetry reports to udp %s (run intcollector to receive them); Ctrl-C stops\n", collector)
	} else {
		fmt.Fprintln(w, "intd lab: no telemetry reports sent (--collector is empty); Ctrl-C stops")
	}
}

// run serves gNMI and drives the lab until ctx is done, then stops both.
func (li *labInstance) run(ctx context.Context, out io.Writer, every time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- li.srv.Serve(li.lis) }()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- li.lab.Run(lctx, out, every) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if err != nil {
			err = fmt.Errorf("serving gNMI: %w", err)
		}
	}
	cancel()
	li.srv.Close()
	if lerr := <-done; err == nil {
		err = lerr
	}
	return err
}

func labCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseLabArgs(args, stderr)
	if err != nil {
		return err
	}
	log, err := logging.New(o.LogLevel, "text", stderr)
	if err != nil {
		return err
	}
	li, err := startLab(ctx, o, log)
	if err != nil {
		return err
	}
	if o.Metrics != "" {
		m, err := serveMetrics(o.Metrics, li.srv, log)
		if err != nil {
			li.lis.Close()
			li.srv.Close()
			li.lab.Close()
			return err
		}
		defer m.Close()
		fmt.Fprintf(stdout, "intd lab: Prometheus metrics on http://%s/metrics\n", m.Addr())
	}
	li.banner(stdout, o.Collector)
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	if err := li.run(ctx, stdout, o.SummaryEvery); err != nil {
		return err
	}
	if o.SummaryEvery > 0 {
		li.lab.Summary(context.Background(), stdout)
	}
	fmt.Fprintln(stdout, "intd lab: stopped")
	return nil
}

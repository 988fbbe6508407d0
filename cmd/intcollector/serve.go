package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intd-project/intd/cmd/internal/gnmilisten"
	"github.com/intd-project/intd/cmd/internal/logging"
	"github.com/intd-project/intd/cmd/internal/promserve"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/collector/metrics"
	"github.com/intd-project/intd/dataplane/collector/stream"
	"github.com/intd-project/intd/server"
	gnmicollector "github.com/intd-project/intd/server/collector"
)

type serveConfig struct {
	log             *slog.Logger // nil: slog.Default()
	listen, metrics string
	// gnmi is the gNMI listener; an empty Addr disables it.
	gnmi                  gnmilisten.Settings
	target                string
	stateInterval         time.Duration
	json                  bool
	maxFlows, exportFlows int
	flowMetrics           int
	batch, receivers      int
	marking               marking
	allow                 []netip.Prefix
	seqWindow             uint
	latencyFloor          time.Duration
	// stream publishes to NATS JetStream when URLs is set.
	stream stream.Config
}

// Default addresses: reports on the Telemetry Report port from anywhere;
// /metrics and gNMI on loopback, on ports neither IANA nor the
// Prometheus exporter list assigns (docs/metrics.md).
const (
	defaultListen  = ":32766"
	defaultMetrics = "127.0.0.1:23266"
	defaultGNMI    = "127.0.0.1:23267"
	// defaultStateDir keeps the self-signed TLS certificate.
	defaultStateDir = "/var/lib/intcollector"
)

func serveMain(args []string) int {
	var cfg serveConfig
	var logLevel, logFormat string
	fs := flag.NewFlagSet("intcollector", flag.ExitOnError)
	fs.StringVar(&cfg.listen, "listen", defaultListen, "UDP address receiving telemetry reports")
	fs.StringVar(&cfg.metrics, "metrics", defaultMetrics, "HTTP address serving Prometheus /metrics (empty disables)")
	g := &cfg.gnmi
	fs.StringVar(&g.Addr, "gnmi", defaultGNMI, "gNMI address (empty disables); an address beyond loopback needs --credentials or --tls-client-ca")
	fs.StringVar(&g.TLSCert, "tls-cert", "", "TLS certificate file (PEM) of the gNMI server; with --tls-key. Without both a self-signed certificate is made once and kept in --state-dir")
	fs.StringVar(&g.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&g.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) for mutual TLS: gNMI clients must present a certificate it signed")
	fs.BoolVar(&g.Insecure, "insecure", false, "serve plaintext gNMI (only allowed on a loopback address)")
	fs.StringVar(&g.Credentials, "credentials", "", "credentials `file` (lines printed by intd passwd, mode 0600): gNMI clients must give a username and password")
	fs.BoolVar(&g.AllowUnauthenticated, "allow-unauthenticated", false, "serve gNMI beyond loopback without --credentials or --tls-client-ca: anyone who can connect may read every flow")
	fs.StringVar(&g.StateDir, "state-dir", defaultStateDir, "directory of intcollector's state: the generated TLS certificate")
	fs.StringVar(&cfg.target, "target", "intcollector", "gNMI target name of the collector (requests without a target get it)")
	fs.DurationVar(&cfg.stateInterval, "state-interval", time.Second, "how often the flow table is published over gNMI")
	fs.BoolVar(&cfg.json, "json", false, "write every decoded report as a JSON line on stdout")
	fs.IntVar(&cfg.maxFlows, "max-flows", 65536, "flow table size (least recently updated flows are evicted)")
	fs.IntVar(&cfg.exportFlows, "export-flows", 1000, "most recently updated flows exported over gNMI")
	fs.IntVar(&cfg.flowMetrics, "flow-metrics", 0, fmt.Sprintf("flows with the most reports given their own /metrics series (0-%d; 0: none)", metrics.MaxFlowSeries))
	fs.IntVar(&cfg.batch, "batch", collector.DefaultBatch, "recvmmsg slots per call (1-1024): a datagram each, or with UDP GRO a run of one sender's datagrams (64 kB per slot)")
	fs.IntVar(&cfg.receivers, "receivers", 1, "sockets receiving reports on --listen's port (SO_REUSEPORT), each read on its own thread; each sending address reaches one of them")
	cfg.marking.flags(fs)
	fs.Func("allow", "accept reports only from these comma-separated addresses or prefixes (e.g. 10.0.0.0/24,2001:db8::1); default: from anywhere", func(v string) error {
		p, err := parsePrefixes(v)
		cfg.allow = append(cfg.allow, p...)
		return err
	})
	fs.StringVar(&cfg.stream.URLs, "nats", "", "NATS server URLs (comma-separated) to publish flow summaries and events to JetStream (empty disables; docs/stream.md)")
	fs.StringVar(&cfg.stream.Stream, "nats-stream", stream.DefaultStream, "JetStream stream of the summaries and events (created when missing)")
	fs.StringVar(&cfg.stream.Prefix, "nats-subject-prefix", stream.DefaultPrefix, "subject prefix: <prefix>.summary.<node>, <prefix>.event.<kind>.<node>")
	fs.IntVar(&cfg.stream.Replicas, "nats-replicas", 1, "replicas of the stream when this collector creates it (1-5)")
	fs.DurationVar(&cfg.stream.MaxAge, "nats-max-age", 24*time.Hour, "how long the stream keeps messages when this collector creates it (0: for ever)")
	fs.StringVar(&cfg.stream.CollectorID, "collector-id", "", "this collector's name in the stream, unique in the fleet (default: host name and report port)")
	fs.DurationVar(&cfg.stream.SummaryInterval, "summary-interval", stream.DefaultInterval, "how often per-flow summaries are published")
	fs.DurationVar(&cfg.latencyFloor, "latency-anomaly-floor", 100*time.Microsecond, "least excess over a flow's learnt end-to-end latency that is an anomaly event")
	fs.UintVar(&cfg.seqWindow, "seq-window", 4096, "largest sequence number gap counted as report loss; a jump beyond it is a stray packet or a restarted sequence")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&logFormat, "log-format", "text", "log format of every line on standard error: text or json")
	fs.Parse(args)
	if cfg.seqWindow == 0 || cfg.seqWindow > 1<<20 {
		fmt.Fprintln(os.Stderr, "intcollector: --seq-window: the range is 1 to 1048576")
		return 2
	}
	if cfg.batch < 1 || cfg.batch > 1024 { // recvmmsg reads at most 1024 (UIO_MAXIOV)
		fmt.Fprintln(os.Stderr, "intcollector: --batch: the range is 1 to 1024")
		return 2
	}
	if cfg.receivers < 1 || cfg.receivers > 64 {
		fmt.Fprintln(os.Stderr, "intcollector: --receivers: the range is 1 to 64")
		return 2
	}
	if cfg.latencyFloor <= 0 {
		fmt.Fprintln(os.Stderr, "intcollector: --latency-anomaly-floor must be positive")
		return 2
	}
	c := collector.New(collector.Config{MaxFlows: cfg.maxFlows, Allow: cfg.allow, SeqWindow: uint32(cfg.seqWindow),
		LatencyFloor: uint64(cfg.latencyFloor)})
	log, err := logging.New(logLevel, logFormat, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	follow, err := cfg.marking.discoverMarking(context.Background(), fs, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	if err := cfg.marking.apply(&c.Decoder().Parser); err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	defer logging.RouteProcess(log)()
	cfg.log = log

	if cfg.json {
		// Closed after the collector stops: the last lines are written.
		defer collector.WriteJSONLines(c, os.Stdout, 100*time.Millisecond).Close()
	}
	// Before anything is announced, so that a signal sent on seeing the
	// listening line stops the collector cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	s, err := start(c, &cfg)
	if err != nil {
		log.Error("intcollector stopped", "err", err.Error())
		return 1
	}
	attrs := []any{"reports", s.reports}
	if len(s.recv) > 1 {
		attrs = append(attrs, "receivers", len(s.recv))
	}
	attrs = append(attrs, "udp_gro", s.recv[0].GRO())
	if s.metrics != nil {
		attrs = append(attrs, "metrics", "http://"+s.metrics.Addr().String()+"/metrics")
	}
	if s.gnmiLn != nil {
		attrs = append(attrs, "gnmi", s.gnmiLn.Addr().String())
	}
	log.Info("intcollector listening", attrs...)
	if follow != nil {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go follow.run(ctx, func(m marking) {
			c.Do(func() {
				if err := m.apply(&c.Decoder().Parser); err != nil {
					log.Warn("discovered INT marking not applied", "err", err.Error())
				}
			})
		})
	}
	got := <-sig
	log.Info("stopping", "signal", got.String())
	s.stop()
	cn := c.Snapshot(0).Counters
	log.Info("intcollector stopped", "packets", cn.Packets, "reports", cn.Reports, "lost", cn.Lost, "flows", cn.FlowsCreated)
	return 0
}

// stopStream publishes the last summaries and disconnects from NATS.
func (s *service) stopStream() {
	if s.pub != nil {
		s.pub.Close(stream.RetryWindow)
	}
}

// parsePrefixes parses a comma-separated list of addresses and prefixes.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a prefix", f)
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("%q: give IPv4 prefixes in dotted form", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// service is a running collector with its endpoints.
type service struct {
	c       *collector.Collector
	recv    []*collector.Receiver
	metrics *promserve.Server
	gnmiLn  net.Listener
	gnmi    *server.Server
	pub     *stream.Publisher
	wg      sync.WaitGroup
	reports string
}

func start(c *collector.Collector, cfg *serveConfig) (*service, error) {
	log := cfg.log
	if log == nil {
		log = slog.Default()
	}
	var reg *prometheus.Registry
	var exp *metrics.Exporter
	if cfg.metrics != "" {
		var err error
		if exp, err = metrics.New(c, cfg.flowMetrics); err != nil {
			return nil, fmt.Errorf("--flow-metrics: %w", err)
		}
	}
	rs, err := collector.ListenGroup(cfg.listen, cfg.receivers, cfg.batch)
	if err != nil {
		return nil, fmt.Errorf("reports (--listen): %w", err)
	}
	r := rs[0]
	s := &service{c: c, recv: rs, reports: r.Addr().String()}
	if cfg.stream.URLs != "" {
		sc := cfg.stream
		if sc.CollectorID == "" {
			host, _ := os.Hostname()
			sc.CollectorID = fmt.Sprintf("%s-%d", host, r.Addr().(*net.UDPAddr).Port)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s.pub, err = stream.New(ctx, c, sc, log)
		cancel()
		if err != nil {
			s.closeReceivers()
			return nil, fmt.Errorf("--nats: %w", err)
		}
		if exp != nil {
			exp.SetStream(func() metrics.StreamCounters {
				n := s.pub.Counters()
				return metrics.StreamCounters{Published: n.Published, Acked: n.Acked, Failed: n.Failed, Retried: n.Retried, Dropped: n.Dropped}
			})
		}
	}
	if exp != nil {
		if reg, err = promserve.Registry("intcollector", exp); err != nil {
			s.stopStream()
			s.closeReceivers()
			return nil, err
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := c.ServeAll(rs); err != nil {
			log.Error("receiving reports", "err", err.Error())
		}
	}()
	if reg != nil {
		m, err := promserve.Listen(cfg.metrics, reg, log)
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("metrics (--metrics): %w", err)
		}
		s.metrics = m
	}
	if cfg.gnmi.Addr != "" {
		if err := s.serveGNMI(cfg, log); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *service) closeReceivers() {
	for _, r := range s.recv {
		r.Close()
	}
}

func (s *service) stop() {
	s.closeReceivers()
	s.stopStream()
	if s.metrics != nil {
		s.metrics.Close()
	}
	if s.gnmi != nil {
		s.gnmi.Close()
		// A Serve that had not started yet returns on the closed listener.
		s.gnmiLn.Close()
	}
	s.wg.Wait()
}

// serveGNMI serves the collector's state (the intd-collector model) as a
// read-only target, with intd's listener rules: TLS unless --insecure,
// authentication beyond loopback.
func (s *service) serveGNMI(cfg *serveConfig, log *slog.Logger) error {
	if err := cfg.gnmi.Check(log, "--gnmi", defaultGNMI, "read every flow and source"); err != nil {
		return err
	}
	if err := cfg.gnmi.PrepareStateDir("intcollector", false); err != nil {
		return err
	}
	opts, err := cfg.gnmi.ServerOptions(log)
	if err != nil {
		return err
	}
	sc, err := gnmicollector.Schema()
	if err != nil {
		return err
	}
	every := cfg.stateInterval
	if every <= 0 {
		every = time.Second
	}
	target := cfg.target
	if target == "" {
		target = "intcollector"
	}
	opts = append(opts, server.WithSchema(sc), server.WithLogger(log), server.WithStatePollInterval(every), server.WithDefaultTarget(target))
	ln, err := net.Listen("tcp", cfg.gnmi.Addr)
	if err != nil {
		return fmt.Errorf("gNMI (--gnmi): %w", err)
	}
	srv, err := server.New(opts...)
	if err != nil {
		ln.Close()
		return err
	}
	if err := srv.AddStateTarget(context.Background(), target, gnmicollector.Source{C: s.c, MaxFlows: cfg.exportFlows}); err != nil {
		ln.Close()
		srv.Close()
		return err
	}
	s.gnmiLn, s.gnmi = ln, srv
	// stop waits for Serve, so that its lines come before the last one.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("serving gNMI", "err", err.Error())
		}
	}()
	return nil
}

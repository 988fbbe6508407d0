package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intd-project/intd/cmd/internal/logging"
	"github.com/intd-project/intd/cmd/internal/promserve"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/collector/metrics"
)

type serveConfig struct {
	log                   *slog.Logger // nil: slog.Default()
	listen, metrics, gnmi string
	json                  bool
	maxFlows, exportFlows int
	flowMetrics           int
	batch                 int
	marking               marking
}

// Default addresses: reports on the Telemetry Report port from anywhere;
// /metrics and gNMI on loopback, on ports neither IANA nor the
// Prometheus exporter list assigns (docs/metrics.md).
const (
	defaultListen  = ":32766"
	defaultMetrics = "127.0.0.1:23266"
	defaultGNMI    = "127.0.0.1:23267"
)

func serveMain(args []string) int {
	var cfg serveConfig
	var logLevel, logFormat string
	fs := flag.NewFlagSet("intcollector", flag.ExitOnError)
	fs.StringVar(&cfg.listen, "listen", defaultListen, "UDP address receiving telemetry reports")
	fs.StringVar(&cfg.metrics, "metrics", defaultMetrics, "HTTP address serving Prometheus /metrics (empty disables)")
	fs.StringVar(&cfg.gnmi, "gnmi", defaultGNMI, "gNMI address (insecure; empty disables)")
	fs.BoolVar(&cfg.json, "json", false, "write every decoded report as a JSON line on stdout")
	fs.IntVar(&cfg.maxFlows, "max-flows", 65536, "flow table size (least recently updated flows are evicted)")
	fs.IntVar(&cfg.exportFlows, "export-flows", 1000, "most recently updated flows exported over gNMI")
	fs.IntVar(&cfg.flowMetrics, "flow-metrics", 0, fmt.Sprintf("flows with the most reports given their own /metrics series (0-%d; 0: none)", metrics.MaxFlowSeries))
	fs.IntVar(&cfg.batch, "batch", collector.DefaultBatch, "datagrams read per recvmmsg call")
	cfg.marking.flags(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&logFormat, "log-format", "text", "log format of every line on standard error: text or json")
	fs.Parse(args)
	c := collector.New(collector.Config{MaxFlows: cfg.maxFlows})
	if err := cfg.marking.apply(&c.Decoder().Parser); err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	log, err := logging.New(logLevel, logFormat, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	defer logging.RouteProcess(log)()
	cfg.log = log

	if cfg.json {
		w := bufio.NewWriter(os.Stdout)
		enc := json.NewEncoder(w)
		c.OnReport = func(r *collector.Report) {
			enc.Encode(struct {
				Report collector.ReportJSON `json:"report"`
			}{collector.ReportJSON{Version: r.Version, HWID: r.HWID, Sequence: r.Seq, NodeID: r.NodeID,
				Reports: []collector.IndividualJSON{collector.ReportToJSON(r)}}})
		}
		go func() {
			for range time.Tick(100 * time.Millisecond) {
				c.Do(func() { w.Flush() })
			}
		}()
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
	if s.metrics != nil {
		attrs = append(attrs, "metrics", "http://"+s.metrics.Addr().String()+"/metrics")
	}
	if s.gnmiLn != nil {
		attrs = append(attrs, "gnmi", s.gnmiLn.Addr().String())
	}
	log.Info("intcollector listening", attrs...)
	got := <-sig
	log.Info("stopping", "signal", got.String())
	s.stop()
	cn := c.Snapshot(0).Counters
	log.Info("intcollector stopped", "packets", cn.Packets, "reports", cn.Reports, "lost", cn.Lost, "flows", cn.FlowsCreated)
	return 0
}

// service is a running collector with its endpoints.
type service struct {
	c       *collector.Collector
	recv    *collector.Receiver
	metrics *promserve.Server
	gnmiLn  net.Listener
	grpc    *grpc.Server
	wg      sync.WaitGroup
	reports string
}

func start(c *collector.Collector, cfg *serveConfig) (*service, error) {
	log := cfg.log
	if log == nil {
		log = slog.Default()
	}
	var reg *prometheus.Registry
	if cfg.metrics != "" {
		exp, err := metrics.New(c, cfg.flowMetrics)
		if err != nil {
			return nil, fmt.Errorf("--flow-metrics: %w", err)
		}
		if reg, err = promserve.Registry("intcollector", exp); err != nil {
			return nil, err
		}
	}
	r, err := collector.Listen(cfg.listen, cfg.batch)
	if err != nil {
		return nil, fmt.Errorf("reports (--listen): %w", err)
	}
	s := &service{c: c, recv: r, reports: r.Addr().String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := c.Serve(r); err != nil {
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
	if cfg.gnmi != "" {
		ln, err := net.Listen("tcp", cfg.gnmi)
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("gNMI (--gnmi): %w", err)
		}
		s.gnmiLn = ln
		s.grpc = grpc.NewServer()
		gpb.RegisterGNMIServer(s.grpc, &gnmiServer{c: c, maxFlows: cfg.exportFlows})
		go func() {
			if err := s.grpc.Serve(ln); err != nil {
				log.Error("serving gNMI", "err", err.Error())
			}
		}()
	}
	return s, nil
}

func (s *service) stop() {
	s.recv.Close()
	if s.metrics != nil {
		s.metrics.Close()
	}
	if s.grpc != nil {
		s.grpc.Stop()
	}
	s.wg.Wait()
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"

	"github.com/intd-project/intd/dataplane/collector"
)

type serveConfig struct {
	listen, metrics, gnmi string
	json                  bool
	maxFlows, exportFlows int
	batch                 int
	intUDPPort            uint
	intDSCP, intDSCPMask  uint
}

func serveMain(args []string) int {
	var cfg serveConfig
	fs := flag.NewFlagSet("intcollector", flag.ExitOnError)
	fs.StringVar(&cfg.listen, "listen", ":32766", "UDP address receiving telemetry reports")
	fs.StringVar(&cfg.metrics, "metrics", ":9273", "HTTP address serving /metrics (empty disables)")
	fs.StringVar(&cfg.gnmi, "gnmi", ":9340", "gNMI address (insecure; empty disables)")
	fs.BoolVar(&cfg.json, "json", false, "write every decoded report as a JSON line on stdout")
	fs.IntVar(&cfg.maxFlows, "max-flows", 65536, "flow table size (least recently updated flows are evicted)")
	fs.IntVar(&cfg.exportFlows, "export-flows", 1000, "most recently updated flows exported over gNMI and /metrics")
	fs.IntVar(&cfg.batch, "batch", collector.DefaultBatch, "datagrams read per recvmmsg call")
	fs.UintVar(&cfg.intUDPPort, "int-udp-port", 0, "UDP port marking INT v2.1 in embedded packets (0: detect)")
	fs.UintVar(&cfg.intDSCP, "int-dscp", 0, "DSCP value marking INT v2.1 over TCP/UDP")
	fs.UintVar(&cfg.intDSCPMask, "int-dscp-mask", 0, "DSCP mask for -int-dscp (0: detect by the shim)")
	fs.Parse(args)

	c := collector.New(collector.Config{MaxFlows: cfg.maxFlows})
	d := c.Decoder()
	d.Parser.UDPPort = uint16(cfg.intUDPPort)
	d.Parser.DSCP, d.Parser.DSCPMask = uint8(cfg.intDSCP), uint8(cfg.intDSCPMask)
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
				c.Lock()
				w.Flush()
				c.Unlock()
			}
		}()
	}
	s, err := start(c, &cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.stop()
	return 0
}

// service is a running collector with its endpoints.
type service struct {
	c       *collector.Collector
	recv    *collector.Receiver
	httpLn  net.Listener
	gnmiLn  net.Listener
	grpc    *grpc.Server
	http    *http.Server
	wg      sync.WaitGroup
	reports string
}

func start(c *collector.Collector, cfg *serveConfig) (*service, error) {
	r, err := collector.Listen(cfg.listen, cfg.batch)
	if err != nil {
		return nil, err
	}
	s := &service{c: c, recv: r, reports: r.Addr().String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := c.Serve(r); err != nil {
			slog.Error("receive", "err", err)
		}
	}()
	if cfg.metrics != "" {
		ln, err := net.Listen("tcp", cfg.metrics)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.httpLn = ln
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			collector.WriteMetrics(w, c.Snapshot(cfg.exportFlows))
		})
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go s.http.Serve(ln)
	}
	if cfg.gnmi != "" {
		ln, err := net.Listen("tcp", cfg.gnmi)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.gnmiLn = ln
		s.grpc = grpc.NewServer()
		gpb.RegisterGNMIServer(s.grpc, &gnmiServer{c: c, maxFlows: cfg.exportFlows})
		go s.grpc.Serve(ln)
	}
	return s, nil
}

func (s *service) stop() {
	s.recv.Close()
	if s.http != nil {
		s.http.Shutdown(context.Background())
	}
	if s.grpc != nil {
		s.grpc.Stop()
	}
	s.wg.Wait()
}

// Package promserve serves the /metrics endpoint of intd and
// intcollector: the program's own collectors, plus <program>_build_info
// and the process and Go runtime collectors, in the Prometheus text
// format (or OpenMetrics when the scraper asks for it).
package promserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intd-project/intd/cmd/internal/buildinfo"
)

// Registry registers cs with the build information, process and Go
// runtime collectors.
func Registry(program string, cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{
		BuildInfo(program),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return reg, nil
}

// BuildInfo is the constant gauge <program>_build_info, 1, labelled with
// the version, VCS revision and Go version of the binary (buildinfo: the
// release stamps, else runtime/debug.ReadBuildInfo).
func BuildInfo(program string) prometheus.Collector {
	bi := buildinfo.Read()
	revision := bi.Commit
	if revision == "" {
		revision = "unknown"
	}
	if bi.Modified {
		revision += "-dirty"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        program + "_build_info",
		Help:        "Build information of " + program + ": version, VCS revision and Go version; the value is 1.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": revision, "goversion": bi.GoVersion},
	})
	g.Set(1)
	return g
}

// Server serves /metrics.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen serves reg's /metrics on addr (TCP) until Close.
func Listen(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slogErrors{log},
		EnableOpenMetrics: true,
	}))
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving metrics", "addr", addr, "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, letting scrapes in progress finish for up to a
// second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// slogErrors logs the errors met while gathering metrics.
type slogErrors struct{ log *slog.Logger }

func (l slogErrors) Println(v ...any) { l.log.Error("gathering metrics", "err", fmt.Sprint(v...)) }

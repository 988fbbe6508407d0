package main

import (
	"fmt"
	"log/slog"

	"github.com/intd-project/intd/cmd/internal/promserve"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/metrics"
)

// serveMetrics serves srv's targets' counters (server/metrics), with the
// build, process and Go runtime metrics, on addr's /metrics.
func serveMetrics(addr string, srv *server.Server, log *slog.Logger) (*promserve.Server, error) {
	exp, err := metrics.New(srv)
	if err != nil {
		return nil, err
	}
	reg, err := promserve.Registry("intd", exp)
	if err != nil {
		return nil, err
	}
	m, err := promserve.Listen(addr, reg, log)
	if err != nil {
		return nil, fmt.Errorf("metrics (--metrics): %w", err)
	}
	log.Info("serving Prometheus metrics", "addr", m.Addr().String())
	return m, nil
}

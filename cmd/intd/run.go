package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/cmd/intd/internal/placeholder"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/server"
)

//go:embed default-config.json
var defaultConfig []byte

func init() {
	register("run", "serve one INT node over gNMI", runCmd)
}

// runOptions are `intd run`'s settings; a --config file sets the same
// names (JSON object keys equal to the flag names), flags override it.
type runOptions struct {
	Addr          string        `json:"addr"`
	TLSCert       string        `json:"tls-cert"`
	TLSKey        string        `json:"tls-key"`
	TLSClientCA   string        `json:"tls-client-ca"`
	Insecure      bool          `json:"insecure"`
	Credentials   string        `json:"credentials"`
	NodeID        uint          `json:"node-id"`
	Target        string        `json:"target"`
	Save          string        `json:"save"`
	Dataplane     string        `json:"dataplane"`
	Interfaces    string        `json:"interfaces"`
	StateInterval time.Duration `json:"-"`
	StateInt      string        `json:"state-interval"`
	LogLevel      string        `json:"log-level"`
	LogFormat     string        `json:"log-format"`
}

// dataplanes are the --dataplane values; each builds the applier.
var dataplanes = map[string]func(interfaces []string) (server.Applier, error){
	placeholder.Name: func([]string) (server.Applier, error) { return placeholder.New(), nil },
}

func runFlags(o *runOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("intd run", flag.ContinueOnError)
	fs.StringVar(&o.Addr, "addr", ":9339", "gNMI listen address")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key. Without both a self-signed certificate is generated in memory")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&o.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) for mutual TLS: clients must present a certificate it signed")
	fs.BoolVar(&o.Insecure, "insecure", false, "serve plaintext gRPC (only allowed on a loopback address)")
	fs.StringVar(&o.Credentials, "credentials", "", "credentials file (lines from `intd passwd`); without it no username/password is required")
	fs.UintVar(&o.NodeID, "node-id", 0, "INT node ID put into the default configuration (used when no saved configuration exists)")
	fs.StringVar(&o.Target, "target", "intd", "gNMI target name of this node (requests without a target get it)")
	fs.StringVar(&o.Save, "save", "/var/lib/intd/running.json", "file the running configuration is saved to after every Set and loaded from at start (empty: not saved)")
	fs.StringVar(&o.Dataplane, "dataplane", placeholder.Name, "dataplane backend")
	fs.StringVar(&o.Interfaces, "interfaces", "", "comma-separated interfaces the dataplane attaches to")
	fs.StringVar(&o.StateInt, "state-interval", "1s", "how often dataplane state and counters are published")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	return fs
}

// parseRunArgs applies defaults, then the --config file, then flags.
func parseRunArgs(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{}
	fs := runFlags(o)
	fs.SetOutput(stderr)
	var cfgFile string
	fs.StringVar(&cfgFile, "config", "", "JSON file of settings named like these flags; flags given too override it")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfgFile != "" {
		data, err := os.ReadFile(cfgFile)
		if err != nil {
			return nil, fmt.Errorf("settings: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(o); err != nil {
			return nil, fmt.Errorf("settings %s: %w", cfgFile, err)
		}
		// Flags given on the command line win over the file.
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
	}
	d, err := time.ParseDuration(o.StateInt)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("bad --state-interval %q", o.StateInt)
	}
	o.StateInterval = d
	return o, nil
}

func newLogger(o *runOptions, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return nil, fmt.Errorf("bad --log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch o.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("bad --log-format %q (text or json)", o.LogFormat)
}

// isLoopback reports whether a listen address binds only loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// initialConfig is the embedded default configuration, with --node-id.
func initialConfig(nodeID uint) (*gen.Device, error) {
	cfg, err := gen.ParseConfig(defaultConfig)
	if err != nil {
		return nil, fmt.Errorf("embedded default configuration: %w", err)
	}
	if nodeID != 0 {
		if nodeID > 1<<32-1 {
			return nil, fmt.Errorf("--node-id %d out of range", nodeID)
		}
		cfg.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig().NodeId = ygot.Uint32(uint32(nodeID))
	}
	return cfg, nil
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRunArgs(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		return err
	}
	mk, ok := dataplanes[o.Dataplane]
	if !ok {
		names := make([]string, 0, len(dataplanes))
		for n := range dataplanes {
			names = append(names, n)
		}
		return fmt.Errorf("unknown --dataplane %q (available: %s)", o.Dataplane, strings.Join(names, ", "))
	}
	var ifaces []string
	for _, i := range strings.Split(o.Interfaces, ",") {
		if i = strings.TrimSpace(i); i != "" {
			ifaces = append(ifaces, i)
		}
	}
	applier, err := mk(ifaces)
	if err != nil {
		return fmt.Errorf("dataplane %s: %w", o.Dataplane, err)
	}
	// Dataplanes that hold kernel state (tc filters, sockets) release it on
	// every way out, start-up errors included.
	if c, ok := applier.(io.Closer); ok {
		defer func() {
			if err := c.Close(); err != nil {
				log.Error("closing the dataplane", "dataplane", o.Dataplane, "err", err)
			}
		}()
	}
	if o.Dataplane == placeholder.Name {
		log.Warn("running with the placeholder dataplane: configuration is accepted and echoed as state, no packets are processed")
	}

	var opts []server.Option
	opts = append(opts, server.WithLogger(log), server.WithStatePollInterval(o.StateInterval), server.WithDefaultTarget(o.Target))
	if o.Insecure {
		if !isLoopback(o.Addr) {
			return fmt.Errorf("--insecure is only allowed on a loopback address, not %q", o.Addr)
		}
		if o.TLSCert != "" || o.TLSKey != "" || o.TLSClientCA != "" {
			return errors.New("--insecure conflicts with the --tls-* flags")
		}
	} else {
		host, _, _ := net.SplitHostPort(o.Addr)
		tlsCfg, err := server.TLSConfig(o.TLSCert, o.TLSKey, o.TLSClientCA, host)
		if err != nil {
			return err
		}
		if o.TLSCert == "" {
			log.Warn("no --tls-cert given: serving a self-signed certificate generated in memory")
		}
		opts = append(opts, server.WithTLS(tlsCfg))
	}
	if o.Credentials != "" {
		creds, err := server.LoadCredentials(o.Credentials)
		if err != nil {
			return err
		}
		opts = append(opts, server.WithCredentials(creds))
	}
	initial, err := initialConfig(o.NodeID)
	if err != nil {
		return err
	}

	srv, err := server.New(opts...)
	if err != nil {
		return err
	}
	if err := srv.AddTarget(ctx, o.Target, applier, server.TargetOptions{SavePath: o.Save, Initial: initial}); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", o.Addr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("listening: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		srv.Close()
		return nil
	case err := <-errc:
		srv.Close()
		if err != nil {
			return fmt.Errorf("serving gNMI: %w", err)
		}
		return nil
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/cmd/internal/gnmilisten"
	"github.com/intd-project/intd/cmd/internal/logging"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
)

// runOptions are `intd run`'s settings; a --config file sets the same
// names (JSON object keys equal to the flag names), flags override it.
type runOptions struct {
	// The gNMI listener: --addr, TLS, credentials and --state-dir.
	gnmilisten.Settings
	NodeID        uint          `json:"node-id"`
	Target        string        `json:"target"`
	Save          string        `json:"save"`
	StartupConfig string        `json:"startup-config"`
	Dataplane     string        `json:"dataplane"`
	Interfaces    string        `json:"interfaces"`
	SoftQueues    int           `json:"soft-queues"`
	StateInterval time.Duration `json:"-"`
	StateInt      string        `json:"state-interval"`
	LogLevel      string        `json:"log-level"`
	LogFormat     string        `json:"log-format"`
	SonicConfigDB string        `json:"sonic-config-db"`
	SonicDBConfig string        `json:"sonic-db-config"`
	Metrics       string        `json:"metrics"`

	// given holds the names of the settings given by flag or file.
	given map[string]bool
}

// dataplaneKind is one --dataplane value.
type dataplaneKind struct {
	summary string
	// check reports what this system lacks to run the dataplane, before
	// anything is changed.
	check func() error
	// keep are the capabilities the dataplane still needs once it is set
	// up (to apply configuration, and to undo its changes at exit).
	keep []capability
	// open sets the dataplane up; what it runs ends with ctx or when the
	// applier (an io.Closer) is closed.
	open func(ctx context.Context, o dataplaneOptions) (intdmodel.Applier, error)
}

// dataplaneOptions are the flags a dataplane is set up with.
type dataplaneOptions struct {
	Interfaces []string
	SoftQueues int // egress queues per port (soft)
}

// dataplanes are the --dataplane values.
var dataplanes = map[string]*dataplaneKind{
	"ebpf": ebpfDataplane,
	"soft": softDataplane,
}

const defaultDataplane = "ebpf"

const (
	defaultPort     = "9339"
	defaultStateDir = "/var/lib/intd"
)

func dataplaneNames() []string {
	names := make([]string, 0, len(dataplanes))
	for n := range dataplanes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runFlags(o *runOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("intd run", flag.ContinueOnError)
	fs.StringVar(&o.Addr, "addr", "", "gNMI listen address (default 127.0.0.1:"+defaultPort+", or :"+defaultPort+" with --credentials or --tls-client-ca); "+
		"an address beyond loopback needs --credentials or --tls-client-ca")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key. Without both a self-signed certificate is made once and kept in --state-dir")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&o.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) for mutual TLS: clients must present a certificate it signed")
	fs.BoolVar(&o.Insecure, "insecure", false, "serve plaintext gRPC (only allowed on a loopback address)")
	fs.StringVar(&o.Credentials, "credentials", "", "credentials `file` (lines printed by intd passwd, or NAME ROLE certificate for a client known by its certificate; mode 0600): clients must give a username and password or such a certificate")
	fs.BoolVar(&o.AllowUnauthenticated, "allow-unauthenticated", false, "listen beyond loopback without --credentials or --tls-client-ca: anyone who can connect may reconfigure the node")
	fs.UintVar(&o.NodeID, "node-id", 0, "INT node ID put into the initial configuration (the --startup-config file, or an empty one) when no saved configuration exists")
	fs.StringVar(&o.Target, "target", "intd", "gNMI target name of this node (requests without a target get it)")
	fs.StringVar(&o.StateDir, "state-dir", defaultStateDir, "directory of intd's state: the generated TLS certificate and, by default, the saved configuration")
	fs.StringVar(&o.Save, "save", "", "file the running configuration is saved to after every Set and loaded from at start (default STATE-DIR/running.json; \"\" with the flag given: not saved)")
	fs.StringVar(&o.StartupConfig, "startup-config", "", "YANG JSON (RFC 7951) configuration applied at the first start, when no saved configuration exists; checked like a Set, an invalid one stops intd. Without it intd starts with INT idle")
	fs.StringVar(&o.Dataplane, "dataplane", defaultDataplane, "dataplane, one of:"+dataplaneUsage())
	fs.StringVar(&o.Interfaces, "interfaces", "", "comma-separated interfaces the dataplane attaches to (required)")
	fs.IntVar(&o.SoftQueues, "soft-queues", 1, "egress queues per port of the soft dataplane (1 to 8); a packet joins the one of its DSCP class selector (DSCP >> 3, capped), each with its queue reports and queue metadata")
	fs.StringVar(&o.StateInt, "state-interval", "1s", "how often dataplane state and counters are published")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format of every line intd writes: text or json")
	fs.StringVar(&o.SonicConfigDB, "sonic-config-db", "", "SONiC CONFIG_DB's Redis (host:port or unix socket path, e.g. /var/run/redis/redis.sock): its DTEL tables and DTEL_FLOW_WATCHLIST ACL rules own the configuration (gNMI Set is refused); see docs/sonic.md")
	fs.StringVar(&o.SonicDBConfig, "sonic-db-config", "", "SONiC's database_config.json (e.g. /var/run/redis/sonic-db/database_config.json): where CONFIG_DB, STATE_DB and COUNTERS_DB are")
	fs.StringVar(&o.Metrics, "metrics", "", "HTTP address serving the counters as Prometheus /metrics, e.g. 127.0.0.1:23268 (empty: off)")
	return fs
}

func dataplaneUsage() string {
	var b strings.Builder
	for _, n := range dataplaneNames() {
		fmt.Fprintf(&b, "\n    %s: %s", n, dataplanes[n].summary)
	}
	return b.String()
}

// parseRunArgs applies defaults, then the --config file, then flags.
func parseRunArgs(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{given: map[string]bool{}}
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
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(data, &keys)
		for k := range keys {
			o.given[k] = true
		}
		// Flags given on the command line win over the file.
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
	}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	d, err := time.ParseDuration(o.StateInt)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("bad --state-interval %q", o.StateInt)
	}
	o.StateInterval = d
	if !o.given["save"] {
		o.Save = filepath.Join(o.StateDir, "running.json")
	}
	if !o.given["addr"] {
		o.Addr = net.JoinHostPort("127.0.0.1", defaultPort)
		if o.Authenticated() {
			o.Addr = ":" + defaultPort
		}
	}
	return o, nil
}

func isLoopback(addr string) bool { return gnmilisten.IsLoopback(addr) }

// checkListen refuses listen settings that would expose the node: a
// plaintext or unauthenticated server beyond loopback.
func checkListen(o *runOptions, log *slog.Logger) error {
	return o.Check(log, "--addr", "127.0.0.1:"+defaultPort, "reconfigure this node and change the packets it forwards")
}

// checkInterfaces checks that every interface exists here, before any
// dataplane touches one.
func checkInterfaces(names []string) error {
	if len(names) == 0 {
		return errors.New("--interfaces is required: the comma-separated interfaces the dataplane attaches to (e.g. --interfaces eth1,eth2)")
	}
	var missing []string
	for _, n := range names {
		if _, err := net.InterfaceByName(n); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--interfaces: no interface named %s in this network namespace (`ip link` lists them)", strings.Join(missing, ", "))
	}
	return nil
}

// prepareState creates the state directory when intd needs it, and checks
// that the configuration can be saved where --save says.
func prepareState(o *runOptions) error {
	if err := o.PrepareStateDir("intd", o.Save != "" && filepath.Dir(o.Save) == filepath.Clean(o.StateDir)); err != nil {
		return err
	}
	if o.Save != "" {
		if err := gnmilisten.CheckWritableDir(filepath.Dir(o.Save), "--save "+o.Save); err != nil {
			return err
		}
		if fi, err := os.Stat(o.Save); err == nil && fi.IsDir() {
			return fmt.Errorf("--save %s is a directory", o.Save)
		}
	}
	return nil
}

// initialConfig is the configuration a node starts with when nothing is
// saved: the --startup-config file, or an empty one (INT idle), with
// --node-id set in it.
func initialConfig(startupFile string, nodeID uint) (*gen.Device, error) {
	cfg := &gen.Device{}
	if startupFile != "" {
		data, err := os.ReadFile(startupFile)
		if err != nil {
			return nil, fmt.Errorf("--startup-config: %w", err)
		}
		if cfg, err = gen.ParseConfig(data); err != nil {
			return nil, fmt.Errorf("--startup-config %s: %w", startupFile, err)
		}
	}
	if nodeID != 0 {
		if nodeID > 1<<32-1 {
			return nil, fmt.Errorf("--node-id %d out of range", nodeID)
		}
		cfg.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig().NodeId = ygot.Uint32(uint32(nodeID))
	}
	return cfg, nil
}

// processWide is set by main: only the real process routes the output of
// libraries (gRPC's logger, glog, anything written to os.Stderr) through
// its logger; tests calling dispatch leave their process alone.
var processWide bool

// loggedError is an error runCmd has already logged.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRunArgs(args, stderr)
	if err != nil {
		return err
	}
	log, err := logging.New(o.LogLevel, o.LogFormat, stderr)
	if err != nil {
		return err
	}
	if processWide {
		restore := logging.RouteProcess(log)
		defer restore()
	}
	if err := run(ctx, o, log); err != nil {
		log.Error("intd stopped", "err", err.Error())
		return loggedError{err}
	}
	return nil
}

// run starts the node: every check that can fail on a setting comes
// before anything on the system changes.
func run(ctx context.Context, o *runOptions, log *slog.Logger) (err error) {
	dp, ok := dataplanes[o.Dataplane]
	if !ok {
		return fmt.Errorf("unknown --dataplane %q (available: %s)", o.Dataplane, strings.Join(dataplaneNames(), ", "))
	}
	if err := checkListen(o, log); err != nil {
		return err
	}
	src, err := sonicSource(o, log)
	if err != nil {
		return err
	}
	var ifaces []string
	for _, i := range strings.Split(o.Interfaces, ",") {
		if i = strings.TrimSpace(i); i != "" {
			ifaces = append(ifaces, i)
		}
	}
	if err := checkInterfaces(ifaces); err != nil {
		return err
	}
	if o.SoftQueues < 1 || o.SoftQueues > soft.MaxQueues {
		return fmt.Errorf("--soft-queues %d: give 1 to %d egress queues per port", o.SoftQueues, soft.MaxQueues)
	}
	if err := dp.check(); err != nil {
		return err
	}
	if err := prepareState(o); err != nil {
		return err
	}
	initial, err := initialConfig(o.StartupConfig, o.NodeID)
	if err != nil {
		return err
	}
	if err := intdmodel.CheckConfig(initial); err != nil {
		return fmt.Errorf("initial configuration (--startup-config %q, --node-id): %w", o.StartupConfig, err)
	}
	saved := false
	if o.Save != "" {
		if _, err := os.Stat(o.Save); err == nil {
			saved = true
			if o.StartupConfig != "" || o.NodeID != 0 {
				log.Info("a saved configuration exists: it is applied, not --startup-config or --node-id (remove it to start over)", "save", o.Save)
			}
		}
	}

	opts, err := o.ServerOptions(log)
	if err != nil {
		return err
	}
	opts = append(opts, server.WithLogger(log), server.WithStatePollInterval(o.StateInterval), server.WithDefaultTarget(o.Target))

	// A port in use stops intd before the dataplane touches anything.
	lis, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("gNMI (--addr): %w", err)
	}
	defer lis.Close() // Serve owns it once called; closing twice is harmless

	applier, err := dp.open(ctx, dataplaneOptions{Interfaces: ifaces, SoftQueues: o.SoftQueues})
	if err != nil {
		return fmt.Errorf("dataplane %s: %w", o.Dataplane, err)
	}
	// Dataplanes that hold kernel state (tc filters, sockets, host
	// settings) release it on every way out, start-up errors included.
	if c, ok := applier.(io.Closer); ok {
		defer func() {
			if cerr := c.Close(); cerr != nil {
				log.Error("closing the dataplane", "dataplane", o.Dataplane, "err", cerr)
			}
		}()
	}
	srv, err := intdmodel.New(opts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	topts := server.TargetOptions{SavePath: o.Save, Initial: initial, InvalidErr: dtel.ErrInvalid}
	sonicTarget(src, &topts)
	if err := srv.AddTarget(ctx, o.Target, intdmodel.Target(applier), topts); err != nil {
		if !saved && o.StartupConfig != "" {
			return fmt.Errorf("--startup-config %s: %w", o.StartupConfig, err)
		}
		return err
	}
	if src != nil {
		// Stopped before the server and the dataplane are.
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { src.Run(sctx, srv); close(done) }()
		defer func() { stop(); <-done }()
	}
	if o.Metrics != "" {
		m, err := serveMetrics(o.Metrics, srv, log)
		if err != nil {
			return err
		}
		defer m.Close()
	}
	kept, err := dropCaps(dp.keep)
	if err != nil {
		return err
	}
	log.Info("capabilities dropped but those the dataplane still needs", "kept", kept)
	if running, err := intdmodel.Running(srv, o.Target); err == nil && src == nil {
		if roles := intdmodel.Roles(running); len(roles) == 0 {
			log.Info("INT is idle: no INT role is enabled, intd changes no packet; configure INT over gNMI",
				"node-id", running.GetInt().GetNode().GetConfig().GetNodeId())
		} else {
			log.Info("INT active", "roles", roles, "node-id", running.GetInt().GetNode().GetConfig().GetNodeId())
		}
	}
	// A dataplane that can stop on its own (a socket failed) says so on
	// failed; nil (never ready) otherwise.
	var failed <-chan error
	if f, ok := applier.(interface{ Failed() <-chan error }); ok {
		failed = f.Failed()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case err := <-failed:
		return fmt.Errorf("dataplane %s stopped: %w", o.Dataplane, err)
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("serving gNMI: %w", err)
		}
		return nil
	}
}

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/openconfig/gnmi/cache"
	"github.com/openconfig/gnmi/ctree"
	"github.com/openconfig/gnmi/match"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/subscribe"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type options struct {
	statePoll       time.Duration
	defaultTarget   string
	log             *slog.Logger
	tls             *tls.Config
	creds           *Credentials
	maxPending      int
	maxPendingBytes int
	stallTimeout    time.Duration
	maxStreams      int
	maxPaths        int
	minSample       time.Duration
	targetDefSample time.Duration
	schema          *Schema
}

// Option configures a Server.
type Option func(*options)

// WithStatePollInterval sets how often each target's Applier.State is
// polled and published (default 1s).
func WithStatePollInterval(d time.Duration) Option { return func(o *options) { o.statePoll = d } }

// WithDefaultTarget names the target used when a request's prefix has
// none. Without it a missing target is only defaulted when exactly one
// target is served.
func WithDefaultTarget(name string) Option { return func(o *options) { o.defaultTarget = name } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithTLS serves gRPC over TLS with this configuration (set ClientAuth and
// ClientCAs in it for mutual TLS). Without it the server is plaintext.
func WithTLS(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// WithCredentials requires every RPC to carry "username" and "password"
// metadata matching these credentials; Set needs the read-write role.
func WithCredentials(c *Credentials) Option { return func(o *options) { o.creds = c } }

// WithMaxPending bounds, per subscription, the updates waiting to be sent
// (after coalescing by path), in number and in encoded bytes. A
// subscriber that falls further behind is disconnected with
// RESOURCE_EXHAUSTED. Defaults: 65536 and 16 MiB.
func WithMaxPending(n, bytes int) Option {
	return func(o *options) { o.maxPending, o.maxPendingBytes = n, bytes }
}

// WithStallTimeout sets how long a subscriber may go without accepting a
// response (its gRPC flow control window full) before it is disconnected
// with RESOURCE_EXHAUSTED. Default 30s.
func WithStallTimeout(d time.Duration) Option { return func(o *options) { o.stallTimeout = d } }

// WithClientLimits bounds, per client (peer address), the Subscribe RPCs
// open at once, and, per request, the paths of a Get or the subscriptions
// of a SubscriptionList. Past them: RESOURCE_EXHAUSTED. Defaults: 128 and
// 1024.
func WithClientLimits(streams, paths int) Option {
	return func(o *options) { o.maxStreams, o.maxPaths = streams, paths }
}

// WithSampleIntervals sets the shortest sample interval supported (min):
// SAMPLE subscriptions asking for less are refused, those asking for 0 get
// it; and the interval at which TARGET_DEFINED subscriptions sample
// counters (targetDefined). Defaults: 10ms, 10s.
func WithSampleIntervals(min, targetDefined time.Duration) Option {
	return func(o *options) { o.minSample, o.targetDefSample = min, targetDefined }
}

// WithSchema sets the model served (required): every target's data is a
// root of its generated type.
func WithSchema(sc *Schema) Option { return func(o *options) { o.schema = sc } }

// Server is a gNMI server for one or more targets, each backed by an
// Applier. The gNMI cache (github.com/openconfig/gnmi/cache) is its
// datastore for subscriptions; Get reads the published ygot tree.
type Server struct {
	gpb.UnimplementedGNMIServer

	o      options
	log    *slog.Logger
	schema *schema
	cache  *cache.Cache
	match  *match.Match

	mu      sync.RWMutex
	targets map[string]*target

	cmu     sync.Mutex
	streams map[string]int // open Subscribe RPCs by client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	gmu  sync.Mutex
	grpc []*grpc.Server
}

// New returns a Server with no targets; add them with AddTarget.
func New(opts ...Option) (*Server, error) {
	o := options{
		statePoll:       time.Second,
		maxPending:      65536,
		maxPendingBytes: 16 << 20,
		stallTimeout:    30 * time.Second,
		maxStreams:      128,
		maxPaths:        1024,
		minSample:       10 * time.Millisecond,
		targetDefSample: 10 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.statePoll <= 0 {
		return nil, errors.New("state poll interval must be positive")
	}
	if o.minSample <= 0 || o.targetDefSample <= 0 {
		return nil, errors.New("sample intervals must be positive")
	}
	if o.maxPending < 1 || o.maxPendingBytes < 1 {
		return nil, errors.New("max pending updates must be positive")
	}
	if o.stallTimeout <= 0 || o.maxStreams < 1 || o.maxPaths < 1 {
		return nil, errors.New("stall timeout and client limits must be positive")
	}
	if o.schema == nil {
		return nil, errors.New("server: no schema (WithSchema)")
	}
	sc := o.schema.s
	s := &Server{
		o:       o,
		log:     o.log,
		schema:  sc,
		cache:   cache.New(nil),
		match:   match.New(),
		targets: map[string]*target{},
		streams: map[string]int{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// Every leaf the cache accepts (and every delete) is matched against
	// the registered ON_CHANGE queries.
	s.cache.SetClient(func(l *ctree.Leaf) {
		if n, ok := l.Value().(*gpb.Notification); ok {
			subscribe.UpdateNotification(s.match, l, n, []string{n.GetPrefix().GetTarget()})
		}
	})
	return s, nil
}

// AddTarget serves a target named name, backed by a. It loads the saved
// configuration (or opts.Initial), applies it, publishes the first tree
// and starts polling state. ctx bounds only the initial apply.
func (s *Server) AddTarget(ctx context.Context, name string, a Applier, opts TargetOptions) error {
	if a == nil {
		return fmt.Errorf("target %s: nil applier", name)
	}
	if in := opts.Initial; in != nil && reflect.TypeOf(in) != reflect.PointerTo(s.schema.rootType) {
		return fmt.Errorf("target %s: initial configuration is a %T, not a root of the served schema", name, in)
	}
	return s.addTarget(ctx, name, a, false, opts)
}

// AddStateTarget serves a read-only target named name: its data is what
// src's State returns, polled like an Applier's (WithStatePollInterval),
// with changes and deletes published to subscribers. Set is refused with
// UNIMPLEMENTED: nothing in it is configuration.
func (s *Server) AddStateTarget(ctx context.Context, name string, src StateSource) error {
	if src == nil {
		return fmt.Errorf("target %s: nil state source", name)
	}
	return s.addTarget(ctx, name, stateOnly{src}, true, TargetOptions{})
}

func (s *Server) addTarget(ctx context.Context, name string, b Applier, readOnly bool, opts TargetOptions) error {
	if name == "" {
		return errors.New("target name must not be empty")
	}
	s.mu.Lock()
	if s.targets[name] != nil {
		s.mu.Unlock()
		return fmt.Errorf("target %s already exists", name)
	}
	s.mu.Unlock()
	t := &target{name: name, srv: s, applier: b, readOnly: readOnly, opts: opts, log: s.log.With("target", name), sem: make(chan struct{}, 1)}
	s.cache.Add(name)
	if err := t.start(ctx); err != nil {
		s.cache.Remove(name)
		return err
	}
	s.mu.Lock()
	s.targets[name] = t
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t.pollState(s.ctx, s.o.statePoll)
	}()
	return nil
}

// Targets returns the served target names, sorted.
func (s *Server) Targets() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.targets))
	for n := range s.targets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Running returns a copy of a target's running configuration, a root of
// the served schema.
func (s *Server) Running(name string) (ygot.GoStruct, error) {
	s.mu.RLock()
	t := s.targets[name]
	s.mu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("no such target %q", name)
	}
	if err := t.lock(context.Background()); err != nil {
		return nil, err
	}
	defer t.unlock()
	cp, err := ygot.DeepCopy(t.running)
	if err != nil {
		return nil, fmt.Errorf("target %s: copying the running configuration: %w", name, err)
	}
	return cp, nil
}

// RefreshState polls every target's applier once and publishes the
// result, as the poller does every interval.
func (s *Server) RefreshState(ctx context.Context) {
	s.mu.RLock()
	ts := make([]*target, 0, len(s.targets))
	for _, t := range s.targets {
		ts = append(ts, t)
	}
	s.mu.RUnlock()
	for _, t := range ts {
		t.refreshState(ctx)
	}
}

// targetFor picks the target a request prefix names, defaulting a missing
// one. The returned string is the target to echo (only what the client
// sent).
func (s *Server) targetFor(p *gpb.Path) (*target, string, error) {
	name := p.GetTarget()
	echo := name
	s.mu.RLock()
	defer s.mu.RUnlock()
	if name == "" {
		switch {
		case s.o.defaultTarget != "":
			name = s.o.defaultTarget
		case len(s.targets) == 1:
			for n := range s.targets {
				name = n
			}
		default:
			return nil, "", status.Errorf(codes.InvalidArgument, "the request names no target and this server serves %d; set prefix.target", len(s.targets))
		}
	}
	t := s.targets[name]
	if t == nil {
		return nil, "", status.Errorf(codes.NotFound, "no such target %q", name)
	}
	return t, echo, nil
}

// GRPCServer builds a gRPC server with the configured transport security
// and authentication, with gNMI and server reflection registered.
func (s *Server) GRPCServer() *grpc.Server {
	var opts []grpc.ServerOption
	if s.o.tls != nil {
		opts = append(opts, grpc.Creds(loggedTLS{credentials.NewTLS(s.o.tls), s.log}))
	}
	if s.o.creds != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.unaryAuth), grpc.ChainStreamInterceptor(s.streamAuth))
	}
	gs := grpc.NewServer(opts...)
	gpb.RegisterGNMIServer(gs, s)
	reflection.Register(gs)
	s.gmu.Lock()
	s.grpc = append(s.grpc, gs)
	s.gmu.Unlock()
	return gs
}

// writable reports whether some target accepts Set.
func (s *Server) writable() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.targets {
		if !t.readOnly {
			return true
		}
	}
	return false
}

// Serve serves gNMI on lis until Close; it returns nil after Close.
func (s *Server) Serve(lis net.Listener) error {
	gs := s.GRPCServer()
	mtls := s.o.tls != nil && s.o.tls.ClientAuth == tls.RequireAndVerifyClientCert
	attrs := []any{"addr", lis.Addr().String(), "tls", s.o.tls != nil, "passwords", s.o.creds != nil, "client-certificates", mtls, "targets", s.Targets()}
	if s.o.creds == nil && !mtls {
		who := "anyone who can connect"
		if ta, ok := lis.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
			who = "any local process"
		}
		can := "read its state"
		if s.writable() {
			can = "reconfigure this node"
		}
		s.log.Warn("gNMI server listening without authentication: "+who+" can "+can, attrs...)
	} else {
		s.log.Info("gNMI server listening", attrs...)
	}
	err := gs.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Close stops the gRPC servers (letting RPCs finish for up to a second)
// and the state pollers.
func (s *Server) Close() {
	s.gmu.Lock()
	gss := s.grpc
	s.grpc = nil
	s.gmu.Unlock()
	for _, gs := range gss {
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			gs.Stop()
		}
	}
	s.cancel()
	s.wg.Wait()
	s.mu.RLock()
	for _, t := range s.targets {
		t.stopCommitTimer()
	}
	s.mu.RUnlock()
}

// gnmiVersion is the gNMI version of the proto package, from its
// gnmi_service file option.
func gnmiVersion() string {
	opts := gpb.File_github_com_openconfig_gnmi_proto_gnmi_gnmi_proto.Options()
	if opts != nil {
		if v, ok := proto.GetExtension(opts, gpb.E_GnmiService).(string); ok && v != "" {
			return v
		}
	}
	return "0.10.0"
}

var supportedEncodings = []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO}

// Capabilities implements gNMI Capabilities.
func (s *Server) Capabilities(ctx context.Context, req *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	if _, err := parseExtensions(extCapabilities, req.GetExtension()); err != nil {
		return nil, err
	}
	return &gpb.CapabilityResponse{
		SupportedModels:    s.schema.modelData(),
		SupportedEncodings: supportedEncodings,
		GNMIVersion:        gnmiVersion(),
	}, nil
}

// clientOf names the client of an RPC for per-client limits: its address
// without the port.
func clientOf(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// openStream counts a Subscribe RPC of client, refusing it past the
// limit; the returned func uncounts it.
func (s *Server) openStream(client string) (func(), error) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.streams[client] >= s.o.maxStreams {
		return nil, status.Errorf(codes.ResourceExhausted, "client %s has %d Subscribe RPCs open, the most allowed", client, s.streams[client])
	}
	s.streams[client]++
	return func() {
		s.cmu.Lock()
		defer s.cmu.Unlock()
		if s.streams[client]--; s.streams[client] <= 0 {
			delete(s.streams, client)
		}
	}, nil
}

// openStreams is the number of Subscribe RPCs open.
func (s *Server) openStreams() int {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	n := 0
	for _, c := range s.streams {
		n += c
	}
	return n
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/gen"
)

// discovery reads the INT marking of intd nodes over gNMI, so that the
// collector decodes what the nodes mark without repeating their
// configuration in flags.
type discovery struct {
	nodes    string // comma-separated host:port
	tlsCA    string
	insecure bool
	username string
	timeout  time.Duration
}

// passwordEnv holds the gNMI password of --discover-username: a
// password on the command line would show in the process list.
const passwordEnv = "INTCOLLECTOR_GNMI_PASSWORD"

func (d *discovery) flags(fs *flag.FlagSet) {
	fs.StringVar(&d.nodes, "discover", "", "intd nodes (comma-separated gNMI host:port) whose INT marking (/int/marking/state) the decoder takes, read over gNMI at start and followed (ON_CHANGE) by the running collector; --int-* flags given explicitly take precedence")
	fs.StringVar(&d.tlsCA, "discover-tls-ca", "", "CA bundle or the nodes' self-signed certificate (PEM) trusted for --discover (default: the system's roots)")
	fs.BoolVar(&d.insecure, "discover-insecure", false, "plaintext gNMI to the --discover nodes (intd run --insecure)")
	fs.StringVar(&d.username, "discover-username", "", "gNMI username for the --discover nodes; the password is read from $"+passwordEnv)
	fs.DurationVar(&d.timeout, "discover-timeout", 10*time.Second, "how long each --discover node is tried before the collector starts without its marking")
}

// nodeMarking is one node's applied marking.
type nodeMarking struct {
	node string
	m    *gen.IntdInt_Int_Marking_State
}

// run reads every node's marking; nodes that do not answer within the
// timeout are logged and left out.
func (d *discovery) run(ctx context.Context, log *slog.Logger) []nodeMarking {
	var out []nodeMarking
	for _, node := range strings.Split(d.nodes, ",") {
		node = strings.TrimSpace(node)
		if node == "" {
			continue
		}
		m, err := d.get(ctx, node)
		if err != nil {
			log.Warn("INT marking not discovered: decoding without this node's", "node", node, "err", err.Error())
			continue
		}
		log.Info("INT marking discovered", "node", node, "marking", describeMarking(m))
		out = append(out, nodeMarking{node, m})
	}
	return out
}

func (d *discovery) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	switch {
	case d.insecure:
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	default:
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if d.tlsCA != "" {
			pem, err := os.ReadFile(d.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--discover-tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--discover-tls-ca %s: no PEM certificate", d.tlsCA)
			}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if d.username != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(userPassword{d.username, os.Getenv(passwordEnv), !d.insecure}))
	}
	return opts, nil
}

// get reads node's /int/marking/state, retrying until the timeout.
func (d *discovery) get(ctx context.Context, node string) (*gen.IntdInt_Int_Marking_State, error) {
	opts, err := d.dialOptions()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(node, opts...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	path := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "marking"}, {Name: "state"}}}
	for {
		res, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{path}, Encoding: gpb.Encoding_JSON_IETF}, grpc.WaitForReady(true))
		if err == nil {
			return decodeMarking(res)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func decodeMarking(res *gpb.GetResponse) (*gen.IntdInt_Int_Marking_State, error) {
	m := &gen.IntdInt_Int_Marking_State{}
	for _, n := range res.GetNotification() {
		for _, u := range n.GetUpdate() {
			if err := gen.Unmarshal(u.GetVal().GetJsonIetfVal(), m); err != nil {
				return nil, fmt.Errorf("/int/marking/state: %w", err)
			}
		}
	}
	return m, nil
}

// userPassword is gNMI's username/password per-RPC metadata.
type userPassword struct {
	user, password string
	secure         bool
}

func (u userPassword) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"username": u.user, "password": u.password}, nil
}

func (u userPassword) RequireTransportSecurity() bool { return u.secure }

// markingValues is the part of a marking the decoder takes (0: none).
type markingValues struct {
	dscp, dscpMask     uint
	udpPort            uint
	probe              uint64
	greProto           uint
	gpeNext, geneveCls uint
}

func valuesOf(m *gen.IntdInt_Int_Marking_State) markingValues {
	var v markingValues
	switch m.GetL4Marking() {
	case gen.IntdInt_L4Marking_DSCP:
		v.dscp, v.dscpMask = uint(m.GetDscpValue()), uint(m.GetDscpMask())
	case gen.IntdInt_L4Marking_UDP_DESTINATION_PORT:
		v.udpPort = uint(m.GetUdpPort())
	case gen.IntdInt_L4Marking_PROBE_MARKER:
		v.probe = m.GetProbeMarker()
	}
	v.greProto, v.gpeNext, v.geneveCls = uint(m.GetGreProtocolType()), uint(m.GetVxlanGpeNextProtocol()), uint(m.GetGeneveOptionClass())
	return v
}

func describeMarking(m *gen.IntdInt_Int_Marking_State) string {
	v := valuesOf(m)
	s := m.GetL4Marking().String()
	switch m.GetL4Marking() {
	case gen.IntdInt_L4Marking_DSCP:
		s += fmt.Sprintf(" %#x/%#x", v.dscp, v.dscpMask)
	case gen.IntdInt_L4Marking_UDP_DESTINATION_PORT:
		s += fmt.Sprintf(" %d", v.udpPort)
	case gen.IntdInt_L4Marking_PROBE_MARKER:
		s += fmt.Sprintf(" %#x", v.probe)
	}
	return s + fmt.Sprintf(", gre-protocol-type %#x, vxlan-gpe-next-protocol %#x, geneve-option-class %#x", v.greProto, v.gpeNext, v.geneveCls)
}

// merge sets the marking the nodes use into m, but the flags given
// explicitly (set). Markings of different kinds are all taken (the
// decoder finds INT by DSCP, UDP port and probe marker at once); two
// values of one kind cannot both be: the first node's is kept and the
// conflict logged.
func (m *marking) merge(nodes []nodeMarking, set map[string]bool, log *slog.Logger) {
	if len(nodes) == 0 {
		return
	}
	type field struct {
		flag  string
		get   func(markingValues) string
		apply func(markingValues)
	}
	u := func(v uint) string { return strconv.FormatUint(uint64(v), 10) }
	fields := []field{
		{"int-dscp", func(v markingValues) string {
			if v.dscpMask == 0 {
				return ""
			}
			return fmt.Sprintf("%#x/%#x", v.dscp, v.dscpMask)
		}, func(v markingValues) { m.dscp, m.dscpMask = v.dscp, v.dscpMask }},
		{"int-udp-port", func(v markingValues) string { return nz(v.udpPort, u) }, func(v markingValues) { m.udpPort = v.udpPort }},
		{"int-probe-marker", func(v markingValues) string {
			if v.probe == 0 {
				return ""
			}
			return fmt.Sprintf("%#x", v.probe)
		}, func(v markingValues) { m.probe = fmt.Sprintf("%#x", v.probe) }},
		{"int-gre-proto", func(v markingValues) string { return nz(v.greProto, u) }, func(v markingValues) { m.greProto = v.greProto }},
		{"int-gpe-next-protocol", func(v markingValues) string { return nz(v.gpeNext, u) }, func(v markingValues) { m.gpeNext = v.gpeNext }},
		{"int-geneve-option-class", func(v markingValues) string { return nz(v.geneveCls, u) }, func(v markingValues) { m.geneveClass = v.geneveCls }},
	}
	// What the nodes do not mark is not looked for: no DSCP marking
	// unless a node has one.
	if !set["int-dscp"] && !set["int-dscp-mask"] {
		m.dscp, m.dscpMask = 0, 0
	}
	for _, f := range fields {
		if set[f.flag] || (f.flag == "int-dscp" && set["int-dscp-mask"]) {
			continue
		}
		first := -1
		for i, n := range nodes {
			v := valuesOf(n.m)
			got := f.get(v)
			switch {
			case got == "":
			case first < 0:
				first = i
				f.apply(v)
			case got != f.get(valuesOf(nodes[first].m)):
				log.Warn("INT markings of the nodes differ: decoding with the first node's", "marking", "--"+f.flag,
					"node", nodes[first].node, "value", f.get(valuesOf(nodes[first].m)), "other_node", n.node, "other_value", got)
			}
		}
	}
}

func nz(v uint, f func(uint) string) string {
	if v == 0 {
		return ""
	}
	return f(v)
}

// discoverMarking applies the discovered markings to m when --discover
// is given; fs is parsed. The follower it returns (nil without
// --discover) keeps them current.
func (m *marking) discoverMarking(ctx context.Context, fs *flag.FlagSet, log *slog.Logger) (*follower, error) {
	if m.discover.nodes == "" {
		return nil, nil
	}
	if m.discover.timeout <= 0 {
		return nil, errors.New("--discover-timeout must be positive")
	}
	f := &follower{base: *m, set: map[string]bool{}, log: log, latest: map[string]*gen.IntdInt_Int_Marking_State{}}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	nodes := m.discover.run(ctx, log)
	if len(nodes) == 0 {
		log.Warn("no INT marking discovered: decoding with the --int-* flags' markings", "nodes", m.discover.nodes)
	}
	for _, n := range nodes {
		f.latest[n.node] = n.m
	}
	m.merge(nodes, f.set, log)
	return f, nil
}

// follower keeps a running collector's marking the nodes' own: it
// subscribes to each node's /int/marking/state (ON_CHANGE), and when one
// changes (or a node first answers) applies the merge of the latest
// markings.
type follower struct {
	base   marking // the flags'
	set    map[string]bool
	log    *slog.Logger
	latest map[string]*gen.IntdInt_Int_Marking_State // by node
}

// run follows the nodes until ctx ends, calling apply with each new
// merged marking.
func (f *follower) run(ctx context.Context, apply func(marking)) {
	type change struct {
		node string
		m    *gen.IntdInt_Int_Marking_State
	}
	ch := make(chan change)
	var order []string
	for _, node := range strings.Split(f.base.discover.nodes, ",") {
		if node = strings.TrimSpace(node); node == "" {
			continue
		}
		order = append(order, node)
		go f.base.discover.watch(ctx, node, func(m *gen.IntdInt_Int_Marking_State) {
			select {
			case ch <- change{node, m}:
			case <-ctx.Done():
			}
		}, f.log)
	}
	for {
		var c change
		select {
		case <-ctx.Done():
			return
		case c = <-ch:
		}
		if old := f.latest[c.node]; old != nil && describeMarking(old) == describeMarking(c.m) {
			continue
		}
		f.latest[c.node] = c.m
		f.log.Info("INT marking of a node changed: decoding with it", "node", c.node, "marking", describeMarking(c.m))
		var nodes []nodeMarking
		for _, n := range order {
			if m := f.latest[n]; m != nil {
				nodes = append(nodes, nodeMarking{n, m})
			}
		}
		m := f.base
		m.merge(nodes, f.set, f.log)
		apply(m)
	}
}

// watch subscribes to node's marking and calls fn with it after each
// change; a stream that fails is opened again after a pause.
func (d *discovery) watch(ctx context.Context, node string, fn func(*gen.IntdInt_Int_Marking_State), log *slog.Logger) {
	opts, err := d.dialOptions()
	if err != nil {
		return // refused at start already
	}
	conn, err := grpc.NewClient(node, opts...)
	if err != nil {
		return
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)
	path := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "marking"}, {Name: "state"}}}
	for ctx.Err() == nil {
		err := d.stream(ctx, c, path, fn)
		if ctx.Err() != nil {
			return
		}
		log.Debug("INT marking subscription ended: subscribing again", "node", node, "err", fmt.Sprint(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// stream runs one ON_CHANGE subscription; after each batch of updates it
// reads the whole marking and passes it to fn.
func (d *discovery) stream(ctx context.Context, c gpb.GNMIClient, path *gpb.Path, fn func(*gen.IntdInt_Int_Marking_State)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := c.Subscribe(ctx, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_JSON_IETF,
		Subscription: []*gpb.Subscription{{Path: path, Mode: gpb.SubscriptionMode_ON_CHANGE}}}}}); err != nil {
		return err
	}
	for {
		if _, err := sub.Recv(); err != nil {
			return err
		}
		gctx, gcancel := context.WithTimeout(ctx, d.timeout)
		res, err := c.Get(gctx, &gpb.GetRequest{Path: []*gpb.Path{path}, Encoding: gpb.Encoding_JSON_IETF})
		gcancel()
		if err != nil {
			return err
		}
		m, err := decodeMarking(res)
		if err != nil {
			return err
		}
		fn(m)
	}
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/cmd/internal/gnmilisten"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/internal/gnmitest"
	"github.com/intd-project/intd/internal/reporttest"
	"github.com/intd-project/intd/server"
)

// gnmiEnv is a running intcollector (reports, gNMI) and a client of its
// gNMI service.
type gnmiEnv struct {
	s   *service
	c   *collector.Collector
	cl  gpb.GNMIClient
	udp net.Conn
	seq uint32
}

// startGNMI starts intcollector with plaintext gNMI on loopback and a flow
// table of maxFlows.
func startGNMI(t *testing.T, maxFlows int) *gnmiEnv {
	t.Helper()
	c := collector.New(collector.Config{MaxFlows: maxFlows})
	s, err := start(c, &serveConfig{listen: "127.0.0.1:0", gnmi: gnmilisten.Settings{Addr: "127.0.0.1:0", Insecure: true},
		exportFlows: 100, stateInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	conn, err := grpc.NewClient(s.gnmiLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	u, err := net.Dial("udp", s.reports)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return &gnmiEnv{s: s, c: c, cl: gpb.NewGNMIClient(conn), udp: u}
}

// report sends the reports of the flow from sport and waits until the
// collector has read them.
func (e *gnmiEnv) report(t *testing.T, sport uint16) {
	t.Helper()
	before := e.c.Snapshot(1).Counters.Packets
	e.seq++
	if _, err := e.udp.Write(sinkReportPort(t, e.seq, sport)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.c.Snapshot(1).Counters.Packets == before {
		if time.Now().After(deadline) {
			t.Fatal("the collector did not read the report")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPath(t *testing.T, p string) *gpb.Path {
	t.Helper()
	gp, err := ygot.StringToStructuredPath(p)
	if err != nil {
		t.Fatal(err)
	}
	return gp
}

func flowPath(t *testing.T, sport string, rest string) *gpb.Path {
	return mustPath(t, "/collector/flows/flow[src-address=10.0.0.1][dst-address=10.0.0.2][protocol=17][src-port="+sport+"][dst-port=2222][tunnel=none][tunnel-id=0]"+rest)
}

func subscribe(t *testing.T, e *gnmiEnv, sl *gpb.SubscriptionList) gpb.GNMI_SubscribeClient {
	t.Helper()
	sub, err := e.cl.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil {
		t.Fatal(err)
	}
	return sub
}

func pathStr(n *gpb.Notification, p *gpb.Path) string {
	s, _ := ygot.PathToString(&gpb.Path{Elem: append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), p.GetElem()...)})
	return s
}

// The requested encoding is what the values come in; ASCII is refused.
func TestGNMIEncoding(t *testing.T) {
	e := startGNMI(t, 0)
	e.report(t, 1111)
	e.s.gnmi.RefreshState(context.Background())
	p := flowPath(t, "1111", "/state/counters/reports")
	for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO} {
		r, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: enc})
		if err != nil {
			t.Fatalf("%v: %v", enc, err)
		}
		v := r.GetNotification()[0].GetUpdate()[0].GetVal()
		var ok bool
		switch enc {
		case gpb.Encoding_JSON:
			ok = string(v.GetJsonVal()) == `"3"`
		case gpb.Encoding_JSON_IETF:
			ok = string(v.GetJsonIetfVal()) == `"3"`
		case gpb.Encoding_PROTO:
			ok = v.GetUintVal() == 3
		}
		if !ok {
			t.Errorf("%v: value %v", enc, v)
		}
	}
	_, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_ASCII})
	if c := status.Code(err); c != codes.Unimplemented && c != codes.InvalidArgument {
		t.Errorf("ASCII Get: %v", err)
	}
}

// A path the model does not have is an error, in Get and Subscribe.
func TestGNMIUnknownPath(t *testing.T) {
	e := startGNMI(t, 0)
	bad := mustPath(t, "/collector/no-such-node")
	if _, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{bad}, Encoding: gpb.Encoding_PROTO}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Get of an unknown path: %v, want InvalidArgument", err)
	}
	for _, mode := range []gpb.SubscriptionList_Mode{gpb.SubscriptionList_ONCE, gpb.SubscriptionList_STREAM} {
		sub := subscribe(t, e, &gpb.SubscriptionList{Mode: mode, Subscription: []*gpb.Subscription{{Path: bad}}})
		if _, err := sub.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v Subscribe to an unknown path: %v, want InvalidArgument", mode, err)
		}
	}
}

// Get echoes the target of the request's prefix; Set is refused.
func TestGNMITargetAndSet(t *testing.T) {
	e := startGNMI(t, 0)
	r, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Prefix: &gpb.Path{Target: "intcollector"}, Path: []*gpb.Path{mustPath(t, "/collector/state/flow-count")}, Encoding: gpb.Encoding_PROTO})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.GetNotification(); len(n) != 1 || n[0].GetPrefix().GetTarget() != "intcollector" {
		t.Errorf("Get notifications %v: target not echoed", n)
	}
	if _, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Prefix: &gpb.Path{Target: "other"}, Encoding: gpb.Encoding_PROTO}); status.Code(err) != codes.NotFound {
		t.Errorf("Get of another target: %v, want NotFound", err)
	}
	_, err = e.cl.Set(ctxT(t), &gpb.SetRequest{Delete: []*gpb.Path{mustPath(t, "/collector")}})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Set: %v, want Unimplemented", err)
	}
}

// A SAMPLE interval above a second is kept: nothing comes before it.
func TestGNMISampleInterval(t *testing.T) {
	e := startGNMI(t, 0)
	sub := subscribe(t, e, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: mustPath(t, "/collector/state/counters/packets"), Mode: gpb.SubscriptionMode_SAMPLE,
			SampleInterval: uint64(1500 * time.Millisecond)}}})
	if ns := gnmitest.UntilSync(t, sub); len(ns) != 1 {
		t.Fatalf("first sample: %v", ns)
	}
	start := time.Now()
	got := make(chan time.Duration, 1)
	go func() {
		if _, err := sub.Recv(); err == nil {
			got <- time.Since(start)
		}
	}()
	select {
	case d := <-got:
		t.Errorf("a sample %v after the first, asked every 1.5s", d)
	case <-time.After(1200 * time.Millisecond):
	}
}

// ON_CHANGE sends what changed, updates_only skips the initial data, and
// a flow evicted from the table is deleted.
func TestGNMIOnChangeAndEviction(t *testing.T) {
	e := startGNMI(t, 1)
	e.report(t, 1111)
	e.s.gnmi.RefreshState(context.Background())

	only := subscribe(t, e, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO, UpdatesOnly: true,
		Subscription: []*gpb.Subscription{{Path: mustPath(t, "/collector/flows"), Mode: gpb.SubscriptionMode_ON_CHANGE}}})
	if ns := gnmitest.UntilSync(t, only); len(ns) != 0 {
		t.Errorf("updates_only: %d notifications before the sync response", len(ns))
	}
	sub := subscribe(t, e, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: mustPath(t, "/collector/flows"), Mode: gpb.SubscriptionMode_ON_CHANGE}}})
	initial := 0
	for _, n := range gnmitest.UntilSync(t, sub) {
		initial += len(n.GetUpdate())
	}
	if initial == 0 {
		t.Fatal("no initial data")
	}

	// A second flow evicts the first (a table of one flow).
	e.report(t, 3333)
	e.s.gnmi.RefreshState(context.Background())
	for name, s := range map[string]gpb.GNMI_SubscribeClient{"updates_only": only, "on_change": sub} {
		deleted, updated := map[string]bool{}, map[string]bool{}
		for !deleted[pathStr(nil, flowPath(t, "1111", "/state/src-port"))] || !updated[pathStr(nil, flowPath(t, "3333", "/state/src-port"))] {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: %v (deleted %d, updated %d)", name, err, len(deleted), len(updated))
			}
			n := m.GetUpdate()
			for _, d := range n.GetDelete() {
				deleted[pathStr(n, d)] = true
			}
			for _, u := range n.GetUpdate() {
				p := pathStr(n, u.GetPath())
				if strings.Contains(p, "src-port=1111") {
					t.Errorf("%s: update %s of the evicted flow", name, p)
				}
				updated[p] = true
			}
		}
		if len(updated) > initial {
			t.Errorf("%s: %d updates for the new flow, more than the whole first flow (%d): not only changes", name, len(updated), initial)
		}
	}
}

// The same inner 5-tuple in two GTP-U tunnels is two entries of the flow
// list, keyed by the tunnel and its TEID, each with its own counters.
func TestGNMITunnelFlows(t *testing.T) {
	e := startGNMI(t, 0)
	before := e.c.Snapshot(1).Counters.Packets
	inner := wiretest.UDPFrame("10.250.0.1", "192.0.2.53", 4000, 53, []byte("query"), true)[wire.EthernetLen:]
	sent := map[uint32]int{7: 1, 8: 2}
	for teid, n := range sent {
		f := wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: teid, GTPUExt: 1}, "10.0.0.1", "10.0.0.2", 0, inner)
		for range n {
			e.seq++
			if _, err := e.udp.Write(reporttest.Group(e.seq, f, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for end := time.Now().Add(5 * time.Second); e.c.Snapshot(1).Counters.Packets < before+3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the collector did not read the reports")
		}
	}
	e.s.gnmi.RefreshState(context.Background())
	const flow = "/collector/flows/flow[src-address=10.250.0.1][dst-address=192.0.2.53][protocol=17][src-port=4000][dst-port=53]"
	for teid, n := range sent {
		p := mustPath(t, fmt.Sprintf("%s[tunnel=gtpu][tunnel-id=%d]/state/counters/reports", flow, teid))
		r, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			t.Fatalf("TEID %d: %v", teid, err)
		}
		if v := r.GetNotification()[0].GetUpdate()[0].GetVal().GetUintVal(); v != uint64(n) {
			t.Errorf("TEID %d: %d reports, want %d", teid, v, n)
		}
	}
	r, err := e.cl.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{mustPath(t, "/collector/flows/flow/state/tunnel-id")}, Encoding: gpb.Encoding_PROTO})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, n := range r.GetNotification() {
		for _, u := range n.GetUpdate() {
			got[pathStr(n, u.GetPath())] = u.GetVal().GetUintVal()
		}
	}
	if len(got) != 2 {
		t.Errorf("flow entries: %v, want the two tunnels", got)
	}
	for p, id := range got {
		if !strings.Contains(p, fmt.Sprintf("[tunnel=gtpu][tunnel-id=%d]", id)) {
			t.Errorf("%s: tunnel-id %d not in its key", p, id)
		}
	}
}

// Without --insecure gNMI is TLS, with a certificate made once and kept
// in --state-dir; plaintext and unauthenticated servers stay on
// loopback.
func TestGNMITLS(t *testing.T) {
	dir := t.TempDir()
	fingerprints := map[string]bool{}
	for i := 0; i < 2; i++ {
		c := collector.New(collector.Config{})
		s, err := start(c, &serveConfig{listen: "127.0.0.1:0", gnmi: gnmilisten.Settings{Addr: "127.0.0.1:0", StateDir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		pem, err := os.ReadFile(filepath.Join(dir, server.StateCertFile))
		if err != nil {
			s.stop()
			t.Fatal(err)
		}
		fingerprints[string(pem)] = true
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		for _, tc := range []struct {
			name  string
			creds credentials.TransportCredentials
			ok    bool
		}{
			{"tls", credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}), true},
			{"plaintext", insecure.NewCredentials(), false},
		} {
			conn, err := grpc.NewClient(s.gnmiLn.Addr().String(), grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err = gpb.NewGNMIClient(conn).Capabilities(ctx, &gpb.CapabilityRequest{})
			cancel()
			conn.Close()
			if (err == nil) != tc.ok {
				t.Errorf("start %d, %s client: %v", i, tc.name, err)
			}
		}
		s.stop()
	}
	if len(fingerprints) != 1 {
		t.Errorf("the certificate changed between starts")
	}

	for _, g := range []gnmilisten.Settings{
		{Addr: "0.0.0.0:0", Insecure: true},
		{Addr: "0.0.0.0:0", StateDir: dir},
	} {
		c := collector.New(collector.Config{})
		s, err := start(c, &serveConfig{listen: "127.0.0.1:0", gnmi: g})
		if err == nil {
			s.stop()
			t.Errorf("%+v: started", g)
		} else if !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%+v: %v", g, err)
		}
	}
}

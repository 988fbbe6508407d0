package collector_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/internal/gnmitest"
	"github.com/intd-project/intd/server"
	gnmicollector "github.com/intd-project/intd/server/collector"
	"github.com/intd-project/intd/server/intdmodel"
)

// The rows of the server's conformance table (server/conformance_test.go,
// docs/gnmi-conformance.md) that bind a read-only target, run against the
// collector's model over real gRPC: the same server, another schema.

func startCollector(t *testing.T) (gpb.GNMIClient, *server.Server) {
	t.Helper()
	sc, err := gnmicollector.Schema()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.WithSchema(sc), server.WithStatePollInterval(time.Hour),
		server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c := collector.New(collector.Config{})
	if err := srv.AddStateTarget(context.Background(), "col", gnmicollector.Source{C: c}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Close() })
	return gpb.NewGNMIClient(conn), srv
}

func gp(t *testing.T, s string) *gpb.Path {
	t.Helper()
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReadOnlyConformance(t *testing.T) {
	rows := []struct {
		sec, text string
		check     func(t *testing.T, cl gpb.GNMIClient)
	}{
		{"3.2", "Capabilities gives the gNMI version, the versioned models and the encodings", func(t *testing.T, cl gpb.GNMIClient) {
			r, err := cl.Capabilities(ctxFor(t), &gpb.CapabilityRequest{})
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, m := range r.GetSupportedModels() {
				if m.GetVersion() == "" {
					t.Errorf("model %s without a version", m.GetName())
				}
				names[m.GetName()] = true
			}
			if r.GetGNMIVersion() == "" || !names["intd-collector"] || len(r.GetSupportedEncodings()) == 0 {
				t.Errorf("capabilities %v", r)
			}
		}},
		{"2.1, 2.2.1", "a notification includes its timestamp, nanoseconds since the epoch", func(t *testing.T, cl gpb.GNMIClient) {
			before := time.Now().UnixNano()
			r, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector/state/counters")}, Encoding: gpb.Encoding_PROTO})
			if err != nil {
				t.Fatal(err)
			}
			// The snapshot was taken when the target started, before this Get.
			if ts := r.GetNotification()[0].GetTimestamp(); ts <= 0 || ts > before {
				t.Errorf("timestamp %d, Get at %d", ts, before)
			}
		}},
		{"2.2.2.1", "a target in a request's prefix is reflected in the responses' prefix", func(t *testing.T, cl gpb.GNMIClient) {
			r, err := cl.Get(ctxFor(t), &gpb.GetRequest{Prefix: &gpb.Path{Target: "col"}, Path: []*gpb.Path{gp(t, "/collector/state/flow-count")}, Encoding: gpb.Encoding_PROTO})
			if err != nil || r.GetNotification()[0].GetPrefix().GetTarget() != "col" {
				t.Errorf("Get: %v %v", r, err)
			}
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Prefix: &gpb.Path{Target: "col"}, Mode: gpb.SubscriptionList_ONCE, Subscription: []*gpb.Subscription{{Path: gp(t, "/collector/state/flow-count")}}}}})
			for _, n := range gnmitest.UntilSync(t, sub) {
				if n.GetPrefix().GetTarget() != "col" {
					t.Errorf("Subscribe notification %v", n)
				}
			}
		}},
		{"2.3.1", "JSON values are valid JSON; JSON_IETF follows RFC 7951 (64-bit integers as strings)", func(t *testing.T, cl gpb.GNMIClient) {
			for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF} {
				r, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector/state/counters/packets")}, Encoding: enc})
				if err != nil {
					t.Fatal(err)
				}
				v := r.GetNotification()[0].GetUpdate()[0].GetVal()
				b := append(v.GetJsonVal(), v.GetJsonIetfVal()...)
				var s string
				if err := json.Unmarshal(b, &s); err != nil || s != "0" {
					t.Errorf("%v: %s (%v)", enc, b, err)
				}
			}
		}},
		{"3.3.1", "an invalid path is INVALID_ARGUMENT", func(t *testing.T, cl gpb.GNMIClient) {
			_, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector/nothing")}})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("Get: %v", err)
			}
		}},
		{"3.3.1", "an unsupported encoding is UNIMPLEMENTED", func(t *testing.T, cl gpb.GNMIClient) {
			_, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector")}, Encoding: gpb.Encoding_ASCII})
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("Get: %v", err)
			}
		}},
		{"3.3.2", "one notification per path of the request", func(t *testing.T, cl gpb.GNMIClient) {
			r, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector/state/flow-count"), gp(t, "/collector/state/counters/packets")}, Encoding: gpb.Encoding_PROTO})
			if err != nil || len(r.GetNotification()) != 2 {
				t.Errorf("Get: %v %v", r, err)
			}
		}},
		{"3.3.4", "a valid path without data is NOT_FOUND", func(t *testing.T, cl gpb.GNMIClient) {
			_, err := cl.Get(ctxFor(t), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/collector/flows/flow[src-address=10.9.9.9][dst-address=10.9.9.8][protocol=6][src-port=1][dst-port=2][tunnel=none][tunnel-id=0]")}})
			if status.Code(err) != codes.NotFound {
				t.Errorf("Get: %v", err)
			}
		}},
		{"3.4.7", "a Set the target cannot apply fails with an error status (read-only target: UNIMPLEMENTED)", func(t *testing.T, cl gpb.GNMIClient) {
			_, err := cl.Set(ctxFor(t), &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/collector")}})
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("Set: %v", err)
			}
		}},
		{"3.5.1.1", "an RPC whose first request has no SubscriptionList is INVALID_ARGUMENT", func(t *testing.T, cl gpb.GNMIClient) {
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}})
			if _, err := sub.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("Subscribe: %v", err)
			}
		}},
		{"3.5.1.2", "updates_only: ONCE sends only the sync_response", func(t *testing.T, cl gpb.GNMIClient) {
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Mode: gpb.SubscriptionList_ONCE, UpdatesOnly: true, Subscription: []*gpb.Subscription{{Path: gp(t, "/collector")}}}}})
			if ns := gnmitest.UntilSync(t, sub); len(ns) != 0 {
				t.Errorf("%d notifications", len(ns))
			}
		}},
		{"3.5.1.5.1", "ONCE: the updates, a sync_response, then the RPC is closed", func(t *testing.T, cl gpb.GNMIClient) {
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: gp(t, "/collector/state/counters")}}}}})
			if ns := gnmitest.UntilSync(t, sub); len(ns) == 0 {
				t.Error("no updates")
			}
			if _, err := sub.Recv(); err != io.EOF {
				t.Errorf("after the sync response: %v", err)
			}
		}},
		{"3.5.1.5.2", "an unsupported sample_interval is INVALID_ARGUMENT", func(t *testing.T, cl gpb.GNMIClient) {
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Mode: gpb.SubscriptionList_STREAM, Subscription: []*gpb.Subscription{{Path: gp(t, "/collector/state/counters"), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: 1}}}}})
			if _, err := sub.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("Subscribe: %v", err)
			}
		}},
		{"3.5.1.5.3", "POLL: each Poll gets updates for all paths, then a sync_response", func(t *testing.T, cl gpb.GNMIClient) {
			sub, err := cl.Subscribe(ctxFor(t))
			if err != nil {
				t.Fatal(err)
			}
			sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Mode: gpb.SubscriptionList_POLL, Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: gp(t, "/collector/state/counters/packets")}}}}})
			for i := 0; i < 2; i++ {
				if ns := gnmitest.UntilSync(t, sub); len(ns) != 1 {
					t.Errorf("poll %d: %v", i, ns)
				}
				sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}})
			}
		}},
	}
	cl, _ := startCollector(t)
	for _, r := range rows {
		t.Run(r.sec+" "+r.text, func(t *testing.T) { r.check(t, cl) })
	}
}

// intd's typed API refuses the collector's schema.
func TestAppliersNeedIntdSchema(t *testing.T) {
	_, srv := startCollector(t)
	if _, err := intdmodel.Running(srv, "col"); err == nil {
		t.Error("Running of a collector target")
	}
	if err := srv.AddStateTarget(context.Background(), "", gnmicollector.Source{C: collector.New(collector.Config{})}); err == nil {
		t.Error("a target without a name")
	}
}

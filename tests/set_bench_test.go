package tests

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
)

// watchlistValue is a JSON_IETF watchlist of n entries from sequence id
// from: each matches a distinct source /32 and reports drops.
func watchlistValue(from, n int) *gpb.TypedValue {
	var b strings.Builder
	b.WriteString(`{"entry": [`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		seq := from + i
		fmt.Fprintf(&b, `{"sequence-id": %d, "config": {"sequence-id": %d, "description": "entry %d"}, "match": {"config": {"source-prefix": "10.%d.%d.0/24"}}, "actions": {"config": {"flow-op": "NOP", "drop-report": true}}}`,
			seq, seq, seq, seq/256%256, seq%256)
	}
	b.WriteString("]}")
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(b.String())}}
}

// benchTarget serves one target over gRPC on 127.0.0.1 with the dtel
// orchestrator on backend b.
func benchTarget(b *testing.B, backend sai.Backend, name string) gpb.GNMIClient {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := intdmodel.New(server.WithLogger(log), server.WithStatePollInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	initial := &gen.Device{}
	initial.GetOrCreateInt().GetOrCreateNode().GetOrCreateConfig().NodeId = ygot.Uint32(1)
	orch := dtel.New(backend, dtel.WithLogger(log), dtel.WithDataplaneName(name))
	if err := srv.AddTarget(context.Background(), "dut", intdmodel.Target(orch), server.TargetOptions{Initial: initial, InvalidErr: dtel.ErrInvalid}); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); srv.Close() })
	return gpb.NewGNMIClient(conn)
}

// BenchmarkSetWatchlistMax replaces a watchlist of max-elements (1024)
// entries with another 1024 through gRPC, the server, the dtel
// orchestrator and a backend: the soft dataplane, and saitest (the
// orchestrator and server alone).
func BenchmarkSetWatchlistMax(b *testing.B) {
	backends := map[string]func(b *testing.B) sai.Backend{
		"soft": func(b *testing.B) sai.Backend {
			sw, err := soft.New(soft.Config{Name: "bench", Ports: []soft.PortConfig{{Name: "eth0"}, {Name: "eth1"}}})
			if err != nil {
				b.Fatal(err)
			}
			return sw
		},
		"saitest": func(*testing.B) sai.Backend { return saitest.New(saitest.WithCapabilities(sai.FullCapabilities())) },
	}
	for _, name := range []string{"soft", "saitest"} {
		b.Run(name, func(b *testing.B) {
			c := benchTarget(b, backends[name](b), name)
			path, _ := ygot.StringToStructuredPath("/int/watchlist/entries")
			vals := []*gpb.TypedValue{watchlistValue(1, 1024), watchlistValue(5001, 1024)}
			ctx := context.Background()
			if _, err := c.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: path, Val: vals[1]}}}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: path, Val: vals[i%2]}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package sonic_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/intdmodel"
	"github.com/intd-project/intd/server/sonic"
)

// rules is a configuration of n watchlist rules; edit changes rule 0's
// port.
func rules(n, port int) sonic.Config {
	cfg := sonic.Config{
		sonic.TableIntSession: {"MD": {"COLLECT_SWITCH_ID": "TRUE"}},
		sonic.TableACLRule:    {},
	}
	for i := 0; i < n; i++ {
		p := 5000
		if i == 0 {
			p = port
		}
		cfg[sonic.TableACLRule][fmt.Sprintf("DTEL_FLOW_WATCHLIST|R%d", i)] = sonic.Fields{"PRIORITY": fmt.Sprint(10000 - i),
			"ETHER_TYPE": "0x0800", "DST_IP": fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), "IP_PROTOCOL": "17",
			"L4_DST_PORT": fmt.Sprint(p), "FLOW_OP": "INT", "INT_SESSION": "MD"}
	}
	return cfg
}

func translated(t testing.TB, cfg sonic.Config) *gen.Device {
	t.Helper()
	res, err := sonic.Resolve(context.Background(), cfg, nil, sonic.TranslateOptions{NodeID: 1},
		func(context.Context, *gen.Device) error { return nil })
	if err != nil || res.Refused() != 0 {
		t.Fatalf("%v %d refused", err, res.Refused())
	}
	return res.Device
}

func ownedServer(t testing.TB) *server.Server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := intdmodel.New(server.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.AddTarget(context.Background(), "intd", intdmodel.Target(dtel.New(saitest.New(), dtel.WithLogger(quiet))),
		server.TargetOptions{Owner: "test", Initial: &gen.Device{}}); err != nil {
		t.Fatal(err)
	}
	return srv
}

func running(t testing.TB, srv *server.Server) string {
	t.Helper()
	r, err := srv.Get(context.Background(), &gpb.GetRequest{Prefix: &gpb.Path{Target: "intd"}, Type: gpb.GetRequest_CONFIG,
		Encoding: gpb.Encoding_JSON_IETF, Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(r.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal())
}

// A diff Set brings the server to the same configuration as a full
// replace, sending only what changed: one entry replaced for an edited
// rule, deletes for rules and sessions gone, nothing for no change.
func TestDiffRequest(t *testing.T) {
	a, b := translated(t, rules(50, 5000)), translated(t, rules(50, 6000))
	req, err := sonic.DiffRequest("intd", a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.GetReplace()) != 1 || len(req.GetDelete()) != 0 || !strings.Contains(req.Replace[0].GetPath().String(), "sequence-id") {
		t.Fatalf("edit of one rule: %v", req)
	}
	if req, _ := sonic.DiffRequest("intd", b, b); req != nil {
		t.Errorf("no change: %v", req)
	}
	c := translated(t, rules(10, 5000))
	req, err = sonic.DiffRequest("intd", b, c)
	if err != nil || len(req.GetDelete()) != 40 || len(req.GetReplace()) != 1 {
		t.Errorf("40 rules gone, rule 0 changed back: %d deletes, %d replaces, %v", len(req.GetDelete()), len(req.GetReplace()), err)
	}

	// Applied one after the other as diffs, the server ends where a
	// full replace of the last one puts it.
	srvDiff, srvFull := ownedServer(t), ownedServer(t)
	var prev *gen.Device
	for _, dev := range []*gen.Device{a, b, c, translated(t, sonic.Config{}), a} {
		req, err := sonic.DiffRequest("intd", prev, dev)
		if err != nil {
			t.Fatal(err)
		}
		if req != nil {
			if _, err := srvDiff.OwnerSet(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		prev = dev
		full, _ := sonic.SetRequest("intd", dev)
		if _, err := srvFull.OwnerSet(context.Background(), full); err != nil {
			t.Fatal(err)
		}
		if d, f := running(t, srvDiff), running(t, srvFull); d != f {
			t.Fatalf("diff and full replace differ:\n%s\n%s", d, f)
		}
	}
	if !strings.Contains(running(t, srvDiff), `"destination-port-min":5000`) {
		t.Error("the last configuration is not the first")
	}
}

// BenchmarkEdit1000 is the Set of one rule edit among 1000, as a full
// replace of /int and as a diff, through the server onto the orchestrator
// (in-memory dataplane).
func BenchmarkEdit1000(b *testing.B) {
	devs := []*gen.Device{translated(b, rules(1000, 6000)), translated(b, rules(1000, 6001))}
	for _, mode := range []string{"full", "diff"} {
		b.Run(mode, func(b *testing.B) {
			srv := ownedServer(b)
			first, _ := sonic.SetRequest("intd", devs[0])
			if _, err := srv.OwnerSet(context.Background(), first); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				prev, dev := devs[i%2], devs[(i+1)%2]
				var req *gpb.SetRequest
				if mode == "full" {
					req, _ = sonic.SetRequest("intd", dev)
				} else {
					req, _ = sonic.DiffRequest("intd", prev, dev)
				}
				if _, err := srv.OwnerSet(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

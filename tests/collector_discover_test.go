package tests

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// discoverNode is a startup configuration of a node with only a marking.
const discoverNode = `{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": %d}},
	"marking": {"config": %s}}}`

// TestCollectorDiscoversMarking starts two intd nodes serving gNMI over
// TLS, one marking INT by UDP port with GRE protocol type 0x88b6, the
// other by probe marker with GRE 0x88b7, and an intcollector that
// discovers their markings over gNMI (trusting their self-signed
// certificates): it then finds INT behind the probe marker and in GRE
// 0x88b6 (the first node's; the other's conflicting type is logged),
// which its default markings do not.
func TestCollectorDiscoversMarking(t *testing.T) {
	l := newLab(t)
	l.addNS("r1", "r2", "c")
	l.veth("r1", "p1", "r2", "p1")
	l.veth("r1", "m0", "c", "e1")
	l.veth("r2", "m0", "c", "e2")
	l.addr("r1", "m0", "10.0.91.1/24")
	l.addr("c", "e1", "10.0.91.2/24")
	l.addr("r2", "m0", "10.0.92.1/24")
	l.addr("c", "e2", "10.0.92.2/24")
	const probe = 0xa1b2c3d4e5f60718
	dir := t.TempDir()
	var bundle []byte
	for i, m := range []string{
		`{"l4-marking": "UDP_DESTINATION_PORT", "udp-port": 5555, "gre-protocol-type": 34998}`,
		fmt.Sprintf(`{"l4-marking": "PROBE_MARKER", "probe-marker": "%d", "gre-protocol-type": 34999}`, uint64(probe)),
	} {
		n := fmt.Sprintf("r%d", i+1)
		cfg := filepath.Join(dir, n+".json")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(discoverNode, i+1, m)), 0o600); err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(dir, n+"-state")
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		p := l.start(n, "intd", nil, "run", "--dataplane", "soft", "--interfaces", "p1", "--addr", fmt.Sprintf("10.0.9%d.1:9339", i+1),
			"--allow-unauthenticated", "--state-dir", state, "--save", "", "--target", n, "--startup-config", cfg)
		cert := filepath.Join(state, "gnmi-cert.pem")
		eventually(t, 20*time.Second, n+"'s TLS certificate", func() (bool, string) {
			select {
			case <-p.done:
				t.Fatalf("intd in %s exited\n%s", n, readLog(p))
			default:
			}
			b, err := os.ReadFile(cert)
			if err == nil && strings.Contains(string(b), "END CERTIFICATE") {
				bundle = append(bundle, b...)
				return true, ""
			}
			return false, fmt.Sprint(err)
		})
	}
	ca := filepath.Join(dir, "nodes.pem")
	if err := os.WriteFile(ca, bundle, 0o600); err != nil {
		t.Fatal(err)
	}

	// Frames with INT-MD in GRE of each protocol type and behind the
	// probe marker, each reported from its own flow (source port).
	in := make([]byte, wire.MDHeaderLen+4)
	_ = wire.MDHeader{Version: 2, HopML: 1, RemainingHops: 7, Instructions: spec.InstNodeID}.Put(in)
	binary.BigEndian.PutUint32(in[wire.MDHeaderLen:], 77)
	gre := func(proto uint16) []byte {
		g := make([]byte, 4+wire.ShimLen)
		_ = wire.PutGRE(g, proto)
		_ = wire.GREShim{Type: spec.TypeMD, Length: uint8(len(in) / 4), NextProto: wire.EtherTypeIPv4}.Put(g[4:])
		inner := wiretest.UDPFrame("192.0.2.1", "192.0.2.2", 7, 8, []byte("x"), false)
		return wiretest.IPFrame("10.1.0.1", "10.1.0.2", wire.ProtoGRE, 0, append(append(g, in...), inner[wire.EthernetLen:]...), false)
	}
	var marker [8]byte
	binary.BigEndian.PutUint64(marker[:], probe)
	shim := make([]byte, wire.ShimLen)
	_ = wire.Shim{Type: spec.TypeMD, Length: uint8(len(in) / 4)}.Put(shim)
	probed := wiretest.UDPFrame("10.1.0.1", "10.1.0.2", 1000, 2000, append(append(marker[:], shim...), in...), false)
	frames := map[uint32][]byte{1: gre(0x88b6), 2: gre(0x88b7), 3: probed, 4: gre(0x88b8)}
	report := func(node uint32) []byte {
		b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, NodeID: node})
		b, err := wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet}, &wire.ReportMetadata{}, nil, frames[node])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Which reports' inner packets had INT, by the report's node id,
	// once every report was decoded since reset.
	var mu sync.Mutex
	found := map[uint32]bool{}
	var tx *net.UDPConn
	l.in("c", func() (err error) {
		tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 32766})
		return err
	})
	defer tx.Close()
	decoded := func(t *testing.T) map[uint32]bool {
		mu.Lock()
		clear(found)
		mu.Unlock()
		eventually(t, 20*time.Second, "the reports decoded", func() (bool, string) {
			for n := range frames {
				tx.Write(report(n))
			}
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			return len(found) == len(frames), fmt.Sprint(found)
		})
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(found)
	}
	run := func(t *testing.T, args ...string) (map[uint32]bool, *proc) {
		p := l.start("c", "intcollector", func(s string) {
			var v struct{ Report collector.ReportJSON }
			if json.Unmarshal([]byte(s), &v) != nil || len(v.Report.Reports) == 0 || v.Report.Reports[0].Inner == nil {
				return
			}
			mu.Lock()
			found[v.Report.NodeID] = v.Report.Reports[0].Inner.INT != nil
			mu.Unlock()
		}, append([]string{"--listen", "127.0.0.1:32766", "--metrics", "", "--gnmi", "", "--json"}, args...)...)
		return decoded(t), p
	}

	t.Run("defaults", func(t *testing.T) {
		found, p := run(t)
		if found[1] || found[2] || found[3] || found[4] {
			t.Errorf("INT found with the default markings (GRE 0x88b6, 0x88b7, probe, GRE 0x88b8): %v", found)
		}
		stop(t, p)
	})
	t.Run("discovered", func(t *testing.T) {
		found, p := run(t, "--discover", "10.0.91.1:9339,10.0.92.1:9339", "--discover-tls-ca", ca, "--log-format", "json")
		if !found[1] || found[2] || !found[3] || found[4] {
			t.Errorf("INT found (GRE 0x88b6, 0x88b7, probe, GRE 0x88b8): %v, want true, false, true, false", found)
		}
		// r1 moves to GRE 0x88b8: the running collector follows.
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bundle)
		conn, err := grpc.NewClient("passthrough:///10.0.91.1:9339", grpc.WithContextDialer(l.dialer("c")),
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := gpb.NewGNMIClient(conn).Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{
			Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "marking"}, {Name: "config"}, {Name: "gre-protocol-type"}}},
			Val:  &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("35000")}}}}}); err != nil {
			t.Fatalf("gNMI Set on r1: %v", err)
		}
		eventually(t, 20*time.Second, "INT in GRE 0x88b8 after r1's change", func() (bool, string) {
			found := decoded(t)
			return found[4] && !found[1] && found[3], fmt.Sprint(found)
		})
		stop(t, p)
		log := readLog(p)
		for _, want := range []string{`"msg":"INT marking discovered","node":"10.0.91.1:9339","marking":"UDP_DESTINATION_PORT 5555`,
			`"msg":"INT marking discovered","node":"10.0.92.1:9339","marking":"PROBE_MARKER 0xa1b2c3d4e5f60718`,
			`"msg":"INT markings of the nodes differ: decoding with the first node's","marking":"--int-gre-proto","node":"10.0.91.1:9339","value":"34998","other_node":"10.0.92.1:9339","other_value":"34999"`,
			`"msg":"INT marking of a node changed: decoding with it","node":"10.0.91.1:9339","marking":"UDP_DESTINATION_PORT 5555, gre-protocol-type 0x88b8`} {
			if !strings.Contains(log, want) {
				t.Errorf("collector log lacks %s:\n%s", want, log)
			}
		}
	})
}

// stop ends p with SIGTERM and waits for it.
func stop(t *testing.T, p *proc) {
	p.cmd.Process.Signal(os.Interrupt)
	exited(t, p, 10*time.Second)
}

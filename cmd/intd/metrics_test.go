package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	dto "github.com/prometheus/client_model/go"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/internal/promtest"
)

// expectedName applies the documented naming rule to a state leaf path:
// "intd_", the elements without the top container, 'state', 'config',
// 'counters' and list-wrapping containers, "_total" for counters; keys
// as labels ("name" takes the list's name); the E and M bit counters
// spelled out. It is written from the rule, not shared with the
// exporter, so that the two check each other.
func expectedName(p *gpb.Path, gauge bool) (string, map[string]string) {
	var parts []string
	labels := map[string]string{}
	el := p.GetElem()
	for i, e := range el {
		n := e.GetName()
		wrapper := i+1 < len(el) && len(el[i+1].GetKey()) > 0
		if i == 0 || n == "state" || n == "config" || n == "counters" || wrapper {
			continue
		}
		switch n {
		case "e-bit-set":
			n = "hop-count-exceeded-bit-set"
		case "m-bit-set":
			n = "mtu-exceeded-bit-set"
		}
		parts = append(parts, strings.ReplaceAll(n, "-", "_"))
		for k, v := range e.GetKey() {
			if k == "name" {
				k = n
			}
			labels[strings.ReplaceAll(k, "-", "_")] = v
		}
	}
	name := "intd_" + strings.Join(parts, "_")
	if !gauge {
		name += "_total"
	}
	return name, labels
}

// TestMetricsMatchGet runs the in-process lab with traffic, then reads
// every switch's counters both from /metrics (parsed with expfmt) and
// with a gNMI Get over real gRPC, from the same published state: every
// counter leaf of the Get is a sample with the same value, and there are
// no others. promtool's lint passes on the scrape.
func TestMetricsMatchGet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	col, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// No state poll during the test: Get and the scrape read the state
	// RefreshState publishes.
	o := &labOptions{Addr: "127.0.0.1:0", Collector: col.LocalAddr().String(), Rate: 4000, Burst: 300, StateInterval: time.Hour}
	li, err := startLab(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- li.run(runCtx, io.Discard, 0) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("lab run: %v", err)
		}
	}()
	m, err := serveMetrics("127.0.0.1:0", li.srv, log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	time.Sleep(500 * time.Millisecond) // traffic, bursts beyond s2's queue: drops and queue reports
	li.srv.RefreshState(ctx)

	resp, err := http.Get("http://" + m.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fams := promtest.Parse(t, text)
	// The samples by target, as "name{k=v,...}" -> value.
	samples := map[string]map[string]float64{}
	for name, mf := range fams {
		if !strings.HasPrefix(name, "intd_") || name == "intd_build_info" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			target := ""
			for _, l := range m.Label {
				if l.GetName() == "target" {
					target = l.GetValue()
				} else {
					labels[l.GetName()] = l.GetValue()
				}
			}
			if samples[target] == nil {
				samples[target] = map[string]float64{}
			}
			v := m.GetCounter().GetValue()
			if mf.GetType() == dto.MetricType_GAUGE {
				v = m.GetGauge().GetValue()
			}
			samples[target][key(name, labels)] = v
		}
	}

	conn, err := grpc.NewClient(li.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)
	var nonzero []string
	for _, target := range []string{"s1", "s2", "s3"} {
		get, err := c.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: target}, Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "int"}}}},
			Type: gpb.GetRequest_STATE, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			t.Fatalf("Get %s: %v", target, err)
		}
		// Drop reasons are labelled by their names.
		reasonName := map[string]string{}
		var leaves []*gpb.Update
		for _, n := range get.GetNotification() {
			for _, u := range n.GetUpdate() {
				el := u.GetPath().GetElem()
				if len(el) > 4 && el[3].GetName() == "drop" && el[len(el)-1].GetName() == "name" {
					reasonName[el[3].GetKey()["reason"]] = u.GetVal().GetStringVal()
				}
				leaves = append(leaves, u)
			}
		}
		counters := 0
		for _, u := range leaves {
			el := u.GetPath().GetElem()
			last := el[len(el)-1].GetName()
			inCounters := len(el) > 1 && el[len(el)-2].GetName() == "counters"
			dropPackets := len(el) > 4 && el[3].GetName() == "drop" && last == "packets"
			if !inCounters && !dropPackets {
				continue
			}
			counters++
			name, labels := expectedName(u.GetPath(), last == "last-sequence-number")
			if r, ok := labels["reason"]; ok {
				labels["reason"] = reasonName[r]
			}
			ps, _ := ygot.PathToString(u.GetPath())
			got, ok := samples[target][key(name, labels)]
			if !ok {
				t.Errorf("%s %s: no sample %s", target, ps, key(name, labels))
				continue
			}
			want := float64(u.GetVal().GetUintVal())
			if got != want {
				t.Errorf("%s %s = %v over gNMI, %v in /metrics", target, ps, want, got)
			}
			if want != 0 {
				nonzero = append(nonzero, target+" "+key(name, labels))
			}
		}
		if counters < 20 || len(samples[target]) != counters {
			t.Errorf("%s: %d counters over gNMI, %d samples", target, counters, len(samples[target]))
		}
	}
	sort.Strings(nonzero)
	t.Logf("%d non-zero counters, e.g. %v", len(nonzero), nonzero[:min(8, len(nonzero))])
	for _, want := range []string{`s2 intd_interface_in_packets_total{interface=p1}`, `s2 intd_node_drop_packets_total{reason=TRAFFIC_MANAGER}`,
		`s2 intd_queue_report_reports_total{interface=p2,queue_id=0}`, `s1 intd_report_session_packets_total{report_session=collector}`} {
		if !contains(nonzero, want) {
			t.Errorf("no traffic counted in %s", want)
		}
	}
	for _, name := range []string{"intd_build_info", "process_cpu_seconds_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	promtest.Check(t, text)
}

func key(name string, labels map[string]string) string {
	ks := make([]string, 0, len(labels))
	for k, v := range labels {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return name + "{" + strings.Join(ks, ",") + "}"
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestRunMetrics: `intd run --metrics ADDR` (the real binary, soft
// dataplane, in a namespace of its own) serves its gNMI counters, the
// build, process and Go metrics on /metrics, lint clean, without a target
// label; a port already taken stops it with an error naming the flag.
func TestRunMetrics(t *testing.T) {
	needRoot(t)
	ns := intdNS(t, "metrics")
	n := startIntd(t, ns, "--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", t.TempDir(),
		"--log-format", "json", "--state-interval", "100ms", "--metrics", "127.0.0.1:23268")
	n.waitLog(t, "serving Prometheus metrics", 20*time.Second)
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, a string) (conn net.Conn, err error) {
		err = afpacket.InNamespace(h, func() error {
			conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", a)
			return err
		})
		return conn, err
	}}}
	var fams map[string]*dto.MetricFamily
	var text []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Get("http://127.0.0.1:23268/metrics")
		if err == nil {
			text, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			fams = promtest.Parse(t, text)
			if fams["intd_interface_in_packets_total"] != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no interface counters on /metrics: %v\n%s", err, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ifaces := map[string]bool{}
	for _, m := range fams["intd_interface_in_packets_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "target" {
				t.Errorf("a target label with one target: %v", m)
			}
			if l.GetName() == "interface" {
				ifaces[l.GetValue()] = true
			}
		}
	}
	if !ifaces["d0"] || !ifaces["d1"] {
		t.Errorf("interfaces on /metrics: %v, want d0 and d1", ifaces)
	}
	bi := fams["intd_build_info"]
	if bi == nil || len(bi.Metric) != 1 || bi.Metric[0].GetGauge().GetValue() != 1 {
		t.Fatalf("intd_build_info: %v", bi)
	}
	for _, l := range bi.Metric[0].Label {
		if l.GetValue() == "" {
			t.Errorf("intd_build_info label %s empty", l.GetName())
		}
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("no Go or process metrics")
	}
	promtest.Check(t, text)

	// The port is taken: intd stops, naming the flag.
	ns2 := intdNS(t, "metrics-taken")
	h2, err := netns.GetFromName(ns2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	var taken net.Listener
	if err := afpacket.InNamespace(h2, func() (err error) { taken, err = net.Listen("tcp", "127.0.0.1:23268"); return err }); err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	n2 := startIntd(t, ns2, "--dataplane", "soft", "--interfaces", "d0,d1", "--state-dir", t.TempDir(),
		"--log-format", "json", "--metrics", "127.0.0.1:23268")
	if !n2.exited(20 * time.Second) {
		t.Fatal("intd kept running with its --metrics address taken")
	}
	if !strings.Contains(n2.out.String(), "--metrics") {
		t.Errorf("error does not name --metrics:\n%s", n2.out)
	}
}

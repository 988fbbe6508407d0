package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/internal/promtest"
)

// fabric is h1 - s1 - s2 - s3 - h2, every switch also on a management
// bridge in namespace c, where the collector runs:
//
//	h1 eth0 10.0.1.1/24 ─ p1 10.0.1.254  s1  p2 10.0.12.1 ─ p1 10.0.12.2  s2  p2 10.0.23.2 ─
//	  ─ p1 10.0.23.3  s3  p2 10.0.2.254 ─ eth0 10.0.2.1/24 h2
//	s1..s3 m0 10.100.0.{1,2,3}/24 ─ br0 10.100.0.100/24 in c (collector)
//
// The switches have kernel routes to the host subnets (what intd's soft
// dataplane mirrors) and forwarding on, as routers do: the soft dataplane
// keeps the kernel from forwarding a second copy.
type fabric struct {
	*lab
	sw      map[string]gpb.GNMIClient
	reports *reportLog
	metrics *http.Client
	// nodeArgs are extra `intd run` flags per switch.
	nodeArgs map[string][]string
}

var switches = []string{"s1", "s2", "s3"}

func buildFabric(t *testing.T, intd bool, shapeMbit int) *fabric {
	l := newLab(t)
	l.addNS("h1", "h2", "s1", "s2", "s3", "c")
	l.veth("h1", "eth0", "s1", "p1")
	l.veth("s1", "p2", "s2", "p1")
	l.veth("s2", "p2", "s3", "p1")
	l.veth("s3", "p2", "h2", "eth0")
	l.addr("h1", "eth0", "10.0.1.1/24")
	l.addr("s1", "p1", "10.0.1.254/24")
	l.addr("s1", "p2", "10.0.12.1/24")
	l.addr("s2", "p1", "10.0.12.2/24")
	l.addr("s2", "p2", "10.0.23.2/24")
	l.addr("s3", "p1", "10.0.23.3/24")
	l.addr("s3", "p2", "10.0.2.254/24")
	l.addr("h2", "eth0", "10.0.2.1/24")
	l.ip("-n", l.ns("h1"), "route", "add", "default", "via", "10.0.1.254")
	// h2 advertises an MSS that leaves room for INT-MD with three hops
	// (108 bytes): full-size TCP segments would not fit the MTU with INT
	// and the source would not initiate it.
	l.ip("-n", l.ns("h2"), "route", "add", "default", "via", "10.0.2.254", "advmss", "1340")
	l.ip("-n", l.ns("s1"), "route", "add", "10.0.2.0/24", "via", "10.0.12.2")
	l.ip("-n", l.ns("s2"), "route", "add", "10.0.1.0/24", "via", "10.0.12.1")
	l.ip("-n", l.ns("s2"), "route", "add", "10.0.2.0/24", "via", "10.0.23.3")
	l.ip("-n", l.ns("s3"), "route", "add", "10.0.1.0/24", "via", "10.0.23.2")
	l.ip("-n", l.ns("c"), "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.ns("c"), "link", "set", "br0", "up")
	l.addr("c", "br0", "10.100.0.100/24")
	for i, s := range switches {
		l.veth(s, "m0", "c", "m-"+s)
		l.ip("-n", l.ns("c"), "link", "set", "m-"+s, "master", "br0")
		l.addr(s, "m0", fmt.Sprintf("10.100.0.%d/24", i+1))
		l.sh(s, "echo 1 > /proc/sys/net/ipv4/ip_forward")
	}
	// The hosts keep their default offloads (TSO, GSO, checksum offload):
	// h1's veth hands s1 64 KB TCP super-packets with partial checksums,
	// which the switch's AF_PACKET port segments (afpacket.Segment) before
	// INT is added, as a switch next to Linux hosts must.
	if shapeMbit > 0 {
		// Shape s2 -> s3; intd's soft port takes the tbf rate and limit
		// for its own egress queue.
		l.ip("netns", "exec", l.ns("s2"), "tc", "qdisc", "add", "dev", "p2", "root", "tbf",
			"rate", fmt.Sprintf("%dmbit", shapeMbit), "burst", "32kb", "limit", "60kb")
	}
	f := &fabric{lab: l, sw: map[string]gpb.GNMIClient{}, reports: &reportLog{}}
	if !intd {
		return f
	}
	f.startNodes(t, "soft")
	return f
}

// intConfig is switch n's /int configuration (JSON_IETF): INT source with
// a watchlist on 10.0.2.0/24 at s1 (when watch), transit at s2 with a
// queue report on its shaped port, sink port towards h2 at s3, and a
// report session to the collector everywhere.
func intConfig(n int, watch bool) []byte {
	s := switches[n-1]
	coll := map[string]any{"address": "10.100.0.100", "port": 32766}
	cfg := map[string]any{
		"node": map[string]any{"config": map[string]any{"enabled": true, "node-id": n, "int-endpoint": s != "s2",
			"int-transit": true, "drop-report": true, "queue-report": true}},
		"marking": map[string]any{"config": map[string]any{"l4-marking": "DSCP", "dscp-value": 32, "dscp-mask": 32}},
		// Software forwarding jitters by microseconds: a flow is
		// reported again when a hop's latency moves by 100 µs, not by the
		// default 256 ns (which reports about every other packet).
		"flow-report-filter": map[string]any{"config": map[string]any{"hop-latency-threshold": 100_000}},
		"report-sessions": map[string]any{"report-session": []any{map[string]any{
			"name": "collector",
			"config": map[string]any{"name": "collector", "source-address": fmt.Sprintf("10.100.0.%d", n),
				"report-format": "TELEMETRY_REPORT_V2_0", "rate-limit": 100000, "truncate-size": 256},
			"collectors": map[string]any{"collector": []any{map[string]any{"address": coll["address"], "port": coll["port"], "config": coll}}},
		}}},
	}
	var events []any
	for _, e := range []string{"FLOW_STATE", "DROP_REPORT", "QUEUE_REPORT_THRESHOLD_BREACH", "QUEUE_REPORT_TAIL_DROP"} {
		events = append(events, map[string]any{"type": e, "config": map[string]any{"type": e, "report-session": "collector"}})
	}
	cfg["events"] = map[string]any{"event": events}
	switch s {
	case "s1":
		cfg["int-sessions"] = map[string]any{"int-session": []any{map[string]any{"name": "md", "config": map[string]any{
			"name": "md", "mode": "INT_MD", "remaining-hop-count": 8, "instructions": []any{
				"intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
				"intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
				"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY",
				"intd-int-metadata-semantics:METADATA_FIELD_QUEUE_OCCUPANCY",
				"intd-int-metadata-semantics:METADATA_FIELD_INGRESS_TIMESTAMP",
				"intd-int-metadata-semantics:METADATA_FIELD_EGRESS_TIMESTAMP"}}}}}
		if watch {
			entries := []any{map[string]any{"sequence-id": 10,
				"config":  map[string]any{"sequence-id": 10, "description": "h1 subnet to h2 subnet"},
				"match":   map[string]any{"config": map[string]any{"destination-prefix": "10.0.2.0/24"}},
				"actions": map[string]any{"config": map[string]any{"flow-op": "INT", "int-session": "md", "drop-report": true, "tail-drop-report": true, "sample-percent": 100}}}}
			cfg["watchlist"] = map[string]any{"entries": map[string]any{"entry": entries}}
		}
	case "s2":
		cfg["queue-reports"] = map[string]any{"queue-report": []any{map[string]any{"interface": "p2", "queue-id": 0,
			"config": map[string]any{"interface": "p2", "queue-id": 0, "latency-threshold": 1_000_000, "tail-drop": true}}}}
	case "s3":
		cfg["interfaces"] = map[string]any{"interface": []any{map[string]any{"name": "p2", "config": map[string]any{"name": "p2", "int-sink": true}}}}
	}
	b, _ := json.Marshal(cfg)
	return b
}

// tcpTransfer sends size bytes over TCP from h1 (source port srcPort) to
// h2 (port dstPort) and fails unless they arrive byte for byte.
func (f *fabric) tcpTransfer(t *testing.T, srcPort, dstPort, size int) {
	t.Helper()
	var ln net.Listener
	f.in("h2", func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf("10.0.2.1:%d", dstPort)); return err })
	defer ln.Close()
	data := payload(0, size)
	got := receiveAll(ln, 30*time.Second)
	var c net.Conn
	f.in("h1", func() (err error) {
		c, err = (&net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(10, 0, 1, 1), Port: srcPort}}).Dial("tcp4", fmt.Sprintf("10.0.2.1:%d", dstPort))
		return err
	})
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("h2 received %d bytes, not the %d h1 sent", len(b), len(data))
	}
}

// waitPath waits for the collector to know the 3-hop INT path of the TCP
// flow from h1:srcPort to h2:dstPort.
func (f *fabric) waitPath(t *testing.T, srcPort, dstPort int) {
	t.Helper()
	eventually(t, 10*time.Second, "TCP flow's 3-hop path at the collector", func() (bool, string) {
		_, ok := promtest.Value(f.scrape(t), "intcollector_flow_hop_max_latency_seconds", flowLabels("tcp", srcPort, dstPort, "hop", "2", "node_id", "3"))
		return ok, ""
	})
}

// configure replaces /int on every switch through gNMI Set.
func (f *fabric) configure(t *testing.T, watch bool) {
	t.Helper()
	f.configureWith(t, func(n int) []byte { return intConfig(n, watch) })
}

// configureWith replaces /int on every switch n (1-3) with cfg(n)
// through gNMI Set.
func (f *fabric) configureWith(t *testing.T, cfg func(n int) []byte) {
	t.Helper()
	for i, s := range switches {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := f.sw[s].Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: s}, Replace: []*gpb.Update{{
			Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}}},
			Val:  &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: cfg(i + 1)}}}}})
		cancel()
		if err != nil {
			t.Fatalf("gNMI Set on %s: %v", s, err)
		}
	}
}

// reportLog keeps the collector's --json lines.
type reportLog struct {
	mu      sync.Mutex
	reports []collector.ReportJSON
}

func (r *reportLog) line(s string) {
	var v struct{ Report collector.ReportJSON }
	if json.Unmarshal([]byte(s), &v) != nil {
		return
	}
	r.mu.Lock()
	r.reports = append(r.reports, v.Report)
	r.mu.Unlock()
}

// summary counts reports by node and flags.
func (r *reportLog) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := map[string]int{}
	for i := range r.reports {
		for _, x := range r.reports[i].Reports {
			hops := -1
			if x.Inner != nil && x.Inner.INT != nil {
				hops = len(x.Inner.INT.Hops)
			}
			c[fmt.Sprintf("node %d d=%v q=%v f=%v hops=%d", r.reports[i].NodeID, x.D, x.Q, x.F, hops)]++
		}
	}
	return fmt.Sprint(c)
}

// count counts individual reports from node matching fn.
func (r *reportLog) count(node uint32, fn func(*collector.IndividualJSON) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range r.reports {
		if r.reports[i].NodeID != node {
			continue
		}
		for j := range r.reports[i].Reports {
			if fn(&r.reports[i].Reports[j]) {
				n++
			}
		}
	}
	return n
}

func (f *fabric) scrape(t *testing.T) string { return scrapeCollector(f.metrics) }

// pathHops waits until the collector exports a max latency for each hop
// of the 3-hop path of the UDP flow from port 40001 to 5001 (poke, when
// set, runs before each scrape, e.g. to send a packet) and checks that
// each lies in (0, 1] s. last gets each scrape, for a failure's log.
func (f *fabric) pathHops(t *testing.T, poke func(), last *string) {
	t.Helper()
	var hops [3]map[string]string
	for h := range hops {
		hops[h] = flowLabels("udp", 40001, 5001, "hop", strconv.Itoa(h), "node_id", strconv.Itoa(h+1))
	}
	eventually(t, 10*time.Second, "3-hop path at the collector", func() (bool, string) {
		if poke != nil {
			poke()
		}
		*last = f.scrape(t)
		for h := range hops {
			if _, ok := promtest.Value(*last, "intcollector_flow_hop_max_latency_seconds", hops[h]); !ok {
				return false, fmt.Sprintf("hop %d (node %d) missing", h, h+1)
			}
		}
		return true, ""
	})
	for h := range hops {
		lat, _ := promtest.Value(*last, "intcollector_flow_hop_max_latency_seconds", hops[h])
		t.Logf("hop %d node %d: max latency %g s", h, h+1, lat)
		if lat <= 0 || lat > 1 {
			t.Errorf("hop %d: max latency %g s", h, lat)
		}
	}
}

// udpSink is a UDP server in h2 keeping every datagram by sequence number.
type udpSink struct {
	mu   sync.Mutex
	got  map[uint64][]byte
	conn *net.UDPConn
}

func (f *fabric) udpSink(t *testing.T) *udpSink {
	u := &udpSink{got: map[uint64][]byte{}}
	f.in("h2", func() (err error) {
		u.conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: 5001})
		return err
	})
	u.conn.SetReadBuffer(8 << 20)
	t.Cleanup(func() { u.conn.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := u.conn.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				u.mu.Lock()
				u.got[binary.BigEndian.Uint64(buf)] = bytes.Clone(buf[:n])
				u.mu.Unlock()
			}
		}
	}()
	return u
}

func (u *udpSink) has(seq uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.got[seq]
	return ok
}

// udpSender sends from h1 10.0.1.1:srcPort to h2:5001.
func (f *fabric) udpSender(t *testing.T, srcPort int) *net.UDPConn {
	var c *net.UDPConn
	f.in("h1", func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 1, 1), Port: srcPort}, &net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: 5001})
		return err
	})
	c.SetWriteBuffer(8 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

func payload(seq uint64, size int) []byte {
	p := make([]byte, size)
	rand.Read(p)
	binary.BigEndian.PutUint64(p, seq)
	return p
}

func csum(b []byte, s uint32) uint16 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// subscribeCounter streams SAMPLE updates of the node's in-packets counter.
func (f *fabric) subscribeCounter(t *testing.T, ctx context.Context, s string) func() []uint64 {
	var mu sync.Mutex
	var vals []uint64
	stream, err := f.sw[s].Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Prefix: &gpb.Path{Target: s}, Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(200 * time.Millisecond),
			Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "node"}, {Name: "state"}, {Name: "counters"}, {Name: "in-packets"}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			for _, u := range r.GetUpdate().GetUpdate() {
				mu.Lock()
				vals = append(vals, u.GetVal().GetUintVal())
				mu.Unlock()
			}
		}
	}()
	return func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), vals...)
	}
}

// TestSoftEndToEnd runs three `intd run --dataplane soft` switches and an
// intcollector in network namespaces, configures them only over gNMI and
// sends real traffic from h1 to h2.
func TestSoftEndToEnd(t *testing.T) {
	start := time.Now()
	f := buildFabric(t, true, 20)
	t.Logf("fabric up in %v", time.Since(start))
	f.configure(t, true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters, sink, tx := f.warmUp(t, ctx, 20*time.Second)

	t.Run("exact bytes", func(t *testing.T) {
		// Capture at h2 what actually arrives on the wire.
		var capt *afpacket.Port
		f.in("h2", func() (err error) { capt, err = afpacket.Open("eth0", afpacket.PortConfig{}); return err })
		defer capt.Close()
		const n = 300
		sent := map[uint64][]byte{}
		for i := uint64(1); i <= n; i++ {
			p := payload(i, 16+int(i*37%1200))
			sent[i] = p
			if _, err := tx.Write(p); err != nil {
				t.Fatal(err)
			}
			if i%4 == 0 {
				time.Sleep(2 * time.Millisecond) // about 10 Mbit/s, half the shaped link
			}
		}
		var frames [][]byte
		eventually(t, 10*time.Second, "all datagrams at h2", func() (bool, string) {
			for {
				k, err := capt.Read()
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < k; i++ {
					frames = append(frames, bytes.Clone(capt.Frame(i)))
				}
				if k == 0 {
					break
				}
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			got := 0
			for i := uint64(1); i <= n; i++ {
				if _, ok := sink.got[i]; ok {
					got++
				}
			}
			return got == n, fmt.Sprintf("%d of %d received", got, n)
		})
		sink.mu.Lock()
		for i, p := range sent {
			if !bytes.Equal(sink.got[i], p) {
				t.Errorf("datagram %d differs: sent %d bytes, received %d", i, len(p), len(sink.got[i]))
			}
		}
		sink.mu.Unlock()
		// The wire: valid IPv4 and UDP checksums, DSCP restored, TTL
		// decremented by three routers, exactly the payload sent.
		checked := 0
		for _, fr := range frames {
			if len(fr) < 42 || binary.BigEndian.Uint16(fr[12:]) != 0x0800 || fr[23] != 17 {
				continue
			}
			ip := fr[14:]
			ihl := int(ip[0]&15) * 4
			udp := ip[ihl:]
			if binary.BigEndian.Uint16(udp[2:]) != 5001 || len(udp) < 16 {
				continue
			}
			seq := binary.BigEndian.Uint64(udp[8:])
			p, ok := sent[seq]
			if !ok {
				continue
			}
			checked++
			tot := int(binary.BigEndian.Uint16(ip[2:]))
			if csum(ip[:ihl], 0) != 0xffff {
				t.Errorf("seq %d: bad IPv4 header checksum", seq)
			}
			if ip[1]>>2 != 0 || ip[8] != 61 || tot != ihl+8+len(p) || int(binary.BigEndian.Uint16(udp[4:])) != 8+len(p) {
				t.Errorf("seq %d: dscp %d ttl %d total length %d udp length %d, payload %d", seq, ip[1]>>2, ip[8], tot, binary.BigEndian.Uint16(udp[4:]), len(p))
				continue
			}
			ph := append(append([]byte{}, ip[12:20]...), 0, 17, udp[4], udp[5])
			if binary.BigEndian.Uint16(udp[6:]) == 0 || csum(udp[:8+len(p)], uint32(csum(ph, 0))) != 0xffff {
				t.Errorf("seq %d: bad UDP checksum %#x", seq, binary.BigEndian.Uint16(udp[6:]))
			}
			if !bytes.Equal(udp[8:8+len(p)], p) {
				t.Errorf("seq %d: payload on the wire differs", seq)
			}
		}
		if checked < n {
			t.Errorf("captured %d of %d datagrams at h2", checked, n)
		}
		t.Logf("%d datagrams received intact, %d checked on the wire; capture stats %+v", n, checked, capt.Stats())
	})

	t.Run("path", func(t *testing.T) {
		var m string
		defer func() {
			if t.Failed() {
				t.Logf("reports: %s\n%s", f.reports.summary(), regexp.MustCompile(`(?m)^intcollector_flow_hop.*$`).FindAllString(m, -1))
			}
		}()
		f.pathHops(t, nil, &m)
		if n := f.reports.count(3, func(r *collector.IndividualJSON) bool {
			return r.F && !r.D && r.Inner != nil && r.Inner.INT != nil && len(r.Inner.INT.Hops) == 3
		}); n == 0 {
			t.Errorf("no sink flow report from node 3 with the 3 hops of s1, s2 and s3")
		}
	})

	t.Run("tcp", func(t *testing.T) {
		st := time.Now()
		f.tcpTransfer(t, 40003, 5002, 4<<20)
		t.Logf("4 MiB over TCP through the shaped fabric in %v", time.Since(st))
		f.waitPath(t, 40003, 5002)
	})

	t.Run("queue reports", func(t *testing.T) {
		// 2.4 MB as fast as h1 can send into a 20 Mbit/s link.
		flood := f.udpSender(t, 40002)
		for i := 0; i < 2000; i++ {
			flood.Write(payload(1<<40+uint64(i), 1200))
		}
		eventually(t, 15*time.Second, "queue reports from node 2", func() (bool, string) {
			n := f.reports.count(2, func(r *collector.IndividualJSON) bool { return r.Q })
			return n > 0, fmt.Sprintf("%d", n)
		})
		t.Logf("queue (Q) reports from node 2: %d", f.reports.count(2, func(r *collector.IndividualJSON) bool { return r.Q }))
	})

	f.checkDropsAndCounters(t, counters, sink, tx, 15*time.Second)
	f.checkSampling(t, sink)
	t.Logf("total %v", time.Since(start))
}

// warmUp subscribes to every switch's in-packets counter, opens a UDP sink
// at h2 and a sender at h1, and waits for a first datagram to cross the
// fabric (the switches resolve their next hops on demand, s3 learning h2
// only when it first sends to it); then h1 pings h2.
func (f *fabric) warmUp(t *testing.T, ctx context.Context, wait time.Duration) (map[string]func() []uint64, *udpSink, *net.UDPConn) {
	t.Helper()
	counters := map[string]func() []uint64{}
	for _, s := range switches {
		counters[s] = f.subscribeCounter(t, ctx, s)
	}
	sink := f.udpSink(t)
	tx := f.udpSender(t, 40001)
	const warm = 1 << 62
	eventually(t, wait, "first datagram h1 -> h2", func() (bool, string) {
		tx.Write(payload(warm, 64))
		time.Sleep(20 * time.Millisecond)
		return sink.has(warm), ""
	})
	if _, err := exec.LookPath("ping"); err == nil {
		out, err := exec.Command("ip", "netns", "exec", f.ns("h1"), "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.2.1").CombinedOutput()
		if err != nil {
			t.Errorf("ping h1 -> h2: %v\n%s", err, out)
		}
	} else {
		t.Log("ping not installed: ICMP check skipped")
	}
	return counters, sink, tx
}

// startNodes starts the collector in c and `intd run --dataplane dp` on
// every switch, and waits for each switch's gNMI server.
func (f *fabric) startNodes(t *testing.T, dp string) {
	t.Helper()
	l := f.lab
	l.start("c", "intcollector", f.reports.line, "--listen", ":32766", "--metrics", "127.0.0.1:23266",
		"--gnmi", "127.0.0.1:23267", "--state-dir", t.TempDir(), "--flow-metrics", "100", "--json", "--int-dscp", "32", "--int-dscp-mask", "32")
	f.metrics = l.httpClient("c")
	for i, s := range switches {
		l.start(s, "intd", nil, append([]string{"run", "--dataplane", dp, "--interfaces", "p1,p2", "--insecure",
			"--addr", "127.0.0.1:9339", "--save", "", "--target", s, "--node-id", strconv.Itoa(i + 1),
			"--state-interval", "200ms", "--metrics", "127.0.0.1:23268"}, f.nodeArgs[s]...)...)
		conn, err := grpc.NewClient("passthrough:///127.0.0.1:9339", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(l.dialer(s)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		f.sw[s] = gpb.NewGNMIClient(conn)
	}
	for _, s := range switches {
		eventually(t, 30*time.Second, s+" gNMI up", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := f.sw[s].Capabilities(ctx, &gpb.CapabilityRequest{})
			return err == nil, fmt.Sprint(err)
		})
	}
}

// checkDropsAndCounters removes s2's route to h2 and expects drop reports
// with reason 29 from node 2 (in the collector's reports and metrics),
// restores it and expects traffic again, then checks that every switch's
// in-packets counter moves over gNMI Subscribe.
func (f *fabric) checkDropsAndCounters(t *testing.T, counters map[string]func() []uint64, sink *udpSink, tx *net.UDPConn, wait time.Duration) {
	t.Run("drop reports", func(t *testing.T) {
		f.ip("-n", f.ns("s2"), "route", "del", "10.0.2.0/24")
		defer f.ip("-n", f.ns("s2"), "route", "add", "10.0.2.0/24", "via", "10.0.23.3")
		drop29 := func(r *collector.IndividualJSON) bool { return r.D && r.DropReason != nil && *r.DropReason == 29 }
		eventually(t, wait, "drop report reason 29 from node 2", func() (bool, string) {
			tx.Write(payload(1<<50, 100))
			return f.reports.count(2, drop29) > 0, ""
		})
		if v, _ := promtest.Value(f.scrape(t), "intcollector_drop_reports_total", map[string]string{"node_id": "2", "reason": "ROUTING_MISS"}); v == 0 {
			t.Errorf("collector metrics lack node 2's routing-miss (29) drops")
		}
	})
	t.Run("route restored", func(t *testing.T) {
		const seq = 1<<50 + 1
		eventually(t, wait, "traffic after the route is back", func() (bool, string) {
			tx.Write(payload(seq, 100))
			time.Sleep(20 * time.Millisecond)
			return sink.has(seq), ""
		})
	})
	t.Run("node metrics", func(t *testing.T) {
		// Each switch's intd serves its gNMI counters on /metrics.
		for _, s := range switches {
			c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return f.dialer(s)(ctx, addr)
			}}, Timeout: 5 * time.Second}
			var text string
			eventually(t, 5*time.Second, s+" /metrics counting packets", func() (bool, string) {
				tx.Write(payload(1<<48, 64))
				resp, err := c.Get("http://127.0.0.1:23268/metrics")
				if err != nil {
					return false, err.Error()
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				text = string(b)
				in, _ := promtest.Value(text, "intd_interface_in_packets_total", map[string]string{"interface": "p1"})
				node, _ := promtest.Value(text, "intd_node_in_packets_total", nil)
				return in > 0 && node >= in, fmt.Sprintf("p1 %v, node %v", in, node)
			})
			t.Run(s, func(t *testing.T) { promtest.Check(t, []byte(text)) })
		}
	})
	t.Run("subscribe counters", func(t *testing.T) {
		for _, s := range switches {
			eventually(t, 5*time.Second, s+" in-packets moving", func() (bool, string) {
				tx.Write(payload(1<<49, 64))
				v := counters[s]()
				moved := 0
				for i := 1; i < len(v); i++ {
					if v[i] > v[i-1] {
						moved++
					}
				}
				return moved >= 2, fmt.Sprint(v)
			})
		}
	})
}

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/wire"
)

// routerLab6 is routerLab over IPv6:
//
//	h1 eth0 2001:db8:1::1/64 - p1 2001:db8:1::fe  r  p2 2001:db8:2::fe - eth0 2001:db8:2::1/64 h2
//	r m0 2001:db8:9::1/64 - eth0 2001:db8:9::2/64 c
func routerLab6(t *testing.T) *lab {
	l := routerLinks(t)
	for _, n := range []string{"h1", "r", "h2", "c"} {
		l.sh(n, "echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6")
	}
	for _, a := range [][3]string{
		{"h1", "eth0", "2001:db8:1::1/64"}, {"r", "p1", "2001:db8:1::fe/64"}, {"r", "p2", "2001:db8:2::fe/64"},
		{"h2", "eth0", "2001:db8:2::1/64"}, {"r", "m0", "2001:db8:9::1/64"}, {"c", "eth0", "2001:db8:9::2/64"},
	} {
		l.ip("-n", l.ns(a[0]), "addr", "add", a[2], "dev", a[1], "nodad")
	}
	l.ip("-n", l.ns("h1"), "-6", "route", "add", "default", "via", "2001:db8:1::fe")
	l.ip("-n", l.ns("h2"), "-6", "route", "add", "default", "via", "2001:db8:2::fe")
	l.ip("-n", l.ns("c"), "-6", "route", "add", "default", "via", "2001:db8:9::1")
	l.sh("r", "echo 1 > /proc/sys/net/ipv6/conf/all/forwarding")
	return l
}

// report6Config is r's /int configuration for TestReportsToIPv6Collector:
// a postcard for every packet to h2, to an IPv6 collector, with hw-id 42
// and per-flow source ports in 20000..20999.
const report6Config = `{
	"node": {"config": {"enabled": true, "node-id": 7, "hw-id": 42, "int-endpoint": true, "postcard": true}},
	"int-sessions": {"int-session": [{"name": "pc", "config": {"name": "pc", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"]}}]},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "2001:db8:9::1",
			"source-port-mode": "FLOW_HASH", "source-port-min": 20000, "source-port-max": 20999},
		"collectors": {"collector": [{"address": "2001:db8:9::2", "port": 32766, "config": {"address": "2001:db8:9::2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_REPORT_ALL_PACKETS", "config": {"type": "FLOW_REPORT_ALL_PACKETS", "report-session": "c"}}]},
	"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10},
		"match": {"config": {"destination-prefix": "2001:db8:2::/64"}},
		"actions": {"config": {"flow-op": "POSTCARD", "int-session": "pc", "sample-percent": 100, "report-all-packets": true}}}]}}
}`

// TestReportsToIPv6Collector runs `intd run` on each dataplane, configured
// over gNMI with an IPv6 collector, hw-id and flow-entropy source ports:
// the collector's socket receives reports over IPv6 whose group header
// has the hw_id and whose source port is the flow's entropy port, the
// same on both dataplanes. An out-of-range hw-id is refused naming the
// leaf and changes nothing.
func TestReportsToIPv6Collector(t *testing.T) {
	needRoot(t)
	l := routerLab6(t)
	var coll *net.UDPConn
	l.in("c", func() (err error) {
		coll, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("2001:db8:9::2"), Port: 32766})
		return err
	})
	defer coll.Close()
	var rx *net.UDPConn
	l.in("h2", func() (err error) {
		rx, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("2001:db8:2::1"), Port: 5001})
		return err
	})
	defer rx.Close()
	var tx *net.UDPConn
	l.in("h1", func() (err error) {
		tx, err = net.DialUDP("udp6", &net.UDPAddr{IP: net.ParseIP("2001:db8:1::1"), Port: 41000},
			&net.UDPAddr{IP: net.ParseIP("2001:db8:2::1"), Port: 5001})
		return err
	})
	defer tx.Close()
	flow := wire.FlowKey{Src: netip.MustParseAddr("2001:db8:1::1"), Dst: netip.MustParseAddr("2001:db8:2::1"),
		SrcPort: 41000, DstPort: 5001, Proto: wire.ProtoUDP}
	want := flow.EntropyPortIn(20000, 20999)

	ports := map[string]uint16{}
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			p := l.intdRun("r", dp, "p1,p2")
			c := l.gnmiUp(t, "r", p)
			gnmiReplaceInt(t, c, "r", []byte(report6Config))

			// A report of this flow, over IPv6, from the flow's port.
			var from netip.AddrPort
			buf := make([]byte, 9000)
			eventually(t, 15*time.Second, "a report of the flow at the IPv6 collector", func() (bool, string) {
				tx.Write([]byte("ping"))
				rx.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				rx.Read(buf)
				coll.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				n, f, err := coll.ReadFromUDPAddrPort(buf)
				if err != nil {
					return false, err.Error()
				}
				g, rr, err := wire.NewReportReader(buf[:n])
				if err != nil {
					return false, "undecodable report: " + err.Error()
				}
				var r wire.Report
				if !rr.Next(&r) {
					return false, "no individual report"
				}
				var pkt wire.Packet
				if err := (&wire.Parser{AllowTruncated: true}).Parse(r.Inner, &pkt); err != nil || pkt.Flow != flow {
					return false, fmt.Sprintf("a report of flow %+v (%v)", pkt.Flow, err)
				}
				if g.HWID != 42 || g.NodeID != 7 {
					t.Fatalf("group header %+v, want hw_id 42 and node id 7", g)
				}
				from = f
				return true, ""
			})
			if from.Addr() != netip.MustParseAddr("2001:db8:9::1") || from.Port() != want {
				t.Errorf("report from %v, want [2001:db8:9::1]:%d (the flow's entropy port in 20000..20999)", from, want)
			}
			t.Logf("report from %v (want port %d)", from, want)
			ports[dp] = from.Port()

			// hw-id 64 is refused with its path; hw-id stays 42.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hw := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "node"}, {Name: "config"}, {Name: "hw-id"}}}
			_, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: "r"}, Update: []*gpb.Update{{Path: hw,
				Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("64")}}}}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/int/node/config/hw-id") {
				t.Errorf("Set hw-id 64: %v, want INVALID_ARGUMENT naming /int/node/config/hw-id", err)
			}
			hw.Elem[2].Name = "state"
			res, err := c.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "r"}, Path: []*gpb.Path{hw}, Encoding: gpb.Encoding_JSON_IETF})
			if err != nil {
				t.Fatal(err)
			}
			var got uint8
			if err := json.Unmarshal(res.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal(), &got); err != nil || got != 42 {
				t.Errorf("hw-id state %d (%v) after the refused Set, want 42", got, err)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			exited(t, p, 10*time.Second)
			// Reports of the stopped node are not the next one's.
			for coll.SetReadDeadline(time.Now().Add(100*time.Millisecond)) == nil {
				if _, err := coll.Read(buf); err != nil {
					break
				}
			}
		})
	}
	if len(ports) == 2 && ports["ebpf"] != ports["soft"] {
		t.Errorf("source ports differ: ebpf %d, soft %d", ports["ebpf"], ports["soft"])
	}
}

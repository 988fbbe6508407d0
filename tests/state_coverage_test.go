package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/gen"
)

// dropReport is a drop report a collector received from node.
type dropReport struct {
	node uint32
	hdr  wire.ReportHeader
	md   wire.ReportMetadata
}

// stateLeaves lists every config-false leaf of the model as a path of
// node names without module prefixes or list keys.
func stateLeaves(t *testing.T) []string {
	t.Helper()
	s, err := gen.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(e *yang.Entry, p string)
	walk = func(e *yang.Entry, p string) {
		for _, n := range e.Dir {
			q := p + "/" + n.Name
			switch {
			case (n.IsLeaf() || n.IsLeafList()) && n.ReadOnly():
				out = append(out, q)
			case n.IsDir():
				walk(n, q)
			}
		}
	}
	walk(s.SchemaTree["Device"], "")
	sort.Strings(out)
	return out
}

// flatten records the path (names without module prefixes or list keys)
// of every leaf value in v, a JSON IETF tree, and whether some value
// there is not zero.
func flatten(v any, p string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if i := strings.IndexByte(k, ':'); i >= 0 {
				k = k[i+1:]
			}
			flatten(c, p+"/"+k, out)
		}
	case []any:
		if len(x) > 0 {
			if _, leaves := x[0].(map[string]any); !leaves {
				out[p] = true // a leaf-list
				return
			}
		}
		for _, c := range x {
			flatten(c, p, out)
		}
	default:
		nz := fmt.Sprint(x) != "0" && fmt.Sprint(x) != "false" && fmt.Sprint(x) != ""
		out[p] = out[p] || nz
	}
}

// getAll reads router n's whole tree (configuration and state) over gNMI.
func (r *routers) getAll(t *testing.T, n string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.gnmi[n].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: n}, Path: []*gpb.Path{{}},
		Type: gpb.GetRequest_STATE, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("%s: gNMI Get: %v", n, err)
	}
	tree := map[string]any{}
	for _, nt := range resp.GetNotification() {
		for _, u := range nt.GetUpdate() {
			var m map[string]any
			if err := json.Unmarshal(u.GetVal().GetJsonIetfVal(), &m); err != nil {
				t.Fatalf("%s: state JSON: %v", n, err)
			}
			for k, v := range m {
				tree[k] = v
			}
		}
	}
	return tree
}

// gnmiReplace replaces the top-level container elem of router n.
func gnmiReplace(t *testing.T, c gpb.GNMIClient, target, elem string, cfg []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: target}, Replace: []*gpb.Update{{
		Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: elem}}},
		Val:  &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: cfg}}}}})
	if err != nil {
		t.Fatalf("gNMI Set %s on %s: %v", elem, target, err)
	}
}

// coverageConfig is /int for router n of r1-r2 setting every configurable
// leaf somewhere: two INT sessions, postcards, drop and queue reports,
// every event, watchlist entries with every match field (VXLAN, GTP-U
// inner, ICMP), a rate-limited report session.
func coverageConfig(n int, vxlan bool) []byte {
	sink := map[int]string{1: "p1", 2: "p2"}[n]
	src := map[int]string{1: "10.0.9.1", 2: "10.0.12.2"}[n]
	vx := ""
	if vxlan {
		vx = `{"sequence-id": 20, "config": {"sequence-id": 20},
     "match": {"config": {"protocol": 17, "destination-port-min": 4789, "destination-port-max": 4789}},
     "vxlan-match": {"config": {"tunnel-type": "VXLAN", "tunnel-id": 5001, "inner-ether-type": 2048,
       "inner-source-prefix": "10.1.0.0/16", "inner-destination-prefix": "10.2.0.0/16",
       "inner-protocol": 17, "inner-source-port-min": 0, "inner-source-port-max": 65535,
       "inner-destination-port-min": 53, "inner-destination-port-max": 53}},
     "actions": {"config": {"flow-op": "POSTCARD", "report-all-packets": true, "sample-percent": 100}}},
    {"sequence-id": 22, "config": {"sequence-id": 22},
     "match": {"config": {"protocol": 17, "destination-port-min": 4789, "destination-port-max": 4789}},
     "vxlan-match": {"config": {"vni": 6001}},
     "actions": {"config": {"flow-op": "POSTCARD", "sample-percent": 100}}},
    {"sequence-id": 21, "config": {"sequence-id": 21},
     "match": {"config": {"source-prefix": "10.45.0.0/16", "gtpu-inner": true}},
     "actions": {"config": {"flow-op": "POSTCARD", "sample-percent": 100}}},`
	}
	return []byte(fmt.Sprintf(`{
  "node": {"config": {"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true, "postcard": true,
    "drop-report": true, "queue-report": true, "flow-state-clear-cycle": 10, "latency-sensitivity": 8,
    "malformed-int-action": "FORWARD"}},
  "marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63, "udp-port": 5900,
    "udp-npt": "ORIGINAL_PORT", "probe-marker": "12302652060662169855", "vxlan-gpe-next-protocol": 130,
    "geneve-option-class": 259, "gre-protocol-type": 34887, "remark-dscp": 0}},
  "flow-report-filter": {"config": {"report-interval": 100, "hop-latency-threshold": 256,
    "report-on-port-change": true, "report-on-path-change": true, "report-on-queue-change": true}},
  "interfaces": {"interface": [{"name": %q, "config": {"name": %q, "int-sink": true}}]},
  "int-sessions": {"int-session": [
    {"name": "md", "config": {"name": "md", "mode": "INT_MD", "remaining-hop-count": 1, "domain-specific-id": 0,
      "ds-instruction": 0, "ds-flags": 0, "discard": false, "clamp-tcp-mss": true, "instructions": [
      "intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
      "intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
      "intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"]}},
    {"name": "mx", "config": {"name": "mx", "mode": "INT_MX", "instructions": [
      "intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"]}}]},
  "report-sessions": {"report-session": [{"name": "collector",
    "config": {"name": "collector", "source-address": %q, "vrf": "default", "truncate-size": 256, "dscp": 46,
      "report-format": "TELEMETRY_REPORT_V2_0", "max-reports-per-packet": 4, "max-delay": 10, "rate-limit": 50,
      "source-port-mode": "FIXED", "source-port": 40001},
    "collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
  "watchlist": {"entries": {"entry": [
    {"sequence-id": 10, "config": {"sequence-id": 10, "description": "udp"},
     "match": {"config": {"source-prefix": "10.0.1.0/24", "destination-prefix": "10.0.2.0/24", "protocol": 17,
       "source-port-min": 1024, "source-port-max": 65535, "destination-port-min": 5001, "destination-port-max": 5001,
       "dscp": 46, "tcp-flags": 0, "tcp-flags-mask": 0, "ingress-interface": "p1"}},
     "actions": {"config": {"flow-op": "INT", "int-session": "md", "report-all-packets": false, "drop-report": true,
       "tail-drop-report": true, "sample-percent": 100, "packet-interval": 0}}},
    %s
    {"sequence-id": 25, "config": {"sequence-id": 25, "description": "echo requests"},
     "match": {"config": {"ether-type": 2048, "protocol": 1, "icmp-type": 8, "icmp-code": 0, "dscp": 0, "dscp-mask": 56}},
     "actions": {"config": {"flow-op": "POSTCARD", "sample-percent": 100}}},
    {"sequence-id": 30, "config": {"sequence-id": 30},
     "match": {"config": {"source-prefix": "0.0.0.0/0"}},
     "actions": {"config": {"flow-op": "POSTCARD", "int-session": "md", "drop-report": true, "sample-percent": 100}}}]}},
  "queue-reports": {"queue-report": [{"interface": "p2", "queue-id": 0, "config": {"interface": "p2", "queue-id": 0,
    "depth-threshold": 1, "latency-threshold": 2000, "latency-reset-threshold": 1000, "breach-quota": 1024, "tail-drop": true}}]},
  "events": {"event": [
    {"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "collector"}},
    {"type": "FLOW_REPORT_ALL_PACKETS", "config": {"type": "FLOW_REPORT_ALL_PACKETS", "report-session": "collector"}},
    {"type": "FLOW_TCPFLAG", "config": {"type": "FLOW_TCPFLAG", "report-session": "collector", "dscp": 10}},
    {"type": "QUEUE_REPORT_THRESHOLD_BREACH", "config": {"type": "QUEUE_REPORT_THRESHOLD_BREACH", "report-session": "collector"}},
    {"type": "QUEUE_REPORT_TAIL_DROP", "config": {"type": "QUEUE_REPORT_TAIL_DROP", "report-session": "collector"}},
    {"type": "DROP_REPORT", "config": {"type": "DROP_REPORT", "report-session": "collector"}}]}
}`, n, sink, sink, src, vx))
}

const coverageDomains = `{"domain": [{"domain-specific-id": 4660, "config": {"domain-specific-id": 4660},
  "fields": {"field": [{"domain-metadata-bit-position": 0, "config": {"domain-metadata-bit-position": 0,
    "domain-specific-metadata-field-id": "METADATA_FIELD_FLOW_ID", "size": 2, "ds-instruction-mode": "SOURCE_INSERTED",
    "source-inserted-reporting-requirement": "SINK_NODE", "source-inserted-metadata-mutability": "SOURCE_ONLY",
    "node-value": 7}}]}}]}`

// withSessionTunnel adds to router n's coverage configuration its
// tunnel-address and an INT session in a VXLAN-GPE tunnel (that no
// watchlist entry uses, so the traffic stays as it is).
func withSessionTunnel(cfg []byte, n int) []byte {
	s := strings.Replace(string(cfg), `"malformed-int-action": "FORWARD"`,
		fmt.Sprintf(`"malformed-int-action": "FORWARD", "tunnel-address": "10.0.12.%d", "tunnel-address-ipv6": "fd00:12::%d"`, n, n), 1)
	s = strings.Replace(s, `"int-sessions": {"int-session": [`, `"int-sessions": {"int-session": [
    {"name": "tunnel", "config": {"name": "tunnel", "encapsulation": "VXLAN_GPE", "tunnel-destination": "10.0.12.2",
      "tunnel-destination-ipv6": "fd00:12::2",
      "instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"]}},`, 1)
	return []byte(s)
}

// notWrittenOn are state leaves a dataplane does not write, with why.
var notWrittenOn = map[string]map[string]string{
	"soft": {
		"/int/node/state/tunnel-address":                              "the soft dataplane refuses session tunnels",
		"/int/int-sessions/int-session/state/tunnel-destination":      "the soft dataplane refuses session tunnels",
		"/int/node/state/tunnel-address-ipv6":                         "the soft dataplane refuses session tunnels",
		"/int/int-sessions/int-session/state/tunnel-destination-ipv6": "the soft dataplane refuses session tunnels",
	},
}

// notWritten are state leaves no backend writes, with why.
var notWritten = map[string]string{
	// Occupancies are in bytes on both dataplanes, never in cells.
	"/metadata-semantics/metadata-field/state/cell-size": "no cells",
}

// TestStateCoverage configures every part of the model on r1 and r2 over
// gNMI, for each dataplane, drives traffic through them (watched UDP with
// INT, postcards, drops for a missing route, a rate-limited report
// session), and reads the whole state back: every config-false leaf of
// the model must be written on at least one router, and the counters this
// traffic moves must have moved.
func TestStateCoverage(t *testing.T) {
	leaves := stateLeaves(t)
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			r := newRouters(t)
			var coll *net.UDPConn
			r.in("c", func() (err error) {
				coll, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 2), Port: 32766})
				return err
			})
			defer coll.Close()
			var mu sync.Mutex
			var drops []dropReport
			go func() {
				b := make([]byte, 9000)
				for {
					n, err := coll.Read(b)
					if err != nil {
						return
					}
					g, rr, err := wire.NewReportReader(b[:n])
					if err != nil {
						continue
					}
					var rep wire.Report
					for rr.Next(&rep) {
						var md wire.ReportMetadata
						if _, err := rep.Baseline(&md); err == nil && rep.Dropped {
							mu.Lock()
							drops = append(drops, dropReport{g.NodeID, rep.ReportHeader, md})
							mu.Unlock()
						}
					}
				}
			}()
			r.start(t, dp)
			for i, n := range []string{"r1", "r2"} {
				gnmiReplace(t, r.gnmi[n], n, "domain-specific-metadata", []byte(coverageDomains))
				cfg := coverageConfig(i+1, true)
				if dp == "ebpf" {
					cfg = withSessionTunnel(cfg, i+1)
				}
				gnmiReplaceInt(t, r.gnmi[n], n, cfg)
			}
			r.checkUDP(t, userClasses, 1<<42, func(d uint8) uint8 { return d })
			// Drops: h1 to a prefix r1 has no route for.
			var tx *net.UDPConn
			r.in("h1", func() (err error) {
				tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 77, 1), Port: 5001})
				return err
			})
			for range 20 {
				tx.Write([]byte("nowhere"))
			}
			tx.Close()
			// Transit drops of INT packets: TTL 2 from h1 expires at r2.
			ttl := r.udpFlow(t, 41999, 5001, 46)
			sc, _ := ttl.SyscallConn()
			sc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, 2) })
			for range 5 {
				ttl.Write([]byte("ttl runs out at r2"))
			}
			time.Sleep(500 * time.Millisecond) // the state interval and the pipeline's flush

			// r2's drop reports: intermediate (the packet carries INT-MD),
			// the interfaces and ingress time it has, no egress.
			var atR2 []dropReport
			eventually(t, 5*time.Second, "a drop report from r2", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				atR2 = atR2[:0]
				for _, d := range drops {
					if d.node == 2 {
						atR2 = append(atR2, d)
					}
				}
				return len(atR2) > 0, fmt.Sprintf("%d drop reports from any node", len(drops))
			})
			for _, d := range atR2 {
				want := wire.RepL1Ports | wire.RepIngressTimestamp | wire.RepL2Ports | wire.RepDrop
				age := time.Since(time.Unix(0, int64(d.md.IngressTimestamp)))
				if !d.hdr.Intermediate || d.hdr.RepMdBits != want || d.md.EgressPort != 0xffff || d.md.DropReason != 26 ||
					age < 0 || age > 10*time.Second {
					t.Errorf("r2 drop report: I %v RepMdBits %#04x (want %#04x) egress %#x reason %d ingress %v ago",
						d.hdr.Intermediate, d.hdr.RepMdBits, want, d.md.EgressPort, d.md.DropReason, age)
					break
				}
			}

			written := map[string]bool{}
			for _, n := range []string{"r1", "r2"} {
				flatten(r.getAll(t, n), "", written)
			}
			var missing []string
			for _, l := range leaves {
				if _, ok := written[l]; !ok && notWritten[l] == "" && notWrittenOn[dp][l] == "" {
					missing = append(missing, l)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%d state leaves never written:\n%s", len(missing), strings.Join(missing, "\n"))
			}
			for _, l := range []string{
				"/int/node/state/counters/in-packets",
				"/int/node/state/counters/int-inserted",
				"/int/node/state/counters/e-bit-set",
				"/int/node/state/counters/postcards",
				"/int/node/state/counters/dropped-packets",
				"/int/interfaces/interface/state/ifindex",
				"/int/interfaces/interface/state/l1-interface-id",
				"/int/interfaces/interface/state/counters/dropped-packets",
				"/int/interfaces/interface/state/counters/postcards",
				"/int/flow-report-filter/state/tracked-flows",
				"/int/flow-report-filter/state/counters/new-flow",
				"/int/report-sessions/report-session/state/counters/packets",
				"/int/report-sessions/report-session/state/counters/rate-limited",
				"/int/report-sessions/report-session/collectors/collector/state/counters/packets",
				"/int/events/event/state/counters/reports",
			} {
				if !written[l] {
					t.Errorf("%s never moved", l)
				}
			}
			if !slices.Contains(leaves, "/int/interfaces/interface/state/ifindex") {
				t.Fatal("schema walk found no interface state")
			}
		})
	}
}

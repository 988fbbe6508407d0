package ebpf

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	intcol "github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestInnerMatch sends packets of every tunnel kind, over IPv4 and IPv6,
// through both backends with a watchlist entry (INT) on the tunnel id and
// the inner flow of one user: that user's packets are watched, those of
// another user in the same tunnel, in another tunnel id, or to another
// inner port are not. Both backends must count the same matches and give
// the same bytes (INT over the outer UDP header for UDP tunnels).
func TestInnerMatch(t *testing.T) {
	const ue1, ue2, dn = "10.250.0.1", "10.250.0.2", "192.0.2.53"
	type pkt struct {
		name  string
		frame []byte
		match bool
	}
	for _, k := range []wire.TunnelKind{wire.TunnelVXLAN, wire.TunnelVXLANGPE, wire.TunnelGeneve, wire.TunnelGRE, wire.TunnelGTPU} {
		for _, outer := range [][2]string{{"10.0.1.1", "10.0.2.1"}, {"2001:db8:1::1", "2001:db8:2::1"}} {
			t.Run(fmt.Sprintf("%v over IPv%d", k, map[bool]int{true: 4, false: 6}[netip.MustParseAddr(outer[0]).Is4()]), func(t *testing.T) {
				id := uint32(0x1234)
				if k == wire.TunnelGTPU || k == wire.TunnelGRE {
					id = 0x80001234 // TEID and GRE key: 32 bits
				}
				m := sai.WatchlistMatch{Inner: sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelType(k), TunnelID: id,
					SrcPrefix: netip.MustParsePrefix(ue1 + "/32"), IPProtocol: sai.IPProtocolUDP, L4DstPort: sai.PortRange{Lo: 53, Hi: 53}}}
				tun := func(tt wiretest.Tunnel, src string, dport uint16) []byte {
					inner := wiretest.UDPFrame(src, dn, 4000, dport, []byte("user payload"), true)[wire.EthernetLen:]
					return wiretest.TunnelFrame(tt, outer[0], outer[1], 0, inner)
				}
				base := wiretest.Tunnel{Kind: k, ID: id, Eth: k != wire.TunnelGTPU && k != wire.TunnelGRE}
				other := base
				other.ID++
				pkts := []pkt{
					{"watched user", tun(base, ue1, 53), true},
					{"other user, same tunnel", tun(base, ue2, 53), false},
					{"watched user, other port", tun(base, ue1, 54), false},
					{"watched user, other tunnel id", tun(other, ue1, 53), false},
				}
				switch k {
				case wire.TunnelGTPU:
					ext := base
					ext.GTPUExt, ext.GTPUSeq = 2, true
					seq := base
					seq.GTPUSeq = true
					echo := base
					echo.GTPUMsg = 1
					pkts = append(pkts, pkt{"watched user, 2 extension headers", tun(ext, ue1, 53), true},
						pkt{"watched user, sequence number", tun(seq, ue1, 53), true},
						pkt{"echo request, not a G-PDU", tun(echo, ue1, 53), false})
				case wire.TunnelGRE:
					eth := base
					eth.Eth = true
					pkts = append(pkts, pkt{"watched user, Ethernet in GRE", tun(eth, ue1, 53), true})
				case wire.TunnelGeneve:
					opt := base
					opt.GeneveOptWords = 3
					pkts = append(pkts, pkt{"watched user, Geneve options", tun(opt, ue1, 53), true})
				case wire.TunnelVXLANGPE:
					ip := base
					ip.Eth = false
					pkts = append(pkts, pkt{"watched user, IP in VXLAN-GPE", tun(ip, ue1, 53), true})
				}
				ns := nodes(t, setup{sess: &mdSession, match: m})
				for _, p := range pkts {
					var outs [2][]byte
					for i, n := range ns {
						before := matched(t, n)
						outs[i] = n.process(t, bytes.Clone(p.frame))
						if got := matched(t, n) - before; got != map[bool]uint64{true: 1}[p.match] {
							t.Errorf("%s: %s: entry matched %d packets, want match %v", p.name, n.name(), got, p.match)
						}
						if outs[i] == nil {
							t.Errorf("%s: %s: dropped", p.name, n.name())
						}
					}
					if !bytes.Equal(outs[0], outs[1]) {
						t.Errorf("%s: soft and ebpf differ:\n soft %x\n ebpf %x", p.name, outs[0], outs[1])
					}
					// GRE without the INT protocol type configured has no
					// place for INT: the packet is watched, left as it is.
					if changed := !bytes.Equal(outs[0], p.frame); changed != (p.match && k != wire.TunnelGRE) {
						t.Errorf("%s: INT inserted %v, want %v", p.name, changed, p.match)
					}
				}
			})
		}
	}
}

// matched is the packets the node's watchlist entries matched.
func matched(t *testing.T, n node) uint64 {
	t.Helper()
	st, err := n.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, s := range st.Watchlist {
		sum += s.MatchedPackets
	}
	return sum
}

// TestInnerFlowReports: postcards of two users in one GTP-U tunnel are two
// flows to the smart filter (the second user is reported although the
// outer 5-tuple is the first user's, a repeat of the first user is not),
// and their events carry the inner flow and the TEID.
func TestInnerFlowReports(t *testing.T) {
	n := newBPFNode(t)
	setup{noEntry: true}.apply(t, n)
	m := sai.WatchlistMatch{Inner: sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelGTPU}}
	act := sai.WatchlistAction{FlowOp: sai.FlowOpPostcard, FlowSamplePercent: 100}
	if _, err := n.Create(sai.WatchlistEntryAttrs{Priority: 1, Match: m, Action: act}); err != nil {
		t.Fatal(err)
	}
	ue := func(src string) []byte {
		inner := wiretest.UDPFrame(src, "192.0.2.53", 4000, 53, []byte("user payload"), true)[wire.EthernetLen:]
		return wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: 77, GTPUExt: 1}, "10.0.1.1", "10.0.2.1", 0, inner)
	}
	for _, f := range [][]byte{ue("10.250.0.1"), ue("10.250.0.1"), ue("10.250.0.2")} {
		if out := n.process(t, bytes.Clone(f)); !bytes.Equal(out, f) {
			t.Fatalf("postcard changed the packet: %x", out)
		}
	}
	evs := n.rec.wait(t, 3)
	if len(evs) != 2 {
		t.Fatalf("%d reports, want 2 (one per user): %+v", len(evs), evs)
	}
	for i, want := range []string{"10.250.0.1", "10.250.0.2"} {
		if ev := evs[i]; ev.Flow.Src != netip.MustParseAddr(want) || ev.Flow.DstPort != 53 || ev.Tunnel != wire.TunnelGTPU || ev.TunnelID != 77 {
			t.Errorf("report %d: flow %v tunnel %v %d, want user %s in TEID 77", i, ev.Flow, ev.Tunnel, ev.TunnelID, want)
		}
	}
}

// TestTunnelDropReasons: the kernel's tunnel drop reasons this kernel has
// (BTF) map to SD-Fabric codes as docs/tunnels.md says.
func TestTunnelDropReasons(t *testing.T) {
	n := newBPFNode(t)
	if err := n.loadDropReasons(); err != nil {
		t.Fatal(err)
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	var enum *btf.Enum
	if err := kspec.TypeByName("skb_drop_reason", &enum); err != nil {
		t.Skipf("no enum skb_drop_reason: %v", err)
	}
	want := map[string]uint32{"VXLAN_VNI_NOT_FOUND": uint32(spec.DropPortVLANMappingMiss), "NO_TX_TARGET": uint32(spec.DropBridgingMiss),
		"NO_SOCKET": uint32(intdDropMapDR_NO_SOCKET), "VXLAN_INVALID_HDR": 0}
	seen := 0
	for _, v := range enum.Values {
		w, ok := want[strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")]
		if !ok {
			continue
		}
		seen++
		var got uint32
		if err := n.objs.DropReasons.Lookup(uint32(v.Value), &got); err != nil {
			t.Fatal(err)
		}
		if w != 0 {
			w++ // stored as reason + 1
		}
		if got != w {
			t.Errorf("%s (%d): drop_reasons %d, want %d", v.Name, v.Value, got, w)
		}
	}
	t.Logf("%d of %d tunnel reasons in this kernel", seen, len(want))
}

// TestGTPUEndToEnd sends GTP-U from h1 to a user-plane endpoint at h2
// through three routers that watch UE traffic inside GTP-U (gtpu-inner,
// SD-Fabric's rule) with postcards: two UEs in one tunnel are two flows at
// the collector, each with its TEID, the three-hop path and latencies; a
// UE outside the watched subnet is not reported. (The kernel's gtp device
// is not needed: the tunnel is plain UDP to port 2152, as an N3 link is.)
func TestGTPUEndToEnd(t *testing.T) {
	l, col, pipe := gtpuLab(t)
	l.router(t, "r1", []string{"r1-h1", "r1-r2"}, pipe(), ueWatch(1, "POSTCARD"))
	l.router(t, "r2", []string{"r2-r1", "r2-r3"}, pipe(), ueWatch(2, "POSTCARD"))
	l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe(), ueWatch(3, "POSTCARD"))

	// The user-plane endpoint at h2 counts the G-PDUs it gets.
	upf := upfAt(t, l)
	gnb := gnodeB(t, l, net.IPv4(10, 0, 2, 2))
	const teid = 0x1001
	ues := []string{"10.250.0.1", "10.250.0.2", "10.251.0.1"} // the last outside the watched subnet
	for range 3 {
		for _, ue := range ues {
			if _, err := gnb.Write(gpdu(teid, ue)); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = upf.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for i := range 3 * len(ues) {
		if _, err := upf.Read(buf); err != nil {
			t.Fatalf("G-PDU %d did not reach the endpoint: %v", i, err)
		}
	}
	for _, ue := range ues[:2] {
		var f intcol.FlowState
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var ok bool
			if f, ok = col.TunnelFlow(ueFlow(ue), wire.TunnelGTPU, teid); ok && f.NHops == 3 || time.Now().After(end) {
				break
			}
		}
		var nodes []uint32
		for h := 0; h < f.NHops; h++ {
			nodes = append(nodes, f.Path[h].NodeID)
			if f.Path[h].Latency.Count == 0 || f.Path[h].Latency.Max == 0 {
				t.Errorf("UE %s: hop %d (node %d) has no latency: %+v", ue, h, f.Path[h].NodeID, f.Path[h].Latency)
			}
		}
		if !slices.Equal(nodes, []uint32{1, 2, 3}) || f.E2E.Count == 0 || f.Outer.DstPort != wire.PortGTPU {
			t.Errorf("UE %s in TEID %#x: path %v, e2e %+v, outer %v", ue, teid, nodes, f.E2E, f.Outer)
		}
		t.Logf("UE %s TEID %#x: path %v, end-to-end latency %d ns (%d samples), outer %v", ue, teid, nodes, f.E2E.Last, f.E2E.Count, f.Outer)
	}
	if _, ok := col.TunnelFlow(ueFlow(ues[2]), wire.TunnelGTPU, teid); ok {
		t.Errorf("UE %s outside the watched subnet was reported", ues[2])
	}
	if n := len(col.Snapshot(0).Flows); n != 2 {
		t.Errorf("%d flows at the collector, want 2: %+v", n, col.Snapshot(0).Flows)
	}
}

// TestGTPUNoEndpointDrop: r1 watches UE traffic inside GTP-U and inserts
// INT; the G-PDUs of two UEs in one tunnel are addressed to r3, a
// user-plane node with drop reports on and no GTP-U endpoint bound (no
// user-plane function, or one that is down). The kernel drops them with
// NO_SOCKET, and r3 reports the drops as SD-Fabric's 133 (UPF_UL_PDR_MISS)
// with the frame, keyed on the inner flow behind the INT over UDP: the
// two UEs, dropped for one reason within one filter interval, are two
// reports, and the collector shows the drop on each UE's inner flow and
// its TEID. A user-plane function that has the socket and drops an
// unknown TEID itself is not a kernel drop: intd does not see it
// (docs/tunnels.md).
func TestGTPUNoEndpointDrop(t *testing.T) {
	l, col, pipe := gtpuLab(t)
	l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, ueWatch(1, "INT"))
	l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, routerConfig(2, "", false))
	upf := strings.NewReplacer(`"int-transit": true`, `"int-transit": true, "drop-report": true`,
		`"events": {"event": [`, `"events": {"event": [{"type": "DROP_REPORT", "config": {"type": "DROP_REPORT", "report-session": "collector"}}, `)
	r3 := l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe(), upf.Replace(routerConfig(3, "", false)))
	gnb := gnodeB(t, l, net.IPv4(10, 0, 23, 2))
	const teid = 0x2002
	ues := []string{"10.250.0.7", "10.250.0.8"}
	for range 3 {
		for _, ue := range ues {
			// r3's port unreachable comes back as the socket's error,
			// taken in place of the next send.
			_, err := gnb.Write(gpdu(teid, ue))
			if errors.Is(err, syscall.ECONNREFUSED) {
				_, err = gnb.Write(gpdu(teid, ue))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, ue := range ues {
		var f intcol.FlowState
		var ok bool
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if f, ok = col.TunnelFlow(ueFlow(ue), wire.TunnelGTPU, teid); ok && f.DropReasons[0].Count > 0 {
				break
			}
		}
		if !ok {
			t.Fatalf("no flow of UE %s in TEID %#x at the collector: %+v", ue, teid, col.Snapshot(0).Flows)
		}
		// The smart filter reports a flow's drop once per reason and
		// interval: a report for each UE's three drops.
		if d := f.DropReasons[0]; d.Reason != uint8(spec.DropUPFUplinkPDRMiss) || d.Count == 0 {
			t.Errorf("UE %s in TEID %#x: drops %+v, want reason %d", ue, teid, f.DropReasons, spec.DropUPFUplinkPDRMiss)
		}
		var nodes []uint32
		for h := 0; h < f.NHops; h++ {
			nodes = append(nodes, f.Path[h].NodeID)
		}
		if !slices.Equal(nodes, []uint32{1, 2, 3}) || f.Path[2].Drops == 0 || f.Outer.DstPort != wire.PortGTPU {
			t.Errorf("UE %s: path %v (drops at r3 %d), outer %v; want 1 2 3, dropped at r3, outer GTP-U", ue, nodes, f.Path[min(f.NHops, 3)-1].Drops, f.Outer)
		}
		t.Logf("UE %s TEID %#x: path %v, drops %+v, outer %v", ue, teid, nodes, f.DropReasons[0], f.Outer)
	}
	var st sai.Stats
	want := uint64(3 * len(ues))
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = r3.Stats(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.Drops[spec.DropUPFUplinkPDRMiss] >= want || time.Now().After(end) {
			break
		}
	}
	if n := st.Drops[spec.DropUPFUplinkPDRMiss]; n != want || st.Reports[sai.ReportDrop].Generated == 0 {
		t.Errorf("r3 counted %d UPF_UL_PDR_MISS drops (want %d), %d drop reports", n, want, st.Reports[sai.ReportDrop].Generated)
	}
	t.Logf("r3: %d drops, %d drop events", st.Drops[spec.DropUPFUplinkPDRMiss], st.Reports[sai.ReportDrop].Generated)
}

// TestGTPUDropWatchPerUE: r1 watches UE traffic inside GTP-U (gtpu-inner,
// the UE subnet) with postcards and drop reports; two UEs in one tunnel
// are in the subnet, a third in the same tunnel is not. Once their G-PDUs
// have passed r1, its route goes and the kernel drops them (routing miss):
// each watched UE's drop is reported on its inner flow and TEID, and the
// third UE's, whose outer 5-tuple is the watched UEs', is not (the node
// remembers the watched flows by tunnel and inner flow, as the software
// dataplane classifies each dropped packet).
func TestGTPUDropWatchPerUE(t *testing.T) {
	l, col, pipe := gtpuLab(t)
	cfg := strings.NewReplacer(`"int-transit": true`, `"int-transit": true, "drop-report": true`,
		`"sample-percent": 100`, `"sample-percent": 100, "drop-report": true`,
		`"events": {"event": [`, `"events": {"event": [{"type": "DROP_REPORT", "config": {"type": "DROP_REPORT", "report-session": "collector"}}, `).
		Replace(ueWatch(1, "POSTCARD"))
	r1 := l.router(t, "r1", []string{"r1-h1", "r1-r2"}, pipe(), cfg)
	upf := upfAt(t, l)
	gnb := gnodeB(t, l, net.IPv4(10, 0, 2, 2))
	const teid = 0x3003
	ues := []string{"10.250.0.1", "10.250.0.2", "10.251.0.1"} // the last outside the watched subnet
	send := func() {
		for _, ue := range ues {
			if _, err := gnb.Write(gpdu(teid, ue)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send()
	_ = upf.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for i := range ues {
		if _, err := upf.Read(buf); err != nil {
			t.Fatalf("G-PDU %d did not reach the endpoint: %v", i, err)
		}
	}
	l.exec(t, "r1", "ip", "route", "del", "default")
	for range 3 {
		send()
		time.Sleep(10 * time.Millisecond)
	}
	for _, ue := range ues[:2] {
		var f intcol.FlowState
		var ok bool
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if f, ok = col.TunnelFlow(ueFlow(ue), wire.TunnelGTPU, teid); ok && f.Drops > 0 {
				break
			}
		}
		if !ok || f.DropReasons[0].Reason != uint8(spec.DropRoutingMiss) || f.DropReasons[0].Count == 0 {
			t.Errorf("UE %s in TEID %#x: found %v, drops %+v; want reason %d", ue, teid, ok, f.DropReasons, spec.DropRoutingMiss)
		}
		t.Logf("UE %s TEID %#x: %d reports, drops %+v", ue, teid, f.Reports, f.DropReasons[0])
	}
	st, err := r1.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := col.TunnelFlow(ueFlow(ues[2]), wire.TunnelGTPU, teid); ok {
		t.Errorf("UE %s outside the watched subnet was reported: %+v", ues[2], f.DropReasons)
	}
	if n := st.Drops[spec.DropRoutingMiss]; n != 3*uint64(len(ues)) {
		t.Errorf("r1 counted %d routing-miss drops, want %d", n, 3*len(ues))
	}
}

// gtpuLab is the lab with a collector in its namespace and a report
// pipeline per router (each has its node id), whose reports leave from
// r3's namespace.
func gtpuLab(t *testing.T) (*lab, *intcol.Collector, func() *report.Pipeline) {
	l := newLab(t)
	col := intcol.New(intcol.Config{})
	var colConn *net.UDPConn
	if err := l.in("col", func() (err error) {
		colConn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 2), Port: 32766})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { colConn.Close() })
	go func() {
		buf := make([]byte, 9000)
		for {
			n, err := colConn.Read(buf)
			if err != nil {
				return
			}
			col.HandlePacket(buf[:n], time.Now().UnixNano())
		}
	}()
	var send *net.UDPConn
	if err := l.in("r3", func() (err error) {
		send, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	return l, col, func() *report.Pipeline { return sendingPipeline(t, send) }
}

// ueWatch is a router's configuration watching UE traffic inside GTP-U
// (gtpu-inner, the UE subnet 10.250.0.0/16) with flow op op.
func ueWatch(node int, op string) string {
	return strings.Replace(routerConfigOp(node, "", true, 0, op),
		`"match": {"config": {"source-prefix": "10.0.1.0/24", "destination-prefix": "10.0.2.0/24"}}`,
		`"match": {"config": {"source-prefix": "10.250.0.0/16", "gtpu-inner": true}}`, 1)
}

// upfAt is a user-plane endpoint's GTP-U socket at h2.
func upfAt(t *testing.T, l *lab) *net.UDPConn {
	var c *net.UDPConn
	if err := l.in("h2", func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: wire.PortGTPU})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// gnodeB is a GTP-U socket at h1 (its N3 address) sending to dst.
func gnodeB(t *testing.T, l *lab, dst net.IP) *net.UDPConn {
	var c *net.UDPConn
	if err := l.in("h1", func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 1, 2), Port: wire.PortGTPU},
			&net.UDPAddr{IP: dst, Port: wire.PortGTPU})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// gpdu is a G-PDU in tunnel teid (with one extension header) of a DNS
// query from UE ue.
func gpdu(teid uint32, ue string) []byte {
	inner := wiretest.UDPFrame(ue, "192.0.2.53", 4000, 53, []byte("user plane"), true)[wire.EthernetLen:]
	return append(wiretest.GTPUHeader(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: teid, GTPUExt: 1}, len(inner)), inner...)
}

// ueFlow is the inner flow of gpdu's query from UE ue.
func ueFlow(ue string) wire.FlowKey {
	return wire.FlowKey{Src: netip.MustParseAddr(ue), Dst: netip.MustParseAddr("192.0.2.53"), SrcPort: 4000, DstPort: 53, Proto: wire.ProtoUDP}
}

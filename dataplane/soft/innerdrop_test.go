package soft

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	intcol "github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// TestTunnelDropsPerInnerFlow: two users in one tunnel, dropped for one
// reason within one filter interval, are two drop reports, and a repeat of
// the first is filtered; a third user in the tunnel, outside the watched
// subnet, is not reported. The drops happen at the source, which watches the
// tunnel's inner headers (every tunnel kind), and, for UDP tunnels, at the
// next node, where the packets carry INT over UDP between the outer UDP
// header and the tunnel's. The collector reads each report as the user's
// inner flow in the tunnel, with INT carried in a VXLAN-GPE or Geneve
// header too.
func TestTunnelDropsPerInnerFlow(t *testing.T) {
	const ue1, ue2, ue3 = "10.250.0.1", "10.250.0.2", "10.251.0.1" // ue3 outside the watched subnet
	for _, k := range []wire.TunnelKind{wire.TunnelVXLAN, wire.TunnelVXLANGPE, wire.TunnelGeneve, wire.TunnelGRE, wire.TunnelGTPU} {
		for _, at := range []int{0, 1, 2} {
			inTunnel := at == 2 // dropped at s2, INT in the tunnel header
			if at == 2 {
				at = 1
			}
			if at == 1 && k == wire.TunnelGRE || inTunnel && k != wire.TunnelVXLANGPE && k != wire.TunnelGeneve {
				continue // no INT over GRE without its protocol type: s2 does not watch it
			}
			name := fmt.Sprintf("%v dropped at s%d", k, at+1)
			if inTunnel {
				name += ", INT in the tunnel header"
			}
			t.Run(name, func(t *testing.T) {
				l := newLine(t, lineOpts{n: 2,
					match: sai.WatchlistMatch{Inner: sai.InnerMatch{Enabled: true, Tunnel: sai.TunnelType(k),
						SrcPrefix: netip.MustParsePrefix("10.250.0.0/16")}},
					action: func(a *sai.WatchlistAction) { a.DropReportEnable = true },
					dtel: func(_ int, a *sai.DTelAttrs) {
						if !inTunnel { // INT over UDP, in front of the tunnel header
							a.VXLANGPENextProtocol, a.GeneveOptionClass = 0, 0
						}
					}})
				const id = 0x1234
				frame := func(ue string) []byte {
					inner := wiretest.UDPFrame(ue, "192.0.2.53", 4000, 53, []byte("user payload"), true)[wire.EthernetLen:]
					f := wiretest.TunnelFrame(wiretest.Tunnel{Kind: k, ID: id, Eth: k != wire.TunnelGTPU && k != wire.TunnelGRE, GTPUExt: 1},
						"10.0.1.1", "10.0.2.1", 0, inner)
					f[wire.EthernetLen+8] = uint8(at + 1) // the TTL expires at s1 or s2
					f[wire.EthernetLen+10], f[wire.EthernetLen+11] = 0, 0
					ck := wire.IPv4HeaderChecksum(f[wire.EthernetLen : wire.EthernetLen+20])
					f[wire.EthernetLen+10], f[wire.EthernetLen+11] = uint8(ck>>8), uint8(ck)
					return f
				}
				for _, ue := range []string{ue1, ue2, ue3, ue1} {
					l.send(frame(ue))
				}
				evs := l.rec[at].kind(report.KindDrop)
				if len(evs) != 3 {
					t.Fatalf("%d drop events at s%d, want 3", len(evs), at+1)
				}
				if at == 1 && evs[0].INT < 0 {
					t.Fatalf("the drop at s2 is not of an INT packet: %x", evs[0].Packet)
				}
				reps := dropReports(t, evs)
				if len(reps) != 2 {
					t.Fatalf("%d drop reports, want 2 (one per user)", len(reps))
				}
				// The collector's decoder, told the domain's markings (INT
				// over UDP, not in Geneve options, at UDP 6081).
				dec := intcol.NewDecoder()
				if !inTunnel {
					dec.Parser.GenevePort = 0
				}
				var got []string
				for _, r := range reps {
					if _, err := dec.Decode(r, reportFunc(func(r *intcol.Report) {
						got = append(got, fmt.Sprintf("%v %v %#x reason %d", r.Flow, r.Tunnel, r.TunnelID, r.DropReason))
					})); err != nil {
						t.Fatal(err)
					}
				}
				var want []string
				for _, ue := range []string{ue1, ue2} {
					fl := wire.FlowKey{Src: netip.MustParseAddr(ue), Dst: netip.MustParseAddr("192.0.2.53"), SrcPort: 4000, DstPort: 53, Proto: wire.ProtoUDP}
					want = append(want, fmt.Sprintf("%v %v %#x reason %d", fl, k, id, spec.DropIPTTLZero))
				}
				if !slices.Equal(got, want) {
					t.Errorf("reports decode as\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

type reportFunc func(r *intcol.Report)

func (f reportFunc) HandleReport(r *intcol.Report) { f(r) }

// dropReports runs evs through a reporting pipeline with drop reports and
// the default filter, and returns the report packets it sends.
func dropReports(t *testing.T, evs []report.Event) [][]byte {
	t.Helper()
	capt := &report.Capture{}
	cfg := report.Config{NodeID: 9, DropReports: true, Filter: report.DefaultFilter(),
		Sessions: []report.Session{{Name: "s", Src: netip.MustParseAddr("192.0.2.1"),
			Collectors: []report.Collector{{Addr: netip.MustParseAddrPort("192.0.2.9:32766")}}, TruncateSize: 256, Format: spec.ReportFormatV2}},
		Events: map[report.EventType]report.Route{spec.EventDropReport: {Session: "s"}}}
	p, err := report.New(cfg, report.Options{Sender: capt, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if time.Duration(evs[i].Now-evs[0].Now) >= cfg.Filter.Interval {
			t.Fatalf("drop %d is %v after the first: not within one filter interval", i, time.Duration(evs[i].Now-evs[0].Now))
		}
		p.Report(&evs[i])
	}
	p.Close()
	var out [][]byte
	for _, pk := range capt.Packets() {
		out = append(out, pk.Payload)
	}
	return out
}

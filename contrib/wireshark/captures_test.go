package wireshark

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// The markings of the generated captures; the dissector and
// `intcollector decode` are told the same.
const (
	markDSCP, markDSCPMask = 0x17, 0x3f
	markUDPPort            = 5005 // Host-INT's peer captures use 5000 for data
	markProbe              = 0xaaaa_aaaa_bbbb_bbbb
	markGRE                = 0x88b6
	collectorPort          = 32766
)

// pcapWriter writes a classic pcap file of Ethernet frames.
type pcapWriter struct {
	f  *os.File
	ts time.Time
}

func newPcap(t *testing.T, path string) *pcapWriter {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535)
	binary.LittleEndian.PutUint32(h[20:], 1) // Ethernet
	f.Write(h[:])
	return &pcapWriter{f: f, ts: time.Unix(1_800_000_000, 0)}
}

func (w *pcapWriter) write(frame []byte) {
	w.ts = w.ts.Add(time.Millisecond)
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(w.ts.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(w.ts.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(frame)))
	w.f.Write(h[:])
	w.f.Write(frame)
}

func (w *pcapWriter) close(t *testing.T) {
	if err := w.f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fabric is h1 - s1 - s2 - s3 - h2 of soft switches (the INT dataplane)
// with report pipelines (the report exporter), every frame between the
// switches and every report packet captured in order.
type fabric struct {
	t     *testing.T
	clk   *soft.ManualClock
	sw    []*soft.Switch
	pipes []*report.Pipeline
	mu    sync.Mutex
	out   [][]byte // captured frames, in order
}

// scenario configures a fabric: markings, INT mode, report format.
type scenario struct {
	dtel     func(a *sai.DTelAttrs)
	mode     sai.IntMode
	op       sai.FlowOp // FlowOpInt (default) or FlowOpPostcard
	format   sai.ReportFormat
	rate     int64 // s2 -> s3 rate in bit/s (0: 1 Gb/s)
	noRoutes bool  // s2 has no route to h2: drop reports
}

func newFabric(t *testing.T, sc scenario) *fabric {
	f := &fabric{t: t, clk: soft.NewManualClock(1_800_000_000_000_000_000)}
	sender := report.SenderFunc(func(p *report.Packet) error {
		// A report packet as it leaves the switch: IPv4/UDP to the
		// collector.
		src, dst := p.Src.String(), p.Dst.Addr().String()
		frame := wiretest.UDPFrame(src, dst, 40000+uint16(p.Seq%1000), p.Dst.Port(), slices.Clone(p.Payload), true)
		f.record(frame)
		return nil
	})
	for i := 0; i < 3; i++ {
		pipe, err := report.New(report.Config{}, report.Options{Sender: sender, Clock: f.clk.Now, TickInterval: -1, QueueLen: 4096})
		if err != nil {
			t.Fatal(err)
		}
		p2 := soft.PortConfig{Name: "p2"}
		if i == 1 && sc.rate != 0 {
			p2.Rate, p2.QueueBytes = sc.rate, 64<<10
		}
		routes := []soft.Route{
			{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}},
			{Prefix: netip.MustParsePrefix("10.0.1.0/24"), Ports: []string{"p1"}},
		}
		if i == 1 && sc.noRoutes {
			routes = routes[1:]
		}
		sw, err := soft.New(soft.Config{Name: "s" + string(rune('1'+i)), Clock: f.clk, Reporter: pipe,
			Ports: []soft.PortConfig{{Name: "p1"}, p2}, Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		f.sw, f.pipes = append(f.sw, sw), append(f.pipes, pipe)
	}
	for i, sw := range f.sw {
		if i < 2 {
			next := f.sw[i+1]
			sw.SetLink(1, soft.LinkFunc(func(fr []byte) {
				f.record(fr)
				next.Receive(0, fr)
			}))
		} else {
			sw.SetLink(1, soft.LinkFunc(func([]byte) {}))
		}
		if i > 0 {
			prev := f.sw[i-1]
			sw.SetLink(0, soft.LinkFunc(func(fr []byte) { prev.Receive(1, fr) }))
		} else {
			sw.SetLink(0, soft.LinkFunc(func([]byte) {}))
		}
		d := sai.DefaultDTelAttrs()
		d.SwitchID = uint32(i + 1)
		d.IntEndpointEnable, d.IntTransitEnable = true, true
		d.PostcardEnable, d.DropReportEnable, d.QueueReportEnable = true, true, true
		if i == 2 {
			d.SinkPortList = []string{"p2"}
		}
		if sc.dtel != nil {
			sc.dtel(&d)
		}
		f.create(sw, d)
		rs := sai.DefaultReportSessionAttrs()
		rs.SrcIP = netip.AddrFrom4([4]byte{10, 255, 0, byte(i + 1)})
		rs.Destinations = []sai.ReportDestination{{IP: netip.MustParseAddr("10.255.255.1"), UDPPort: collectorPort}}
		rs.Format = sc.format
		if sc.format == spec.ReportFormatV2 {
			rs.Coalesce = sai.Coalescing{MaxReports: 4}
		}
		rso := f.create(sw, rs)
		for _, et := range []sai.EventType{spec.EventFlowState, spec.EventDropReport,
			spec.EventQueueReportThresholdBreach, spec.EventQueueReportTailDrop} {
			f.create(sw, sai.EventAttrs{Type: et, ReportSession: rso})
		}
		f.create(sw, sai.QueueReportAttrs{Port: "p2", LatencyThreshold: 50 * time.Microsecond,
			BreachQuota: sai.DefaultBreachQuota, TailDrop: true})
		if i > 0 && sc.op != sai.FlowOpPostcard {
			continue
		}
		sa := sai.DefaultIntSessionAttrs()
		sa.Mode = sc.mode
		sa.Instructions |= spec.InstQueue | spec.InstEgressTimestamp
		sess := f.create(sw, sa)
		op := sc.op
		if op == sai.FlowOpNop {
			op = sai.FlowOpInt
		}
		f.create(sw, sai.WatchlistEntryAttrs{Priority: 10, Action: sai.WatchlistAction{FlowOp: op, IntSession: sess,
			FlowSamplePercent: 100, DropReportEnable: true, TailDropReportEnable: true, ReportAllPackets: true}})
	}
	return f
}

func (f *fabric) create(sw *soft.Switch, a sai.Attrs) sai.OID {
	f.t.Helper()
	oid, err := sw.Create(a)
	if err != nil {
		f.t.Fatalf("%T: %v", a, err)
	}
	return oid
}

func (f *fabric) record(frame []byte) {
	f.mu.Lock()
	f.out = append(f.out, slices.Clone(frame))
	f.mu.Unlock()
}

// send injects frames from h1 and runs the switches' queues.
func (f *fabric) send(frames ...[]byte) {
	for _, fr := range frames {
		f.sw[0].Receive(0, fr)
		f.clk.Set(f.clk.Now() + int64(10*time.Microsecond))
		f.settle()
	}
}

// close sends the pending reports and waits until they are captured.
func (f *fabric) close() {
	for _, p := range f.pipes {
		p.Close()
	}
}

func (f *fabric) settle() {
	for {
		next := int64(1<<63 - 1)
		for _, sw := range f.sw {
			next = min(next, sw.Poll())
		}
		if next == 1<<63-1 {
			return
		}
		if next > f.clk.Now() {
			f.clk.Set(next)
		}
	}
}

// writeCaptures generates one capture per kind of INT and report packet
// the project produces, into dir, and returns their paths.
func writeCaptures(t *testing.T, dir string) []string {
	tcp := func(sport uint16) []byte {
		return wiretest.TCPFrame("10.0.1.1", "10.0.2.1", sport, 80, 5, []byte("tcp payload"))
	}
	udp := func(sport uint16) []byte {
		return wiretest.UDPFrame("10.0.1.1", "10.0.2.1", sport, 53, []byte("udp payload!"), true)
	}
	innerTCP := wiretest.TCPFrame("192.168.0.1", "192.168.0.2", 5555, 80, 0, []byte("inner payload"))
	gre := func() []byte {
		ip := innerTCP[wire.EthernetLen:]
		g := make([]byte, 4+len(ip))
		_ = wire.PutGRE(g, wire.EtherTypeIPv4)
		copy(g[4:], ip)
		return wiretest.IPv4Frame("10.0.1.1", "10.0.2.1", wire.ProtoGRE, 0, g, false)
	}
	tunnel := func(kind string) []byte {
		var th [8]byte
		port := uint16(spec.PortVXLANGPE)
		if kind == "gpe" {
			_ = wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: 3, VNI: 42}.Put(th[:])
		} else {
			_ = wire.Geneve{Protocol: wire.EtherTypeTEB, VNI: 42}.Put(th[:])
			port = spec.PortGeneve
		}
		return wiretest.UDPFrame("10.0.1.1", "10.0.2.1", 40000, port, append(th[:], innerTCP...), true)
	}
	gtpu := func() []byte {
		ue := wiretest.UDPFrame("10.250.0.1", "192.0.2.53", 4000, 53, []byte("user plane"), true)[wire.EthernetLen:]
		return wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: 0x2002, GTPUExt: 1}, "10.0.1.1", "10.0.2.1", 0, ue)
	}
	dscp := func(a *sai.DTelAttrs) { a.IntL4DSCP = sai.DSCPMatch{Value: markDSCP, Mask: markDSCPMask} }
	udpPort := func(npt spec.NPT) func(a *sai.DTelAttrs) {
		return func(a *sai.DTelAttrs) { a.IntUDPDstPort, a.IntUDPNPT = markUDPPort, npt }
	}
	cases := []struct {
		name   string
		sc     scenario
		frames [][]byte
	}{
		{"md-tcp-dscp", scenario{dtel: dscp}, [][]byte{tcp(1000), tcp(1000)}},
		{"md-udp-dscp", scenario{dtel: dscp}, [][]byte{udp(1001)}},
		{"mx-tcp-dscp", scenario{dtel: dscp, mode: sai.IntModeMX}, [][]byte{tcp(1002)}},
		{"md-udp-port-npt1", scenario{dtel: udpPort(spec.NPTUDPPort)}, [][]byte{udp(1003)}},
		{"md-tcp-udp-port-npt2", scenario{dtel: udpPort(spec.NPTIPProto)}, [][]byte{tcp(1004)}},
		{"md-udp-udp-port-npt2", scenario{dtel: udpPort(spec.NPTIPProto)}, [][]byte{udp(1005)}},
		{"md-tcp-probe", scenario{dtel: func(a *sai.DTelAttrs) { a.ProbeMarker = markProbe }}, [][]byte{tcp(1006)}},
		{"mx-udp-probe", scenario{dtel: func(a *sai.DTelAttrs) { a.ProbeMarker = markProbe }, mode: sai.IntModeMX}, [][]byte{udp(1007)}},
		{"md-gre", scenario{dtel: func(a *sai.DTelAttrs) { a.GREProtocolType = markGRE }}, [][]byte{gre()}},
		{"mx-gre", scenario{dtel: func(a *sai.DTelAttrs) { a.GREProtocolType = markGRE }, mode: sai.IntModeMX}, [][]byte{gre()}},
		{"md-vxlan-gpe", scenario{}, [][]byte{tunnel("gpe")}},
		{"mx-vxlan-gpe", scenario{mode: sai.IntModeMX}, [][]byte{tunnel("gpe")}},
		{"md-geneve", scenario{}, [][]byte{tunnel("geneve")}},
		{"mx-geneve", scenario{mode: sai.IntModeMX}, [][]byte{tunnel("geneve")}},
		{"postcards", scenario{dtel: dscp, op: sai.FlowOpPostcard}, [][]byte{tcp(1008), udp(1009)}},
		// s2 has no route to h2: drop reports (routing miss) for INT packets.
		{"tr2-drop", scenario{dtel: dscp, noRoutes: true}, [][]byte{tcp(1010), udp(1011)}},
		// GTP-U with INT over UDP (DSCP) between UDP and GTP-U: the
		// drop report's frame shows the TEID and the user's flow.
		{"tr2-drop-gtpu", scenario{dtel: dscp, noRoutes: true}, [][]byte{gtpu()}},
		{"tr05-drop", scenario{dtel: dscp, noRoutes: true, format: spec.ReportFormatV05}, [][]byte{tcp(1012)}},
		{"tr05-flow", scenario{dtel: dscp, format: spec.ReportFormatV05}, [][]byte{tcp(1013), udp(1014)}},
	}
	// A burst into a 10 Mb/s link: queue-threshold and tail-drop reports.
	var burst [][]byte
	for i := 0; i < 80; i++ {
		burst = append(burst, wiretest.UDPFrame("10.0.1.1", "10.0.2.1", 1020, 53, make([]byte, 1200), true))
	}
	cases = append(cases,
		struct {
			name   string
			sc     scenario
			frames [][]byte
		}{"tr2-queue", scenario{dtel: dscp, rate: 10e6}, burst},
		struct {
			name   string
			sc     scenario
			frames [][]byte
		}{"tr05-queue", scenario{dtel: dscp, rate: 10e6, format: spec.ReportFormatV05}, burst[:40]})

	var paths []string
	for _, c := range cases {
		f := newFabric(t, c.sc)
		if c.name == "tr2-queue" || c.name == "tr05-queue" {
			// All at once: the queue builds up.
			for _, fr := range c.frames {
				f.sw[0].Receive(0, fr)
			}
			f.settle()
		} else {
			f.send(c.frames...)
		}
		f.close()
		if len(f.out) == 0 {
			t.Fatalf("%s: nothing captured", c.name)
		}
		path := filepath.Join(dir, c.name+".pcap")
		w := newPcap(t, path)
		for _, fr := range f.out {
			w.write(fr)
		}
		w.close(t)
		paths = append(paths, path)
	}
	return paths
}

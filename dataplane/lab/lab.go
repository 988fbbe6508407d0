package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// DefaultCollector is where `intd lab` sends reports by default.
const DefaultCollector = "127.0.0.1:32766"

// Options configure a lab.
type Options struct {
	// Topology defaults to DefaultTopology.
	Topology *Topology
	// Collector receives telemetry reports (host:port); "" sends none.
	Collector string
	// MoreCollectors are further collectors of the report session, which
	// all get every report unless DistributeByFlow spreads them by flow.
	MoreCollectors   []string
	DistributeByFlow bool
	// Clock defaults to a real clock; tests pass a *soft.ManualClock and
	// drive the lab with RunUntil.
	Clock soft.Clock
	// Flows to generate; nil means DefaultFlows between the first two hosts.
	Flows []Flow
	// NoConfig starts the switches without any DTel objects (the caller
	// configures them, e.g. through gNMI).
	NoConfig bool
	// Sender replaces the UDP report sender (tests).
	Sender report.Sender
	// FlowReport replaces sai's default flow report filter (adaptive) on
	// every switch the lab configures.
	FlowReport *sai.FlowReportFilter
}

// Flow is a generated traffic flow. Packets leave in bursts of Burst
// packets (default 1) so that the average rate is PPS.
type Flow struct {
	Name     string
	From, To string // host names
	Proto    uint8  // wire.ProtoTCP or wire.ProtoUDP
	SrcPort  uint16
	DstPort  uint16
	Size     int // L4 payload bytes
	PPS      float64
	Burst    int
	Duration time.Duration // stop after this long; 0 never
}

// DefaultFlows are a TCP-like flow and a bursty UDP flow from a to b.
func DefaultFlows(a, b string) []Flow {
	return []Flow{
		{Name: "tcp", From: a, To: b, Proto: wire.ProtoTCP, SrcPort: 40001, DstPort: 80, Size: 1000, PPS: 2000},
		{Name: "udp", From: a, To: b, Proto: wire.ProtoUDP, SrcPort: 40002, DstPort: 5001, Size: 1200, PPS: 4000, Burst: 40},
	}
}

// Lab is a running fabric.
type Lab struct {
	clock    soft.Clock
	topo     *Topology
	switches map[string]*soft.Switch
	order    []string
	nodeIDs  map[uint32]string
	pipes    map[string]*report.Pipeline
	hosts    map[string]*host
	flows    []*flowGen
	filter   *sai.FlowReportFilter

	pmu     sync.Mutex
	pending []delivery

	vmu   sync.Mutex
	views map[wire.FlowKey]*FlowView
}

type host struct {
	name string
	ip   netip.Addr
	mac  [6]byte
	sw   *soft.Switch
	port int
	mu   sync.Mutex
	rx   map[wire.FlowKey]*HostRx
	// Capture, when set, gets every frame the host receives.
	capture func([]byte)
}

// HostRx counts what a host received from one flow.
type HostRx struct{ Packets, Bytes uint64 }

type delivery struct {
	sw    *soft.Switch
	port  int
	frame []byte
}

type flowGen struct {
	Flow
	key   wire.FlowKey
	src   *host
	frame []byte
	next  int64
	end   int64
	sent  uint64
	seq   uint32
}

// FlowView is what the sink's reports say about a flow.
type FlowView struct {
	Path       []uint32 // node ids, source first
	HopLatency []uint32 // ns, per hop, source first
	QueueOcc   []uint32
	// HopCountExceeded is the INT-MD E bit of the latest packet: a hop
	// found no remaining hop count and added no metadata.
	HopCountExceeded bool
	Reports          uint64 // INT packets seen at the sink
}

// New builds a lab; Run or RunUntil drive it.
func New(opts Options) (*Lab, error) {
	t := opts.Topology
	if t == nil {
		t = DefaultTopology()
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = soft.NewRealClock()
	}
	l := &Lab{clock: clk, topo: t, switches: map[string]*soft.Switch{}, nodeIDs: map[uint32]string{},
		pipes: map[string]*report.Pipeline{}, hosts: map[string]*host{}, views: map[wire.FlowKey]*FlowView{}}
	ports := map[string][]soft.PortConfig{}
	addPort := func(ep string, ls LinkSpec) {
		sw, p, _ := splitPort(ep)
		pc := soft.PortConfig{Name: p, MTU: ls.MTU, QueueBytes: ls.QueueBytes, Rate: 1e9}
		if ls.RateMbps > 0 {
			pc.Rate = ls.RateMbps * 1e6
		}
		ports[sw] = append(ports[sw], pc)
	}
	for _, h := range t.Hosts {
		addPort(h.Port, LinkSpec{})
	}
	for _, lk := range t.Links {
		addPort(lk.A, lk)
		addPort(lk.B, lk)
	}
	for i, s := range t.Switches {
		pipe, err := report.New(report.Config{}, report.Options{Clock: clk.Now, Sender: opts.Sender})
		if err != nil {
			return nil, err
		}
		sw, err := soft.New(soft.Config{Name: s.Name, Clock: clk, Ports: ports[s.Name],
			Reporter: &tap{Pipeline: pipe, lab: l}})
		if err != nil {
			return nil, err
		}
		id := s.NodeID
		if id == 0 {
			id = uint32(i + 1)
		}
		l.nodeIDs[id] = s.Name
		l.switches[s.Name], l.pipes[s.Name] = sw, pipe
		l.order = append(l.order, s.Name)
	}
	for i, h := range t.Hosts {
		swName, p, _ := splitPort(h.Port)
		sw := l.switches[swName]
		hh := &host{name: h.Name, ip: h.IP, mac: [6]byte{2, 0, 0, 0, 0, byte(i + 1)}, sw: sw,
			port: sw.Port(p), rx: map[wire.FlowKey]*HostRx{}}
		l.hosts[h.Name] = hh
		sw.SetLink(hh.port, soft.LinkFunc(hh.receive))
	}
	for _, lk := range t.Links {
		as, ap, _ := splitPort(lk.A)
		bs, bp, _ := splitPort(lk.B)
		a, b := l.switches[as], l.switches[bs]
		ai, bi := a.Port(ap), b.Port(bp)
		a.SetLink(ai, l.link(b, bi))
		b.SetLink(bi, l.link(a, ai))
	}
	if err := l.route(); err != nil {
		return nil, err
	}
	l.filter = opts.FlowReport
	if !opts.NoConfig {
		if err := l.configure(opts.Collector, opts.MoreCollectors, opts.DistributeByFlow); err != nil {
			return nil, err
		}
	}
	flows := opts.Flows
	if flows == nil && len(t.Hosts) >= 2 {
		flows = DefaultFlows(t.Hosts[0].Name, t.Hosts[1].Name)
	}
	for _, f := range flows {
		if err := l.AddFlow(f); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Lab) link(dst *soft.Switch, port int) soft.Link {
	return soft.LinkFunc(func(f []byte) {
		l.pmu.Lock()
		l.pending = append(l.pending, delivery{sw: dst, port: port, frame: slices.Clone(f)})
		l.pmu.Unlock()
	})
}

func (h *host) receive(f []byte) {
	var p wire.Packet
	_ = (&wire.Parser{}).Parse(f, &p)
	h.mu.Lock()
	r := h.rx[p.Flow]
	if r == nil {
		r = &HostRx{}
		h.rx[p.Flow] = r
	}
	r.Packets++
	r.Bytes += uint64(len(f))
	c := h.capture
	h.mu.Unlock()
	if c != nil {
		c(f)
	}
}

// Switch returns the named switch.
func (l *Lab) Switch(name string) *soft.Switch { return l.switches[name] }

// Backends returns every switch's sai.Backend by name, for gNMI targets.
func (l *Lab) Backends() map[string]sai.Backend {
	out := map[string]sai.Backend{}
	for n, s := range l.switches {
		out[n] = s
	}
	return out
}

// SwitchNames lists the switches in topology order.
func (l *Lab) SwitchNames() []string { return slices.Clone(l.order) }

// Capture calls fn with a copy of every frame host receives.
func (l *Lab) Capture(hostName string, fn func([]byte)) {
	h := l.hosts[hostName]
	h.mu.Lock()
	h.capture = func(f []byte) { fn(slices.Clone(f)) }
	h.mu.Unlock()
}

// Inject sends frame from a host now.
func (l *Lab) Inject(hostName string, frame []byte) {
	h := l.hosts[hostName]
	h.sw.Receive(h.port, frame)
	l.settle()
}

// route installs shortest-path routes (ECMP over equal-cost ports) to
// every host's /32 on every switch.
func (l *Lab) route() error {
	type nb struct{ port, peer string }
	adj := map[string][]nb{}
	for _, lk := range l.topo.Links {
		as, ap, _ := splitPort(lk.A)
		bs, bp, _ := splitPort(lk.B)
		adj[as] = append(adj[as], nb{ap, bs})
		adj[bs] = append(adj[bs], nb{bp, as})
	}
	routes := map[string][]soft.Route{}
	for _, h := range l.topo.Hosts {
		hs, hp, _ := splitPort(h.Port)
		dist := map[string]int{hs: 0}
		queue := []string{hs}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, n := range adj[s] {
				if _, ok := dist[n.peer]; !ok {
					dist[n.peer] = dist[s] + 1
					queue = append(queue, n.peer)
				}
			}
		}
		pfx := netip.PrefixFrom(h.IP, 32)
		for s, d := range dist {
			r := soft.Route{Prefix: pfx}
			if d == 0 {
				r.Ports = []string{hp}
			} else {
				for _, n := range adj[s] {
					if dist[n.peer] == d-1 {
						r.Ports = append(r.Ports, n.port)
					}
				}
			}
			routes[s] = append(routes[s], r)
		}
	}
	for name, sw := range l.switches {
		if err := sw.SetRoutes(routes[name]); err != nil {
			return err
		}
	}
	return nil
}

// AddFlow starts generating f.
func (l *Lab) AddFlow(f Flow) error {
	src, dst := l.hosts[f.From], l.hosts[f.To]
	if src == nil || dst == nil {
		return fmt.Errorf("lab: flow %s: unknown host", f.Name)
	}
	if f.Burst <= 0 {
		f.Burst = 1
	}
	if f.PPS <= 0 {
		f.PPS = 1000
	}
	g := &flowGen{Flow: f, src: src, next: l.clock.Now()}
	if f.Duration > 0 {
		g.end = g.next + int64(f.Duration)
	}
	g.frame = buildFrame(src, dst, f)
	g.key = wire.FlowKey{Src: src.ip, Dst: dst.ip, SrcPort: f.SrcPort, DstPort: f.DstPort, Proto: f.Proto}
	l.pmu.Lock()
	l.flows = append(l.flows, g)
	l.pmu.Unlock()
	return nil
}

func buildFrame(src, dst *host, f Flow) []byte {
	l4 := wire.UDPLen
	if f.Proto == wire.ProtoTCP {
		l4 = wire.TCPMinLen
	}
	fr := make([]byte, wire.EthernetLen+wire.IPv4MinLen+l4+f.Size)
	_ = wire.PutEthernet(fr, dst.mac, src.mac, wire.EtherTypeIPv4)
	_ = wire.IPv4Header{TotalLen: uint16(len(fr) - wire.EthernetLen), Flags: 2, TTL: 64, Proto: f.Proto,
		Src: src.ip.As4(), Dst: dst.ip.As4()}.Put(fr[wire.EthernetLen:])
	seg := fr[wire.EthernetLen+wire.IPv4MinLen:]
	if f.Proto == wire.ProtoTCP {
		_ = wire.TCPHeader{SrcPort: f.SrcPort, DstPort: f.DstPort, Seq: 1, Flags: 0x18, Window: 65535}.Put(seg)
	} else {
		_ = wire.UDPHeader{SrcPort: f.SrcPort, DstPort: f.DstPort, Length: uint16(len(seg))}.Put(seg)
	}
	for i := l4; i < len(seg); i++ {
		seg[i] = byte(i)
	}
	return fr
}

// send emits one packet of g, with a fresh TCP sequence number and
// checksums.
func (g *flowGen) send() {
	fr := g.frame
	var p wire.Packet
	_ = (&wire.Parser{}).Parse(fr, &p)
	if g.Proto == wire.ProtoTCP {
		binary.BigEndian.PutUint32(fr[p.L4+4:], g.seq)
		g.seq += uint32(g.Size)
	}
	wire.SetL4Checksum(fr, &p, true)
	g.sent++
	g.src.sw.Receive(g.src.port, fr)
}

// step runs everything due at the clock's current time and returns the
// time of the next event.
func (l *Lab) step() int64 {
	now := l.clock.Now()
	l.pmu.Lock()
	flows := slices.Clone(l.flows)
	l.pmu.Unlock()
	next := int64(math.MaxInt64)
	for _, g := range flows {
		for g.next <= now && (g.end == 0 || g.next < g.end) {
			for i := 0; i < g.Burst; i++ {
				g.send()
				l.settle()
			}
			g.next += int64(float64(g.Burst) / g.PPS * 1e9)
		}
		if g.end == 0 || g.next < g.end {
			next = min(next, g.next)
		}
	}
	l.settle()
	for _, n := range l.order {
		next = min(next, l.switches[n].Poll())
		l.settle()
	}
	return next
}

// settle delivers frames in flight until none is left.
func (l *Lab) settle() {
	for {
		l.pmu.Lock()
		p := l.pending
		l.pending = nil
		l.pmu.Unlock()
		if len(p) == 0 {
			return
		}
		for _, d := range p {
			d.sw.Receive(d.port, d.frame)
		}
	}
}

// RunUntil drives a lab on a *soft.ManualClock up to time end.
func (l *Lab) RunUntil(end int64) {
	clk := l.clock.(*soft.ManualClock)
	for {
		next := l.step()
		if next > end {
			clk.Set(max(end, clk.Now()))
			l.step()
			return
		}
		clk.Set(max(next, clk.Now()))
	}
}

// Run drives the lab on the real clock until ctx is done, writing a
// summary to out every interval (0: never).
func (l *Lab) Run(ctx context.Context, out io.Writer, every time.Duration) error {
	// Traffic starts now, not when the flows were added: a generator
	// catching up on the time spent configuring would send one long burst.
	now := l.clock.Now()
	l.pmu.Lock()
	for _, g := range l.flows {
		if d := now - g.next; d > 0 {
			g.next += d
			if g.end != 0 {
				g.end += d
			}
		}
	}
	l.pmu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastSummary := time.Now()
	for {
		next := l.step()
		if out != nil && every > 0 && time.Since(lastSummary) >= every {
			lastSummary = time.Now()
			l.Summary(ctx, out)
		}
		wait := time.Duration(next - l.clock.Now())
		wait = min(max(wait, 20*time.Microsecond), 50*time.Millisecond)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return l.close()
		case <-timer.C:
		}
	}
}

func (l *Lab) close() error {
	for _, p := range l.pipes {
		_ = p.Close()
	}
	return nil
}

// Close stops the reporting pipelines.
func (l *Lab) Close() error { return l.close() }

// View returns what the sink reported about flow k.
func (l *Lab) View(k wire.FlowKey) (FlowView, bool) {
	l.vmu.Lock()
	defer l.vmu.Unlock()
	v, ok := l.views[k]
	if !ok {
		return FlowView{}, false
	}
	return *v, true
}

// tap passes events to the reporting pipeline and keeps, for the summary,
// the path and hop latencies of each flow from the sink's INT-MD stacks.
type tap struct {
	*report.Pipeline
	lab *Lab
}

func (t *tap) Report(ev *report.Event) {
	if ev.Kind == report.KindFlow && ev.INT >= 0 && ev.INTLen > 0 && ev.INTType == spec.TypeMD {
		t.lab.observe(ev)
	}
	t.Pipeline.Report(ev)
}

func (l *Lab) observe(ev *report.Event) {
	h, st, err := wire.DecodeMD(ev.Packet[ev.INT:ev.INT+ev.INTLen], -1)
	if err != nil {
		return
	}
	n := st.Count()
	v := FlowView{Path: make([]uint32, n), HopLatency: make([]uint32, n), QueueOcc: make([]uint32, n),
		HopCountExceeded: h.HopCountExceeded}
	for i := 0; i < n; i++ {
		var m wire.HopMetadata
		if wire.DecodeHop(st.Hop(n-1-i), h.Instructions, &m) == nil {
			v.Path[i], v.HopLatency[i], v.QueueOcc[i] = m.NodeID, m.HopLatency, m.QueueOccupancy
		}
	}
	l.vmu.Lock()
	if old := l.views[ev.Flow]; old != nil {
		v.Reports = old.Reports
	}
	v.Reports++
	l.views[ev.Flow] = &v
	l.vmu.Unlock()
}

// Summary writes a short human-readable state of the lab: per flow the
// packets sent and received and what the sink's INT metadata says (path,
// latency at each hop), then per switch its packet, INT and report
// counters. Call it from Run's goroutine (Run does, every interval) or when
// the lab is not running: it reads the traffic generator's counters.
func (l *Lab) Summary(ctx context.Context, out io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "--- intd lab %s\n", time.Now().Format("15:04:05"))
	l.pmu.Lock()
	flows := slices.Clone(l.flows)
	l.pmu.Unlock()
	for _, g := range flows {
		var rx HostRx
		for _, h := range l.hosts {
			h.mu.Lock()
			if r := h.rx[g.key]; r != nil {
				rx = *r
			}
			h.mu.Unlock()
		}
		fmt.Fprintf(&b, "flow %-4s %s:%d -> %s:%d  sent %d received %d\n", g.Name, g.key.Src, g.SrcPort,
			g.key.Dst, g.DstPort, g.sent, rx.Packets)
		v, ok := l.View(g.key)
		if !ok {
			b.WriteString("          no INT seen at a sink yet\n")
			continue
		}
		var path, lat []string
		for i, id := range v.Path {
			name := l.nodeIDs[id]
			if name == "" {
				name = fmt.Sprintf("node %d", id)
			}
			path = append(path, name)
			lat = append(lat, fmt.Sprintf("%s %s", name, roundLatency(time.Duration(v.HopLatency[i]))))
		}
		fmt.Fprintf(&b, "          path %s", strings.Join(path, " -> "))
		if v.HopCountExceeded {
			b.WriteString(" (hop count exceeded: later hops added no metadata)")
		}
		fmt.Fprintf(&b, "\n          hop latency %s\n", strings.Join(lat, ", "))
	}
	names := slices.Clone(l.order)
	sort.Strings(names)
	for _, n := range names {
		st, err := l.switches[n].Stats(ctx)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%-4s packets in %d out %d dropped %d | INT added %d transit %d removed %d | reports sent: flow %d drop %d queue %d",
			n, st.Node.InPackets, st.Node.OutPackets, st.Node.DroppedPackets, st.Node.IntInserted, st.Node.IntTransited,
			st.Node.IntStripped, st.Reports[sai.ReportFlow].Sent, st.Reports[sai.ReportDrop].Sent, st.Reports[sai.ReportQueue].Sent)
		var undelivered uint64
		for _, rs := range st.ReportSessions {
			undelivered += rs.SendErrors
		}
		if undelivered > 0 {
			// Refused by ICMP: nothing listens at the collector address.
			fmt.Fprintf(&b, " | report packets undelivered %d (is a collector listening?)", undelivered)
		}
		b.WriteString("\n")
	}
	_, _ = io.WriteString(out, b.String())
}

// roundLatency keeps three significant digits.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d.Round(10 * time.Nanosecond)
}

// Topology returns a copy of the lab's topology.
func (l *Lab) Topology() *Topology { return l.topo.clone() }

// NodeID returns the INT node id of the named switch (0 if there is none).
func (l *Lab) NodeID(name string) uint32 {
	for id, n := range l.nodeIDs {
		if n == name {
			return id
		}
	}
	return 0
}

// HostPorts lists the named switch's host-facing ports (INT source and
// sink), in topology order.
func (l *Lab) HostPorts(name string) []string {
	var out []string
	for _, h := range l.topo.Hosts {
		if s, p, _ := splitPort(h.Port); s == name {
			out = append(out, p)
		}
	}
	return out
}

// FabricPorts lists the named switch's ports towards other switches, in
// topology order.
func (l *Lab) FabricPorts(name string) []string {
	var out []string
	for _, lk := range l.topo.Links {
		for _, ep := range []string{lk.A, lk.B} {
			if s, p, _ := splitPort(ep); s == name {
				out = append(out, p)
			}
		}
	}
	return out
}

// FlowKey returns the 5-tuple of the generated flow called name.
func (l *Lab) FlowKey(name string) (wire.FlowKey, bool) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	for _, g := range l.flows {
		if g.Name == name {
			return g.key, true
		}
	}
	return wire.FlowKey{}, false
}

// Reroute reinstalls the lab's shortest-path routes on every switch (after
// a test changed them with Switch(name).SetRoutes).
func (l *Lab) Reroute() error { return l.route() }

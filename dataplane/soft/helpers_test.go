package soft

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Test frames come from wiretest, shared by both dataplanes' tests.
var (
	ipv4Frame = wiretest.IPv4Frame
	tcpFrame  = wiretest.TCPFrame
	udpFrame  = wiretest.UDPFrame
)

// tunnelFrame wraps inner (an Ethernet frame) in IPv4/UDP and a tunnel
// header: "gpe" (next protocol Ethernet), "geneve" or "vxlan".
func tunnelFrame(kind, src, dst string, vni uint32, inner []byte, csum bool) []byte {
	var th [8]byte
	var dport uint16
	switch kind {
	case "gpe":
		_ = wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: 3, VNI: vni}.Put(th[:])
		dport = spec.PortVXLANGPE
	case "geneve":
		_ = wire.Geneve{Protocol: wire.EtherTypeTEB, VNI: vni}.Put(th[:])
		dport = spec.PortGeneve
	case "vxlan":
		th[0] = 0x08
		binary.BigEndian.PutUint32(th[4:], vni<<8)
		dport = wire.PortVXLAN
	}
	return udpFrame(src, dst, 40000, dport, append(th[:], inner...), csum)
}

// greFrame wraps an IPv4 packet (inner without Ethernet) in IPv4/GRE.
func greFrame(src, dst string, innerIP []byte) []byte {
	g := make([]byte, 4+len(innerIP))
	_ = wire.PutGRE(g, wire.EtherTypeIPv4)
	copy(g[4:], innerIP)
	return ipv4Frame(src, dst, wire.ProtoGRE, 0, g, false)
}

// capture records frames transmitted on a link.
type capture struct {
	mu     sync.Mutex
	frames [][]byte
	next   func([]byte)
}

func (c *capture) Transmit(f []byte) {
	c.mu.Lock()
	c.frames = append(c.frames, slices.Clone(f))
	c.mu.Unlock()
	if c.next != nil {
		c.next(f)
	}
}

func (c *capture) last(t *testing.T) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.frames) == 0 {
		t.Fatal("no frame captured")
	}
	return c.frames[len(c.frames)-1]
}

func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.frames)
}

// recorder is a report.Reporter keeping copies of events.
type recorder struct {
	mu  sync.Mutex
	evs []report.Event
}

func (r *recorder) Report(ev *report.Event) {
	e := *ev
	e.Packet = slices.Clone(ev.Packet)
	e.Hop.DomainSpecific = slices.Clone(ev.Hop.DomainSpecific)
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) kind(k report.Kind) []report.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []report.Event
	for _, e := range r.evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// line is h1 - s1 - s2 - ... - sN - h2 with synchronous links. Every switch
// has port "p1" (towards h1) and "p2" (towards h2).
type line struct {
	clk   *ManualClock
	sw    []*Switch
	rec   []*recorder
	taps  []*capture // taps[i]: frames leaving sw[i] towards h2 (taps[N-1] is h2)
	back  *capture   // frames reaching h1
	dtel  []sai.OID
	sess  sai.OID
	entry sai.OID
}

type lineOpts struct {
	n        int
	mtu      []int   // per switch egress MTU towards h2 (0 default)
	rate     []int64 // per switch rate towards h2
	qbytes   []int
	dtel     func(i int, a *sai.DTelAttrs)
	session  sai.IntSessionAttrs
	match    sai.WatchlistMatch
	action   func(a *sai.WatchlistAction)
	noSource bool
}

func newLine(t testing.TB, o lineOpts) *line {
	t.Helper()
	if o.n == 0 {
		o.n = 3
	}
	l := &line{clk: NewManualClock(1_000_000_000_000)}
	for i := 0; i < o.n; i++ {
		l.rec = append(l.rec, &recorder{})
		l.taps = append(l.taps, &capture{})
	}
	l.back = &capture{}
	for i := 0; i < o.n; i++ {
		p2 := PortConfig{Name: "p2"}
		if i < len(o.mtu) {
			p2.MTU = o.mtu[i]
		}
		if i < len(o.rate) {
			p2.Rate = o.rate[i]
		}
		if i < len(o.qbytes) {
			p2.QueueBytes = o.qbytes[i]
		}
		sw, err := New(Config{
			Name: "s" + string(rune('1'+i)), Clock: l.clk, Reporter: l.rec[i],
			Ports: []PortConfig{{Name: "p1"}, p2},
			Routes: []Route{
				{Prefix: netip.MustParsePrefix("10.0.2.0/24"), Ports: []string{"p2"}},
				{Prefix: netip.MustParsePrefix("10.0.1.0/24"), Ports: []string{"p1"}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		l.sw = append(l.sw, sw)
	}
	for i, sw := range l.sw {
		if i+1 < o.n {
			next := l.sw[i+1]
			l.taps[i].next = func(f []byte) { next.Receive(0, f) }
		}
		sw.SetLink(1, l.taps[i])
		if i > 0 {
			prev := l.sw[i-1]
			sw.SetLink(0, LinkFunc(func(f []byte) { prev.Receive(1, f) }))
		} else {
			sw.SetLink(0, l.back)
		}
		d := sai.DefaultDTelAttrs()
		d.SwitchID = uint32(i + 1)
		d.IntEndpointEnable, d.IntTransitEnable = true, true
		d.PostcardEnable, d.DropReportEnable, d.QueueReportEnable = true, true, true
		d.IntL4DSCP = sai.DSCPMatch{Value: 0x17, Mask: 0x3f}
		if i == o.n-1 {
			d.SinkPortList = []string{"p2"}
		}
		if o.dtel != nil {
			o.dtel(i, &d)
		}
		oid, err := sw.Create(d)
		if err != nil {
			t.Fatal(err)
		}
		l.dtel = append(l.dtel, oid)
	}
	if o.noSource {
		return l
	}
	sa := o.session
	if sa.Instructions == 0 {
		sa = sai.DefaultIntSessionAttrs()
	}
	var err error
	if l.sess, err = l.sw[0].Create(sa); err != nil {
		t.Fatal(err)
	}
	act := sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: l.sess, FlowSamplePercent: 100}
	if o.action != nil {
		o.action(&act)
	}
	if act.FlowOp != sai.FlowOpInt {
		act.IntSession = sai.NullOID
	}
	if l.entry, err = l.sw[0].Create(sai.WatchlistEntryAttrs{Priority: 10, Match: o.match, Action: act}); err != nil {
		t.Fatal(err)
	}
	return l
}

// send injects a frame from h1 and drains every queue.
func (l *line) send(f []byte) { l.sw[0].Receive(0, f) }

// settle advances the clock until every queue is empty.
func (l *line) settle() {
	for {
		next := int64(1<<63 - 1)
		for _, sw := range l.sw {
			next = min(next, sw.Poll())
		}
		if next == 1<<63-1 {
			return
		}
		if next > l.clk.Now() {
			l.clk.Set(next)
		}
	}
}

func (l *line) h2() *capture { return l.taps[len(l.taps)-1] }

// expectTTL returns f as it looks after n routed hops.
func expectTTL(f []byte, n int) []byte {
	g := slices.Clone(f)
	h := g[wire.EthernetLen:]
	h[8] -= uint8(n)
	binary.BigEndian.PutUint16(h[10:], wire.IPv4HeaderChecksum(h[:20]))
	return g
}

func parse(t testing.TB, pr *wire.Parser, f []byte) wire.Packet {
	t.Helper()
	var p wire.Packet
	if err := pr.Parse(f, &p); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

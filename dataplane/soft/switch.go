package soft

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Switch is one software INT switch. It implements sai.Backend; frames
// enter through Receive and leave through each port's Link, after an
// egress queue drained at the port's rate (see Poll).
//
// A Switch is safe for concurrent use: one mutex serialises packets,
// configuration and Stats (configuration changes hold a second one, and
// let the first go while tunnel output is set up).
type Switch struct {
	mu    sync.Mutex
	cfgMu sync.Mutex // serialises Create, Set and Remove, which let mu go while tunnel output changes
	name  string
	clock Clock

	ports      []port
	portByName map[string]int
	routes     []cRoute
	noTTL      bool
	maxFrame   int
	noTunnels  string              // why session tunnels cannot be configured, "" if they can
	tunOutput  func(on bool) error // Config.TunnelOutput, called with cfgMu held and mu not
	tunnelsOn  bool                // tunOutput is on

	// sai objects
	store     *sai.Store
	wlStats   map[sai.OID]*sai.WatchlistEntryStats
	sessStats map[sai.OID]*sai.IntSessionStats
	qrStats   map[sai.OID]*qrState
	cfg       *compiled
	gen       uint64 // bumps on any change the flow cache depends on

	reporter    report.Reporter
	reportErr   error // last error configuring a *report.Pipeline
	innerParser wire.Parser
	cache       []cacheSlot
	cacheMask   uint64

	// counters
	node      sai.Counters
	drops     map[sai.DropReason]uint64
	generated [4]uint64 // by report.Kind

	free      []*pbuf
	freeWhole []*pbuf // buffers of super-packets forwarded whole
	queued    int     // bytes in all queues (the shared buffer)

	// scratch, reused for every packet
	inner wire.Packet
	hop   wire.HopMetadata
	ev    report.Event
	hdr   [4 * 64]byte
}

type port struct {
	cfg   PortConfig
	link  Link
	whole WholeLink  // link, when it sends super-packets whole
	tun   TunnelLink // link, when it sends UDP-tunnelled super-packets whole
	tcp   TCPLink    // link, when it sends TCP super-packets with fresh offload state
	ctr   sai.Counters
	qs    []queue // by queue id
	// The packet being sent (dequeued, still counted in its queue) and
	// when the link is free again.
	inflight  *pbuf
	busyUntil int64
	// tx utilisation over windows of utilWindow ns
	winStart, winBytes int64
	util               uint32
	utilValid          bool
}

type cRoute struct {
	prefix  Route
	ports   []int
	rewrite bool
}

// pbuf is a packet buffer with the state carried from ingress to egress.
type pbuf struct {
	store []byte
	data  []byte // the frame, a prefix of store
	pkt   wire.Packet
	in    int
	out   int
	tIn   int64
	arr   int64 // enqueue time
	dep   int64 // departure (egress) time
	queue uint8 // egress queue
	occ   uint32
	bufOc uint32
	entry *wlEntry
	op    sai.FlowOp
	// whole: a GSO super-packet forwarded as it came (ReceiveWhole),
	// with its offload metadata.
	whole   bool
	offload Offload
	segIP   int // IP length of its largest segment
	// unsampled: a peeking lookup found the packet sampled out
	unsampled bool
	// A super-packet leaving through a TunnelLink (tunOut: in a session
	// tunnel) or a TCPLink (tcpOut: taken out of one), in segments of
	// mss bytes of TCP payload.
	tunOut, tcpOut bool
	mss            int
}

// New builds a switch from cfg. Port names must be unique and non-empty,
// routes must name existing ports.
func New(cfg Config) (*Switch, error) {
	s := &Switch{
		name:       cfg.Name,
		clock:      cfg.Clock,
		portByName: map[string]int{},
		noTTL:      cfg.NoTTLDecrement,
		noTunnels:  cfg.NoSessionTunnels,
		tunOutput:  cfg.TunnelOutput,
		maxFrame:   cfg.MaxFrame,
		wlStats:    map[sai.OID]*sai.WatchlistEntryStats{},
		sessStats:  map[sai.OID]*sai.IntSessionStats{},
		qrStats:    map[sai.OID]*qrState{},
		reporter:   cfg.Reporter,
		drops:      map[sai.DropReason]uint64{},
		cfg:        &compiled{},
	}
	if s.clock == nil {
		s.clock = NewRealClock()
	}
	s.store = sai.NewStore(s.Capabilities(), s.checkAttrs)
	if s.maxFrame <= 0 {
		s.maxFrame = defaultMaxFrame
	}
	for _, r := range spec.DropReasons() {
		s.drops[r] = 0 // pre-size so counting never allocates
	}
	n := 4096
	if cfg.FlowCacheSize > 0 {
		n = 16
		for n < cfg.FlowCacheSize {
			n <<= 1
		}
	}
	s.cache, s.cacheMask = make([]cacheSlot, n), uint64(n-1)
	for i, pc := range cfg.Ports {
		if pc.Name == "" {
			return nil, fmt.Errorf("soft: port %d has no name", i)
		}
		if _, dup := s.portByName[pc.Name]; dup {
			return nil, fmt.Errorf("soft: port %q is listed twice", pc.Name)
		}
		if pc.ID == 0 {
			pc.ID = uint16(i + 1)
		}
		if pc.L2ID == 0 {
			pc.L2ID = 0x10000 + uint32(pc.ID)
		}
		if pc.MTU == 0 {
			pc.MTU = defaultMTU
		}
		if pc.QueueBytes == 0 {
			pc.QueueBytes = defaultQueueBytes
		}
		if pc.Queues == 0 {
			pc.Queues = 1
		}
		if pc.Queues < 1 || pc.Queues > MaxQueues {
			return nil, fmt.Errorf("soft: port %q: %d queues (1 to %d)", pc.Name, pc.Queues, MaxQueues)
		}
		s.portByName[pc.Name] = i
		s.ports = append(s.ports, port{cfg: pc, qs: make([]queue, pc.Queues)})
		s.ports[i].setLink(pc.Link)
	}
	if err := s.setRoutes(cfg.Routes); err != nil {
		return nil, err
	}
	s.recompile(sai.ObjectTypeNull)
	return s, nil
}

// Name returns the switch name.
func (s *Switch) Name() string { return s.name }

// Clock returns the switch's clock.
func (s *Switch) Clock() Clock { return s.clock }

// Port returns the index of the named port, or -1.
func (s *Switch) Port(name string) int {
	if i, ok := s.portByName[name]; ok {
		return i
	}
	return -1
}

// Ports lists the port names in index order.
func (s *Switch) Ports() []string {
	out := make([]string, len(s.ports))
	for i := range s.ports {
		out[i] = s.ports[i].cfg.Name
	}
	return out
}

// SetLink connects port i's transmit side to l.
func (s *Switch) SetLink(i int, l Link) {
	s.mu.Lock()
	s.ports[i].setLink(l)
	s.mu.Unlock()
}

func (p *port) setLink(l Link) {
	p.link = l
	p.whole, _ = l.(WholeLink)
	p.tun, _ = l.(TunnelLink)
	p.tcp, _ = l.(TCPLink)
}

// IsTunnelEnd says whether a session tunnel to a arriving on port in
// ends at this switch: a is its tunnel address (INT endpoint on) and in
// is no sink port (a tunnel from outside the INT domain is none of its).
func (s *Switch) IsTunnelEnd(in int, a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return in >= 0 && in < len(s.cfg.sink) && !s.cfg.sink[in] && s.cfg.tunnelAddr(a)
}

// SetRoutes replaces the static routes.
func (s *Switch) SetRoutes(routes []Route) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setRoutes(routes)
}

func (s *Switch) setRoutes(routes []Route) error {
	var rs []cRoute
	for _, r := range routes {
		if !r.Prefix.IsValid() || len(r.Ports) == 0 {
			return fmt.Errorf("soft: route %v: needs a prefix and a port", r.Prefix)
		}
		cr := cRoute{prefix: r, rewrite: r.NextHopMAC != [6]byte{}}
		cr.prefix.Prefix = r.Prefix.Masked()
		for _, p := range r.Ports {
			i, ok := s.portByName[p]
			if !ok {
				return fmt.Errorf("soft: route %v: %w", r.Prefix, errf(sai.ErrNotFound, "port %q", p))
			}
			cr.ports = append(cr.ports, i)
		}
		rs = append(rs, cr)
	}
	slices.SortStableFunc(rs, func(a, b cRoute) int { return cmp.Compare(b.prefix.Prefix.Bits(), a.prefix.Prefix.Bits()) })
	s.routes = rs
	s.gen++
	if s.cfg != nil {
		s.cfg.gen = s.gen
	}
	return nil
}

// route finds the longest matching route for p's outer destination.
func (s *Switch) route(p *wire.Packet, h uint64) (int, int) {
	if p.L3 < 0 {
		return -1, -1
	}
	for i := range s.routes {
		r := &s.routes[i]
		if r.prefix.Prefix.Contains(p.Flow.Dst) {
			return i, r.ports[int(h%uint64(len(r.ports)))]
		}
	}
	return -1, -1
}

func (s *Switch) alloc() *pbuf {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return &pbuf{store: make([]byte, s.maxFrame+intRoom)}
}

// allocWhole returns a buffer for a super-packet (ReceiveWhole).
func (s *Switch) allocWhole() *pbuf {
	if n := len(s.freeWhole); n > 0 {
		b := s.freeWhole[n-1]
		s.freeWhole = s.freeWhole[:n-1]
		return b
	}
	return &pbuf{store: make([]byte, maxWhole+intRoom), whole: true}
}

func (s *Switch) release(b *pbuf) {
	b.entry = nil
	if b.whole {
		s.freeWhole = append(s.freeWhole, b)
		return
	}
	s.free = append(s.free, b)
}

// Receive processes a frame arriving on port index in at the clock's
// current time. The frame is copied; the caller keeps it.
func (s *Switch) Receive(in int, frame []byte) {
	s.mu.Lock()
	now := s.clock.Now()
	s.receive(in, frame, now, now)
	s.mu.Unlock()
}

// ReceiveAt is Receive for a frame that arrived at rx, a clock time in
// the past (an AF_PACKET port's kernel receive timestamp): the ingress
// timestamp and hop latency count from rx, queueing from now.
func (s *Switch) ReceiveAt(in int, frame []byte, rx int64) {
	s.mu.Lock()
	now := s.clock.Now()
	s.receive(in, frame, min(rx, now), now)
	s.mu.Unlock()
}

// ReceiveWhole is ReceiveAt for a GSO super-packet (frame with its
// receiving port's offload metadata o), forwarded whole when nothing in
// it is instrumented: it carries no INT, no watchlist entry acts on it
// (none matches, or flow or packet sampling leaves it out), and it
// leaves through a port whose Link is a WholeLink, whose queue holds at
// least four such packets and whose MTU its segments fit (segIP: the IP
// length of its largest segment). It returns false without doing
// anything otherwise: the caller then cuts the packet into
// segments and hands each to ReceiveAt, so that every segment that gets
// INT (or a postcard, a queue report) is one on the wire. Counters count
// a super-packet forwarded whole as one packet, as the kernel's
// interface counters do. Unlike ReceiveAt, it rewrites frame in place
// (headers) when it returns true: the caller is done with it. A
// super-packet of an INT session tunnel (TunnelLink, TCPLink) goes
// whole too: into the tunnel at its source, with a hop pushed at transit
// nodes, out of it at its sink; frame then grows in place into its
// capacity, and one in a tunnel may be changed even when refused (it
// cannot be cut into segments).
func (s *Switch) ReceiveWhole(in int, frame []byte, rx int64, o *Offload, segIP int) bool {
	if len(frame) > maxWhole {
		return false
	}
	s.mu.Lock()
	now := s.clock.Now()
	b := s.allocWhole()
	b.offload, b.segIP = *o, segIP
	ok := s.receiveWhole(in, frame, b, min(rx, now), now)
	s.mu.Unlock()
	return ok
}

// Poll transmits every queued packet whose departure time has come and
// returns the next departure time (math.MaxInt64 when all queues are
// empty).
func (s *Switch) Poll() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	next := int64(math.MaxInt64)
	for i := range s.ports {
		p := &s.ports[i]
		s.drain(p, now)
		next = min(next, s.nextDeparture(p))
	}
	return next
}

// NextDeparture returns the earliest departure time of a queued packet,
// math.MaxInt64 when none.
func (s *Switch) NextDeparture() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := int64(math.MaxInt64)
	for i := range s.ports {
		next = min(next, s.nextDeparture(&s.ports[i]))
	}
	return next
}

// QueueBytes returns the bytes queued at port i, in all its queues.
func (s *Switch) QueueBytes(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.ports[i].qs {
		n += q.bytes
	}
	return n
}

func (s *Switch) countDrop(in int, r sai.DropReason) {
	s.drops[r]++
	s.node.DroppedPackets++
	s.ports[in].ctr.DroppedPackets++
}

func (s *Switch) receive(in int, frame []byte, rx, now int64) {
	ip := &s.ports[in]
	ip.ctr.InPackets++
	s.node.InPackets++
	if len(frame) > s.maxFrame {
		s.countDrop(in, spec.DropUnknown)
		return
	}
	s.process(in, frame, s.alloc(), rx, now)
}

// receiveWhole is receive for a super-packet in b (ReceiveWhole); false
// when it is not to be forwarded whole, and then nothing was done.
func (s *Switch) receiveWhole(in int, frame []byte, b *pbuf, rx, now int64) bool {
	if !s.process(in, frame, b, rx, now) {
		s.release(b)
		return false
	}
	return true
}

// process runs the ingress pipeline on frame, copied into b (a
// super-packet, b.whole, is worked on in place). For a super-packet it
// first checks that it can be forwarded whole and returns false, having
// changed nothing, when not.
func (s *Switch) process(in int, frame []byte, b *pbuf, rx, now int64) bool {
	c := s.cfg
	if b.whole {
		// enqueue copies it only if it has to wait.
		b.data = frame
	} else {
		b.data = b.store[:len(frame)]
		copy(b.data, frame)
	}
	b.in, b.tIn, b.out, b.queue = in, rx, -1, 0
	b.tunOut, b.tcpOut = false, false
	// A packet from outside the INT domain (through a sink port) is never
	// INT, whatever its DSCP or ports say.
	edge := c.sink[in]
	pr := &c.parser
	if edge {
		pr = &c.edgeParser
	}
	bad := false
	if err := pr.Parse(b.data, &b.pkt); err != nil {
		if b.whole {
			return false
		}
		if s.innerParser.Parse(b.data, &b.pkt) != nil {
			s.dropPkt(b, in, spec.DropUnknown, false)
			return true
		}
		// Only the INT headers (version, length, type) or a tunnel's
		// options are bad; from outside the domain, a plain packet.
		bad = !edge
	}
	if !s.arrive(b, c, edge) {
		return false
	}
	if b.pkt.INT >= 0 && b.pkt.INTType == spec.TypeMD && c.dtel != nil {
		h := b.data[b.pkt.INT:]
		inst := wire.Instructions(binary.BigEndian.Uint16(h[4:]))
		hopML, stack := int(h[2]&0x1f), (b.pkt.INTLen-wire.MDHeaderLen)/4
		// Hop ML cannot hold what the bitmap asks for, or the stack is
		// not whole hops.
		if hopML < inst.Words() || hopML == 0 && stack > 0 || hopML > 0 && stack%hopML != 0 {
			bad = true
			_ = s.innerParser.Parse(b.data, &b.pkt)
		}
	}
	if b.pkt.Fragment {
		// IP fragments are forwarded untouched, as on the eBPF
		// dataplane: no watchlist, no INT step (docs/fragments.md).
		b.pkt.INT, bad = -1, false
	}
	var ent *wlEntry
	op, rt, out := sai.FlowOpNop, -1, -1
	if b.pkt.Fragment {
		rt, out = s.route(&b.pkt, b.pkt.Flow.Hash(0))
	} else if bad {
		rt, out = s.route(&b.pkt, b.pkt.Flow.Hash(0))
		b.out = out
		if !s.malformed(b, c) {
			return true
		}
	} else {
		ent, op, rt, out = s.lookup(c, b, b.whole)
	}
	if b.whole {
		if rt < 0 || !s.wholeFits(c, b, ent, op, out, len(frame)) {
			return false
		}
		if op == sai.FlowOpInt {
			// Counted by the sampler now that it goes whole (the lookup
			// above only peeked; refused, its segments are counted).
			ent, op, rt, out = s.lookup(c, b, false)
			if op != sai.FlowOpInt && !s.wholeOut(out, len(frame), b.segIP) {
				return false
			}
		}
		s.ports[in].ctr.InPackets++
		s.node.InPackets++
	}
	b.entry, b.op = ent, op
	if b.whole {
		countUnsampled(b)
	}
	if ent != nil {
		ent.stats.MatchedPackets++
		ent.stats.MatchedBytes += uint64(len(frame))
	}
	if rt < 0 {
		s.dropPkt(b, in, spec.DropRoutingMiss, false)
		return true
	}
	if !s.noTTL && !s.decTTL(b) {
		s.dropPkt(b, in, spec.DropIPTTLZero, false)
		return true
	}
	if edge && c.remark && !c.sink[out] && !b.pkt.Fragment {
		s.remark(b, c)
	}
	if r := &s.routes[rt]; r.rewrite {
		copy(b.data[0:6], r.prefix.NextHopMAC[:])
		copy(b.data[6:12], s.ports[out].cfg.MAC[:])
	}
	b.out = out
	s.enqueue(b, now)
	return true
}

// wholeOut says whether a super-packet of n bytes whose segments are IP
// datagrams of up to segIP bytes can leave whole through port out: its
// link sends super-packets, its queue holds four of them (a shaped port's
// short queue takes segments, so that tail drops and queue reports
// see packets as they will be on the wire) and its MTU the segments. A
// queue report sees a super-packet as one packet of its size.
func (s *Switch) wholeOut(out, n, segIP int) bool {
	if out < 0 || out >= len(s.ports) {
		return false
	}
	p := &s.ports[out]
	return p.whole != nil && 4*n <= p.cfg.QueueBytes && segIP > 0 && segIP <= p.cfg.MTU
}

// arrive handles a session tunnel packet on arrival: one to this node's
// tunnel address from inside the domain is routed by its inner packet,
// towards the sink port where the tunnel is removed. A super-packet in a
// tunnel is worked on in place (the caller's receive buffer has room to
// grow it): refused, it could not be cut into segments anyway. It
// returns false for a super-packet with INT in no session tunnel, which
// is not taken whole.
func (s *Switch) arrive(b *pbuf, c *compiled, edge bool) bool {
	if b.pkt.INT < 0 {
		return true
	}
	if c.dtel == nil {
		return !b.whole
	}
	dst, ok := wire.SessionTunnelInner(b.data, &b.pkt)
	if ok && !edge && c.tunnelAddr(b.pkt.Flow.Dst) {
		wire.SetSessionTunnelDst(b.data, &b.pkt, dst)
	}
	return ok || !b.whole
}

// wholeFits says whether super-packet b of n bytes, with flow op op,
// can leave whole through port out: plain (wholeOut), into a session
// tunnel at its source (tunnelSource), or in one at a transit node or
// out of it at its sink.
func (s *Switch) wholeFits(c *compiled, b *pbuf, ent *wlEntry, op sai.FlowOp, out, n int) bool {
	if out < 0 || out >= len(s.ports) {
		return false
	}
	p := &s.ports[out]
	if 4*n > p.cfg.QueueBytes || b.segIP <= 0 {
		return false
	}
	pk := &b.pkt
	switch {
	case pk.INT < 0 && op == sai.FlowOpNop:
		// A TCP super-packet in a VXLAN-GPE tunnel (its port reports it
		// as plain TCP) leaves whole only through a TunnelLink, which
		// tells the device where the tunnel is; here it is cut instead.
		if gpeTunnelled(b) {
			return false
		}
		return s.wholeOut(out, n, b.segIP)
	case pk.INT < 0 && op == sai.FlowOpInt:
		// Segments fit the MTU as they came, should the source find
		// no room for the tunnel after all.
		if !s.tunnelSource(c, b, ent, out) || b.segIP > p.cfg.MTU ||
			cap(b.data)-len(b.data) < wire.SessionTunnelOverhead(pk.IPVersion, ent.sess.hopML*4) {
			return false
		}
		// The source lowers the segment size to fit the tunnel.
		return s.setMSS(b, pk.L3, pk.L4)
	case pk.INT >= 0 && op == sai.FlowOpNop && c.sink[out] && c.endpoint:
		if !s.tunnelEndsHere(b, c) || p.tcp == nil || !s.setMSS(b, pk.Next, -1) || !s.hopRoom(b) {
			return false
		}
		// Out of the tunnel, its segments are smaller.
		return b.segIP-(pk.Next-pk.L3) <= p.cfg.MTU
	case pk.INT >= 0 && op == sai.FlowOpNop && c.transit && !c.sink[out]:
		return p.tun != nil && p.tun.CanTunnel() && s.setMSS(b, pk.Next, -1) && s.hopRoom(b)
	}
	return false
}

// gpeTunnelled says whether b is a packet in a VXLAN-GPE tunnel.
func gpeTunnelled(b *pbuf) bool {
	pk := &b.pkt
	return pk.Proto == wire.ProtoUDP && pk.L4 >= 0 && binary.BigEndian.Uint16(b.data[pk.L4+2:]) == spec.PortVXLANGPE
}

// hopRoom says whether INT packet b has the room in its buffer for a hop
// of its stack's size.
func (s *Switch) hopRoom(b *pbuf) bool {
	return b.pkt.INT >= 0 && cap(b.data)-len(b.data) >= int(b.data[b.pkt.INT+2]&0x1f)*4
}

// setMSS sets b.mss, the TCP payload of b's segments, from the IP length
// of its largest one (b.segIP): the headers up to the end of the TCP
// header of the IP packet at ip (its TCP header at l4, or found when -1)
// taken off. False when that is no TCP packet.
func (s *Switch) setMSS(b *pbuf, ip, l4 int) bool {
	d := b.data
	if l4 < 0 {
		if ip+40 > len(d) {
			return false
		}
		switch d[ip] >> 4 {
		case 4:
			if d[ip+9] != wire.ProtoTCP {
				return false
			}
			l4 = ip + int(d[ip]&15)*4
		case 6:
			if d[ip+6] != wire.ProtoTCP {
				return false
			}
			l4 = ip + wire.IPv6Len
		default:
			return false
		}
	}
	if l4+20 > len(d) {
		return false
	}
	end := l4 + int(d[l4+12]>>4)*4
	b.mss = b.segIP - (end - b.pkt.L3)
	return b.mss > 0 && end <= len(d)
}

// malformed handles a packet from inside the domain that carries the INT
// marking but does not parse as INT: forwarded unchanged as a plain packet
// (MalformedForward; never watched, so never given INT) or dropped
// (MalformedDrop, reason 0, reported like the drop of an INT packet),
// counted either way. It returns false when b was dropped.
func (s *Switch) malformed(b *pbuf, c *compiled) bool {
	if !c.malformedDrop {
		s.node.IntMalformedForward++
		s.ports[b.in].ctr.IntMalformedForward++
		return true
	}
	s.node.IntMalformedDrop++
	s.ports[b.in].ctr.IntMalformedDrop++
	s.countDrop(b.in, spec.DropUnknown)
	if c.dropReport && s.reporter != nil {
		ev := s.event(report.KindDrop, b, s.clock.Now())
		ev.Unwatched = false // it claims to be INT: its source watched it
		ev.DropReason = uint8(spec.DropUnknown)
		s.fillDrop(b, c, false, &ev.Hop)
		s.emit(ev)
	}
	s.release(b)
	return false
}

// remark rewrites the DSCP of a packet entering the INT domain when it
// carries the INT marking, keeping ECN, so that no node downstream takes
// it for INT (INT v2.1, DSCP marking); counted on the ingress port. A
// source then saves the new DSCP in the shim.
func (s *Switch) remark(b *pbuf, c *compiled) {
	p := &b.pkt
	if p.L3 < 0 || !c.dscp.Matches(dscpOf(b.data, p)) {
		return
	}
	h := b.data[p.L3:]
	old := binary.BigEndian.Uint16(h)
	if p.IPVersion == 4 {
		nw := old&0xff03 | uint16(c.remarkDSCP)<<2
		binary.BigEndian.PutUint16(h, nw)
		binary.BigEndian.PutUint16(h[10:], wire.UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, nw))
	} else {
		binary.BigEndian.PutUint16(h, old&0xf03f|uint16(c.remarkDSCP)<<6)
	}
	s.node.DSCPRemarked++
	s.ports[b.in].ctr.DSCPRemarked++
}

// decTTL decrements the IP TTL / hop limit; false means it reached zero.
func (s *Switch) decTTL(b *pbuf) bool {
	p := &b.pkt
	switch p.IPVersion {
	case 4:
		h := b.data[p.L3:]
		if h[8] <= 1 {
			return false
		}
		old := binary.BigEndian.Uint16(h[8:])
		nw := old - 0x100
		binary.BigEndian.PutUint16(h[8:], nw)
		binary.BigEndian.PutUint16(h[10:], wire.UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, nw))
	case 6:
		h := b.data[p.L3:]
		if h[7] <= 1 {
			return false
		}
		h[7]--
	}
	return true
}

// dropPkt counts a drop, reports it when the watchlist asks for it, and
// frees b.
func (s *Switch) dropPkt(b *pbuf, at int, r sai.DropReason, tail bool) {
	s.countDrop(at, r)
	c := s.cfg
	want := false
	if e := b.entry; e != nil && c.dropReport {
		want = (tail && e.act.TailDropReportEnable) || (!tail && e.act.DropReportEnable)
	} else if b.pkt.INT >= 0 && c.dropReport && !tail {
		// A packet carrying INT was watched by its source; transit and
		// sink nodes have no entry of their own for it.
		want = true
	}
	if q := c.queueRep(b); tail && c.queueReport && q != nil && q.a.TailDrop {
		want = true
	}
	if want && s.reporter != nil {
		ev := s.event(report.KindDrop, b, s.clock.Now())
		ev.DropReason = uint8(r)
		ev.TailDrop = tail
		s.fillDrop(b, c, tail, &ev.Hop)
		s.emit(ev)
	}
	s.release(b)
}

// event prepares the reused event for b.
func (s *Switch) event(k report.Kind, b *pbuf, now int64) *report.Event {
	ev := &s.ev
	*ev = report.Event{Kind: k, Now: now, Flow: b.pkt.Flow, Packet: b.data, INT: b.pkt.INT}
	if b.pkt.Proto == wire.ProtoGRE || b.pkt.Proto == wire.ProtoUDP {
		// Keyed on the inner flow (past INT over UDP, as the eBPF
		// dataplane and the collector): two users in one tunnel are two
		// flows to the report filter, drops included.
		if t, ok := wire.FlowInner(b.data, &b.pkt, &s.inner); ok {
			ev.Flow, ev.Tunnel, ev.TunnelID = s.inner.Flow, t.Kind, t.ID
		}
	}
	if b.pkt.INT >= 0 {
		ev.INTType, ev.INTLen = b.pkt.INTType, b.pkt.INTLen
	}
	if b.entry != nil {
		ev.ReportAll = b.entry.act.ReportAllPackets
		ev.TailDropReport = b.entry.act.TailDropReportEnable
	} else if b.pkt.INT < 0 {
		// Packets carrying INT are tracked even where no entry matches:
		// the source watched them.
		ev.Unwatched = true
	}
	if b.pkt.Flow.Proto == wire.ProtoTCP && b.pkt.Proto == wire.ProtoTCP && b.pkt.L4 >= 0 {
		ev.TCPFlags = b.data[b.pkt.L4+13]
	}
	return ev
}

func (s *Switch) emit(ev *report.Event) {
	if ev.Kind != report.KindQueue {
		s.generated[ev.Kind&3]++
	}
	s.reporter.Report(ev)
	ev.Packet = nil
	ev.Hop.DomainSpecific = nil
}

// queue is a FIFO of packets bounded in bytes.
type queue struct {
	ring     []*pbuf
	head0, n int
	bytes    int // including the port's inflight packet when it came from here
}

func (q *queue) head() *pbuf { return q.ring[q.head0] }

func (q *queue) push(b *pbuf) {
	if q.n == len(q.ring) {
		nr := make([]*pbuf, max(16, 2*len(q.ring)))
		for i := 0; i < q.n; i++ {
			nr[i] = q.ring[(q.head0+i)%len(q.ring)]
		}
		q.ring, q.head0 = nr, 0
	}
	q.ring[(q.head0+q.n)%len(q.ring)] = b
	q.n++
}

func (q *queue) pop() *pbuf {
	b := q.ring[q.head0]
	q.ring[q.head0] = nil
	q.head0 = (q.head0 + 1) % len(q.ring)
	q.n--
	return b
}

// queueOf is the egress queue of b: its DSCP class selector, capped to
// the port's queues.
func queueOf(b *pbuf, p *port) uint8 {
	if len(p.qs) == 1 || b.pkt.L3 < 0 || b.pkt.L3+2 > len(b.data) {
		return 0
	}
	var dscp byte
	if b.pkt.IPVersion == 6 {
		dscp = (b.data[b.pkt.L3]<<4 | b.data[b.pkt.L3+1]>>4) >> 2
	} else {
		dscp = b.data[b.pkt.L3+1] >> 2
	}
	return min(dscp>>3, uint8(len(p.qs)-1))
}

func (s *Switch) enqueue(b *pbuf, now int64) {
	p := &s.ports[b.out]
	s.drain(p, now)
	b.queue = queueOf(b, p)
	q := &p.qs[b.queue]
	size := len(b.data)
	b.occ, b.bufOc = uint32(q.bytes), uint32(s.queued)
	if q.bytes+size > p.cfg.QueueBytes {
		s.dropPkt(b, b.out, spec.DropTrafficManager, true)
		return
	}
	if p.cfg.Rate <= 0 {
		b.dep = now
		s.egress(b)
		return
	}
	if b.whole {
		// A super-packet leaves when nothing is queued ahead of it, not
		// once its segments would be on the wire at the port's rate:
		// waiting out 50 µs at 10 Gbit/s costs a timer wake-up of as
		// much again, and the device after the switch paces segments
		// itself (a shaped port, whose queue is short, gets segments:
		// see wholeOut). The port is busy for its segments all the
		// same, so packets behind it wait for them. It leaves from the
		// receive buffer, and is copied only to wait (see drain).
		if p.inflight == nil && p.idle() {
			p.busyUntil = max(now, p.busyUntil) + p.txTime(b)
			b.dep = now
			s.egress(b)
			return
		}
		b.data = b.store[:copy(b.store, b.data)]
	}
	b.arr = now
	q.push(b)
	q.bytes += size
	s.queued += size
	s.drain(p, now)
}

// pick returns the queue the port sends from next and when that packet
// starts: once the link is free (or at the first arrival when it idles),
// the highest queue whose head has arrived by then. -1 when all are empty.
func pick(p *port) (int, int64) {
	first := int64(math.MaxInt64)
	for i := range p.qs {
		if p.qs[i].n > 0 {
			first = min(first, p.qs[i].head().arr)
		}
	}
	if first == math.MaxInt64 {
		return -1, 0
	}
	t := max(first, p.busyUntil)
	for i := len(p.qs) - 1; i >= 0; i-- {
		if q := &p.qs[i]; q.n > 0 && q.head().arr <= t {
			return i, t
		}
	}
	return -1, 0
}

// idle says whether none of the port's queues holds a packet.
func (p *port) idle() bool {
	for i := range p.qs {
		if p.qs[i].n > 0 {
			return false
		}
	}
	return true
}

func (p *port) txTime(b *pbuf) int64 {
	return int64(len(b.data)) * 8 * 1_000_000_000 / p.cfg.Rate
}

// nextDeparture is when the port's next packet leaves, math.MaxInt64 when
// none is queued.
func (s *Switch) nextDeparture(p *port) int64 {
	if p.inflight != nil {
		return p.inflight.dep
	}
	i, t := pick(p)
	if i < 0 {
		return math.MaxInt64
	}
	if h := p.qs[i].head(); !h.whole {
		return t + p.txTime(h)
	}
	return t // a super-packet leaves when it starts (see enqueue)
}

// drain sends what has left the port by now. A packet is chosen (strict
// priority) when its transmission starts, and leaves when it ends.
func (s *Switch) drain(p *port, now int64) {
	for {
		if b := p.inflight; b != nil {
			if b.dep > now {
				return
			}
			p.inflight = nil
			p.qs[b.queue].bytes -= len(b.data)
			s.queued -= len(b.data)
			s.egress(b)
			continue
		}
		i, t := pick(p)
		if i < 0 || t > now {
			return
		}
		b := p.qs[i].pop()
		p.busyUntil = t + p.txTime(b)
		b.dep = p.busyUntil
		if b.whole {
			b.dep = t // see enqueue
		}
		p.inflight = b
	}
}

const utilWindow = 1_000_000 // 1ms

func (s *Switch) updateUtil(p *port, n int, t int64) {
	if p.cfg.Rate <= 0 {
		return
	}
	if t-p.winStart >= utilWindow {
		if t-p.winStart < 2*utilWindow {
			p.util = uint32(min(100, p.winBytes*8*100*1_000_000_000/(p.cfg.Rate*utilWindow)))
		} else {
			p.util = 0
		}
		p.utilValid = true
		p.winStart, p.winBytes = t-(t-p.winStart)%utilWindow, 0
	}
	p.winBytes += int64(n)
}

// fillHop writes this node's metadata for b leaving at tOut into m.
func (s *Switch) fillHop(b *pbuf, c *compiled, tOut int64, m *wire.HopMetadata) {
	in := &s.ports[b.in]
	*m = wire.HopMetadata{
		NodeID:           c.nodeID,
		IngressPort:      in.cfg.ID,
		HopLatency:       uint32(min(max(tOut-b.tIn, 0), 0xfffffffe)),
		QueueID:          b.queue,
		QueueOccupancy:   min(b.occ, 0xffffff),
		IngressTimestamp: uint64(b.tIn),
		EgressTimestamp:  uint64(tOut),
		L2IngressPort:    in.cfg.L2ID,
		BufferOccupancy:  min(b.bufOc, 0xffffff),
		Valid: spec.InstNodeID | spec.InstHopLatency | spec.InstQueue | spec.InstIngressTimestamp |
			spec.InstEgressTimestamp | spec.InstBuffer,
	}
	if b.out >= 0 {
		out := &s.ports[b.out]
		m.EgressPort, m.L2EgressPort = out.cfg.ID, out.cfg.L2ID
		m.Valid |= spec.InstL1Interfaces | spec.InstL2Interfaces
		if out.utilValid {
			m.TxUtilization = out.util
			m.Valid |= spec.InstEgressTxUtil
		}
	}
}

// fillDrop writes the metadata of dropped packet b into m: the node id,
// interfaces (the egress ids all ones when it had no egress yet) and
// ingress time, and for a tail drop the queue it found full. A dropped
// packet never left: no hop latency or egress time.
func (s *Switch) fillDrop(b *pbuf, c *compiled, tail bool, m *wire.HopMetadata) {
	in := &s.ports[b.in]
	*m = wire.HopMetadata{NodeID: c.nodeID, IngressPort: in.cfg.ID, EgressPort: 0xffff,
		L2IngressPort: in.cfg.L2ID, L2EgressPort: wire.Unavailable32, IngressTimestamp: uint64(b.tIn),
		Valid: spec.InstNodeID | spec.InstL1Interfaces | spec.InstL2Interfaces | spec.InstIngressTimestamp}
	if b.out >= 0 {
		out := &s.ports[b.out]
		m.EgressPort, m.L2EgressPort = out.cfg.ID, out.cfg.L2ID
	}
	if tail {
		m.QueueOccupancy, m.BufferOccupancy = min(b.occ, 0xffffff), min(b.bufOc, 0xffffff)
		m.Valid |= spec.InstQueue | spec.InstBuffer
	}
}

// egress runs egress processing on b at its departure time, transmits it
// and frees it.
func (s *Switch) egress(b *pbuf) {
	c := s.cfg
	p := &s.ports[b.out]
	t := b.dep
	s.updateUtil(p, len(b.data), t)
	if q := c.queueRep(b); c.queueReport && q != nil {
		s.queueReport(b, c, q, t)
	}
	send := true
	switch {
	case b.pkt.INT >= 0 && c.sink[b.out] && c.endpoint:
		send = s.sink(b, c, p, t)
	case b.pkt.INT >= 0 && c.transit:
		s.transit(b, c, p, t)
	case b.pkt.INT < 0 && c.endpoint && !c.sink[b.out] && b.entry != nil && b.entry.sess != nil &&
		b.entry.act.FlowOp == sai.FlowOpInt:
		// The flow's SYNs are clamped whether or not this packet is
		// sampled: every segment that gets INT later needs the room.
		if se := b.entry.sess; se.clamp > 0 && b.pkt.Proto == wire.ProtoTCP {
			wire.ClampMSS(b.data, b.pkt.L4, wire.MSSFor(p.cfg.MTU, b.pkt.IPVersion, se.clampFor(b.pkt.IPVersion)))
		}
		if b.op == sai.FlowOpInt {
			s.source(b, c, p, t)
		}
	}
	if send && c.endpoint && c.sink[b.out] && b.pkt.INT < 0 && b.pkt.Proto == wire.ProtoTCP && b.pkt.L4 >= 0 {
		s.clampReply(b, c)
	}
	if b.op == sai.FlowOpPostcard && c.postcard {
		s.node.Postcards++
		p.ctr.Postcards++
		if s.reporter != nil {
			ev := s.event(report.KindFlow, b, t)
			s.fillHop(b, c, t, &ev.Hop)
			if se := b.entry.sess; se != nil {
				ev.Instructions, ev.HasInstructions = se.inst, true
				ev.DomainID, ev.DSInstructions = se.a.DomainSpecificID, se.a.DSInstruction
			}
			s.emit(ev)
		}
	}
	if send && b.whole && !b.tunOut && !b.tcpOut && gpeTunnelled(b) {
		// Taken whole into or along a session tunnel under a
		// configuration changed while it was queued: no link can hand
		// it to a device whole now, and it cannot be cut here.
		send = false
		s.countDrop(b.in, spec.DropUnknown)
	}
	if send {
		p.ctr.OutPackets++
		s.node.OutPackets++
		switch {
		case b.tunOut:
			p.tun.TransmitTunnel(b.data, b.pkt.L4, b.pkt.Next, b.mss)
		case b.tcpOut:
			p.tcp.TransmitTCP(b.data, b.pkt.L3, b.mss)
		case b.whole:
			p.whole.TransmitWhole(b.data, &b.offload)
		case p.link != nil:
			p.link.Transmit(b.data)
		}
	}
	s.release(b)
}

// clampReply lowers the MSS of a SYN-ACK (or SYN) leaving the domain
// through a sink port when the reverse flow is watched with INT under a
// session that clamps: the sender outside, whose segment size comes from
// this option, then sends segments that have room for INT at this
// source. The room is reckoned against the MTU of the port the reply came
// in through, where that flow leaves (symmetric routing).
func (s *Switch) clampReply(b *pbuf, c *compiled) {
	if b.data[b.pkt.L4+13]&0x02 == 0 {
		return
	}
	e := s.replyEntry(c, b)
	if e == nil || e.act.FlowOp != sai.FlowOpInt || e.sess == nil || e.sess.clamp == 0 {
		return
	}
	wire.ClampMSS(b.data, b.pkt.L4, wire.MSSFor(s.ports[b.in].cfg.MTU, b.pkt.IPVersion, e.sess.clampFor(b.pkt.IPVersion)))
}

func (s *Switch) queueReport(b *pbuf, c *compiled, q *qrState, t int64) {
	lat := t - b.tIn
	a := &q.a
	breach := (a.DepthThreshold > 0 && b.occ >= a.DepthThreshold) ||
		(a.LatencyThreshold > 0 && lat >= int64(a.LatencyThreshold))
	if s.reporter != nil {
		// The reporting pipeline applies thresholds and quotas itself; it
		// needs every packet of the queue to see breaches end.
		ev := s.event(report.KindQueue, b, t)
		s.fillHop(b, c, t, &ev.Hop)
		s.emit(ev)
	}
	if !breach {
		if q.inBreach {
			reset := a.LatencyThreshold == 0 && b.occ < a.DepthThreshold/2 ||
				a.LatencyThreshold > 0 && lat < int64(a.EffectiveResetThreshold())
			if reset {
				q.inBreach = false
				q.stats.QuotaLeft = a.BreachQuota
			}
		}
		return
	}
	if !q.inBreach {
		q.inBreach = true
		q.stats.Breaches++
		q.stats.QuotaLeft = a.BreachQuota
	}
	if q.stats.QuotaLeft == 0 {
		return
	}
	q.stats.QuotaLeft--
	q.stats.Reports++
}

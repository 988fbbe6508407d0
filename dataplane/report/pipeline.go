package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// Options tune a Pipeline; the zero value is usable.
type Options struct {
	// Sender puts packets on the wire; nil means a NewUDPSender().
	Sender Sender
	// QueueLen is the number of packets each collector's queue holds;
	// 0 means 256. Memory per collector is QueueLen * MTU, allocated once.
	QueueLen int
	// Clock is the clock of Event.Now, read by the background flush of
	// coalesced reports; nil means time.Now().UnixNano().
	Clock func() int64
	// TickInterval is how often the background flush runs; 0 means 1ms,
	// negative disables it (call Tick or Flush yourself).
	TickInterval time.Duration
	// Seed for the flow hash; 0 picks a fixed default.
	Seed uint64
}

// Pipeline is the reporting pipeline: smart filters, queue-congestion
// quotas, and the exporter. It implements Reporter; Report is safe for
// concurrent use and never allocates on its own.
type Pipeline struct {
	mu       sync.Mutex
	cfg      Config
	filt     filter
	flows    *flowTable
	drops    *flowTable
	st       flowState
	routes   [spec.NumEventTypes]*route
	sessions map[string]*session
	dests    map[netip.AddrPort]*dest
	queues   map[uint32]*queueState
	ds       map[uint16]*dsDomain
	dsBuf    [16 * 8 * 4]byte
	closed   bool

	opts      Options
	sender    Sender
	ownSender bool
	tableSize int
	stop      chan struct{}
	wg        sync.WaitGroup

	byType   [spec.NumEventTypes]counters
	reasons  [numReasons]atomic.Uint64
	unrouted atomic.Uint64
	sessCtr  map[string]*sessCounters // survives reconfiguration
}

type route struct {
	sess *session
	// bs is the batch of the route's DSCP: one for a session that
	// replicates, one per collector for one that distributes by flow.
	bs   []*batch
	dscp uint8
}

type counters struct {
	generated, suppressed, sent, dropped atomic.Uint64
}

type sessCounters struct {
	byType                                 [spec.NumEventTypes]counters
	packets, bytes                         atomic.Uint64
	rateLimited, queueFull, sendErr, trunc atomic.Uint64
}

type session struct {
	cfg        Session
	ctr        *sessCounters
	dests      []*dest
	batches    []*batch              // every batch, for flushing
	byDSCP     [maxDSCP + 1][]*batch // see route.bs
	maxPayload int
	maxReports int
	maxDelay   int64
	bucket     tokenBucket
}

type batch struct {
	sess *session
	// one is the collector the batch goes to, when the session
	// distributes (nil one[0]: every collector of the session).
	one    [1]*dest
	dscp   uint8
	sport  uint16 // UDP source port of the pending packet
	buf    []byte
	n      int
	types  [spec.NumEventTypes]uint16
	opened int64
}

type dest struct {
	addr    netip.AddrPort
	seq     uint32 // next sequence number (under Pipeline.mu)
	free    chan *pktBuf
	queue   chan *pktBuf
	packets atomic.Uint64
	bytes   atomic.Uint64
	lastSeq atomic.Uint32
	full    atomic.Uint64 // packets dropped: queue full
	sendErr atomic.Uint64
	// refusedN counts packets sent and then refused (in sendErr too).
	refusedN atomic.Uint64
	cap      int
	sent     [sentRing]sentPkt // worker only
	// The worker's batch of queued packets, and their results.
	batch [maxBatch]*pktBuf
	pkts  [maxBatch]*Packet
	errs  [maxBatch]error
}

type pktBuf struct {
	pkt   Packet
	buf   []byte
	types [spec.NumEventTypes]uint16
	ctr   *sessCounters
}

type queueState struct {
	cfg                           QueueReport
	reset, depthReset             uint32
	breached                      bool
	quotaLeft                     uint32
	breaches, reports, suppressed uint64
	// The rate limit's window: its start (ns) and reports in it.
	winStart int64
	winCount uint32
}

// New builds a pipeline with cfg.
func New(cfg Config, opts Options) (*Pipeline, error) {
	own := opts.Sender == nil
	if own {
		opts.Sender = NewUDPSender()
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = 256
	}
	if opts.Clock == nil {
		opts.Clock = func() int64 { return time.Now().UnixNano() }
	}
	if opts.TickInterval == 0 {
		opts.TickInterval = time.Millisecond
	}
	if opts.Seed == 0 {
		opts.Seed = 0x9e3779b97f4a7c15
	}
	p := &Pipeline{
		opts: opts, sender: opts.Sender, ownSender: own, stop: make(chan struct{}),
		sessions: map[string]*session{}, dests: map[netip.AddrPort]*dest{},
		queues: map[uint32]*queueState{}, sessCtr: map[string]*sessCounters{},
	}
	if err := p.Configure(cfg); err != nil {
		return nil, err
	}
	if opts.TickInterval > 0 {
		p.wg.Add(1)
		go p.ticker()
	}
	return p, nil
}

func (p *Pipeline) ticker() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.Tick(p.opts.Clock())
		}
	}
}

// ErrClosed is returned by Configure after Close.
var ErrClosed = errors.New("report: pipeline closed")

// Configure applies cfg atomically. Pending coalesced reports are sent
// first; flow state, queue breach state, counters and the sequence number
// of every collector that stays are kept (sequence numbers restart only
// when the node id or hw id change).
func (p *Pipeline) Configure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if sp, ok := p.sender.(SourcePortSender); ok {
		for _, s := range cfg.Sessions {
			if s.SrcPort == 0 && s.SrcPortMax == 0 {
				continue
			}
			if err := sp.SourcePorts(!s.Src.Unmap().Is4()); err != nil {
				return fmt.Errorf("report: session %q: %w", s.Name, err)
			}
		}
	}
	cfg = cloneConfig(cfg)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.flushAll()
	old := p.cfg
	first := p.flows == nil
	p.cfg = cfg
	p.filt = compileFilter(cfg.Filter)
	size := cfg.Filter.TableSize
	if size == 0 {
		size = defaultTableSize
	}
	if size != p.tableSize {
		p.flows = newFlowTable(size, p.opts.Seed)
		p.drops = newFlowTable(size/4, p.opts.Seed)
		p.tableSize = size
	}
	resetSeq := !first && (old.NodeID != cfg.NodeID || old.HWID != cfg.HWID)

	// Collectors.
	want := map[netip.AddrPort]int{}
	for _, s := range cfg.Sessions {
		for _, c := range s.Collectors {
			if mp := s.maxPayload(); mp > want[c.Addr] {
				want[c.Addr] = mp
			}
		}
	}
	for a, d := range p.dests {
		if _, ok := want[a]; !ok {
			close(d.queue) // the worker drains what is queued, then exits
			delete(p.dests, a)
		} else if resetSeq {
			d.seq = 0
		}
	}
	for a, mp := range want {
		if d := p.dests[a]; d == nil {
			p.dests[a] = p.startDest(a, mp)
		}
	}

	// Sessions.
	p.sessions = map[string]*session{}
	ctrs := map[string]*sessCounters{}
	for i := range cfg.Sessions {
		sc := cfg.Sessions[i]
		ctr := p.sessCtr[sc.Name]
		if ctr == nil {
			ctr = &sessCounters{}
		}
		ctrs[sc.Name] = ctr
		s := &session{cfg: sc, ctr: ctr, maxPayload: sc.maxPayload(), maxReports: sc.MaxReports, maxDelay: int64(sc.MaxDelay)}
		if s.maxReports < 1 || sc.Format == spec.ReportFormatV05 {
			s.maxReports = 1
		}
		s.bucket.init(sc.RateLimit)
		for _, c := range sc.Collectors {
			s.dests = append(s.dests, p.dests[c.Addr])
		}
		if sc.DistributeByFlow {
			// The same order on every node, whatever the configuration's.
			slices.SortFunc(s.dests, func(a, b *dest) int { return a.addr.Compare(b.addr) })
		}
		p.sessions[sc.Name] = s
	}
	p.sessCtr = ctrs

	// Routes.
	p.routes = [spec.NumEventTypes]*route{}
	for e, r := range cfg.Events {
		s := p.sessions[r.Session]
		dscp := r.DSCP
		if dscp == 0 {
			dscp = s.cfg.DSCP
		}
		bs := s.byDSCP[dscp]
		if bs == nil {
			n := 1
			if s.cfg.DistributeByFlow {
				n = len(s.dests)
			}
			for i := 0; i < n; i++ {
				b := &batch{sess: s, dscp: dscp, buf: make([]byte, 0, s.maxPayload)}
				if s.cfg.DistributeByFlow {
					b.one[0] = s.dests[i]
				}
				bs = append(bs, b)
			}
			s.byDSCP[dscp] = bs
			s.batches = append(s.batches, bs...)
		}
		p.routes[e] = &route{sess: s, bs: bs, dscp: dscp}
	}

	// Domain-specific values.
	p.ds = map[uint16]*dsDomain{}
	for _, v := range cfg.DSValues {
		d := p.ds[v.DomainID]
		if d == nil {
			d = &dsDomain{}
			p.ds[v.DomainID] = d
		}
		d.bits |= 0x8000 >> v.Bit
		d.words[v.Bit], d.values[v.Bit] = v.Words, v.Value
	}

	// Queues.
	qs := map[uint32]*queueState{}
	for _, qc := range cfg.Queues {
		k := queueKey(qc.Port, qc.Queue)
		if qc.Quota == 0 {
			qc.Quota = defaultQuota
		}
		q := p.queues[k]
		if q == nil {
			q = &queueState{quotaLeft: qc.Quota}
		}
		q.cfg = qc
		q.reset = qc.ResetThreshold
		if q.reset == 0 {
			q.reset = qc.LatencyThreshold / 2
		}
		q.depthReset = qc.DepthThreshold / 2
		q.quotaLeft = min(q.quotaLeft, qc.Quota)
		qs[k] = q
	}
	p.queues = qs
	return nil
}

func cloneConfig(c Config) Config {
	ss := make([]Session, len(c.Sessions))
	for i, s := range c.Sessions {
		s.Collectors = append([]Collector(nil), s.Collectors...)
		ss[i] = s
	}
	c.Sessions = ss
	ev := make(map[EventType]Route, len(c.Events))
	for k, v := range c.Events {
		ev[k] = v
	}
	c.Events = ev
	c.Queues = append([]QueueReport(nil), c.Queues...)
	c.DSValues = append([]DSValue(nil), c.DSValues...)
	return c
}

func (p *Pipeline) startDest(a netip.AddrPort, payload int) *dest {
	n := p.opts.QueueLen
	d := &dest{addr: a, free: make(chan *pktBuf, n), queue: make(chan *pktBuf, n), cap: n}
	for i := 0; i < n; i++ {
		d.free <- &pktBuf{buf: make([]byte, 0, payload)}
	}
	p.wg.Add(1)
	go p.worker(d)
	return d
}

func (p *Pipeline) worker(d *dest) {
	defer p.wg.Done()
	bs, _ := p.sender.(BatchSender)
	for pb := range d.queue {
		// With a BatchSender, take what else is queued now (never wait
		// for more): the packets go out together, in order.
		n := 1
		d.batch[0] = pb
	drain:
		for bs != nil && n < maxBatch {
			select {
			case q, ok := <-d.queue:
				if !ok {
					break drain
				}
				d.batch[n] = q
				n++
			default:
				break drain
			}
		}
		if n == 1 {
			d.errs[0] = p.sender.Send(&pb.pkt)
		} else {
			for i, q := range d.batch[:n] {
				d.pkts[i] = &q.pkt
			}
			bs.SendBatch(d.pkts[:n], d.errs[:n])
		}
		for i, q := range d.batch[:n] {
			p.sent(d, q, d.errs[i])
		}
		if r, ok := p.sender.(Refuser); ok {
			r.Refused(d.addr, func(seq uint32) { p.refused(d, seq) })
		}
		for i, q := range d.batch[:n] {
			d.batch[i], d.pkts[i], d.errs[i] = nil, nil, nil
			d.free <- q
		}
	}
}

// maxBatch is the most queued packets a collector's goroutine hands a
// BatchSender at once (no more than sentRing/2, so that a batch does not
// push the previous one out of the ring before its refusals are read).
const maxBatch = 64

// sent counts packet pb as sent (err nil) or not, and remembers it.
func (p *Pipeline) sent(d *dest, pb *pktBuf, err error) {
	if err != nil {
		d.sendErr.Add(1)
		pb.ctr.sendErr.Add(1)
	} else {
		d.packets.Add(1)
		d.bytes.Add(uint64(len(pb.pkt.Payload)))
		d.lastSeq.Store(pb.pkt.Seq)
		pb.ctr.packets.Add(1)
		pb.ctr.bytes.Add(uint64(len(pb.pkt.Payload)))
	}
	for t, n := range pb.types {
		if n == 0 {
			continue
		}
		if err != nil {
			p.byType[t].dropped.Add(uint64(n))
			pb.ctr.byType[t].dropped.Add(uint64(n))
		} else {
			p.byType[t].sent.Add(uint64(n))
			pb.ctr.byType[t].sent.Add(uint64(n))
		}
	}
	pb.pkt.Payload = nil
	if err == nil {
		d.remember(pb)
	}
}

// sentRing is how many sent packets a collector remembers, to move a
// packet refused after the fact from sent to dropped.
const sentRing = 2 * maxBatch

type sentPkt struct {
	seq   uint32
	ok    bool
	types [spec.NumEventTypes]uint16
	ctr   *sessCounters
	bytes int
}

// remember records a packet the worker sent.
func (d *dest) remember(pb *pktBuf) {
	d.sent[pb.pkt.Seq%sentRing] = sentPkt{seq: pb.pkt.Seq, ok: true, types: pb.types, ctr: pb.ctr, bytes: len(pb.buf)}
}

// refused moves packet seq, counted as sent, to the send errors: the
// collector's host refused it (Refuser).
func (p *Pipeline) refused(d *dest, seq uint32) {
	sp := &d.sent[seq%sentRing]
	if !sp.ok || sp.seq != seq {
		return // not a packet of the last sentRing: its reports are unknown
	}
	sp.ok = false
	dec := func(a *atomic.Uint64, n uint64) { a.Add(^(n - 1)) }
	d.sendErr.Add(1)
	d.refusedN.Add(1)
	dec(&d.packets, 1)
	dec(&d.bytes, uint64(sp.bytes))
	sp.ctr.sendErr.Add(1)
	dec(&sp.ctr.packets, 1)
	dec(&sp.ctr.bytes, uint64(sp.bytes))
	for t, n := range sp.types {
		if n == 0 {
			continue
		}
		dec(&p.byType[t].sent, uint64(n))
		dec(&sp.ctr.byType[t].sent, uint64(n))
		p.byType[t].dropped.Add(uint64(n))
		sp.ctr.byType[t].dropped.Add(uint64(n))
	}
}

// Close sends pending reports, waits for the collectors' queues to drain
// and stops the pipeline. Later reports are ignored.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.flushAll()
	p.closed = true
	for a, d := range p.dests {
		close(d.queue)
		delete(p.dests, a)
	}
	close(p.stop)
	p.mu.Unlock()
	p.wg.Wait()
	if c, ok := p.sender.(interface{ Close() error }); ok && p.ownSender {
		c.Close()
	}
	return nil
}

// Flush sends every pending coalesced report now (a dataplane may call it
// after each burst of packets: coalescing with MaxDelay 0 groups the
// reports that are ready together).
func (p *Pipeline) Flush() {
	p.mu.Lock()
	p.flushAll()
	p.mu.Unlock()
}

// Tick sends the coalesced reports that have waited MaxDelay by now.
func (p *Pipeline) Tick(now int64) {
	p.mu.Lock()
	for _, s := range p.sessions {
		for _, b := range s.batches {
			if b.n > 0 && now-b.opened >= s.maxDelay {
				p.flush(b)
			}
		}
	}
	p.mu.Unlock()
}

func (p *Pipeline) flushAll() {
	for _, s := range p.sessions {
		for _, b := range s.batches {
			if b.n > 0 {
				p.flush(b)
			}
		}
	}
}

// Report implements Reporter.
func (p *Pipeline) Report(ev *Event) {
	p.mu.Lock()
	if !p.closed {
		switch ev.Kind {
		case KindFlow:
			p.flow(ev)
		case KindDrop:
			p.drop(ev)
		case KindQueue:
			p.queue(ev)
		}
	}
	p.mu.Unlock()
}

// WantsQueue reports whether congestion or tail-drop reporting is
// configured for a queue, so a dataplane can skip KindQueue events (and
// unwatched tail drops) for other queues.
func (p *Pipeline) WantsQueue(port uint16, queue uint8) bool {
	p.mu.Lock()
	_, ok := p.queues[queueKey(port, queue)]
	ok = ok && p.cfg.QueueReports
	p.mu.Unlock()
	return ok
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
)

func (p *Pipeline) flow(ev *Event) {
	if ev.Unwatched {
		return
	}
	if ev.ReportAll {
		et := spec.EventFlowReportAllPackets
		if p.routes[et] == nil {
			et = spec.EventFlowState
		}
		p.emit(et, ev, false, false)
		return
	}
	tcpFlag := ev.Flow.Proto == wire.ProtoTCP && ev.TCPFlags&(tcpFIN|tcpSYN|tcpRST) != 0 && p.routes[spec.EventFlowTCPFlag] != nil
	if p.routes[spec.EventFlowState] == nil {
		if tcpFlag {
			p.emit(spec.EventFlowTCPFlag, ev, false, false)
		}
		return
	}
	extract(ev, &p.st)
	r := p.filt.decide(p.flows, ev.Flow.Hash(p.opts.Seed^ev.tunnelSeed()), ev.Now, &p.st, false)
	switch {
	case r != 0:
		p.countReasons(r)
		p.emit(spec.EventFlowState, ev, false, false)
	case tcpFlag:
		p.emit(spec.EventFlowTCPFlag, ev, false, false)
	default:
		p.suppress(spec.EventFlowState)
	}
}

func (p *Pipeline) countReasons(r Reason) {
	for i := 0; i < numReasons; i++ {
		if r&(1<<i) != 0 {
			p.reasons[i].Add(1)
		}
	}
}

func (p *Pipeline) suppress(et EventType) {
	p.byType[et].suppressed.Add(1)
	if r := p.routes[et]; r != nil {
		r.sess.ctr.byType[et].suppressed.Add(1)
	}
}

func (p *Pipeline) drop(ev *Event) {
	et := spec.EventDropReport
	queue := false
	if ev.TailDrop {
		q := p.queues[queueKey(ev.Hop.EgressPort, ev.Hop.QueueID)]
		switch {
		case q != nil && q.cfg.TailDrop && p.cfg.QueueReports && p.routes[spec.EventQueueReportTailDrop] != nil:
			et, queue = spec.EventQueueReportTailDrop, true
		case ev.Unwatched || !ev.TailDropReport:
			return
		}
	}
	if !queue && (ev.Unwatched || !p.cfg.DropReports) {
		return
	}
	if p.routes[et] == nil {
		p.unrouted.Add(1)
		return
	}
	extract(ev, &p.st)
	r := p.filt.decide(p.drops, ev.Flow.Hash(p.opts.Seed^uint64(et)^ev.tunnelSeed()), ev.Now, &p.st, true)
	if r == 0 {
		p.suppress(et)
		return
	}
	p.countReasons(r)
	p.emit(et, ev, true, queue)
}

func (p *Pipeline) queue(ev *Event) {
	if !p.cfg.QueueReports {
		return
	}
	q := p.queues[queueKey(ev.Hop.EgressPort, ev.Hop.QueueID)]
	if q == nil || (q.cfg.LatencyThreshold == 0 && q.cfg.DepthThreshold == 0) {
		return
	}
	lat, depth := ev.Hop.HopLatency, ev.Hop.QueueOccupancy
	if q.breached {
		var below bool
		if q.cfg.LatencyThreshold != 0 {
			below = lat < q.reset
		} else {
			below = depth < q.depthReset
		}
		if below {
			q.breached = false
			q.quotaLeft = q.cfg.Quota
		}
	}
	if !q.breached && (q.cfg.LatencyThreshold != 0 && lat >= q.cfg.LatencyThreshold ||
		q.cfg.DepthThreshold != 0 && depth >= q.cfg.DepthThreshold) {
		q.breached = true
		q.breaches++
	}
	if !q.breached {
		return
	}
	if q.quotaLeft == 0 || !q.admit(ev.Now) {
		q.suppressed++
		p.suppress(spec.EventQueueReportThresholdBreach)
		return
	}
	q.quotaLeft--
	q.reports++
	p.emit(spec.EventQueueReportThresholdBreach, ev, false, true)
}

// admit applies the queue's rate limit at time now: at most RateLimit
// reports in a one second window that starts with its first report. The
// BPF dataplane applies the same rule before its events reach here.
func (q *queueState) admit(now int64) bool {
	if q.cfg.RateLimit == 0 {
		return true
	}
	if now-q.winStart >= int64(time.Second) || now < q.winStart {
		q.winStart, q.winCount = now, 0
	}
	if q.winCount >= q.cfg.RateLimit {
		return false
	}
	q.winCount++
	return true
}

// emit encodes one individual report for event type et into its session's
// pending packet, sending the packet when it is full.
func (p *Pipeline) emit(et EventType, ev *Event, dropped, congested bool) {
	rt := p.routes[et]
	if rt == nil {
		p.unrouted.Add(1)
		return
	}
	s := rt.sess
	p.byType[et].generated.Add(1)
	s.ctr.byType[et].generated.Add(1)
	if !s.bucket.take(ev.Now) {
		p.byType[et].dropped.Add(1)
		s.ctr.byType[et].dropped.Add(1)
		s.ctr.rateLimited.Add(1)
		return
	}
	b := rt.bs[0]
	if len(rt.bs) > 1 {
		b = rt.bs[jumpHash(ev.Flow.Hash(flowHashSeed), len(rt.bs))]
	}
	sport := s.srcPort(ev)
	inner := ev.Packet
	if len(inner) > s.cfg.TruncateSize {
		inner = inner[:s.cfg.TruncateSize]
	}
	tracked := !ev.Unwatched
	h := &ev.Hop
	if s.cfg.Format == spec.ReportFormatV05 {
		th := wire.TR05Header{NextProto: spec.TR05Local, Dropped: dropped, Congested: congested, TrackedFlow: tracked,
			HWID: p.cfg.HWID, IngressTimestamp: uint32(h.IngressTimestamp)}
		if h.Valid&spec.InstIngressTimestamp == 0 {
			th.IngressTimestamp = uint32(ev.Now)
		}
		sw := wire.TR05Switch{SwitchID: p.cfg.NodeID, IngressPort: h.IngressPort, EgressPort: h.EgressPort,
			QueueID: h.QueueID, QueueOccupancy: h.QueueOccupancy, EgressTimestamp: uint32(h.EgressTimestamp)}
		if dropped {
			th.NextProto, sw.DropReason = spec.TR05Drop, ev.DropReason
		}
		hdr := wire.TR05HeaderLen + wire.TR05LocalLen
		if room := s.maxPayload - hdr; len(inner) > room {
			inner = inner[:room]
			s.ctr.trunc.Add(1)
		}
		b.buf = AppendTR05(b.buf[:0], &th, &sw, inner)
		b.n, b.opened, b.sport = 1, ev.Now, sport
		b.types[et]++
		p.flush(b)
		return
	}
	// A drop or queue report of a packet still carrying INT-MD comes from a
	// node before the sink: the spec's intermediate report.
	intermediate := ev.Kind != KindFlow && ev.INT >= 0 && ev.INTType == spec.TypeMD
	rh := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: dropped, Congested: congested,
		TrackedFlow: tracked, Intermediate: intermediate, RepMdBits: RepMdBits(ev)}
	if len(inner) == 0 {
		rh.InType = spec.InNone
	}
	md := wire.ReportMetadata{
		IngressPort: h.IngressPort, EgressPort: h.EgressPort, HopLatency: h.HopLatency,
		QueueID: h.QueueID, QueueOccupancy: h.QueueOccupancy,
		IngressTimestamp: h.IngressTimestamp, EgressTimestamp: h.EgressTimestamp,
		L2IngressPort: h.L2IngressPort, L2EgressPort: h.L2EgressPort,
		TxUtilization: h.TxUtilization, BufferID: h.BufferID, BufferOccupancy: h.BufferOccupancy,
	}
	if dropped {
		rh.RepMdBits |= wire.RepDrop
		md.DropQueueID, md.DropReason = h.QueueID, ev.DropReason
	}
	var ds []byte
	if dom, inst := dsRequested(ev); dom != 0 && inst != 0 {
		if d := p.ds[dom]; d != nil {
			rh.DomainID, rh.DSMdBits = dom, inst&d.bits
			ds = d.append(p.dsBuf[:0], rh.DSMdBits)
		}
	}
	fixed := wire.ReportHeaderLen + wire.INTReportFixedLen + wire.RepMdWords(rh.RepMdBits)*4 + len(ds)
	if room := (s.maxPayload - wire.GroupHeaderLen - fixed) &^ 3; len(inner) > room {
		inner = inner[:room]
		s.ctr.trunc.Add(1)
	}
	size := fixed + (len(inner)+3)&^3
	last := size > wire.ReportHeaderLen+254*4 // Report Length 0xFF: must end the packet
	if b.n > 0 && (len(b.buf)+size > s.maxPayload || last || b.sport != sport || ev.Now-b.opened >= s.maxDelay && s.maxDelay > 0) {
		p.flush(b)
	}
	if b.n == 0 {
		b.buf = append(b.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0) // group header, filled per collector
		b.opened, b.sport = ev.Now, sport
	}
	b.buf, _ = wire.AppendReport(b.buf, &rh, &md, ds, inner)
	b.n++
	b.types[et]++
	if b.n >= s.maxReports || last {
		p.flush(b)
	}
}

// flush hands b to each collector of its session with that collector's
// sequence number. A collector whose queue is full loses the packet (its
// sequence number is consumed, so the collector sees the gap).
func (p *Pipeline) flush(b *batch) {
	s := b.sess
	v2 := s.cfg.Format == spec.ReportFormatV2
	dests := s.dests
	if b.one[0] != nil {
		dests = b.one[:]
	}
	for _, d := range dests {
		seq := d.seq
		if v2 {
			d.seq = (seq + 1) & wire.MaxReportSeq
		} else {
			d.seq = seq + 1
		}
		var pb *pktBuf
		select {
		case pb = <-d.free:
		default:
		}
		if pb == nil {
			d.full.Add(1)
			s.ctr.queueFull.Add(1)
			for t, n := range b.types {
				if n != 0 {
					p.byType[t].dropped.Add(uint64(n))
					s.ctr.byType[t].dropped.Add(uint64(n))
				}
			}
			continue
		}
		pb.buf = append(pb.buf[:0], b.buf...)
		if v2 {
			binary.BigEndian.PutUint32(pb.buf, uint32(wire.Version2)<<28|uint32(p.cfg.HWID)<<22|seq)
			binary.BigEndian.PutUint32(pb.buf[4:], p.cfg.NodeID)
		} else {
			binary.BigEndian.PutUint32(pb.buf[4:], seq)
		}
		pb.pkt = Packet{Session: s.cfg.Name, Src: s.cfg.Src, Dst: d.addr, VRF: s.cfg.VRF, DSCP: b.dscp,
			Format: s.cfg.Format, Seq: seq, SrcPort: b.sport, Reports: b.n, Payload: pb.buf}
		pb.types = b.types
		pb.ctr = s.ctr
		d.queue <- pb // never blocks: free and queue share QueueLen buffers
	}
	b.n = 0
	b.types = [spec.NumEventTypes]uint16{}
	b.buf = b.buf[:0]
}

// SourcePorts implements SourcePortSender: whether the pipeline's
// sender can send from a chosen UDP source port.
func (p *Pipeline) SourcePorts(v6 bool) error {
	if sp, ok := p.sender.(SourcePortSender); ok {
		return sp.SourcePorts(v6)
	}
	return nil
}

// srcPort is the UDP source port of ev's report packet (0: the kernel's).
func (s *session) srcPort(ev *Event) uint16 {
	switch {
	case s.cfg.SrcPort != 0:
		return s.cfg.SrcPort
	case s.cfg.SrcPortMax != 0:
		return ev.Flow.EntropyPortIn(s.cfg.SrcPortMin, s.cfg.SrcPortMax)
	}
	return 0
}

// flowHashSeed seeds the flow hash that picks a distributing session's
// collector: fixed, so that every node picks the same one.
const flowHashSeed = 0x494e54

// jumpHash maps key to one of n buckets (Lamping and Veach's jump
// consistent hash): adding a collector moves only 1/n of the flows.
func jumpHash(key uint64, n int) int {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// tokenBucket limits reports per second; tokens are in 1e-9 reports.
type tokenBucket struct {
	rate, cap, tokens, last int64
	started                 bool
}

func (t *tokenBucket) init(rate uint32) {
	burst := int64(rate) / defaultBurstRatio
	if burst < 1 {
		burst = 1
	}
	*t = tokenBucket{rate: int64(rate), cap: burst * 1e9}
}

func (t *tokenBucket) take(now int64) bool {
	if t.rate == 0 {
		return true
	}
	if !t.started {
		t.started, t.last, t.tokens = true, now, t.cap
	}
	if gap := now - t.last; gap > 0 {
		if gap >= t.cap/t.rate+1 {
			t.tokens = t.cap
		} else {
			t.tokens = min(t.cap, t.tokens+gap*t.rate)
		}
		t.last = now
	}
	if t.tokens >= 1e9 {
		t.tokens -= 1e9
		return true
	}
	return false
}

// repMdMask are the RepMdBits of baseline metadata (bits 1..8); the node
// id travels in the group header and bit 15 is set for drops only.
var repMdMask = uint16(spec.InstReportable &^ spec.InstNodeID)

// RepMdBits is the baseline metadata an individual report of ev carries
// (Telemetry Report v2.0 §3.3.1): what was asked for minus what this node
// does not have (Hop.Valid). What was asked for is the instruction bitmap
// of the INT header in the packet (INT-MD sink and INT-MX hops), else the
// dataplane's Event.Instructions (an INT-XD postcard's watchlist
// session); drop and queue reports answer no request and carry every
// field the node has for them (a drop: where and when the packet came in,
// never an egress it did not have).
func RepMdBits(ev *Event) uint16 {
	return requested(ev) & uint16(ev.Hop.Valid) & repMdMask
}

func requested(ev *Event) uint16 {
	switch {
	case ev.Kind == KindFlow && ev.INT >= 0 && ev.INT+wire.MDHeaderLen <= len(ev.Packet):
		return binary.BigEndian.Uint16(ev.Packet[ev.INT+4:])
	case ev.Kind == KindFlow && ev.HasInstructions:
		return uint16(ev.Instructions)
	}
	return 0xffff
}

// dsDomain holds the node's values of one domain's fields, by bit.
type dsDomain struct {
	bits   uint16 // bits with a value (wire order)
	words  [16]uint8
	values [16]uint64
}

// append appends the values of bits, in bit order, each right-justified in
// its field's words.
func (d *dsDomain) append(dst []byte, bits uint16) []byte {
	for bit := 0; bit < 16; bit++ {
		if bits&(0x8000>>bit) == 0 {
			continue
		}
		for w := int(d.words[bit]) - 1; w >= 0; w-- {
			var v uint32
			if w < 2 {
				v = uint32(d.values[bit] >> (32 * w))
			}
			dst = binary.BigEndian.AppendUint32(dst, v)
		}
	}
	return dst
}

// dsRequested is the domain and DS instruction bitmap a flow report of ev
// answers: the INT header's, else a postcard session's.
func dsRequested(ev *Event) (uint16, uint16) {
	switch {
	case ev.Kind == KindFlow && ev.INT >= 0 && ev.INT+wire.MDHeaderLen <= len(ev.Packet):
		h := ev.Packet[ev.INT:]
		return binary.BigEndian.Uint16(h[6:]), binary.BigEndian.Uint16(h[8:])
	case ev.HasInstructions:
		return ev.DomainID, ev.DSInstructions
	}
	return 0, 0
}

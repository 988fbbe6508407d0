// Package stream publishes what a collector learns to NATS JetStream, so
// that a fleet of collectors shares one history that outlives each of
// them: per-flow summaries every interval, one message per node of the
// flow's path, and events (path change, latency anomaly, drop with its
// reason, congestion with the culprit flows) as they happen. Messages are
// JSON (schema: docs/stream.md) on subjects per kind and node:
//
//	<prefix>.summary.<node>
//	<prefix>.event.<kind>.<node>    kind: path-change, latency, drop, congestion
//
// Every message carries a Nats-Msg-Id unique per collector, so a publish
// retried after a lost acknowledgement is stored once. Query reads the
// summaries back: the flows through a node whose latency went above a
// bound in a time window.
//
// The collector's receive path only copies events into a bounded queue
// (no allocation; a full queue drops and counts them); marshalling and
// publishing run in the publisher's goroutine.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
)

// Config says where and how to publish.
type Config struct {
	// URLs of the NATS servers (comma-separated in one string is fine).
	URLs string
	// Stream is the JetStream stream (created when missing, its subjects
	// Prefix.>); Prefix the subject prefix.
	Stream, Prefix string
	// Replicas of the stream (1 to 5) and how long it keeps messages.
	Replicas int
	MaxAge   time.Duration
	// CollectorID names this collector in messages and message IDs; it
	// must be unique in the fleet (default: a random one).
	CollectorID string
	// SummaryInterval is how often flow summaries are published (default
	// 10s).
	SummaryInterval time.Duration
	// CongestionWindow gathers the congestion reports of a queue into one
	// event per window, with the flows seen most (default 1s).
	CongestionWindow time.Duration
	// QueueLen bounds the events waiting to be published (default 65536).
	QueueLen int
	// OnAck, when set, is called with the message ID of every message
	// JetStream acknowledged (tests).
	OnAck func(id string)
}

// Defaults of Config.
const (
	DefaultStream   = "INT"
	DefaultPrefix   = "int"
	DefaultInterval = 10 * time.Second
	maxCulprits     = 5
	// RetryWindow is how long a message JetStream did not acknowledge is
	// re-sent: longer than a stream leader's election after its server
	// died (5 s idle, over 30 s seen on a loaded 2-core machine), shorter
	// than the stream's duplicate window, so a re-sent message that had
	// been stored after all is recognised by its ID and stored once.
	RetryWindow = 90 * time.Second
	dupWindow   = 2 * time.Minute
	// ackTimeout bounds the wait for one acknowledgement: a message that
	// reached no stream leader (none elected yet) is never answered.
	ackTimeout = 5 * time.Second
	minBackoff = 250 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Counters count the publisher's messages.
type Counters struct {
	Published, Acked, Failed, Retried uint64
	// Dropped counts events lost because the queue was full.
	Dropped uint64
}

// Publisher publishes a collector's summaries and events.
type Publisher struct {
	cfg    Config
	c      *collector.Collector
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	events chan collector.Event
	stop   chan struct{}
	wg     sync.WaitGroup
	// inflight counts the messages waiting for their acknowledgement.
	inflight sync.WaitGroup
	seq      atomic.Uint64

	published, acked, failed, retried, dropped atomic.Uint64

	// congestion gathered per queue during the current window
	// (publisher goroutine only).
	cong map[queueKey]*congestion
}

type queueKey struct {
	node  uint32
	port  int32
	queue int16
}

type congestion struct {
	first, last int64
	reports     uint64
	occupancy   uint32
	flows       map[wire.FlowKey]uint64
}

func (cfg *Config) defaults() error {
	if cfg.URLs == "" {
		return errors.New("no NATS server URL")
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return fmt.Errorf("stream replicas %d: the range is 1 to 5", cfg.Replicas)
	}
	if cfg.CollectorID == "" {
		cfg.CollectorID = nats.NewInbox()[len(nats.InboxPrefix):]
	}
	if cfg.SummaryInterval <= 0 {
		cfg.SummaryInterval = DefaultInterval
	}
	if cfg.CongestionWindow <= 0 {
		cfg.CongestionWindow = time.Second
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1 << 16
	}
	return nil
}

// Connect connects to NATS, reconnecting for ever, and returns its
// JetStream context.
func Connect(urls, name string, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	if log == nil {
		log = slog.Default()
	}
	nc, err := nats.Connect(urls, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "err", err.Error())
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", "server", c.ConnectedUrlRedacted()) }))
	if err != nil {
		return nil, nil, fmt.Errorf("NATS %s: %w", urls, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// New connects, makes sure the stream exists, and starts publishing what
// c learns (it sets c.OnEvent). Close stops it.
func New(ctx context.Context, c *collector.Collector, cfg Config, log *slog.Logger) (*Publisher, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	nc, js, err := Connect(cfg.URLs, "intcollector "+cfg.CollectorID, log)
	if err != nil {
		return nil, err
	}
	sc := jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{cfg.Prefix + ".>"}, Replicas: cfg.Replicas,
		MaxAge: cfg.MaxAge, Storage: jetstream.FileStorage, Duplicates: dupWindow,
		Description: "INT flow summaries and events published by intcollector"}
	if err := ensureStream(ctx, js, sc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream stream %s: %w", cfg.Stream, err)
	}
	p := &Publisher{cfg: cfg, c: c, log: log, nc: nc, js: js, events: make(chan collector.Event, cfg.QueueLen),
		stop: make(chan struct{}), cong: map[queueKey]*congestion{}}
	c.Do(func() { c.OnEvent = p.enqueue })
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// ensureStream creates the stream unless it exists; an existing one is
// used as it is (its replicas and age are the operator's, and updating it
// would need every one of its servers up). A request lost while the
// cluster elects a leader is retried until ctx ends.
func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	for {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Stream(c, sc.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(c, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another collector of the fleet was first
			}
		}
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// enqueue runs in the collector's receive path: a copy, no allocation.
func (p *Publisher) enqueue(e *collector.Event) {
	select {
	case p.events <- *e:
	default:
		p.dropped.Add(1)
	}
}

// Counters returns the publisher's counters.
func (p *Publisher) Counters() Counters {
	return Counters{Published: p.published.Load(), Acked: p.acked.Load(), Failed: p.failed.Load(),
		Retried: p.retried.Load(), Dropped: p.dropped.Load()}
}

// Close publishes the last summaries and pending events, waits up to
// timeout for their acknowledgements, and disconnects.
func (p *Publisher) Close(timeout time.Duration) {
	p.c.Do(func() { p.c.OnEvent = nil })
	close(p.stop)
	p.wg.Wait()
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	p.nc.Close()
}

// Abort disconnects at once, as a killed process would: what is not
// acknowledged yet is lost.
func (p *Publisher) Abort() {
	p.c.Do(func() { p.c.OnEvent = nil })
	p.nc.Close()
	close(p.stop)
	p.wg.Wait()
}

func (p *Publisher) run() {
	defer p.wg.Done()
	sum := time.NewTicker(p.cfg.SummaryInterval)
	defer sum.Stop()
	cong := time.NewTicker(p.cfg.CongestionWindow)
	defer cong.Stop()
	since := time.Now().UnixNano()
	for {
		select {
		case e := <-p.events:
			p.event(&e)
		case <-cong.C:
			p.flushCongestion()
		case <-sum.C:
			since = p.summaries(since)
		case <-p.stop:
			for {
				select {
				case e := <-p.events:
					p.event(&e)
					continue
				default:
				}
				break
			}
			if !p.nc.IsClosed() {
				p.flushCongestion()
				p.summaries(since)
			}
			return
		}
	}
}

func (p *Publisher) subject(kind string, node uint32) string {
	return p.cfg.Prefix + "." + kind + "." + strconv.FormatUint(uint64(node), 10)
}

// publish sends v as JSON on subject; a message not acknowledged is
// re-sent with the same message ID until acknowledged or RetryWindow ends.
func (p *Publisher) publish(subject string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.log.Error("encoding a stream message", "err", err.Error())
		return
	}
	id := p.cfg.CollectorID + "-" + strconv.FormatUint(p.seq.Add(1), 10)
	p.published.Add(1)
	p.inflight.Add(1)
	p.send(&nats.Msg{Subject: subject, Data: b, Header: nats.Header{jetstream.MsgIDHeader: []string{id}}}, id, time.Now(), 0)
}

// send sends m once and, in a goroutine, waits for its acknowledgement;
// a failure before first+RetryWindow sends it again after a backoff.
// Only JetStream's acknowledgement counts a message as acknowledged.
func (p *Publisher) send(m *nats.Msg, id string, first time.Time, try int) {
	if p.nc.IsClosed() {
		p.inflight.Done()
		return
	}
	f, err := p.js.PublishMsgAsync(m)
	// Too many messages wait for their acknowledgement: wait with them
	// (the publisher's queue fills meanwhile, and counts what it drops).
	for errors.Is(err, jetstream.ErrTooManyStalledMsgs) && !p.nc.IsClosed() {
		f, err = p.js.PublishMsgAsync(m)
	}
	if err != nil {
		go p.retry(m, id, first, try, err)
		return
	}
	go func() {
		select {
		case <-f.Ok():
			p.acked.Add(1)
			if p.cfg.OnAck != nil {
				p.cfg.OnAck(id)
			}
			p.inflight.Done()
		case err := <-f.Err():
			p.retry(m, id, first, try, err)
		}
	}()
}

// retry sends m again after a backoff, or gives up past the window.
func (p *Publisher) retry(m *nats.Msg, id string, first time.Time, try int, err error) {
	wait := min(minBackoff<<min(try, 8), maxBackoff)
	if p.nc.IsClosed() || time.Since(first)+wait > RetryWindow {
		p.inflight.Done()
		p.failed.Add(1)
		p.log.Warn("JetStream did not acknowledge a message", "subject", m.Subject, "id", id,
			"tries", try+1, "err", err.Error())
		return
	}
	p.retried.Add(1)
	time.Sleep(wait)
	p.send(m, id, first, try+1)
}

func (p *Publisher) event(e *collector.Event) {
	if e.Kind == collector.EventCongestion {
		p.gather(e)
		return
	}
	p.publish(p.subject("event."+e.Kind.String(), e.Node), eventMessage(p.cfg.CollectorID, e))
}

// gather adds a congestion event to its queue's window.
func (p *Publisher) gather(e *collector.Event) {
	k := queueKey{e.Node, e.Port, e.Queue}
	g := p.cong[k]
	if g == nil {
		g = &congestion{first: e.Time, flows: map[wire.FlowKey]uint64{}}
		p.cong[k] = g
	}
	g.last, g.occupancy = e.Time, max(g.occupancy, e.Occupancy)
	g.reports++
	if len(g.flows) < 1024 || g.flows[e.Flow] != 0 {
		g.flows[e.Flow]++
	}
}

// flushCongestion publishes one event per congested queue of the window.
func (p *Publisher) flushCongestion() {
	for k, g := range p.cong {
		p.publish(p.subject("event.congestion", k.node), congestionMessage(p.cfg.CollectorID, k, g))
		delete(p.cong, k)
	}
}

// summaries publishes the flows updated since since, one message per node
// of each path, and returns the start of the next window.
func (p *Publisher) summaries(since int64) int64 {
	now := time.Now().UnixNano()
	type out struct {
		subject string
		msg     *FlowSummary
	}
	var msgs []out
	p.c.Summaries(since, func(f *collector.FlowState) {
		for h := 0; h < f.NHops; h++ {
			s := summaryMessage(p.cfg.CollectorID, f, h, f.Path[h].NodeID, since, now)
			msgs = append(msgs, out{p.subject("summary", s.Node), s})
		}
		for _, n := range f.Left[:f.NLeft] {
			s := summaryMessage(p.cfg.CollectorID, f, -1, n, since, now)
			msgs = append(msgs, out{p.subject("summary", n), s})
		}
	})
	for _, m := range msgs {
		p.publish(m.subject, m.msg)
	}
	return now
}

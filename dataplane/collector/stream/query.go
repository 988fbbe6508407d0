package stream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Query selects flows from the summaries in the stream.
type Query struct {
	Stream, Prefix string
	// Node is the node the flows went through.
	Node uint32
	// Above is the latency bound (ns): a flow is selected when a summary
	// in the window has a window maximum above it, of the end-to-end
	// latency, or of Node's hop latency with HopLatency set.
	Above      uint64
	HopLatency bool
	// Since is how far back the window starts.
	Since time.Duration
}

// FlowResult is one selected flow.
type FlowResult struct {
	Flow Flow `json:"flow"`
	// MaxLatency is the largest latency above the bound in the window (ns).
	MaxLatency uint64    `json:"max_latency_ns"`
	Path       []uint32  `json:"path"`
	LastSeen   time.Time `json:"last_seen"`
	// Collectors are the collectors whose summaries selected the flow.
	Collectors []string `json:"collectors"`
}

// Attempts to create a consumer. nats-server before 2.9.12 places a
// consumer with fewer replicas than its stream (the one-replica consumers
// used here) on a random replica of the stream, offline ones included,
// and a consumer placed on a dead server never answers its creation. So
// while one attempt waits, another starts every consumerHedge under a new
// name (placed anew); the first created wins. On a live server creation
// takes milliseconds; consumerAttempt bounds one attempt on a loaded
// cluster.
const (
	consumerHedge   = time.Second
	consumerAttempt = 10 * time.Second
)

// Consumer creates an ephemeral pull consumer of stream (no
// acknowledgements, one replica, in memory) delivering what cfg selects,
// and returns it with the number of messages it has to deliver. Attempts
// (see consumerHedge) go on until one succeeds or ctx ends.
func Consumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, uint64, error) {
	cc := jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, Replicas: 1, MemoryStorage: true,
		InactiveThreshold: time.Minute, DeliverPolicy: cfg.DeliverPolicy, OptStartSeq: cfg.OptStartSeq, OptStartTime: cfg.OptStartTime}
	if len(cfg.FilterSubjects) == 1 {
		cc.FilterSubject = cfg.FilterSubjects[0] // servers before 2.10 know only one
	} else {
		cc.FilterSubjects = cfg.FilterSubjects
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the attempts still running
	type result struct {
		cons jetstream.Consumer
		err  error
	}
	results := make(chan result)
	attempt := func() {
		c := cc
		c.Name = nats.NewInbox()[len(nats.InboxPrefix):]
		go func() {
			a, done := context.WithTimeout(ctx, consumerAttempt)
			cons, err := js.CreateConsumer(a, stream, c)
			done()
			select {
			case results <- result{cons, err}:
			case <-ctx.Done():
				if err == nil { // another attempt won
					d, done := context.WithTimeout(context.Background(), 2*time.Second)
					js.DeleteConsumer(d, stream, c.Name)
					done()
				}
			}
		}()
	}
	hedge := time.NewTicker(consumerHedge)
	defer hedge.Stop()
	attempt()
	running, err := 1, error(nil)
	for {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				return r.cons, r.cons.CachedInfo().NumPending, nil
			}
			err = r.err
			if running == 0 {
				// Failed outright (no leader yet): the next hedge tick
				// tries again.
				hedge.Reset(250 * time.Millisecond)
			}
		case <-hedge.C:
			hedge.Reset(consumerHedge)
			attempt()
			running++
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return nil, 0, err
		}
	}
}

// Run reads the node's summaries of the window from the stream (an
// ephemeral consumer, deleted after) and returns the flows
// above the bound, highest latency first.
func (q *Query) Run(ctx context.Context, js jetstream.JetStream) ([]FlowResult, error) {
	if q.Stream == "" {
		q.Stream = DefaultStream
	}
	if q.Prefix == "" {
		q.Prefix = DefaultPrefix
	}
	start := time.Now().Add(-q.Since)
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{q.Prefix + ".summary." + strconv.FormatUint(uint64(q.Node), 10)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &start}
	byFlow := map[Flow]*FlowResult{}
	err := Read(ctx, js, q.Stream, cfg, func(m jetstream.Msg) {
		var s FlowSummary
		if json.Unmarshal(m.Data(), &s) == nil {
			q.add(byFlow, &s) // idempotent: a message read twice changes nothing
		}
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", q.Stream, err)
	}
	out := make([]FlowResult, 0, len(byFlow))
	for _, r := range byFlow {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b FlowResult) int {
		return cmp.Or(cmp.Compare(b.MaxLatency, a.MaxLatency), cmp.Compare(a.Flow.Src, b.Flow.Src), cmp.Compare(a.Flow.Dst, b.Flow.Dst),
			cmp.Compare(a.Flow.Proto, b.Flow.Proto), cmp.Compare(a.Flow.SrcPort, b.Flow.SrcPort), cmp.Compare(a.Flow.DstPort, b.Flow.DstPort))
	})
	return out, nil
}

// Read calls fn for every message of stream that cfg selects, in order,
// until none is pending. A consumer that fails (its server died, a
// message went missing) is made again from the first message not read
// yet, until ctx ends; fn may then see a message twice.
func Read(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, fn func(jetstream.Msg)) error {
	var last uint64
	for {
		err := read(ctx, js, stream, cfg, fn, &last)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
		if last > 0 {
			cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, last+1
		}
	}
}

// read is one consumer's part of Read; last is the stream sequence of the
// last message read.
func read(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, fn func(jetstream.Msg), last *uint64) error {
	cons, pending, err := Consumer(ctx, js, stream, cfg)
	if err != nil {
		return err
	}
	defer func() {
		// Not needed after a minute anyway; a consumer on a dead server
		// does not answer.
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		js.DeleteConsumer(c, stream, cons.CachedInfo().Name)
		cancel()
	}()
	var delivered uint64 // the consumer's sequence: a gap is a lost message
	for pending > 0 {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(int(min(pending, 1024)), jetstream.FetchContext(c))
		if err != nil {
			cancel()
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err == nil && md.Sequence.Consumer != delivered+1 {
				err = fmt.Errorf("message %d of the consumer missing", delivered+1)
			}
			if err != nil {
				cancel()
				return err
			}
			delivered, pending, *last = md.Sequence.Consumer, md.NumPending, md.Sequence.Stream
			fn(m)
		}
		cancel()
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%d messages announced were not delivered", pending)
		}
	}
	return nil
}
func (q *Query) add(byFlow map[Flow]*FlowResult, s *FlowSummary) {
	lat := s.EndToEnd.WindowMax
	if q.HopLatency {
		lat = s.HopLatency.WindowMax
	}
	if lat <= q.Above {
		return
	}
	r := byFlow[s.Flow]
	if r == nil {
		r = &FlowResult{Flow: s.Flow}
		byFlow[s.Flow] = r
	}
	r.MaxLatency = max(r.MaxLatency, lat)
	if s.LastSeen.After(r.LastSeen) {
		r.LastSeen, r.Path = s.LastSeen, s.Path
	}
	if !slices.Contains(r.Collectors, s.Collector) {
		r.Collectors = append(r.Collectors, s.Collector)
		slices.Sort(r.Collectors)
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openconfig/gnmi/ctree"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The gnmi subscribe package serves ONCE, POLL and STREAM ON_CHANGE over
// the cache, but it requires prefix.target, has no SAMPLE mode,
// heartbeat_interval or suppress_redundant, splits nothing for
// TARGET_DEFINED, and its only protection against a stalled client is a
// send timeout. This file is the thin layer that adds those: the cache
// stays the datastore (queries walk it, its client callback feeds
// github.com/openconfig/gnmi/match for ON_CHANGE), and each subscription
// gets a bounded, path-coalescing queue (queue.go).

var syncResponse = &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}}

// leafSub is one subscribed path after expansion, with its trigger.
type leafSub struct {
	sc        *schema
	query     []string // cache query: target, then path strings
	onChange  bool     // ON_CHANGE part (TARGET_DEFINED: non-counters)
	sample    time.Duration
	suppress  bool
	heartbeat time.Duration
	// origin is echoed in responses' prefix, as the client sent it (§2.7).
	origin string
	// Which leaves of the query the trigger covers: kind (filterNone,
	// filterCounters, filterNonCounters) and models (use_models).
	kind   int
	models modelSet
	// maxLen, when not 0, is the longest leaf path covered (depth).
	maxLen int
}

// covers reports whether a leaf path the query matched belongs to sub.
func (sub *leafSub) covers(p *gpb.Path) bool {
	if sub.maxLen > 0 && len(p.GetElem()) > sub.maxLen {
		return false
	}
	switch sub.kind {
	case filterCounters:
		if !isCounterPath(p) {
			return false
		}
	case filterNonCounters:
		if isCounterPath(p) {
			return false
		}
	}
	return sub.models.allowsPath(sub.sc, p)
}

// filtered reports whether covers may refuse a leaf the query matches.
func (sub *leafSub) filtered() bool {
	return sub.kind != filterNone || sub.models != nil || sub.maxLen > 0
}

type session struct {
	srv    *Server
	t      *target
	echo   string
	enc    gpb.Encoding
	stream gpb.GNMI_SubscribeServer
	q      *outQueue
	subs   []*leafSub
	ctx    context.Context
	// sending is when the Send in progress started (UnixNano), or 0.
	sending atomic.Int64
}

// Subscribe implements gNMI Subscribe.
func (s *Server) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	client := clientOf(stream.Context())
	done, err := s.openStream(client)
	if err != nil {
		return err
	}
	defer done()
	req, err := stream.Recv()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	sl := req.GetSubscribe()
	if sl == nil {
		return status.Error(codes.InvalidArgument, "the first SubscribeRequest must carry a SubscriptionList")
	}
	enc := sl.GetEncoding()
	if err := checkEncoding(enc); err != nil {
		return err
	}
	ext, err := parseExtensions(extSubscribe, req.GetExtension())
	if err != nil {
		return err
	}
	models, err := s.schema.useModels(sl.GetUseModels())
	if err != nil {
		return err
	}
	t, echo, err := s.targetFor(sl.GetPrefix())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ss := &session{srv: s, t: t, echo: echo, enc: enc, stream: stream, q: newOutQueue(s.o.maxPending, s.o.maxPendingBytes), ctx: ctx}
	if err := ss.compile(sl, models, int(ext.depth)); err != nil {
		return err
	}

	sendErr := make(chan error, 1)
	go func() { sendErr <- ss.sendLoop() }()
	go ss.watchdog()
	// A client that stopped reading leaves sendLoop blocked in Send: the
	// RPC ends without waiting for it (ending it unblocks the Send).
	sent := func() error {
		select {
		case err := <-sendErr:
			return err
		case <-ss.q.dead:
			cancel()
			return ss.overflowErr()
		}
	}

	switch sl.GetMode() {
	case gpb.SubscriptionList_ONCE:
		go func() {
			// updates_only: ONCE sends only the sync_response (§3.5.1.2).
			if sl.GetUpdatesOnly() || ss.walkAll() == nil {
				ss.q.insert(ctx, "", 0, syncResponse, true)
			}
			ss.q.close()
		}()
		return sent()
	case gpb.SubscriptionList_POLL:
		pollErr := make(chan error, 1)
		go func() { pollErr <- ss.pollLoop(sl.GetUpdatesOnly()) }()
		select {
		case err := <-sendErr:
			return err
		case <-ss.q.dead:
			cancel()
			return ss.overflowErr()
		case err := <-pollErr:
			if err != nil {
				cancel()
				return err
			}
			// The client half-closed: every poll it sent is answered
			// once the queue drains.
			return sent()
		}
	case gpb.SubscriptionList_STREAM:
		return ss.stream_(sl, sendErr)
	}
	return status.Errorf(codes.InvalidArgument, "unknown subscription mode %v", sl.GetMode())
}

// compile expands the subscriptions' paths and sets their triggers.
func (ss *session) compile(sl *gpb.SubscriptionList, models modelSet, depth int) error {
	s := ss.srv
	if len(sl.GetSubscription()) == 0 {
		return status.Error(codes.InvalidArgument, "the SubscriptionList has no subscription")
	}
	if n := len(sl.GetSubscription()); n > s.o.maxPaths {
		return status.Errorf(codes.ResourceExhausted, "the SubscriptionList has %d subscriptions, more than the %d allowed", n, s.o.maxPaths)
	}
	// Identical subscriptions (after expansion) are served once.
	seen := map[string]bool{}
	add := func(l *leafSub) {
		k := fmt.Sprintf("%q %v %v %v %v %q %d %d", l.query, l.onChange, l.sample, l.suppress, l.heartbeat, l.origin, l.kind, l.maxLen)
		if !seen[k] {
			seen[k] = true
			ss.subs = append(ss.subs, l)
		}
	}
	for _, sub := range sl.GetSubscription() {
		elems, origin, err := s.schema.joinPaths(sl.GetPrefix(), sub.GetPath())
		if err != nil {
			return err
		}
		rs, err := s.schema.resolve(elems, s.schema.forOrigin(origin, models))
		if err != nil {
			return err
		}
		sample := time.Duration(min(sub.GetSampleInterval(), uint64(math.MaxInt64)))
		if sl.GetMode() == gpb.SubscriptionList_STREAM {
			switch sub.GetMode() {
			case gpb.SubscriptionMode_SAMPLE:
				// §3.5.1.5.2: 0 is the lowest interval the target supports;
				// a shorter one than that is refused.
				if sample == 0 {
					sample = s.o.minSample
				} else if sample < s.o.minSample {
					return status.Errorf(codes.InvalidArgument, "sample_interval %v of %s is below the shortest supported, %v", sample, orRoot(pathString(elems)), s.o.minSample)
				}
			case gpb.SubscriptionMode_TARGET_DEFINED:
				if sample != 0 {
					return status.Errorf(codes.InvalidArgument, "TARGET_DEFINED subscription to %s gives a sample_interval: the target chooses it; use SAMPLE to set one", orRoot(pathString(elems)))
				}
			}
		}
		hb := time.Duration(min(sub.GetHeartbeatInterval(), uint64(math.MaxInt64)))
		if hb > 0 {
			hb = max(hb, s.o.minSample)
		}
		for _, r := range rs {
			q := append([]string{ss.t.name}, r.queryStrings()...)
			base := leafSub{sc: s.schema, query: q, origin: origin, models: s.schema.forOrigin(origin, models)}
			if depth > 0 {
				base.maxLen = len(r.path.Elem) + depth
			}
			with := func(f func(*leafSub)) *leafSub {
				ls := base
				f(&ls)
				return &ls
			}
			switch sub.GetMode() {
			case gpb.SubscriptionMode_ON_CHANGE:
				add(with(func(l *leafSub) { l.onChange, l.heartbeat = true, hb }))
			case gpb.SubscriptionMode_SAMPLE:
				add(with(func(l *leafSub) { l.sample, l.suppress, l.heartbeat = sample, sub.GetSuppressRedundant(), hb }))
			case gpb.SubscriptionMode_TARGET_DEFINED:
				add(with(func(l *leafSub) { l.onChange, l.heartbeat, l.kind = true, hb, filterNonCounters }))
				add(with(func(l *leafSub) { l.sample, l.kind = s.o.targetDefSample, filterCounters }))
			default:
				return status.Errorf(codes.InvalidArgument, "unknown subscription mode %v", sub.GetMode())
			}
		}
	}
	return nil
}

// sendLoop writes queued responses to the stream until the queue closes
// (nil), overflows (RESOURCE_EXHAUSTED) or the stream fails.
func (ss *session) sendLoop() error {
	for {
		resp, err := ss.q.next(ss.ctx)
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, errOverflow):
			return ss.overflowErr()
		case err != nil:
			return status.FromContextError(err).Err()
		}
		ss.sending.Store(time.Now().UnixNano())
		err = ss.stream.Send(resp)
		ss.sending.Store(0)
		if err != nil {
			return err
		}
	}
}

func (ss *session) overflowErr() error {
	return status.Errorf(codes.ResourceExhausted, "subscription ended: the client is not reading fast enough (more than %d updates or %d bytes pending, or none accepted for %v)", ss.q.max, ss.q.maxBytes, ss.srv.o.stallTimeout)
}

// watchdog cuts off a client that accepts no response for the stall
// timeout: its flow control window stays full, so Send cannot complete.
func (ss *session) watchdog() {
	stall := ss.srv.o.stallTimeout
	tick := time.NewTicker(max(stall/4, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ss.ctx.Done():
			return
		case <-ss.q.dead:
			return
		case <-tick.C:
		}
		if since := ss.sending.Load(); since != 0 && time.Since(time.Unix(0, since)) > stall {
			ss.q.kill()
			return
		}
	}
}

// pollLoop answers the initial poll (only a sync_response with
// updates_only) and then every Poll request, until the client half-closes
// (nil) or sends something other than a Poll (INVALID_ARGUMENT).
func (ss *session) pollLoop(updatesOnly bool) error {
	defer ss.q.close()
	for first := true; ; first = false {
		if !first {
			req, err := ss.stream.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if req.GetPoll() == nil {
				if req.GetSubscribe() != nil {
					return status.Error(codes.InvalidArgument, "a POLL subscription cannot be changed: only Poll requests may follow its SubscriptionList; open a new Subscribe RPC")
				}
				return status.Error(codes.InvalidArgument, "only Poll requests may follow the SubscriptionList of a POLL subscription")
			}
			if len(req.GetExtension()) > 0 {
				return status.Error(codes.InvalidArgument, "extensions go with the SubscriptionList, not with a Poll")
			}
		}
		if !(first && updatesOnly) {
			if err := ss.walkAll(); err != nil {
				return nil // the queue is closed: the send side reports why
			}
		}
		if ss.q.insert(ss.ctx, "", 0, syncResponse, true) != nil {
			return nil
		}
	}
}

// stream_ runs a STREAM subscription until the client goes or it fails.
func (ss *session) stream_(sl *gpb.SubscriptionList, sendErr chan error) error {
	samplers := make([]*sampler, 0)
	for _, sub := range ss.subs {
		if sub.sample > 0 {
			sm := newSampler(ss, sub)
			defer sm.release() // after wg.Wait, deferred below
			samplers = append(samplers, sm)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ss.ctx)
	defer cancel()
	// Register ON_CHANGE queries before walking, so no change is lost
	// between the walk and the registration.
	for _, sub := range ss.subs {
		if !sub.onChange {
			continue
		}
		remove := ss.srv.match.AddQuery(sub.query, &matchClient{ss: ss, sub: sub})
		defer remove()
	}
	updatesOnly := sl.GetUpdatesOnly()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !updatesOnly {
			for _, sub := range ss.subs {
				if sub.onChange && ss.walk(sub, false, nil) != nil {
					return
				}
			}
			for _, sm := range samplers {
				if sm.run(true) != nil {
					return
				}
			}
		}
		if ss.q.insert(ctx, "", 0, syncResponse, true) != nil {
			return
		}
		for _, sm := range samplers {
			wg.Add(1)
			go func() { defer wg.Done(); sm.loop(ctx) }()
		}
		for _, sub := range ss.subs {
			if sub.onChange && sub.heartbeat > 0 {
				wg.Add(1)
				go func() { defer wg.Done(); ss.heartbeat(ctx, sub) }()
			}
		}
	}()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := ss.stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if req.GetSubscribe() != nil {
				recvErr <- status.Error(codes.InvalidArgument, "a subscription cannot be changed; open a new Subscribe RPC")
				return
			}
			if len(req.GetExtension()) > 0 {
				recvErr <- status.Error(codes.InvalidArgument, "extensions go with the SubscriptionList; a subscription cannot be changed")
				return
			}
		}
	}()
	for {
		select {
		case err := <-sendErr:
			cancel()
			ss.q.close()
			return err
		case <-ss.q.dead:
			cancel()
			return ss.overflowErr()
		case err := <-recvErr:
			if err == io.EOF {
				// A half-close is not a cancellation (§3.5.1.1): the
				// subscription streams on until the RPC is cancelled.
				recvErr = nil
				continue
			}
			cancel()
			ss.q.close()
			return err
		}
	}
}

// matchClient receives ON_CHANGE updates from the cache (via match) on
// the publishing goroutine: it must not block.
type matchClient struct {
	ss  *session
	sub *leafSub
}

func (c *matchClient) Update(v any) {
	l, ok := v.(*ctree.Leaf)
	if !ok {
		return
	}
	n, ok := l.Value().(*gpb.Notification)
	if !ok {
		return
	}
	key, resp := c.ss.response(n, c.sub)
	if resp == nil {
		return
	}
	c.ss.q.insert(c.ss.ctx, key, n.GetTimestamp(), resp, false)
}

// prefix is the prefix of sub's notifications: the echoed target and
// origin, or nil.
func (ss *session) prefix(sub *leafSub) *gpb.Path {
	if ss.echo == "" && sub.origin == "" {
		return nil
	}
	return &gpb.Path{Target: ss.echo, Origin: sub.origin}
}

// response builds the client's response for a cached one-leaf
// notification, or nil when sub does not cover it.
func (ss *session) response(n *gpb.Notification, sub *leafSub) (string, *gpb.SubscribeResponse) {
	out := &gpb.Notification{Timestamp: n.GetTimestamp(), Prefix: ss.prefix(sub)}
	var p *gpb.Path
	switch {
	case len(n.GetUpdate()) == 1:
		u := n.GetUpdate()[0]
		p = &gpb.Path{Elem: u.GetPath().GetElem()}
		val := u.GetVal()
		if ss.enc != gpb.Encoding_PROTO {
			val = ss.srv.schema.leafJSON(p.Elem, val, ss.enc == gpb.Encoding_JSON_IETF)
		}
		out.Update = []*gpb.Update{{Path: p, Val: val}}
	case len(n.GetDelete()) == 1:
		p = &gpb.Path{Elem: n.GetDelete()[0].GetElem()}
		out.Delete = []*gpb.Path{p}
	default:
		return "", nil
	}
	if sub.filtered() && !sub.covers(p) {
		return "", nil
	}
	return sub.origin + pathString(p.Elem), &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: out}}
}

// walk queues the current value of every cached leaf sub covers; visit,
// when set, sees each leaf first and may skip it by returning false.
//
// With batch, leaves that share a timestamp (published together) travel
// in one notification of up to maxBatch updates: that is how ONCE, POLL
// and SAMPLE answers go. Without it every leaf is its own item, coalescing
// by path with the live ON_CHANGE updates, which keeps a STREAM's initial
// walk from overtaking a newer change.
func (ss *session) walk(sub *leafSub, batch bool, visit func(l *ctree.Leaf, n *gpb.Notification) bool) error {
	var err error
	b := &batcher{ss: ss, sub: sub}
	qerr := ss.srv.cache.Query(sub.query[0], sub.query[1:], func(_ []string, l *ctree.Leaf, v any) error {
		n, ok := v.(*gpb.Notification)
		if !ok {
			return nil
		}
		if batch {
			if !accept(n, sub) || (visit != nil && !visit(l, n)) {
				return nil
			}
			err = b.add(n)
			return err
		}
		key, resp := ss.response(n, sub)
		if resp == nil || (visit != nil && !visit(l, n)) {
			return nil
		}
		err = ss.q.insert(ss.ctx, key, n.GetTimestamp(), resp, true)
		return err
	})
	if err == nil && batch {
		err = b.flush()
	}
	if err != nil {
		return err
	}
	return qerr
}

// accept reports whether sub covers a cached one-leaf notification.
func accept(n *gpb.Notification, sub *leafSub) bool {
	switch {
	case len(n.GetUpdate()) == 1:
		return !sub.filtered() || sub.covers(n.GetUpdate()[0].GetPath())
	case len(n.GetDelete()) == 1:
		return !sub.filtered() || sub.covers(n.GetDelete()[0])
	}
	return false
}

const maxBatch = 512

// batcher gathers one-leaf notifications with equal timestamps into one.
type batcher struct {
	ss  *session
	sub *leafSub
	cur *gpb.Notification
}

// add appends a cached one-leaf notification. Cached updates are never
// modified, so PROTO answers share them.
func (b *batcher) add(n *gpb.Notification) error {
	if b.cur != nil && (b.cur.GetTimestamp() != n.GetTimestamp() || len(b.cur.Update)+len(b.cur.Delete) >= maxBatch) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	if b.cur == nil {
		b.cur = &gpb.Notification{Timestamp: n.GetTimestamp(), Prefix: b.ss.prefix(b.sub)}
	}
	for _, u := range n.GetUpdate() {
		if b.ss.enc != gpb.Encoding_PROTO {
			u = &gpb.Update{Path: u.GetPath(), Val: b.ss.srv.schema.leafJSON(u.GetPath().GetElem(), u.GetVal(), b.ss.enc == gpb.Encoding_JSON_IETF)}
		}
		b.cur.Update = append(b.cur.Update, u)
	}
	for _, d := range n.GetDelete() {
		b.cur.Delete = append(b.cur.Delete, &gpb.Path{Elem: d.GetElem()})
	}
	return nil
}

func (b *batcher) flush() error {
	if b.cur == nil {
		return nil
	}
	n := b.cur
	b.cur = nil
	return b.ss.q.insert(b.ss.ctx, "", n.GetTimestamp(), &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}}, true)
}

func (ss *session) walkAll() error {
	for _, sub := range ss.subs {
		if err := ss.walk(sub, true, nil); err != nil {
			return err
		}
	}
	return nil
}

func (ss *session) heartbeat(ctx context.Context, sub *leafSub) {
	tick := time.NewTicker(sub.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ss.walk(sub, true, nil) != nil {
			return
		}
	}
}

package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openconfig/gnmi/ctree"
	"github.com/openconfig/gnmi/path"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/value"
	"google.golang.org/protobuf/proto"
)

// SAMPLE at scale. A sample round of a subscription is a function of the
// cache contents, the subscribed query and filter, the encoding and the
// echoed target (a sampled update carries the timestamp its leaf was
// published with, not the sampling time). So every sampler of the same
// (query, filter, encoding, echo) shares one round per cache generation:
// the first sampler to tick after a publish walks the cache once and
// encodes the leaves once, into as few SubscribeResponses as fit
// maxSampleBytes, and the others queue the same encoded responses. The
// encoding is kept as the response's unknown fields (valid SubscribeResponse
// wire format), so gRPC's marshal of a shared response is a copy of its
// bytes, not a walk of 10,000 updates per subscriber.

// maxSampleBytes bounds one encoded sample response, well under gRPC's
// default 4 MiB receive limit.
const maxSampleBytes = 1 << 20

// filter kinds, part of a round's identity.
const (
	filterNone = iota
	filterCounters
	filterNonCounters
)

type roundKey struct {
	query  string
	filter int
	models string
	maxLen int
	enc    gpb.Encoding
	echo   string
	origin string
}

// roundSlot holds the latest round of one roundKey, for as long as a
// sampler uses it.
type roundSlot struct {
	mu   sync.Mutex // serialises building: one walk per generation
	refs int        // guarded by target.rmu
	cur  *round
}

// round is one sampled snapshot, immutable once built.
type round struct {
	gen    uint64
	leaves []*ctree.Leaf
	ns     []*gpb.Notification // the leaves' cached one-update notifications
	ids    uint64              // equal between rounds with identical leaves
	msgs   []sampleMsg         // the whole round, encoded

	setOnce sync.Once
	set     map[*ctree.Leaf]struct{}
}

// leafSetIDs numbers distinct leaf sets of rounds.
var leafSetIDs atomic.Uint64

type sampleMsg struct {
	ts   int64
	resp *gpb.SubscribeResponse
}

func (r *round) leafSet() map[*ctree.Leaf]struct{} {
	r.setOnce.Do(func() {
		r.set = make(map[*ctree.Leaf]struct{}, len(r.leaves))
		for _, l := range r.leaves {
			r.set[l] = struct{}{}
		}
	})
	return r.set
}

// acquireSlot returns the shared round slot for k, counting a user.
func (t *target) acquireSlot(k roundKey) *roundSlot {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	if t.rounds == nil {
		t.rounds = map[roundKey]*roundSlot{}
	}
	s := t.rounds[k]
	if s == nil {
		s = &roundSlot{}
		t.rounds[k] = s
	}
	s.refs++
	return s
}

func (t *target) releaseSlot(k roundKey) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	if s := t.rounds[k]; s != nil {
		if s.refs--; s.refs <= 0 {
			delete(t.rounds, k)
		}
	}
}

// sampler runs one SAMPLE trigger: every interval it sends the covered
// leaves (with suppress_redundant only those whose value changed, or all
// of them when the heartbeat is due) and deletes for leaves gone since
// the previous sample.
type sampler struct {
	ss     *session
	sub    *leafSub
	key    roundKey
	slot   *roundSlot
	prev   *round // the previous round this sampler sent from
	lastHB time.Time
}

func newSampler(ss *session, sub *leafSub) *sampler {
	k := roundKey{query: strings.Join(sub.query, "\x00"), filter: sub.kind, models: sub.models.key(), maxLen: sub.maxLen, enc: ss.enc, echo: ss.echo, origin: sub.origin}
	return &sampler{ss: ss, sub: sub, key: k, slot: ss.t.acquireSlot(k)}
}

func (sm *sampler) release() { sm.ss.t.releaseSlot(sm.key) }

func (sm *sampler) loop(ctx context.Context) {
	tick := time.NewTicker(sm.sub.sample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if sm.run(false) != nil {
			return
		}
	}
}

// current returns the round for the cache as it is now, building it when
// no sampler of the same key has since the last publish.
func (sm *sampler) current() *round {
	t := sm.ss.t
	sm.slot.mu.Lock()
	defer sm.slot.mu.Unlock()
	g := t.gen.Load()
	prev := sm.slot.cur
	if prev != nil && prev.gen == g && g%2 == 0 {
		return prev
	}
	r := sm.build(g, prev)
	// A publish during the walk (odd generation, or a changed one) may have
	// left the round half old, half new: use it once, share it never.
	if g%2 == 0 && t.gen.Load() == g {
		sm.slot.cur = r
	}
	return r
}

// build walks the cache once and encodes the round.
func (sm *sampler) build(gen uint64, prev *round) *round {
	ss, sub := sm.ss, sm.sub
	r := &round{gen: gen}
	if prev != nil {
		r.leaves = make([]*ctree.Leaf, 0, len(prev.leaves))
		r.ns = make([]*gpb.Notification, 0, len(prev.ns))
	}
	ss.srv.cache.Query(sub.query[0], sub.query[1:], func(_ []string, l *ctree.Leaf, v any) error {
		n, ok := v.(*gpb.Notification)
		if !ok || len(n.GetUpdate()) != 1 || !accept(n, sub) {
			return nil
		}
		r.leaves = append(r.leaves, l)
		r.ns = append(r.ns, n)
		return nil
	})
	if prev != nil && len(prev.leaves) == len(r.leaves) {
		same := true
		for i, l := range r.leaves {
			if prev.leaves[i] != l {
				same = false
				break
			}
		}
		if same {
			r.ids = prev.ids
		}
	}
	if r.ids == 0 {
		r.ids = leafSetIDs.Add(1)
	}
	r.msgs = ss.srv.schema.encodeRound(r.ns, ss.enc, ss.prefix(sub))
	return r
}

// encodeRound encodes cached one-update notifications as few responses:
// consecutive leaves with one timestamp share a notification, up to
// maxSampleBytes each.
func (sc *schema) encodeRound(ns []*gpb.Notification, enc gpb.Encoding, prefix *gpb.Path) []sampleMsg {
	// Leaves published together share a timestamp but need not be
	// adjacent in path order: group them (stable, in order of first
	// appearance) so that each timestamp costs one notification.
	for i := 1; i < len(ns); i++ {
		if ns[i].GetTimestamp() != ns[0].GetTimestamp() {
			ns = groupByTimestamp(ns)
			break
		}
	}
	var out []sampleMsg
	var cur *gpb.Notification
	size := 0
	flush := func() {
		if cur == nil {
			return
		}
		resp := &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: cur}}
		b, err := proto.Marshal(resp)
		if err == nil {
			// Shared by every subscriber: marshalling it again is a copy.
			shared := &gpb.SubscribeResponse{}
			shared.ProtoReflect().SetUnknown(b)
			resp = shared
		}
		out = append(out, sampleMsg{ts: cur.GetTimestamp(), resp: resp})
		cur = nil
	}
	for _, n := range ns {
		u := n.GetUpdate()[0]
		if enc != gpb.Encoding_PROTO {
			u = &gpb.Update{Path: u.GetPath(), Val: sc.leafJSON(u.GetPath().GetElem(), u.GetVal(), enc == gpb.Encoding_JSON_IETF)}
		}
		us := proto.Size(u) + 4
		if cur != nil && (cur.GetTimestamp() != n.GetTimestamp() || size+us > maxSampleBytes) {
			flush()
		}
		if cur == nil {
			cur = &gpb.Notification{Timestamp: n.GetTimestamp(), Prefix: prefix}
			size = 0
		}
		cur.Update = append(cur.Update, u)
		size += us
	}
	flush()
	return out
}

func groupByTimestamp(ns []*gpb.Notification) []*gpb.Notification {
	groups := map[int64][]*gpb.Notification{}
	var order []int64
	for _, n := range ns {
		ts := n.GetTimestamp()
		if _, ok := groups[ts]; !ok {
			order = append(order, ts)
		}
		groups[ts] = append(groups[ts], n)
	}
	out := make([]*gpb.Notification, 0, len(ns))
	for _, ts := range order {
		out = append(out, groups[ts]...)
	}
	return out
}

func (sm *sampler) run(first bool) error {
	ss := sm.ss
	now := time.Now()
	hbDue := first || (sm.sub.heartbeat > 0 && now.Sub(sm.lastHB) >= sm.sub.heartbeat)
	if hbDue {
		sm.lastHB = now
	}
	r := sm.current()
	prev := sm.prev
	sm.prev = r
	if !sm.sub.suppress || hbDue || prev == nil {
		for _, m := range r.msgs {
			if err := ss.q.insert(ss.ctx, "", m.ts, m.resp, true); err != nil {
				return err
			}
		}
	} else if err := sm.sendChanged(prev, r); err != nil {
		return err
	}
	if prev == nil || prev.ids == r.ids {
		return nil
	}
	// Deletes for leaves gone since the previous round.
	set := r.leafSet()
	for i, l := range prev.leaves {
		if _, ok := set[l]; ok {
			continue
		}
		p := prev.ns[i].GetUpdate()[0].GetPath()
		if sm.exists(p) {
			continue // deleted and created again: this round sent it
		}
		out := &gpb.Notification{Timestamp: now.UnixNano(), Delete: []*gpb.Path{{Elem: p.GetElem()}}, Prefix: ss.prefix(sm.sub)}
		if err := ss.q.insert(ss.ctx, sm.sub.origin+pathString(p.GetElem()), now.UnixNano(), &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: out}}, true); err != nil {
			return err
		}
	}
	return nil
}

// sendChanged queues, for suppress_redundant, the leaves of r that are
// new or whose value changed since prev.
func (sm *sampler) sendChanged(prev, r *round) error {
	b := &batcher{ss: sm.ss, sub: sm.sub}
	changed := func(old, n *gpb.Notification) bool {
		if old == n {
			return false
		}
		ov, nv := old.GetUpdate()[0].GetVal(), n.GetUpdate()[0].GetVal()
		return !(ov == nv || value.Equal(ov, nv))
	}
	if prev.ids == r.ids {
		for i, n := range r.ns {
			if changed(prev.ns[i], n) {
				if err := b.add(n); err != nil {
					return err
				}
			}
		}
		return b.flush()
	}
	old := make(map[*ctree.Leaf]*gpb.Notification, len(prev.leaves))
	for i, l := range prev.leaves {
		old[l] = prev.ns[i]
	}
	for i, l := range r.leaves {
		if o, had := old[l]; !had || changed(o, r.ns[i]) {
			if err := b.add(r.ns[i]); err != nil {
				return err
			}
		}
	}
	return b.flush()
}

// exists reports whether the cache holds a leaf at p now.
func (sm *sampler) exists(p *gpb.Path) bool {
	found := false
	sm.ss.srv.cache.Query(sm.ss.t.name, path.ToStrings(p, false), func([]string, *ctree.Leaf, any) error {
		found = true
		return nil
	})
	return found
}

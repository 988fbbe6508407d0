package server

import (
	"context"
	"errors"
	"io"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// errOverflow ends a subscription whose client fell too far behind.
var errOverflow = errors.New("subscriber too slow: pending updates exceed the bound")

// outQueue is a subscription's queue of responses to send. Updates are
// coalesced by path: a newer update for a path already waiting replaces it
// in place, so a slow reader sees the latest value and the queue grows
// only with distinct paths. Its length is bounded: an insert from the
// publishing side (nonblocking) that would exceed the bound marks the
// queue overflowed, and the subscription ends with RESOURCE_EXHAUSTED;
// inserts from the subscription's own goroutines (initial walk, polls,
// samples) wait for room instead. Publishers therefore never block.
type outQueue struct {
	mu       sync.Mutex
	items    []*qitem
	head     int
	pending  map[string]*qitem
	max      int
	closed   bool
	overflow bool
	ready    chan struct{} // signalled when items or closing appear
	room     chan struct{} // signalled when an item is taken
}

type qitem struct {
	key  string // "" for items that never coalesce (sync_response)
	ts   int64
	resp *gpb.SubscribeResponse
}

func newOutQueue(max int) *outQueue {
	return &outQueue{
		pending: map[string]*qitem{},
		max:     max,
		ready:   make(chan struct{}, 1),
		room:    make(chan struct{}, 1),
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (q *outQueue) lenLocked() int { return len(q.items) - q.head }

// insert queues resp under key; see outQueue. It returns an error once the
// queue is closed or overflowed.
func (q *outQueue) insert(ctx context.Context, key string, ts int64, resp *gpb.SubscribeResponse, block bool) error {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return io.EOF
		}
		if key != "" {
			if it := q.pending[key]; it != nil {
				if ts >= it.ts {
					it.ts, it.resp = ts, resp
				}
				q.mu.Unlock()
				return nil
			}
		}
		if q.lenLocked() < q.max {
			it := &qitem{key: key, ts: ts, resp: resp}
			q.items = append(q.items, it)
			if key != "" {
				q.pending[key] = it
			}
			q.mu.Unlock()
			signal(q.ready)
			return nil
		}
		if !block {
			q.overflow, q.closed = true, true
			q.mu.Unlock()
			signal(q.ready)
			return errOverflow
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close lets the reader drain what is queued and then see io.EOF.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// next returns the oldest queued response, io.EOF after close once empty,
// or errOverflow.
func (q *outQueue) next(ctx context.Context) (*gpb.SubscribeResponse, error) {
	for {
		q.mu.Lock()
		if q.overflow {
			q.mu.Unlock()
			return nil, errOverflow
		}
		if q.lenLocked() > 0 {
			it := q.items[q.head]
			q.items[q.head] = nil
			q.head++
			if q.head > 1024 && q.head*2 > len(q.items) {
				q.items = append([]*qitem(nil), q.items[q.head:]...)
				q.head = 0
			}
			if it.key != "" && q.pending[it.key] == it {
				delete(q.pending, it.key)
			}
			q.mu.Unlock()
			signal(q.room)
			return it.resp, nil
		}
		if q.closed {
			q.mu.Unlock()
			return nil, io.EOF
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

package server

import (
	"context"
	"errors"
	"io"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
)

// errOverflow ends a subscription whose client fell too far behind.
var errOverflow = errors.New("subscriber too slow: pending updates exceed the bound")

// outQueue is a subscription's queue of responses to send. Updates are
// coalesced by path: a newer update for a path already waiting replaces it
// in place, so a slow reader sees the latest value and the queue grows
// only with distinct paths. Its length and its size in bytes are bounded:
// an insert from the publishing side (nonblocking) that would exceed a
// bound marks the queue overflowed, and the subscription ends with
// RESOURCE_EXHAUSTED; inserts from the subscription's own goroutines
// (initial walk, polls, samples) wait for room instead, for as long as the
// client keeps reading (a client that stops reading is cut off by the
// session's stall watchdog). Publishers therefore never block, and a
// subscriber never holds more than the bounds.
type outQueue struct {
	mu       sync.Mutex
	items    []*qitem
	head     int
	pending  map[string]*qitem
	max      int
	maxBytes int
	bytes    int
	closed   bool
	overflow bool
	ready    chan struct{} // signalled when items or closing appear
	room     chan struct{} // signalled when an item is taken
	dead     chan struct{} // closed when the queue overflows or is killed
	deadOnce sync.Once
}

type qitem struct {
	key  string // "" for items that never coalesce (sync_response)
	ts   int64
	size int
	resp *gpb.SubscribeResponse
}

func newOutQueue(max, maxBytes int) *outQueue {
	return &outQueue{
		pending:  map[string]*qitem{},
		max:      max,
		maxBytes: maxBytes,
		ready:    make(chan struct{}, 1),
		room:     make(chan struct{}, 1),
		dead:     make(chan struct{}),
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (q *outQueue) lenLocked() int { return len(q.items) - q.head }

// fitsLocked reports whether an item of size bytes has room; an empty
// queue takes any one item.
func (q *outQueue) fitsLocked(size int) bool {
	n := q.lenLocked()
	return n == 0 || (n < q.max && q.bytes+size <= q.maxBytes)
}

// kill marks the queue overflowed: the reader sees errOverflow, waiting
// writers give up, and dead closes.
func (q *outQueue) killLocked() {
	q.overflow, q.closed = true, true
	q.deadOnce.Do(func() { close(q.dead) })
	signal(q.ready)
	signal(q.room)
}

func (q *outQueue) kill() {
	q.mu.Lock()
	q.killLocked()
	q.mu.Unlock()
}

// insert queues resp under key; see outQueue. It returns an error once the
// queue is closed or overflowed.
func (q *outQueue) insert(ctx context.Context, key string, ts int64, resp *gpb.SubscribeResponse, block bool) error {
	size := proto.Size(resp)
	for {
		q.mu.Lock()
		if q.overflow {
			q.mu.Unlock()
			return errOverflow
		}
		if q.closed {
			q.mu.Unlock()
			return io.EOF
		}
		if key != "" {
			if it := q.pending[key]; it != nil {
				if ts >= it.ts {
					countDuplicate(it.resp, resp)
					q.bytes += size - it.size
					it.ts, it.resp, it.size = ts, resp, size
				}
				q.mu.Unlock()
				return nil
			}
		}
		if q.fitsLocked(size) {
			it := &qitem{key: key, ts: ts, resp: resp, size: size}
			q.items = append(q.items, it)
			q.bytes += size
			if key != "" {
				q.pending[key] = it
			}
			q.mu.Unlock()
			signal(q.ready)
			return nil
		}
		if !block {
			q.killLocked()
			q.mu.Unlock()
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
			q.bytes -= it.size
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

// countDuplicate carries the count of values a client never saw to the
// update replacing them (§2.1: duplicates). Keyed responses are one-leaf
// updates built for this queue alone, so resp may be changed.
func countDuplicate(old, resp *gpb.SubscribeResponse) {
	ou, nu := old.GetUpdate().GetUpdate(), resp.GetUpdate().GetUpdate()
	if len(nu) != 1 {
		return
	}
	n := uint32(1)
	if len(ou) == 1 {
		n += ou[0].GetDuplicates()
	}
	nu[0].Duplicates = n
}

package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// A SAMPLE subscriber that stops reading is cut off with
// RESOURCE_EXHAUSTED once it has accepted nothing for the stall timeout,
// while it is still stalled (not when it reads again), and meanwhile holds
// no more than the queue's bounds.
func TestStalledSampleSubscriberDropped(t *testing.T) {
	env := startServer(t, TargetOptions{}, WithStallTimeout(300*time.Millisecond), WithMaxPending(65536, 256<<10))
	set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries"), Val: watchlistBatch(1, 500)}}})
	conn, err := grpc.NewClient(env.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := gpb.NewGNMIClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: subList(gpb.SubscriptionList_STREAM, sampleSub(t, "/int/watchlist", 10*time.Millisecond))}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for env.srv.openStreams() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for env.srv.openStreams() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled subscriber was not cut off")
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := 0
	for {
		_, err := st.Recv()
		if err != nil {
			wantCode(t, err, codes.ResourceExhausted)
			break
		}
		n++
	}
	t.Logf("the stalled subscriber had %d responses in flight when cut off", n)
}

// The queue holds at most its bounds in items and bytes; an empty queue
// takes any one item.
func TestQueueBounds(t *testing.T) {
	ctx := context.Background()
	big := &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: &gpb.Notification{Update: []*gpb.Update{{Path: gp(t, "/a"), Val: jsonIETF(strings.Repeat("x", 3000))}}}}}
	q := newOutQueue(100, 5000)
	if err := q.insert(ctx, "a", 1, big, false); err != nil {
		t.Fatal(err)
	}
	if err := q.insert(ctx, "a", 2, big, false); err != nil {
		t.Fatalf("coalescing a path must not count twice: %v", err)
	}
	if err := q.insert(ctx, "b", 1, big, false); !errors.Is(err, errOverflow) {
		t.Fatalf("6 kB in a 5 kB queue: %v", err)
	}
	select {
	case <-q.dead:
	default:
		t.Fatal("an overflowed queue is not dead")
	}
	q = newOutQueue(100, 5000)
	q.insert(ctx, "a", 1, big, true)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := q.insert(wctx, "", 1, big, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a blocking insert into a full queue: %v, want to wait", err)
	}
	if _, err := q.next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.insert(ctx, "", 1, big, true); err != nil {
		t.Fatalf("after a read there is room: %v", err)
	}

	// Coalesced values are counted in duplicates (§2.1).
	one := func(v uint64) *gpb.SubscribeResponse {
		return &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: &gpb.Notification{Update: []*gpb.Update{{Path: gp(t, "/a"), Val: uintVal(v)}}}}}
	}
	q = newOutQueue(100, 1<<20)
	for v := uint64(1); v <= 3; v++ {
		q.insert(ctx, "/a", int64(v), one(v), false)
	}
	r, _ := q.next(ctx)
	if u := r.GetUpdate().GetUpdate()[0]; u.GetVal().GetUintVal() != 3 || u.GetDuplicates() != 2 {
		t.Errorf("coalesced update %v, want value 3 with 2 duplicates", u)
	}
}

// Per client: Subscribe RPCs open at once, and paths per request, are
// bounded; identical paths in one request are served once.
func TestClientLimitsAndDuplicates(t *testing.T) {
	env := startServer(t, TargetOptions{}, WithClientLimits(2, 300))
	s1 := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node")))
	s1.untilSync()
	s2 := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node")))
	s2.untilSync()
	_, err := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node"))).next()
	wantCode(t, err, codes.ResourceExhausted)
	s1.cancel()
	deadline := time.Now().Add(waitLimit)
	for env.srv.openStreams() > 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s3 := subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node")))
	s3.untilSync()

	many := func(n int) []*gpb.Subscription {
		out := make([]*gpb.Subscription, n)
		for i := range out {
			out[i] = onChange(t, "/int/node/config")
		}
		return out
	}
	_, err = subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, many(301)...)).next()
	wantCode(t, err, codes.ResourceExhausted)
	var paths []*gpb.Path
	for i := 0; i < 301; i++ {
		paths = append(paths, gp(t, "/int/node/config"))
	}
	_, err = env.client.Get(context.Background(), &gpb.GetRequest{Path: paths})
	wantCode(t, err, codes.ResourceExhausted)

	// 300 times the same path: each leaf once.
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, many(300)...))
	counts := map[string]int{}
	for {
		r, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetSyncResponse() {
			break
		}
		for _, u := range r.GetUpdate().GetUpdate() {
			counts[pathString(u.GetPath().GetElem())]++
		}
	}
	for p, n := range counts {
		if n != 1 {
			t.Errorf("%s sent %d times", p, n)
		}
	}
	if len(counts) < 5 {
		t.Errorf("ONCE of 300 identical paths: %v", counts)
	}
	resp := get(t, env.client, &gpb.GetRequest{Path: paths[:300], Encoding: gpb.Encoding_PROTO})
	if len(resp.GetNotification()) != 300 || len(leaves(resp)) != len(counts) {
		t.Errorf("Get of 300 identical paths: %d notifications, %d leaves", len(resp.GetNotification()), len(leaves(resp)))
	}
}

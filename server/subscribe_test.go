package server

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// waitLimit bounds every wait for a message so a broken server fails the
// test instead of hanging it; no test asserts on how long anything took.
const waitLimit = 10 * time.Second

// sub is a subscription whose responses a goroutine collects.
type sub struct {
	t      testing.TB
	stream gpb.GNMI_SubscribeClient
	ch     chan *gpb.SubscribeResponse
	err    chan error
	cancel context.CancelFunc
}

func subscribeTo(t testing.TB, c gpb.GNMIClient, sl *gpb.SubscriptionList) *sub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// io.EOF: the server already ended the stream (a refused
	// Subscribe); Recv returns its status.
	if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	s := &sub{t: t, stream: st, ch: make(chan *gpb.SubscribeResponse, 100000), err: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				s.err <- err
				return
			}
			s.ch <- r
		}
	}()
	t.Cleanup(cancel)
	return s
}

// next returns the next response, or nil and the stream's end error.
func (s *sub) next() (*gpb.SubscribeResponse, error) {
	s.t.Helper()
	select {
	case r := <-s.ch:
		return r, nil
	case err := <-s.err:
		// Drain what arrived before the error first.
		select {
		case r := <-s.ch:
			s.err <- err
			return r, nil
		default:
		}
		return nil, err
	case <-time.After(waitLimit):
		s.t.Fatalf("no subscription response within %v", waitLimit)
	}
	return nil, nil
}

// untilSync collects updates up to the sync_response: path -> value
// ("<deleted>" for deletes).
func (s *sub) untilSync() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for {
		r, err := s.next()
		if err != nil {
			s.t.Fatalf("stream ended before sync_response: %v", err)
		}
		if r.GetSyncResponse() {
			return out
		}
		addResp(out, r)
	}
}

func addResp(out map[string]string, r *gpb.SubscribeResponse) {
	n := r.GetUpdate()
	for _, u := range n.GetUpdate() {
		out[pathString(u.GetPath().GetElem())] = valText(u.GetVal())
	}
	for _, d := range n.GetDelete() {
		out[pathString(d.GetElem())] = "<deleted>"
	}
}

// until reads responses until cond holds on what was collected.
func (s *sub) until(what string, cond func(got map[string]string, r *gpb.SubscribeResponse) bool) {
	s.t.Helper()
	got := map[string]string{}
	for {
		r, err := s.next()
		if err != nil {
			s.t.Fatalf("waiting for %s: stream ended: %v", what, err)
		}
		addResp(got, r)
		if cond(got, r) {
			return
		}
	}
}

func subList(mode gpb.SubscriptionList_Mode, subs ...*gpb.Subscription) *gpb.SubscriptionList {
	return &gpb.SubscriptionList{Mode: mode, Subscription: subs, Encoding: gpb.Encoding_PROTO}
}

func onChange(t testing.TB, p string) *gpb.Subscription {
	return &gpb.Subscription{Path: gp(t, p), Mode: gpb.SubscriptionMode_ON_CHANGE}
}

func set(t testing.TB, c gpb.GNMIClient, req *gpb.SetRequest) {
	t.Helper()
	if _, err := c.Set(context.Background(), req); err != nil {
		t.Fatalf("Set: %v", err)
	}
}

func TestSubscribeOnce(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config"), onChange(t, "/int/node/state/counters/in-packets"))
	sl.Prefix = &gpb.Path{Target: "dut"}
	s := subscribeTo(t, env.client, sl)
	got := s.untilSync()
	cfg := leaves(get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config")}, Encoding: gpb.Encoding_PROTO}))
	if got["/int/node/config/node-id"] != "1" || got["/int/node/state/counters/in-packets"] != "100" || len(got) != len(cfg)+1 {
		t.Errorf("ONCE got %v", got)
	}
	if _, err := s.next(); err != io.EOF {
		t.Errorf("ONCE stream did not end after sync: %v", err)
	}
}

func TestSubscribeTargetEchoAndErrors(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config/node-id"))
	sl.Prefix = &gpb.Path{Target: "dut"}
	r, _ := subscribeTo(t, env.client, sl).next()
	if r.GetUpdate().GetPrefix().GetTarget() != "dut" {
		t.Errorf("target not echoed: %v", r)
	}
	r, _ = subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config/node-id"))).next()
	if r.GetUpdate().GetPrefix().GetTarget() != "" {
		t.Errorf("target echoed though none was sent: %v", r)
	}
	for _, tc := range []struct {
		sl   *gpb.SubscriptionList
		code codes.Code
	}{
		{&gpb.SubscriptionList{Prefix: &gpb.Path{Target: "other"}, Subscription: []*gpb.Subscription{onChange(t, "/int")}}, codes.NotFound},
		{subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/bogus")), codes.InvalidArgument},
		{subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node[x=1]")), codes.InvalidArgument},
		{&gpb.SubscriptionList{Encoding: gpb.Encoding_ASCII, Subscription: []*gpb.Subscription{onChange(t, "/int")}}, codes.Unimplemented},
	} {
		_, err := subscribeTo(t, env.client, tc.sl).next()
		wantCode(t, err, tc.code)
	}
}

func TestSubscribePoll(t *testing.T) {
	env := startServer(t, TargetOptions{})
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_POLL, onChange(t, "/int/node/state/counters/in-packets")))
	if got := s.untilSync(); got["/int/node/state/counters/in-packets"] != "100" {
		t.Fatalf("first poll %v", got)
	}
	env.fake.setCounter(250)
	env.srv.RefreshState(context.Background())
	if err := s.stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.untilSync(); got["/int/node/state/counters/in-packets"] != "250" || len(got) != 1 {
		t.Fatalf("second poll %v", got)
	}
	s.stream.CloseSend()
	if _, err := s.next(); err != io.EOF {
		t.Errorf("POLL did not end after CloseSend: %v", err)
	}
}

func TestSubscribeStreamOnChange(t *testing.T) {
	env := startServer(t, TargetOptions{})
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM,
		onChange(t, "/int/node/config/node-id"),
		onChange(t, "/int/watchlist/entries/entry/config/description"), // keys omitted: wildcard
		onChange(t, "/int/watchlist/entries/entry[sequence-id=99]"),    // appears later
	))
	got := s.untilSync()
	if got["/int/node/config/node-id"] != "1" || got["/int/watchlist/entries/entry[sequence-id=20]/config/description"] != `"tenant overlay"` {
		t.Fatalf("initial sync %v", got)
	}
	// A change: exactly the changed leaf arrives.
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(8)}}})
	r, err := s.next()
	if err != nil || len(r.GetUpdate().GetUpdate()) != 1 || pathString(r.GetUpdate().GetUpdate()[0].GetPath().GetElem()) != "/int/node/config/node-id" || r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 8 {
		t.Fatalf("after Set: %v %v", r, err)
	}
	// A path that did not exist when subscribing.
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries/entry[sequence-id=99]"), Val: jsonIETF(`{"config": {"description": "late"}}`)}}})
	s.until("entry 99", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/watchlist/entries/entry[sequence-id=99]/config/description"] == `"late"` &&
			got["/int/watchlist/entries/entry[sequence-id=99]/state/counters/matched-packets"] == "100"
	})
	// A list entry that disappears: deletes.
	set(t, env.client, &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[sequence-id=20]")}})
	s.until("delete of entry 20", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/watchlist/entries/entry[sequence-id=20]/config/description"] == "<deleted>"
	})
}

func TestSubscribeUpdatesOnly(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config"))
	sl.UpdatesOnly = true
	s := subscribeTo(t, env.client, sl)
	if got := s.untilSync(); len(got) != 0 {
		t.Fatalf("updates_only sent the current state: %v", got)
	}
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/postcard"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}}}})
	r, _ := s.next()
	if u := r.GetUpdate().GetUpdate(); len(u) != 1 || !u[0].GetVal().GetBoolVal() {
		t.Fatalf("update %v", r)
	}
}

func sampleSub(t testing.TB, p string, every time.Duration) *gpb.Subscription {
	return &gpb.Subscription{Path: gp(t, p), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(every)}
}

func TestSubscribeSample(t *testing.T) {
	env := startServer(t, TargetOptions{})
	const ctr = "/int/node/state/counters/in-packets"
	// Plain SAMPLE: the unchanged value is sent every interval.
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sampleSub(t, ctr, 10*time.Millisecond)))
	if got := s.untilSync(); got[ctr] != "100" {
		t.Fatalf("initial sample %v", got)
	}
	for i := 0; i < 3; i++ {
		r, _ := s.next()
		if r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 100 {
			t.Fatalf("sample %d: %v", i, r)
		}
	}

	// suppress_redundant: only changed values.
	sub := sampleSub(t, "/int/node/state/counters", 10*time.Millisecond)
	sub.SuppressRedundant = true
	s2 := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sub))
	if got := s2.untilSync(); len(got) != 2 {
		t.Fatalf("initial sample %v", got)
	}
	env.fake.setCounter(300)
	env.srv.RefreshState(context.Background())
	// in-packets moves to 300 and out-packets to 150: the first samples
	// after sync must be those two changes, nothing repeated before them.
	seen := map[string]string{}
	for len(seen) < 2 {
		r, _ := s2.next()
		for _, u := range r.GetUpdate().GetUpdate() {
			p := pathString(u.GetPath().GetElem())
			if _, dup := seen[p]; dup {
				t.Fatalf("%s sent twice", p)
			}
			seen[p] = valText(u.GetVal())
		}
	}
	if seen[ctr] != "300" || seen["/int/node/state/counters/out-packets"] != "150" {
		t.Errorf("suppress_redundant samples %v", seen)
	}

	// suppress_redundant with a heartbeat: unchanged values come back.
	sub = sampleSub(t, ctr, 10*time.Millisecond)
	sub.SuppressRedundant = true
	sub.HeartbeatInterval = uint64(20 * time.Millisecond)
	s3 := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sub))
	s3.untilSync()
	for i := 0; i < 2; i++ {
		if r, _ := s3.next(); r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 300 {
			t.Fatalf("heartbeat %d: %v", i, r)
		}
	}
}

func TestSubscribeSampleDeletes(t *testing.T) {
	env := startServer(t, TargetOptions{})
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sampleSub(t, "/int/watchlist/entries/entry/state/counters", 10*time.Millisecond)))
	if got := s.untilSync(); len(got) != 3 {
		t.Fatalf("initial sample %v", got)
	}
	set(t, env.client, &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[sequence-id=30]")}})
	s.until("sampled delete", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/watchlist/entries/entry[sequence-id=30]/state/counters/matched-packets"] == "<deleted>"
	})
}

func TestSubscribeHeartbeatOnChange(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sub := onChange(t, "/int/node/config/node-id")
	sub.HeartbeatInterval = uint64(10 * time.Millisecond)
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sub))
	s.untilSync()
	for i := 0; i < 2; i++ {
		if r, _ := s.next(); r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 1 {
			t.Fatalf("heartbeat %d: %v", i, r)
		}
	}
}

func TestSubscribeTargetDefined(t *testing.T) {
	env := startServer(t, TargetOptions{}, WithSampleIntervals(time.Millisecond, 5*time.Millisecond))
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: gp(t, "/int/node/state"), Mode: gpb.SubscriptionMode_TARGET_DEFINED}))
	got := s.untilSync()
	if got["/int/node/state/node-id"] != "1" || got["/int/node/state/counters/in-packets"] != "100" {
		t.Fatalf("initial %v", got)
	}
	// Counters are sampled (they repeat unchanged); other leaves are sent
	// on change only.
	counts := map[string]int{}
	for counts["/int/node/state/counters/in-packets"] < 5 {
		r, _ := s.next()
		for _, u := range r.GetUpdate().GetUpdate() {
			counts[pathString(u.GetPath().GetElem())]++
		}
	}
	if counts["/int/node/state/node-id"] != 0 || counts["/int/node/state/dataplane"] != 0 {
		t.Errorf("non-counter leaves repeated: %v", counts)
	}
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(4)}}})
	s.until("node-id change", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/node/state/node-id"] == "4"
	})
}

func TestSubscribeJSONEncoding(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/marking/config/probe-marker"))
	sl.Encoding = gpb.Encoding_JSON_IETF
	r, _ := subscribeTo(t, env.client, sl).next()
	if v := string(r.GetUpdate().GetUpdate()[0].GetVal().GetJsonIetfVal()); v != `"12302652060662169855"` {
		t.Errorf("JSON_IETF uint64 = %s", v)
	}
}

func watchlistBatch(from, n int) *gpb.TypedValue {
	var b strings.Builder
	b.WriteString(`{"entry": [`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		seq := from + i
		fmt.Fprintf(&b, `{"sequence-id": %d, "config": {"sequence-id": %d, "description": "entry %d"}, "actions": {"config": {"flow-op": "NOP", "drop-report": true}}}`, seq, seq, seq)
	}
	b.WriteString("]}")
	return jsonIETF(b.String())
}

// A subscriber that never reads must not slow Set or other subscribers:
// its bounded queue overflows and it is cut off with RESOURCE_EXHAUSTED,
// while Sets keep succeeding and a reading subscriber gets every update.
func TestSubscribeStalledClient(t *testing.T) {
	env := startServer(t, TargetOptions{}, WithMaxPending(100, 16<<20))
	// The stalled client: small fixed flow-control windows, never reads.
	stalledConn, err := grpc.NewClient(env.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer stalledConn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stalled, err := gpb.NewGNMIClient(stalledConn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/watchlist"))}}); err != nil {
		t.Fatal(err)
	}

	reader := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/watchlist/entries/entry/config/description")))
	reader.untilSync()

	const batches, per = 10, 20
	var maxSet time.Duration
	for i := 0; i < batches; i++ {
		start := time.Now()
		set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/watchlist/entries"), Val: watchlistBatch(1000+i*per, per)}}})
		maxSet = max(maxSet, time.Since(start))
	}
	t.Logf("slowest Set with a stalled subscriber: %v", maxSet)

	reader.until("every new entry", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		n := 0
		for p := range got {
			if strings.HasSuffix(p, "/config/description") {
				n++
			}
		}
		return n == batches*per
	})

	// Now drain the stalled client: it was cut off.
	var n int
	for {
		_, err := stalled.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("stalled subscriber ended with %v after %d responses, want RESOURCE_EXHAUSTED", err, n)
			}
			break
		}
		n++
	}
	t.Logf("stalled subscriber got %d responses before being cut off", n)
}

// Many subscribers at once see the same changes.
func TestSubscribeManyReaders(t *testing.T) {
	env := startServer(t, TargetOptions{})
	var subs []*sub
	for i := 0; i < 8; i++ {
		s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/node-id")))
		s.untilSync()
		subs = append(subs, s)
	}
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(55)}}})
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.next()
			if err != nil || r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 55 {
				t.Errorf("reader got %v %v", r, err)
			}
		}()
	}
	wg.Wait()
}

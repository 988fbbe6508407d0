package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
)

// A client that half-closes its side after subscribing keeps its STREAM
// subscription: only cancelling the RPC ends it (§3.5.1.1).
func TestSubscribeStreamSurvivesHalfClose(t *testing.T) {
	env := startServer(t, TargetOptions{})
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/node-id")))
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := s.untilSync(); got["/int/node/config/node-id"] != "1" {
		t.Fatalf("initial sync after half-close: %v", got)
	}
	set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(12)}}})
	s.until("node-id 12 after half-close", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
		return got["/int/node/config/node-id"] == "12"
	})
	s.cancel()
	_, err := s.next()
	wantCode(t, err, codes.Canceled)
}

// updates_only on ONCE and POLL: only the sync_response; later polls are
// answered in full (§3.5.1.2).
func TestSubscribeUpdatesOnlyOncePoll(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config"))
	sl.UpdatesOnly = true
	s := subscribeTo(t, env.client, sl)
	r, err := s.next()
	if err != nil || !r.GetSyncResponse() {
		t.Fatalf("ONCE updates_only: first response %v %v, want sync_response", r, err)
	}
	if _, err := s.next(); err != io.EOF {
		t.Fatalf("ONCE updates_only: %v after sync, want the end", err)
	}

	sl = subList(gpb.SubscriptionList_POLL, onChange(t, "/int/node/config/node-id"))
	sl.UpdatesOnly = true
	s = subscribeTo(t, env.client, sl)
	r, err = s.next()
	if err != nil || !r.GetSyncResponse() {
		t.Fatalf("POLL updates_only: first response %v %v, want sync_response", r, err)
	}
	if err := s.stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.untilSync(); got["/int/node/config/node-id"] != "1" {
		t.Fatalf("POLL updates_only: the poll's answer %v", got)
	}
}

func TestSubscribeSampleIntervals(t *testing.T) {
	env := startServer(t, TargetOptions{}, WithSampleIntervals(5*time.Millisecond, time.Second))
	const ctr = "/int/node/state/counters/in-packets"
	// Shorter than supported: refused.
	_, err := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sampleSub(t, ctr, time.Nanosecond))).next()
	wantCode(t, err, codes.InvalidArgument)
	// TARGET_DEFINED with an interval: refused (the target chooses).
	_, err = subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: gp(t, ctr), Mode: gpb.SubscriptionMode_TARGET_DEFINED, SampleInterval: uint64(time.Second)})).next()
	wantCode(t, err, codes.InvalidArgument)
	// 0: the shortest supported interval, so samples keep coming well
	// within the wait limit (several per second).
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, sampleSub(t, ctr, 0)))
	s.untilSync()
	for i := 0; i < 5; i++ {
		if r, err := s.next(); err != nil || r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 100 {
			t.Fatalf("sample %d: %v %v", i, r, err)
		}
	}
	// The interval of ONCE and POLL subscriptions is not used: accepted.
	sl := subList(gpb.SubscriptionList_ONCE, sampleSub(t, ctr, time.Nanosecond))
	if got := subscribeTo(t, env.client, sl).untilSync(); got[ctr] != "100" {
		t.Errorf("ONCE with a sample interval: %v", got)
	}
}

// A second SubscriptionList on a POLL RPC is an error (§3.5.1.1).
func TestSubscribePollSecondList(t *testing.T) {
	env := startServer(t, TargetOptions{})
	sl := subList(gpb.SubscriptionList_POLL, onChange(t, "/int/node/config/node-id"))
	s := subscribeTo(t, env.client, sl)
	s.untilSync()
	if err := s.stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.next()
	wantCode(t, err, codes.InvalidArgument)
}

// Subscribe encodes JSON and JSON_IETF values exactly as Get does (RFC
// 7951: uint8/16/32 numbers, 64-bit strings, identities qualified by their
// module in JSON_IETF), leaf by leaf over the whole tree.
func TestSubscribeJSONMatchesGet(t *testing.T) {
	env := startServer(t, TargetOptions{})
	env.fake.setDrops(3, 7)
	env.srv.RefreshState(context.Background())
	for _, enc := range []gpb.Encoding{gpb.Encoding_JSON_IETF, gpb.Encoding_JSON} {
		sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/"))
		sl.Encoding = enc
		got := subscribeTo(t, env.client, sl).untilSync()
		if len(got) < 100 {
			t.Fatalf("%v: only %d leaves", enc, len(got))
		}
		kinds := map[string]bool{}
		for p, v := range got {
			resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, p)}, Encoding: enc})
			want := valText(resp.GetNotification()[0].GetUpdate()[0].GetVal())
			if v != want {
				t.Errorf("%v %s: Subscribe sent %s, Get %s", enc, p, v, want)
			}
			switch {
			case strings.HasPrefix(v, `"intd-int-metadata-semantics:`):
				kinds["qualified identity"] = true
			case strings.HasPrefix(v, `"`):
				kinds["string"] = true
			case v == "true" || v == "false":
				kinds["boolean"] = true
			case strings.HasPrefix(v, "["):
				kinds["leaf-list"] = true
			default:
				kinds["number"] = true
			}
		}
		if len(kinds) < 4 || (enc == gpb.Encoding_JSON_IETF && !kinds["qualified identity"]) {
			t.Errorf("%v: value kinds seen %v", enc, kinds)
		}
	}
}

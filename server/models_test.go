package server

import (
	"context"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
)

// use_models restricts Get and Subscribe to the data of the named models
// (§2.6, §3.5.1.2): no node of another module, and no identity value
// defined by one; an unknown model is an error.
func TestUseModels(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	intOnly := []*gpb.ModelData{{Name: "intd-int"}}
	msOnly := []*gpb.ModelData{{Name: "intd-int-metadata-semantics"}}

	resp := get(t, env.client, &gpb.GetRequest{UseModels: intOnly, Encoding: gpb.Encoding_PROTO})
	got := leaves(resp)
	if got["/int/node/config/node-id"] != "1" {
		t.Errorf("intd-int data missing: %d leaves", len(got))
	}
	for p := range got {
		if !strings.HasPrefix(p, "/int/") {
			t.Errorf("%s sent though only intd-int is in use", p)
		}
		if strings.HasSuffix(p, "/instructions") {
			t.Errorf("%s (identities of intd-int-metadata-semantics) sent though only intd-int is in use", p)
		}
	}
	resp = get(t, env.client, &gpb.GetRequest{UseModels: msOnly, Encoding: gpb.Encoding_JSON_IETF})
	js := valText(resp.GetNotification()[0].GetUpdate()[0].GetVal())
	if strings.Contains(js, "intd-int:int") || !strings.Contains(js, "intd-int-metadata-semantics:metadata-semantics") {
		t.Errorf("metadata-semantics only: %.200s", js)
	}
	// Both models: everything.
	all := leaves(get(t, env.client, &gpb.GetRequest{Encoding: gpb.Encoding_PROTO}))
	both := leaves(get(t, env.client, &gpb.GetRequest{UseModels: append(intOnly, msOnly...), Encoding: gpb.Encoding_PROTO}))
	if len(both) != len(all) {
		t.Errorf("both models: %d leaves, without use_models %d", len(both), len(all))
	}
	// A path outside the models in use is not a valid path.
	_, err := env.client.Get(ctx, &gpb.GetRequest{UseModels: msOnly, Path: []*gpb.Path{gp(t, "/int/node")}})
	wantCode(t, err, codes.InvalidArgument)
	for _, bad := range [][]*gpb.ModelData{{{Name: "openconfig-interfaces"}}, {{Name: "intd-int", Version: "0.0.0-not-served"}}} {
		_, err := env.client.Get(ctx, &gpb.GetRequest{UseModels: bad})
		wantCode(t, err, codes.InvalidArgument)
		sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/"))
		sl.UseModels = bad
		_, err = subscribeTo(t, env.client, sl).next()
		wantCode(t, err, codes.InvalidArgument)
	}

	// Subscribe: the same restriction, for ONCE and STREAM (SAMPLE too).
	for _, sub := range []*gpb.Subscription{onChange(t, "/"), sampleSub(t, "/", 0)} {
		sl := subList(gpb.SubscriptionList_STREAM, sub)
		sl.UseModels = msOnly
		got := subscribeTo(t, env.client, sl).untilSync()
		if len(got) == 0 {
			t.Fatalf("%v: nothing sent for intd-int-metadata-semantics", sub.GetMode())
		}
		for p := range got {
			if strings.HasPrefix(p, "/int/") {
				t.Errorf("%v: %s sent though only intd-int-metadata-semantics is in use", sub.GetMode(), p)
			}
		}
	}
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/int-sessions"))
	sl.UseModels = intOnly
	for p := range subscribeTo(t, env.client, sl).untilSync() {
		if strings.HasSuffix(p, "/instructions") {
			t.Errorf("%s sent though only intd-int is in use", p)
		}
	}
}

// Subscribe responses carry the origin the client gave, as Get's do
// (§2.7: data is identified by <origin, path>).
func TestSubscribeEchoesOrigin(t *testing.T) {
	env := startServer(t, TargetOptions{})
	for _, mode := range []gpb.SubscriptionList_Mode{gpb.SubscriptionList_ONCE, gpb.SubscriptionList_STREAM} {
		for _, sub := range []*gpb.Subscription{onChange(t, "/int/node/config/node-id"), sampleSub(t, "/int/node/config/node-id", 0)} {
			p := sub.GetPath()
			p.Origin = "intd-int"
			r, err := subscribeTo(t, env.client, subList(mode, sub)).next()
			if err != nil {
				t.Fatal(err)
			}
			if o := r.GetUpdate().GetPrefix().GetOrigin(); o != "intd-int" {
				t.Errorf("%v %v: origin %q in the response prefix, want intd-int", mode, sub.GetMode(), o)
			}
		}
	}
	// Origin in the prefix: echoed too; none given: none sent.
	sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config/node-id"))
	sl.Prefix = &gpb.Path{Origin: "openconfig", Target: "dut"}
	r, _ := subscribeTo(t, env.client, sl).next()
	if pre := r.GetUpdate().GetPrefix(); pre.GetOrigin() != "openconfig" || pre.GetTarget() != "dut" {
		t.Errorf("prefix %v, want origin openconfig and target dut", pre)
	}
	r, _ = subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config/node-id"))).next()
	if pre := r.GetUpdate().GetPrefix(); pre != nil {
		t.Errorf("prefix %v though the client sent neither origin nor target", pre)
	}
}

// One rule for paths naming nodes the schema does not have: not a valid
// path (INVALID_ARGUMENT) in Get, Subscribe and Set's delete; NOT_FOUND in
// Set's update and replace (§3.4.7). Data that does not exist: NOT_FOUND
// in Get (§3.3.4), nothing in Subscribe (§3.5.2.4), success in delete.
func TestUnknownPathCodes(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	bogus := gp(t, "/int/no-such/leaf")
	_, err := env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{bogus}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/no-such/leaf"))).next()
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.client.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{bogus}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: bogus, Val: uintVal(1)}}})
	wantCode(t, err, codes.NotFound)
	_, err = env.client.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: bogus, Val: uintVal(1)}}})
	wantCode(t, err, codes.NotFound)

	absent := gp(t, "/int/watchlist/entries/entry[sequence-id=77]")
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{absent}})
	wantCode(t, err, codes.NotFound)
	if got := subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/watchlist/entries/entry[sequence-id=77]"))).untilSync(); len(got) != 0 {
		t.Errorf("ONCE of absent data sent %v", got)
	}
	if _, err := env.client.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{absent}}); err != nil {
		t.Errorf("delete of absent data: %v", err)
	}
}

// An origin naming a module scopes the root to that module's data (§2.7,
// §2.7.3): Get returns only it, a replace or delete of the root changes
// only it.
func TestOriginScopesRoot(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	root := func(origin string) *gpb.Path { return &gpb.Path{Origin: origin} }
	got := leaves(get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{root("intd-int-metadata-semantics")}, Encoding: gpb.Encoding_PROTO}))
	for p := range got {
		if strings.HasPrefix(p, "/int/") {
			t.Fatalf("Get of the root of origin intd-int-metadata-semantics returned %s", p)
		}
	}
	if len(got) == 0 {
		t.Fatal("Get of the root of origin intd-int-metadata-semantics returned nothing")
	}
	// A replace at the root of origin intd-int leaves the other module's
	// data alone, and may not set it.
	_, err := env.client.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: root("intd-int"), Val: jsonIETF(`{"intd-int-metadata-semantics:drop-reasons": {}}`)}}})
	wantCode(t, err, codes.InvalidArgument)
	set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: root("intd-int"), Val: jsonIETF(`{"intd-int:int": {"node": {"config": {"node-id": 77}}}}`)}}})
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "77" {
		t.Errorf("node-id %s after the replace", got)
	}
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/watchlist/entries/entry")}})
	wantCode(t, err, codes.NotFound) // replaced away
	after := leaves(get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{root("intd-int-metadata-semantics")}, Encoding: gpb.Encoding_PROTO}))
	if len(after) != len(got) {
		t.Errorf("the other origin's data changed: %d leaves, was %d", len(after), len(got))
	}
	// A delete of the root of origin intd-int-metadata-semantics keeps
	// intd-int's.
	set(t, env.client, &gpb.SetRequest{Delete: []*gpb.Path{root("intd-int-metadata-semantics")}})
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "77" {
		t.Errorf("node-id %s after deleting the other origin", got)
	}
	_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/domain-specific-metadata/domain")}})
	wantCode(t, err, codes.NotFound)
}

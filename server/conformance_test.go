package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	refpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// The conformance suite: the requirements of sections 2 and 3 of the gNMI
// specification (openconfig/reference rpc/gnmi/gnmi-specification.md,
// 0.10.0), each MUST, MUST NOT and SHOULD as one row: who it binds, and
// for the target's, the check that a real gNMI client (the generated
// client over real gRPC on 127.0.0.1) runs against the server. Rows
// binding clients or schemas, or about features the target does not
// have, say why nothing is checked. TestGNMIConformance runs the checks;
// TestGNMIConformanceDoc keeps docs/gnmi-conformance.md the rendering of
// this table (INTD_UPDATE_DOCS=1 rewrites it).

type requirement struct {
	sec   string // section of the specification
	level string // MUST, MUST NOT, SHOULD, SHOULD NOT, table
	text  string // the requirement, shortened
	// check runs the requirement against a target; nil when there is
	// nothing for a target to do, then na says why.
	check func(t *testing.T)
	na    string
}

func confEnv(t *testing.T, opts ...Option) *testEnv {
	t.Helper()
	return startServer(t, TargetOptions{}, opts...)
}

// confGet is a Get that must succeed.
func confGet(t *testing.T, env *testEnv, req *gpb.GetRequest) *gpb.GetResponse {
	t.Helper()
	return get(t, env.client, req)
}

func paths(t testing.TB, ps ...string) []*gpb.Path {
	var out []*gpb.Path
	for _, p := range ps {
		out = append(out, gp(t, p))
	}
	return out
}

// onceAll collects every response of a ONCE subscription up to its end.
func onceAll(t *testing.T, env *testEnv, sl *gpb.SubscriptionList) []*gpb.SubscribeResponse {
	t.Helper()
	s := subscribeTo(t, env.client, sl)
	var out []*gpb.SubscribeResponse
	for {
		r, err := s.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("ONCE: %v", err)
		}
		out = append(out, r)
	}
}

func notifications(rs []*gpb.SubscribeResponse) []*gpb.Notification {
	var out []*gpb.Notification
	for _, r := range rs {
		if n := r.GetUpdate(); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// everyValue calls f with every update of the notifications.
func everyValue(ns []*gpb.Notification, f func(n *gpb.Notification, u *gpb.Update)) {
	for _, n := range ns {
		for _, u := range n.GetUpdate() {
			f(n, u)
		}
	}
}

func upd(t testing.TB, p string, v *gpb.TypedValue) *gpb.Update {
	return &gpb.Update{Path: gp(t, p), Val: v}
}

func wantErrCode(t *testing.T, err error, want codes.Code, msgPart string) {
	t.Helper()
	wantCode(t, err, want)
	if msg := status.Convert(err).Message(); msg == "" || !strings.Contains(msg, msgPart) {
		t.Errorf("error message %q lacks %q", msg, msgPart)
	}
}

// unchangedBy checks that f (a refused request) leaves the tree as it was.
func unchangedBy(t *testing.T, env *testEnv, f func()) {
	t.Helper()
	before := snapshotAll(t, env.client)
	f()
	if after := snapshotAll(t, env.client); after != before {
		t.Error("the tree changed")
	}
}

func secureEnv(t *testing.T) (*testEnv, *tls.Config) {
	tlsCfg, err := TLSConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return startSecure(t, tlsCfg, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))), tlsCfg
}

var conformance = []requirement{
	// 2.1 Notifications.
	{sec: "2.1", level: "SHOULD", text: "an update coalescing values a slow client missed counts them in duplicates",
		check: func(t *testing.T) { TestQueueBounds(t) }},
	{sec: "2.1", level: "MUST", text: "the paths of the updates of a notification are unique", check: func(t *testing.T) {
		env := confEnv(t)
		seen := func(ns []*gpb.Notification) {
			for _, n := range ns {
				ps := map[string]bool{}
				for _, u := range n.GetUpdate() {
					p := pathString(u.GetPath().GetElem())
					if ps[p] {
						t.Errorf("%s twice in one notification", p)
					}
					ps[p] = true
				}
			}
		}
		seen(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int", "/int/node"), Encoding: gpb.Encoding_PROTO}).GetNotification())
		seen(notifications(onceAll(t, env, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int"), onChange(t, "/int/node"), onChange(t, "/int")))))
	}},
	{sec: "2.1", level: "MUST", text: "a notification includes its timestamp", check: func(t *testing.T) {
		env := confEnv(t)
		ns := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node", "/int/marking")}).GetNotification()
		ns = append(ns, notifications(onceAll(t, env, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node"))))...)
		for _, n := range ns {
			if n.GetTimestamp() == 0 {
				t.Errorf("notification without timestamp: %v", n)
			}
		}
	}},
	{sec: "2.1.1", level: "MUST", text: "atomic notifications: parse by prefix, invalidate on non-atomic updates; OpenConfig atomic containers always sent atomically",
		na: "no container of the models is atomic: the target never sends atomic notifications"},
	// 2.2 Common data types.
	{sec: "2.2.1", level: "MUST", text: "timestamps are nanoseconds since the Unix epoch, as int64", check: func(t *testing.T) {
		env := confEnv(t)
		now := time.Now().UnixNano()
		ns := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node")}).GetNotification()
		ns = append(ns, notifications(onceAll(t, env, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node"))))...)
		for _, n := range ns {
			if d := n.GetTimestamp() - now; d < -int64(time.Hour) || d > int64(time.Hour) {
				t.Errorf("timestamp %d is not nanoseconds since the epoch (now %d)", n.GetTimestamp(), now)
			}
		}
	}},
	{sec: "2.2.2", level: "MUST", text: "paths (prefix + path) in messages are absolute", check: func(t *testing.T) {
		env := confEnv(t)
		ns := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node/config"), Encoding: gpb.Encoding_PROTO}).GetNotification()
		ns = append(ns, notifications(onceAll(t, env, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config"))))...)
		everyValue(ns, func(n *gpb.Notification, u *gpb.Update) {
			full := append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), u.GetPath().GetElem()...)
			if len(full) == 0 || env.srv.schema.root.Dir[full[0].GetName()] == nil {
				t.Errorf("path %s does not start at the root", pathString(full))
			}
		})
	}},
	{sec: "2.2.2.1", level: "MUST", text: "target is only ever in prefixes", check: func(t *testing.T) {
		env := confEnv(t)
		pre := &gpb.Path{Target: "dut"}
		ns := confGet(t, env, &gpb.GetRequest{Prefix: pre, Path: paths(t, "/int/node/config"), Encoding: gpb.Encoding_PROTO}).GetNotification()
		sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config"))
		sl.Prefix = pre
		ns = append(ns, notifications(onceAll(t, env, sl))...)
		everyValue(ns, func(n *gpb.Notification, u *gpb.Update) {
			if u.GetPath().GetTarget() != "" {
				t.Errorf("target in an update path: %v", u.GetPath())
			}
		})
	}},
	{sec: "2.2.2.1", level: "MUST", text: "a target in a request's prefix is reflected in the prefix of the Get, Set and Subscribe responses", check: func(t *testing.T) {
		env := confEnv(t)
		pre := &gpb.Path{Target: "dut"}
		for _, n := range confGet(t, env, &gpb.GetRequest{Prefix: pre, Path: paths(t, "/int/node/config", "/int/marking")}).GetNotification() {
			if n.GetPrefix().GetTarget() != "dut" {
				t.Errorf("Get notification prefix %v", n.GetPrefix())
			}
		}
		resp, err := env.client.Set(context.Background(), &gpb.SetRequest{Prefix: pre, Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(3))}})
		if err != nil || resp.GetPrefix().GetTarget() != "dut" {
			t.Errorf("Set response %v %v", resp, err)
		}
		sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config"))
		sl.Prefix = pre
		for _, n := range notifications(onceAll(t, env, sl)) {
			if n.GetPrefix().GetTarget() != "dut" {
				t.Errorf("Subscribe notification prefix %v", n.GetPrefix())
			}
		}
	}},
	{sec: "2.2.2.1", level: "MUST NOT", text: "a target the client did not send is not set in responses", check: func(t *testing.T) {
		env := confEnv(t)
		for _, n := range confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node/config")}).GetNotification() {
			if n.GetPrefix().GetTarget() != "" {
				t.Errorf("Get notification prefix %v", n.GetPrefix())
			}
		}
		resp, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(3))}})
		if err != nil || resp.GetPrefix().GetTarget() != "" {
			t.Errorf("Set response %v %v", resp, err)
		}
		for _, n := range notifications(onceAll(t, env, subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config")))) {
			if n.GetPrefix().GetTarget() != "" {
				t.Errorf("Subscribe notification prefix %v", n.GetPrefix())
			}
		}
	}},
	{sec: "2.2.3", level: "MUST", text: "the elements of a ScalarArray (leaf-list) are scalars", check: func(t *testing.T) {
		env := confEnv(t)
		resp := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/int-sessions/int-session[name=md-5]/config/instructions"), Encoding: gpb.Encoding_PROTO})
		l := resp.GetNotification()[0].GetUpdate()[0].GetVal().GetLeaflistVal()
		if len(l.GetElement()) == 0 {
			t.Fatalf("no leaf-list: %v", resp)
		}
		for _, e := range l.GetElement() {
			if e.GetStringVal() == "" {
				t.Errorf("element %v is not a scalar string", e)
			}
		}
	}},
	// 2.3 Encodings.
	{sec: "2.3", level: "MUST", text: "structured data is serialised in one of the encodings of the Encoding enumeration", check: func(t *testing.T) {
		env := confEnv(t)
		for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF} {
			v := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node"), Encoding: enc}).GetNotification()[0].GetUpdate()[0].GetVal()
			if (enc == gpb.Encoding_JSON) != (v.GetJsonVal() != nil) || (enc == gpb.Encoding_JSON_IETF) != (v.GetJsonIetfVal() != nil) {
				t.Errorf("%v: subtree as %T", enc, v.GetValue())
			}
		}
	}},
	{sec: "2.3.1", level: "MUST", text: "JSON values are valid JSON", check: func(t *testing.T) {
		env := confEnv(t)
		for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF} {
			ns := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/", "/int/node/config/node-id"), Encoding: enc}).GetNotification()
			sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/"))
			sl.Encoding = enc
			ns = append(ns, notifications(onceAll(t, env, sl))...)
			everyValue(ns, func(_ *gpb.Notification, u *gpb.Update) {
				if b := append(u.GetVal().GetJsonVal(), u.GetVal().GetJsonIetfVal()...); !json.Valid(b) {
					t.Errorf("%v: not JSON: %s", enc, b)
				}
			})
		}
	}},
	{sec: "2.3.1", level: "MUST", text: "JSON_IETF follows RFC 7951", check: func(t *testing.T) {
		TestSubscribeJSONMatchesGet(t)
		env := confEnv(t)
		js := valText(confGet(t, env, &gpb.GetRequest{Encoding: gpb.Encoding_JSON_IETF}).GetNotification()[0].GetUpdate()[0].GetVal())
		for _, want := range []string{`"intd-int:int"`, `"probe-marker":"12302652060662169855"`, `"intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"`} {
			if !strings.Contains(js, want) {
				t.Errorf("JSON_IETF lacks %s", want)
			}
		}
	}},
	{sec: "2.3.1", level: "MUST NOT", text: "JSON and JSON_IETF are not mixed", check: func(t *testing.T) {
		env := confEnv(t)
		for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF} {
			ns := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node", "/int/node/config/node-id"), Encoding: enc}).GetNotification()
			sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node"))
			sl.Encoding = enc
			ns = append(ns, notifications(onceAll(t, env, sl))...)
			everyValue(ns, func(_ *gpb.Notification, u *gpb.Update) {
				if (enc == gpb.Encoding_JSON && u.GetVal().GetJsonIetfVal() != nil) || (enc == gpb.Encoding_JSON_IETF && u.GetVal().GetJsonVal() != nil) || (u.GetVal().GetJsonVal() == nil && u.GetVal().GetJsonIetfVal() == nil) {
					t.Errorf("%v answered with %T", enc, u.GetVal().GetValue())
				}
			})
		}
	}},
	{sec: "2.3.1", level: "MUST", text: "the target supports the JSON encoding", check: func(t *testing.T) {
		env := confEnv(t)
		caps, err := env.client.Capabilities(context.Background(), &gpb.CapabilityRequest{})
		if err != nil || !strings.Contains(fmt.Sprint(caps.GetSupportedEncodings()), "JSON ") && caps.GetSupportedEncodings()[0] != gpb.Encoding_JSON {
			t.Errorf("capabilities %v %v", caps, err)
		}
		TestSetJSONLeaves(t)
	}},
	// 2.4 Paths.
	{sec: "2.4.2", level: "MUST", text: "a path read refers to the node and all its children", check: func(t *testing.T) {
		env := confEnv(t)
		got := leaves(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node"), Encoding: gpb.Encoding_PROTO}))
		for _, p := range []string{"/int/node/config/node-id", "/int/node/state/counters/in-packets"} {
			if _, ok := got[p]; !ok {
				t.Errorf("%s missing from a Get of /int/node", p)
			}
		}
	}},
	// 2.5 Errors.
	{sec: "2.5", level: "MUST", text: "errors are canonical gRPC codes with a message giving the context, in the RPC status", check: func(t *testing.T) {
		env := confEnv(t)
		_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: paths(t, "/int/no-such")})
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "/int/no-such") {
			t.Errorf("status %v", err)
		}
	}},
	{sec: "2.5", level: "MUST", text: "the code considers what the client will do: retryable codes only where a retry may succeed",
		na: "by design: UNAVAILABLE and ABORTED only where a retry may succeed (ABORTED for a dataplane that failed to apply, FAILED_PRECONDITION while a commit waits for confirmation); client errors are INVALID_ARGUMENT, NOT_FOUND or UNIMPLEMENTED (server/doc.go lists them)"},
	// 2.6 Models.
	{sec: "2.6", level: "MUST NOT", text: "with use_models, no data tree element of another module is used", check: func(t *testing.T) { TestUseModels(t) }},
	{sec: "2.6", level: "MUST NOT", text: "with use_models, no value (identity) defined by another module is sent, nor what depends on one", check: func(t *testing.T) {
		env := confEnv(t)
		got := leaves(confGet(t, env, &gpb.GetRequest{UseModels: []*gpb.ModelData{{Name: "intd-int"}}, Path: paths(t, "/int/int-sessions"), Encoding: gpb.Encoding_PROTO}))
		for p, v := range got {
			if strings.Contains(v, "METADATA_") {
				t.Errorf("%s = %s: an identity of intd-int-metadata-semantics", p, v)
			}
		}
	}},
	// 2.7 Origin.
	{sec: "2.7", level: "MUST", text: "clients give origins in the prefix only when one origin is used, or in the paths; not in both",
		na: "binds clients; the target refuses a path whose origin contradicts the prefix's (INVALID_ARGUMENT, checked) and takes an identical one", check: func(t *testing.T) {
			env := confEnv(t)
			p := gp(t, "/int")
			p.Origin = "intd-int"
			_, err := env.client.Get(context.Background(), &gpb.GetRequest{Prefix: &gpb.Path{Origin: "intd-int-metadata-semantics"}, Path: []*gpb.Path{p}})
			wantCode(t, err, codes.InvalidArgument)
		}},
	{sec: "2.7.3", level: "MUST", text: "a replace or delete with an origin changes only that origin's data", check: func(t *testing.T) { TestOriginScopesRoot(t) }},
	{sec: "2.7.4", level: "MUST", text: "a Set over several origins is one transaction: all or nothing", check: func(t *testing.T) {
		env := confEnv(t)
		a := gp(t, "/int/node/config/node-id")
		a.Origin = "intd-int"
		b := gp(t, "/domain-specific-metadata/domain[domain-specific-id=4660]/config/domain-specific-id")
		b.Origin = "intd-int-metadata-semantics"
		unchangedBy(t, env, func() {
			_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{{Path: a, Val: uintVal(9)}, {Path: b, Val: uintVal(1)}}})
			wantCode(t, err, codes.InvalidArgument) // the key leaf contradicts the key
		})
	}},
	// 2.8 Extensions.
	{sec: "2.8", level: "MUST NOT", text: "an extension does not change the base behaviour of an RPC", check: func(t *testing.T) {
		env := confEnv(t)
		plain := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int"), Encoding: gpb.Encoding_PROTO})
		with := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int"), Encoding: gpb.Encoding_PROTO, Extension: []*gnmi_ext.Extension{extDepth(0)}})
		if fmt.Sprint(keys(leaves(plain))) != fmt.Sprint(keys(leaves(with))) {
			t.Error("depth 0 (no limit) changed a Get")
		}
		TestExtensionsRefused(t)
	}},
	// 3 Service.
	{sec: "3", level: "MUST NOT", text: "implementations do not assume gNMI is the only service",
		na: "the gRPC server also serves reflection, and GRPCServer lets the embedding program register more"},
	{sec: "3", level: "SHOULD", text: "the target registers the gRPC reflection service", check: func(t *testing.T) {
		env := confEnv(t)
		rc, err := refpb.NewServerReflectionClient(env.conn).ServerReflectionInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rc.Send(&refpb.ServerReflectionRequest{MessageRequest: &refpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
		resp, err := rc.Recv()
		if err != nil || !strings.Contains(resp.String(), "gnmi.gNMI") {
			t.Errorf("reflection: %v %v", resp, err)
		}
	}},
	// 3.1 Security.
	{sec: "3.1", level: "MUST", text: "sessions are encrypted with TLS, without falling back to plaintext", check: func(t *testing.T) {
		env, _ := secureEnv(t)
		conn, err := grpc.NewClient(env.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(withUser("viewer", "viewer-secret"), 2*time.Second)
		defer cancel()
		if _, err := gpb.NewGNMIClient(conn).Capabilities(ctx, &gpb.CapabilityRequest{}); err == nil {
			t.Error("a TLS target answered a plaintext client")
		}
	}, na: "with WithTLS (a plaintext server is the embedding program's choice)"},
	{sec: "3.1", level: "SHOULD", text: "TLS 1.2 or later", check: func(t *testing.T) {
		env, cfg := secureEnv(t)
		if cfg.MinVersion < tls.VersionTLS12 {
			t.Errorf("TLS minimum version %x", cfg.MinVersion)
		}
		conn, err := grpc.NewClient(env.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(withUser("viewer", "viewer-secret"), 2*time.Second)
		defer cancel()
		if _, err := gpb.NewGNMIClient(conn).Capabilities(ctx, &gpb.CapabilityRequest{}); err == nil {
			t.Error("a TLS 1.1 client was served")
		}
	}},
	{sec: "3.1", level: "MUST", text: "clients give username and password metadata when the target authenticates", na: "binds clients"},
	{sec: "3.1", level: "MUST", text: "credentials a client supplies are authenticated; with both username and password the RPC is authenticated and authorized", check: func(t *testing.T) {
		env, _ := secureEnv(t)
		ctx := context.Background()
		_, err := env.client.Get(withUser("viewer", "wrong"), &gpb.GetRequest{Path: paths(t, "/int/node")})
		wantCode(t, err, codes.Unauthenticated)
		_, err = env.client.Set(withUser("viewer", "viewer-secret"), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(2))}})
		wantCode(t, err, codes.PermissionDenied)
		if _, err := env.client.Set(withUser("admin", "admin-secret"), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(2))}}); err != nil {
			t.Error(err)
		}
		_, err = env.client.Get(ctx, &gpb.GetRequest{Path: paths(t, "/int/node")})
		wantCode(t, err, codes.Unauthenticated)
	}},
	{sec: "3.1", level: "MUST", text: "a username without password is authorized", check: func(t *testing.T) {
		env, _ := secureEnv(t)
		ctx := metadataUser("viewer")
		_, err := env.client.Get(ctx, &gpb.GetRequest{Path: paths(t, "/int/node")})
		wantCode(t, err, codes.Unauthenticated)
	}, na: "authorized and refused: the target grants roles only to authenticated users (passwords), so a username alone has none"},
	// 3.2 Capabilities.
	{sec: "3.2", level: "MUST", text: "Capabilities gives the gNMI version, the versioned models and the encodings", check: func(t *testing.T) { TestCapabilities(t) }},
	{sec: "3.2", level: "SHOULD", text: "without use_models, all supported modules are used", check: func(t *testing.T) {
		env := confEnv(t)
		got := leaves(confGet(t, env, &gpb.GetRequest{Encoding: gpb.Encoding_PROTO}))
		mods := map[string]bool{}
		for p := range got {
			mods[env.srv.schema.moduleOf[strings.Split(p, "/")[1]]] = true
		}
		if !mods["intd-int"] || !mods["intd-int-metadata-semantics"] {
			t.Errorf("modules with data: %v", mods)
		}
	}},
	{sec: "3.2", level: "MUST", text: "a client that gives no encoding sends JSON", na: "binds clients; the target reads JSON when no encoding is given (3.3.1, checked)"},
	// 3.3 Get.
	{sec: "3.3", level: "MUST", text: "Get reflects the values of the leaves at a collection time", check: func(t *testing.T) {
		env := confEnv(t)
		env.fake.setCounter(42)
		env.srv.RefreshState(context.Background())
		if got := leafVal(t, env.client, "/int/node/state/counters/in-packets"); got != `"42"` {
			t.Errorf("in-packets %s after a state poll of 42", got)
		}
	}},
	{sec: "3.3.1", level: "MUST", text: "an invalid path is INVALID_ARGUMENT (SHOULD say which)", check: func(t *testing.T) {
		env := confEnv(t)
		for _, p := range []string{"/int/no-such", "/int/node[x=1]", "/int/watchlist/entries/entry[sequence-id=x]"} {
			_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: paths(t, p)})
			wantErrCode(t, err, codes.InvalidArgument, "/int/")
		}
	}},
	{sec: "3.3.1", level: "MUST", text: "without an encoding, JSON is used", check: func(t *testing.T) {
		env := confEnv(t)
		v := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node/config/node-id")}).GetNotification()[0].GetUpdate()[0].GetVal()
		if string(v.GetJsonVal()) != "1" {
			t.Errorf("default encoding gave %v", v)
		}
	}},
	{sec: "3.3.1", level: "MUST", text: "an unsupported encoding is UNIMPLEMENTED, saying the encoding is not supported", check: func(t *testing.T) {
		env := confEnv(t)
		for _, e := range []gpb.Encoding{gpb.Encoding_ASCII, gpb.Encoding_BYTES, gpb.Encoding(42)} {
			_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: paths(t, "/int/node"), Encoding: e})
			wantErrCode(t, err, codes.Unimplemented, "not supported")
			_, err = subscribeTo(t, env.client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: e, Subscription: []*gpb.Subscription{onChange(t, "/int/node")}}).next()
			wantErrCode(t, err, codes.Unimplemented, "not supported")
		}
	}},
	{sec: "3.3.1", level: "MUST", text: "the schema tells the data type (CONFIG, STATE, OPERATIONAL) of every leaf", check: func(t *testing.T) { TestGetDataTypes(t) }},
	{sec: "3.3.1", level: "MUST", text: "without a type, CONFIG, STATE and OPERATIONAL data are returned", check: func(t *testing.T) {
		env := confEnv(t)
		got := leaves(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node"), Encoding: gpb.Encoding_PROTO}))
		for _, p := range []string{"/int/node/config/node-id", "/int/node/state/node-id", "/int/node/state/dataplane"} {
			if _, ok := got[p]; !ok {
				t.Errorf("%s missing", p)
			}
		}
	}},
	{sec: "3.3.2", level: "MUST", text: "one notification per path of the request, never one for several", check: func(t *testing.T) {
		env := confEnv(t)
		resp := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node/config/node-id", "/int/marking/config/dscp-value", "/int/node/config/node-id"), Encoding: gpb.Encoding_PROTO})
		if len(resp.GetNotification()) != 3 {
			t.Fatalf("%d notifications for 3 paths", len(resp.GetNotification()))
		}
		for i, n := range resp.GetNotification() {
			if len(n.GetUpdate()) != 1 {
				t.Errorf("notification %d has %d updates", i, len(n.GetUpdate()))
			}
		}
	}},
	{sec: "3.3.2", level: "MUST", text: "a notification's timestamp is when the target's snapshot of the path was taken", check: func(t *testing.T) {
		env := confEnv(t)
		before := time.Now().UnixNano()
		env.srv.RefreshState(context.Background())
		after := time.Now().UnixNano()
		time.Sleep(20 * time.Millisecond)
		ts := confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/node/state")}).GetNotification()[0].GetTimestamp()
		if ts < before || ts > after {
			t.Errorf("timestamp %d, the snapshot was taken in [%d, %d]", ts, before, after)
		}
	}},
	{sec: "3.3.4", level: "table", text: "Get: existing data, or a YANG default in use, is returned", check: func(t *testing.T) { TestDefaultsInUse(t) }},
	{sec: "3.3.4", level: "table", text: "Get: a valid path without data (nor default) is NOT_FOUND", check: func(t *testing.T) {
		env := confEnv(t)
		_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: paths(t, "/int/watchlist/entries/entry[sequence-id=77]")})
		wantCode(t, err, codes.NotFound)
	}},
	{sec: "3.3.4", level: "table", text: "Get: a path the target does not implement is UNIMPLEMENTED; a syntactically incorrect one INVALID_ARGUMENT",
		check: func(t *testing.T) { TestUnknownPathCodes(t) },
		na:    "every path of the schema is implemented; one outside it is not a valid path: INVALID_ARGUMENT (3.3.1), as an origin the target does not serve"},
	// 3.4 Set.
	{sec: "3.4", level: "MUST", text: "deletes, then replaces, then updates, each in order; the same path twice: both, in order", check: func(t *testing.T) {
		TestSetOrderAndResults(t)
		env := confEnv(t)
		p := "/int/node/config/node-id"
		if _, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, p, uintVal(5)), upd(t, p, uintVal(6))}}); err != nil {
			t.Fatal(err)
		}
		if got := leafVal(t, env.client, p); got != "6" {
			t.Errorf("%s = %s after updates to 5 then 6", p, got)
		}
	}},
	{sec: "3.4", level: "MUST NOT", text: "union_replace is not mixed with delete, replace or update",
		na: "binds clients; union_replace is not supported: UNIMPLEMENTED", check: func(t *testing.T) {
			env := confEnv(t)
			_, err := env.client.Set(context.Background(), &gpb.SetRequest{UnionReplace: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(3))}})
			wantCode(t, err, codes.Unimplemented)
		}},
	{sec: "3.4", level: "MUST NOT", text: "a SetRequest without paths is not an error", check: func(t *testing.T) {
		env := confEnv(t)
		unchangedBy(t, env, func() {
			if _, err := env.client.Set(context.Background(), &gpb.SetRequest{}); err != nil {
				t.Error(err)
			}
		})
	}},
	{sec: "3.4", level: "MUST", text: "a SetResponse with one UpdateResult per operation, in the order applied, op DELETE, REPLACE or UPDATE", check: func(t *testing.T) { TestSetOrderAndResults(t) }},
	{sec: "3.4", level: "MUST", text: "a failed operation's UpdateResult and the SetResponse carry the error",
		na: "a unary gRPC call that fails returns its status and no response message: the RPC status carries the error and its code (3.4.7, checked); UpdateResult.message is deprecated in gnmi.proto"},
	{sec: "3.4.3", level: "MUST", text: "a Set is a transaction: all applied, or rolled back; no change visible (nor sent to subscribers) before it is accepted", check: func(t *testing.T) {
		TestSetFailuresChangeNothing(t)
		env := confEnv(t)
		s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/node-id")))
		s.untilSync()
		env.fake.setFail(errBoom)
		_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(9))}})
		wantCode(t, err, codes.Aborted)
		env.fake.setFail(nil)
		set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(10))}})
		if r, _ := s.next(); r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() != 10 {
			t.Errorf("a subscriber saw %v before the accepted change", r)
		}
	}},
	{sec: "3.4.4", level: "MUST", text: "an update or replace of a path without data creates it", check: func(t *testing.T) {
		env := confEnv(t)
		set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/int/watchlist/entries/entry[sequence-id=70]/config/description", jsonIETF(`"new"`))}})
		if got := leafVal(t, env.client, "/int/watchlist/entries/entry[sequence-id=70]/config/description"); got != `"new"` {
			t.Errorf("created leaf %s", got)
		}
	}},
	{sec: "3.4.4", level: "MUST", text: "an invalid value stops the Set, the tree returns to its prior state, the status says why", check: func(t *testing.T) { TestSetRefusesBadScalars(t) }},
	{sec: "3.4.4", level: "MUST", text: "a replace of a collection removes the entries not in the value; an update adds entries", check: func(t *testing.T) {
		env := confEnv(t)
		set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/watchlist/entries", watchlistBatch(100, 2))}})
		if got := leaves(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/watchlist/entries/entry/config/sequence-id"), Encoding: gpb.Encoding_PROTO})); len(got) != 5 {
			t.Errorf("after an update adding 2 to 3 entries: %v", keys(got))
		}
		set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/int/watchlist/entries", watchlistBatch(200, 2))}})
		if got := leaves(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/watchlist/entries/entry/config/sequence-id"), Encoding: gpb.Encoding_PROTO})); len(got) != 2 {
			t.Errorf("after a replace with 2 entries: %v", keys(got))
		}
	}},
	{sec: "3.4.4", level: "MUST", text: "a replace reverts leaves it does not give to their default, and deletes those without one", check: func(t *testing.T) {
		env := confEnv(t)
		set(t, env.client, &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/int/node/config", jsonIETF(`{"postcard": true}`))}})
		if got := leafVal(t, env.client, "/int/node/config/drop-report"); got != "false" {
			t.Errorf("drop-report %s, want its default false", got)
		}
		_, err := env.client.Get(context.Background(), &gpb.GetRequest{Path: paths(t, "/int/node/config/node-id")})
		wantCode(t, err, codes.NotFound)
	}},
	{sec: "3.4.4", level: "MUST", text: "replace with {} (a keyed entry) or nil is INVALID_ARGUMENT", check: func(t *testing.T) {
		TestSetListEntryKeys(t)
		env := confEnv(t)
		unchangedBy(t, env, func() {
			_, err := env.client.Set(context.Background(), &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(t, "/int/node/config/postcard")}}})
			wantCode(t, err, codes.InvalidArgument)
		})
	}},
	{sec: "3.4.5", level: "MUST", text: "an update or replace naming only some keys of an entry is INVALID_ARGUMENT", check: func(t *testing.T) {
		env := confEnv(t)
		unchangedBy(t, env, func() {
			_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/report-sessions/report-session[name=collector]/collectors/collector[port=32766]/config/address", jsonIETF(`"192.0.2.9"`))}})
			wantCode(t, err, codes.InvalidArgument)
		})
	}},
	{sec: "3.4.5", level: "MUST", text: "key values contradicting the path's keys are INVALID_ARGUMENT", check: func(t *testing.T) {
		env := confEnv(t)
		unchangedBy(t, env, func() {
			_, err := env.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/report-sessions/report-session[name=collector]/collectors/collector[address=192.0.2.101][port=32766]/config/port", uintVal(100))}})
			wantCode(t, err, codes.InvalidArgument)
		})
	}},
	{sec: "3.4.6", level: "MUST", text: "a delete removes the children recursively; wildcards, also with some keys, are expanded; deleting what does not exist succeeds", check: func(t *testing.T) {
		TestSetDeleteWildcardAndAbsent(t)
		env := confEnv(t)
		set(t, env.client, &gpb.SetRequest{Delete: paths(t, "/int/watchlist/entries/entry[sequence-id=10]")})
		got := leaves(confGet(t, env, &gpb.GetRequest{Path: paths(t, "/int/watchlist"), Encoding: gpb.Encoding_PROTO}))
		for p := range got {
			if strings.Contains(p, "sequence-id=10]") {
				t.Errorf("%s left after deleting the entry", p)
			}
		}
	}},
	{sec: "3.4.7", level: "MUST", text: "a Set that cannot be applied fails as a whole, with an error status, changing nothing", check: func(t *testing.T) { TestSetFailuresChangeNothing(t) }},
	{sec: "3.4.7", level: "MUST", text: "codes: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (unparsable path, invalid value), NOT_FOUND (update or replace of an invalid path), UNIMPLEMENTED (encoding)", check: func(t *testing.T) {
		env := confEnv(t)
		ctx := context.Background()
		for _, tc := range []struct {
			req  *gpb.SetRequest
			code codes.Code
		}{
			{&gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: ""}}}, Val: uintVal(1)}}}, codes.InvalidArgument},
			{&gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", jsonIETF(`"x"`))}}, codes.InvalidArgument},
			{&gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/nodes/config/node-id", uintVal(1))}}, codes.NotFound},
			{&gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "1"}})}}, codes.Unimplemented},
		} {
			_, err := env.client.Set(ctx, tc.req)
			wantCode(t, err, tc.code)
		}
		senv, _ := secureEnv(t)
		_, err := senv.client.Set(withUser("admin", "nope"), &gpb.SetRequest{})
		wantCode(t, err, codes.Unauthenticated)
		_, err = senv.client.Set(withUser("viewer", "viewer-secret"), &gpb.SetRequest{})
		wantCode(t, err, codes.PermissionDenied)
	}},
	{sec: "3.4.7", level: "SHOULD", text: "the status of a failed transaction is ABORTED",
		na: "the MUST of the same section gives the specific code of the failed operation, which is returned; ABORTED when the dataplane fails to apply a valid configuration"},
	// 3.5 Subscribe.
	{sec: "3.5", level: "MUST NOT", text: "values are not aggregated: each update is one leaf's path and value (no schema element is marked for aggregation, so allow_aggregation changes nothing)", check: func(t *testing.T) {
		env := confEnv(t)
		for _, enc := range []gpb.Encoding{gpb.Encoding_PROTO, gpb.Encoding_JSON_IETF} {
			sl := subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node"))
			sl.Encoding, sl.AllowAggregation = enc, true
			everyValue(notifications(onceAll(t, env, sl)), func(_ *gpb.Notification, u *gpb.Update) {
				e := env.srv.schema.entry(u.GetPath().GetElem())
				if e == nil || e.IsDir() || strings.HasPrefix(string(u.GetVal().GetJsonIetfVal()), "{") {
					t.Errorf("%v: update %v is not one leaf", enc, u)
				}
			})
		}
	}},
	{sec: "3.5.1.1", level: "MUST", text: "a ONCE RPC is closed after the initial responses", check: func(t *testing.T) { TestSubscribeOnce(t) }},
	{sec: "3.5.1.1", level: "MUST", text: "an RPC whose first request has no SubscriptionList is INVALID_ARGUMENT", check: func(t *testing.T) {
		env := confEnv(t)
		st, err := env.client.Subscribe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}})
		_, err = st.Recv()
		wantErrCode(t, err, codes.InvalidArgument, "SubscriptionList")
	}},
	{sec: "3.5.1.1", level: "MUST", text: "another SubscriptionList on an RPC is INVALID_ARGUMENT; other RPCs on the session go on", check: func(t *testing.T) {
		TestSubscribePollSecondList(t)
		env := confEnv(t)
		other := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/node-id")))
		other.untilSync()
		sl := subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node"))
		s := subscribeTo(t, env.client, sl)
		s.untilSync()
		s.stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}})
		for {
			_, err := s.next()
			if err != nil {
				wantCode(t, err, codes.InvalidArgument)
				break
			}
		}
		set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/node/config/node-id", uintVal(31))}})
		other.until("the other RPC's update", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
			return got["/int/node/config/node-id"] == "31"
		})
	}},
	{sec: "3.5.1.1", level: "MUST", text: "clients create subscriptions with a SubscriptionList, and new paths with a new RPC", na: "binds clients"},
	{sec: "3.5.1.2", level: "MUST", text: "use_models: only the data of those models; without it, of all", check: func(t *testing.T) { TestUseModels(t) }},
	{sec: "3.5.1.2", level: "MUST NOT", text: "updates_only: the current state is not sent (ONCE and POLL: only the sync_response)", check: func(t *testing.T) {
		TestSubscribeUpdatesOnly(t)
		TestSubscribeUpdatesOnlyOncePoll(t)
	}},
	{sec: "3.5.1.2", level: "MUST", text: "a SubscriptionList has a non-empty subscription", na: "binds clients; the target refuses an empty one: INVALID_ARGUMENT", check: func(t *testing.T) {
		env := confEnv(t)
		_, err := subscribeTo(t, env.client, &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM}).next()
		wantCode(t, err, codes.InvalidArgument)
	}},
	{sec: "3.5.1.3", level: "MUST", text: "any syntactically valid path of the models may be subscribed to; one without data (yet) does not close the RPC", check: func(t *testing.T) {
		env := confEnv(t)
		s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/watchlist/entries/entry[sequence-id=88]/config/description")))
		if got := s.untilSync(); len(got) != 0 {
			t.Fatalf("data for an absent entry: %v", got)
		}
		set(t, env.client, &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/int/watchlist/entries/entry[sequence-id=88]/config/description", jsonIETF(`"late"`))}})
		s.until("the entry's creation", func(got map[string]string, _ *gpb.SubscribeResponse) bool {
			return got["/int/watchlist/entries/entry[sequence-id=88]/config/description"] == `"late"`
		})
	}},
	{sec: "3.5.1.4", level: "MUST NOT", text: "clients do not assume responses in timestamp order", na: "binds clients"},
	{sec: "3.5.1.5.1", level: "MUST", text: "ONCE: the updates, then a sync_response, then the RPC is closed", check: func(t *testing.T) { TestSubscribeOnce(t) }},
	{sec: "3.5.1.5.2", level: "MUST", text: "ON_CHANGE: first all matching paths, then their changes", check: func(t *testing.T) { TestSubscribeStreamOnChange(t) }},
	{sec: "3.5.1.5.2", level: "MUST", text: "ON_CHANGE with a heartbeat: the values again every heartbeat interval", check: func(t *testing.T) { TestSubscribeHeartbeatOnChange(t) }},
	{sec: "3.5.1.5.2", level: "MUST", text: "SAMPLE: the values once per sample interval; suppress_redundant: only the leaves that changed; with a heartbeat: all every heartbeat interval", check: func(t *testing.T) { TestSubscribeSample(t) }},
	{sec: "3.5.1.5.2", level: "MUST", text: "an unsupported sample_interval is INVALID_ARGUMENT; 0 is the lowest the target supports", check: func(t *testing.T) { TestSubscribeSampleIntervals(t) }},
	{sec: "3.5.1.5.2", level: "MUST", text: "TARGET_DEFINED: the target picks per leaf (counters sampled, the rest on change)", check: func(t *testing.T) { TestSubscribeTargetDefined(t) }},
	{sec: "3.5.1.5.2", level: "SHOULD", text: "TARGET_DEFINED with a sample_interval is INVALID_ARGUMENT", check: func(t *testing.T) { TestSubscribeSampleIntervals(t) }},
	{sec: "3.5.1.5.3", level: "MUST", text: "POLL: each Poll gets updates for all paths, then a sync_response", check: func(t *testing.T) { TestSubscribePoll(t) }},
	{sec: "3.5.2.1", level: "MUST NOT", text: "bundling does not obscure hardware timestamps",
		na: "no dataplane value carries a hardware timestamp: a value's timestamp is when it was collected (3.5.2.3, checked)"},
	{sec: "3.5.2.3", level: "MUST", text: "a notification's timestamp is when the value was collected or the change happened", check: func(t *testing.T) {
		env := confEnv(t)
		s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/state/counters/in-packets")))
		s.untilSync()
		time.Sleep(20 * time.Millisecond)
		env.fake.setCounter(555)
		before := time.Now().UnixNano()
		env.srv.RefreshState(context.Background())
		after := time.Now().UnixNano()
		r, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if ts := r.GetUpdate().GetTimestamp(); ts < before || ts > after {
			t.Errorf("timestamp %d, collected in [%d, %d]", ts, before, after)
		}
	}},
	{sec: "3.5.2.3", level: "MUST", text: "a changed or new leaf is an update; a removed node a delete", check: func(t *testing.T) { TestSubscribeStreamOnChange(t) }},
	{sec: "3.5.2.3", level: "MUST", text: "a leaf back to its default is an update to the default value, not only a delete", check: func(t *testing.T) { TestDefaultsInUse(t) }},
	{sec: "3.5.2.3", level: "MUST", text: "a sync_response once the initial updates are sent; after each poll's updates", check: func(t *testing.T) {
		TestSubscribeStreamOnChange(t)
		TestSubscribePoll(t)
	}},
	{sec: "3.5.2.4", level: "table", text: "Subscribe: existing data or defaults in use are sent; a valid path without data sends nothing (STREAM stays open); an invalid path is INVALID_ARGUMENT", check: func(t *testing.T) {
		TestUnknownPathCodes(t)
		TestDefaultsInUse(t)
	}, na: "no path of the schema is unimplemented (UNIMPLEMENTED is for encodings and extensions)"},
	{sec: "3.5.2.5", level: "MUST", text: "an atomic container's notifications hold only the subscribed leaves", na: "no container of the models is atomic"},
}

// metadataUser is a context with a username and no password.
func metadataUser(name string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "username", name)
}

func TestGNMIConformance(t *testing.T) {
	for i, r := range conformance {
		if r.check == nil {
			continue
		}
		t.Run(fmt.Sprintf("%02d_%s_%s", i, r.sec, strings.ReplaceAll(r.level, " ", "_")), r.check)
	}
}

// conformanceDoc renders the table as docs/gnmi-conformance.md.
func conformanceDoc() string {
	var b strings.Builder
	b.WriteString(`# gNMI conformance

What intd's gNMI server (server/) does about each requirement of sections 2
and 3 of the gNMI specification (openconfig/reference
rpc/gnmi/gnmi-specification.md, version 0.10.0): every MUST, MUST NOT and
SHOULD, and the behaviour tables of 3.3.4 and 3.5.2.4. "checked" means
TestGNMIConformance in server/conformance_test.go runs a real gNMI client
over gRPC against the server for it, and fails when it is not met; rows that
bind clients or schemas, or features no model of intd has, say why nothing
is checked. TestGNMIConformanceLab (tests/gnmi_conformance_test.go) checks
the main ones again against ` + "`intd lab`" + ` run as a subprocess, its soft
switches behind the dtel orchestrator. This file is generated from that
table:
` + "`INTD_UPDATE_DOCS=1 go test ./server -run TestGNMIConformanceDoc`" + `.

| § | Level | Requirement | Verdict |
|---|---|---|---|
`)
	counts := map[string]int{}
	for _, r := range conformance {
		verdict := "met, checked"
		switch {
		case r.check == nil:
			verdict = "not applicable: " + r.na
			counts["n/a"]++
		case r.na != "":
			verdict = "met, checked (" + r.na + ")"
			counts["checked"]++
		default:
			counts["checked"]++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.sec, r.level, strings.ReplaceAll(r.text, "|", "/"), strings.ReplaceAll(verdict, "|", "/"))
	}
	var ks []string
	for k := range counts {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintf(&b, "\n%d requirements: %d checked, %d not applicable; none fails.\n", len(conformance), counts["checked"], counts["n/a"])
	return b.String()
}

func TestGNMIConformanceDoc(t *testing.T) {
	const path = "../docs/gnmi-conformance.md"
	want := conformanceDoc()
	if os.Getenv("INTD_UPDATE_DOCS") != "" {
		if err := os.MkdirAll("../docs", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("%s is not the rendering of the conformance table (%v): run INTD_UPDATE_DOCS=1 go test ./server -run TestGNMIConformanceDoc", path, err)
	}
}

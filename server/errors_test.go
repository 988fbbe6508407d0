package server

import (
	"context"
	"regexp"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/status"
)

// goism matches what must not reach a client in an error message: Go
// types of the generated code, its fake root, ygot's "(T ptr)", whole
// regular expressions, protobuf text of paths and values.
var goism = regexp.MustCompile(`gen\.|/device\b|ptr\)|regular expression|\^\(|Intd[A-Z]|elem:\{|_val:|field name|GoStruct|\(\*?u?int[0-9]*\)`)

// Error messages speak YANG: the data path with keys, the node, the value
// and what is wrong with it.
func TestErrorMessagesSpeakYANG(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	str := func(v string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: v}} }
	upd := func(p string, v *gpb.TypedValue) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, p), Val: v}}}
	}
	sets := []struct {
		name string
		req  *gpb.SetRequest
		want string // a part the message must have
	}{
		{"dangling-after-delete", &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/int-sessions/int-session[name=md-5]")}}, "int-session md-5 is used by watchlist entry "},
		{"dangling-report-session", &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/report-sessions/report-session[name=collector]")}}, "report-session collector is used by event "},
		{"no-such-target", upd("/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session", str("nope")), "/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session: there is no int-session nope"},
		{"pattern", upd("/int/watchlist/entries/entry[sequence-id=10]/match/config/source-prefix", str("nope")), `/int/watchlist/entries/entry[sequence-id=10]/match/config/source-prefix: "nope" is not a valid`},
		{"range", upd("/int/marking/config/dscp-value", uintVal(99)), "/int/marking/config/dscp-value: 99 is outside the range"},
		{"enum", upd("/int/marking/config/l4-marking", str("SMOKE")), `"SMOKE" is not one of`},
		{"wrong-type", upd("/int/node/config/node-id", str("one")), "/int/node/config/node-id: one is not an integer"},
		{"entry-without-key", upd("/int/watchlist/entries", jsonIETF(`{"entry": [{"config": {"description": "x"}}]}`)), "lacks its key sequence-id"},
		{"key-leaf-mismatch", upd("/int/watchlist/entries", jsonIETF(`{"entry": [{"sequence-id": 50, "config": {"sequence-id": 51}}]}`)), "/int/watchlist/entries/entry[sequence-id=50]/sequence-id"},
		{"bad-key-value", upd("/int/watchlist/entries/entry[sequence-id=abc]/config/description", jsonIETF(`"x"`)), "entry[sequence-id=abc]: bad key: sequence-id: abc is not an integer"},
		{"bad-key-enum", upd("/int/events/event[type=NOPE]/config/dscp", uintVal(3)), `"NOPE" is not one of`},
		{"delete-bad-key", &gpb.SetRequest{Delete: []*gpb.Path{gp(t, "/int/watchlist/entries/entry[sequence-id=abc]")}}, "bad key"},
		{"below-a-leaf", upd("/int/node/config/node-id/x", uintVal(1)), "/int/node/config/node-id/x: node-id is a leaf"},
		{"state-in-json", upd("/int/node", jsonIETF(`{"state": {"node-id": 3}}`)), "/int/node/state is config false"},
		{"state-in-list", upd("/int/report-sessions/report-session[name=collector]/collectors", jsonIETF(`{"collector": [{"address": "192.0.2.101", "port": 32766, "state": {"port": 1}}]}`)), "collector[address=192.0.2.101][port=32766]/state is config false"},
		{"unknown-member", upd("/int/marking/config", jsonIETF(`{"colour": "red"}`)), "/int/marking/config/colour: unknown node"},
	}
	for _, tc := range sets {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.client.Set(ctx, tc.req)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := status.Convert(err).Message()
			if g := goism.FindString(msg); g != "" {
				t.Errorf("message has %q: %s", g, msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q lacks %q", msg, tc.want)
			}
		})
	}
	for _, p := range []string{"/int/no-such", "/int/watchlist/entries/entry[sequence-id=abc]", "/int/node[x=1]", "/int/node/config/node-id/deeper"} {
		_, err := env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, p)}})
		_, serr := subscribeTo(t, env.client, subList(gpb.SubscriptionList_ONCE, onChange(t, p))).next()
		for _, e := range []error{err, serr} {
			msg := status.Convert(e).Message()
			if e == nil || goism.MatchString(msg) || !strings.Contains(msg, "/int/") {
				t.Errorf("%s: %v", p, e)
			}
		}
	}
}

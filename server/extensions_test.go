package server

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
)

func extDepth(n uint32) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Depth{Depth: &gnmi_ext.Depth{Level: n}}}
}

func extCommit(c *gnmi_ext.Commit) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
}

func extMaster(role string, id uint64) *gnmi_ext.Extension {
	ma := &gnmi_ext.MasterArbitration{ElectionId: &gnmi_ext.Uint128{Low: id}}
	if role != "" {
		ma.Role = &gnmi_ext.Role{Id: role}
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: ma}}
}

// Extensions are never silently ignored: unsupported ones are
// UNIMPLEMENTED, supported ones on an RPC they do not apply to (or given
// twice) INVALID_ARGUMENT.
func TestExtensionsRefused(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	history := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: 1}}}}
	registered := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: gnmi_ext.ExtensionID_EID_EXPERIMENTAL, Msg: []byte{1}}}}
	configSub := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_ConfigSubscription{ConfigSubscription: &gnmi_ext.ConfigSubscription{}}}
	commit := extCommit(&gnmi_ext.Commit{Id: "x", Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{}}})
	cases := []struct {
		name string
		rpc  string
		ext  []*gnmi_ext.Extension
		code codes.Code
	}{
		{"history-get", "Get", []*gnmi_ext.Extension{history}, codes.Unimplemented},
		{"history-subscribe", "Subscribe", []*gnmi_ext.Extension{history}, codes.Unimplemented},
		{"registered-get", "Get", []*gnmi_ext.Extension{registered}, codes.Unimplemented},
		{"registered-set", "Set", []*gnmi_ext.Extension{registered}, codes.Unimplemented},
		{"registered-capabilities", "Capabilities", []*gnmi_ext.Extension{registered}, codes.Unimplemented},
		{"config-subscription", "Subscribe", []*gnmi_ext.Extension{configSub}, codes.Unimplemented},
		{"depth-set", "Set", []*gnmi_ext.Extension{extDepth(1)}, codes.InvalidArgument},
		{"depth-capabilities", "Capabilities", []*gnmi_ext.Extension{extDepth(1)}, codes.InvalidArgument},
		{"commit-get", "Get", []*gnmi_ext.Extension{commit}, codes.InvalidArgument},
		{"commit-subscribe", "Subscribe", []*gnmi_ext.Extension{commit}, codes.InvalidArgument},
		{"master-get", "Get", []*gnmi_ext.Extension{extMaster("", 1)}, codes.InvalidArgument},
		{"depth-twice", "Get", []*gnmi_ext.Extension{extDepth(1), extDepth(2)}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch tc.rpc {
			case "Get":
				_, err = env.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node")}, Extension: tc.ext})
			case "Set":
				_, err = env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(9)}}, Extension: tc.ext})
			case "Capabilities":
				_, err = env.client.Capabilities(ctx, &gpb.CapabilityRequest{Extension: tc.ext})
			case "Subscribe":
				st, serr := env.client.Subscribe(ctx)
				if serr != nil {
					t.Fatal(serr)
				}
				st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node"))}, Extension: tc.ext})
				_, err = st.Recv()
			}
			wantCode(t, err, tc.code)
		})
	}
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "1" {
		t.Errorf("a refused Set changed node-id to %s", got)
	}
}

// The depth extension (gnmi-depth.md) on Get and Subscribe: leaves at most
// that many levels below the requested path.
func TestDepthExtension(t *testing.T) {
	env := startServer(t, TargetOptions{})
	// /int/node: config/* and state/* are two levels down, state/counters/*
	// three.
	resp := get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node")}, Encoding: gpb.Encoding_PROTO, Extension: []*gnmi_ext.Extension{extDepth(2)}})
	got := leaves(resp)
	if got["/int/node/config/node-id"] != "1" || got["/int/node/state/dataplane"] == "" {
		t.Errorf("depth 2: level-2 leaves missing: %v", keys(got))
	}
	for p := range got {
		if strings.Contains(p, "/counters/") {
			t.Errorf("depth 2: %s is three levels down", p)
		}
	}
	all := leaves(get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node")}, Encoding: gpb.Encoding_PROTO, Extension: []*gnmi_ext.Extension{extDepth(0)}}))
	if all["/int/node/state/counters/in-packets"] != "100" {
		t.Errorf("depth 0 is no limit: %v", keys(all))
	}
	// JSON_IETF: the same cut in the encoded subtree; a list counts as one
	// level with its entry.
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/watchlist/entries/entry")}, Encoding: gpb.Encoding_JSON_IETF, Extension: []*gnmi_ext.Extension{extDepth(1)}})
	var entries []string
	for _, u := range resp.GetNotification()[0].GetUpdate() {
		entries = append(entries, valText(u.GetVal()))
	}
	if js := strings.Join(entries, " "); len(entries) != 3 || !strings.Contains(js, `"intd-int:sequence-id":10`) || strings.Contains(js, "config") {
		t.Errorf("depth 1 of the watchlist entries: %s", js)
	}
	js := ""
	resp = get(t, env.client, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node")}, Encoding: gpb.Encoding_JSON_IETF, Extension: []*gnmi_ext.Extension{extDepth(2)}})
	js = valText(resp.GetNotification()[0].GetUpdate()[0].GetVal())
	if !strings.Contains(js, "node-id") || strings.Contains(js, "in-packets") {
		t.Errorf("JSON depth 2 of /int/node: %s", js)
	}
	// Subscribe, ONCE and STREAM.
	for _, mode := range []gpb.SubscriptionList_Mode{gpb.SubscriptionList_ONCE, gpb.SubscriptionList_STREAM} {
		st, err := env.client.Subscribe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: subList(mode, onChange(t, "/int/node"))}, Extension: []*gnmi_ext.Extension{extDepth(2)}})
		got := map[string]string{}
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetSyncResponse() {
				break
			}
			addResp(got, r)
		}
		if got["/int/node/config/node-id"] != "1" {
			t.Errorf("%v depth 2: %v", mode, keys(got))
		}
		for p := range got {
			if strings.Contains(p, "/counters/") {
				t.Errorf("%v depth 2: %s is three levels down", mode, p)
			}
		}
	}
}

// Master arbitration (gnmi-master-arbitration.md §3.2), per role.
func TestMasterArbitration(t *testing.T) {
	env := startServer(t, TargetOptions{})
	ctx := context.Background()
	setWith := func(v uint64, ext ...*gnmi_ext.Extension) error {
		_, err := env.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(v)}}, Extension: ext})
		return err
	}
	for _, step := range []struct {
		role string
		id   uint64
		code codes.Code
	}{
		{"", 5, codes.OK},
		{"", 3, codes.PermissionDenied},
		{"", 5, codes.OK},
		{"", 7, codes.OK},
		{"", 5, codes.PermissionDenied},
		{"other", 1, codes.OK}, // another role has its own master
		{"other", 0, codes.PermissionDenied},
	} {
		wantCode(t, setWith(10+step.id, extMaster(step.role, step.id)), step.code)
	}
	if got := leafVal(t, env.client, "/int/node/config/node-id"); got != "11" {
		t.Errorf("node-id %s: a refused Set took effect, or an accepted one did not", got)
	}
	// Without an election ID: INVALID_ARGUMENT; without the extension: a
	// plain Set.
	wantCode(t, setWith(1, &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{}}}), codes.InvalidArgument)
	wantCode(t, setWith(12), codes.OK)
}

func commitExt(id string, action any) []*gnmi_ext.Extension {
	c := &gnmi_ext.Commit{Id: id}
	switch a := action.(type) {
	case time.Duration:
		req := &gnmi_ext.CommitRequest{}
		if a > 0 {
			req.RollbackDuration = durationpb.New(a)
		}
		c.Action = &gnmi_ext.Commit_Commit{Commit: req}
	case string:
		switch a {
		case "confirm":
			c.Action = &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}
		case "cancel":
			c.Action = &gnmi_ext.Commit_Cancel{Cancel: &gnmi_ext.CommitCancel{}}
		}
	case *durationpb.Duration:
		c.Action = &gnmi_ext.Commit_SetRollbackDuration{SetRollbackDuration: &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: a}}
	}
	return []*gnmi_ext.Extension{extCommit(c)}
}

// Commit confirmed (gnmi-commit-confirmed.md) through gRPC: apply and
// arm, confirm, cancel, expiry, a new rollback duration, the codes of
// §3.2, and a restart while a commit is pending.
func TestCommitConfirmed(t *testing.T) {
	save := t.TempDir() + "/running.json"
	env := startServer(t, TargetOptions{SavePath: save})
	ctx := context.Background()
	nodeID := func() string { return leafVal(t, env.client, "/int/node/config/node-id") }
	commitSet := func(v uint64, ext []*gnmi_ext.Extension) error {
		req := &gpb.SetRequest{Extension: ext}
		if v > 0 {
			req.Update = []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(v)}}
		}
		_, err := env.client.Set(ctx, req)
		return err
	}
	saved := func() string {
		d, err := os.ReadFile(save)
		if err != nil {
			return err.Error()
		}
		return string(d)
	}
	rollbackFile := func() bool { _, err := os.Stat(save + ".rollback"); return err == nil }

	// Apply and confirm.
	wantCode(t, commitSet(50, commitExt("c1", time.Hour)), codes.OK)
	if nodeID() != "50" || !strings.Contains(saved(), `"node-id": 50`) || !rollbackFile() {
		t.Fatalf("after commit c1: node-id %s, saved has 50: %v, rollback file: %v", nodeID(), strings.Contains(saved(), `"node-id": 50`), rollbackFile())
	}
	wantCode(t, commitSet(51, nil), codes.FailedPrecondition)                            // a plain Set while pending
	wantCode(t, commitSet(51, commitExt("c9", time.Hour)), codes.FailedPrecondition)     // a second commit
	wantCode(t, commitSet(0, commitExt("c9", "confirm")), codes.InvalidArgument)         // not the pending id
	wantCode(t, commitSet(0, commitExt("", "confirm")), codes.InvalidArgument)           // no id
	wantCode(t, commitSet(51, commitExt("c1", "confirm")), codes.InvalidArgument)        // a confirm with changes
	wantCode(t, commitSet(0, commitExt("c1", durationpb.New(0))), codes.InvalidArgument) // rollback duration 0
	wantCode(t, commitSet(0, commitExt("c1", "confirm")), codes.OK)
	if nodeID() != "50" || rollbackFile() {
		t.Fatalf("after confirm: node-id %s, rollback file %v", nodeID(), rollbackFile())
	}
	wantCode(t, commitSet(0, commitExt("c1", "confirm")), codes.FailedPrecondition) // nothing pending
	wantCode(t, commitSet(0, commitExt("c1", "cancel")), codes.FailedPrecondition)
	wantCode(t, commitSet(52, nil), codes.OK)

	// Cancel: back to 52, saved too; subscribers see it.
	s := subscribeTo(t, env.client, subList(gpb.SubscriptionList_STREAM, onChange(t, "/int/node/config/node-id")))
	s.untilSync()
	applies := env.fake.applyCount()
	wantCode(t, commitSet(60, commitExt("c2", time.Hour)), codes.OK)
	wantCode(t, commitSet(0, commitExt("c2", "cancel")), codes.OK)
	if nodeID() != "52" || !strings.Contains(saved(), `"node-id": 52`) || rollbackFile() {
		t.Fatalf("after cancel: node-id %s, rollback file %v", nodeID(), rollbackFile())
	}
	if n := env.fake.applyCount() - applies; n != 2 {
		t.Errorf("%d applies for a commit and its cancel, want 2", n)
	}
	s.until("node-id 60 then 52", func(got map[string]string, r *gpb.SubscribeResponse) bool {
		return got["/int/node/config/node-id"] == "52"
	})

	// Expiry.
	wantCode(t, commitSet(70, commitExt("c3", 50*time.Millisecond)), codes.OK)
	deadline := time.Now().Add(waitLimit)
	for (nodeID() != "52" || rollbackFile()) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if nodeID() != "52" || !strings.Contains(saved(), `"node-id": 52`) || rollbackFile() {
		t.Fatalf("after expiry: node-id %s, rollback file %v", nodeID(), rollbackFile())
	}
	wantCode(t, commitSet(53, nil), codes.OK) // no longer pending

	// A new rollback duration: from an hour to now.
	wantCode(t, commitSet(80, commitExt("c4", time.Hour)), codes.OK)
	wantCode(t, commitSet(0, commitExt("c4", durationpb.New(10*time.Millisecond))), codes.OK)
	deadline = time.Now().Add(waitLimit)
	for nodeID() != "53" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if nodeID() != "53" {
		t.Fatalf("after the shortened rollback duration: node-id %s", nodeID())
	}

	// A restart while a commit is pending rolls it back at start.
	wantCode(t, commitSet(90, commitExt("c5", time.Hour)), codes.OK)
	env.conn.Close()
	env.srv.Close()
	env2 := startServer(t, TargetOptions{SavePath: save})
	if got := leafVal(t, env2.client, "/int/node/config/node-id"); got != "53" {
		t.Errorf("node-id after a restart with commit c5 pending: %s, want 53", got)
	}
	if !strings.Contains(saved(), `"node-id": 53`) || rollbackFile() {
		t.Errorf("after the restart: saved %q, rollback file %v", saved(), rollbackFile())
	}
	if _, err := env2.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(54)}}}); err != nil {
		t.Errorf("a plain Set after the restart: %v", err)
	}
}

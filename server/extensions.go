package server

import (
	"fmt"

	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Extensions (openconfig/reference rpc/gnmi/gnmi-extensions.md) are
// never ignored: a client relying on one must not believe it took
// effect. Served: depth (gnmi-depth.md) on Get and Subscribe; commit
// confirmed (gnmi-commit-confirmed.md) and master arbitration
// (gnmi-master-arbitration.md) on Set. An extension this server does not
// implement (history, config subscription, any registered extension) is
// UNIMPLEMENTED; one it implements, given to an RPC it does not apply to
// (depth on Set, as gnmi-depth.md §3.3 asks, commit on Get), or given
// twice, is INVALID_ARGUMENT.

// rpcExtensions is what a request's extensions ask for.
type rpcExtensions struct {
	depth   uint32 // 0: no limit
	commit  *gnmi_ext.Commit
	arbiter *gnmi_ext.MasterArbitration
}

// Which RPC an extension list belongs to.
const (
	extCapabilities = "Capabilities"
	extGet          = "Get"
	extSet          = "Set"
	extSubscribe    = "Subscribe"
)

func parseExtensions(rpc string, exts []*gnmi_ext.Extension) (*rpcExtensions, error) {
	out := &rpcExtensions{}
	seen := map[string]bool{}
	for _, x := range exts {
		var name string
		switch e := x.GetExt().(type) {
		case *gnmi_ext.Extension_Depth:
			name = "depth"
			if rpc != extGet && rpc != extSubscribe {
				return nil, notApplicable(name, rpc, "Get and Subscribe")
			}
			out.depth = e.Depth.GetLevel()
		case *gnmi_ext.Extension_Commit:
			name = "commit"
			if rpc != extSet {
				return nil, notApplicable(name, rpc, "Set")
			}
			out.commit = e.Commit
		case *gnmi_ext.Extension_MasterArbitration:
			name = "master_arbitration"
			if rpc != extSet {
				return nil, notApplicable(name, rpc, "Set")
			}
			out.arbiter = e.MasterArbitration
		case *gnmi_ext.Extension_History:
			return nil, status.Error(codes.Unimplemented, "the history extension is not supported: this target keeps no history")
		case *gnmi_ext.Extension_ConfigSubscription:
			return nil, status.Error(codes.Unimplemented, "the config_subscription extension is not supported")
		case *gnmi_ext.Extension_RegisteredExt:
			return nil, status.Errorf(codes.Unimplemented, "registered extension %v is not supported", e.RegisteredExt.GetId())
		default:
			return nil, status.Errorf(codes.Unimplemented, "extension %T is not supported", x.GetExt())
		}
		if seen[name] {
			return nil, status.Errorf(codes.InvalidArgument, "the %s extension is given twice", name)
		}
		seen[name] = true
	}
	return out, nil
}

func notApplicable(name, rpc, to string) error {
	return status.Errorf(codes.InvalidArgument, "the %s extension applies to %s, not %s", name, to, rpc)
}

// electionID is a 128-bit master arbitration election ID.
type electionID struct{ high, low uint64 }

func (a electionID) less(b electionID) bool {
	return a.high < b.high || (a.high == b.high && a.low < b.low)
}

func (a electionID) String() string {
	if a.high == 0 {
		return fmt.Sprint(a.low)
	}
	return fmt.Sprintf("%d:%d (high:low)", a.high, a.low)
}

// arbitrate applies master arbitration to a Set (gnmi-master-arbitration
// §3.2): per role, the highest election ID seen is the master's; a Set
// with a lower one is PERMISSION_DENIED; a higher one becomes the
// master's. t.mu must be held.
func (t *target) arbitrate(ma *gnmi_ext.MasterArbitration) error {
	if ma == nil {
		return nil
	}
	if ma.GetElectionId() == nil {
		return status.Error(codes.InvalidArgument, "master_arbitration without an election_id")
	}
	id := electionID{ma.GetElectionId().GetHigh(), ma.GetElectionId().GetLow()}
	role := ma.GetRole().GetId()
	if t.masters == nil {
		t.masters = map[string]electionID{}
	}
	cur, ok := t.masters[role]
	if ok && id.less(cur) {
		who := "the default role"
		if role != "" {
			who = fmt.Sprintf("role %q", role)
		}
		return status.Errorf(codes.PermissionDenied, "not the master of %s: election ID %v is below the current master's, %v", who, id, cur)
	}
	t.masters[role] = id
	return nil
}

package main

import (
	"context"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/dataplane/collector"
	gencollector "github.com/intd-project/intd/gen/collector"
)

// gnmiServer is a read-only gNMI service over the intd-collector model:
// Capabilities, Get and Subscribe (ONCE, POLL, STREAM with SAMPLE or
// TARGET_DEFINED at the requested interval). The server package serves
// only the gen models, so this small service renders the collector's
// snapshot itself.
type gnmiServer struct {
	gpb.UnimplementedGNMIServer
	c        *collector.Collector
	maxFlows int
}

func (g *gnmiServer) Capabilities(context.Context, *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	var ms []*gpb.ModelData
	for _, m := range gencollector.ΓModelData {
		ms = append(ms, &gpb.ModelData{Name: m.Name, Organization: m.Organization, Version: "2026-11-21"})
	}
	return &gpb.CapabilityResponse{SupportedModels: ms,
		SupportedEncodings: []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO},
		GNMIVersion:        "0.10.0"}, nil
}

// updates renders the current state as gNMI updates (full paths).
func (g *gnmiServer) updates() ([]*gpb.Update, int64, error) {
	snap := g.c.Snapshot(g.maxFlows)
	dev := Tree(snap)
	ts := time.Now().UnixNano()
	ns, err := ygot.TogNMINotifications(dev, ts, ygot.GNMINotificationsConfig{UsePathElem: true})
	if err != nil {
		return nil, 0, err
	}
	var out []*gpb.Update
	for _, n := range ns {
		for _, u := range n.Update {
			u.Path = &gpb.Path{Elem: append(append([]*gpb.PathElem(nil), n.GetPrefix().GetElem()...), u.GetPath().GetElem()...)}
			out = append(out, u)
		}
	}
	return out, ts, nil
}

// matches reports whether p is at or below the (possibly wildcarded)
// query q.
func matches(q, p []*gpb.PathElem) bool {
	if len(q) > len(p) {
		return false
	}
	for i, e := range q {
		if e.Name != "*" && e.Name != "..." && e.Name != p[i].Name {
			return false
		}
		for k, v := range e.Key {
			if v != "*" && p[i].Key[k] != v {
				return false
			}
		}
	}
	return true
}

func join(prefix, p *gpb.Path) []*gpb.PathElem {
	return append(append([]*gpb.PathElem(nil), prefix.GetElem()...), p.GetElem()...)
}

func filter(us []*gpb.Update, q []*gpb.PathElem) []*gpb.Update {
	var out []*gpb.Update
	for _, u := range us {
		if matches(q, u.Path.Elem) {
			out = append(out, u)
		}
	}
	return out
}

func (g *gnmiServer) Get(_ context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	us, ts, err := g.updates()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "render: %v", err)
	}
	resp := &gpb.GetResponse{}
	paths := req.GetPath()
	if len(paths) == 0 {
		paths = []*gpb.Path{{}}
	}
	for _, p := range paths {
		resp.Notification = append(resp.Notification, &gpb.Notification{Timestamp: ts,
			Update: filter(us, join(req.GetPrefix(), p))})
	}
	return resp, nil
}

func (g *gnmiServer) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	sl := req.GetSubscribe()
	if sl == nil {
		return status.Error(codes.InvalidArgument, "first message must be a SubscriptionList")
	}
	send := func() error {
		us, ts, err := g.updates()
		if err != nil {
			return status.Errorf(codes.Internal, "render: %v", err)
		}
		for _, s := range sl.GetSubscription() {
			n := &gpb.Notification{Timestamp: ts, Prefix: &gpb.Path{Target: sl.GetPrefix().GetTarget()},
				Update: filter(us, join(sl.GetPrefix(), s.GetPath()))}
			if err := stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}}); err != nil {
				return err
			}
		}
		return nil
	}
	sync := func() error {
		return stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
	}
	if err := send(); err != nil {
		return err
	}
	if err := sync(); err != nil {
		return err
	}
	switch sl.GetMode() {
	case gpb.SubscriptionList_ONCE:
		return nil
	case gpb.SubscriptionList_POLL:
		for {
			m, err := stream.Recv()
			if err != nil {
				return err
			}
			if m.GetPoll() != nil {
				if err := send(); err != nil {
					return err
				}
				if err := sync(); err != nil {
					return err
				}
			}
		}
	}
	interval := time.Second
	for _, s := range sl.GetSubscription() {
		if d := time.Duration(s.GetSampleInterval()); d > 0 && d < interval {
			interval = max(d, 10*time.Millisecond)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-t.C:
			if err := send(); err != nil {
				return err
			}
		}
	}
}

package server

import (
	"context"
	"reflect"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/util"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"
)

// modelData lists the served modules with their revisions as versions.
func (s *schema) modelData() []*gpb.ModelData {
	out := make([]*gpb.ModelData, 0, len(s.models))
	for _, m := range s.models {
		out = append(out, proto.Clone(m).(*gpb.ModelData))
	}
	return out
}

func checkEncoding(e gpb.Encoding) error {
	for _, s := range supportedEncodings {
		if e == s {
			return nil
		}
	}
	return status.Errorf(codes.Unimplemented, "encoding %v is not supported (use JSON, JSON_IETF or PROTO)", e)
}

// Get implements gNMI Get.
func (s *Server) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if err := checkEncoding(req.GetEncoding()); err != nil {
		return nil, err
	}
	switch req.GetType() {
	case gpb.GetRequest_ALL, gpb.GetRequest_CONFIG, gpb.GetRequest_STATE, gpb.GetRequest_OPERATIONAL:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown data type %v", req.GetType())
	}
	ext, err := parseExtensions(extGet, req.GetExtension())
	if err != nil {
		return nil, err
	}
	models, err := s.schema.useModels(req.GetUseModels())
	if err != nil {
		return nil, err
	}
	t, echo, err := s.targetFor(req.GetPrefix())
	if err != nil {
		return nil, err
	}
	sn := t.snap.Load()
	paths := req.GetPath()
	if len(paths) == 0 {
		paths = []*gpb.Path{{}}
	}
	if len(paths) > s.o.maxPaths {
		return nil, status.Errorf(codes.ResourceExhausted, "the GetRequest has %d paths, more than the %d allowed", len(paths), s.o.maxPaths)
	}
	ts := sn.ts // the snapshot's time (§3.3.2), not the request's
	resp := &gpb.GetResponse{}
	// A path given twice is answered twice (one notification per path,
	// §3.3.2) but read and encoded once.
	done := map[string]*gpb.Notification{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		elems, origin, err := s.schema.joinPaths(req.GetPrefix(), p)
		if err != nil {
			return nil, err
		}
		key := origin + pathString(elems)
		if n := done[key]; n != nil {
			resp.Notification = append(resp.Notification, n)
			continue
		}
		pm := s.schema.forOrigin(origin, models)
		rs, err := s.schema.resolve(elems, pm)
		if err != nil {
			return nil, err
		}
		view, err := sn.view(req.GetType(), pm)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		n := &gpb.Notification{Timestamp: ts}
		if echo != "" || origin != "" {
			n.Prefix = &gpb.Path{Target: echo, Origin: origin}
		}
		for _, r := range rs {
			nodes, err := ytypes.GetNode(s.schema.root, view, r.path, &ytypes.GetHandleWildcards{}, &ytypes.GetTolerateNil{})
			if err != nil {
				if status.Code(err) == codes.NotFound {
					continue
				}
				return nil, status.Errorf(codes.Internal, "reading %s: %v", pathString(r.path.Elem), err)
			}
			for _, nd := range nodes {
				if util.IsValueNil(nd.Data) {
					continue
				}
				ups, err := encodeNode(nd, req.GetEncoding(), ts, int(ext.depth))
				if err != nil {
					return nil, status.Errorf(codes.Internal, "encoding %s: %v", pathString(nd.Path.GetElem()), err)
				}
				n.Update = append(n.Update, ups...)
			}
		}
		if len(n.Update) == 0 {
			return nil, status.Errorf(codes.NotFound, "no %v data at %s", req.GetType(), orRoot(pathString(elems)))
		}
		done[key] = n
		resp.Notification = append(resp.Notification, n)
	}
	return resp, nil
}

// encodeNode renders one data tree node: as a JSON value (one update) for
// the JSON encodings, as one update per leaf for PROTO. depth, when not 0,
// keeps only the leaves at most that many levels below the node
// (gnmi-depth.md).
func encodeNode(nd *ytypes.TreeNode, enc gpb.Encoding, ts int64, depth int) ([]*gpb.Update, error) {
	p := &gpb.Path{Elem: nd.Path.GetElem()}
	switch enc {
	case gpb.Encoding_JSON, gpb.Encoding_JSON_IETF:
		ietf := enc == gpb.Encoding_JSON_IETF
		data := nd.Data
		if gs, ok := data.(ygot.GoStruct); ok && depth > 0 {
			cp, err := ygot.DeepCopy(gs)
			if err != nil {
				return nil, err
			}
			pruneDepth(reflect.ValueOf(cp).Elem(), nd.Schema, depth)
			data = cp
		}
		js, err := ygot.Marshal7951(data, &ygot.RFC7951JSONConfig{AppendModuleName: ietf})
		if err != nil {
			return nil, err
		}
		if string(js) == "null" || string(js) == "{}" {
			return nil, nil
		}
		tv := &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: js}}
		if ietf {
			tv.Value = &gpb.TypedValue_JsonIetfVal{JsonIetfVal: js}
		}
		return []*gpb.Update{{Path: p, Val: tv}}, nil
	}
	gs, ok := nd.Data.(ygot.GoStruct)
	if !ok {
		tv, err := ygot.EncodeTypedValue(nd.Data, gpb.Encoding_PROTO)
		if err != nil || tv == nil {
			return nil, err
		}
		return []*gpb.Update{{Path: p, Val: tv}}, nil
	}
	ns, err := ygot.TogNMINotifications(gs, ts, ygot.GNMINotificationsConfig{UsePathElem: true, PathElemPrefix: p.Elem})
	if err != nil {
		return nil, err
	}
	var out []*gpb.Update
	for _, n := range ns {
		pre := n.GetPrefix().GetElem()
		for _, u := range n.GetUpdate() {
			full := make([]*gpb.PathElem, 0, len(pre)+len(u.GetPath().GetElem()))
			full = append(full, pre...)
			full = append(full, u.GetPath().GetElem()...)
			if depth > 0 && len(full)-len(p.Elem) > depth {
				continue
			}
			out = append(out, &gpb.Update{Path: &gpb.Path{Elem: full}, Val: u.GetVal()})
		}
	}
	return out, nil
}

// pruneDepth removes from struct v (schema e) every leaf more than depth
// levels below it: a container or list entry is a level, its leaves the
// next; what is left empty goes too. It reports whether v keeps data.
func pruneDepth(v reflect.Value, e *yang.Entry, depth int) bool {
	has := false
	for _, f := range fieldsOf(v.Type(), e) {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			if depth < 2 || !pruneDepth(fv.Elem(), f.entry, depth-1) {
				fv.Set(reflect.Zero(fv.Type()))
				continue
			}
		case fv.Kind() == reflect.Map:
			if depth < 2 {
				fv.Set(reflect.Zero(fv.Type()))
				continue
			}
			for _, k := range fv.MapKeys() {
				if !pruneDepth(fv.MapIndex(k).Elem(), f.entry, depth-1) {
					fv.SetMapIndex(k, reflect.Value{})
				}
			}
			if fv.Len() == 0 {
				fv.Set(reflect.Zero(fv.Type()))
				continue
			}
		}
		has = true
	}
	return has
}

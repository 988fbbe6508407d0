package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/gen/yangjson"
)

// Set implements gNMI Set: deletes, then replaces, then updates, each in
// request order, on a copy of the running configuration; the result is
// validated against the schema and handed to the Applier. Only when both
// succeed is the copy made the running configuration, saved and published.
// Any failure leaves configuration, state and dataplane unchanged.
//
// Every Set is logged with who sent it and what it changes: at INFO when
// applied, at WARN with the reason when refused or failed.
func (s *Server) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	return s.logSet(ctx, req, "")
}

// OwnerSet is Set on behalf of the owner of the target's configuration
// (TargetOptions.Owner), logged with the owner as user: the same
// validation, apply, save and publish, with the same errors. It fails
// with FAILED_PRECONDITION for a target that has no owner.
func (s *Server) OwnerSet(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	t, _, err := s.targetFor(req.GetPrefix())
	if err != nil {
		return nil, err
	}
	if t.opts.Owner == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "target %s has no configuration owner; use Set", t.name)
	}
	return s.logSet(ctx, req, t.opts.Owner)
}

// logSet runs and logs a Set transaction, for a gNMI client (owner "")
// or for the owner of the target's configuration.
func (s *Server) logSet(ctx context.Context, req *gpb.SetRequest, owner string) (*gpb.SetResponse, error) {
	resp, err := s.set(ctx, req, owner)
	user, addr := identity(ctx)
	if owner != "" {
		user, addr = owner, ""
	}
	target := req.GetPrefix().GetTarget()
	if target == "" {
		if t, _, terr := s.targetFor(req.GetPrefix()); terr == nil {
			target = t.name
		}
	}
	attrs := []any{"user", user, "peer", addr, "target", target, "changes", setChanges(req)}
	if err != nil {
		st := status.Convert(err)
		s.log.Warn("Set refused", append(attrs, "code", st.Code().String(), "reason", st.Message())...)
		return nil, err
	}
	s.log.Info("Set applied", attrs...)
	return resp, nil
}

// setChanges describes what a SetRequest changes, one string per
// operation in the order applied: "delete PATH", "replace PATH = VALUE",
// "update PATH = VALUE", with JSON values summarised by their size.
func setChanges(req *gpb.SetRequest) []string {
	pre := req.GetPrefix().GetElem()
	path := func(p *gpb.Path) string {
		return orRoot(pathString(append(append([]*gpb.PathElem{}, pre...), p.GetElem()...)))
	}
	val := func(v *gpb.TypedValue) string {
		switch x := v.GetValue().(type) {
		case *gpb.TypedValue_JsonIetfVal:
			return fmt.Sprintf("JSON (%d bytes)", len(x.JsonIetfVal))
		case *gpb.TypedValue_JsonVal:
			return fmt.Sprintf("JSON (%d bytes)", len(x.JsonVal))
		case *gpb.TypedValue_StringVal:
			return strconv.Quote(x.StringVal)
		case *gpb.TypedValue_UintVal:
			return strconv.FormatUint(x.UintVal, 10)
		case *gpb.TypedValue_IntVal:
			return strconv.FormatInt(x.IntVal, 10)
		case *gpb.TypedValue_BoolVal:
			return strconv.FormatBool(x.BoolVal)
		case nil:
			return "(none)"
		}
		return fmt.Sprintf("%T", v.GetValue())
	}
	var out []string
	for _, d := range req.GetDelete() {
		out = append(out, "delete "+path(d))
	}
	for _, u := range req.GetReplace() {
		out = append(out, "replace "+path(u.GetPath())+" = "+val(u.GetVal()))
	}
	for _, u := range req.GetUpdate() {
		out = append(out, "update "+path(u.GetPath())+" = "+val(u.GetVal()))
	}
	return out
}

// set runs a Set transaction; owner is empty for a gNMI client's Set,
// which a target with an owner refuses.
func (s *Server) set(ctx context.Context, req *gpb.SetRequest, owner string) (*gpb.SetResponse, error) {
	if len(req.GetUnionReplace()) > 0 {
		return nil, status.Error(codes.Unimplemented, "union_replace is not supported")
	}
	ext, err := parseExtensions(extSet, req.GetExtension())
	if err != nil {
		return nil, err
	}
	t, echo, err := s.targetFor(req.GetPrefix())
	if err != nil {
		return nil, err
	}
	if t.readOnly {
		// Nothing in this target is configuration: the operation is not
		// supported here (gRPC UNIMPLEMENTED), whoever asks.
		return nil, status.Errorf(codes.Unimplemented, "target %s serves state only: Set is not supported", t.name)
	}
	if owner == "" && t.opts.Owner != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "the configuration of target %s is owned by %s: change it there; gNMI Set is refused", t.name, t.opts.Owner)
	}
	if err := t.lock(ctx); err != nil {
		return nil, status.FromContextError(fmt.Errorf("waiting for another Set to finish: %w", err)).Err()
	}
	defer t.unlock()
	if err := t.arbitrate(ext.arbiter); err != nil {
		return nil, err
	}
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	if echo != "" || req.GetPrefix() != nil {
		resp.Prefix = &gpb.Path{Target: echo, Origin: req.GetPrefix().GetOrigin(), Elem: req.GetPrefix().GetElem()}
	}
	nops := len(req.GetDelete()) + len(req.GetReplace()) + len(req.GetUpdate())
	armed, err := t.commitAction(ctx, ext.commit, nops)
	if err != nil || (ext.commit != nil && armed == nil) {
		return resp, err // confirm, cancel or a new rollback duration: done
	}
	if nops == 0 && armed == nil {
		return resp, nil // no change (§3.4: not an error), nothing to apply
	}

	cp, err := ygot.DeepCopy(t.running)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "copying running configuration: %v", err)
	}
	cand := cp
	for _, d := range req.GetDelete() {
		if err := s.deletePath(cand, req.GetPrefix(), d); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gpb.UpdateResult{Path: d, Op: gpb.UpdateResult_DELETE})
	}
	for _, u := range req.GetReplace() {
		if err := s.setPath(cand, req.GetPrefix(), u, true); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_REPLACE})
	}
	for _, u := range req.GetUpdate() {
		if err := s.setPath(cand, req.GetPrefix(), u, false); err != nil {
			return nil, err
		}
		resp.Response = append(resp.Response, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_UPDATE})
	}
	var before ygot.GoStruct
	var prepare func() error
	if armed != nil {
		before, prepare = t.running, func() error { return t.persistRollback(before) }
	}
	if err := t.transact(ctx, cand, prepare); err != nil {
		if armed != nil {
			t.removeRollback() // nothing was committed: nothing to roll back
		}
		return nil, err
	}
	if armed != nil {
		t.arm(armed, before)
	}
	return resp, nil
}

// transact makes cand (a changed copy of the running configuration) the
// running configuration: validated, applied, saved, published; or, on
// any failure, changes nothing. prepare, when set, runs just before the
// commit point (the save) and may refuse it. The client's deadline is
// honoured: past it, or too close to it for the answer to arrive (twice
// the last publish, at least commitMargin), nothing is committed and the
// Set fails with DEADLINE_EXCEEDED, so that a client whose deadline
// expired can count on nothing having changed. t must be locked.
func (t *target) transact(ctx context.Context, cand ygot.GoStruct, prepare func() error) error {
	if err := ctxErr(ctx, 0); err != nil {
		return err
	}
	if err := t.srv.checkCandidate(cand, t.running); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := ctxErr(ctx, 0); err != nil {
		return err
	}
	if err := t.applier.Apply(ctx, cand); err != nil {
		if cerr := ctxErr(ctx, 0); cerr != nil {
			return cerr
		}
		if t.isInvalid(err) {
			return status.Errorf(codes.InvalidArgument, "configuration refused: %s", yangText(err.Error()))
		}
		return status.Errorf(codes.Aborted, "applying configuration failed, transaction rolled back: %s", yangText(err.Error()))
	}
	undo := func(why string) {
		// Put the dataplane back to the running configuration.
		if rerr := t.applier.Apply(context.WithoutCancel(ctx), t.running); rerr != nil {
			t.log.Error("restoring the running configuration", "after", why, "err", rerr)
		}
	}
	if err := ctxErr(ctx, max(commitMargin, 2*t.lastPublish)); err != nil {
		undo("the client's deadline")
		return err
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			undo("a failed commit preparation")
			return err
		}
	}
	if t.opts.SavePath != "" {
		if err := saveConfig(t.opts.SavePath, cand); err != nil {
			undo("a failed save")
			return status.Errorf(codes.Internal, "saving configuration failed, transaction rolled back: %v", err)
		}
	}
	t.running = cand
	t.configs.Add(1)
	// Publish the new configuration with the state it produced, so no
	// Get or subscriber sees state of entries the Set removed.
	if st, err := t.applier.State(context.WithoutCancel(ctx)); err == nil {
		t.state = st
	} else {
		t.log.Warn("reading state after Set", "err", err)
	}
	start := time.Now()
	if err := t.publishLocked(true); err != nil {
		t.log.Error("publishing configuration", "err", err)
	}
	t.lastPublish = time.Since(start)
	return nil
}

// commitMargin is the least time a Set's deadline must leave at the
// commit point.
const commitMargin = 20 * time.Millisecond

// ctxErr is the status error for a request whose context is done, or
// whose deadline is less than margin away; nil otherwise.
func ctxErr(ctx context.Context, margin time.Duration) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(fmt.Errorf("nothing was changed: %w", err)).Err()
	}
	if dl, ok := ctx.Deadline(); ok && margin > 0 && time.Until(dl) < margin {
		return status.Errorf(codes.DeadlineExceeded, "nothing was changed: the deadline is %v away, too close to commit and answer in time", time.Until(dl).Round(time.Millisecond))
	}
	return nil
}

// checkCandidate completes a candidate configuration (list keys in
// their config containers) and checks it against the schema: what every
// Set and the configuration a target starts with go through. prev, when
// set, is the configuration cand was made from.
func (s *Server) checkCandidate(cand, prev ygot.GoStruct) error {
	fillConfigKeys(reflect.ValueOf(cand).Elem(), s.schema.root)
	if p := candidateError(reflect.ValueOf(cand).Elem(), s.schema.root, ""); p != "" {
		return errors.New(p)
	}
	if err := validateConfig(s.schema.root, cand, prev); err != nil {
		return fmt.Errorf("configuration is invalid: %s", yangText(err.Error()))
	}
	return nil
}

func (s *Server) deletePath(cand ygot.GoStruct, prefix, p *gpb.Path) error {
	elems, origin, err := s.schema.joinPaths(prefix, p)
	if err != nil {
		return err
	}
	rs, err := s.schema.resolve(elems, s.schema.forOrigin(origin, nil))
	if err != nil {
		return err
	}
	for _, r := range rs {
		if !isConfigEntry(r.entry) {
			return status.Errorf(codes.InvalidArgument, "delete %s: config false (state) data cannot be deleted", pathString(r.path.Elem))
		}
		targets := []*gpb.Path{r.path}
		if r.wild {
			nodes, err := ytypes.GetNode(s.schema.root, cand, r.path, &ytypes.GetHandleWildcards{}, &ytypes.GetTolerateNil{})
			if err != nil && status.Code(err) != codes.NotFound {
				return grpcError(codes.InvalidArgument, err, "delete %s", pathString(r.path.Elem))
			}
			targets = targets[:0]
			for _, n := range nodes {
				targets = append(targets, n.Path)
			}
		}
		for _, tp := range targets {
			if len(tp.GetElem()) == 0 {
				s.clearRoot(cand, origin)
				continue
			}
			if err := ytypes.DeleteNode(s.schema.root, cand, tp); err != nil && status.Code(err) != codes.NotFound {
				return grpcError(codes.InvalidArgument, err, "delete %s", pathString(tp.Elem))
			}
		}
	}
	return nil
}

func (s *Server) setPath(cand ygot.GoStruct, prefix *gpb.Path, u *gpb.Update, replace bool) error {
	op := "update"
	if replace {
		op = "replace"
	}
	elems, origin, err := s.schema.joinPaths(prefix, u.GetPath())
	if err != nil {
		return err
	}
	for _, e := range elems {
		if e.GetName() == "*" || e.GetName() == "..." {
			return status.Errorf(codes.InvalidArgument, "%s %s: wildcards are only allowed in delete", op, pathString(elems))
		}
	}
	rs, err := s.schema.resolve(elems, nil)
	if err != nil {
		return asNotFound(err) // §3.4.7: an update or replace of a path that is not valid
	}
	r := rs[0]
	if len(rs) != 1 || r.wild {
		return status.Errorf(codes.InvalidArgument, "%s %s: every list key must be given (no wildcards)", op, pathString(elems))
	}
	where := orRoot(pathString(r.path.Elem))
	if !isConfigEntry(r.entry) {
		return status.Errorf(codes.InvalidArgument, "%s %s: config false (state) data cannot be written", op, where)
	}
	var last *gpb.PathElem
	if n := len(r.path.Elem); n > 0 {
		last = r.path.Elem[n-1]
	}
	val, doc, err := s.schema.normalizedValue(r.entry, last, u.GetVal(), replace, op, where)
	if err != nil {
		return err
	}
	if replace {
		if len(r.path.Elem) == 0 {
			s.clearRoot(cand, origin)
		} else if err := ytypes.DeleteNode(s.schema.root, cand, r.path); err != nil && status.Code(err) != codes.NotFound {
			return grpcError(codes.InvalidArgument, err, "%s %s", op, where)
		}
	}
	if len(r.path.Elem) == 0 && s.schema.modules[origin] {
		// §2.7.3: a change at the root of a module's origin stays in it.
		for name := range doc.(map[string]any) {
			if m := s.schema.moduleOf[localName(name)]; m != origin {
				return status.Errorf(codes.InvalidArgument, "%s /%s: %s is in module %s, not in origin %s", op, localName(name), localName(name), m, origin)
			}
		}
	}
	if r.entry.IsDir() {
		var node any = cand
		if len(r.path.Elem) > 0 {
			if node, _, err = ytypes.GetOrCreateNode(s.schema.root, cand, r.path); err != nil {
				return status.Errorf(codes.InvalidArgument, "%s %s: %s", op, where, yangText(status.Convert(err).Message()))
			}
		}
		if err := unmarshalJSON(reflect.ValueOf(node).Elem(), r.entry, doc.(map[string]any)); err != nil {
			return status.Errorf(codes.InvalidArgument, "%s %s: %v", op, where, err)
		}
		return nil
	}
	if err := ytypes.SetNode(s.schema.root, cand, r.path, val, &ytypes.InitMissingElements{}); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s %s: %s", op, where, yangText(status.Convert(err).Message()))
	}
	return nil
}

// fillConfigKeys sets, in every list entry, the key leaves of its 'config'
// container from the entry's keys when they are missing: OpenConfig list
// keys are leafrefs to them, so an entry created by a path such as
// /int/interfaces/interface[name=eth2]/config/int-sink is complete.
func fillConfigKeys(v reflect.Value, e *yang.Entry) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		fv := v.Field(i)
		ce := e.Dir[t.Field(i).Tag.Get("path")]
		if ce == nil || fv.IsZero() {
			continue
		}
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			fillConfigKeys(fv.Elem(), ce)
		case fv.Kind() == reflect.Map:
			keys := strings.Fields(ce.Key)
			for _, k := range fv.MapKeys() {
				ent := fv.MapIndex(k).Elem()
				fillEntryKeys(ent, keys)
				fillConfigKeys(ent, ce)
			}
		}
	}
}

func fillEntryKeys(ent reflect.Value, keys []string) {
	cfg := fieldByPath(ent, "config")
	if !cfg.IsValid() || cfg.Kind() != reflect.Pointer {
		return
	}
	for _, k := range keys {
		kv := fieldByPath(ent, k)
		if !kv.IsValid() || kv.IsZero() {
			continue
		}
		if cfg.IsNil() {
			cfg.Set(reflect.New(cfg.Type().Elem()))
		}
		cv := fieldByPath(cfg.Elem(), k)
		if cv.IsValid() && cv.IsZero() && cv.Type() == kv.Type() {
			if kv.Kind() == reflect.Pointer {
				nv := reflect.New(kv.Type().Elem())
				nv.Elem().Set(kv.Elem())
				cv.Set(nv)
			} else {
				cv.Set(kv)
			}
		}
	}
}

func fieldByPath(v reflect.Value, p string) reflect.Value {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("path") == p {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// candidateError describes the first config-false node set in v (a
// configuration candidate), or list holding more than its max-elements;
// "" when there is none.
func candidateError(v reflect.Value, e *yang.Entry, at string) string {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		fv := v.Field(i)
		name := t.Field(i).Tag.Get("path")
		ce := e.Dir[name]
		if ce == nil || fv.IsZero() {
			continue
		}
		p := at + "/" + name
		if !isConfigEntry(ce) {
			return p + " is config false (state) and cannot be written"
		}
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			if r := candidateError(fv.Elem(), ce, p); r != "" {
				return r
			}
		case fv.Kind() == reflect.Map:
			if err := yangjson.CheckMaxElements(ce, fv.Len(), p); err != nil {
				return err.Error()
			}
			for _, k := range fv.MapKeys() {
				at := p
				for _, kv := range keyValues(lrStep{name: name, entry: ce, key: k}) {
					at += "[" + kv[0] + "=" + kv[1] + "]"
				}
				if r := candidateError(fv.MapIndex(k).Elem(), ce, at); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

// clearRoot empties the root of the configuration for an origin: all of
// it, or only the top-level containers of the module an origin names
// (§2.7.3: other origins keep their contents).
func (s *Server) clearRoot(cand ygot.GoStruct, origin string) {
	if !s.schema.modules[origin] {
		v := reflect.ValueOf(cand).Elem()
		v.Set(reflect.Zero(v.Type()))
		return
	}
	v := reflect.ValueOf(cand).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).Tag.Get("module") == origin {
			v.Field(i).Set(reflect.Zero(v.Field(i).Type()))
		}
	}
}

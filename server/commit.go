package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Commit confirmed (openconfig/reference rpc/gnmi/gnmi-commit-confirmed.md).
// A Set carrying a Commit extension with a commit action applies its
// changes as any Set does and arms a rollback timer (rollback_duration,
// default 10 minutes). Until a confirm with the same id, the commit is
// pending: a cancel, or the timer's expiry, puts back the configuration
// from before the commit, through the same transaction as a Set (the
// dataplane, the save file and subscribers follow); a Set without the
// extension, or another commit, is FAILED_PRECONDITION. With a save file,
// the configuration from before the commit is saved next to it (the save
// path with ".rollback" appended) before the commit is saved, and
// removed when the commit is confirmed or rolled back: a target that
// starts with that file present was stopped with a commit pending, and
// rolls it back first.

const defaultRollback = 10 * time.Minute

// pendingCommit is a commit awaiting confirmation.
type pendingCommit struct {
	id       string
	duration time.Duration
	before   ygot.GoStruct // the running configuration before the commit
	timer    *time.Timer
	deadline time.Time
}

// commitAction carries out a Commit extension's confirm, cancel or new
// rollback duration (returning nil, nil), or checks a commit action and
// returns the commit to arm once its changes are committed. Without the
// extension it only checks that no commit is pending. t must be locked.
func (t *target) commitAction(ctx context.Context, c *gnmi_ext.Commit, nops int) (*pendingCommit, error) {
	p := t.pending
	if c == nil {
		if p != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "commit %q is waiting for confirmation (it rolls back at %s): confirm or cancel it before another Set", p.id, p.deadline.Format(time.RFC3339))
		}
		return nil, nil
	}
	if c.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "the commit extension needs an id")
	}
	if _, isCommit := c.GetAction().(*gnmi_ext.Commit_Commit); !isCommit && nops > 0 {
		return nil, status.Error(codes.InvalidArgument, "a commit confirm, cancel or rollback duration Set carries no changes")
	}
	current := func() error {
		if p == nil {
			return status.Errorf(codes.FailedPrecondition, "no commit is waiting for confirmation (commit %q)", c.GetId())
		}
		if p.id != c.GetId() {
			return status.Errorf(codes.InvalidArgument, "commit %q is not the one waiting for confirmation", c.GetId())
		}
		return nil
	}
	switch a := c.GetAction().(type) {
	case *gnmi_ext.Commit_Commit:
		if p != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "commit %q is already waiting for confirmation: confirm or cancel it first", p.id)
		}
		d := defaultRollback
		if rd := a.Commit.GetRollbackDuration(); rd != nil {
			if d = rd.AsDuration(); d <= 0 {
				return nil, status.Errorf(codes.InvalidArgument, "rollback_duration %v: it must be positive", d)
			}
		}
		return &pendingCommit{id: c.GetId(), duration: d}, nil
	case *gnmi_ext.Commit_Confirm:
		if err := current(); err != nil {
			return nil, err
		}
		p.timer.Stop()
		t.pending = nil
		t.removeRollback()
		t.log.Info("commit confirmed", "commit", p.id)
		return nil, nil
	case *gnmi_ext.Commit_Cancel:
		if err := current(); err != nil {
			return nil, err
		}
		if err := t.rollback(ctx, p, "cancelled"); err != nil {
			return nil, err
		}
		return nil, nil
	case *gnmi_ext.Commit_SetRollbackDuration:
		if err := current(); err != nil {
			return nil, err
		}
		d := a.SetRollbackDuration.GetRollbackDuration().AsDuration()
		if a.SetRollbackDuration.GetRollbackDuration() == nil || d <= 0 {
			return nil, status.Error(codes.InvalidArgument, "set_rollback_duration needs a positive rollback_duration")
		}
		p.timer.Reset(d)
		p.duration, p.deadline = d, time.Now().Add(d)
		t.log.Info("commit rollback rescheduled", "commit", p.id, "in", d)
		return nil, nil
	}
	return nil, status.Error(codes.InvalidArgument, "the commit extension gives no action")
}

// arm starts p's rollback timer once its commit is committed; before is
// the configuration it rolls back to. t must be locked.
func (t *target) arm(p *pendingCommit, before ygot.GoStruct) {
	p.before = before
	p.deadline = time.Now().Add(p.duration)
	p.timer = time.AfterFunc(p.duration, func() { t.expire(p) })
	t.pending = p
	t.log.Info("commit waiting for confirmation", "commit", p.id, "rollback_in", p.duration)
}

// expire rolls back p when its timer fires, unless it was confirmed or
// cancelled meanwhile. A rollback that fails is tried again shortly:
// the commit stays pending (and its rollback file saved) until it
// succeeds or the client confirms it after all.
func (t *target) expire(p *pendingCommit) {
	if t.lock(t.srv.ctx) != nil {
		return // the server is closing: a restart rolls back
	}
	defer t.unlock()
	if t.pending != p {
		return
	}
	if err := t.rollback(t.srv.ctx, p, "not confirmed in time"); err != nil {
		t.log.Error("rolling back an unconfirmed commit; trying again", "commit", p.id, "err", err)
		p.timer.Reset(5 * time.Second)
	}
}

// rollback puts back the configuration from before commit p. t must be
// locked.
func (t *target) rollback(ctx context.Context, p *pendingCommit, why string) error {
	cp, err := ygot.DeepCopy(p.before)
	if err != nil {
		return status.Errorf(codes.Internal, "copying the configuration before commit %q: %v", p.id, err)
	}
	if err := t.transact(context.WithoutCancel(ctx), cp, nil); err != nil {
		return status.Errorf(status.Code(err), "rolling back commit %q: %s", p.id, status.Convert(err).Message())
	}
	p.timer.Stop()
	t.pending = nil
	t.removeRollback()
	t.log.Warn("commit rolled back", "commit", p.id, "why", why)
	return nil
}

func (t *target) rollbackPath() string {
	if t.opts.SavePath == "" {
		return ""
	}
	return t.opts.SavePath + ".rollback"
}

// persistRollback saves the configuration a pending commit rolls back to.
func (t *target) persistRollback(before ygot.GoStruct) error {
	if p := t.rollbackPath(); p != "" {
		if err := saveConfig(p, before); err != nil {
			return status.Errorf(codes.Internal, "saving the configuration to roll back to: %v", err)
		}
	}
	return nil
}

func (t *target) removeRollback() {
	if p := t.rollbackPath(); p != "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.log.Error("removing the rollback configuration", "path", p, "err", err)
		}
	}
}

// stopCommitTimer stops a pending commit's timer when the server closes;
// its rollback file stays, so that the next start rolls it back.
func (t *target) stopCommitTimer() {
	if t.lock(context.Background()) != nil {
		return
	}
	defer t.unlock()
	if t.pending != nil {
		t.pending.timer.Stop()
	}
}

// lock takes the target's transaction lock (Sets, rollbacks, state
// publishing), giving up when ctx ends.
func (t *target) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case t.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *target) unlock() { <-t.sem }

// startConfig is the configuration a target starts from: the one saved
// before a commit left pending at the last stop (rolled back), else the
// saved one, else the initial one.
func (t *target) startConfig() (cfg ygot.GoStruct, from string, rolledBack bool, err error) {
	for _, f := range []struct {
		path, what string
	}{{t.rollbackPath(), "configuration before a commit left unconfirmed"}, {t.opts.SavePath, "saved configuration"}} {
		if f.path == "" {
			continue
		}
		data, err := os.ReadFile(f.path)
		switch {
		case err == nil:
			if t.srv.schema.parse == nil {
				return nil, "", false, fmt.Errorf("%s %s: this model cannot be loaded from a file", f.what, f.path)
			}
			cfg, err := t.srv.schema.parse(data)
			if err != nil {
				return nil, "", false, fmt.Errorf("%s %s: %w", f.what, f.path, err)
			}
			return cfg, f.what + " " + f.path, f.path == t.rollbackPath(), nil
		case errors.Is(err, os.ErrNotExist):
		default:
			return nil, "", false, fmt.Errorf("reading %s: %w", f.what, err)
		}
	}
	if t.opts.Initial == nil || reflect.ValueOf(t.opts.Initial).IsNil() { // a typed nil root too
		return nil, "initial configuration", false, nil
	}
	return t.opts.Initial, "initial configuration", false, nil
}

// Package intdmodel serves intd's model (gen) with package server, which
// knows no model of its own: the schema, an Applier in gen.Device terms
// (what dtel's Orchestrator implements), and typed reads of a target's
// configuration and state.
package intdmodel

import (
	"context"
	"fmt"
	"sync"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/server"
)

// Schema is intd's model as the server serves it, with its modules'
// versions for Capabilities.
var Schema = sync.OnceValues(func() (*server.Schema, error) {
	ys, err := gen.Schema()
	if err != nil {
		return nil, fmt.Errorf("loading schema: %w", err)
	}
	return server.NewSchema(ys, gen.Models(), func(b []byte) (ygot.GoStruct, error) { return gen.ParseConfig(b) })
})

// New returns a server of intd's model.
func New(opts ...server.Option) (*server.Server, error) {
	sc, err := Schema()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return server.New(append([]server.Option{server.WithSchema(sc)}, opts...)...)
}

// Applier is server.Applier in intd's model (dtel's *Orchestrator
// satisfies it); the same contract holds.
type Applier interface {
	Apply(ctx context.Context, cfg *gen.Device) error
	State(ctx context.Context) (*gen.Device, error)
}

// Target serves a as a server.Applier.
func Target(a Applier) server.Applier { return target{a} }

type target struct{ a Applier }

func (t target) Apply(ctx context.Context, cfg ygot.GoStruct) error {
	dev, ok := cfg.(*gen.Device)
	if !ok {
		return fmt.Errorf("configuration is a %T, not intd's model", cfg)
	}
	return t.a.Apply(ctx, dev)
}

func (t target) State(ctx context.Context) (ygot.GoStruct, error) {
	st, err := t.a.State(ctx)
	if st == nil || err != nil {
		return nil, err // no typed nil in the interface
	}
	return st, nil
}

// CheckConfig checks a whole configuration against intd's schema (see
// server.Schema.CheckConfig).
func CheckConfig(cfg *gen.Device) error {
	sc, err := Schema()
	if err != nil {
		return err
	}
	return sc.CheckConfig(cfg)
}

// Running returns a copy of a target's running configuration.
func Running(srv *server.Server, name string) (*gen.Device, error) {
	cfg, err := srv.Running(name)
	if err != nil {
		return nil, err
	}
	dev, ok := cfg.(*gen.Device)
	if !ok {
		return nil, fmt.Errorf("target %s does not serve intd's model", name)
	}
	return dev, nil
}

// State returns the latest state published for a target (nil before the
// first); the tree is shared and must not be modified.
func State(srv *server.Server, name string) (*gen.Device, error) {
	st, err := srv.State(name)
	if st == nil || err != nil {
		return nil, err
	}
	dev, ok := st.(*gen.Device)
	if !ok {
		return nil, fmt.Errorf("target %s does not serve intd's model", name)
	}
	return dev, nil
}

// Roles lists the INT roles a configuration enables (node config leaf
// names), none when the node is not enabled.
func Roles(cfg *gen.Device) []string {
	nc := cfg.GetInt().GetNode().GetConfig()
	if !nc.GetEnabled() {
		return nil
	}
	var roles []string
	for _, r := range []struct {
		name string
		on   bool
	}{
		{"int-endpoint", nc.GetIntEndpoint()},
		{"int-transit", nc.GetIntTransit()},
		{"postcard", nc.GetPostcard()},
		{"drop-report", nc.GetDropReport()},
		{"queue-report", nc.GetQueueReport()},
	} {
		if r.on {
			roles = append(roles, r.name)
		}
	}
	return roles
}

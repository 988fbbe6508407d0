// Package placeholder is the applier `intd run` uses until the software
// dataplane (and dtel's orchestrator over it) lands. PLACEHOLDER: it
// programs nothing. It accepts every configuration the schema accepts and
// reports state that merely echoes the configuration (every 'config'
// container copied to its 'state' twin), with no counters. Replace it in
// cmd/intd/run.go with the dtel orchestrator when the dataplane exists.
package placeholder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

// Name is the --dataplane value that selects this applier.
const Name = "placeholder"

// Applier echoes configuration as state; see the package comment.
type Applier struct {
	mu    sync.Mutex
	state *gen.Device
}

// New returns a placeholder applier.
func New() *Applier { return &Applier{state: &gen.Device{}} }

// Apply accepts cfg and computes the state echo.
func (a *Applier) Apply(ctx context.Context, cfg *gen.Device) error {
	js, err := ygot.ConstructIETFJSON(cfg, &ygot.RFC7951JSONConfig{AppendModuleName: true})
	if err != nil {
		return fmt.Errorf("placeholder: encoding configuration: %w", err)
	}
	echo, _ := configToState(js).(map[string]any)
	if echo == nil {
		echo = map[string]any{}
	}
	node := dig(echo, "intd-int:int", "node", "state")
	node["dataplane"] = Name
	data, err := json.Marshal(echo)
	if err != nil {
		return fmt.Errorf("placeholder: %w", err)
	}
	st := &gen.Device{}
	if err := gen.Unmarshal(data, st); err != nil {
		return fmt.Errorf("placeholder: building state: %w", err)
	}
	a.mu.Lock()
	a.state = st
	a.mu.Unlock()
	return nil
}

// State returns the echo of the last applied configuration.
func (a *Applier) State(ctx context.Context) (*gen.Device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, nil
}

// configToState renames every "config" member to "state", keeping list
// keys (which refer to config leaves and stay put).
func configToState(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			name := k
			if local := k[strings.IndexByte(k, ':')+1:]; local == "config" {
				name = "state"
			}
			out[name] = configToState(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = configToState(c)
		}
		return out
	}
	return v
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		c, ok := m[p].(map[string]any)
		if !ok {
			c = map[string]any{}
			m[p] = c
		}
		m = c
	}
	return m
}

package server

import (
	"fmt"

	"github.com/openconfig/ygot/ygot"
)

// State returns the latest state (config false data) published for
// target, the tree Get reads: nil before the applier's first State. The
// tree is shared and must not be modified.
func (s *Server) State(target string) (ygot.GoStruct, error) {
	s.mu.RLock()
	t := s.targets[target]
	s.mu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("no such target %q", target)
	}
	sn := t.snap.Load()
	if sn == nil {
		return nil, nil
	}
	return sn.state, nil
}

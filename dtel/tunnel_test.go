package dtel

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/sai/spec"
)

// TestTunnelDefaultsOnLimitedBackend: a dataplane that parses no tunnels
// takes the YANG defaults for the tunnel code points, but refuses an
// explicit one.
func TestTunnelDefaultsOnLimitedBackend(t *testing.T) {
	caps := testCaps()
	caps.Encaps = slices.DeleteFunc(slices.Clone(caps.Encaps), func(e spec.Encap) bool {
		return e == spec.EncapVXLANGPE || e == spec.EncapGeneve
	})
	o, b := newTest(t, saitest.WithCapabilities(caps))
	d := full(t)
	d.Int.Marking.Config.VxlanGpeNextProtocol = nil
	d.Int.Marking.Config.GeneveOptionClass = nil
	if err := o.Apply(context.Background(), d); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for _, a := range b.Snapshot() {
		if dt, ok := a.(sai.DTelAttrs); ok && (dt.VXLANGPENextProtocol != 0 || dt.GeneveOptionClass != 0) {
			t.Errorf("unsupported tunnel code points programmed: %+v", dt)
		}
	}
	d = full(t)
	d.Int.Marking.Config.GeneveOptionClass = ptrTo(uint16(0x0103))
	err := o.Apply(context.Background(), d)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("explicit geneve-option-class on a backend without Geneve: %v, want ErrInvalid", err)
	}
}

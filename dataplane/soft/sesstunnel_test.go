package soft

import (
	"context"
	"errors"
	"testing"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// TestSessionTunnelRefused: the software dataplane cannot add the
// VXLAN-GPE tunnel of an INT session with encapsulation VXLAN_GPE (no
// tunnel GSO on its sockets): configuration asking for it is refused with
// the YANG path, and nothing of it is applied.
func TestSessionTunnelRefused(t *testing.T) {
	sw, err := New(Config{Name: "s1", Ports: []PortConfig{{Name: "p1", ID: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "tunnel-address": "192.0.2.1"}},
	"int-sessions": {"int-session": [{"name": "t", "config": {"name": "t",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID"],
		"encapsulation": "VXLAN_GPE", "tunnel-destination": "192.0.2.3"}}]}}}`), dev); err != nil {
		t.Fatal(err)
	}
	err = dtel.New(sw).Apply(context.Background(), dev)
	const want = "/int/node/config/tunnel-address: INT session tunnels (VXLAN-GPE added by the source) are not supported by the dataplane"
	if !errors.Is(err, sai.ErrUnsupported) || err.Error() != want {
		t.Fatalf("Apply = %v, want %s", err, want)
	}
	n := 0
	for range sw.store.Of(sai.ObjectTypeIntSession) {
		n++
	}
	if n != 0 {
		t.Errorf("%d INT sessions applied after the refusal", n)
	}
}

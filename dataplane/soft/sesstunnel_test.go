package soft

import (
	"context"
	"errors"
	"testing"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// TestSessionTunnelRefused: a switch told that its links cannot send
// tunnel super-packets (Config.NoSessionTunnels, as the AF_PACKET
// dataplane says on a kernel whose TAP takes no UDP tunnel GSO) refuses
// a node tunnel address with the YANG path and the reason, and nothing
// of the configuration is applied.
func TestSessionTunnelRefused(t *testing.T) {
	sw, err := New(Config{Name: "s1", Ports: []PortConfig{{Name: "p1", ID: 1}}, NoSessionTunnels: "no TAP tunnel GSO"})
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
	const want = "/int/node/config/tunnel-address: INT session tunnels (VXLAN-GPE added by the source; no TAP tunnel GSO) are not supported by the dataplane"
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

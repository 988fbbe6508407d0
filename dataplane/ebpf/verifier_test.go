package ebpf

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestVerifierBudget logs how many instructions the verifier processed for
// each program, and fails when intd_egress comes near the kernel's limit of
// one million.
func TestVerifierBudget(t *testing.T) {
	needRoot(t)
	var objs intdObjects
	if err := loadIntdObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	for _, p := range []struct {
		name string
		p    *ebpf.Program
	}{{"intd_egress", objs.IntdEgress}, {"intd_ingress", objs.IntdIngress}, {"intd_gso", objs.IntdGso}, {"intd_kfree_skb", objs.IntdKfreeSkb}, {"intd_xmit", objs.IntdXmit}} {
		info, err := p.p.Info()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := info.VerifiedInstructions()
		if !ok {
			t.Skip("the kernel does not report verified instructions")
		}
		t.Logf("%s: %d instructions verified", p.name, n)
		if n > 800_000 {
			t.Errorf("%s: %d instructions verified, too close to the limit of 1000000", p.name, n)
		}
	}
}

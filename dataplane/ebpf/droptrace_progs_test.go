package ebpf

import "github.com/cilium/ebpf"

// tracers are the programs BenchmarkDropTracerOtherNS times: those that
// run for every namespace's packets.
func tracers(d *Dataplane) map[string]*ebpf.Program {
	return map[string]*ebpf.Program{"intd_kfree_skb": d.objs.IntdKfreeSkb, "intd_xmit": d.objs.IntdXmit}
}

package ebpf

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/sai"
)

// flowSet is the set of the sink's flow filter table (bpf/intd.c
// flow_key_hash, FLOW_SETS) an IPv4 TCP flow falls in.
func flowSet(src, dst string, sport, dport uint16) uint32 {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	// afold of ::ffff:a.b.c.d is the address as the program loads it.
	a := uint64(binary.LittleEndian.Uint32(s[:]))<<32 | uint64(binary.LittleEndian.Uint32(d[:]))
	b := uint64(sport)<<32 | uint64(dport)<<16 | 6
	a *= 0x9e3779b97f4a7c15
	b *= 0xbf58476d1ce4e5b9
	return uint32((a^a>>29^b)>>48) & uint32(intdLimitMAX_FLOW_SETS-1)
}

// TestFlowFilterSets: the sink's flow filter keeps the state of four flows
// of one set of its table; a fifth takes the way of the flow least
// recently seen, which is then new again (reported) at its next packet,
// while the others' states stay (their packets suppressed).
func TestFlowFilterSets(t *testing.T) {
	n := newBPFNode(t)
	n.setMTU(1500)
	setup{sink: true, dt: func(a *sai.DTelAttrs) { a.FlowReport.Interval = time.Hour }}.apply(t, n)
	const src, dst = "10.0.1.1", "10.0.2.1"
	var ports []uint16 // five flows of one set
	want := flowSet(src, dst, 1000, 80)
	for p := uint16(1000); len(ports) < 5; p++ {
		if flowSet(src, dst, p, 80) == want {
			ports = append(ports, p)
		}
	}
	frame := func(port uint16) []byte {
		return intFrame(t, tcpFrame(src, dst, port, 80, 0, []byte("x")), mdSession, 2, false)
	}
	var sent []uint16
	send := func(i int) {
		if out := n.process(t, frame(ports[i])); out == nil {
			t.Fatalf("flow %d dropped", i)
		}
		sent = append(sent, ports[i])
	}
	for _, i := range []int{0, 1, 2, 3, 0, 1, 2, 3} {
		send(i) // four new flows, then each seen again
	}
	send(4) // the fifth: takes the way of flow 0, seen least recently
	send(1) // kept
	send(0) // new again: takes the way of flow 2
	send(3) // kept
	send(2) // new again: takes the way of flow 4
	wantPorts := []uint16{ports[0], ports[1], ports[2], ports[3], ports[4], ports[0], ports[2]}
	recorderOf(n).wait(t, len(wantPorts))
	time.Sleep(100 * time.Millisecond) // a report too many would be there too
	evs := recorderOf(n).wait(t, 0)
	var got []uint16
	for _, ev := range evs {
		if ev.Kind == report.KindFlow {
			got = append(got, ev.Flow.SrcPort)
		}
	}
	if !slices.Equal(got, wantPorts) {
		t.Fatalf("reported flows (source ports) %v after packets of %v, want %v", got, sent, wantPorts)
	}
}

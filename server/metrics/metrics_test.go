package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/openconfig/ygot/ygot"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intd-project/intd/gen"
)

// states is a Source of fixed trees.
type states map[string]*gen.Device

func (s states) Targets() []string {
	var out []string
	for t := range s {
		out = append(out, t)
	}
	return out
}

func (s states) State(t string) (ygot.GoStruct, error) {
	if d, ok := s[t]; ok {
		return d, nil
	}
	return nil, errors.New("no such target")
}

func nodeState(in, drops uint64) *gen.Device {
	d := &gen.Device{}
	root := d.GetOrCreateInt()
	root.GetOrCreateNode().GetOrCreateState().GetOrCreateCounters().InPackets = ygot.Uint64(in)
	dr := root.GetOrCreateNode().GetOrCreateDrops().GetOrCreateDrop(29).GetOrCreateState()
	dr.Reason, dr.Name, dr.Packets = ygot.Uint8(29), ygot.String("ROUTING_MISS"), ygot.Uint64(drops)
	// An entry without a name keeps its key as the label.
	root.GetOrCreateNode().GetOrCreateDrops().GetOrCreateDrop(200).GetOrCreateState().Packets = ygot.Uint64(1)
	ic := root.GetOrCreateInterfaces().GetOrCreateInterface("eth1").GetOrCreateState().GetOrCreateCounters()
	ic.InPackets, ic.MBitSet = ygot.Uint64(in/2), ygot.Uint64(3)
	rs := root.GetOrCreateReportSessions().GetOrCreateReportSession("c").GetOrCreateState().GetOrCreateCounters()
	rs.Packets, rs.LastSequenceNumber = ygot.Uint64(7), ygot.Uint32(6)
	return d
}

func TestExporter(t *testing.T) {
	e, err := New(states{"n1": nodeState(100, 5)})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP intd_interface_in_packets_total YANG leaf /int/interfaces/interface/state/counters/in-packets.
# TYPE intd_interface_in_packets_total counter
intd_interface_in_packets_total{interface="eth1"} 50
# HELP intd_interface_mtu_exceeded_bit_set_total YANG leaf /int/interfaces/interface/state/counters/m-bit-set.
# TYPE intd_interface_mtu_exceeded_bit_set_total counter
intd_interface_mtu_exceeded_bit_set_total{interface="eth1"} 3
# HELP intd_node_drop_packets_total YANG leaf /int/node/drops/drop/state/packets.
# TYPE intd_node_drop_packets_total counter
intd_node_drop_packets_total{reason="200"} 1
intd_node_drop_packets_total{reason="ROUTING_MISS"} 5
# HELP intd_node_in_packets_total YANG leaf /int/node/state/counters/in-packets.
# TYPE intd_node_in_packets_total counter
intd_node_in_packets_total 100
# HELP intd_report_session_last_sequence_number YANG leaf /int/report-sessions/report-session/state/counters/last-sequence-number.
# TYPE intd_report_session_last_sequence_number gauge
intd_report_session_last_sequence_number{report_session="c"} 6
# HELP intd_report_session_packets_total YANG leaf /int/report-sessions/report-session/state/counters/packets.
# TYPE intd_report_session_packets_total counter
intd_report_session_packets_total{report_session="c"} 7
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// Two targets: a target label; a target whose state fails is an
	// error of the scrape, not a silent gap.
	e, _ = New(states{"n1": nodeState(1, 0), "n2": nodeState(2, 0)})
	want = `
# HELP intd_node_in_packets_total YANG leaf /int/node/state/counters/in-packets.
# TYPE intd_node_in_packets_total counter
intd_node_in_packets_total{target="n1"} 1
intd_node_in_packets_total{target="n2"} 2
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "intd_node_in_packets_total"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(mustNew(t, failing{}))
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "target bad") {
		t.Errorf("gather with a failing target: %v", err)
	}
}

type failing struct{}

func (failing) Targets() []string                   { return []string{"bad"} }
func (failing) State(string) (ygot.GoStruct, error) { return nil, errors.New("backend gone") }

func mustNew(t *testing.T, s Source) *Exporter {
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

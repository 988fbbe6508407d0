package dtel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/intd-project/intd/gen"
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

var allInstructions = []gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD{
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_NODE_ID,
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_LEVEL_1_INTERFACE_IDS,
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_HOP_LATENCY,
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_QUEUE_OCCUPANCY,
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_EGRESS_TIMESTAMP,
	gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_CHECKSUM_COMPLEMENT,
}

// randomConfig returns a valid configuration drawn from small pools of
// names, so that consecutive configurations share, change and drop
// objects.
func randomConfig(r *rand.Rand) *gen.Device {
	d := &gen.Device{}
	if r.IntN(12) == 0 {
		return d
	}
	in := d.GetOrCreateInt()
	nc := in.GetOrCreateNode().GetOrCreateConfig()
	nc.NodeId = ptrTo(uint32(1 + r.IntN(3)))
	nc.IntEndpoint, nc.IntTransit, nc.DropReport, nc.QueueReport = ptrTo(r.IntN(2) == 0), ptrTo(r.IntN(2) == 0), ptrTo(r.IntN(2) == 0), ptrTo(r.IntN(2) == 0)
	nc.LatencySensitivity = ptrTo(uint8(r.IntN(32)))
	if r.IntN(2) == 0 {
		c := in.GetOrCreateInterfaces().GetOrCreateInterface("eth1").GetOrCreateConfig()
		c.Name, c.IntSink = ptrTo("eth1"), ptrTo(r.IntN(2) == 0)
	}
	if r.IntN(3) == 0 {
		m := in.GetOrCreateMarking().GetOrCreateConfig()
		m.L4Marking, m.UdpPort = gen.IntdInt_L4Marking_UDP_DESTINATION_PORT, ptrTo(uint16(5000+r.IntN(2)))
	}

	var sessions []string
	for _, name := range []string{"s0", "s1", "s2"} {
		if r.IntN(3) == 0 {
			continue
		}
		sessions = append(sessions, name)
		c := in.GetOrCreateIntSessions().GetOrCreateIntSession(name).GetOrCreateConfig()
		c.Name = ptrTo(name)
		mx := r.IntN(4) == 0
		if mx {
			c.Mode = gen.IntdInt_IntMode_INT_MX
		}
		for _, inst := range allInstructions {
			if r.IntN(2) == 0 && !(mx && inst == gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_CHECKSUM_COMPLEMENT) {
				c.Instructions = append(c.Instructions, inst)
			}
		}
		c.Instructions = append(c.Instructions, allInstructions[0]) // at least one metadata field
		c.RemainingHopCount = ptrTo(uint8(1 + r.IntN(3)))
	}

	var reports []string
	for _, name := range []string{"r0", "r1", "r2"} {
		if r.IntN(3) == 0 {
			continue
		}
		reports = append(reports, name)
		rs := in.GetOrCreateReportSessions().GetOrCreateReportSession(name)
		c := rs.GetOrCreateConfig()
		c.Name, c.SourceAddress = ptrTo(name), ptrTo(pick(r, "192.0.2.1", "192.0.2.2"))
		c.Dscp = ptrTo(uint8(r.IntN(4)))
		c.TruncateSize = ptrTo(pick[uint16](r, 0, 64, 128))
		if r.IntN(4) == 0 {
			c.ReportFormat = gen.IntdInt_ReportFormat_TELEMETRY_REPORT_V0_5
		} else if r.IntN(2) == 0 {
			c.MaxReportsPerPacket, c.MaxDelay = ptrTo(uint8(4)), ptrTo(uint32(r.IntN(3)*100))
		}
		for n := 1 + r.IntN(2); n > 0; n-- {
			addr, port := pick(r, "192.0.2.100", "192.0.2.101", "192.0.2.102"), pick[uint16](r, 4000, 4001)
			cc := rs.GetOrCreateCollectors().GetOrCreateCollector(addr, port).GetOrCreateConfig()
			cc.Address, cc.Port = ptrTo(addr), ptrTo(port)
		}
	}

	for seq := uint32(10); seq <= 60; seq += 10 {
		if r.IntN(2) == 0 {
			continue
		}
		e := in.GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(seq)
		e.GetOrCreateConfig().SequenceId = ptrTo(seq)
		m := e.GetOrCreateMatch().GetOrCreateConfig()
		if p := pick(r, "", "10.0.0.0/8", "10.1.0.0/16"); p != "" {
			m.SourcePrefix = ptrTo(p)
		}
		if proto := pick[uint8](r, 0, 6, 17); proto != 0 {
			m.Protocol = ptrTo(proto)
			if r.IntN(2) == 0 {
				m.DestinationPortMin, m.DestinationPortMax = ptrTo(uint16(80)), ptrTo(pick[uint16](r, 80, 443))
			}
		}
		if r.IntN(5) == 0 {
			v := e.GetOrCreateVxlanMatch().GetOrCreateConfig()
			v.Vni = ptrTo(uint32(1 + r.IntN(2)))
		}
		a := e.GetOrCreateActions().GetOrCreateConfig()
		a.DropReport = ptrTo(r.IntN(2) == 0)
		switch r.IntN(3) {
		case 0:
			a.FlowOp = gen.IntdInt_FlowOp_NOP
		case 1:
			if len(sessions) > 0 {
				a.FlowOp, a.IntSession = gen.IntdInt_FlowOp_INT, ptrTo(pick(r, sessions...))
				a.SamplePercent = ptrTo(uint8(1 + r.IntN(100)))
				a.ReportAllPackets = ptrTo(r.IntN(2) == 0)
			}
		case 2:
			a.FlowOp = gen.IntdInt_FlowOp_POSTCARD
			if len(sessions) > 0 && r.IntN(2) == 0 {
				a.IntSession = ptrTo(pick(r, sessions...))
			}
		}
	}

	for _, k := range []gen.IntdInt_Int_QueueReports_QueueReport_Key{{Interface: "eth0", QueueId: 0}, {Interface: "eth0", QueueId: 1}, {Interface: "eth1", QueueId: 0}} {
		if r.IntN(2) == 0 {
			continue
		}
		c := in.GetOrCreateQueueReports().GetOrCreateQueueReport(k.Interface, k.QueueId).GetOrCreateConfig()
		c.Interface, c.QueueId = ptrTo(k.Interface), ptrTo(k.QueueId)
		c.LatencyThreshold = ptrTo(uint32(1000 * (1 + r.IntN(3))))
		if r.IntN(2) == 0 {
			c.LatencyResetThreshold = ptrTo(uint32(100 * r.IntN(5)))
		}
		c.TailDrop = ptrTo(r.IntN(2) == 0)
		c.BreachQuota = ptrTo(uint32(1 + r.IntN(2)))
	}

	if len(reports) > 0 {
		for t := range eventTypes {
			if r.IntN(2) == 0 {
				continue
			}
			c := in.GetOrCreateEvents().GetOrCreateEvent(t).GetOrCreateConfig()
			c.Type, c.ReportSession, c.Dscp = t, ptrTo(pick(r, reports...)), ptrTo(uint8(r.IntN(3)))
		}
	}
	return d
}

// TestRandomSequences applies long random sequences of configurations,
// some with a failure injected at a random operation, and checks after
// each Apply that the backend holds exactly what applying the
// configuration to an empty backend gives (modulo OIDs) — or, after a
// failure, exactly what it held before.
func TestRandomSequences(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x1d7d))
			o, b := newTest(t)
			ctx := context.Background()
			failures, applied := 0, 0
			for step := 0; step < 150; step++ {
				cfg := randomConfig(r)
				before := canon(b)
				if r.IntN(3) == 0 {
					b.FailAt(1+r.IntN(12), errBoom)
				}
				err := o.Apply(ctx, cfg)
				b.FailAt(0, nil)
				checkRefcounts(t, o, b)
				if err != nil {
					if !errors.Is(err, errBoom) {
						t.Fatalf("step %d: Apply: %v", step, err)
					}
					failures++
					if got := canon(b); got != before {
						t.Fatalf("step %d: failed Apply changed the backend:\n%s\n--- want\n%s", step, got, before)
					}
					continue
				}
				applied++
				fo, fb := newTest(t)
				mustApply(t, fo, cfg)
				if got, want := canon(b), canon(fb); got != want {
					t.Fatalf("step %d: backend differs from a fresh Apply:\n%s\n--- want\n%s", step, got, want)
				}
			}
			t.Logf("%d applied, %d rolled back", applied, failures)
			if failures == 0 || applied == 0 {
				t.Errorf("degenerate run: %d applied, %d rolled back", applied, failures)
			}
		})
	}
}

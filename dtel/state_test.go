package dtel

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

func TestState(t *testing.T) {
	o, b := newTest(t)
	mustApply(t, o, full(t))
	oid := o.snap.oids
	b.SetStats(sai.Stats{
		Node:         sai.Counters{InPackets: 1, OutPackets: 2, DroppedPackets: 3, IntInserted: 4, IntTransited: 5, IntStripped: 6, EBitSet: 7, MBitSet: 8, IntMalformedDrop: 9, Postcards: 10},
		Interfaces:   map[string]sai.Counters{"eth1": {InPackets: 11, OutPackets: 12, IntStripped: 13}, "eth9": {InPackets: 99}},
		Drops:        map[sai.DropReason]uint64{spec.DropIPTTLZero: 5, spec.DropTrafficManager: 2},
		Reports:      map[sai.ReportType]sai.ReportCounters{sai.ReportFlow: {Generated: 21, Suppressed: 22, Sent: 23, Dropped: 24}, sai.ReportQueue: {Sent: 31}},
		TrackedFlows: 42,
		Watchlist:    map[sai.OID]sai.WatchlistEntryStats{oid[kEntry10]: {MatchedPackets: 100, MatchedBytes: 6400, UnsampledPackets: 90}},
		IntSessions:  map[sai.OID]sai.IntSessionStats{oid[kMD5]: {PacketsInitiated: 70, NotInitiatedNoRoom: 1}},
		ReportSessions: map[sai.OID]sai.ReportSessionStats{
			oid[kCollector]: {Reports: 10, Packets: 5, Bytes: 1000, Dropped: 2, LastSequence: 4194303},
		},
		QueueReports: map[sai.OID]sai.QueueReportStats{oid[kQueue]: {Breaches: 3, Reports: 11, QuotaLeft: 1000}},
	})
	dev, err := o.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	in := dev.GetInt()
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// Node.
	ns := in.GetNode().GetState()
	check("node enabled", ns.GetEnabled(), true)
	check("node-id", ns.GetNodeId(), uint32(1))
	check("flow-state-clear-cycle", ns.GetFlowStateClearCycle(), uint16(10))
	check("postcard", *ns.Postcard, false)
	check("dataplane", ns.GetDataplane(), "saitest")
	nc := ns.GetCounters()
	check("in-packets", nc.GetInPackets(), uint64(1))
	check("dropped-packets", nc.GetDroppedPackets(), uint64(3))
	check("int-malformed-dropped", nc.GetIntMalformedDropped(), uint64(9))
	check("postcards", nc.GetPostcards(), uint64(10))
	check("drops", len(in.GetNode().GetDrops().Drop), 2)
	dr := in.GetNode().GetDrops().GetDrop(26).GetState()
	check("drop 26 name", dr.GetName(), "IP_TTL_ZERO")
	check("drop 26 packets", dr.GetPackets(), uint64(5))
	check("drop 26 reason", dr.GetReason(), uint8(26))
	fr := in.GetNode().GetReports().GetReport(gen.IntdInt_ReportType_FLOW).GetState()
	check("flow reports type", fr.GetType(), gen.IntdInt_ReportType_FLOW)
	check("flow generated", fr.GetCounters().GetGenerated(), uint64(21))
	check("flow suppressed", fr.GetCounters().GetSuppressed(), uint64(22))
	check("flow sent", fr.GetCounters().GetSent(), uint64(23))
	check("flow dropped", fr.GetCounters().GetDropped(), uint64(24))
	check("queue sent", in.GetNode().GetReports().GetReport(gen.IntdInt_ReportType_QUEUE).GetState().GetCounters().GetSent(), uint64(31))
	check("drop reports present", in.GetNode().GetReports().GetReport(gen.IntdInt_ReportType_DROP) != nil, true)

	// Marking, filter, interfaces.
	check("l4-marking", in.GetMarking().GetState().GetL4Marking(), gen.IntdInt_L4Marking_DSCP)
	check("gre", in.GetMarking().GetState().GetGreProtocolType(), uint16(34887))
	check("tracked-flows", in.GetFlowReportFilter().GetState().GetTrackedFlows(), uint64(42))
	check("report-interval", in.GetFlowReportFilter().GetState().GetReportInterval(), uint32(1000))
	e1 := in.GetInterfaces().GetInterface("eth1").GetState()
	check("eth1 int-sink", e1.GetIntSink(), true)
	check("eth1 in-packets", e1.GetCounters().GetInPackets(), uint64(11))
	check("eth1 int-stripped", e1.GetCounters().GetIntStripped(), uint64(13))
	check("eth0 int-sink", in.GetInterfaces().GetInterface("eth0").GetState().GetIntSink(), false)
	check("eth9 (counted, unconfigured)", in.GetInterfaces().GetInterface("eth9").GetState().GetCounters().GetInPackets(), uint64(99))

	// INT sessions.
	md := in.GetIntSessions().GetIntSession("md-5").GetState()
	check("md-5 name", md.GetName(), "md-5")
	check("md-5 mode", md.GetMode(), gen.IntdInt_IntMode_INT_MD)
	check("md-5 instructions", len(md.GetInstructions()), 10)
	check("md-5 bitmap", md.GetInstructionBitmap(), uint16(0xff81))
	check("md-5 initiated", md.GetCounters().GetPacketsInitiated(), uint64(70))
	check("md-5 not initiated", md.GetCounters().GetPacketsNotInitiated(), uint64(1))
	mx := in.GetIntSessions().GetIntSession("mx-probe").GetState()
	check("mx bitmap", mx.GetInstructionBitmap(), uint16(0xa000))
	check("mx ds-instruction", mx.GetDsInstruction(), uint16(0x8000))
	check("mx initiated", mx.GetCounters().GetPacketsInitiated(), uint64(0))

	// Report sessions.
	rs := in.GetReportSessions().GetReportSession("collector")
	check("collector dscp", rs.GetState().GetDscp(), uint8(46))
	check("collector vrf", rs.GetState().GetVrf(), "default")
	c := rs.GetState().GetCounters()
	check("reports", c.GetReports(), uint64(10))
	check("packets", c.GetPackets(), uint64(5))
	check("bytes", c.GetBytes(), uint64(1000))
	check("dropped", c.GetDropped(), uint64(2))
	check("last-sequence-number", c.GetLastSequenceNumber(), uint32(4194303))
	check("collector state", rs.GetCollectors().GetCollector("192.0.2.100", 32766).GetState().GetPort(), uint16(32766))
	lg := in.GetReportSessions().GetReportSession("legacy").GetState()
	check("legacy format", lg.GetReportFormat(), gen.IntdInt_ReportFormat_TELEMETRY_REPORT_V0_5)
	check("legacy truncate default", *lg.TruncateSize, uint16(128))

	// Watchlist.
	e := in.GetWatchlist().GetEntries().GetEntry(10)
	check("entry description", e.GetState().GetDescription(), "web traffic")
	check("matched packets", e.GetState().GetCounters().GetMatchedPackets(), uint64(100))
	check("matched bytes", e.GetState().GetCounters().GetMatchedBytes(), uint64(6400))
	check("unsampled packets", e.GetState().GetCounters().GetUnsampledPackets(), uint64(90))
	check("packet-interval echo", e.GetActions().GetState().GetPacketInterval(), uint32(1000))
	check("e30 default packet-interval", *in.GetWatchlist().GetEntries().GetEntry(30).GetActions().GetState().PacketInterval, uint32(0))
	check("match echo", e.GetMatch().GetState().GetSourcePrefix(), "10.0.1.0/24")
	check("actions echo", e.GetActions().GetState().GetIntSession(), "md-5")
	e20 := in.GetWatchlist().GetEntries().GetEntry(20)
	check("vxlan echo", e20.GetVxlanMatch().GetState().GetVni(), uint32(5001))
	check("e20 matched", e20.GetState().GetCounters().GetMatchedPackets(), uint64(0))
	check("e30 default sample", *in.GetWatchlist().GetEntries().GetEntry(30).GetActions().GetState().SamplePercent, uint8(100))

	// Queue reports and events.
	q := in.GetQueueReports().GetQueueReport("eth1", 0).GetState()
	check("queue breaches", q.GetCounters().GetBreaches(), uint64(3))
	check("queue reports", q.GetCounters().GetReports(), uint64(11))
	check("quota-remaining", q.GetQuotaRemaining(), uint32(1000))
	check("reset threshold", q.GetLatencyResetThreshold(), uint32(50000))
	ev := in.GetEvents().GetEvent(gen.IntdInt_DtelEventType_DROP_REPORT).GetState()
	check("event type", ev.GetType(), gen.IntdInt_DtelEventType_DROP_REPORT)
	check("event session", ev.GetReportSession(), "legacy")
	check("event dscp", ev.GetDscp(), uint8(26))

	// Metadata semantics.
	mf := func(f mdField) *gen.IntdIntMetadataSemantics_MetadataSemantics_MetadataField_State {
		return dev.GetMetadataSemantics().GetMetadataField(f).GetState()
	}
	check("fields", len(dev.GetMetadataSemantics().MetadataField), 14)
	qo := mf(fieldQueue)
	check("queue units", qo.GetUnits(), unitsCells)
	check("queue cell size", qo.GetCellSize(), uint16(80))
	check("queue timing", qo.GetPacketTiming(), gen.IntdIntMetadataSemantics_IntQueueMetadataTiming_ENQUEUE_TIME)
	check("queue in int", qo.GetSupportedInInt(), true)
	check("queue in reports", qo.GetSupportedInTelemetryReports(), true)
	bo := mf(fieldBuffer)
	check("buffer units", bo.GetUnits(), gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_SIZE_BYTES)
	check("buffer timing", bo.GetPacketTiming(), gen.IntdIntMetadataSemantics_IntQueueMetadataTiming_DEQUEUE_TIME)
	check("buffer cell size unset", bo.CellSize == nil, true)
	check("hop latency units", mf(fieldHopLatency).GetUnits(), gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIME_NANOSECONDS)
	check("ingress ts units", mf(fieldIngressTS).GetUnits(), gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIMESTAMP_POSIX_NANOSECONDS)
	check("tx util units", mf(fieldTxUtil).GetUnits(), gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UTIL_PERCENT)
	check("node-id", mf(fieldNodeID).GetNodeId(), uint32(1))
	check("node-id units", mf(fieldNodeID).GetUnits(), unitsIdentifier)
	check("checksum in int", mf(fieldChecksum).GetSupportedInInt(), true)
	check("checksum in reports", mf(fieldChecksum).GetSupportedInTelemetryReports(), false)
	check("drop reason in int", mf(fieldDropReason).GetSupportedInInt(), false)
	check("drop reason in reports", mf(fieldDropReason).GetSupportedInTelemetryReports(), true)
	check("drop reason reference", mf(fieldDropReason).GetDropReasonReference(), "/drop-reasons")
	check("flow id supported", mf(fieldFlowID).GetSupportedInInt(), false)
	check("flow id size", mf(fieldFlowID).GetSize(), uint8(1))
	check("last hop", dev.GetReportProperties().GetIntLastHopReportProperties().GetState().GetIntLastHopMetadataReport(),
		gen.IntdIntMetadataSemantics_IntLastHopMetadataReportPosition_EMBEDDED_INT)
	dom := dev.GetDomainSpecificMetadata().GetDomain(4660)
	check("domain", dom.GetState().GetDomainSpecificId(), uint16(4660))
	f0 := dom.GetFields().GetField(0).GetState()
	check("ds field id", f0.GetDomainSpecificMetadataFieldId(), gen.IntdIntMetadataSemantics_METADATA_DOMAIN_SPECIFIC_FIELD_METADATA_FIELD_FLOW_ID)
	check("ds field mode", f0.GetDsInstructionMode(), gen.IntdIntMetadataSemantics_IntDsInstructionMode_SOURCE_INSERTED)
	check("ds field size", f0.GetSize(), uint8(2))
	check("ds field 1 requirement default", dom.GetFields().GetField(1).GetState().GetSourceInsertedReportingRequirement(),
		gen.IntdIntMetadataSemantics_IntSourceInsertedReportingRequirement_ALL_NODES)
	check("drop reasons", len(dev.GetDropReasons().DropReason), len(spec.DropReasons()))
	d71 := dev.GetDropReasons().GetDropReason(71).GetState()
	check("drop reason 71", d71.GetName(), "TRAFFIC_MANAGER")
	check("drop reason 71 description", d71.GetDescription() != "", true)

	// Only config-false data.
	if in.GetNode().GetConfig() != nil || in.GetIntSessions().GetIntSession("md-5").GetConfig() != nil ||
		e.GetMatch().GetConfig() != nil || dev.GetMetadataSemantics().GetMetadataField(fieldQueue).GetConfig() != nil {
		t.Error("State returned config containers")
	}
	// The server can serialize it.
	if _, err := ygot.EmitJSON(dev, &ygot.EmitJSONConfig{Format: ygot.RFC7951, SkipValidation: true}); err != nil {
		t.Errorf("EmitJSON: %v", err)
	}

	// After removing everything, only node-level and metadata state is left.
	mustApply(t, o, &gen.Device{})
	b.SetStats(sai.Stats{})
	dev, err = o.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if dev.GetInt().GetIntSessions() != nil || dev.GetInt().GetNode().GetState().Enabled != nil {
		t.Errorf("State echoes removed configuration")
	}
	check("dataplane without config", dev.GetInt().GetNode().GetState().GetDataplane(), "saitest")
	check("metadata without config", len(dev.GetMetadataSemantics().MetadataField), 14)
}

// TestConcurrentStateAndRun: State and Run while Apply changes the backend.
func TestConcurrentStateAndRun(t *testing.T) {
	o, _ := newTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	published := make(chan *gen.Device, 100)
	wg.Go(func() {
		o.Run(ctx, time.Millisecond, func(d *gen.Device) {
			select {
			case published <- d:
			default:
			}
		})
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := o.State(ctx); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}
	})
	cfgs := []*gen.Device{full(t), multiChange(t), {}}
	for i := 0; i < 30; i++ {
		mustApply(t, o, cfgs[i%len(cfgs)])
	}
	<-published
	cancel()
	wg.Wait()
}

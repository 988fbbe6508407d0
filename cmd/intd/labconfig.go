package main

import (
	"fmt"
	"net/netip"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/gen"
)

// labSession is the INT session of the lab's configuration; the README's
// gnmic examples address it.
const labSession = "md"

// labReportSession is the report session towards the collector.
const labReportSession = "collector"

// labConfig builds the YANG configuration `intd lab` applies to switch
// name (index i in topology order), the same INT setup as the lab's own
// direct sai configuration: DSCP marking, an INT-MD session with node id,
// level-1 ports, hop latency and queue occupancy, sink on host-facing
// ports, INT source through watchlist entries on those ports' ingress,
// queue reports on fabric ports, and flow, drop and queue events to the
// collector (none when collector is invalid). TestLabConfigEqualsLab
// checks that dtel turns it into the objects lab.ConfigureSwitch creates.
func labConfig(l *lab.Lab, name string, i int, collector netip.AddrPort) (*gen.Device, error) {
	d := &gen.Device{}
	root := d.GetOrCreateInt()
	nc := root.GetOrCreateNode().GetOrCreateConfig()
	nc.Enabled = ygot.Bool(true)
	nc.NodeId = ygot.Uint32(l.NodeID(name))
	nc.IntEndpoint, nc.IntTransit = ygot.Bool(true), ygot.Bool(true)
	nc.DropReport, nc.QueueReport = ygot.Bool(true), ygot.Bool(true)
	nc.LatencySensitivity = ygot.Uint8(8)

	mc := root.GetOrCreateMarking().GetOrCreateConfig()
	mc.L4Marking = gen.IntdInt_L4Marking_DSCP
	mc.DscpValue, mc.DscpMask = ygot.Uint8(lab.DSCPValue), ygot.Uint8(lab.DSCPMask)

	fc := root.GetOrCreateFlowReportFilter().GetOrCreateConfig()
	fc.ReportInterval = ygot.Uint32(1000) // ms
	fc.HopLatencyThreshold = ygot.Uint32(uint32(lab.HopLatencyChange.Nanoseconds()))
	fc.LatencyFilterMode = gen.IntdInt_Int_FlowReportFilter_Config_LatencyFilterMode_adaptive
	fc.ReportOnPathChange, fc.ReportOnPortChange, fc.ReportOnQueueChange = ygot.Bool(true), ygot.Bool(true), ygot.Bool(true)

	if collector.IsValid() {
		src := lab.ReportSource(i)
		if collector.Addr().Is6() {
			src = netip.IPv6Loopback()
		}
		rs := root.GetOrCreateReportSessions().GetOrCreateReportSession(labReportSession)
		rc := rs.GetOrCreateConfig()
		rc.Name = ygot.String(labReportSession)
		rc.SourceAddress = ygot.String(src.String())
		rc.ReportFormat = gen.IntdInt_ReportFormat_TELEMETRY_REPORT_V2_0
		rc.TruncateSize = ygot.Uint16(lab.ReportTruncateSize)
		addr := collector.Addr().Unmap().String()
		cc := rs.GetOrCreateCollectors().GetOrCreateCollector(addr, collector.Port()).GetOrCreateConfig()
		cc.Address, cc.Port = ygot.String(addr), ygot.Uint16(collector.Port())
		for _, et := range []gen.E_IntdInt_DtelEventType{gen.IntdInt_DtelEventType_FLOW_STATE,
			gen.IntdInt_DtelEventType_DROP_REPORT, gen.IntdInt_DtelEventType_QUEUE_REPORT_THRESHOLD_BREACH,
			gen.IntdInt_DtelEventType_QUEUE_REPORT_TAIL_DROP} {
			ec := root.GetOrCreateEvents().GetOrCreateEvent(et).GetOrCreateConfig()
			ec.Type, ec.ReportSession = et, ygot.String(labReportSession)
		}
	}

	for _, p := range l.FabricPorts(name) {
		qc := root.GetOrCreateQueueReports().GetOrCreateQueueReport(p, 0).GetOrCreateConfig()
		qc.Interface, qc.QueueId = ygot.String(p), ygot.Uint8(0)
		qc.LatencyThreshold = ygot.Uint32(uint32(lab.QueueLatencyThreshold.Nanoseconds()))
		qc.BreachQuota = ygot.Uint32(1024)
		qc.TailDrop = ygot.Bool(true)
		qc.RateLimit = ygot.Uint32(lab.QueueReportRateLimit)
	}

	if hp := l.HostPorts(name); len(hp) > 0 {
		labSource(root, hp)
	}
	if err := d.ΛValidate(); err != nil {
		return nil, fmt.Errorf("lab configuration of %s: %w", name, err)
	}
	return d, nil
}

// labSource makes hostPorts INT sinks and, through watchlist entries on
// their ingress, INT sources with session labSession.
func labSource(root *gen.IntdInt_Int, hostPorts []string) {
	sc := root.GetOrCreateIntSessions().GetOrCreateIntSession(labSession).GetOrCreateConfig()
	sc.Name = ygot.String(labSession)
	sc.Mode = gen.IntdInt_IntMode_INT_MD
	sc.Instructions = []gen.E_IntdIntMetadataSemantics_METADATA_BASELINE_FIELD{
		gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_NODE_ID,
		gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_LEVEL_1_INTERFACE_IDS,
		gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_HOP_LATENCY,
		gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_QUEUE_OCCUPANCY,
		gen.IntdIntMetadataSemantics_METADATA_BASELINE_FIELD_METADATA_FIELD_EGRESS_TIMESTAMP,
	}
	sc.RemainingHopCount = ygot.Uint8(lab.DefaultSession().MaxHopCount)
	for j, p := range hostPorts {
		ic := root.GetOrCreateInterfaces().GetOrCreateInterface(p).GetOrCreateConfig()
		ic.Name, ic.IntSink = ygot.String(p), ygot.Bool(true)

		seq := uint32(10 * (j + 1))
		e := root.GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(seq)
		e.GetOrCreateConfig().SequenceId = ygot.Uint32(seq)
		e.GetOrCreateConfig().Description = ygot.String(fmt.Sprintf("INT source for traffic from the host on %s", p))
		e.GetOrCreateMatch().GetOrCreateConfig().IngressInterface = ygot.String(p)
		ac := e.GetOrCreateActions().GetOrCreateConfig()
		ac.FlowOp = gen.IntdInt_FlowOp_INT
		ac.IntSession = ygot.String(labSession)
		ac.SamplePercent = ygot.Uint8(100)
		ac.DropReport, ac.TailDropReport = ygot.Bool(true), ygot.Bool(true)
	}
}

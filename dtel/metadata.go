package dtel

import (
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// Short names for the generated identities.
type (
	mdField  = gen.E_IntdIntMetadataSemantics_METADATA_FIELD
	mdUnits  = gen.E_IntdIntMetadataSemantics_METADATA_UNITS
	mdTiming = gen.E_IntdIntMetadataSemantics_IntQueueMetadataTiming
)

const (
	fieldNodeID       = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_NODE_ID
	fieldL1Interfaces = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_LEVEL_1_INTERFACE_IDS
	fieldHopLatency   = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_HOP_LATENCY
	fieldQueue        = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_QUEUE_OCCUPANCY
	fieldIngressTS    = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_INGRESS_TIMESTAMP
	fieldEgressTS     = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_EGRESS_TIMESTAMP
	fieldL2Interfaces = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_LEVEL_2_INTERFACE_IDS
	fieldTxUtil       = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_EGRESS_PORT_TX_UTILIZATION
	fieldBuffer       = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_BUFFER_OCCUPANCY
	fieldChecksum     = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_CHECKSUM_COMPLEMENT
	fieldDropReason   = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_DROP_REASON
	fieldFlowID       = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_FLOW_ID
	fieldSeqNo        = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_SEQUENCE_NUMBER
	fieldSourceMAC    = gen.IntdIntMetadataSemantics_METADATA_FIELD_METADATA_FIELD_SOURCE_MAC_ADDRESS

	unitsIdentifier = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UNITS_IDENTIFIER
	unitsInteger    = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UNITS_INTEGER
	unitsCells      = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_SIZE_CELLS
)

// fieldSemantics is what the backend produces for one metadata field.
type fieldSemantics struct {
	units     mdUnits // 0: the backend does not produce the field
	cellSize  uint16
	timing    mdTiming
	inInt     bool
	inReports bool
}

// metadataFields lists every concrete metadata field, in state order.
var metadataFields = []mdField{
	fieldNodeID, fieldL1Interfaces, fieldHopLatency, fieldQueue, fieldIngressTS,
	fieldEgressTS, fieldL2Interfaces, fieldTxUtil, fieldBuffer, fieldChecksum,
	fieldDropReason, fieldFlowID, fieldSeqNo, fieldSourceMAC,
}

func timeUnits(u sai.TimeUnit) mdUnits {
	switch u {
	case sai.TimeNanoseconds:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIME_NANOSECONDS
	case sai.TimeMicroseconds:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIME_MICROSECONDS
	case sai.TimeFractionalSeconds:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIME_FRACTIONAL_SECONDS
	case sai.TimestampPOSIXNanoseconds:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIMESTAMP_POSIX_NANOSECONDS
	case sai.TimestampPTP:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIMESTAMP_PTP
	case sai.TimestampNTP:
		return gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_TIMESTAMP_NTP
	}
	return 0
}

func occupancy(o sai.OccupancySemantics) fieldSemantics {
	var s fieldSemantics
	switch o.Unit {
	case sai.SizeBytes:
		s.units = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_SIZE_BYTES
	case sai.SizeCells:
		s.units = unitsCells
		s.cellSize = o.CellSize
	case sai.SizePackets:
		s.units = gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_SIZE_PACKETS
	}
	switch o.Timing {
	case sai.QueueTimingEnqueue:
		s.timing = gen.IntdIntMetadataSemantics_IntQueueMetadataTiming_ENQUEUE_TIME
	case sai.QueueTimingDequeue:
		s.timing = gen.IntdIntMetadataSemantics_IntQueueMetadataTiming_DEQUEUE_TIME
	}
	return s
}

// semantics derives the metadata semantics of a backend from its
// capabilities. Domain-specific fields are carried but never produced by
// intd, so they are reported as unsupported.
func semantics(c sai.Capabilities) map[mdField]fieldSemantics {
	m := map[mdField]fieldSemantics{
		fieldNodeID:       {units: unitsIdentifier},
		fieldL1Interfaces: {units: unitsIdentifier},
		fieldL2Interfaces: {units: unitsIdentifier},
		fieldHopLatency:   {units: timeUnits(c.HopLatency)},
		fieldIngressTS:    {units: timeUnits(c.IngressTimestamp)},
		fieldEgressTS:     {units: timeUnits(c.EgressTimestamp)},
		fieldQueue:        occupancy(c.QueueOccupancy),
		fieldBuffer:       occupancy(c.BufferOccupancy),
		fieldChecksum:     {units: unitsInteger},
		fieldDropReason:   {units: unitsIdentifier, inReports: c.DropReport},
		fieldFlowID:       {units: unitsIdentifier},
		fieldSeqNo:        {units: unitsInteger},
		fieldSourceMAC:    {units: unitsIdentifier},
	}
	switch c.TxUtilization {
	case sai.UtilPercent:
		m[fieldTxUtil] = fieldSemantics{units: gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UTIL_PERCENT}
	case sai.UtilTenthsOfPercent:
		m[fieldTxUtil] = fieldSemantics{units: gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UTIL_TENTHS_OF_PERCENT}
	case sai.UtilHundredthsOfPercent:
		m[fieldTxUtil] = fieldSemantics{units: gen.IntdIntMetadataSemantics_METADATA_UNITS_METADATA_UTIL_HUNDREDTHS_OF_PERCENT}
	}
	for f, bit := range fieldInstruction {
		s := m[f]
		if s.units != 0 {
			s.inInt = c.Instructions&bit != 0 && len(c.Modes) > 0
			s.inReports = c.ReportMetadata&bit != 0 && len(c.ReportFormats) > 0
		}
		m[f] = s
	}
	return m
}

func lastHop(r sai.LastHopReport) gen.E_IntdIntMetadataSemantics_IntLastHopMetadataReportPosition {
	switch r {
	case sai.LastHopEmbeddedInt:
		return gen.IntdIntMetadataSemantics_IntLastHopMetadataReportPosition_EMBEDDED_INT
	case sai.LastHopSameReport:
		return gen.IntdIntMetadataSemantics_IntLastHopMetadataReportPosition_SAME_TELEMETRY_REPORT
	case sai.LastHopSeparateReport:
		return gen.IntdIntMetadataSemantics_IntLastHopMetadataReportPosition_SEPARATE_TELEMETRY_REPORT
	}
	return 0
}

func metadataFieldPath(f mdField) string {
	return "/metadata-semantics/metadata-field[metadata-field-id=" + enumName(f) + "]"
}

// checkMetadataSemantics rejects metadata semantics the backend does not
// implement: the configuration states what collectors may assume, so it
// must match what the dataplane produces.
func (o *Orchestrator) checkMetadataSemantics(cfg *gen.Device) error {
	sem := semantics(o.caps)
	var fields map[mdField]*gen.IntdIntMetadataSemantics_MetadataSemantics_MetadataField
	if cfg.MetadataSemantics != nil {
		fields = cfg.MetadataSemantics.MetadataField
	}
	for _, f := range sortedKeys(fields) {
		c := fields[f].GetConfig()
		if c == nil {
			c = &gen.IntdIntMetadataSemantics_MetadataSemantics_MetadataField_Config{}
		}
		p := metadataFieldPath(f)
		s, ok := sem[f]
		if !ok {
			return invalidf(p, "%s is not a metadata field", enumName(f))
		}
		if c.GetUnits() != 0 && c.GetUnits() != s.units {
			if s.units == 0 {
				return invalidf(p+"/config/units", "the dataplane does not produce %s", enumName(f))
			}
			return invalidf(p+"/config/units", "the dataplane encodes %s in %s, not %s", enumName(f), enumName(s.units), enumName(c.GetUnits()))
		}
		if c.CellSize != nil && (s.units != unitsCells || s.cellSize != c.GetCellSize()) {
			if s.units != unitsCells {
				return invalidf(p+"/config/cell-size", "the dataplane does not encode %s in cells", enumName(f))
			}
			return invalidf(p+"/config/cell-size", "the dataplane's cells are %d bytes, not %d", s.cellSize, c.GetCellSize())
		}
		if c.GetPacketTiming() != 0 && c.GetPacketTiming() != s.timing {
			if s.timing == 0 {
				return invalidf(p+"/config/packet-timing", "%s has no packet timing", enumName(f))
			}
			return invalidf(p+"/config/packet-timing", "the dataplane samples %s at %s, not %s", enumName(f), enumName(s.timing), enumName(c.GetPacketTiming()))
		}
		if c.NodeId != nil {
			nc := cfg.GetInt().GetNode().GetConfig()
			if f != fieldNodeID {
				return invalidf(p+"/config/node-id", "node-id only applies to METADATA_FIELD_NODE_ID")
			}
			if nc.NodeId == nil || nc.GetNodeId() != c.GetNodeId() {
				return invalidf(p+"/config/node-id", "node-id %d differs from /int/node/config/node-id", c.GetNodeId())
			}
		}
	}
	lh := cfg.GetReportProperties().GetIntLastHopReportProperties().GetConfig().GetIntLastHopMetadataReport()
	if want := lastHop(o.caps.LastHopReport); lh != 0 && want == 0 {
		return invalidf("/report-properties/int-last-hop-report-properties/config/int-last-hop-metadata-report",
			"the dataplane does not say where its last hop reports its metadata")
	} else if lh != 0 && lh != want {
		return invalidf("/report-properties/int-last-hop-report-properties/config/int-last-hop-metadata-report",
			"the dataplane's last hop reports its metadata as %s, not %s", enumName(want), enumName(lh))
	}
	return nil
}

package sai

// EventType mirrors sai_dtel_event_type_t. The zero value is invalid.
type EventType uint8

const (
	EventFlowState                  EventType = iota + 1 // SAI_DTEL_EVENT_TYPE_FLOW_STATE: new flow or flow change
	EventFlowReportAllPackets                            // SAI_DTEL_EVENT_TYPE_FLOW_REPORT_ALL_PACKETS
	EventFlowTCPFlag                                     // SAI_DTEL_EVENT_TYPE_FLOW_TCPFLAG: SYN/FIN/RST seen
	EventQueueReportThresholdBreach                      // SAI_DTEL_EVENT_TYPE_QUEUE_REPORT_THRESHOLD_BREACH
	EventQueueReportTailDrop                             // SAI_DTEL_EVENT_TYPE_QUEUE_REPORT_TAIL_DROP
	EventDropReport                                      // SAI_DTEL_EVENT_TYPE_DROP_REPORT
	numEventTypes
)

var eventTypeNames = [numEventTypes]string{
	EventFlowState:                  "FLOW_STATE",
	EventFlowReportAllPackets:       "FLOW_REPORT_ALL_PACKETS",
	EventFlowTCPFlag:                "FLOW_TCPFLAG",
	EventQueueReportThresholdBreach: "QUEUE_REPORT_THRESHOLD_BREACH",
	EventQueueReportTailDrop:        "QUEUE_REPORT_TAIL_DROP",
	EventDropReport:                 "DROP_REPORT",
}

// String returns the SAI suffix, e.g. "FLOW_STATE".
func (e EventType) String() string {
	if e > 0 && e < numEventTypes {
		return eventTypeNames[e]
	}
	return "EventType(" + itoa(int(e)) + ")"
}

// EventTypes lists all valid event types.
func EventTypes() []EventType {
	out := make([]EventType, 0, numEventTypes-1)
	for e := EventType(1); e < numEventTypes; e++ {
		out = append(out, e)
	}
	return out
}

// EventAttrs mirrors SAI_OBJECT_TYPE_DTEL_EVENT (sai_dtel_event_attr_t):
// which report session a kind of event is reported through. Type is
// CREATE_ONLY; a backend holds at most one event per type.
type EventAttrs struct {
	Type EventType // SAI_DTEL_EVENT_ATTR_TYPE
	// ReportSession (SAI_DTEL_EVENT_ATTR_REPORT_SESSION) must name a live
	// report session.
	ReportSession OID
	DSCP          uint8 // SAI_DTEL_EVENT_ATTR_DSCP_VALUE of these reports
}

// ObjectType implements Attrs.
func (EventAttrs) ObjectType() ObjectType { return ObjectTypeEvent }

// References implements Attrs.
func (a EventAttrs) References() []OID {
	if a.ReportSession.IsNull() {
		return nil
	}
	return []OID{a.ReportSession}
}

// SettableFrom implements Attrs: Type is create-only.
func (a EventAttrs) SettableFrom(old Attrs) bool {
	o, ok := old.(EventAttrs)
	return ok && o.Type == a.Type
}

// Validate implements Attrs.
func (a EventAttrs) Validate() error {
	const t = ObjectTypeEvent
	switch {
	case a.Type == 0 || a.Type >= numEventTypes:
		return invalid(t, "Type", "event type %d is invalid", a.Type)
	case a.ReportSession.IsNull():
		return invalid(t, "ReportSession", "%v event: report session is required", a.Type)
	case a.ReportSession.Type() != ObjectTypeReportSession:
		return invalid(t, "ReportSession", "%v event: report session %v is not a report session", a.Type, a.ReportSession)
	case a.DSCP > MaxDSCP:
		return invalid(t, "DSCP", "%v event: DSCP %d exceeds %d", a.Type, a.DSCP, MaxDSCP)
	}
	return nil
}

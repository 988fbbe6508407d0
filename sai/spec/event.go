package spec

import "strconv"

// EventType is a DTel event type (sai_dtel_event_type_t). The zero value is
// invalid.
type EventType uint8

// Event types; their metadata is in EventTypeTable.
const (
	EventFlowState EventType = iota + 1
	EventFlowReportAllPackets
	EventFlowTCPFlag
	EventQueueReportThresholdBreach
	EventQueueReportTailDrop
	EventDropReport
	NumEventTypes // one past the last event type
)

// EventTypeInfo describes one event type.
type EventTypeInfo struct {
	Type EventType
	// Name is the SAI suffix, also the enum value of intd-int's
	// dtel-event-type, e.g. "FLOW_STATE".
	Name string
	SAI  string // sai_dtel_event_type_t value
	Doc  string
}

// EventTypeTable lists the event types in numeric order.
var EventTypeTable = [...]EventTypeInfo{
	{EventFlowState, "FLOW_STATE", "SAI_DTEL_EVENT_TYPE_FLOW_STATE", "new flow or flow change (smart-filtered flow reports)"},
	{EventFlowReportAllPackets, "FLOW_REPORT_ALL_PACKETS", "SAI_DTEL_EVENT_TYPE_FLOW_REPORT_ALL_PACKETS", "watchlist report-all-packets: every packet of the flow"},
	{EventFlowTCPFlag, "FLOW_TCPFLAG", "SAI_DTEL_EVENT_TYPE_FLOW_TCPFLAG", "a TCP SYN, FIN or RST of a tracked flow"},
	{EventQueueReportThresholdBreach, "QUEUE_REPORT_THRESHOLD_BREACH", "SAI_DTEL_EVENT_TYPE_QUEUE_REPORT_THRESHOLD_BREACH", "queue congestion reports"},
	{EventQueueReportTailDrop, "QUEUE_REPORT_TAIL_DROP", "SAI_DTEL_EVENT_TYPE_QUEUE_REPORT_TAIL_DROP", "tail drops at a queue with tail-drop reporting"},
	{EventDropReport, "DROP_REPORT", "SAI_DTEL_EVENT_TYPE_DROP_REPORT", "drop reports of watched packets"},
}

// String returns the SAI suffix, e.g. "FLOW_STATE".
func (e EventType) String() string {
	if e > 0 && e < NumEventTypes {
		return EventTypeTable[e-1].Name
	}
	return "EventType(" + strconv.Itoa(int(e)) + ")"
}

// Valid reports whether e is a defined event type.
func (e EventType) Valid() bool { return e > 0 && e < NumEventTypes }

// EventTypes lists all valid event types.
func EventTypes() []EventType {
	out := make([]EventType, 0, len(EventTypeTable))
	for _, r := range EventTypeTable {
		out = append(out, r.Type)
	}
	return out
}

package sai

import "github.com/intd-project/intd/sai/spec"

// EventType mirrors sai_dtel_event_type_t; the types are
// spec.EventTypeTable. The zero value is invalid.
type EventType = spec.EventType

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
	case !a.Type.Valid():
		return invalid(t, AttrEventType, "event type %d is invalid", a.Type)
	case a.ReportSession.IsNull():
		return invalid(t, AttrEventReportSession, "%v event: report session is required", a.Type)
	case a.ReportSession.Type() != ObjectTypeReportSession:
		return invalid(t, AttrEventReportSession, "%v event: report session %v is not a report session", a.Type, a.ReportSession)
	case a.DSCP > MaxDSCP:
		return invalid(t, AttrEventDSCP, "%v event: DSCP %d exceeds %d", a.Type, a.DSCP, MaxDSCP)
	}
	return nil
}

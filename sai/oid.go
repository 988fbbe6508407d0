package sai

import (
	"fmt"
	"strings"
)

// ObjectType identifies the kind of object an [OID] names. It mirrors
// sai_object_type_t restricted to the DTel objects.
type ObjectType uint8

// Object types. The zero value is the type of [NullOID].
const (
	ObjectTypeNull           ObjectType = iota
	ObjectTypeDTel                      // SAI_OBJECT_TYPE_DTEL
	ObjectTypeIntSession                // SAI_OBJECT_TYPE_DTEL_INT_SESSION
	ObjectTypeReportSession             // SAI_OBJECT_TYPE_DTEL_REPORT_SESSION
	ObjectTypeQueueReport               // SAI_OBJECT_TYPE_DTEL_QUEUE_REPORT
	ObjectTypeEvent                     // SAI_OBJECT_TYPE_DTEL_EVENT
	ObjectTypeWatchlistEntry            // SAI_OBJECT_TYPE_ACL_ENTRY with DTel actions
	numObjectTypes
)

var objectTypeNames = [numObjectTypes]string{
	ObjectTypeNull:           "null",
	ObjectTypeDTel:           "dtel",
	ObjectTypeIntSession:     "int session",
	ObjectTypeReportSession:  "report session",
	ObjectTypeQueueReport:    "queue report",
	ObjectTypeEvent:          "event",
	ObjectTypeWatchlistEntry: "watchlist entry",
}

// String returns the human name used in error messages, e.g. "report session".
func (t ObjectType) String() string {
	if t < numObjectTypes {
		return objectTypeNames[t]
	}
	return fmt.Sprintf("object type %d", uint8(t))
}

// ObjectTypes lists every non-null object type in creation order: an object
// only references objects of an earlier type, so creating in this order and
// removing in reverse never violates referential integrity.
func ObjectTypes() []ObjectType {
	return []ObjectType{
		ObjectTypeDTel,
		ObjectTypeIntSession,
		ObjectTypeReportSession,
		ObjectTypeQueueReport,
		ObjectTypeEvent,
		ObjectTypeWatchlistEntry,
	}
}

// OID is an object id handed out by a [Backend]. The object type lives in the
// top 8 bits so that any OID, even a stale one, says what it was; the low 56
// bits are a backend-chosen index.
type OID uint64

// NullOID is SAI_NULL_OBJECT_ID: "no object".
const NullOID OID = 0

const (
	oidTypeShift = 56
	oidIndexMask = 1<<oidTypeShift - 1
)

// MakeOID builds an OID; backends use it to mint ids. index is truncated to
// 56 bits.
func MakeOID(t ObjectType, index uint64) OID {
	return OID(uint64(t)<<oidTypeShift | index&oidIndexMask)
}

// Type returns the object type encoded in o.
func (o OID) Type() ObjectType { return ObjectType(o >> oidTypeShift) }

// Index returns the backend-specific part of o.
func (o OID) Index() uint64 { return uint64(o) & oidIndexMask }

// IsNull reports whether o is [NullOID].
func (o OID) IsNull() bool { return o == NullOID }

// String formats o as "report-session:3" (or "null").
func (o OID) String() string {
	if o == NullOID {
		return "null"
	}
	return strings.ReplaceAll(o.Type().String(), " ", "-") + ":" + fmt.Sprint(o.Index())
}

// Package sai is intd's object API for data-plane telemetry: Go mirrors of
// the SAI DTel objects (saidtel.h) and of the DTel actions of SAI ACL entries
// (saiacl.h), extended with the INT v2.1 and Telemetry Report v2.0 knobs that
// SAI leaves out.
//
// The dtel orchestrator drives a [Backend] (the software or the tc/eBPF
// dataplane) through three uniform calls, Create, Set and Remove, each taking
// one strongly typed attribute value:
//
//	DTelAttrs           SAI_OBJECT_TYPE_DTEL (the switch-wide object; one per node)
//	IntSessionAttrs     SAI_OBJECT_TYPE_DTEL_INT_SESSION
//	ReportSessionAttrs  SAI_OBJECT_TYPE_DTEL_REPORT_SESSION
//	QueueReportAttrs    SAI_OBJECT_TYPE_DTEL_QUEUE_REPORT
//	EventAttrs          SAI_OBJECT_TYPE_DTEL_EVENT
//	WatchlistEntryAttrs SAI_OBJECT_TYPE_ACL_ENTRY in a DTel watchlist table
//
// One generic method set, instead of SAI's per-type functions, lets the
// orchestrator diff, order, refcount, update and roll back every object type
// with the same code; the attribute types stay concrete and the [Attrs]
// interface is sealed, so a backend's type switch is exhaustive.
//
// Every attribute type has Validate (errors are [*AttrError] naming the
// object and attribute), SettableFrom (false when a create-only attribute
// differs, so the object must be recreated) and References (the OIDs it
// points to, for ordering and refcounting).
//
// Zero values: enum types have their SAI/spec default as zero where one
// exists (Int MD mode, Telemetry Report 2.0, flow op NOP); numeric attributes
// are literal, and the Default* constructors return the spec defaults.
// The only derived default is QueueReportAttrs.ResetThreshold.
//
// Validation rejects contradictions (two INT markings, checksum complement
// in MX mode, coalescing in report format 0.5) but ignores attributes that
// are meaningless in the chosen mode (MaxHopCount in MX mode, IntUDPNPT
// without a UDP port, Coalesce.MaxDelay without coalescing), so YANG
// defaults can be copied through unconditionally.
//
// A backend keeps its objects in a [Store], which hands out OIDs and runs
// every check that does not depend on the dataplane (validity, capabilities,
// references, singletons and unique keys, limits, objects in use); the
// backend adds its own checks and programs its dataplane after each change.
// The orchestrator states no rule about an object itself: it calls Validate.
//
// Package sai imports nothing from intd; the dataplanes and dtel import it.
package sai

package sai

import "time"

// DefaultBreachQuota is SD-Fabric's per-breach report quota.
const DefaultBreachQuota = 1024

// QueueReportAttrs mirrors SAI_OBJECT_TYPE_DTEL_QUEUE_REPORT
// (sai_dtel_queue_report_attr_t): congestion reporting for one egress queue.
// When the queue breaches a threshold, packets through it are reported up to
// BreachQuota; the quota refills once latency falls below ResetThreshold.
//
// Port and Queue are CREATE_ONLY (they identify the queue, like SAI's
// QUEUE_ID); the rest is CREATE_AND_SET. A backend holds at most one queue
// report per Port+Queue.
type QueueReportAttrs struct {
	Port  string // egress interface
	Queue uint8  // queue id as reported in INT metadata

	// DepthThreshold (SAI_DTEL_QUEUE_REPORT_ATTR_DEPTH_THRESHOLD) in
	// bytes; 0 disables the depth trigger.
	DepthThreshold uint32
	// LatencyThreshold (SAI_DTEL_QUEUE_REPORT_ATTR_LATENCY_THRESHOLD);
	// 0 disables the latency trigger.
	LatencyThreshold time.Duration
	// ResetThreshold is the latency below which the quota refills; 0 means
	// LatencyThreshold/2 (SD-Fabric's default), see EffectiveResetThreshold.
	ResetThreshold time.Duration
	// BreachQuota (SAI_DTEL_QUEUE_REPORT_ATTR_BREACH_QUOTA): reports per
	// breach, at least 1. Default 1024.
	BreachQuota uint32
	// RateLimit caps the queue's congestion reports per second (one
	// second windows, across breaches); 0 is no limit.
	RateLimit uint32
	// TailDrop (SAI_DTEL_QUEUE_REPORT_ATTR_TAIL_DROP) reports packets
	// tail-dropped at this queue.
	TailDrop bool
}

// DefaultQueueReportAttrs returns a queue report for port/queue with the
// default quota and no thresholds set.
func DefaultQueueReportAttrs(port string, queue uint8) QueueReportAttrs {
	return QueueReportAttrs{Port: port, Queue: queue, BreachQuota: DefaultBreachQuota}
}

// EffectiveResetThreshold resolves the ResetThreshold default.
func (a QueueReportAttrs) EffectiveResetThreshold() time.Duration {
	if a.ResetThreshold == 0 {
		return a.LatencyThreshold / 2
	}
	return a.ResetThreshold
}

// ObjectType implements Attrs.
func (QueueReportAttrs) ObjectType() ObjectType { return ObjectTypeQueueReport }

// References implements Attrs.
func (QueueReportAttrs) References() []OID { return nil }

// SettableFrom implements Attrs: Port and Queue are create-only.
func (a QueueReportAttrs) SettableFrom(old Attrs) bool {
	o, ok := old.(QueueReportAttrs)
	return ok && o.Port == a.Port && o.Queue == a.Queue
}

// Validate implements Attrs.
func (a QueueReportAttrs) Validate() error {
	const t = ObjectTypeQueueReport
	if err := validateIfName(t, AttrQueueReportPort, -1, "port", a.Port); err != nil {
		return err
	}
	if err := validateDuration(t, AttrQueueReportLatencyThreshold, "latency threshold", a.LatencyThreshold); err != nil {
		return err
	}
	if err := validateDuration(t, AttrQueueReportResetThreshold, "reset threshold", a.ResetThreshold); err != nil {
		return err
	}
	switch {
	case a.DepthThreshold == 0 && a.LatencyThreshold == 0 && !a.TailDrop:
		return invalid(t, AttrNone, "no depth threshold, latency threshold or tail drop is set")
	case a.ResetThreshold != 0 && a.LatencyThreshold == 0:
		return invalid(t, AttrQueueReportResetThreshold, "reset threshold %v is set without a latency threshold", a.ResetThreshold)
	case a.ResetThreshold != 0 && a.ResetThreshold >= a.LatencyThreshold:
		// At or above the trigger the quota would refill while the
		// queue is still breaching.
		return invalid(t, AttrQueueReportResetThreshold, "reset threshold %v must be below latency threshold %v", a.ResetThreshold, a.LatencyThreshold)
	case a.BreachQuota == 0:
		return invalid(t, AttrQueueReportBreachQuota, "breach quota 0 would never report")
	}
	return nil
}

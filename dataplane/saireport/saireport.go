// Package saireport connects a dataplane's sai objects to the shared
// reporting pipeline (dataplane/report): it derives the pipeline's
// configuration from the DTel, report session, event and queue report
// objects, and folds the pipeline's counters back into sai statistics.
// Both dataplanes use it, so the same objects report the same way.
package saireport

import (
	"iter"
	"net/netip"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Pipeline is what a *report.Pipeline offers besides Report. A dataplane
// whose reporter implements it configures the reporter from its objects and
// reads its counters into Stats.
type Pipeline interface {
	report.Reporter
	Configure(report.Config) error
	Stats() report.Stats
}

// Config builds the pipeline configuration from the DTel object (nil when
// absent) and every live object; portID gives a port's level-1 interface
// id, the value the dataplane puts in its events' egress port.
func Config(dt *sai.DTelAttrs, objects iter.Seq2[sai.OID, sai.Attrs], portID func(name string) uint16) report.Config {
	cfg := report.Config{Filter: report.DefaultFilter(), Events: map[report.EventType]report.Route{}}
	if dt != nil {
		cfg.NodeID, cfg.HWID = dt.SwitchID, dt.HWID
		cfg.DropReports, cfg.QueueReports = dt.DropReportEnable, dt.QueueReportEnable
		f := dt.FlowReport
		cfg.Filter = report.Filter{
			Interval: f.Interval, HopLatencyChange: uint32(f.HopLatencyChange.Nanoseconds()),
			LatencySensitivity: dt.LatencySensitivity, OnPortChange: f.OnPortChange,
			OnPathChange: f.OnPathChange, OnQueueChange: f.OnQueueChange, ClearCycle: dt.FlowStateClearCycle,
			Adaptive: f.Adaptive, LatencyFactor: f.LatencyFactor, LatencyFloor: uint32(f.LatencyFloor.Nanoseconds()),
		}
		for _, v := range dt.DSValues {
			cfg.DSValues = append(cfg.DSValues, report.DSValue{DomainID: v.DomainID, Bit: v.Bit, Words: v.Words, Value: v.Value})
		}
	}
	for oid, attrs := range objects {
		switch a := attrs.(type) {
		case sai.ReportSessionAttrs:
			rs := report.Session{Name: oid.String(), Src: a.SrcIP, VRF: a.VirtualRouter,
				TruncateSize: int(a.TruncateSize), Format: a.Format,
				MaxReports: int(a.Coalesce.MaxReports), MaxDelay: a.Coalesce.MaxDelay, RateLimit: a.RateLimit, DSCP: a.DSCP,
				DistributeByFlow: a.DistributeByFlow, MTU: int(a.MTU)}
			switch a.SrcPort.Mode {
			case sai.SrcPortFixed:
				rs.SrcPort = a.SrcPort.Port
			case sai.SrcPortFlowHash:
				rs.SrcPortMin, rs.SrcPortMax = a.SrcPort.Min, a.SrcPort.Max
			}
			for i, dst := range a.Destinations {
				rs.Collectors = append(rs.Collectors, report.Collector{Addr: netip.AddrPortFrom(dst.IP, a.DstPort(i))})
			}
			cfg.Sessions = append(cfg.Sessions, rs)
		case sai.EventAttrs:
			cfg.Events[a.Type] = report.Route{Session: a.ReportSession.String(), DSCP: a.DSCP}
		case sai.QueueReportAttrs:
			cfg.Queues = append(cfg.Queues, report.QueueReport{
				Port: portID(a.Port), Queue: a.Queue,
				LatencyThreshold: nanos32(a.LatencyThreshold.Nanoseconds()),
				DepthThreshold:   a.DepthThreshold,
				ResetThreshold:   nanos32(a.ResetThreshold.Nanoseconds()),
				Quota:            a.BreachQuota, TailDrop: a.TailDrop, RateLimit: a.RateLimit,
			})
		}
	}
	return cfg
}

// CheckReportSession refuses a report session the reporter cannot send:
// a chosen UDP source port when its sender cannot choose one. A
// dataplane calls it when the session is created or set.
func CheckReportSession(r report.Reporter, a sai.ReportSessionAttrs) error {
	sp, ok := r.(report.SourcePortSender)
	if !ok || a.SrcPort.Mode == sai.SrcPortKernel {
		return nil
	}
	if err := sp.SourcePorts(!a.SrcIP.Unmap().Is4()); err != nil {
		return &sai.AttrError{Object: sai.ObjectTypeReportSession, Attr: sai.AttrReportSessionSrcPortMode, Index: -1,
			Msg: err.Error(), Err: sai.ErrUnsupported}
	}
	return nil
}

func nanos32(ns int64) uint32 { return uint32(min(ns, 1<<32-1)) }

// eventTypes groups the pipeline's event types by the sai report type they
// are counted under.
var eventTypes = map[sai.ReportType][]report.EventType{
	sai.ReportFlow:  {spec.EventFlowState, spec.EventFlowReportAllPackets, spec.EventFlowTCPFlag},
	sai.ReportDrop:  {spec.EventDropReport, spec.EventQueueReportTailDrop},
	sai.ReportQueue: {spec.EventQueueReportThresholdBreach},
}

// ReportCounters sums the pipeline's counters per sai report type.
func ReportCounters(ps report.Stats) map[sai.ReportType]sai.ReportCounters {
	out := make(map[sai.ReportType]sai.ReportCounters, len(eventTypes))
	for t, ets := range eventTypes {
		var r sai.ReportCounters
		for _, et := range ets {
			c := ps.ByType[et]
			r.Generated += c.Generated
			r.Suppressed += c.Suppressed
			r.Sent += c.Sent
			r.Dropped += c.Dropped
		}
		out[t] = r
	}
	return out
}

// SessionStats fills st.ReportSessions, for the sessions st already lists,
// from the pipeline's per-session counters.
func SessionStats(ps report.Stats, st *sai.Stats) {
	for oid := range st.ReportSessions {
		ss, ok := ps.Sessions[oid.String()]
		if !ok {
			continue
		}
		var r sai.ReportSessionStats
		for _, c := range ss.ByType {
			r.Reports += c.Sent
			r.Dropped += c.Dropped
		}
		r.Packets, r.Bytes = ss.Packets, ss.Bytes
		if len(ss.Collectors) > 0 {
			r.LastSequence = ss.Collectors[0].LastSeq
		}
		r.RateLimited, r.QueueFull, r.SendErrors, r.Truncated = ss.RateLimited, ss.QueueFull, ss.SendErrors, ss.Truncated
		r.Collectors = make(map[netip.AddrPort]sai.CollectorStats, len(ss.Collectors))
		for _, c := range ss.Collectors {
			r.Collectors[c.Addr] = sai.CollectorStats{Packets: c.Packets, Bytes: c.Bytes, LastSequence: c.LastSeq,
				QueueFull: c.QueueFull, SendErrors: c.SendErrors}
		}
		st.ReportSessions[oid] = r
	}
}

// FilterStats fills st's per-event report counters, the filters' trigger
// reasons and the number of tracked flows from the pipeline's.
func FilterStats(ps report.Stats, st *sai.Stats) {
	if st.Events == nil {
		st.Events = map[sai.EventType]sai.ReportCounters{}
	}
	for _, et := range spec.EventTypes() {
		c := ps.ByType[et]
		st.Events[et] = sai.ReportCounters{Generated: c.Generated, Suppressed: c.Suppressed, Sent: c.Sent, Dropped: c.Dropped}
	}
	f := ps.Filter
	st.FilterReasons = sai.FilterReasons{NewFlow: f.New, Interval: f.Interval, PortChange: f.Port, PathChange: f.Path,
		LatencyChange: f.Latency, QueueChange: f.Queue, DropReasonChange: f.DropCause}
	st.TrackedFlows = ps.TrackedFlows
}

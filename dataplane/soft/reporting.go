package soft

import (
	"net/netip"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/sai"
)

// ReportPipeline is what a *report.Pipeline offers besides Report. When
// the switch's reporter implements it (the pipeline itself or a wrapper),
// the switch configures it from its sai objects and reads its counters
// into Stats.
type ReportPipeline interface {
	report.Reporter
	Configure(report.Config) error
	Stats() report.Stats
}

// ReportError returns the error of the last reporting configuration, nil
// when it was accepted (or the reporter is not a *report.Pipeline).
func (s *Switch) ReportError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reportErr
}

// reportConfig translates the sai objects into a report.Config. Called
// with s.mu held.
func (s *Switch) reportConfig(d *sai.DTelAttrs) report.Config {
	cfg := report.Config{Filter: report.DefaultFilter(), Events: map[report.EventType]report.Route{}}
	if d != nil {
		cfg.NodeID = d.SwitchID
		cfg.DropReports, cfg.QueueReports = d.DropReportEnable, d.QueueReportEnable
		f := d.FlowReport
		cfg.Filter = report.Filter{
			Interval: f.Interval, HopLatencyChange: uint32(f.HopLatencyChange.Nanoseconds()),
			LatencySensitivity: d.LatencySensitivity, OnPortChange: f.OnPortChange,
			OnPathChange: f.OnPathChange, OnQueueChange: f.OnQueueChange, ClearCycle: d.FlowStateClearCycle,
		}
	}
	for oid, o := range s.objs {
		switch a := o.attrs.(type) {
		case sai.ReportSessionAttrs:
			rs := report.Session{Name: oid.String(), Src: a.SrcIP, VRF: a.VirtualRouter,
				TruncateSize: int(a.TruncateSize), Format: report.Format(a.Format),
				MaxReports: int(a.Coalesce.MaxReports), MaxDelay: a.Coalesce.MaxDelay, RateLimit: a.RateLimit}
			for i, dst := range a.Destinations {
				rs.Collectors = append(rs.Collectors, report.Collector{Addr: netip.AddrPortFrom(dst.IP, a.DstPort(i))})
			}
			cfg.Sessions = append(cfg.Sessions, rs)
		case sai.EventAttrs:
			cfg.Events[report.EventType(a.Type)] = report.Route{Session: a.ReportSession.String(), DSCP: a.DSCP}
		case sai.QueueReportAttrs:
			cfg.Queues = append(cfg.Queues, report.QueueReport{
				Port: s.ports[s.portByName[a.Port]].cfg.ID, Queue: a.Queue,
				LatencyThreshold: uint32(min(a.LatencyThreshold.Nanoseconds(), 1<<32-1)),
				DepthThreshold:   a.DepthThreshold,
				ResetThreshold:   uint32(min(a.ResetThreshold.Nanoseconds(), 1<<32-1)),
				Quota:            a.BreachQuota, TailDrop: a.TailDrop,
			})
		}
	}
	return cfg
}

// pipelineStats fills the reporting counters of st from p.
func (s *Switch) pipelineStats(p ReportPipeline, st *sai.Stats) {
	ps := p.Stats()
	sum := func(ts ...report.EventType) sai.ReportCounters {
		var r sai.ReportCounters
		for _, t := range ts {
			c := ps.ByType[t]
			r.Generated += c.Generated
			r.Suppressed += c.Suppressed
			r.Sent += c.Sent
			r.Dropped += c.Dropped
		}
		return r
	}
	st.Reports[sai.ReportFlow] = sum(report.EventFlowState, report.EventFlowReportAllPackets, report.EventFlowTCPFlag)
	st.Reports[sai.ReportDrop] = sum(report.EventDropReport, report.EventQueueReportTailDrop)
	st.Reports[sai.ReportQueue] = sum(report.EventQueueReportThresholdBreach)
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
		st.ReportSessions[oid] = r
	}
	for oid, q := range s.qrStats {
		id := s.ports[s.portByName[q.a.Port]].cfg.ID
		for _, pq := range ps.Queues {
			if pq.Port == id && pq.Queue == q.a.Queue {
				st.QueueReports[oid] = sai.QueueReportStats{Breaches: pq.Breaches, Reports: pq.Reports, QuotaLeft: pq.QuotaLeft}
			}
		}
	}
}

package soft

import (
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/saireport"
	"github.com/intd-project/intd/sai"
)

// ReportPipeline is what a *report.Pipeline offers besides Report. When
// the switch's reporter implements it (the pipeline itself or a wrapper),
// the switch configures it from its sai objects and reads its counters
// into Stats.
type ReportPipeline = saireport.Pipeline

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
	return saireport.Config(d, s.store.All(), func(name string) uint16 {
		if i, ok := s.portByName[name]; ok {
			return s.ports[i].cfg.ID
		}
		return 0
	})
}

// pipelineStats fills the reporting counters of st from p.
func (s *Switch) pipelineStats(p ReportPipeline, st *sai.Stats) {
	ps := p.Stats()
	for t, c := range saireport.ReportCounters(ps) {
		st.Reports[t] = c
	}
	saireport.SessionStats(ps, st)
	saireport.FilterStats(ps, st)
	for oid, q := range s.qrStats {
		id := s.ports[s.portByName[q.a.Port]].cfg.ID
		for _, pq := range ps.Queues {
			if pq.Port == id && pq.Queue == q.a.Queue {
				st.QueueReports[oid] = sai.QueueReportStats{Breaches: pq.Breaches, Reports: pq.Reports, QuotaLeft: pq.QuotaLeft}
			}
		}
	}
}

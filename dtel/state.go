package dtel

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// State returns a Device holding only config-false data: every state
// container echoing the applied configuration (with defaults filled in),
// the counters of the backend's Stats, the dataplane name, the metadata
// semantics derived from the backend's capabilities and the drop-reason
// codes. It may run concurrently with Apply; it reflects the last Apply that
// completed.
func (o *Orchestrator) State(ctx context.Context) (*gen.Device, error) {
	o.mu.RLock()
	s := o.snap
	o.mu.RUnlock()
	st, err := o.b.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("dtel: reading counters: %w", err)
	}
	dev := &gen.Device{}
	o.intState(dev, s, &st)
	o.metadataState(dev, s)
	return dev, nil
}

func (o *Orchestrator) intState(dev *gen.Device, s snapshot, st *sai.Stats) {
	in := s.cfg.GetInt()
	root := dev.GetOrCreateInt()

	// Node.
	node := root.GetOrCreateNode()
	ns := node.GetOrCreateState()
	if in != nil {
		copyLeaves(ns, in.GetNode().GetConfig())
		ns.PopulateDefaults()
	}
	if o.dataplane != "" {
		ns.Dataplane = ptr(o.dataplane)
	}
	c := st.Node
	ns.Counters = &gen.IntdInt_Int_Node_State_Counters{
		InPackets:             ptr(c.InPackets),
		OutPackets:            ptr(c.OutPackets),
		DroppedPackets:        ptr(c.DroppedPackets),
		IntInserted:           ptr(c.IntInserted),
		IntTransited:          ptr(c.IntTransited),
		IntStripped:           ptr(c.IntStripped),
		EBitSet:               ptr(c.EBitSet),
		MBitSet:               ptr(c.MBitSet),
		IntMalformedDropped:   ptr(c.IntMalformedDrop),
		IntMalformedForwarded: ptr(c.IntMalformedForward),
		DscpRemarked:          ptr(c.DSCPRemarked),
		Postcards:             ptr(c.Postcards),
		IntDiscarded:          ptr(c.IntDiscarded),
		EventsLost:            ptr(c.EventsLost),
		DetourLost:            ptr(c.DetourLost),
	}
	for _, r := range sortedKeys(st.Drops) {
		d := node.GetOrCreateDrops().GetOrCreateDrop(uint8(r)).GetOrCreateState()
		d.Reason, d.Name, d.Packets = ptr(uint8(r)), ptr(r.String()), ptr(st.Drops[r])
	}
	for _, rt := range []struct {
		sai sai.ReportType
		gen gen.E_IntdInt_ReportType
	}{
		{sai.ReportFlow, gen.IntdInt_ReportType_FLOW},
		{sai.ReportDrop, gen.IntdInt_ReportType_DROP},
		{sai.ReportQueue, gen.IntdInt_ReportType_QUEUE},
	} {
		rc := st.Reports[rt.sai]
		r := node.GetOrCreateReports().GetOrCreateReport(rt.gen).GetOrCreateState()
		r.Type = rt.gen
		r.Counters = &gen.IntdInt_Int_Node_Reports_Report_State_Counters{
			Generated: ptr(rc.Generated), Suppressed: ptr(rc.Suppressed), Sent: ptr(rc.Sent), Dropped: ptr(rc.Dropped),
		}
	}

	// Interfaces: the configured ones and any the dataplane counts.
	names := map[string]bool{}
	if in.GetInterfaces() != nil {
		for n := range in.GetInterfaces().Interface {
			names[n] = true
		}
	}
	for n := range st.Interfaces {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		is := root.GetOrCreateInterfaces().GetOrCreateInterface(n).GetOrCreateState()
		if in.GetInterfaces() != nil && in.GetInterfaces().Interface[n] != nil {
			copyLeaves(is, in.GetInterfaces().Interface[n].GetConfig())
			is.PopulateDefaults()
		}
		is.Name = ptr(n)
		if pi, ok := st.Ports[n]; ok {
			is.L1InterfaceId, is.L2InterfaceId = ptr(pi.L1ID), ptr(pi.L2ID)
			if pi.Ifindex != 0 {
				is.Ifindex = ptr(pi.Ifindex)
			}
		}
		c := st.Interfaces[n]
		is.Counters = &gen.IntdInt_Int_Interfaces_Interface_State_Counters{
			InPackets:             ptr(c.InPackets),
			OutPackets:            ptr(c.OutPackets),
			IntInserted:           ptr(c.IntInserted),
			IntTransited:          ptr(c.IntTransited),
			IntStripped:           ptr(c.IntStripped),
			EBitSet:               ptr(c.EBitSet),
			MBitSet:               ptr(c.MBitSet),
			IntMalformedDropped:   ptr(c.IntMalformedDrop),
			IntMalformedForwarded: ptr(c.IntMalformedForward),
			DscpRemarked:          ptr(c.DSCPRemarked),
			DroppedPackets:        ptr(c.DroppedPackets),
			Postcards:             ptr(c.Postcards),
			IntDiscarded:          ptr(c.IntDiscarded),
		}
		for id, q := range st.Queues[n] {
			qs := is.GetOrCreateQueues().GetOrCreateQueue(uint8(id)).GetOrCreateState()
			qs.Id, qs.Occupancy, qs.Delay = ptr(uint8(id)), ptr(q.Occupancy), ptr(uint64(q.Delay.Nanoseconds()))
		}
	}
	if in == nil {
		return
	}

	// Marking and flow report filter.
	ms := root.GetOrCreateMarking().GetOrCreateState()
	copyLeaves(ms, in.GetMarking().GetConfig())
	ms.PopulateDefaults()
	fs := root.GetOrCreateFlowReportFilter().GetOrCreateState()
	copyLeaves(fs, in.GetFlowReportFilter().GetConfig())
	fs.PopulateDefaults()
	fs.TrackedFlows = ptr(st.TrackedFlows)
	fr := st.FilterReasons
	fs.Counters = &gen.IntdInt_Int_FlowReportFilter_State_Counters{
		NewFlow: ptr(fr.NewFlow), Interval: ptr(fr.Interval), PortChange: ptr(fr.PortChange),
		PathChange: ptr(fr.PathChange), LatencyChange: ptr(fr.LatencyChange), QueueChange: ptr(fr.QueueChange),
		DropReasonChange: ptr(fr.DropReasonChange),
	}

	// INT sessions.
	if in.IntSessions != nil {
		for name, cfg := range in.IntSessions.IntSession {
			ss := root.GetOrCreateIntSessions().GetOrCreateIntSession(name).GetOrCreateState()
			copyLeaves(ss, cfg.GetConfig())
			ss.PopulateDefaults()
			k := key{sai.ObjectTypeIntSession, name}
			if a, ok := s.objs[k].(sai.IntSessionAttrs); ok {
				ss.InstructionBitmap = ptr(uint16(a.Instructions))
			}
			c := st.IntSessions[s.oids[k]]
			ss.Counters = &gen.IntdInt_Int_IntSessions_IntSession_State_Counters{
				PacketsInitiated:        ptr(c.PacketsInitiated),
				PacketsNotInitiated:     ptr(c.NotInitiated()),
				NotInitiatedNoRoom:      ptr(c.NotInitiatedNoRoom),
				NotInitiatedUnsupported: ptr(c.NotInitiatedUnsupported),
				NotInitiatedSampled:     ptr(c.NotInitiatedSampled),
			}
		}
	}

	// Report sessions and collectors.
	if in.ReportSessions != nil {
		for name, cfg := range in.ReportSessions.ReportSession {
			rs := root.GetOrCreateReportSessions().GetOrCreateReportSession(name)
			ss := rs.GetOrCreateState()
			copyLeaves(ss, cfg.GetConfig())
			ss.PopulateDefaults()
			c := st.ReportSessions[s.oids[key{sai.ObjectTypeReportSession, name}]]
			ss.Counters = &gen.IntdInt_Int_ReportSessions_ReportSession_State_Counters{
				Reports: ptr(c.Reports), Packets: ptr(c.Packets), Bytes: ptr(c.Bytes),
				Dropped: ptr(c.Dropped), LastSequenceNumber: ptr(c.LastSequence),
				RateLimited: ptr(c.RateLimited), QueueFull: ptr(c.QueueFull), SendErrors: ptr(c.SendErrors),
				Truncated: ptr(c.Truncated),
			}
			if cfg.Collectors != nil {
				for k, col := range cfg.Collectors.Collector {
					cs := rs.GetOrCreateCollectors().GetOrCreateCollector(k.Address, k.Port).GetOrCreateState()
					copyLeaves(cs, col.GetConfig())
					cs.Address, cs.Port = ptr(k.Address), ptr(k.Port)
					cc := c.Collectors[collectorAddr(k.Address, k.Port)]
					cs.Counters = &gen.IntdInt_Int_ReportSessions_ReportSession_Collectors_Collector_State_Counters{
						Packets: ptr(cc.Packets), Bytes: ptr(cc.Bytes), LastSequenceNumber: ptr(cc.LastSequence),
						QueueFull: ptr(cc.QueueFull), SendErrors: ptr(cc.SendErrors),
					}
				}
			}
		}
	}

	// Watchlist.
	if es := in.GetWatchlist().GetEntries(); es != nil {
		for seq, cfg := range es.Entry {
			e := root.GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(seq)
			ss := e.GetOrCreateState()
			copyLeaves(ss, cfg.GetConfig())
			ss.SequenceId = ptr(seq)
			c := st.Watchlist[s.oids[key{sai.ObjectTypeWatchlistEntry, strconv.FormatUint(uint64(seq), 10)}]]
			ss.Counters = &gen.IntdInt_Int_Watchlist_Entries_Entry_State_Counters{
				MatchedPackets: ptr(c.MatchedPackets), MatchedBytes: ptr(c.MatchedBytes),
				UnsampledPackets: ptr(c.UnsampledPackets),
			}
			if m := cfg.GetMatch().GetConfig(); m != nil {
				copyLeaves(e.GetOrCreateMatch().GetOrCreateState(), m)
			}
			if v := cfg.GetVxlanMatch().GetConfig(); v != nil {
				copyLeaves(e.GetOrCreateVxlanMatch().GetOrCreateState(), v)
			}
			as := e.GetOrCreateActions().GetOrCreateState()
			copyLeaves(as, cfg.GetActions().GetConfig())
			as.PopulateDefaults()
		}
	}

	// Queue reports.
	if in.QueueReports != nil {
		for k, cfg := range in.QueueReports.QueueReport {
			qs := root.GetOrCreateQueueReports().GetOrCreateQueueReport(k.Interface, k.QueueId).GetOrCreateState()
			copyLeaves(qs, cfg.GetConfig())
			qs.PopulateDefaults()
			qs.Interface, qs.QueueId = ptr(k.Interface), ptr(k.QueueId)
			qk := key{sai.ObjectTypeQueueReport, k.Interface + "/" + strconv.Itoa(int(k.QueueId))}
			if a, ok := s.objs[qk].(sai.QueueReportAttrs); ok && a.LatencyThreshold > 0 {
				qs.LatencyResetThreshold = ptr(uint32(a.EffectiveResetThreshold().Nanoseconds()))
			}
			c, ok := st.QueueReports[s.oids[qk]]
			qs.Counters = &gen.IntdInt_Int_QueueReports_QueueReport_State_Counters{
				Breaches: ptr(c.Breaches), Reports: ptr(c.Reports),
			}
			if ok {
				qs.QuotaRemaining = ptr(c.QuotaLeft)
			}
		}
	}

	// Events.
	if in.Events != nil {
		for t, cfg := range in.Events.Event {
			es := root.GetOrCreateEvents().GetOrCreateEvent(t).GetOrCreateState()
			copyLeaves(es, cfg.GetConfig())
			es.PopulateDefaults()
			es.Type = t
			es.Counters = &gen.IntdInt_Int_Events_Event_State_Counters{Reports: ptr(st.Events[eventTypes[t]].Sent)}
		}
	}
}

func (o *Orchestrator) metadataState(dev *gen.Device, s snapshot) {
	sem := semantics(o.caps)
	var fields map[mdField]*gen.IntdIntMetadataSemantics_MetadataSemantics_MetadataField
	if s.cfg.GetMetadataSemantics() != nil {
		fields = s.cfg.GetMetadataSemantics().MetadataField
	}
	for _, f := range metadataFields {
		fs := sem[f]
		st := dev.GetOrCreateMetadataSemantics().GetOrCreateMetadataField(f).GetOrCreateState()
		if c := fields[f].GetConfig(); c != nil {
			copyLeaves(st, c)
		}
		st.MetadataFieldId = f
		st.Units = fs.units
		st.CellSize = nil
		if fs.cellSize != 0 {
			st.CellSize = ptr(fs.cellSize)
		}
		st.PacketTiming = fs.timing
		st.SupportedInInt = ptr(fs.inInt)
		st.SupportedInTelemetryReports = ptr(fs.inReports)
		switch f {
		case fieldNodeID:
			st.NodeId = nil
			if a, ok := s.objs[key{t: sai.ObjectTypeDTel}].(sai.DTelAttrs); ok {
				st.NodeId = ptr(a.SwitchID)
			}
		case fieldDropReason:
			if st.DropReasonReference == nil && o.caps.DropReasonReference != "" {
				st.DropReasonReference = ptr(o.caps.DropReasonReference)
			}
		}
		if slices.Contains([]mdField{fieldFlowID, fieldSeqNo, fieldSourceMAC}, f) {
			st.PopulateDefaults() // size, ds-instruction-mode, ...
		}
	}
	if lh := lastHop(o.caps.LastHopReport); lh != 0 {
		dev.GetOrCreateReportProperties().GetOrCreateIntLastHopReportProperties().GetOrCreateState().IntLastHopMetadataReport = lh
	}
	if d := s.cfg.GetDomainSpecificMetadata(); d != nil {
		for id, dom := range d.Domain {
			sd := dev.GetOrCreateDomainSpecificMetadata().GetOrCreateDomain(id)
			sd.GetOrCreateState().DomainSpecificId = ptr(id)
			if dom.Fields == nil {
				continue
			}
			for pos, fld := range dom.Fields.Field {
				fs := sd.GetOrCreateFields().GetOrCreateField(pos).GetOrCreateState()
				copyLeaves(fs, fld.GetConfig())
				fs.DomainMetadataBitPosition = ptr(pos)
				fs.PopulateDefaults()
			}
		}
	}
	reasons := spec.DropReasons()
	slices.SortFunc(reasons, func(a, b sai.DropReason) int { return cmp.Compare(a, b) })
	for _, r := range reasons {
		ds := dev.GetOrCreateDropReasons().GetOrCreateDropReason(uint8(r)).GetOrCreateState()
		ds.Code, ds.Name = ptr(uint8(r)), ptr(r.String())
		if d := r.Description(); d != "" {
			ds.Description = ptr(d)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// copyLeaves copies the leaves (scalars, enums and leaf-lists) of the
// generated config struct src into the fields of the same name and type of
// the generated state struct dst, without sharing memory. Containers and
// lists are not copied.
func copyLeaves(dst, src any) {
	sv := reflect.ValueOf(src)
	if !sv.IsValid() || sv.IsNil() {
		return
	}
	sv = sv.Elem()
	dv := reflect.ValueOf(dst).Elem()
	for i := 0; i < sv.NumField(); i++ {
		sf := sv.Type().Field(i)
		df := dv.FieldByName(sf.Name)
		if !df.IsValid() || df.Type() != sf.Type {
			continue
		}
		v := sv.Field(i)
		switch sf.Type.Kind() {
		case reflect.Pointer:
			if v.IsNil() || sf.Type.Elem().Kind() == reflect.Struct {
				continue
			}
			n := reflect.New(sf.Type.Elem())
			n.Elem().Set(v.Elem())
			df.Set(n)
		case reflect.Slice:
			if v.IsNil() {
				continue
			}
			n := reflect.MakeSlice(sf.Type, v.Len(), v.Len())
			reflect.Copy(n, v)
			df.Set(n)
		case reflect.Int64: // enumerations and identityrefs
			df.Set(v)
		}
	}
}

// collectorAddr is the address and port the dataplane keys a collector's
// counters by (the zero value when the configured address does not parse,
// which Apply rejects anyway).
func collectorAddr(addr string, port uint16) netip.AddrPort {
	ip, _ := netip.ParseAddr(addr)
	return netip.AddrPortFrom(ip, port)
}

package collector

import (
	"context"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/dataplane/collector"
	gc "github.com/intd-project/intd/gen/collector"
	"github.com/intd-project/intd/server"
)

// Schema is the intd-collector model (gen/collector) for server.WithSchema.
func Schema() (*server.Schema, error) {
	ys, err := gc.Schema()
	if err != nil {
		return nil, err
	}
	models := make([]*gpb.ModelData, 0, len(gc.ΓModelData))
	for _, m := range gc.ΓModelData {
		models = append(models, &gpb.ModelData{Name: m.Name, Organization: m.Organization, Version: gc.ModelVersions[m.Name]})
	}
	return server.NewSchema(ys, models, nil)
}

// Source is a server.StateSource: the collector's counters, sources and
// its MaxFlows most recently updated flows (0: all). A flow evicted from
// the table leaves the tree, and the server publishes its deletion.
type Source struct {
	C        *collector.Collector
	MaxFlows int
}

// State renders a fresh snapshot of the collector.
func (s Source) State(context.Context) (ygot.GoStruct, error) {
	return Tree(s.C.Snapshot(s.MaxFlows)), nil
}

// Tree renders a collector snapshot as the intd-collector YANG tree.
func Tree(s *collector.Snapshot) *gc.Device {
	d := &gc.Device{}
	col := d.GetOrCreateCollector()
	st := col.GetOrCreateState()
	st.FlowCount = ygot.Uint32(uint32(s.TableFlows)) // the table, not the flows exported
	k := &s.Counters
	cnt := st.GetOrCreateCounters()
	cnt.Packets, cnt.Reports, cnt.ReportsV2, cnt.ReportsV05 = u64(k.Packets), u64(k.Reports), u64(k.ReportsV2), u64(k.ReportsV05)
	cnt.ReportsLost, cnt.DropReports, cnt.CongestionReports = u64(k.Lost), u64(k.Drops), u64(k.Congestion)
	cnt.ReportsWithoutFlow, cnt.FlowsCreated, cnt.FlowsEvicted = u64(k.NoFlow), u64(k.FlowsCreated), u64(k.FlowsEvicted)
	for i, name := range collector.ErrorKindNames {
		e := col.GetOrCreateErrors().GetOrCreateError(name).GetOrCreateState()
		e.Kind = ygot.String(name)
		e.GetOrCreateCounters().Count = u64(k.Errors[i])
	}
	for i := range s.Sources {
		src := &s.Sources[i]
		v := src.VersionName()
		ss := col.GetOrCreateSources().GetOrCreateSource(src.NodeID, src.HWID, v).GetOrCreateState()
		ss.NodeId, ss.HwId, ss.Version, ss.LastSequence = ygot.Uint32(src.NodeID), ygot.Uint8(src.HWID), ygot.String(v), ygot.Uint32(src.LastSeq)
		sc := ss.GetOrCreateCounters()
		sc.Packets, sc.Reports, sc.Lost, sc.Reordered = u64(src.Packets), u64(src.Reports), u64(src.Lost), u64(src.Reordered)
		sc.DropReports, sc.CongestionReports = u64(src.Drops), u64(src.Congested)
	}
	for i := range s.Flows {
		f := &s.Flows[i]
		key := &f.Key
		src, dst := key.Src.String(), key.Dst.String()
		// The tunnel and its id are part of the key: the same inner
		// 5-tuple in two tunnels is two entries ("none", 0 outside).
		tun := f.Tunnel.String()
		fl := col.GetOrCreateFlows().GetOrCreateFlow(src, dst, key.Proto, key.SrcPort, key.DstPort, tun, f.TunnelID)
		fs := fl.GetOrCreateState()
		fs.Tunnel, fs.TunnelId = ygot.String(tun), ygot.Uint32(f.TunnelID)
		fs.SrcAddress, fs.DstAddress, fs.Protocol = ygot.String(src), ygot.String(dst), ygot.Uint8(key.Proto)
		fs.SrcPort, fs.DstPort = ygot.Uint16(key.SrcPort), ygot.Uint16(key.DstPort)
		fs.FirstSeen, fs.LastSeen = u64(uint64(f.FirstSeen)), u64(uint64(f.LastSeen))
		e := fs.GetOrCreateE2ELatency()
		e.Last, e.Min, e.Max, e.Avg, e.Samples = u64(f.E2E.Last), u64(f.E2E.Min), u64(f.E2E.Max), u64(f.E2E.Avg()), u64(f.E2E.Count)
		fc := fs.GetOrCreateCounters()
		fc.Reports, fc.PathChanges, fc.Drops = u64(f.Reports), u64(f.PathChanges), u64(f.Drops)
		fc.DropsOtherReasons, fc.CongestionEvents = u64(f.DropOther), u64(f.Congestion)
		for _, dr := range f.DropReasons {
			if dr.Count != 0 {
				r := fl.GetOrCreateDropReasons().GetOrCreateDropReason(dr.Reason).GetOrCreateState()
				r.Reason, r.Count = ygot.Uint8(dr.Reason), u64(dr.Count)
			}
		}
		for h := 0; h < f.NHops; h++ {
			p := &f.Path[h]
			hs := fl.GetOrCreatePath().GetOrCreateHop(uint8(h)).GetOrCreateState()
			hs.Index, hs.NodeId = ygot.Uint8(uint8(h)), ygot.Uint32(p.NodeID)
			hs.IngressInterface, hs.EgressInterface = ygot.Uint16(p.IngressPort), ygot.Uint16(p.EgressPort)
			hs.QueueId, hs.LastSeen = ygot.Uint8(p.QueueID), u64(uint64(p.LastSeen))
			l := hs.GetOrCreateLatency()
			l.Last, l.Min, l.Max, l.Avg, l.Samples = u64(p.Latency.Last), u64(p.Latency.Min), u64(p.Latency.Max), u64(p.Latency.Avg()), u64(p.Latency.Count)
			q := hs.GetOrCreateQueueOccupancy()
			q.Last, q.Min, q.Max, q.Avg, q.Samples = u64(p.Queue.Last), u64(p.Queue.Min), u64(p.Queue.Max), u64(p.Queue.Avg()), u64(p.Queue.Count)
		}
	}
	return d
}

func u64(v uint64) *uint64 { return &v }

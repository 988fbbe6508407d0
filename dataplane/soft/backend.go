package soft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/saireport"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// StatsReporter is implemented by reporters that count reports; Stats
// lets it fill Reports, ReportSessions and TrackedFlows.
type StatsReporter interface {
	ReportStats(st *sai.Stats)
}

// Capabilities implements sai.Backend.
func (s *Switch) Capabilities() sai.Capabilities {
	occ := sai.OccupancySemantics{Unit: sai.SizeBytes, Timing: sai.QueueTimingEnqueue}
	return sai.Capabilities{
		IntEndpoint: true, IntTransit: true, Postcard: true, DropReport: true, QueueReport: true,
		Modes:          []sai.IntMode{sai.IntModeMD, sai.IntModeMX},
		Instructions:   spec.InstAll,
		ReportMetadata: spec.InstReportable,
		Encaps: []spec.Encap{spec.EncapDSCP, spec.EncapUDPPort, spec.EncapProbeMarker,
			spec.EncapVXLANGPE, spec.EncapGeneve, spec.EncapGRE},
		ReportFormats:       []sai.ReportFormat{spec.ReportFormatV2, spec.ReportFormatV05},
		Coalescing:          true,
		EventTypes:          spec.EventTypes(),
		InnerMatch:          true,
		PacketInterval:      true,
		HopLatency:          sai.TimeNanoseconds,
		IngressTimestamp:    sai.TimestampPOSIXNanoseconds,
		EgressTimestamp:     sai.TimestampPOSIXNanoseconds,
		QueueOccupancy:      occ,
		BufferOccupancy:     occ,
		TxUtilization:       sai.UtilPercent,
		L1InterfaceID:       sai.InterfacePhysicalPort,
		L2InterfaceID:       sai.InterfaceLogical,
		LastHopReport:       sai.LastHopEmbeddedInt,
		DropReasonReference: sai.SDFabricDropReasonsURL,
		MaxQueueReports:     0,
		SessionTunnel:       true,
	}
}

func errf(err error, format string, args ...any) error {
	return fmt.Errorf("soft: "+format+": %w", append(args, err)...)
}

// checkAttrs runs the checks of this switch, after the store's: port
// names, tunnel code points, queues.
func (s *Switch) checkAttrs(_ sai.OID, a sai.Attrs) error {
	switch a := a.(type) {
	case sai.DTelAttrs:
		for _, p := range a.SinkPortList {
			if _, ok := s.portByName[p]; !ok {
				return errf(sai.ErrNotFound, "sink port %q", p)
			}
		}
		if a.VXLANGPENextProtocol != 0 && a.VXLANGPENextProtocol != spec.VXLANGPENextProtoINT {
			return errf(sai.ErrUnsupported, "VXLAN-GPE next protocol %#x (only %#x)", a.VXLANGPENextProtocol, spec.VXLANGPENextProtoINT)
		}
		if a.GeneveOptionClass != 0 && a.GeneveOptionClass != spec.GeneveClassINT {
			return errf(sai.ErrUnsupported, "Geneve option class %#x (only %#x)", a.GeneveOptionClass, spec.GeneveClassINT)
		}
		for _, t := range []struct {
			a    netip.Addr
			attr sai.AttrID
		}{{a.TunnelAddress, sai.AttrDTelTunnelAddress}, {a.TunnelAddress6, sai.AttrDTelTunnelAddress6}} {
			if t.a.IsValid() && s.noTunnels != "" {
				return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: t.attr, Index: -1, Err: sai.ErrUnsupported,
					Msg: "INT session tunnels (VXLAN-GPE added by the source; " + s.noTunnels + ") are not supported"}
			}
		}
	case sai.ReportSessionAttrs:
		return saireport.CheckReportSession(s.reporter, a)
	case sai.QueueReportAttrs:
		if _, ok := s.portByName[a.Port]; !ok {
			return errf(sai.ErrNotFound, "queue report port %q", a.Port)
		}
		if n := s.ports[s.portByName[a.Port]].cfg.Queues; int(a.Queue) >= n {
			return errf(sai.ErrUnsupported, "queue %d on port %q (its queues are 0 to %d)", a.Queue, a.Port, n-1)
		}
	case sai.WatchlistEntryAttrs:
		if p := a.Match.InPort; p != "" {
			if _, ok := s.portByName[p]; !ok {
				return errf(sai.ErrNotFound, "watchlist in-port %q", p)
			}
		}
	}
	return nil
}

// Create implements sai.Backend.
func (s *Switch) Create(a sai.Attrs) (sai.OID, error) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	oid, err := s.store.Create(a)
	if err != nil {
		return sai.NullOID, err
	}
	if err := s.tunnelsOnDemand(func() { _, _ = s.store.Remove(oid) }); err != nil {
		return sai.NullOID, err
	}
	switch a.(type) {
	case sai.WatchlistEntryAttrs:
		s.wlStats[oid] = &sai.WatchlistEntryStats{}
	case sai.IntSessionAttrs:
		s.sessStats[oid] = &sai.IntSessionStats{}
	case sai.QueueReportAttrs:
		s.qrStats[oid] = &qrState{}
	}
	s.recompile(oid.Type())
	return oid, nil
}

// Set implements sai.Backend.
func (s *Switch) Set(oid sai.OID, a sai.Attrs) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.store.Set(oid, a)
	if err != nil {
		return err
	}
	if err := s.tunnelsOnDemand(func() { _, _ = s.store.Set(oid, old) }); err != nil {
		return err
	}
	s.recompile(oid.Type())
	s.tunnelsOffUnneeded()
	return nil
}

// Remove implements sai.Backend.
func (s *Switch) Remove(oid sai.OID) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.store.Remove(oid); err != nil {
		return err
	}
	delete(s.wlStats, oid)
	delete(s.sessStats, oid)
	delete(s.qrStats, oid)
	s.recompile(oid.Type())
	s.tunnelsOffUnneeded()
	return nil
}

// tunnelDemand says whether the stored configuration sends session
// tunnels whole (see Config.TunnelOutput), and which attribute asks for
// it: a tunnel address (an endpoint's tunnels start and end there) or
// INT transit (hops are pushed onto tunnel super-packets).
func (s *Switch) tunnelDemand() (bool, sai.AttrID) {
	_, o, ok := s.store.First(sai.ObjectTypeDTel)
	if !ok {
		return false, sai.AttrNone
	}
	d := o.(sai.DTelAttrs)
	switch {
	case d.VXLANGPENextProtocol == 0:
	case d.IntEndpointEnable && d.TunnelAddress.IsValid():
		return true, sai.AttrDTelTunnelAddress
	case d.IntEndpointEnable && d.TunnelAddress6.IsValid():
		return true, sai.AttrDTelTunnelAddress6
	case d.IntTransitEnable:
		return true, sai.AttrDTelIntTransitEnable
	}
	return false, sai.AttrNone
}

// tunnelsOnDemand turns the tunnel output on when the stored configuration
// is the first to need it; an error refuses that configuration, undo
// having put the store back. Called with s.cfgMu and s.mu held; s.mu is
// let go while the output is set up (packets go on under the compiled
// configuration, which is not the new one yet).
func (s *Switch) tunnelsOnDemand(undo func()) error {
	need, attr := s.tunnelDemand()
	if !need || s.tunnelsOn || s.tunOutput == nil || s.noTunnels != "" {
		return nil
	}
	s.mu.Unlock()
	err := s.tunOutput(true)
	s.mu.Lock()
	if err == nil {
		s.tunnelsOn = true
		return nil
	}
	if errors.Is(err, ErrNoSessionTunnels) {
		// For good: transit cuts tunnel super-packets, tunnel addresses
		// are refused (the store put back first: checkAttrs would refuse
		// a previous tunnel address now).
		if attr == sai.AttrDTelIntTransitEnable {
			s.noTunnels = err.Error()
			return nil
		}
		undo()
		s.noTunnels = err.Error()
		return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: attr, Index: -1, Err: sai.ErrUnsupported,
			Msg: "INT session tunnels (VXLAN-GPE added by the source; " + s.noTunnels + ") are not supported"}
	}
	undo()
	return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: attr, Index: -1, Err: sai.ErrUnsupported,
		Msg: "INT session tunnels need their output on every port, which could not be set up (" + err.Error() + "), so they are not supported"}
}

// tunnelsOffUnneeded turns the tunnel output off once no configuration
// needs it. Super-packets already queued for it are cut into segments
// by their link. Called with s.cfgMu and s.mu held, after recompile; s.mu
// is let go meanwhile.
func (s *Switch) tunnelsOffUnneeded() {
	if need, _ := s.tunnelDemand(); need || !s.tunnelsOn {
		return
	}
	s.tunnelsOn = false
	s.mu.Unlock()
	defer s.mu.Lock()
	// The link logs what it could not undo; the configuration stands.
	_ = s.tunOutput(false)
}

// Stats implements sai.Backend.
func (s *Switch) Stats(ctx context.Context) (sai.Stats, error) {
	if err := ctx.Err(); err != nil {
		return sai.Stats{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.store.NewStats()
	st.Node = s.node
	st.Drops = maps.Clone(s.drops)
	st.Queues = map[string][]sai.QueueStats{}
	for _, p := range s.ports {
		st.Interfaces[p.cfg.Name] = p.ctr
		st.Ports[p.cfg.Name] = sai.PortInfo{L1ID: p.cfg.ID, L2ID: p.cfg.L2ID}
		// A packet joining queue i now waits for the bytes of queues i
		// and above (strict priority), arrivals aside.
		qs := make([]sai.QueueStats, len(p.qs))
		ahead := 0
		for i := len(p.qs) - 1; i >= 0; i-- {
			ahead += p.qs[i].bytes
			qs[i].Occupancy = uint32(p.qs[i].bytes)
			if p.cfg.Rate > 0 && p.qs[i].bytes > 0 {
				qs[i].Delay = time.Duration(int64(ahead) * 8 * 1_000_000_000 / p.cfg.Rate)
			}
		}
		st.Queues[p.cfg.Name] = qs
	}
	for oid, w := range s.wlStats {
		st.Watchlist[oid] = *w
	}
	for oid, w := range s.sessStats {
		st.IntSessions[oid] = *w
	}
	for oid, q := range s.qrStats {
		st.QueueReports[oid] = q.stats
	}
	// What the pipeline handed to the reporter; a StatsReporter refines it.
	st.Reports[sai.ReportFlow] = sai.ReportCounters{Generated: s.generated[report.KindFlow]}
	st.Reports[sai.ReportDrop] = sai.ReportCounters{Generated: s.generated[report.KindDrop]}
	var qrs uint64
	for _, q := range s.qrStats {
		qrs += q.stats.Reports
	}
	st.Reports[sai.ReportQueue] = sai.ReportCounters{Generated: qrs}
	if p, ok := s.reporter.(ReportPipeline); ok {
		s.pipelineStats(p, &st)
	} else if sr, ok := s.reporter.(StatsReporter); ok {
		sr.ReportStats(&st)
	}
	return st, nil
}

// recompile rebuilds the pipeline configuration after a change of an
// object of type t. Called with s.mu held.
func (s *Switch) recompile(t sai.ObjectType) {
	s.gen++
	c := &compiled{gen: s.gen, qr: make([]*qrState, len(s.ports)*MaxQueues), sink: make([]bool, len(s.ports))}
	var dtel *sai.DTelAttrs
	if _, o, ok := s.store.First(sai.ObjectTypeDTel); ok {
		d := o.(sai.DTelAttrs)
		dtel = &d
		c.dtel = dtel
		c.endpoint, c.transit, c.postcard = d.IntEndpointEnable, d.IntTransitEnable, d.PostcardEnable
		c.dropReport, c.queueReport = d.DropReportEnable, d.QueueReportEnable
		c.nodeID = d.SwitchID
		for _, p := range d.SinkPortList {
			c.sink[s.portByName[p]] = true
		}
		c.parser = wire.Parser{
			DSCP: d.IntL4DSCP.Value, DSCPMask: d.IntL4DSCP.Mask,
			UDPPort: d.IntUDPDstPort, ProbeMarker: d.ProbeMarker, GREProto: d.GREProtocolType,
		}
		if d.VXLANGPENextProtocol != 0 {
			c.parser.VXLANGPEPort = spec.PortVXLANGPE
		}
		if d.GeneveOptionClass != 0 {
			c.parser.GenevePort = spec.PortGeneve
		}
		c.edgeParser = wire.Parser{GREProto: c.parser.GREProto, VXLANGPEPort: c.parser.VXLANGPEPort,
			GenevePort: c.parser.GenevePort, NoINT: true}
		c.dscp = d.IntL4DSCP
		c.remark, c.remarkDSCP = d.IntEndpointEnable && d.IntL4DSCP.Mask != 0, d.IntL4DSCPRemark
		c.malformedDrop = d.MalformedAction == sai.MalformedDrop
		if d.IntEndpointEnable && c.parser.VXLANGPEPort != 0 {
			c.tunAddr4, c.tunAddr6 = d.TunnelAddress, d.TunnelAddress6
		}
		switch {
		case d.IntL4DSCP.Mask != 0:
			c.src = wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: d.IntL4DSCP.Value, Mask: d.IntL4DSCP.Mask}
		case d.IntUDPDstPort != 0:
			c.src = wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: d.IntUDPDstPort, NPT: d.IntUDPNPT}
		case d.ProbeMarker != 0:
			c.src = wire.SourceOptions{Encap: spec.EncapProbeMarker, ProbeMarker: d.ProbeMarker}
		}
	}
	sessions := map[sai.OID]*session{}
	for oid, o := range s.store.All() {
		switch a := o.(type) {
		case sai.IntSessionAttrs:
			se := newSession(oid, a, s.sessStats[oid])
			if a.ClampTCPMSS {
				typ := spec.TypeMD
				if a.Mode == sai.IntModeMX {
					typ = spec.TypeMX
				}
				se.clamp = wire.TCPSourceOverhead(typ, int(a.MaxHopCount), se.hopML, &c.src)
			}
			if se.tunnel {
				se.dst4, se.dst6 = a.TunnelDestination, a.TunnelDestination6
				if a.ClampTCPMSS {
					// clampFor adds the outer IP header of the
					// packet's family.
					se.clamp = wire.SessionTunnelLen + int(a.MaxHopCount)*se.hopML*4
				}
			}
			sessions[oid] = se
		case sai.ReportSessionAttrs:
			if c.telemetry == nil {
				c.telemetry = map[collector]struct{}{}
			}
			for i, d := range a.Destinations {
				c.telemetry[collector{d.IP, a.DstPort(i)}] = struct{}{}
			}
		case sai.QueueReportAttrs:
			q := s.qrStats[oid]
			q.a = a
			c.qr[s.portByName[a.Port]*MaxQueues+int(a.Queue)] = q
		}
	}
	for oid, o := range s.store.Of(sai.ObjectTypeWatchlistEntry) {
		a := o.(sai.WatchlistEntryAttrs)
		e := &wlEntry{oid: oid, m: a.Match, act: a.Action, inPort: -1, stats: s.wlStats[oid], prio: a.Priority}
		if a.Match.InPort != "" {
			e.inPort = s.portByName[a.Match.InPort]
		}
		if !a.Action.IntSession.IsNull() {
			e.sess = sessions[a.Action.IntSession]
		}
		c.needDSCP = c.needDSCP || a.Match.DSCP.Mask != 0
		c.needFlags = c.needFlags || a.Match.TCPFlags.Mask != 0
		c.needInner = c.needInner || a.Match.Inner.Enabled
		c.needICMP = c.needICMP || a.Match.ICMP != (sai.ICMPMatch{})
		c.entries = append(c.entries, e)
	}
	slices.SortFunc(c.entries, func(a, b *wlEntry) int {
		if a.prio != b.prio {
			return cmp.Compare(b.prio, a.prio)
		}
		return cmp.Compare(a.oid, b.oid)
	})
	s.cfg = c
	if p, ok := s.reporter.(ReportPipeline); ok && t != sai.ObjectTypeWatchlistEntry && t != sai.ObjectTypeIntSession {
		s.reportErr = p.Configure(s.reportConfig(dtel))
	}
}

// session is a compiled INT session.
type session struct {
	oid     sai.OID
	a       sai.IntSessionAttrs
	inst    wire.Instructions
	dsWords int
	hopML   int // words
	stats   *sai.IntSessionStats
	// clamp is the INT a full-sized TCP segment gets at MaxHopCount hops
	// (ClampTCPMSS; 0: off): SYN MSS options leave room for it.
	clamp int
	// tunnel: INT-MD in a session tunnel to dst4 (IPv4 packets) or dst6
	// (IPv6), invalid when none of that family.
	tunnel     bool
	dst4, dst6 netip.Addr
}

// clampFor is what SYNs of IP version ipv leave room for (clamp, with a
// session tunnel's outer IP header).
func (se *session) clampFor(ipv uint8) int {
	if se.tunnel {
		return wire.SessionTunnelOverhead(ipv, 0) - wire.SessionTunnelLen + se.clamp
	}
	return se.clamp
}

func newSession(oid sai.OID, a sai.IntSessionAttrs, st *sai.IntSessionStats) *session {
	inst := wire.Instructions(a.Instructions)
	// This node knows no domain but the default one: it assumes one word
	// per DS instruction bit and fills them with all ones.
	ds := bits.OnesCount16(a.DSInstruction)
	return &session{oid: oid, a: a, inst: inst, dsWords: ds, hopML: inst.Words() + ds, stats: st,
		tunnel: a.Encapsulation == sai.SessionEncapVXLANGPE}
}

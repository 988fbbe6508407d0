package ebpf

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/saireport"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Capabilities implements sai.Backend.
func (d *Dataplane) Capabilities() sai.Capabilities {
	return sai.Capabilities{
		IntEndpoint: true, IntTransit: true, Postcard: true, DropReport: true, QueueReport: true,
		Modes:               []sai.IntMode{sai.IntModeMD, sai.IntModeMX},
		Instructions:        spec.InstAll,
		ReportMetadata:      spec.InstReportable,
		Encaps:              []spec.Encap{spec.EncapDSCP, spec.EncapUDPPort, spec.EncapProbeMarker, spec.EncapVXLANGPE, spec.EncapGeneve, spec.EncapGRE},
		ReportFormats:       []sai.ReportFormat{spec.ReportFormatV2, spec.ReportFormatV05},
		Coalescing:          true,
		EventTypes:          spec.EventTypes(),
		HopLatency:          sai.TimeNanoseconds,
		IngressTimestamp:    sai.TimestampPOSIXNanoseconds,
		EgressTimestamp:     sai.TimestampPOSIXNanoseconds,
		QueueOccupancy:      sai.OccupancySemantics{Unit: sai.SizeBytes, Timing: sai.QueueTimingEnqueue},
		TxUtilization:       sai.UtilTenthsOfPercent,
		BufferOccupancy:     sai.OccupancySemantics{Unit: sai.SizeBytes, Timing: sai.QueueTimingEnqueue},
		L1InterfaceID:       sai.InterfaceLogical,
		L2InterfaceID:       sai.InterfaceLogical,
		LastHopReport:       sai.LastHopEmbeddedInt,
		DropReasonReference: sai.SDFabricDropReasonsURL,
		MaxWatchlistEntries: maxWatchlist,
		MaxQueueReports:     maxQueueRep,
		PacketInterval:      true,
		InnerMatch:          true,
		SessionTunnel:       true,
	}
}

func errf(err error, format string, args ...any) error {
	return fmt.Errorf("ebpf: "+format+": %w", append(args, err)...)
}

// checkAttrs runs the checks of this dataplane, after the store's:
// interface names, map capacities, what the BPF program can carry.
func (d *Dataplane) checkAttrs(self sai.OID, a sai.Attrs) error {
	switch a := a.(type) {
	case sai.DTelAttrs:
		for _, p := range a.SinkPortList {
			if _, ok := d.ifaces[p]; !ok {
				return errf(sai.ErrNotFound, "sink port %q", p)
			}
		}
		// Nothing changes when either is refused.
		hadGSO := d.gso != nil
		if err := d.ensureGSODetour(&a); err != nil {
			return err
		}
		if err := d.ensureTunDev(&a); err != nil {
			if !hadGSO && d.gso != nil {
				_ = d.closeGSODetour()
			}
			return err
		}
	case sai.IntSessionAttrs:
		if self.IsNull() && d.store.Len(sai.ObjectTypeIntSession) >= maxSessions {
			return errf(sai.ErrUnsupported, "more than %d INT sessions", maxSessions)
		}
		if w := sai.Instruction(a.Instructions).Words() + bits.OnesCount16(a.DSInstruction); w > 31 {
			return errf(sai.ErrUnsupported, "hop metadata of %d words", w)
		}
	case sai.ReportSessionAttrs:
		return saireport.CheckReportSession(d.cfg.Reporter, a)
	case sai.QueueReportAttrs:
		if _, ok := d.ifaces[a.Port]; !ok {
			return errf(sai.ErrNotFound, "queue report port %q", a.Port)
		}
		if n := min(d.ifaces[a.Port].txqs, maxTxq); int(a.Queue) >= n {
			return errf(sai.ErrUnsupported, "queue %d on port %q (queue ids are tx queues, 0 to %d)", a.Queue, a.Port, n-1)
		}
	case sai.WatchlistEntryAttrs:
		if p := a.Match.InPort; p != "" {
			if _, ok := d.ifaces[p]; !ok {
				return errf(sai.ErrNotFound, "watchlist in-port %q", p)
			}
		}
	}
	return nil
}

// attrs returns the attributes of a live object. Called with d.mu held.
func (d *Dataplane) attrs(oid sai.OID) sai.Attrs {
	a, _ := d.store.Get(oid)
	return a
}

// Create implements sai.Backend.
func (d *Dataplane) Create(a sai.Attrs) (sai.OID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	oid, err := d.store.Create(a)
	if err != nil {
		return sai.NullOID, err
	}
	switch a.(type) {
	case sai.IntSessionAttrs:
		d.sessIdx[oid] = freeIndex(d.sessIdx, maxSessions)
		d.zeroPerCPU(d.objs.SessStatsMap, d.sessIdx[oid], intdSessStats{})
	case sai.WatchlistEntryAttrs:
		d.wlIdx[oid] = freeIndex(d.wlIdx, maxWatchlist)
		d.zeroPerCPU(d.objs.WlStatsMap, d.wlIdx[oid], intdWlStats{})
	case sai.QueueReportAttrs:
		d.qrIdx[oid] = freeIndex(d.qrIdx, maxQueueRep)
		_ = d.objs.QrStateMap.Put(uint32(d.qrIdx[oid]), intdQrState{})
	}
	if err := d.programLocked(); err != nil {
		_ = d.removeLocked(oid) // just created: nothing references it
		_ = d.compileLocked()
		return sai.NullOID, err
	}
	return oid, nil
}

func freeIndex(m map[sai.OID]int, n int) int {
	used := make([]bool, n)
	for _, i := range m {
		used[i] = true
	}
	return slices.Index(used, false)
}

func (d *Dataplane) zeroPerCPU(m *ebpf.Map, i int, zero any) {
	n := ebpf.MustPossibleCPU()
	switch z := zero.(type) {
	case intdSessStats:
		_ = m.Put(uint32(i), make([]intdSessStats, n))
	case intdWlStats:
		_ = m.Put(uint32(i), make([]intdWlStats, n))
	default:
		_ = z
	}
}

// Set implements sai.Backend.
func (d *Dataplane) Set(oid sai.OID, a sai.Attrs) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, err := d.store.Set(oid, a)
	if err != nil {
		return err
	}
	if err := d.programLocked(); err != nil {
		// old passed these checks a moment ago and nothing else changed.
		_, _ = d.store.Set(oid, old)
		_ = d.compileLocked()
		return err
	}
	return nil
}

// Remove implements sai.Backend.
func (d *Dataplane) Remove(oid sai.OID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.removeLocked(oid); err != nil {
		return err
	}
	return d.programLocked()
}

// Defer implements sai.Deferrer: Create, Set and Remove record objects
// but leave the maps as they are until Flush (a watchlist of 1024 entries
// is then compiled once, not once per entry).
func (d *Dataplane) Defer() {
	d.mu.Lock()
	d.deferred = true
	d.mu.Unlock()
}

// Flush implements sai.Deferrer.
func (d *Dataplane) Flush() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deferred = false
	if !d.dirty {
		return nil
	}
	d.dirty = false
	return d.compileLocked()
}

// programLocked compiles the objects into the maps, or notes that it is
// due when deferred.
func (d *Dataplane) programLocked() error {
	if d.deferred {
		d.dirty = true
		return nil
	}
	return d.compileLocked()
}

// removeLocked forgets oid and the map slots it held.
func (d *Dataplane) removeLocked(oid sai.OID) error {
	if _, err := d.store.Remove(oid); err != nil {
		return err
	}
	delete(d.sessIdx, oid)
	delete(d.wlIdx, oid)
	delete(d.qrIdx, oid)
	return nil
}

// latShift is the latency bucket width of the BPF flow filter: the largest
// power of two not above the hop-latency change threshold, so a change the
// report pipeline would act on always crosses a bucket boundary.
func latShift(thr time.Duration) uint8 {
	if thr <= 1 {
		return 0
	}
	return uint8(63 - bits.LeadingZeros64(uint64(thr)))
}

// prefixWords returns the address and mask words of a watchlist prefix as
// the BPF program compares them with a packet's 16-byte addresses (network
// order bytes, IPv4 as ::ffff:a.b.c.d); an invalid prefix matches all.
func prefixWords(p netip.Prefix) (v, m [4]uint32) {
	if !p.IsValid() {
		return v, m
	}
	a := p.Addr().As16()
	n := p.Bits()
	if p.Addr().Is4() {
		n += 96
	}
	var mb [16]byte
	for i := range mb {
		k := min(max(n-8*i, 0), 8)
		mb[i] = byte(0xff << (8 - k))
	}
	for i := range 4 {
		m[i] = binary.NativeEndian.Uint32(mb[4*i:])
		v[i] = binary.NativeEndian.Uint32(a[4*i:]) & m[i]
	}
	return v, m
}

// prefixFamily is the wl_entry family of a match's prefixes: 0 without
// prefixes, 4 or 6, and 0xff (matches nothing) for mixed families.
func prefixFamily(src, dst netip.Prefix) uint8 {
	fam := func(p netip.Prefix) uint8 {
		switch {
		case !p.IsValid():
			return 0
		case p.Addr().Is4():
			return 4
		}
		return 6
	}
	s, d := fam(src), fam(dst)
	switch {
	case s == 0:
		return d
	case d == 0 || d == s:
		return s
	}
	return 0xff
}

func portRange(r sai.PortRange) (uint16, uint16) {
	if r.IsAny() {
		return 0, 0xffff
	}
	return r.Lo, r.Hi
}

// compileLocked writes the sai objects into the BPF maps: sessions and the
// inactive half of the watchlist first, then the configuration word that
// switches to it, so packets see either the old or the new watchlist.
func (d *Dataplane) compileLocked() error {
	var dt *sai.DTelAttrs
	if _, o, ok := d.store.First(sai.ObjectTypeDTel); ok {
		a := o.(sai.DTelAttrs)
		dt = &a
	}
	c := intdCfg{TimeOffset: d.timeOff, FlowInterval: uint64(time.Second), Netns: d.netns}
	// The pair is added before the configuration word that names it and
	// removed after the one that stops naming it: no packet is sent to a
	// device gone.
	if err := d.ensureGSODetour(dt); err != nil {
		return err
	}
	if d.gso != nil && d.wantGSODetour(dt) {
		c.GsoDev, c.GsoPeer = uint32(d.gso.devIndex), uint32(d.gso.peerIndex)
	}
	if dt != nil {
		dtelCfg(&c, dt)
	}
	if err := d.writeSessions(dt); err != nil {
		return err
	}
	var err error
	if c.TunDev, err = d.syncTunDev(dt); err != nil {
		return err
	}
	type ent struct {
		oid sai.OID
		a   sai.WatchlistEntryAttrs
	}
	var ents []ent
	for oid := range d.wlIdx {
		ents = append(ents, ent{oid, d.attrs(oid).(sai.WatchlistEntryAttrs)})
	}
	slices.SortFunc(ents, func(a, b ent) int {
		if a.a.Priority != b.a.Priority {
			return cmp.Compare(b.a.Priority, a.a.Priority)
		}
		return cmp.Compare(a.oid, b.oid)
	})
	base := 1 - d.wlBase
	wm := make([]wlMatch, len(ents))
	for i, e := range ents {
		wm[i] = d.wlMatchOf(e.a)
	}
	wt := buildWatchlist(wm)
	if err := d.writeWatchlist(base, wt); err != nil {
		return err
	}
	c.Flags |= uint32(wt.flags)
	c.WlUse = uint16(wt.use)
	wlBytes := make([]byte, 0, len(ents)*int(unsafe.Sizeof(intdWlEntry{})))
	for _, e := range ents {
		w := d.wlEntry(e.oid, e.a)
		wlBytes = append(wlBytes, unsafe.Slice((*byte)(unsafe.Pointer(&w)), unsafe.Sizeof(w))...)
	}
	if err := d.writeEntries(base, wlBytes); err != nil {
		return err
	}
	if n, err := d.writeTelemetry(); err != nil {
		return err
	} else if n > 0 {
		c.Flags |= uint32(intdCfgFlagF_TELEMETRY)
	}
	var qrOf [maxSlots * maxTxq]uint8
	for oid, i := range d.qrIdx {
		a := d.attrs(oid).(sai.QueueReportAttrs)
		if p, ok := d.ifaces[a.Port]; ok {
			qrOf[p.slot*maxTxq+min(int(a.Queue), maxTxq-1)] = uint8(i + 1)
		}
		q := intdQrCfg{Depth: a.DepthThreshold, Latency: uint32(min(a.LatencyThreshold.Nanoseconds(), 1<<32-1)),
			Reset: uint32(min(a.EffectiveResetThreshold().Nanoseconds(), 1<<32-1)), Quota: a.BreachQuota, Rate: a.RateLimit}
		if a.TailDrop {
			q.TailDrop = 1
		}
		if err := d.objs.QrCfgMap.Put(uint32(i), q); err != nil {
			return fmt.Errorf("ebpf: queue report map: %w", err)
		}
	}
	for k, v := range qrOf {
		if v != d.qrOf[k] {
			if err := d.objs.QrOf.Put(uint32(k), v); err != nil {
				return fmt.Errorf("ebpf: queue report map: %w", err)
			}
			d.qrOf[k] = v
		}
	}
	// The tracing programs the configuration needs are attached before
	// the configuration word that uses them, and detached after the one
	// that stops.
	tr := d.tracersFor(dt)
	if tr.qtime {
		c.Flags |= uint32(intdCfgFlagF_QTIME)
	}
	if err := d.attachTracers(tr); err != nil {
		return err
	}
	d.wlGen++
	d.wlBase = base
	c.WlGen, c.WlBase, c.WlCount = d.wlGen, base, uint16(len(ents))
	if err := d.objs.CfgMap.Put(uint32(0), c); err != nil {
		d.undoTracers()
		return fmt.Errorf("ebpf: config map: %w", err)
	}
	d.detachTracers(tr)
	if d.gso != nil && !d.wantGSODetour(dt) {
		_ = d.closeGSODetour()
	}
	for _, i := range d.ifaces {
		if err := d.objs.Ifaces.Put(uint32(i.ifindex), d.ifaceValue(i)); err != nil {
			return fmt.Errorf("ebpf: interface map: %w", err)
		}
	}
	sinks := map[uint32]bool{}
	for _, i := range d.ifaces {
		if dt != nil && slices.Contains(dt.SinkPortList, i.cfg.Name) {
			sinks[uint32(i.ifindex)] = true
		}
	}
	d.ev.setParser(dt, sinks)
	if p, ok := d.cfg.Reporter.(ReportPipeline); ok {
		d.reportErr = p.Configure(d.reportConfig(dt))
	}
	return nil
}

// dtelCfg fills the configuration word from the DTel object.
func dtelCfg(c *intdCfg, dt *sai.DTelAttrs) {
	c.Flags |= uint32(intdCfgFlagF_DTEL)
	set := func(on bool, f intdCfgFlag) {
		if on {
			c.Flags |= uint32(f)
		}
	}
	set(dt.IntEndpointEnable, intdCfgFlagF_ENDPOINT)
	set(dt.IntTransitEnable, intdCfgFlagF_TRANSIT)
	set(dt.PostcardEnable, intdCfgFlagF_POSTCARD)
	set(dt.DropReportEnable, intdCfgFlagF_DROP)
	set(dt.QueueReportEnable, intdCfgFlagF_QUEUE)
	set(dt.FlowReport.OnPortChange, intdCfgFlagF_PORT_CHANGE)
	set(dt.FlowReport.OnPathChange, intdCfgFlagF_PATH_CHANGE)
	set(dt.FlowReport.OnQueueChange, intdCfgFlagF_QUEUE_CHANGE)
	c.NodeId = dt.SwitchID
	c.DscpVal, c.DscpMask = dt.IntL4DSCP.Value, dt.IntL4DSCP.Mask
	set(dt.IntEndpointEnable && dt.IntL4DSCP.Mask != 0, intdCfgFlagF_REMARK)
	c.Remark = dt.IntL4DSCPRemark
	if dt.MalformedAction == sai.MalformedDrop {
		c.MalformedDrop = 1
	}
	c.UdpPort, c.Npt = dt.IntUDPDstPort, uint8(dt.IntUDPNPT)
	c.FlowInterval = uint64(dt.FlowReport.Interval)
	c.LatShift = latShift(dt.FlowReport.HopLatencyChange)
	set(dt.FlowReport.Adaptive, intdCfgFlagF_ADAPTIVE)
	c.LatFactor, c.LatFloor = dt.FlowReport.LatencyFactor, uint32(dt.FlowReport.LatencyFloor.Nanoseconds())
	if dt.VXLANGPENextProtocol != 0 {
		c.Tunnels |= spec.EncapVXLANGPE.TunnelBit()
	}
	if dt.GeneveOptionClass != 0 {
		c.Tunnels |= spec.EncapGeneve.TunnelBit()
	}
	if dt.GREProtocolType != 0 {
		c.Tunnels |= spec.EncapGRE.TunnelBit()
		c.GreProto = dt.GREProtocolType
	}
	if dt.TunnelAddress.IsValid() {
		c.TunAddr = be32(dt.TunnelAddress)
	}
	if dt.TunnelAddress6.IsValid() {
		c.TunAddr6 = be128(dt.TunnelAddress6)
	}
	// The program compares the marker with the packet's 8 bytes
	// loaded as one word.
	c.Probe = binary.NativeEndian.Uint64(binary.BigEndian.AppendUint64(nil, dt.ProbeMarker))
}

// writeSessions writes the INT sessions into the sessions map.
func (d *Dataplane) writeSessions(dt *sai.DTelAttrs) error {
	var src wire.SourceOptions // the source's marking, for ClampTCPMSS
	switch {
	case dt == nil:
	case dt.IntL4DSCP.Mask != 0:
		src.Encap = spec.EncapDSCP
	case dt.IntUDPDstPort != 0:
		src.Encap = spec.EncapUDPPort
	case dt.ProbeMarker != 0:
		src.Encap = spec.EncapProbeMarker
	}
	for oid, i := range d.sessIdx {
		a := d.attrs(oid).(sai.IntSessionAttrs)
		s := intdSession{
			Inst: uint16(a.Instructions), Domain: a.DomainSpecificID, DsInst: a.DSInstruction, DsFlags: a.DSFlags,
			MaxHops: a.MaxHopCount, HopMl: uint8(wire.Instructions(a.Instructions).Words() + bits.OnesCount16(a.DSInstruction)),
		}
		typ := spec.TypeMD
		if a.Mode == sai.IntModeMX {
			s.Mode = uint8(intdSessModeMODE_MX)
			typ = spec.TypeMX
		}
		if a.ClampTCPMSS {
			s.Clamp = uint16(wire.TCPSourceOverhead(typ, int(a.MaxHopCount), int(s.HopMl), &src))
		}
		if a.Encapsulation == sai.SessionEncapVXLANGPE {
			s.Tunnel = 1
			if a.TunnelDestination.IsValid() {
				s.TunDst = be32(a.TunnelDestination)
			}
			if a.TunnelDestination6.IsValid() {
				s.TunDst6 = be128(a.TunnelDestination6)
			}
			if a.ClampTCPMSS {
				// syn_clamp adds the outer IP header, of the packet's
				// family (IPv4 packets go into IPv4 tunnels).
				s.Clamp = uint16(sessionTunnelLen + int(a.MaxHopCount)*int(s.HopMl)*4)
			}
		}
		if a.Discard {
			s.Discard = 1
		}
		if err := d.objs.Sessions.Put(uint32(i), s); err != nil {
			return fmt.Errorf("ebpf: sessions map: %w", err)
		}
	}
	return nil
}

// wlEntry encodes a watchlist entry as the BPF program reads it.
func (d *Dataplane) wlEntry(oid sai.OID, a sai.WatchlistEntryAttrs) intdWlEntry {
	m, act := a.Match, a.Action
	w := intdWlEntry{Proto: m.IPProtocol, DscpVal: m.DSCP.Value, DscpMask: m.DSCP.Mask,
		FlagsVal: m.TCPFlags.Value, FlagsMask: m.TCPFlags.Mask, FlowOp: uint8(flowOp(act.FlowOp)),
		SamplePct: act.FlowSamplePercent, Stats: uint16(d.wlIdx[oid]),
		IntervalUs: uint32((act.PacketInterval + time.Microsecond - 1) / time.Microsecond)}
	w.Src, w.Srcmask = prefixWords(m.SrcPrefix)
	w.Dst, w.Dstmask = prefixWords(m.DstPrefix)
	w.Family = prefixFamily(m.SrcPrefix, m.DstPrefix)
	w.SportLo, w.SportHi = portRange(m.L4SrcPort)
	w.DportLo, w.DportHi = portRange(m.L4DstPort)
	if m.InPort != "" {
		w.InIfindex = uint32(d.ifaces[m.InPort].ifindex)
	}
	if act.DropReportEnable {
		w.Act |= uint8(intdWlActACT_DROP_REPORT)
	}
	if act.TailDropReportEnable {
		w.Act |= uint8(intdWlActACT_TAIL_DROP)
	}
	if act.ReportAllPackets {
		w.Act |= uint8(intdWlActACT_REPORT_ALL)
	}
	if !act.IntSession.IsNull() {
		w.Session = uint8(d.sessIdx[act.IntSession])
		w.Act |= uint8(intdWlActACT_SESSION)
	} else if act.FlowOp == sai.FlowOpInt {
		w.FlowOp = uint8(intdFlowOpOP_NOP) // INT without a session: nothing to insert
	}
	return w
}

// flowOp is the program's flow op for sai's.
func flowOp(f sai.FlowOp) intdFlowOp {
	switch f {
	case sai.FlowOpInt:
		return intdFlowOpOP_INT
	case sai.FlowOpPostcard:
		return intdFlowOpOP_POSTCARD
	}
	return intdFlowOpOP_NOP
}

// writeTelemetry writes the collectors of the report sessions (address and
// effective UDP port) into the telemetry map, whose traffic the watchlist
// never matches, and returns how many there are.
func (d *Dataplane) writeTelemetry() (int, error) {
	want := map[intdTelKey]bool{}
	for _, o := range d.store.Of(sai.ObjectTypeReportSession) {
		a := o.(sai.ReportSessionAttrs)
		for i, dst := range a.Destinations {
			k := intdTelKey{Port: a.DstPort(i)}
			b := dst.IP.As16() // IPv4 as ::ffff:a.b.c.d, as the program keys it
			for j := range k.Addr {
				k.Addr[j] = binary.NativeEndian.Uint32(b[4*j:])
			}
			want[k] = true
		}
	}
	var k intdTelKey
	var stale []intdTelKey
	it := d.objs.Telemetry.Iterate()
	for it.Next(&k, new(uint8)) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("ebpf: telemetry map: %w", err)
	}
	for _, k := range stale {
		if err := d.objs.Telemetry.Delete(k); err != nil {
			return 0, fmt.Errorf("ebpf: telemetry map: %w", err)
		}
	}
	for k := range want {
		if err := d.objs.Telemetry.Put(k, uint8(1)); err != nil {
			return 0, fmt.Errorf("ebpf: telemetry map (%d collectors, at most 256): %w", len(want), err)
		}
	}
	return len(want), nil
}

// ReportError returns the error of the last reporting configuration.
func (d *Dataplane) ReportError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reportErr
}

func (d *Dataplane) reportConfig(dt *sai.DTelAttrs) report.Config {
	return saireport.Config(dt, d.store.All(), func(name string) uint16 {
		if i := d.ifaces[name]; i != nil {
			return i.cfg.ID
		}
		return 0
	})
}

func toCounters(c *[intdCounterNCTR]uint64) sai.Counters {
	return sai.Counters{
		InPackets: c[intdCounterC_IN], OutPackets: c[intdCounterC_OUT], DroppedPackets: c[intdCounterC_DROP],
		IntInserted: c[intdCounterC_INSERTED], IntTransited: c[intdCounterC_TRANSITED], IntStripped: c[intdCounterC_STRIPPED],
		EBitSet: c[intdCounterC_EBIT], MBitSet: c[intdCounterC_MBIT], IntMalformedDrop: c[intdCounterC_MALFORMED], Postcards: c[intdCounterC_POSTCARD],
		IntMalformedForward: c[intdCounterC_MALFORMED_FWD], DSCPRemarked: c[intdCounterC_REMARKED],
		IntDiscarded: c[intdCounterC_DISCARDED], EventsLost: c[intdCounterC_EV_LOST], DetourLost: c[intdCounterC_DETOUR_LOST],
	}
}

// rawCounters returns the summed BPF counters of an interface slot (for
// tests and debugging), indexed by the program's enum counter.
func (d *Dataplane) rawCounters(slot int) [intdCounterNCTR]uint64 {
	var out [intdCounterNCTR]uint64
	var per []intdCounters
	if err := d.objs.Ctrs.Lookup(uint32(slot), &per); err != nil {
		return out
	}
	for _, p := range per {
		for i := range out {
			out[i] += p.C[i]
		}
	}
	return out
}

// Stats implements sai.Backend.
func (d *Dataplane) Stats(ctx context.Context) (sai.Stats, error) {
	if err := ctx.Err(); err != nil {
		return sai.Stats{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.store.NewStats()
	var node [intdCounterNCTR]uint64
	for slot := 0; slot < maxSlots; slot++ {
		if !d.slots[slot] {
			continue
		}
		raw := d.rawCounters(slot)
		for i := range node {
			node[i] += raw[i]
		}
		for name, i := range d.ifaces {
			if i.slot == slot {
				st.Interfaces[name] = toCounters(&raw)
			}
		}
	}
	st.Queues = map[string][]sai.QueueStats{}
	for name, i := range d.ifaces {
		st.Queues[name] = d.queueStats(i)
	}
	st.Node = toCounters(&node)
	for name, i := range d.ifaces {
		st.Ports[name] = sai.PortInfo{Ifindex: uint32(i.ifindex), L1ID: i.cfg.ID, L2ID: i.cfg.L2ID}
	}
	for _, r := range spec.DropReasons() {
		var per []uint64
		var n uint64
		if err := d.objs.Drops.Lookup(uint32(r), &per); err == nil {
			for _, v := range per {
				n += v
			}
		}
		st.Drops[r] = n
	}
	for oid, i := range d.wlIdx {
		var per []intdWlStats
		var s sai.WatchlistEntryStats
		if err := d.objs.WlStatsMap.Lookup(uint32(i), &per); err == nil {
			for _, v := range per {
				s.MatchedPackets += v.Packets
				s.MatchedBytes += v.Bytes
				s.UnsampledPackets += v.Unsampled
			}
		}
		st.Watchlist[oid] = s
	}
	for oid, i := range d.sessIdx {
		var per []intdSessStats
		var s sai.IntSessionStats
		if err := d.objs.SessStatsMap.Lookup(uint32(i), &per); err == nil {
			for _, v := range per {
				s.PacketsInitiated += v.Initiated
				s.NotInitiatedNoRoom += v.NoRoom
				s.NotInitiatedUnsupported += v.Unsupported
				s.NotInitiatedSampled += v.Sampled
			}
		}
		st.IntSessions[oid] = s
	}
	for oid, i := range d.qrIdx {
		var q intdQrState
		_ = d.objs.QrStateMap.Lookup(uint32(i), &q)
		st.QueueReports[oid] = sai.QueueReportStats{Breaches: q.Breaches, Reports: q.Reports, QuotaLeft: q.QuotaLeft}
	}
	st.Reports[sai.ReportFlow] = sai.ReportCounters{Generated: node[intdCounterC_FLOW_GEN], Suppressed: node[intdCounterC_EV_SUPPRESSED]}
	st.Reports[sai.ReportDrop] = sai.ReportCounters{Generated: node[intdCounterC_DROP_GEN]}
	var qr uint64
	for _, q := range st.QueueReports {
		qr += q.Reports
	}
	st.Reports[sai.ReportQueue] = sai.ReportCounters{Generated: qr}
	if p, ok := d.cfg.Reporter.(ReportPipeline); ok {
		d.pipelineStats(p, &st)
	}
	return st, nil
}

// pipelineStats adds what the pipeline decided (suppressed, sent, dropped)
// to the report counts the BPF programs generated.
func (d *Dataplane) pipelineStats(p ReportPipeline, st *sai.Stats) {
	ps := p.Stats()
	for t, c := range saireport.ReportCounters(ps) {
		r := st.Reports[t]
		r.Suppressed += c.Suppressed
		r.Sent += c.Sent
		r.Dropped += c.Dropped
		st.Reports[t] = r
	}
	saireport.SessionStats(ps, st)
	saireport.FilterStats(ps, st)
}

// queueStats returns the egress queues of i as INT metadata numbers them:
// with an mq root qdisc, one per tx queue (up to maxTxq; the child of
// class id+1), else queue 0, the root qdisc every tx queue shares. Each
// holds the qdisc's backlog as the kernel dumps it (BQL's bytes in
// flight, which INT metadata adds, are not in the dump) and the delay the
// drain time per byte last measured by intd_xmit gives it.
func (d *Dataplane) queueStats(i *iface) []sai.QueueStats {
	qs := make([]sai.QueueStats, 1)
	if d.nl == nil {
		return qs
	}
	list, err := d.nl.QdiscList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: i.ifindex}})
	if err != nil {
		return qs
	}
	for _, q := range list {
		a := q.Attrs()
		if a.Parent == netlink.HANDLE_ROOT && q.Type() == "mq" {
			n := 0
			for _, c := range list {
				if c.Attrs().Parent>>16 == a.Handle>>16 && c.Attrs().Parent != netlink.HANDLE_ROOT {
					n = max(n, int(c.Attrs().Parent&0xffff))
				}
			}
			qs = make([]sai.QueueStats, min(max(n, 1), maxTxq))
		}
	}
	backlog := func(q netlink.Qdisc) uint32 {
		if s := q.Attrs().Statistics; s != nil && s.Queue != nil {
			return s.Queue.Backlog
		}
		return 0
	}
	for _, q := range list {
		a := q.Attrs()
		if a.Parent != netlink.HANDLE_ROOT {
			continue
		}
		if q.Type() != "mq" {
			qs[0].Occupancy = backlog(q)
			break
		}
		for _, c := range list {
			p := c.Attrs().Parent
			if p>>16 == a.Handle>>16 && p&0xffff >= 1 && int(p&0xffff) <= len(qs) {
				qs[p&0xffff-1].Occupancy = backlog(c)
			}
		}
	}
	for k := range qs {
		var j intdSojourn
		if qs[k].Occupancy == 0 || d.objs.Sojourns.Lookup(uint32(i.slot*maxTxq+k), &j) != nil {
			continue
		}
		if j.Occ > 0 {
			qs[k].Delay = time.Duration(j.Est * uint64(qs[k].Occupancy) / uint64(j.Occ))
		} else {
			qs[k].Delay = time.Duration(j.Est)
		}
	}
	return qs
}

// sessionTunnelLen is what a session tunnel adds after the outer IP
// header and before its hops: UDP, VXLAN-GPE, INT shim and INT-MD header.
const sessionTunnelLen = 8 + 8 + wire.ShimLen + wire.MDHeaderLen

// be32 is an IPv4 address as the program reads it from a packet: its
// bytes in network order loaded as one native word.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// be128 is an IPv6 address as the program reads it, four words.
func be128(a netip.Addr) [4]uint32 {
	b := a.As16()
	var w [4]uint32
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

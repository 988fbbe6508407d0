package soft

import (
	"encoding/binary"
	"net/netip"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
)

// compiled is the pipeline's view of the DTel objects, rebuilt on every
// configuration change (configuration is rare, packets are not).
type compiled struct {
	gen         uint64
	dtel        *sai.DTelAttrs // nil: no DTel object, plain forwarding
	endpoint    bool
	transit     bool
	postcard    bool
	dropReport  bool
	queueReport bool
	nodeID      uint32
	parser      wire.Parser
	edgeParser  wire.Parser        // packets from outside the domain: tunnels, never INT
	src         wire.SourceOptions // Encap 0: no TCP/UDP marking
	sink        []bool             // by port index
	qr          []*qrState         // by port index * MaxQueues + queue
	entries     []*wlEntry         // by descending priority
	needDSCP    bool
	needFlags   bool
	needInner   bool
	needICMP    bool
	// remark: user packets entering the domain whose DSCP carries the
	// INT marking (dscp) get remarkDSCP (INT v2.1 DSCP marking).
	remark        bool
	remarkDSCP    uint8
	dscp          sai.DSCPMatch
	malformedDrop bool
	// tunAddr4, tunAddr6: this node's ends of session tunnels (invalid:
	// none).
	tunAddr4, tunAddr6 netip.Addr
	// telemetry holds the collectors (report session destinations):
	// report packets to them are never watched.
	telemetry map[collector]struct{}
}

// tunnelAddr says whether a is one of this node's session tunnel ends.
func (c *compiled) tunnelAddr(a netip.Addr) bool {
	return a.IsValid() && (a == c.tunAddr4 || a == c.tunAddr6)
}

// collector is a report destination: address and UDP port.
type collector struct {
	ip   netip.Addr
	port uint16
}

// wlEntry is a compiled watchlist entry.
type wlEntry struct {
	oid    sai.OID
	prio   uint16
	m      sai.WatchlistMatch
	inPort int // -1: any
	act    sai.WatchlistAction
	sess   *session
	stats  *sai.WatchlistEntryStats
}

// queueRep is the queue report of b's egress queue, nil when none.
func (c *compiled) queueRep(b *pbuf) *qrState {
	if b.out < 0 {
		return nil
	}
	return c.qr[b.out*MaxQueues+int(b.queue)]
}

// qrState is a queue report's configuration and breach state.
type qrState struct {
	a        sai.QueueReportAttrs
	stats    sai.QueueReportStats
	inBreach bool
}

// matchKey is everything the watchlist looks at; the flow cache is keyed by
// it, so a cache hit is exactly what a scan would return.
type matchKey struct {
	in    uint16
	dscp  uint8
	flags uint8
	icmp  uint16 // ICMP type << 8 | code
	vni   uint32 // tunnel id
	tun   wire.TunnelKind
	inner bool
	flow  wire.FlowKey
	iflow wire.FlowKey
}

type cacheSlot struct {
	gen   uint64
	key   matchKey
	entry *wlEntry
	op    sai.FlowOp // effective flow op after flow sampling
	route int32      // index in s.routes, -1 miss
	port  int32      // egress port (ECMP resolved)
	// Packet sampling (WatchlistAction.PacketInterval): interval is 0 when
	// every packet gets op; acted and last say whether and when op last
	// acted on this flow. They outlive a generation bump (same key, same
	// flow) but not eviction by another flow, after which the flow's next
	// packet counts as its first.
	interval int64
	last     int64
	acted    bool
}

// sample returns the flow op for a packet arriving at now on the flow of
// slot: op for the first packet and for the first one interval after the
// last acted on, NOP (counted as unsampled) for the others. With peek it
// only says which, changing and counting nothing (countUnsampled counts
// later).
func (slot *cacheSlot) sample(now int64, p *wire.Packet, peek bool) sai.FlowOp {
	if slot.op == sai.FlowOpInt && p.INT >= 0 {
		return slot.op // already carries INT: transit, the source does nothing
	}
	if peek {
		if slot.acted && now-slot.last < slot.interval {
			return sai.FlowOpNop
		}
		return slot.op
	}
	if slot.acted && now-slot.last < slot.interval {
		slot.entry.stats.UnsampledPackets++
		if slot.op == sai.FlowOpInt && slot.entry.sess != nil {
			slot.entry.sess.stats.NotInitiatedSampled++
		}
		return sai.FlowOpNop
	}
	slot.acted, slot.last = true, now
	return slot.op
}

// countUnsampled counts b when a peeking lookup found it sampled out by
// the packet interval of its entry, as sample would have.
func countUnsampled(b *pbuf) {
	e := b.entry
	if e == nil || !b.unsampled {
		return
	}
	e.stats.UnsampledPackets++
	if e.act.FlowOp == sai.FlowOpInt && e.sess != nil {
		e.sess.stats.NotInitiatedSampled++
	}
}

// flowEq is FlowKey equality field by field: the generated == on the
// whole struct goes through memequal and costs several times more.
func flowEq(a, b *wire.FlowKey) bool {
	return a.SrcPort == b.SrcPort && a.DstPort == b.DstPort && a.Proto == b.Proto && a.Src == b.Src && a.Dst == b.Dst
}

// equal is k == o (iflow is zero whenever inner is false).
func (k *matchKey) equal(o *matchKey) bool {
	return k.in == o.in && k.dscp == o.dscp && k.flags == o.flags && k.icmp == o.icmp && k.vni == o.vni &&
		k.tun == o.tun && k.inner == o.inner &&
		flowEq(&k.flow, &o.flow) && (!k.inner || flowEq(&k.iflow, &o.iflow))
}

func (k *matchKey) hash() uint64 {
	h := k.flow.Hash(uint64(k.icmp)<<48 | uint64(k.in)<<32 | uint64(k.dscp)<<8 | uint64(k.flags))
	if k.inner {
		h ^= k.iflow.Hash(uint64(k.tun)<<32|uint64(k.vni)) * 0x9e3779b97f4a7c15
	}
	return h
}

func portMatch(r sai.PortRange, p uint16) bool {
	return r.IsAny() || (p >= r.Lo && p <= r.Hi)
}

func prefixMatch(p netip.Prefix, a netip.Addr) bool {
	return !p.IsValid() || p.Contains(a)
}

func (e *wlEntry) match(k *matchKey) bool {
	m := &e.m
	if e.inPort >= 0 && int(k.in) != e.inPort {
		return false
	}
	f := &k.flow
	if !prefixMatch(m.SrcPrefix, f.Src) || !prefixMatch(m.DstPrefix, f.Dst) {
		return false
	}
	if m.IPProtocol != 0 && m.IPProtocol != f.Proto {
		return false
	}
	if !portMatch(m.L4SrcPort, f.SrcPort) || !portMatch(m.L4DstPort, f.DstPort) {
		return false
	}
	if k.dscp&m.DSCP.Mask != m.DSCP.Value || k.flags&m.TCPFlags.Mask != m.TCPFlags.Value {
		return false
	}
	if m.EtherType != 0 && m.EtherType != sai.FamilyEtherType(f.Src) {
		return false // the watchlist sees IP packets only
	}
	if uint8(k.icmp>>8)&m.ICMP.TypeMask != m.ICMP.Type || uint8(k.icmp)&m.ICMP.CodeMask != m.ICMP.Code {
		return false
	}
	in := &m.Inner
	if !in.Enabled {
		return true
	}
	if !k.inner || (in.Tunnel != sai.TunnelAny && in.Tunnel != sai.TunnelType(k.tun)) || (in.TunnelID != 0 && in.TunnelID != k.vni) {
		return false
	}
	g := &k.iflow
	if in.EtherType != 0 && in.EtherType != sai.FamilyEtherType(g.Src) {
		return false
	}
	return prefixMatch(in.SrcPrefix, g.Src) && prefixMatch(in.DstPrefix, g.Dst) &&
		(in.IPProtocol == 0 || in.IPProtocol == g.Proto) &&
		portMatch(in.L4SrcPort, g.SrcPort) && portMatch(in.L4DstPort, g.DstPort)
}

// parseInner parses the packet inside a VXLAN, VXLAN-GPE, Geneve, GRE or
// GTP-U tunnel into in: the tunnel and whether there was an IP packet in it.
func (s *Switch) parseInner(data []byte, p *wire.Packet, in *wire.Packet) (wire.Tunneled, bool) {
	return s.innerParser.ParseInner(data, p, in)
}

// lookup classifies b: the watchlist entry (nil if none), the effective
// flow op and the route, through the flow cache.
func (s *Switch) lookup(c *compiled, b *pbuf, peek bool) (*wlEntry, sai.FlowOp, int, int) {
	p := &b.pkt
	k := matchKey{in: uint16(b.in), flow: p.Flow}
	if c.needDSCP && p.L3 >= 0 {
		k.dscp = dscpOf(b.data, p)
	}
	if c.needFlags && p.Flow.Proto == wire.ProtoTCP {
		at := p.L4 + 13
		if p.Proto != wire.ProtoTCP {
			at = p.Next + 13 // NPT 2: TCP header behind the INT stack
		}
		if at > 13 && at < p.End {
			k.flags = b.data[at]
		}
	}
	if at := p.L3 + p.IPHeaderLen; c.needICMP && (p.Proto == wire.ProtoICMP || p.Proto == wire.ProtoICMPv6) && p.L3 >= 0 && at+2 <= p.End {
		k.icmp = binary.BigEndian.Uint16(b.data[at:])
	}
	if c.needInner {
		var t wire.Tunneled
		t, k.inner = s.parseInner(b.data, p, &s.inner)
		if k.inner {
			k.vni, k.tun, k.iflow = t.ID, t.Kind, s.inner.Flow
		}
	}
	h := k.hash()
	slot := &s.cache[h&s.cacheMask]
	same := slot.key.equal(&k)
	if slot.gen == s.gen && same {
		op := slot.op
		b.unsampled = false
		if slot.interval != 0 {
			op = slot.sample(b.tIn, p, peek)
			b.unsampled = op == sai.FlowOpNop
		}
		return slot.entry, op, int(slot.route), int(slot.port)
	}
	var ent *wlEntry
	if !c.isTelemetry(&k.flow) {
		for _, e := range c.entries {
			if e.match(&k) {
				ent = e
				break
			}
		}
	}
	op := sai.FlowOpNop
	if ent != nil {
		op = ent.act.FlowOp
		if pct := ent.act.FlowSamplePercent; op != sai.FlowOpNop && pct < 100 && (h>>32)%100 >= uint64(pct) {
			op = sai.FlowOpNop
		}
	}
	b.unsampled = false
	route, port := s.route(p, h)
	last, acted := slot.last, slot.acted && same
	*slot = cacheSlot{gen: s.gen, key: k, entry: ent, op: op, route: int32(route), port: int32(port), last: last, acted: acted}
	if op != sai.FlowOpNop && ent.act.PacketInterval != 0 {
		slot.interval = int64(ent.act.PacketInterval)
		op = slot.sample(b.tIn, p, peek)
		b.unsampled = op == sai.FlowOpNop
	}
	return ent, op, route, port
}

// isTelemetry reports whether f is a telemetry report to a collector of
// one of the report sessions: this node's or another node's, never watched.
func (c *compiled) isTelemetry(f *wire.FlowKey) bool {
	if f.Proto != wire.ProtoUDP || len(c.telemetry) == 0 {
		return false
	}
	_, ok := c.telemetry[collector{f.Dst, f.DstPort}]
	return ok
}

// replyEntry is the watchlist entry matching the reverse of b's flow as
// it would enter through b's egress port (b leaves through a sink port: a
// reply to a flow from outside the domain), with b's own DSCP and TCP
// flags; nil when none.
func (s *Switch) replyEntry(c *compiled, b *pbuf) *wlEntry {
	p := &b.pkt
	f := p.Flow
	k := matchKey{in: uint16(b.out), flow: wire.FlowKey{Src: f.Dst, Dst: f.Src, SrcPort: f.DstPort, DstPort: f.SrcPort, Proto: f.Proto}}
	if c.needDSCP {
		k.dscp = dscpOf(b.data, p)
	}
	if c.needFlags {
		k.flags = b.data[p.L4+13]
	}
	for _, e := range c.entries {
		if e.match(&k) {
			return e
		}
	}
	return nil
}

// dscpOf is the DSCP of the IP packet p in data.
func dscpOf(data []byte, p *wire.Packet) uint8 {
	if p.IPVersion == 4 {
		return data[p.L3+1] >> 2
	}
	return uint8(binary.BigEndian.Uint16(data[p.L3:])>>4) >> 2
}

package collector

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// MaxHops is the largest number of hops decoded from one INT stack; deeper
// stacks are decoded up to this many hops (top of stack first) and flagged.
const MaxHops = 16

// Legacy says which INT header format an INTStack was decoded from.
type Legacy uint8

const (
	INTv21  Legacy = iota // INT v2.1 (version 2)
	INT05                 // INT 0.5 over TCP/UDP (Host-INT)
	INT2016               // INT 2016 over VXLAN-GPE
)

// INTStack is an INT header and its metadata stack found in a packet, in
// one normalised form for every supported version.
type INTStack struct {
	Present bool
	Format  Legacy
	Encap   spec.Encap
	// Type is the INT header type: TypeMD, TypeMX or TypeDestination.
	Type                              spec.HeaderType
	Version                           uint8
	D, E, M                           bool
	HopML                             uint8 // words per hop (INT 0.5/2016: instruction count)
	RemainingHops                     uint8
	Instructions                      wire.Instructions
	DomainID, DSInstructions, DSFlags uint16
	// HasSeq is set for Host-INT stacks (INT 0.5 type 3), which carry a
	// per-flow sequence number under the stack.
	HasSeq bool
	Seq    uint32
	// Hops holds the decoded hops, top of stack (most recent) first; it
	// aliases the decoder's buffer. TotalHops is how many the stack has
	// (more than len(Hops) only when the stack is deeper than MaxHops).
	TotalHops int
	Hops      []wire.HopMetadata
	// Cut is set when the embedded packet's truncation cut the stack:
	// Hops are the whole hops before the cut, the oldest are missing.
	Cut bool
}

// Report is one decoded individual telemetry report, normalised across
// Telemetry Report v2.0 and 0.5. Slices alias the decoder's buffers and are
// valid only during the Handler call.
type Report struct {
	Version uint8 // report format version: 2, or 0 for TR 0.5
	HWID    uint8
	Seq     uint32
	NodeID  uint32
	// Index is the report's position in its packet (0-based).
	Index int
	// RepType and InType are the v2.0 code points; TR 0.5 next protocols
	// are mapped onto them (local and drop headers are RepType INT, the
	// inner frame is Ethernet, Host-INT's inner packet IPv4).
	RepType    spec.RepType
	InType     spec.InType
	D, Q, F, I bool
	// HasMD says the report carries the node's own metadata in MD
	// (MD.Valid says which fields). MD.NodeID is not used: the node is
	// NodeID. For TR 0.5 local reports HopLatency is the egress minus the
	// ingress timestamp.
	HasMD                        bool
	MD                           wire.HopMetadata
	HasDrop                      bool
	DropQueueID, DropReason      uint8
	DomainID, DSMdBits, DSStatus uint16
	DS                           []byte // domain-specific report metadata
	Inner                        []byte
	// InnerErr is set when the inner packet could not be decoded (the
	// report itself is still valid).
	InnerErr error
	HasFlow  bool
	Flow     wire.FlowKey
	// NoPorts is set when the flow's ports are unknown: INT over UDP with
	// NPT 2 whose original L4 header the truncation cut off.
	NoPorts bool
	// Tunnel is set when the packet is a VXLAN, VXLAN-GPE, Geneve, GRE or
	// GTP-U tunnel's with an IP packet inside: Flow is then that inner
	// packet's, TunnelID the VNI, GRE key or TEID, Outer the tunnel's.
	Tunnel   wire.TunnelKind
	TunnelID uint32
	Outer    wire.FlowKey
	// TTL is the inner IP packet's TTL or hop limit (with HasFlow).
	TTL uint8
	INT INTStack

	// raw is set instead of INT.Hops for the collector's own sink reports
	// (Decoder.rawHops): the whole hops of the stack, left undecoded for
	// Collector.mdPathRaw.
	raw rawStack
	// key is Flow's index key when hasKey is set (innerFast reads it from
	// the packet; otherwise the collector derives it from Flow).
	key    flowKeyBits
	hasKey bool
	// flowInKey is set when innerFast left Flow unset for the
	// collector's own decoding (Decoder.keyOnly): key, IPv4 outside
	// tunnels, holds it whole.
	flowInKey bool
	// mdp, when set, holds the report metadata in place (laid out as
	// Decoder.repLayout) instead of MD: a sink report the collector
	// aggregates with mdPathRaw, which alone reads it (see decodeV2).
	mdp unsafe.Pointer
}

// rawStack is an INT-MD stack left in the packet: n whole hops of hopLen
// bytes, top of stack first, laid out as layout (which selects the node
// ID). decodeV21 sets it only with n > 0, len(b) == n*hopLen and the
// layout's fields within hopLen bytes; mdPathRaw reads it unchecked.
type rawStack struct {
	layout    *hopLayout
	b         []byte
	hopLen, n int
}

// Handler receives each decoded report.
type Handler interface {
	HandleReport(r *Report)
}

// Decoder decodes telemetry report payloads. It keeps scratch state, so
// it must not be used concurrently; the zero value is not ready, use
// NewDecoder.
type Decoder struct {
	// Parser finds INT v2.1 in inner packets. INT over TCP/UDP without a
	// configured marking is still found when the bytes after the L4 header
	// form a consistent INT v2.1 shim and header. Its AllowTruncated and
	// AllowCutINT are always set while decoding: embedded packets are
	// parsed in place, truncated.
	Parser wire.Parser
	// INT05Port is the Host-INT UDP-extension port; INT05DSCP/Mask the
	// DSCP marking of INT 0.5 over TCP/UDP (mask 0 disables).
	INT05Port                uint16
	INT05DSCP, INT05DSCPMask uint8

	rep    Report
	hops   [MaxHops]wire.HopMetadata
	layout hopLayout // of the last INT-MD stack's bitmap
	// repLayout is that of the last report metadata bitmap (bits 0-14).
	repLayout hopLayout
	v21       v21Cache
	pkt       wire.Packet
	tunPkt    wire.Packet // a tunnelled packet's inner packet
	// rawHops is set while the collector decodes for itself (no OnReport):
	// the hops of sink reports' INT-MD stacks (I, D and Q clear) are then
	// left in Report.raw for the fused decode and path aggregation.
	rawHops bool
	// noFast turns innerFast off (tests compare it with the parser path).
	noFast bool
	// fullReset turns resetHead off (tests compare it with resetReport).
	fullReset bool
	// keyOnly is set for a packet the collector decodes for itself with
	// resetHead (decodeV2's pend): innerFast then leaves Report.Flow to
	// the key bits, which find an existing flow alone.
	keyOnly bool
	// lazy is set while the report being decoded was cleared by
	// resetHead: its inner packet's fields are still the previous
	// report's until resetInner or innerFast's cached-header path
	// overwrites them. mdInst is the bitmap whose fields alone Report.MD
	// holds, when mdLazy is set.
	lazy, mdLazy bool
	mdInst       wire.Instructions
	// intHeld is set while Report.INT is v21.st and Report.raw's layout,
	// hopLen and n the cached header's: innerFast's cached-header path
	// set them, and nothing wrote either since (resetHead leaves them).
	intHeld bool
	// sink is set while innerFast runs for a v2.0 report whose stack the
	// collector may leave raw (rawHops, I, D and Q clear): the cached
	// header's path is taken only then.
	sink bool
}

// DefaultDSCP and DefaultDSCPMask are intd's default INT v2.1 DSCP
// marking (the marking-config defaults of the intd-int model).
const (
	DefaultDSCP     = 0x17
	DefaultDSCPMask = 0x3f
)

// NewDecoder returns a decoder with intd's default markings: INT v2.1 by
// DSCP 0x17/0x3f, VXLAN-GPE and Geneve on their IANA ports with the
// spec's code points; INT 0.5 on Host-INT's UDP port 33122 and DSCP
// 0x01/0x01. INT v2.1 over TCP/UDP without the DSCP is still found by a
// consistent shim.
func NewDecoder() *Decoder {
	return &Decoder{
		Parser: wire.Parser{DSCP: DefaultDSCP, DSCPMask: DefaultDSCPMask,
			VXLANGPEPort: spec.PortVXLANGPE, GenevePort: spec.PortGeneve, AllowTruncated: true, AllowCutINT: true},
		INT05Port:     wire.HostINTDefaultPort,
		INT05DSCP:     0x01,
		INT05DSCPMask: 0x01,
	}
}

// Decode decodes a telemetry report UDP payload (v2.0 or 0.5) and calls h
// for every individual report. It returns the number of reports delivered
// and the error that stopped decoding, if any; reports before a malformed
// one are still delivered. It does not allocate.
func (d *Decoder) Decode(payload []byte, h Handler) (int, error) {
	if len(payload) < 1 {
		return 0, wire.ErrTruncated
	}
	switch payload[0] >> 4 {
	case wire.Version2:
		return d.decodeV2(payload, h)
	case 0:
		return d.decodeTR05(payload, h)
	}
	return 0, wire.ErrBadVersion
}

// decodeRaw is Decode for the collector's own aggregation: with raw, sink
// reports' hops are left undecoded in Report.raw.
func (d *Decoder) decodeRaw(payload []byte, h Handler, raw bool) (int, error) {
	d.rawHops = raw
	n, err := d.Decode(payload, h)
	d.rawHops = false
	return n, err
}

func (d *Decoder) decodeV2(payload []byte, h Handler) (int, error) {
	g, err := wire.DecodeGroupHeader(payload)
	if err != nil {
		return 0, err
	}
	// The individual reports, walked in place (as wire.ReportReader).
	b := payload[wire.GroupHeaderLen:]
	n := 0
	r := &d.rep
	// The collector's own receive path calls HandleReport directly, not
	// through the interface.
	c, _ := h.(*Collector)
	// Reports cleared whole, or by resetHead, which leaves the group
	// header's fields as the packet's first report set them.
	full := !d.rawHops || d.fullReset
	// For the collector's own decoding the metadata of a sink report that
	// takes the fused path (Report.raw, no drop) is left in place
	// (Report.mdp) for mdPathRaw: nothing else reads it, the Report is
	// seen by no one else. Nor are the fields HandleReport does not read
	// (Inner, DS, DomainID, DSMdBits, DSStatus) set then.
	pend := c != nil && !full && c.dec == d
	d.keyOnly = pend
	for len(b) > 0 {
		if len(b) < wire.ReportHeaderLen {
			return n, wire.ErrTruncated
		}
		typ, inType, length, mdWords, flags := spec.RepType(b[0]>>4), spec.InType(b[0]&0x0f), b[1], int(b[2]), b[3]
		end := len(b)
		if length != wire.ReportLengthToEnd {
			end = wire.ReportHeaderLen + int(length)*4
			if end > len(b) {
				return n, wire.ErrTruncated
			}
		}
		body := b[wire.ReportHeaderLen:end]
		b = b[end:]
		var repMdBits uint16
		var md []byte
		if typ == spec.RepINT {
			mdLen := mdWords * 4
			if len(body) < wire.INTReportFixedLen+mdLen {
				return n, wire.ErrBadLength
			}
			repMdBits = binary.BigEndian.Uint16(body)
			if rb := wire.Instructions(repMdBits) &^ spec.InstChecksumComplement; d.repLayout.inst != rb || d.repLayout.fixed == 0 {
				d.repLayout.set(rb)
			}
			if d.repLayout.repMdWords(repMdBits) > mdWords {
				return n, wire.ErrBadLength
			}
			md = body[:wire.INTReportFixedLen+mdLen]
			body = body[wire.INTReportFixedLen+mdLen:]
		}
		if full {
			d.resetReport(r)
		} else {
			d.resetHead(r, typ == spec.RepINT, pend)
		}
		if full || n == 0 {
			r.Version, r.HWID, r.Seq, r.NodeID = g.Version, g.HWID, g.Seq, g.NodeID
		}
		r.Index = n
		r.RepType, r.InType = typ, inType
		r.D, r.Q, r.F, r.I = flags&0x80 != 0, flags&0x40 != 0, flags&0x20 != 0, flags&0x10 != 0
		d.sink = d.rawHops && flags&0xd0 == 0 // D, Q and I in one test
		if typ == spec.RepINT {
			fixed := md
			md = md[wire.INTReportFixedLen:len(md):len(md)]
			r.HasMD = true
			if !pend {
				// The fixed part (one load), the metadata and the
				// domain-specific part, which the collector's own
				// decoding (pend) does not read.
				fx := binary.BigEndian.Uint64(fixed)
				r.DomainID, r.DSMdBits, r.DSStatus = uint16(fx>>32), uint16(fx>>16), uint16(fx)
				d.reportMD(r, md, d.lazy)
				r.DS = md[d.repLayout.repMdWords(repMdBits)*4:]
			}
			if repMdBits&wire.RepDrop != 0 {
				w := binary.BigEndian.Uint32(md[d.repLayout.fixed:])
				r.HasDrop, r.DropQueueID, r.DropReason = true, uint8(w>>24), uint8(w>>16)
			}
		}
		if !pend {
			r.Inner = body // innerFast and the general path take body
		}
		r.flowInKey = false
		switch inType {
		case spec.InEthernet, spec.InIPv4, spec.InIPv6:
			eth := inType == spec.InEthernet
			if d.noFast || !d.innerFast(r, body, eth) {
				d.decodeInnerGeneral(r, body, eth, true)
			}
		default:
			d.resetInner(r)
		}
		if pend && typ == spec.RepINT {
			if r.raw.layout != nil && !r.HasDrop {
				r.mdp = unsafe.Pointer(unsafe.SliceData(md)) // at least repLayout.fixed bytes
			} else {
				// Cleared as resetHead would have, unless the bitmap's
				// fields alone are there (mdLazy).
				if !d.mdLazy || d.mdInst != d.repLayout.inst {
					r.MD = wire.HopMetadata{}
				}
				d.reportMD(r, md, true)
			}
		}
		if c != nil {
			c.HandleReport(r)
		} else {
			h.HandleReport(r)
		}
		n++
	}
	return n, nil
}

// deliver hands r to h: a direct call for the collector itself (its
// receive path), an interface call otherwise.
func deliver(h Handler, r *Report) {
	if c, ok := h.(*Collector); ok {
		c.HandleReport(r)
		return
	}
	h.HandleReport(r)
}

// reportMD decodes the report metadata md (at least repLayout.fixed
// bytes) into r.MD; lazy says r was cleared by resetHead.
func (d *Decoder) reportMD(r *Report, md []byte, lazy bool) {
	d.repLayout.decodeReport(md, &r.MD)
	d.mdLazy, d.mdInst = lazy, d.repLayout.inst
	r.MD.Valid &^= spec.InstNodeID // reserved: the node is in the group header
}

// resetReport clears r for the next report.
func (d *Decoder) resetReport(r *Report) {
	*r = Report{}
	r.INT.Hops = d.hops[:0]
	d.lazy, d.mdLazy, d.intHeld = false, false, false
	d.sink = false // set by decodeV2 per report; TR 0.5 takes decodeV21
}

// resetHead is resetReport for a v2.0 report of the collector's own
// decoding (rawHops, nothing else sees the Report), clearing only what the
// header and metadata walk does not overwrite: a sink's report mostly
// takes innerFast's cached-header path, which sets every field of the
// inner packet, so those are cleared by resetInner where another path
// runs; the metadata, which the same bitmap fills field for field, only
// when the bitmap changes (intRep: the report carries metadata), or,
// with pend, later (decodeV2 may leave it in place).
func (d *Decoder) resetHead(r *Report, intRep, pend bool) {
	r.HasMD = false
	r.HasDrop, r.DropQueueID, r.DropReason = false, 0, 0
	r.DomainID, r.DSMdBits, r.DSStatus = 0, 0, 0
	r.DS, r.InnerErr = nil, nil
	r.NoPorts, r.Tunnel, r.TunnelID = false, wire.TunnelNone, 0
	r.Outer = wire.FlowKey{}
	r.mdp = nil
	if !intRep || !pend && (!d.mdLazy || d.mdInst != d.repLayout.inst) {
		r.MD = wire.HopMetadata{}
		d.mdLazy = false
	}
	d.lazy = true
}

// resetInner clears, after resetHead, the fields of the inner packet.
func (d *Decoder) resetInner(r *Report) {
	if !d.lazy {
		return
	}
	r.HasFlow, r.Flow, r.TTL = false, wire.FlowKey{}, 0
	r.key, r.hasKey = flowKeyBits{}, false
	d.resetINT(r)
}

// resetINT clears, after resetHead, the inner packet's INT stack.
func (d *Decoder) resetINT(r *Report) {
	if !d.lazy {
		return
	}
	r.INT = INTStack{Hops: d.hops[:0]}
	r.raw = rawStack{}
	d.lazy, d.intHeld = false, false
}

func (d *Decoder) decodeTR05(payload []byte, h Handler) (int, error) {
	t, err := wire.DecodeTR05(payload)
	if err != nil {
		return 0, err
	}
	r := &d.rep
	d.resetReport(r)
	r.Version, r.HWID, r.Seq = t.Header.Version, t.Header.HWID, t.Header.Seq
	r.D, r.Q, r.F = t.Header.Dropped, t.Header.Congested, t.Header.TrackedFlow
	r.Inner = t.Inner
	ts := uint64(t.Header.IngressTimestamp)
	switch t.Header.NextProto {
	case spec.TR05Ethernet:
		r.InType = spec.InEthernet
	case spec.TR05Local, spec.TR05Drop:
		s := &t.Switch
		r.RepType, r.InType, r.NodeID, r.HasMD = spec.RepINT, spec.InEthernet, s.SwitchID, true
		r.MD = wire.HopMetadata{IngressPort: s.IngressPort, EgressPort: s.EgressPort,
			QueueID: s.QueueID, IngressTimestamp: ts,
			Valid: spec.InstL1Interfaces | spec.InstIngressTimestamp}
		if t.Header.NextProto == spec.TR05Local {
			r.MD.QueueOccupancy = s.QueueOccupancy
			r.MD.EgressTimestamp = uint64(s.EgressTimestamp)
			r.MD.HopLatency = s.EgressTimestamp - t.Header.IngressTimestamp
			r.MD.Valid |= spec.InstQueue | spec.InstEgressTimestamp | spec.InstHopLatency
		} else {
			r.HasDrop, r.DropQueueID, r.DropReason = true, s.QueueID, s.DropReason
		}
	case spec.TR05IPv4:
		r.InType = spec.InIPv4
		r.NodeID = t.ReporterID
		r.HasMD = true
		r.MD = wire.HopMetadata{IngressTimestamp: ts, Valid: spec.InstIngressTimestamp}
	case spec.TR05HostDrop:
		r.InType = spec.InNone
	}
	switch r.InType {
	case spec.InEthernet:
		d.decodeInner(r, t.Inner, true, true)
	case spec.InIPv4:
		d.decodeInner(r, t.Inner, false, true)
	}
	deliver(h, r)
	return 1, nil
}

// decodeInner parses an embedded (possibly truncated) packet: its flow and
// any INT stack. fromReport says the packet was embedded by a sink, so INT
// 0.5 blocks have no tail header.
// The packet is parsed in place (the parser accepts IP length fields
// beyond the bytes present) and never written to.
func (d *Decoder) decodeInner(r *Report, buf []byte, ethernet, fromReport bool) {
	if !d.noFast && fromReport && d.innerFast(r, buf, ethernet) {
		return
	}
	d.decodeInnerGeneral(r, buf, ethernet, fromReport)
}

// decodeInnerGeneral is decodeInner without innerFast.
func (d *Decoder) decodeInnerGeneral(r *Report, buf []byte, ethernet, fromReport bool) {
	d.resetInner(r)
	d.decodePacket(r, buf, ethernet, fromReport)
	// INT carried in the tunnel header (VXLAN-GPE, Geneve, GRE) too: the
	// nodes key such flows on the inner packet, and so does the collector.
	if r.HasFlow && r.InnerErr == nil {
		d.tunnel(r, buf)
	}
}

// tunnel makes a tunnelled packet's flow the inner packet's (the tunnel
// carries many: user equipment in one GTP-U tunnel, pods in one VXLAN
// network), keeping the tunnel, its id and the outer flow.
func (d *Decoder) tunnel(r *Report, buf []byte) {
	in := &d.tunPkt
	t, ok := wire.FlowInner(buf, &d.pkt, in)
	if !ok {
		return
	}
	r.Outer, r.Flow, r.Tunnel, r.TunnelID = r.Flow, in.Flow, t.Kind, t.ID
}

// decodePacket is decodeInner's general path.
func (d *Decoder) decodePacket(r *Report, buf []byte, ethernet, fromReport bool) {
	d.Parser.AllowTruncated, d.Parser.AllowCutINT = true, true
	p := &d.pkt
	var err, err2 error
	if ethernet {
		err = d.Parser.Parse(buf, p)
	} else {
		err = d.Parser.ParseIP(buf, p)
	}
	if err != nil {
		// The INT the markings announce is malformed or cut off: keep the
		// flow. A stack cut by the report's truncation of the packet (its
		// IP length runs past the bytes present) is no error.
		q := d.Parser
		q.NoINT = true
		if ethernet {
			err2 = q.Parse(buf, p)
		} else {
			err2 = q.ParseIP(buf, p)
		}
		if err2 != nil || !(fromReport && p.Truncated && (errors.Is(err, wire.ErrTruncated) || errors.Is(err, wire.ErrBadLength))) {
			r.InnerErr = err
		}
		if err2 != nil || p.L3 < 0 {
			return
		}
		d.setFlow(r, buf, p)
		return
	}
	if p.L3 < 0 {
		return
	}
	d.setFlow(r, buf, p)
	st := &r.INT
	if p.HasINT() {
		st.Cut = p.INTCut
		r.NoPorts = p.INTCut && p.Encap == spec.EncapUDPPort && (buf[p.Shim]>>2)&3 == 2 && p.Next+4 > len(buf)
		r.InnerErr = d.decodeV21(r, st, buf[p.INT:p.INT+p.INTLen], p.Encap, p.INTType)
		return
	}
	if p.L4 < 0 || (p.Proto != wire.ProtoUDP && p.Proto != wire.ProtoTCP) {
		return
	}
	off := p.L4 + p.L4HeaderLen
	if p.Proto == wire.ProtoUDP && p.Flow.DstPort == spec.PortVXLANGPE && off+wire.VXLANLen <= len(buf) &&
		buf[off]&wire.GPEFlagP != 0 && buf[off+3] == wire.GPENextProtoINT2016 {
		r.InnerErr = decode2016(st, buf[off+wire.VXLANLen:])
		return
	}
	if off+4 > len(buf) {
		return
	}
	// INT 0.5 (Host-INT): UDP-extension port, or DSCP marking.
	isUDPExt := p.Proto == wire.ProtoUDP && d.INT05Port != 0 && p.Flow.DstPort == d.INT05Port
	if isUDPExt || (d.INT05DSCPMask != 0 && ipDSCP(buf, p)&d.INT05DSCPMask == d.INT05DSCP && looksINT05(buf[off:])) {
		r.InnerErr = d.decodeINT05(st, r, buf[off:], isUDPExt, fromReport)
		return
	}
	// Unconfigured INT v2.1 over TCP/UDP: accept a consistent shim.
	if looksV21Shim(buf[off:]) {
		s, _ := wire.DecodeShim(buf[off:])
		l := int(s.Length) * 4
		p.Encap, p.Shim, p.INT, p.INTType, p.INTLen, p.Next = spec.EncapDSCP, off, off+wire.ShimLen, s.Type, l, off+wire.ShimLen+l
		if s.NPT != 0 {
			p.Encap = spec.EncapUDPPort
		}
		if s.NPT == 1 {
			r.Flow.DstPort = s.Value
		}
		r.InnerErr = d.decodeV21(r, st, buf[p.INT:p.INT+p.INTLen], p.Encap, p.INTType)
	}
}

// setFlow sets r's flow and TTL from the parsed packet p.
func (d *Decoder) setFlow(r *Report, buf []byte, p *wire.Packet) {
	r.HasFlow, r.Flow = true, p.Flow
	if p.IPVersion == 4 {
		r.TTL = buf[p.L3+8]
	} else {
		r.TTL = buf[p.L3+7]
	}
}

// DecodeFrame decodes a captured Ethernet frame carrying INT (not a report)
// into st, and returns the frame's flow.
func (d *Decoder) DecodeFrame(frame []byte, st *INTStack) (wire.FlowKey, bool, error) {
	r := &d.rep
	d.resetReport(r)
	d.decodeInner(r, frame, true, false)
	*st = r.INT
	return r.Flow, r.HasFlow, r.InnerErr
}

func ipDSCP(b []byte, p *wire.Packet) uint8 {
	if p.IPVersion == 4 {
		return b[p.L3+1] >> 2
	}
	return uint8(binary.BigEndian.Uint16(b[p.L3:])>>4) >> 2
}

// looksINT05 checks an INT 0.5 shim and header: known type, reserved byte
// zero, length covering the header and version 0.
func looksINT05(b []byte) bool {
	if len(b) < 4+wire.INT05HeaderLen {
		return false
	}
	return b[0] >= wire.INT05TypeHopByHop && b[0] <= wire.INT05TypeHostSeq &&
		int(b[2])*4 >= 4+wire.INT05HeaderLen && b[4]>>4 == 0
}

// looksV21Shim checks for an INT v2.1 TCP/UDP shim followed by an MD or MX
// header of version 2 that fits the shim length.
func looksV21Shim(b []byte) bool {
	if len(b) < wire.ShimLen+wire.MDHeaderLen {
		return false
	}
	s, _ := wire.DecodeShim(b)
	if (s.Type != spec.TypeMD && s.Type != spec.TypeMX) || s.NPT > 2 || b[0]&3 != 0 {
		return false
	}
	l := int(s.Length) * 4
	if l < wire.MDHeaderLen || len(b) < wire.ShimLen+l || b[4]>>4 != wire.Version2 {
		return false
	}
	if s.Type == spec.TypeMD {
		ml := int(b[6] & 0x1f)
		inst := wire.Instructions(binary.BigEndian.Uint16(b[8:]))
		if x := l - wire.MDHeaderLen; ml == 0 || inst.Words() > ml || hopsIn(x, ml)*ml*4 != x {
			return false
		}
	}
	return true
}

// decodeV21 decodes the INT v2.1 header and stack b (of type typ, carried
// as encap) into st, which is r.INT.
func (d *Decoder) decodeV21(r *Report, st *INTStack, b []byte, encap spec.Encap, typ spec.HeaderType) error {
	d.intHeld = false
	st.Present, st.Format, st.Encap, st.Type = true, INTv21, encap, typ
	if typ == spec.TypeMX {
		h, err := wire.DecodeMXHeader(b)
		if err != nil {
			return err
		}
		st.Version, st.D, st.Instructions = h.Version, h.Discard, h.Instructions
		st.DomainID, st.DSInstructions, st.DSFlags = h.DomainID, h.DSInstructions, h.DSFlags
		return nil
	}
	// INT-MD: the header and the stack, as wire.DecodeMD (the source-only
	// metadata after the last whole hop is left out), decoded in place.
	if len(b) < wire.MDHeaderLen {
		return wire.ErrTruncated
	}
	inst := wire.Instructions(binary.BigEndian.Uint16(b[4:]))
	hopML := b[2] & 0x1f
	st.Version, st.D, st.E, st.M = b[0]>>4, b[0]&0x08 != 0, b[0]&0x04 != 0, b[0]&0x02 != 0
	st.HopML, st.RemainingHops, st.Instructions = hopML, b[3], inst
	st.DomainID, st.DSInstructions, st.DSFlags = binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
	if st.Version != wire.Version2 {
		return wire.ErrBadVersion
	}
	if inst.Words() > int(hopML) {
		return wire.ErrBadLength
	}
	hl := int(hopML) * 4
	if hl == 0 {
		return nil
	}
	stack := b[wire.MDHeaderLen:]
	n := hopsIn(len(stack), int(hopML))
	if (len(stack)-n*hl)%4 != 0 && !st.Cut {
		return wire.ErrBadLength
	}
	st.TotalHops = n
	n = min(n, MaxHops)
	st.Hops = d.hops[:n]
	if d.layout.inst != inst || d.layout.fixed == 0 {
		d.layout.set(inst)
		// The cached header's stack is left raw with the layout it
		// had: a new one ends it.
		d.v21.ok = false
	}
	if d.rawHops && n > 0 && d.layout.node >= 0 && !r.I && !r.D && !r.Q && !st.Cut {
		// A sink report for the collector: hops decoded with the path,
		// which reads them unchecked (as rawStack says).
		if d.layout.fixed > hl {
			panic("collector: INT hop layout beyond its hop length")
		}
		st.Hops = d.hops[:0]
		// Field by field: a composite literal goes through a stack
		// temporary whose copy stalls on store forwarding.
		r.raw.layout, r.raw.b, r.raw.hopLen, r.raw.n = &d.layout, stack[:n*hl:n*hl], hl, n
		return nil
	}
	for i := range st.Hops {
		d.layout.decode(stack[i*hl:(i+1)*hl:(i+1)*hl], &st.Hops[i])
	}
	return nil
}

func decode2016(st *INTStack, b []byte) error {
	found := false
	_, err := wire.Decode2016GPE(b, func(g *wire.Legacy2016GPE) {
		if found || (g.Type != wire.INT05TypeHopByHop && g.Type != wire.INT05TypeDest) {
			return
		}
		found = true
		st.Present, st.Format, st.Encap, st.Version = true, INT2016, spec.EncapVXLANGPE, g.Header.Version
		st.Type = spec.TypeMD
		if g.Type == wire.INT05TypeDest {
			st.Type = spec.TypeDestination
		}
		st.E, st.HopML, st.Instructions = g.Header.HopsExceeded, g.Header.InstCount, g.Header.Instructions
		if g.Header.MaxHops > g.Header.TotalHops {
			st.RemainingHops = g.Header.MaxHops - g.Header.TotalHops
		}
		st.TotalHops = g.Hops()
		for i := 0; i < st.TotalHops && i < MaxHops; i++ {
			var m wire.INT05HopMetadata
			g.Decode2016Hop(i, &m)
			st.Hops = append(st.Hops, int05Hop(&m, g.Header.Instructions))
		}
	})
	if err == nil && !found {
		return wire.ErrNoINT
	}
	return err
}

func (d *Decoder) decodeINT05(st *INTStack, r *Report, b []byte, udpExt, fromReport bool) error {
	x, err := wire.DecodeINT05(b, wire.INT05Options{NoTail: fromReport})
	if err == wire.ErrBadLength {
		// Some senders keep the tail in reports, or drop it in data.
		if y, err2 := wire.DecodeINT05(b, wire.INT05Options{NoTail: !fromReport}); err2 == nil {
			x, err = y, nil
		}
	}
	if err != nil {
		return err
	}
	st.Present, st.Format, st.Version = true, INT05, x.Header.Version
	st.Encap = spec.EncapDSCP
	if udpExt {
		st.Encap = spec.EncapUDPPort
	}
	st.Type = spec.TypeMD
	if x.Shim.Type == wire.INT05TypeDest {
		st.Type = spec.TypeDestination
	}
	st.E = x.Header.HopsExceeded
	st.HopML = x.Header.InstCount
	if x.Header.MaxHops > x.Header.TotalHops {
		st.RemainingHops = x.Header.MaxHops - x.Header.TotalHops
	}
	st.Instructions = x.Header.Instructions
	st.HasSeq, st.Seq = x.HasSeq, x.Seq
	st.TotalHops = x.Hops()
	for i := 0; i < st.TotalHops && i < MaxHops; i++ {
		var m wire.INT05HopMetadata
		x.DecodeINT05Hop(i, &m)
		st.Hops = append(st.Hops, int05Hop(&m, x.Header.Instructions))
	}
	// The original transport header follows the tail in the UDP-extension
	// variant of data packets.
	if x.HasTail && udpExt && (x.Tail.Proto == wire.ProtoUDP || x.Tail.Proto == wire.ProtoTCP) && len(b) >= x.Len+4 {
		r.Flow.Proto = x.Tail.Proto
		r.Flow.SrcPort = binary.BigEndian.Uint16(b[x.Len:])
		r.Flow.DstPort = binary.BigEndian.Uint16(b[x.Len+2:])
	}
	return nil
}

func int05Hop(m *wire.INT05HopMetadata, inst wire.Instructions) wire.HopMetadata {
	h := wire.HopMetadata{
		NodeID: m.SwitchID, IngressPort: m.IngressPort, EgressPort: m.EgressPort,
		HopLatency: m.HopLatency, QueueID: m.QueueID, QueueOccupancy: m.QueueOccupancy,
		IngressTimestamp: uint64(m.IngressTimestamp), EgressTimestamp: uint64(m.EgressTimestamp),
		TxUtilization: m.TxUtilization,
	}
	// Bit 6 is queue congestion in INT 0.5, not L2 ports: not carried over.
	h.Valid = inst & (spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue |
		spec.InstIngressTimestamp | spec.InstEgressTimestamp | spec.InstEgressTxUtil)
	return h
}

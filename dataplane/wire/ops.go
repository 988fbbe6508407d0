package wire

import (
	"encoding/binary"

	"github.com/intd-project/intd/sai/spec"
)

// In-place packet edits at INT source, transit and sink nodes. All of them
// keep the IPv4 header checksum and the TCP/UDP checksum valid with
// incremental updates (RFC 1624) and leave a zero UDP checksum zero (RFC 768,
// RFC 6936). A frame grows into its spare capacity, so callers keep
// headroom at the end of their buffers (cap > len).

// edit accumulates the checksum effect of changes to a parsed packet.
type edit struct {
	pkt   []byte
	p     *Packet
	l4    int    // start of the segment covered by the L4 checksum, -1 if none
	csum  int    // offset of the L4 checksum field, -1 if none or zero UDP checksum
	delta uint32 // one's complement change of the L4 segment sum
}

func newEdit(pkt []byte, p *Packet) edit {
	e := edit{pkt: pkt, p: p, l4: -1, csum: -1}
	if p.L4 < 0 {
		return e
	}
	e.l4 = p.L4
	switch p.Proto {
	case ProtoUDP:
		if binary.BigEndian.Uint16(pkt[p.L4+6:]) != 0 {
			e.csum = p.L4 + 6
		}
	case ProtoTCP:
		e.csum = p.L4 + 16
	}
	return e
}

// set16 rewrites the 16-bit word at off (which must have the same parity
// as the L4 header when it lies inside the L4 segment).
func (e *edit) set16(off int, v uint16) {
	old := binary.BigEndian.Uint16(e.pkt[off:])
	binary.BigEndian.PutUint16(e.pkt[off:], v)
	if e.l4 >= 0 && off >= e.l4 && off != e.csum {
		e.delta += uint32(^old) + uint32(v)
	}
}

// ipLength changes the IP length fields by n bytes and fixes the IPv4
// header checksum.
func (e *edit) ipLength(n int) {
	l3 := e.p.L3
	if e.p.IPVersion == 4 {
		old := binary.BigEndian.Uint16(e.pkt[l3+2:])
		nl := uint16(int(old) + n)
		binary.BigEndian.PutUint16(e.pkt[l3+2:], nl)
		ck := binary.BigEndian.Uint16(e.pkt[l3+10:])
		binary.BigEndian.PutUint16(e.pkt[l3+10:], UpdateChecksum(ck, old, nl))
	} else {
		old := binary.BigEndian.Uint16(e.pkt[l3+4:])
		binary.BigEndian.PutUint16(e.pkt[l3+4:], uint16(int(old)+n))
	}
	e.p.End += n
}

// l4Length accounts for an L4 segment growing by n bytes: the pseudo-header
// length (TCP and UDP) and the UDP length field.
func (e *edit) l4Length(n int) {
	if e.l4 < 0 {
		return
	}
	segLen := e.p.End - e.p.L4 // before ipLength updated End
	e.delta += uint32(^uint16(segLen)) + uint32(uint16(segLen+n))
	if e.p.Proto == ProtoUDP {
		e.set16(e.p.L4+4, uint16(segLen+n))
	}
}

// setIPv4Word rewrites a 16-bit word of the IPv4 header and updates the
// header checksum.
func (e *edit) setIPv4Word(off int, v uint16) {
	l3 := e.p.L3
	old := binary.BigEndian.Uint16(e.pkt[l3+off:])
	binary.BigEndian.PutUint16(e.pkt[l3+off:], v)
	ck := binary.BigEndian.Uint16(e.pkt[l3+10:])
	binary.BigEndian.PutUint16(e.pkt[l3+10:], UpdateChecksum(ck, old, v))
}

func (e *edit) finish() {
	if e.csum < 0 {
		return
	}
	ck := AdjustChecksum(binary.BigEndian.Uint16(e.pkt[e.csum:]), e.delta)
	if ck == 0 && e.p.Proto == ProtoUDP {
		ck = 0xffff // zero would mean "no checksum"
	}
	binary.BigEndian.PutUint16(e.pkt[e.csum:], ck)
}

// shimLength adds words to the INT length field of the shim (or Geneve
// option) and to the enclosing tunnel lengths.
func (e *edit) shimLength(words int) error {
	s := e.p.Shim
	switch e.p.Encap {
	case spec.EncapGeneve:
		w := e.pkt[s+3]
		nl := int(w&0x1f) + words
		gl := int(e.pkt[e.p.Tunnel]&0x3f) + words
		if nl > MaxGeneveOptionWords || nl < 0 || gl > 63 {
			return ErrGeneveTooLong
		}
		e.set16(s+2, uint16(e.pkt[s+2])<<8|uint16(w&0xe0|uint8(nl)))
		t := e.p.Tunnel
		e.set16(t, uint16(e.pkt[t]&0xc0|uint8(gl))<<8|uint16(e.pkt[t+1]))
	default:
		nl := int(e.pkt[s+1]) + words
		if nl > maxShimWord || nl < 0 {
			return ErrBadLength
		}
		e.set16(s, uint16(e.pkt[s])<<8|uint16(nl))
	}
	return nil
}

// insert opens n bytes at off, moving the rest of the frame up.
func insertGap(pkt []byte, off, n int) ([]byte, error) {
	if cap(pkt)-len(pkt) < n {
		return pkt, ErrNoRoom
	}
	old := len(pkt)
	pkt = pkt[:old+n]
	copy(pkt[off+n:], pkt[off:old])
	return pkt, nil
}

func (p *Packet) shiftAfter(off, n int) {
	if p.Next >= off {
		p.Next += n
	}
}

// PushOptions tune PushHop.
type PushOptions struct {
	// UseChecksumComplement makes the hop keep the L4 checksum unchanged by
	// filling the Checksum Complement metadata (bit 15) instead of updating
	// the checksum field. Ignored when bit 15 is not requested.
	UseChecksumComplement bool
	// DSWords is the domain-specific metadata length per hop, in words,
	// when the node knows the domain; otherwise Hop ML minus the baseline
	// length is padded with all ones.
	DSWords int
}

// PushHop is the INT-MD transit (or source) step: it pushes this node's
// metadata m on top of the stack of the parsed packet p, decrements the
// Remaining Hop Count and fixes every length and checksum. When the
// remaining hop count is zero it sets the E bit and returns ErrHopLimit.
// When the frame has no spare capacity it sets the M bit and returns
// ErrNoRoom. p is updated to describe the new frame.
func PushHop(pkt []byte, p *Packet, m *HopMetadata, opt PushOptions) ([]byte, error) {
	if p.INT < 0 || p.INTType != spec.TypeMD {
		return pkt, ErrNoINT
	}
	if out, ok, err := pushHopFast(pkt, p, m, opt); ok {
		return out, err
	}
	return pushHop(pkt, p, m, opt)
}

// pushHopFast is PushHop for the common case: IPv4 or IPv6, INT not in
// Geneve, hops remaining, room in the frame, the shim length in range and
// no checksum complement to fill. It does the same edits as pushHop with
// the offsets in registers and the hop's checksum contribution summed while
// the hop is written. ok is false (and nothing is touched) when the packet
// needs the general path.
func pushHopFast(pkt []byte, p *Packet, m *HopMetadata, opt PushOptions) (_ []byte, ok bool, _ error) {
	l3, l4, intOff, shim := p.L3, p.L4, p.INT, p.Shim
	if p.Encap == spec.EncapGeneve || shim < 0 || l3 < 0 || (l4 >= 0 && (intOff-l4)&1 != 0) {
		return pkt, false, nil
	}
	if len(pkt) < intOff+MDHeaderLen || len(pkt) < shim+2 || len(pkt) < l3+12 || (l4 >= 0 && shim < l4) {
		return pkt, false, nil
	}
	h := pkt[intOff : intOff+MDHeaderLen]
	rh := h[3]
	inst := Instructions(binary.BigEndian.Uint16(h[4:]))
	hopML := int(h[2] & 0x1f)
	if rh == 0 || (inst&spec.InstChecksumComplement != 0 && opt.UseChecksumComplement) {
		return pkt, false, nil
	}
	words := inst.Words()
	ds := hopML - words
	if ds < 0 || opt.DSWords > ds {
		return pkt, true, ErrBadLength
	}
	n := hopML * 4
	old := len(pkt)
	shimLen := int(pkt[shim+1]) + hopML
	if cap(pkt)-old < n || shimLen > maxShimWord {
		return pkt, false, nil
	}
	csum := -1
	if l4 >= 0 {
		if len(pkt) < l4+UDPLen {
			return pkt, false, nil
		}
		switch p.Proto {
		case ProtoUDP:
			if binary.BigEndian.Uint16(pkt[l4+6:]) != 0 {
				csum = l4 + 6
			}
		case ProtoTCP:
			csum = l4 + 16
		}
		if csum+2 > len(pkt) {
			return pkt, false, nil
		}
	}
	at := intOff + MDHeaderLen
	pkt = pkt[:old+n]
	copy(pkt[at+n:], pkt[at:old])
	_, hs, err := putHopWords(pkt[at:at+n], inst, words, ds, m)
	if err != nil {
		copy(pkt[at:], pkt[at+n:]) // undo the gap
		return pkt[:len(pkt)-n], true, err
	}
	p.INTLen += n
	p.shiftAfter(at, n)
	// The L4 checksum, if any, covers every word changed below: the shim
	// and INT header lie after the L4 header (checked above) and the UDP
	// length is not the checksum field. delta is only used when csum >= 0.
	delta := fold64(hs)
	// Remaining Hop Count (low byte of the word at INT+2).
	w := uint16(pkt[intOff+2])<<8 | uint16(rh)
	pkt[intOff+3] = rh - 1
	delta += uint32(^w) + uint32(w-1)
	// Shim length (low byte of the word at the shim).
	w = uint16(pkt[shim])<<8 | uint16(pkt[shim+1])
	nw := w&0xff00 | uint16(shimLen)
	pkt[shim+1] = uint8(shimLen)
	delta += uint32(^w) + uint32(nw)
	end := p.End
	if l4 >= 0 {
		segLen := end - l4
		delta += uint32(^uint16(segLen)) + uint32(uint16(segLen+n))
		if p.Proto == ProtoUDP {
			w = binary.BigEndian.Uint16(pkt[l4+4:])
			nw = uint16(segLen + n)
			binary.BigEndian.PutUint16(pkt[l4+4:], nw)
			delta += uint32(^w) + uint32(nw)
		}
	}
	ip := pkt[l3:]
	if p.IPVersion == 4 {
		w = binary.BigEndian.Uint16(ip[2:])
		nw = uint16(int(w) + n)
		binary.BigEndian.PutUint16(ip[2:], nw)
		ck := binary.BigEndian.Uint16(ip[10:])
		binary.BigEndian.PutUint16(ip[10:], UpdateChecksum(ck, w, nw))
	} else {
		w = binary.BigEndian.Uint16(ip[4:])
		binary.BigEndian.PutUint16(ip[4:], uint16(int(w)+n))
	}
	p.End = end + n
	if csum >= 0 {
		ck := AdjustChecksum(binary.BigEndian.Uint16(pkt[csum:]), delta)
		if ck == 0 && p.Proto == ProtoUDP {
			ck = 0xffff
		}
		binary.BigEndian.PutUint16(pkt[csum:], ck)
	}
	return pkt, true, nil
}

// fold64 reduces a 64-bit one's complement accumulator to at most 17 bits,
// keeping it non-zero when it was non-zero.
func fold64(s uint64) uint32 {
	s = s&0xffffffff + s>>32
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint32(s)
}

// pushHop is the general PushHop: Geneve, hop limit, no room, checksum
// complement.
func pushHop(pkt []byte, p *Packet, m *HopMetadata, opt PushOptions) ([]byte, error) {
	if p.INT < 0 || p.INTType != spec.TypeMD {
		return pkt, ErrNoINT
	}
	if p.L4 >= 0 && (p.INT-p.L4)&1 != 0 {
		return pkt, ErrUnsupported
	}
	h := pkt[p.INT:]
	inst := Instructions(binary.BigEndian.Uint16(h[4:]))
	hopML := int(h[2] & 0x1f)
	e := newEdit(pkt, p)
	if h[3] == 0 {
		e.set16(p.INT, uint16(h[0]|0x04)<<8|uint16(h[1])) // E bit
		e.finish()
		return pkt, ErrHopLimit
	}
	ds := hopML - inst.Words()
	if ds < 0 || opt.DSWords > ds {
		return pkt, ErrBadLength
	}
	n := hopML * 4
	at := p.INT + MDHeaderLen
	if p.Encap == spec.EncapGeneve && int(pkt[p.Shim+3]&0x1f)+hopML > MaxGeneveOptionWords {
		return pkt, ErrGeneveTooLong
	}
	grown, err := insertGap(pkt, at, n)
	if err != nil {
		e.set16(p.INT, uint16(h[0]|0x02)<<8|uint16(h[1])) // M bit
		e.finish()
		return pkt, err
	}
	pkt = grown
	e.pkt = pkt
	if _, err := PutHop(pkt[at:at+n], inst, ds, m); err != nil {
		copy(pkt[at:], pkt[at+n:]) // undo the gap
		return pkt[:len(pkt)-n], err
	}
	p.INTLen += n
	p.shiftAfter(at, n)
	e.delta += Sum(0, pkt[at:at+n])
	e.set16(p.INT+2, uint16(pkt[p.INT+2])<<8|uint16(pkt[p.INT+3]-1))
	if err := e.shimLength(hopML); err != nil {
		return pkt, err
	}
	e.l4Length(n)
	e.ipLength(n)
	if inst&spec.InstChecksumComplement != 0 && opt.UseChecksumComplement && e.csum >= 0 {
		// Choose the complement so the segment sum does not change at all:
		// the checksum field stays valid untouched.
		cc := at + n - 4
		e.delta += Negate(0xffff) + Negate(0xffff) // the all-ones placeholder is replaced
		binary.BigEndian.PutUint32(pkt[cc:], uint32(^Fold(e.delta)))
		return pkt, nil
	}
	e.finish()
	return pkt, nil
}

// SinkOptions tune Strip.
type SinkOptions struct {
	// RestoreDSCP copies the original DSCP from an NPT 0 shim back into the
	// IP header (optional in the spec).
	RestoreDSCP bool
}

// Strip is the INT sink step for INT over TCP/UDP, GRE, VXLAN-GPE and
// Geneve: it removes the shim, INT header and stack (and the probe marker,
// or the UDP header added for NPT 2), restores the original UDP port, IP
// protocol or tunnel next protocol, and fixes lengths and checksums. The
// caller reads what it needs from the INT stack before calling Strip. The
// outer GRE encapsulation added by a source (G=1) is left for the caller to
// remove. p no longer describes INT afterwards.
func Strip(pkt []byte, p *Packet, opt SinkOptions) ([]byte, error) {
	if p.INT < 0 {
		return pkt, ErrNoINT
	}
	e := newEdit(pkt, p)
	start, end := p.Shim, p.Next
	switch p.Encap {
	case spec.EncapDSCP, spec.EncapProbeMarker, spec.EncapUDPPort:
		s, _ := DecodeShim(pkt[p.Shim:])
		if p.Encap == spec.EncapProbeMarker {
			start -= ProbeLen
		}
		switch s.NPT {
		case spec.NPTNone:
			if opt.RestoreDSCP && p.Encap == spec.EncapDSCP {
				tos := uint16(s.DSCP()) << 2
				if p.IPVersion == 4 {
					w := binary.BigEndian.Uint16(pkt[p.L3:])
					e.setIPv4Word(0, w&0xff03|tos)
				} else if p.IPVersion == 6 {
					w := binary.BigEndian.Uint16(pkt[p.L3:])
					binary.BigEndian.PutUint16(pkt[p.L3:], w&0xf03f|tos<<4)
				}
			}
		case spec.NPTUDPPort:
			e.set16(p.L4+2, s.Value)
		case spec.NPTIPProto:
			return stripNPT2(pkt, p, s)
		}
	case spec.EncapGRE:
		s, _ := DecodeGREShim(pkt[p.Shim:])
		binary.BigEndian.PutUint16(pkt[p.Tunnel+2:], s.NextProto)
	case spec.EncapVXLANGPE:
		s, _ := DecodeGPEShim(pkt[p.Shim:])
		e.set16(p.Tunnel+2, uint16(pkt[p.Tunnel+2])<<8|uint16(s.NextProto))
	case spec.EncapGeneve:
		t := p.Tunnel
		words := (end - start) / 4
		e.set16(t, uint16(pkt[t]&0xc0|(pkt[t]&0x3f-uint8(words)))<<8|uint16(pkt[t+1]))
	default:
		return pkt, ErrUnsupported
	}
	n := end - start
	if e.l4 >= 0 && (start-e.l4)&1 != 0 {
		return pkt, ErrUnsupported
	}
	e.delta += Negate(Fold(fold64(Sum64(0, pkt[start:end]))))
	e.l4Length(-n)
	e.ipLength(-n)
	e.finish()
	copy(pkt[start:], pkt[end:])
	pkt = pkt[:len(pkt)-n]
	p.Encap, p.Shim, p.INT, p.INTLen, p.Next = spec.EncapNone, -1, -1, 0, -1
	return pkt, nil
}

// stripNPT2 removes the UDP header the source inserted in front of the
// original L4 header, with the INT stack, and restores the IP protocol.
// The original L4 checksum stays valid: its pseudo-header is unchanged.
func stripNPT2(pkt []byte, p *Packet, s Shim) ([]byte, error) {
	start, end := p.L4, p.Next
	n := end - start
	switch p.IPVersion {
	case 4:
		l3 := p.L3
		w := binary.BigEndian.Uint16(pkt[l3+8:])
		e := edit{pkt: pkt, p: p, l4: -1, csum: -1}
		e.setIPv4Word(8, w&0xff00|uint16(s.OrigProto()))
		e.ipLength(-n)
	case 6:
		if p.IPHeaderLen != IPv6Len {
			return pkt, ErrUnsupported // next header lives in an extension header
		}
		pkt[p.L3+6] = s.OrigProto()
		e := edit{pkt: pkt, p: p, l4: -1, csum: -1}
		e.ipLength(-n)
	default:
		return pkt, ErrUnsupported
	}
	copy(pkt[start:], pkt[end:])
	pkt = pkt[:len(pkt)-n]
	p.Proto = s.OrigProto()
	p.Encap, p.Shim, p.INT, p.INTLen, p.Next = spec.EncapNone, -1, -1, 0, -1
	return pkt, nil
}

// SourceOptions say how an INT source marks INT over TCP/UDP.
type SourceOptions struct {
	Encap spec.Encap // spec.EncapDSCP, spec.EncapUDPPort or spec.EncapProbeMarker
	// NPT for spec.EncapUDPPort: spec.NPTUDPPort (UDP only) or spec.NPTIPProto (new UDP header).
	NPT         spec.NPT
	DSCP, Mask  uint8  // spec.EncapDSCP: new DSCP = old&^Mask | DSCP&Mask
	UDPPort     uint16 // spec.EncapUDPPort: INT_TBD destination port
	ProbeMarker uint64 // spec.EncapProbeMarker
}

// TCPSourceOverhead is the most INT a source marking as opt says adds to
// a TCP segment over a path of hops INT-MD hops (of hopWords words each;
// none for INT-MX): the shim and INT header, the stack, and what the
// marking adds (the probe marker; with UDP-port marking the UDP header of
// NPT 2, which TCP always gets). 0 when opt marks nothing. An MSS that
// leaves this much room under the MTU lets every segment carry INT.
func TCPSourceOverhead(typ spec.HeaderType, hops, hopWords int, opt *SourceOptions) int {
	n := ShimLen + MDHeaderLen // MX header: the same 12 bytes
	if typ == spec.TypeMD {
		n += hops * hopWords * 4
	}
	switch opt.Encap {
	case spec.EncapDSCP:
	case spec.EncapProbeMarker:
		n += ProbeLen
	case spec.EncapUDPPort:
		n += UDPLen
	default:
		return 0
	}
	return n
}

// InsertINT is the INT source step for INT over TCP/UDP: it inserts the
// shim and the pre-encoded INT header plus source metadata hdr (an INT-MD
// header with the source's hop, or an INT-MX header with source-inserted
// metadata) after the L4 header of the parsed packet, marking the packet as
// opt says. For NPT 2 a new UDP header with an entropy source port (hash of
// the original 5-tuple) and a zero checksum goes in front of the original
// L4 header. p describes the new frame afterwards.
func InsertINT(pkt []byte, p *Packet, typ spec.HeaderType, hdr []byte, opt *SourceOptions) ([]byte, error) {
	if p.INT >= 0 {
		return pkt, ErrBadType // already has INT
	}
	if p.L3 < 0 || len(hdr)%4 != 0 || len(hdr)/4 > maxShimWord || len(hdr) < MDHeaderLen {
		return pkt, ErrUnsupported
	}
	origDSCP := uint8(0)
	if p.IPVersion == 4 {
		origDSCP = pkt[p.L3+1] >> 2
	} else {
		origDSCP = uint8(binary.BigEndian.Uint16(pkt[p.L3:])>>4) >> 2
	}
	shim := Shim{Type: typ, Length: uint8(len(hdr) / 4)}
	if opt.Encap == spec.EncapUDPPort && opt.NPT == spec.NPTIPProto {
		return insertNPT2(pkt, p, shim, hdr, opt)
	}
	if p.L4 < 0 {
		return pkt, ErrUnsupported
	}
	at := p.L4 + p.L4HeaderLen
	pre := 0
	switch opt.Encap {
	case spec.EncapDSCP:
		shim.Value = ShimDSCP(origDSCP)
	case spec.EncapProbeMarker:
		pre = ProbeLen
	case spec.EncapUDPPort:
		if p.Proto != ProtoUDP || opt.NPT != spec.NPTUDPPort {
			return pkt, ErrUnsupported
		}
		shim.NPT = spec.NPTUDPPort
		shim.Value = binary.BigEndian.Uint16(pkt[p.L4+2:])
	default:
		return pkt, ErrUnsupported
	}
	n := pre + ShimLen + len(hdr)
	e := newEdit(pkt, p)
	grown, err := insertGap(pkt, at, n)
	if err != nil {
		return pkt, err
	}
	pkt = grown
	e.pkt = pkt
	if pre > 0 {
		binary.BigEndian.PutUint64(pkt[at:], opt.ProbeMarker)
	}
	_ = shim.Put(pkt[at+pre:])
	copy(pkt[at+pre+ShimLen:], hdr)
	e.delta += fold64(Sum64(0, pkt[at:at+n]))
	switch opt.Encap {
	case spec.EncapDSCP:
		tos := (origDSCP&^opt.Mask | opt.DSCP&opt.Mask) << 2
		if p.IPVersion == 4 {
			w := binary.BigEndian.Uint16(pkt[p.L3:])
			e.setIPv4Word(0, w&0xff03|uint16(tos))
		} else {
			w := binary.BigEndian.Uint16(pkt[p.L3:])
			binary.BigEndian.PutUint16(pkt[p.L3:], w&0xf03f|uint16(tos)<<4)
		}
	case spec.EncapUDPPort:
		e.set16(p.L4+2, opt.UDPPort)
	}
	e.l4Length(n)
	e.ipLength(n)
	e.finish()
	p.Encap, p.Shim, p.INT, p.INTType = opt.Encap, at+pre, at+pre+ShimLen, typ
	p.INTLen, p.Next = len(hdr), at+n
	return pkt, nil
}

func insertNPT2(pkt []byte, p *Packet, shim Shim, hdr []byte, opt *SourceOptions) ([]byte, error) {
	if p.IPVersion == 6 && p.IPHeaderLen != IPv6Len {
		return pkt, ErrUnsupported
	}
	shim.NPT, shim.Value = spec.NPTIPProto, uint16(p.Proto)
	at := p.L3 + p.IPHeaderLen // works for any payload, e.g. IPsec or IP-in-IP
	n := UDPLen + ShimLen + len(hdr)
	grown, err := insertGap(pkt, at, n)
	if err != nil {
		return pkt, err
	}
	pkt = grown
	segLen := p.End - at + n
	u := pkt[at:]
	binary.BigEndian.PutUint16(u[0:], p.Flow.EntropyPort())
	binary.BigEndian.PutUint16(u[2:], opt.UDPPort)
	binary.BigEndian.PutUint16(u[4:], uint16(segLen))
	binary.BigEndian.PutUint16(u[6:], 0) // zero checksum, as recommended (RFC 6936 for IPv6)
	_ = shim.Put(u[UDPLen:])
	copy(u[UDPLen+ShimLen:], hdr)
	e := edit{pkt: pkt, p: p, l4: -1, csum: -1}
	if p.IPVersion == 4 {
		w := binary.BigEndian.Uint16(pkt[p.L3+8:])
		e.setIPv4Word(8, w&0xff00|ProtoUDP)
	} else {
		pkt[p.L3+6] = ProtoUDP
	}
	e.ipLength(n)
	p.Proto, p.L4, p.L4HeaderLen = ProtoUDP, at, UDPLen
	p.Encap, p.Shim, p.INT, p.INTType = spec.EncapUDPPort, at+UDPLen, at+UDPLen+ShimLen, shim.Type
	p.INTLen, p.Next = len(hdr), at+n
	return pkt, nil
}

package collector

import (
	"encoding/binary"
	"net/netip"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// innerFast is decodeInner (fromReport) for the common report inner
// packet, without wire.Parser and wire.Packet: Ethernet without VLAN tags
// or a bare IP packet, IPv4, a first fragment, UDP or TCP, where the
// parser's configured markings find no INT or a well-formed INT v2.1
// stack by DSCP (probe marker off, no tunnel or INT port matched) and no INT 0.5 or INT 2016
// marking applies. Only the flow key, TTL and an unmarked INT v2.1 stack
// are left to find. It returns false, with r untouched, for anything else
// (errors included), which the general path handles.
func (d *Decoder) innerFast(r *Report, b []byte, ethernet bool) bool {
	c := &d.Parser
	l3 := 0
	if ethernet {
		l3 = wire.EthernetLen
	}
	if c.ProbeMarker != 0 || len(b) < l3+wire.IPv4MinLen {
		return false
	}
	if ethernet && binary.BigEndian.Uint16(b[12:]) != wire.EtherTypeIPv4 {
		return false
	}
	h := b[l3 : l3+wire.IPv4MinLen]
	ihl, total := fastIPv4(h, len(b)-l3)
	if ihl == 0 {
		return false
	}
	end, l4, proto := l3+min(total, len(b)-l3), l3+ihl, h[9]
	l4Len := fastL4Len(proto)
	if l4Len == 0 || end < l4+l4Len {
		return false
	}
	ports := binary.BigEndian.Uint32(b[l4:])
	dport := uint16(ports)
	if proto == wire.ProtoUDP {
		if d.generalUDPPort(dport) {
			return false
		}
	} else {
		l4Len = int(b[l4+12]>>4) * 4
		if l4Len < wire.TCPMinLen || end < l4+l4Len {
			return false
		}
	}
	off := l4 + l4Len
	// INT marked by DSCP: here only when a whole, consistent stack is
	// where the parser would look; the rest (errors, truncation) is the
	// parser's.
	marked := c.DSCPMask != 0 && (h[1]>>2)&c.DSCPMask == c.DSCP
	hit := false // the header is the cached one (v21Cache)
	if marked {
		// The cached header first: it holds the shim's NPT (bits 2-3 of
		// its first byte, the low byte of the word) and is 16 bytes.
		if hit = d.v21.match(b[off:end]); hit {
			if c.TCPBeforeOptions && proto == wire.ProtoTCP || d.v21.shim&0x0c != 0 {
				return false
			}
		} else if c.TCPBeforeOptions && proto == wire.ProtoTCP || off+4 > end || b[off]&0x0c != 0 || !looksV21Shim(b[off:end]) {
			return false
		}
		// A v2.1 shim here (type MD or MX: first byte 0x10 or more) is
		// no INT 0.5 shim (types 1 to 3), whatever the INT 0.5 marking:
		// the INT 0.5 check below could not match.
	} else if d.int05Marked(h, b, off) {
		// INT 0.5 by DSCP: left to the general path.
		return false
	}
	r.HasFlow = true
	if d.keyOnly {
		// The key bits below are the flow: HandleReport makes the key
		// only for a new flow.
		r.flowInKey = true
	} else {
		// Field by field: a composite literal goes through a stack
		// temporary whose copy stalls on store forwarding.
		f := &r.Flow
		f.Src, f.Dst = netip.AddrFrom4([4]byte(h[12:16])), netip.AddrFrom4([4]byte(h[16:20]))
		f.SrcPort, f.DstPort, f.Proto = uint16(ports>>16), dport, proto
	}
	r.TTL = h[8]
	// The index key from the same bytes (no tunnel: tag 0).
	r.key.addrs, r.key.rest, r.key.tag = binary.BigEndian.Uint64(h[12:20]), uint64(ports)<<16|uint64(proto), 0
	r.hasKey = true
	// Every field of the inner packet but its INT stack is set: after
	// resetHead, the stack is cleared on the way out, unless the cached
	// header sets it whole.
	if !marked {
		if off+4 > len(b) {
			d.resetINT(r)
			return true
		}
		if hit = d.v21.match(b[off:]); !hit && !looksV21Shim(b[off:]) {
			d.resetINT(r)
			return true
		}
	}
	if hit && d.sink {
		// What the shim and decodeV21 give, known from the same bytes:
		// the header is cached only when its stack was left raw, and
		// d.layout is still its layout (a new one clears the cache).
		v := &d.v21
		if v.npt1 {
			r.setDstPort(v.port)
		}
		n, hl, at := v.n, v.hl, off+wire.ShimLen+wire.MDHeaderLen
		if !d.intHeld { // the previous report's, when it took this path too
			r.INT = v.st
			r.raw.layout, r.raw.hopLen, r.raw.n = &d.layout, hl, n
			d.intHeld = true
		}
		r.raw.b = b[at : at+n*hl : at+n*hl]
		d.lazy = false
		return true
	}
	d.resetINT(r)
	// Unconfigured INT v2.1 over TCP/UDP: a consistent shim.
	s, _ := wire.DecodeShim(b[off:])
	l := int(s.Length) * 4
	e := spec.EncapDSCP
	if s.NPT != 0 {
		e = spec.EncapUDPPort
	}
	if s.NPT == 1 {
		r.setDstPort(s.Value)
	}
	r.InnerErr = d.decodeV21(r, &r.INT, b[off+wire.ShimLen:off+wire.ShimLen+l], e, s.Type)
	if r.InnerErr == nil && r.raw.layout != nil {
		d.v21.fill(b[off:], s, &r.INT, &r.raw)
	}
	return true
}

// fastIPv4 returns the header and total lengths of the IPv4 header h
// (room bytes from its start) when innerFast takes it: version 4, a
// consistent header length, a first fragment; ihl 0 otherwise.
func fastIPv4(h []byte, room int) (ihl, total int) {
	ihl, total = int(h[0]&0x0f)*4, int(binary.BigEndian.Uint16(h[2:]))
	if h[0]>>4 != 4 || ihl < wire.IPv4MinLen || total < ihl || room < ihl || binary.BigEndian.Uint16(h[6:])&0x1fff != 0 {
		return 0, 0
	}
	return ihl, total
}

// fastL4Len is the smallest header of the L4 protocols innerFast takes,
// 0 for the others.
func fastL4Len(proto uint8) int {
	switch proto {
	case wire.ProtoUDP:
		return wire.UDPLen
	case wire.ProtoTCP:
		return wire.TCPMinLen
	}
	return 0
}

// int05Marked reports whether the packet with IPv4 header h and L4
// payload at off carries INT 0.5 by DSCP.
func (d *Decoder) int05Marked(h, b []byte, off int) bool {
	return off+4 <= len(b) && d.INT05DSCPMask != 0 && (h[1]>>2)&d.INT05DSCPMask == d.INT05DSCP && looksINT05(b[off:])
}

// setDstPort sets the flow's destination port: the original one an INT
// over UDP shim (NPT 1) carries.
func (r *Report) setDstPort(p uint16) {
	r.Flow.DstPort = p
	r.key.rest = r.key.rest&^0xffff0000 | uint64(p)<<16
}

// v21Cache is the last INT v2.1 shim and MD header (16 bytes) that
// innerFast found consistent and decodeV21 left as a raw stack, while
// Decoder.layout is that stack's: the same
// bytes pass the same checks and give the same INTStack, so the next
// report with them (most of a sink's) skips both; its hops are decoded
// with the path.
type v21Cache struct {
	shim, md uint64 // the 16 header bytes as two words
	need     int    // bytes the header says follow from the shim on
	npt1     bool   // the shim carries the original destination port
	port     uint16
	st       INTStack
	hl, n    int
	ok       bool
}

// match reports whether b starts with the cached header and holds what
// its length needs: looksV21Shim(b) would then be true.
func (v *v21Cache) match(b []byte) bool {
	return v.ok && len(b) >= wire.ShimLen+wire.MDHeaderLen && len(b) >= v.need &&
		binary.LittleEndian.Uint64(b) == v.shim && binary.LittleEndian.Uint64(b[8:]) == v.md
}

// fill caches the header at the start of b, its shim s and what
// decodeV21 made of it (st, raw).
func (v *v21Cache) fill(b []byte, s wire.Shim, st *INTStack, raw *rawStack) {
	v.shim, v.md = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	v.need, v.npt1, v.port = wire.ShimLen+int(s.Length)*4, s.NPT == 1, s.Value
	v.st, v.hl, v.n, v.ok = *st, raw.hopLen, raw.n, true
}

// generalUDPPort reports whether UDP to dport may hold INT or a tunnel,
// which only the general path decodes.
func (d *Decoder) generalUDPPort(dport uint16) bool {
	c := &d.Parser
	switch dport {
	case 0, c.UDPPort, c.VXLANGPEPort, c.GenevePort, d.INT05Port,
		spec.PortVXLANGPE, spec.PortGeneve, wire.PortVXLAN, wire.PortGTPU:
		return true
	}
	return false
}

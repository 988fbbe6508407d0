package ebpf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
)

// dwlInPort is the test port in generated entries: both nodes receive on
// "in" (the ebpf node's is a port in the maps only, see newBPFNode).
const dwlInPort = "in"

// dwlEntry is one watchlist entry created on both nodes.
type dwlEntry struct {
	a   sai.WatchlistEntryAttrs
	oid [2]sai.OID // soft, ebpf
}

// dwlPacket is one generated packet; other means it arrives on another port
// than the test port (soft: "lo", ebpf: ingress ifindex 0).
type dwlPacket struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
	dscp, flags  uint8
	other        bool
	tun          *dwlTunnel // nil: not tunnelled
	frame        []byte
}

// dwlTunnel is a tunnelled packet's encapsulation and inner packet; the
// outer header is the dwlPacket's (UDP to the tunnel's port, or GRE).
type dwlTunnel struct {
	wiretest.Tunnel
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
	notGPDU      bool // a GTP-U message other than G-PDU: no inner packet
}

func (t *dwlTunnel) String() string {
	s := fmt.Sprintf(" in %v id %#x eth %v (%v > %v proto %d)", t.Kind, t.ID, t.Eth,
		netip.AddrPortFrom(t.src, t.sport), netip.AddrPortFrom(t.dst, t.dport), t.proto)
	if t.Kind == wire.TunnelGTPU {
		s += fmt.Sprintf(" ext %d seq %v", t.GTPUExt, t.GTPUSeq)
		if t.notGPDU {
			s += " not a G-PDU"
		}
	}
	return s
}

func (p *dwlPacket) String() string {
	s := fmt.Sprintf("%v > %v proto %d dscp %#x", netip.AddrPortFrom(p.src, p.sport), netip.AddrPortFrom(p.dst, p.dport), p.proto, p.dscp)
	if p.proto == wire.ProtoTCP {
		s += fmt.Sprintf(" flags %#02x", p.flags)
	}
	if p.other {
		s += " from another port"
	}
	if p.tun != nil {
		s += p.tun.String()
	}
	return s
}

// dwlL4 is an L4 header and 8 bytes of payload: TCP, UDP, or the ports
// (ICMP: type and code) in front.
func dwlL4(proto uint8, sport, dport uint16, flags uint8) []byte {
	var l4 []byte
	switch proto {
	case wire.ProtoTCP:
		l4 = make([]byte, wire.TCPMinLen+8)
		_ = wire.TCPHeader{SrcPort: sport, DstPort: dport, Seq: 1, Ack: 2, Flags: flags, Window: 512}.Put(l4)
	case wire.ProtoUDP:
		l4 = make([]byte, wire.UDPLen+8)
		_ = wire.UDPHeader{SrcPort: sport, DstPort: dport, Length: uint16(len(l4))}.Put(l4)
	default:
		l4 = make([]byte, 16)
		l4[0], l4[1], l4[2], l4[3] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	}
	copy(l4[len(l4)-8:], "wl-fuzz!")
	return l4
}

// build sets frame from the other fields, with valid checksums.
func (p *dwlPacket) build() {
	if t := p.tun; t != nil {
		inner := wiretest.IPFrame(t.src.String(), t.dst.String(), t.proto, 0, dwlL4(t.proto, t.sport, t.dport, 0x18), true)[wire.EthernetLen:]
		tt := t.Tunnel
		tt.SrcPort = p.sport
		if t.notGPDU {
			tt.GTPUMsg = 1 // echo request
		}
		p.frame = wiretest.TunnelFrame(tt, p.src.String(), p.dst.String(), p.dscp, inner)
		return
	}
	var l4 []byte
	switch p.proto {
	case wire.ProtoTCP:
		l4 = make([]byte, wire.TCPMinLen+8)
		_ = wire.TCPHeader{SrcPort: p.sport, DstPort: p.dport, Seq: 1, Ack: 2, Flags: p.flags, Window: 512}.Put(l4)
	case wire.ProtoUDP:
		l4 = make([]byte, wire.UDPLen+8)
		_ = wire.UDPHeader{SrcPort: p.sport, DstPort: p.dport, Length: uint16(len(l4))}.Put(l4)
	default: // SCTP (ports in front) or ICMP: neither dataplane reads ports
		l4 = make([]byte, 16)
		l4[0], l4[1], l4[2], l4[3] = byte(p.sport>>8), byte(p.sport), byte(p.dport>>8), byte(p.dport)
	}
	copy(l4[len(l4)-8:], "wl-fuzz!")
	p.frame = wiretest.IPFrame(p.src.String(), p.dst.String(), p.proto, p.dscp, l4, true)
}

func dwlRange(r sai.PortRange) string {
	switch {
	case r.IsAny():
		return "any"
	case r.Lo == r.Hi:
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// dwlFmtEntry describes ents[i] for failure messages (-1: no entry).
func dwlFmtEntry(ents []dwlEntry, i int) string {
	if i < 0 {
		return "no entry"
	}
	a := ents[i].a
	m := a.Match
	var b strings.Builder
	fmt.Fprintf(&b, "entry %d prio %d", i, a.Priority)
	dwlFmt5(&b, m.SrcPrefix, m.DstPrefix, m.IPProtocol, m.L4SrcPort, m.L4DstPort)
	if m.DSCP.Mask != 0 {
		fmt.Fprintf(&b, " dscp %#x/%#x", m.DSCP.Value, m.DSCP.Mask)
	}
	if m.TCPFlags.Mask != 0 {
		fmt.Fprintf(&b, " flags %#x/%#x", m.TCPFlags.Value, m.TCPFlags.Mask)
	}
	if m.InPort != "" {
		b.WriteString(" in-port test")
	}
	if m.EtherType != 0 {
		fmt.Fprintf(&b, " ethertype %#04x", m.EtherType)
	}
	if m.ICMP != (sai.ICMPMatch{}) {
		fmt.Fprintf(&b, " icmp %d/%#x code %d/%#x", m.ICMP.Type, m.ICMP.TypeMask, m.ICMP.Code, m.ICMP.CodeMask)
	}
	if in := m.Inner; in.Enabled {
		fmt.Fprintf(&b, " | tunnel %v id %#x", in.Tunnel, in.TunnelID)
		if in.EtherType != 0 {
			fmt.Fprintf(&b, " ethertype %#04x", in.EtherType)
		}
		dwlFmt5(&b, in.SrcPrefix, in.DstPrefix, in.IPProtocol, in.L4SrcPort, in.L4DstPort)
	}
	return b.String()
}

// dwlFmt5 describes the 5-tuple match fields that are set.
func dwlFmt5(b *strings.Builder, src, dst netip.Prefix, proto uint8, sport, dport sai.PortRange) {
	if src.IsValid() {
		fmt.Fprintf(b, " src %v", src)
	}
	if dst.IsValid() {
		fmt.Fprintf(b, " dst %v", dst)
	}
	if proto != 0 {
		fmt.Fprintf(b, " proto %d sport %s dport %s", proto, dwlRange(sport), dwlRange(dport))
	}
}

// dwlModel is the classification spelled out from the sai documentation,
// only to say in a failure which backend disagrees with it (and to log how
// much the entries overlap): the winner and the number of matching entries.
func dwlModel(ents []dwlEntry, p *dwlPacket) (int, int) {
	best, n := -1, 0
	for i := range ents {
		m := &ents[i].a.Match
		sport, dport, flags := p.sport, p.dport, p.flags
		if p.proto != wire.ProtoTCP && p.proto != wire.ProtoUDP {
			sport, dport = 0, 0 // neither dataplane parses other L4 headers
		}
		if p.proto != wire.ProtoTCP {
			flags = 0
		}
		var icmp uint16
		if p.proto == wire.ProtoICMP || p.proto == wire.ProtoICMPv6 {
			icmp = p.sport // dwlL4 puts the "ports" where ICMP has type and code
		}
		in := func(r sai.PortRange, v uint16) bool { return r.IsAny() || (r.Lo <= v && v <= r.Hi) }
		ok := (m.InPort == "" || !p.other) &&
			(!m.SrcPrefix.IsValid() || m.SrcPrefix.Contains(p.src)) &&
			(!m.DstPrefix.IsValid() || m.DstPrefix.Contains(p.dst)) &&
			(m.IPProtocol == 0 || m.IPProtocol == p.proto) &&
			in(m.L4SrcPort, sport) && in(m.L4DstPort, dport) &&
			p.dscp&m.DSCP.Mask == m.DSCP.Value && flags&m.TCPFlags.Mask == m.TCPFlags.Value &&
			(m.EtherType == 0 || m.EtherType == sai.FamilyEtherType(p.src)) &&
			uint8(icmp>>8)&m.ICMP.TypeMask == m.ICMP.Type && uint8(icmp)&m.ICMP.CodeMask == m.ICMP.Code
		if im := &m.Inner; ok && im.Enabled {
			t := p.tun
			ok = t != nil && !t.notGPDU
			if ok {
				isport, idport := t.sport, t.dport
				if t.proto != wire.ProtoTCP && t.proto != wire.ProtoUDP {
					isport, idport = 0, 0
				}
				ok = (im.Tunnel == sai.TunnelAny || im.Tunnel == sai.TunnelType(t.Kind)) &&
					(im.TunnelID == 0 || im.TunnelID == t.ID) &&
					(im.EtherType == 0 || im.EtherType == sai.FamilyEtherType(t.src)) &&
					(!im.SrcPrefix.IsValid() || im.SrcPrefix.Contains(t.src)) &&
					(!im.DstPrefix.IsValid() || im.DstPrefix.Contains(t.dst)) &&
					(im.IPProtocol == 0 || im.IPProtocol == t.proto) &&
					in(im.L4SrcPort, isport) && in(im.L4DstPort, idport)
			}
		}
		if !ok {
			continue
		}
		if n++; best < 0 || ents[i].a.Priority > ents[best].a.Priority {
			best = i
		}
	}
	return best, n
}

// dwlGen draws entries and packets from small pools so that packets often
// match several entries and priority has to decide.
type dwlGen struct {
	r        *rand.Rand
	used     map[uint16]bool // priorities in use: ties are unspecified
	widePct  int             // of the entries, fewer in larger watchlists
	innerPct int             // of the entries, with a tunnel match
	open     dwlField        // fields no entry matches
}

// dwlField is a set of the address, port and protocol fields.
type dwlField uint16

const (
	dwlSrc dwlField = 1 << iota
	dwlDst
	dwlSport
	dwlDport
	dwlISrc
	dwlIDst
	dwlISport
	dwlIDport
	dwlProto
	dwlFields = iota
)

// leaveOpen clears the fields of g.open in m (the outer protocol with
// what needs it: ports, TCP flags, ICMP).
func (g *dwlGen) leaveOpen(m *sai.WatchlistMatch) {
	for f := dwlField(1); f < 1<<dwlFields; f <<= 1 {
		if g.open&f == 0 {
			continue
		}
		switch f {
		case dwlSrc:
			m.SrcPrefix = netip.Prefix{}
		case dwlDst:
			m.DstPrefix = netip.Prefix{}
		case dwlSport:
			m.L4SrcPort = sai.PortRange{}
		case dwlDport:
			m.L4DstPort = sai.PortRange{}
		case dwlISrc:
			m.Inner.SrcPrefix = netip.Prefix{}
		case dwlIDst:
			m.Inner.DstPrefix = netip.Prefix{}
		case dwlISport:
			m.Inner.L4SrcPort = sai.PortRange{}
		case dwlIDport:
			m.Inner.L4DstPort = sai.PortRange{}
		case dwlProto:
			m.IPProtocol, m.L4SrcPort, m.L4DstPort, m.TCPFlags, m.ICMP = 0, sai.PortRange{}, sai.PortRange{}, sai.TCPFlagsMatch{}, sai.ICMPMatch{}
		}
	}
}

var (
	dwlICMP = []uint8{0, 3, 8, 11, 128, 129, 135, 136}
	// Tunnel ids: VNIs, and ids beyond 24 bits only GRE keys and
	// TEIDs have.
	dwlTunnelIDs = []uint32{1, 42, 5001, 0xffffff, 0x1000000, 0x80000001, 0xffffffff}
	dwlKinds     = []wire.TunnelKind{wire.TunnelVXLAN, wire.TunnelVXLANGPE, wire.TunnelGeneve, wire.TunnelGRE, wire.TunnelGTPU}
)

func dwlHasVNI(k wire.TunnelKind) bool { return sai.TunnelType(k).HasVNI() }

// inner returns a tunnel match.
func (g *dwlGen) inner(wide bool) sai.InnerMatch {
	pct := func(p int) bool { return g.r.IntN(100) < p }
	in := sai.InnerMatch{Enabled: true}
	if pct(60) {
		in.Tunnel = sai.TunnelType(dwlKinds[g.r.IntN(len(dwlKinds))])
	}
	if pct(60) {
		in.TunnelID = dwlTunnelIDs[g.r.IntN(len(dwlTunnelIDs))]
		if in.Tunnel.HasVNI() {
			in.TunnelID &= sai.MaxVNI
		}
	}
	fam := 4 + 2*g.r.IntN(2)
	if pct(70) {
		in.SrcPrefix = g.prefix(fam, wide)
	}
	if pct(70) {
		in.DstPrefix = g.prefix(fam, wide)
	}
	if pct(10) {
		in.EtherType = sai.FamilyEtherType(g.pool(fam))
	}
	in.IPProtocol = []uint8{0, 6, 6, 17, 17, 132}[g.r.IntN(6)]
	if in.IPProtocol != 0 {
		in.L4SrcPort, in.L4DstPort = g.portRange(), g.portRange()
	}
	return in
}

var (
	dwlPool4 = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.200"),
		netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("172.16.5.4")}
	dwlPool6 = []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:0:1::5"),
		netip.MustParseAddr("2001:db8:ffff::1"), netip.MustParseAddr("fd00::abcd:1234"),
		netip.MustParseAddr("::ffff:10.0.0.1")} // an IPv4-mapped IPv6 address must not match IPv4 prefixes
	dwlPorts = []uint16{0, 1, 2, 53, 80, 443, 1023, 1024, 4789, 8080, 32768, 65534, 65535}
)

func (g *dwlGen) pool(fam int) netip.Addr {
	if fam == 4 {
		return dwlPool4[g.r.IntN(len(dwlPool4))]
	}
	return dwlPool6[g.r.IntN(len(dwlPool6))]
}

func dwlFlipBit(a netip.Addr, bit int) netip.Addr {
	b := a.AsSlice()
	b[bit/8] ^= 0x80 >> (bit % 8)
	out, _ := netip.AddrFromSlice(b)
	return out
}

// prefix returns a prefix around a pool address: long ones for narrow
// entries, any length (/0 included) for wide ones.
func (g *dwlGen) prefix(fam int, wide bool) netip.Prefix {
	a := g.pool(fam)
	if g.r.IntN(3) == 0 {
		a = dwlFlipBit(a, g.r.IntN(a.BitLen()))
	}
	n := a.BitLen()
	switch {
	case !wide:
		n = n/4 + g.r.IntN(n-n/4+1)
	case g.r.IntN(4) == 0:
		n = 0
	default:
		n = g.r.IntN(n + 1)
	}
	return netip.PrefixFrom(a, n).Masked()
}

func (g *dwlGen) port() uint16 {
	if g.r.IntN(2) == 0 {
		return dwlPorts[g.r.IntN(len(dwlPorts))]
	}
	return uint16(g.r.UintN(65536))
}

func (g *dwlGen) portRange() sai.PortRange {
	p := g.port()
	switch g.r.IntN(20) {
	case 0, 1, 2, 3, 4, 5:
		return sai.PortRange{}
	case 6, 7, 8, 9, 10, 11:
		return sai.PortRange{Lo: p, Hi: p}
	case 12, 13, 14, 15, 16:
		return sai.PortRange{Lo: p, Hi: uint16(min(int(p)+1+g.r.IntN(16), 65535))}
	case 17:
		return sai.PortRange{Lo: p, Hi: 65535}
	case 18:
		return sai.PortRange{Lo: 0, Hi: p}
	}
	return sai.PortRange{Lo: 0, Hi: 65535}
}

// entry returns a valid entry with an unused priority. Most entries are
// narrow, so that many of them win for some packet; a few wide ones
// (catch-alls included), mostly at low priorities, overlap the others.
func (g *dwlGen) entry() sai.WatchlistEntryAttrs {
	pct := func(p int) bool { return g.r.IntN(100) < p }
	for {
		wide := pct(g.widePct)
		var m sai.WatchlistMatch
		fam := 4 + 2*g.r.IntN(2)
		if pct(10) || (wide && pct(50)) {
			fam = 0
		}
		if fam != 0 {
			if pct(85) {
				m.SrcPrefix = g.prefix(fam, wide)
			}
			if pct(85) {
				m.DstPrefix = g.prefix(fam, wide)
			}
		}
		m.IPProtocol = []uint8{0, 6, 6, 6, 6, 17, 17, 17, 17, 132}[g.r.IntN(10)]
		if wide && pct(50) {
			m.IPProtocol = 0
		}
		if m.IPProtocol != 0 && !(wide && pct(50)) {
			m.L4SrcPort, m.L4DstPort = g.portRange(), g.portRange()
		}
		if pct(30) {
			m.DSCP.Mask = 0x3f
			if pct(50) {
				m.DSCP.Mask = uint8(1 + g.r.IntN(63))
			}
			m.DSCP.Value = uint8(g.r.IntN(64)) & m.DSCP.Mask
		}
		if m.IPProtocol == wire.ProtoTCP && pct(30) {
			m.TCPFlags.Mask = uint8(1 + g.r.IntN(255))
			if pct(50) {
				m.TCPFlags.Mask = 1 << g.r.IntN(8)
			}
			m.TCPFlags.Value = uint8(g.r.IntN(256)) & m.TCPFlags.Mask
		}
		if pct(10) {
			m.InPort = dwlInPort
		}
		if pct(5) {
			m.EtherType = []uint16{sai.EtherTypeIPv4, sai.EtherTypeIPv6, 0x0806}[g.r.IntN(3)]
			if fam != 0 && pct(80) {
				m.EtherType = sai.FamilyEtherType(g.pool(fam))
			}
		}
		if pct(6) {
			m.IPProtocol, m.L4SrcPort, m.L4DstPort, m.TCPFlags = wire.ProtoICMP, sai.PortRange{}, sai.PortRange{}, sai.TCPFlagsMatch{}
			if fam == 6 || (fam == 0 && pct(50)) {
				m.IPProtocol = wire.ProtoICMPv6
			}
			m.ICMP.TypeMask = []uint8{0xff, 0xff, 0xf0, 0}[g.r.IntN(4)]
			m.ICMP.CodeMask = []uint8{0xff, 0, 0, 0x01}[g.r.IntN(4)]
			m.ICMP.Type, m.ICMP.Code = dwlICMP[g.r.IntN(len(dwlICMP))]&m.ICMP.TypeMask, uint8(g.r.IntN(4))&m.ICMP.CodeMask
		}
		if pct(g.innerPct) {
			m.Inner = g.inner(wide)
			// The outer header of a tunnelled packet: its protocol
			// left open, or UDP to the tunnel's port.
			m.IPProtocol, m.L4SrcPort, m.L4DstPort, m.TCPFlags, m.ICMP = 0, sai.PortRange{}, sai.PortRange{}, sai.TCPFlagsMatch{}, sai.ICMPMatch{}
			if pct(30) && m.Inner.Tunnel != sai.TunnelGRE {
				m.IPProtocol = wire.ProtoUDP
				if port := wire.TunnelKind(m.Inner.Tunnel).Port(); port != 0 && pct(50) {
					m.L4DstPort = sai.PortRange{Lo: port, Hi: port}
				}
			}
		}
		g.leaveOpen(&m)
		// Narrow entries constrain at least two fields to a small part.
		few := func(r sai.PortRange) bool { return !r.IsAny() && r.Hi-r.Lo < 256 }
		narrow := 0
		for _, c := range []bool{m.SrcPrefix.IsValid(), m.DstPrefix.IsValid(), few(m.L4SrcPort), few(m.L4DstPort),
			m.DSCP.Mask == 0x3f, m.ICMP.TypeMask == 0xff, m.Inner.TunnelID != 0, m.Inner.SrcPrefix.IsValid(),
			m.Inner.DstPrefix.IsValid(), few(m.Inner.L4SrcPort), few(m.Inner.L4DstPort)} {
			if c {
				narrow++
			}
		}
		a := sai.WatchlistEntryAttrs{Match: m}
		// No catch-alls: at 1024 entries one would always be there, and
		// "no entry" would never be the answer.
		if (!wide && narrow < 2) || m == (sai.WatchlistMatch{}) || a.Validate() != nil {
			continue // or a prefix that came out IPv4-mapped
		}
		for {
			// Wide entries below most narrow ones, or they would
			// shadow nearly all of them.
			if a.Priority = uint16(g.r.UintN(65536)); wide {
				a.Priority /= 4
			} else if m.Inner.Enabled && g.r.IntN(2) == 0 {
				// Tunnel matches often above the outer entries that
				// tunnelled packets meet too.
				a.Priority |= 0x8000
			}
			if !g.used[a.Priority] {
				g.used[a.Priority] = true
				return a
			}
		}
	}
}

// addrIn returns an address in p (random host bits), sometimes one just
// outside it, or a pool address of family fam when p is the zero prefix.
func (g *dwlGen) addrIn(p netip.Prefix, fam int) netip.Addr {
	if !p.IsValid() {
		a := g.pool(fam)
		if g.r.IntN(2) == 0 {
			a = dwlFlipBit(a, g.r.IntN(a.BitLen()))
		}
		return a
	}
	a := p.Addr()
	for i := p.Bits(); i < a.BitLen(); i++ {
		if g.r.IntN(2) == 0 {
			a = dwlFlipBit(a, i)
		}
	}
	if p.Bits() > 0 && g.r.IntN(10) == 0 {
		a = dwlFlipBit(a, p.Bits()-1)
	}
	return a
}

// portNear returns a port at or just beyond a boundary of r.
func (g *dwlGen) portNear(r sai.PortRange) uint16 {
	if r.IsAny() {
		return g.port()
	}
	switch g.r.IntN(20) {
	case 0:
		return r.Lo - 1
	case 1, 2, 3, 4, 5, 6:
		return r.Lo
	case 7, 8, 9, 10, 11, 12:
		return r.Hi
	case 13:
		return r.Hi + 1
	}
	return r.Lo + uint16(g.r.IntN(int(r.Hi-r.Lo)+1))
}

// packet is built to match a random entry mostly, then perturbed.
func (g *dwlGen) packet(ents []dwlEntry) *dwlPacket {
	var m sai.WatchlistMatch
	if len(ents) > 0 && g.r.IntN(10) < 8 {
		m = ents[g.r.IntN(len(ents))].a.Match
	}
	fam := g.family(m.SrcPrefix, m.DstPrefix)
	p := &dwlPacket{src: g.addrIn(m.SrcPrefix, fam), dst: g.addrIn(m.DstPrefix, fam), other: g.r.IntN(8) == 0}
	p.proto = m.IPProtocol
	if p.proto == 0 || g.r.IntN(16) == 0 {
		p.proto = []uint8{6, 6, 6, 6, 17, 17, 17, 17, 132, 1}[g.r.IntN(10)]
		if p.proto == 1 && fam == 6 {
			p.proto = 58
		}
	}
	p.sport, p.dport = g.portNear(m.L4SrcPort), g.portNear(m.L4DstPort)
	if c := m.ICMP; (p.proto == wire.ProtoICMP || p.proto == wire.ProtoICMPv6) && g.r.IntN(8) != 0 {
		// Type and code where the ports are (dwlL4).
		p.sport = uint16(uint8(p.sport>>8)&^c.TypeMask|c.Type)<<8 | uint16(uint8(p.sport)&^c.CodeMask|c.Code)
	}
	p.dscp = uint8(g.r.IntN(64))
	if g.r.IntN(8) != 0 {
		p.dscp = p.dscp&^m.DSCP.Mask | m.DSCP.Value
	}
	if p.proto == wire.ProtoTCP {
		p.flags = []uint8{0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, uint8(g.r.IntN(256))}[g.r.IntN(8)]
		if g.r.IntN(8) != 0 {
			p.flags = p.flags&^m.TCPFlags.Mask | m.TCPFlags.Value
		}
	}
	if g.r.IntN(6) == 0 {
		switch g.r.IntN(6) {
		case 0:
			p.src = dwlFlipBit(p.src, g.r.IntN(p.src.BitLen()))
		case 1:
			p.dst = dwlFlipBit(p.dst, g.r.IntN(p.dst.BitLen()))
		case 2:
			p.sport += uint16(g.r.IntN(3)) - 1
		case 3:
			p.dport += uint16(g.r.IntN(3)) - 1
		case 4:
			p.dscp ^= 1 << g.r.IntN(6)
		case 5:
			p.flags ^= 1 << g.r.IntN(8)
		}
	}
	if p.proto != wire.ProtoTCP {
		p.flags = 0
	}
	if m.Inner.Enabled || g.r.IntN(6) == 0 {
		g.tunnel(p, m.Inner)
	}
	p.build()
	return p
}

// tunnel makes p a tunnelled packet whose tunnel and inner packet mostly
// match in, then perturbed; p keeps its outer addresses and DSCP.
func (g *dwlGen) tunnel(p *dwlPacket, in sai.InnerMatch) {
	t := &dwlTunnel{}
	t.Kind = dwlKinds[g.r.IntN(len(dwlKinds))]
	if in.Tunnel != sai.TunnelAny && g.r.IntN(10) != 0 {
		t.Kind = wire.TunnelKind(in.Tunnel)
	}
	t.ID = dwlTunnelIDs[g.r.IntN(len(dwlTunnelIDs))]
	if in.TunnelID != 0 && g.r.IntN(10) != 0 {
		t.ID = in.TunnelID
	}
	if dwlHasVNI(t.Kind) {
		t.ID &= sai.MaxVNI
	}
	t.Eth = t.Kind != wire.TunnelGTPU && g.r.IntN(2) == 0
	if t.Kind == wire.TunnelGTPU {
		t.GTPUExt, t.GTPUSeq, t.notGPDU = g.r.IntN(3), g.r.IntN(3) == 0, g.r.IntN(20) == 0
	}
	if t.Kind == wire.TunnelGeneve {
		t.GeneveOptWords = []int{0, 0, 1, 4}[g.r.IntN(4)]
	}
	fam := g.family(in.SrcPrefix, in.DstPrefix)
	t.src, t.dst = g.addrIn(in.SrcPrefix, fam), g.addrIn(in.DstPrefix, fam)
	t.proto = in.IPProtocol
	if t.proto == 0 || g.r.IntN(16) == 0 {
		t.proto = []uint8{6, 6, 17, 17, 132}[g.r.IntN(5)]
	}
	t.sport, t.dport = g.portNear(in.L4SrcPort), g.portNear(in.L4DstPort)
	if g.r.IntN(8) == 0 {
		switch g.r.IntN(3) {
		case 0:
			t.src = dwlFlipBit(t.src, g.r.IntN(t.src.BitLen()))
		case 1:
			t.dport += uint16(g.r.IntN(3)) - 1
		case 2:
			t.ID ^= 1
		}
	}
	p.tun = t
	p.proto, p.dport, p.flags = wire.ProtoUDP, t.Kind.Port(), 0
	if t.Kind == wire.TunnelGRE {
		p.proto, p.sport = wire.ProtoGRE, 0
	}
}

// family is the IP version of the prefixes, or a random one when neither
// is set.
func (g *dwlGen) family(src, dst netip.Prefix) int {
	fam := 4 + 2*g.r.IntN(2)
	for _, p := range []netip.Prefix{src, dst} {
		if p.IsValid() {
			fam = 4
			if p.Addr().Is6() {
				fam = 6
			}
		}
	}
	return fam
}

// variant is p with another DSCP, TCP flags or ingress port: same flow,
// so flow caches must key on those too.
func (g *dwlGen) variant(p *dwlPacket) *dwlPacket {
	v := *p
	if p.tun != nil && g.r.IntN(2) == 0 {
		// Another flow in the same tunnel: flow caches must key on
		// the inner flow.
		t := *p.tun
		t.sport++
		if g.r.IntN(2) == 0 {
			t.src = dwlFlipBit(t.src, t.src.BitLen()-1)
		}
		v.tun = &t
		v.build()
		return &v
	}
	switch g.r.IntN(3) {
	case 0:
		v.other = !v.other
	case 1:
		if v.proto == wire.ProtoTCP {
			v.flags ^= uint8(1 + g.r.IntN(255))
			break
		}
		fallthrough
	default:
		v.dscp ^= uint8(1 + g.r.IntN(63))
	}
	v.build()
	return &v
}

// TestWatchlistDifferential fills the ebpf watchlist to its capacity with
// random overlapping entries (NOP, so packets stay unchanged) and checks
// that for random packets the ebpf dataplane counts a match on the same
// entry as the software dataplane: with the watchlist empty, full, and
// full again after a third of it is replaced, replaying packets so that
// cached verdicts are put to the test. INTD_WL_SEED sets the seed.
func TestWatchlistDifferential(t *testing.T) {
	needRoot(t)
	seed := uint64(1)
	if s := os.Getenv("INTD_WL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("INTD_WL_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (set INTD_WL_SEED to change)", seed)

	// No INT marking and no tunnel code points: every packet, whatever its
	// DSCP or UDP port, goes to the watchlist on both nodes.
	plain := func(a *sai.DTelAttrs) {
		a.IntL4DSCP = sai.DSCPMatch{}
		a.VXLANGPENextProtocol, a.GeneveOptionClass = 0, 0
	}
	ns := nodes(t, setup{noEntry: true, dt: plain})
	sn, bn := ns[0].(*softNode), ns[1].(*bpfNode)
	capacity := bn.Capabilities().MaxWatchlistEntries
	if capacity <= 0 {
		t.Fatalf("ebpf MaxWatchlistEntries %d", capacity)
	}
	if c := sn.Capabilities().MaxWatchlistEntries; c != 0 && c < capacity {
		t.Fatalf("soft holds %d watchlist entries, fewer than ebpf's %d", c, capacity)
	}
	g := &dwlGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), used: map[uint16]bool{},
		widePct: min(max(1000/capacity, 3), 15), innerPct: 30}
	nPkts := min(max(300, capacity/2), 600)
	t.Logf("capacity %d entries, %d packets a round", capacity, nPkts)

	var ents []dwlEntry
	create := func(a sai.WatchlistEntryAttrs) {
		t.Helper()
		var e dwlEntry
		e.a = a
		for i, n := range []sai.Backend{sn, bn} {
			oid, err := n.Create(a)
			if err != nil {
				t.Fatalf("%s: create %s: %v", ns[i].name(), dwlFmtEntry([]dwlEntry{e}, 0), err)
			}
			e.oid[i] = oid
		}
		ents = append(ents, e)
	}
	// fill creates the pending entries, then random ones up to capacity.
	fill := func(pending []dwlEntry) {
		start := time.Now()
		for _, e := range pending {
			create(e.a)
		}
		for len(ents) < capacity {
			create(g.entry())
		}
		// One more than the capacity fails and leaves the rest working
		// (the packets that follow check that).
		a := g.entry()
		delete(g.used, a.Priority)
		oid, err := bn.Create(a)
		if !errors.Is(err, sai.ErrUnsupported) {
			t.Fatalf("ebpf: entry %d of %d: %v, %v; want %v", capacity+1, capacity, oid, err, sai.ErrUnsupported)
		}
		t.Logf("filled to %d entries in %v; one more: %v", capacity, time.Since(start).Round(time.Millisecond), err)
	}
	remove := func(i int) {
		t.Helper()
		for j, n := range []sai.Backend{sn, bn} {
			if err := n.Remove(ents[i].oid[j]); err != nil {
				t.Fatalf("%s: remove: %v", ns[j].name(), err)
			}
		}
		delete(g.used, ents[i].a.Priority)
		ents = append(ents[:i], ents[i+1:]...)
	}

	// counts reads every entry's matched packets on node j.
	counts := func(j int) map[sai.OID]uint64 {
		t.Helper()
		st, err := ns[j].Stats(t.Context())
		if err != nil {
			t.Fatalf("%s: stats: %v", ns[j].name(), err)
		}
		out := make(map[sai.OID]uint64, len(st.Watchlist))
		for oid, s := range st.Watchlist {
			out[oid] = s.MatchedPackets
		}
		return out
	}
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if failures++; failures >= 20 {
			t.Fatalf("stopping after %d failures (seed %d)", failures, seed)
		}
	}
	// run sends pkts through both nodes, one at a time, and compares the
	// entry whose counter moved.
	run := func(round string, pkts []*dwlPacket) {
		t.Helper()
		start := time.Now()
		prev := [2]map[sai.OID]uint64{counts(0), counts(1)}
		byOID := [2]map[sai.OID]int{{}, {}}
		for i, e := range ents {
			byOID[0][e.oid[0]], byOID[1][e.oid[1]] = i, i
		}
		matched, overlap, winners, tunnelled, innerWins := 0, 0, map[int]bool{}, 0, 0
		for k, p := range pkts {
			var outs [2][]byte
			if p.other {
				before := len(sn.out)
				sn.Receive(1, bytes.Clone(p.frame)) // enters on "lo"
				if len(sn.out) > before {
					outs[0] = sn.out[len(sn.out)-1]
				}
				outs[1] = dwlRunIngress(t, bn.objs.IntdEgress, bytes.Clone(p.frame), 0)
			} else {
				outs[0] = sn.process(t, bytes.Clone(p.frame))
				outs[1] = bn.process(t, bytes.Clone(p.frame))
			}
			var hit [2]int
			for j := range 2 {
				if !bytes.Equal(outs[j], p.frame) {
					fail("%s packet %d (%v): %s changed or dropped it:\n got %x\nwant %x", round, k, p, ns[j].name(), outs[j], p.frame)
				}
				cur := counts(j)
				hit[j] = -1
				for oid, c := range cur {
					if c == prev[j][oid] {
						continue
					}
					if c != prev[j][oid]+1 || hit[j] >= 0 {
						fail("%s packet %d (%v): %s: counter of %v went %d -> %d, other hit %d",
							round, k, p, ns[j].name(), oid, prev[j][oid], c, hit[j])
					}
					i, ok := byOID[j][oid]
					if !ok {
						fail("%s packet %d: %s: counter of unknown entry %v moved", round, k, ns[j].name(), oid)
						i = -2
					}
					hit[j] = i
				}
				prev[j] = cur
			}
			want, n := dwlModel(ents, p)
			if p.tun != nil {
				tunnelled++
			}
			if hit[0] >= 0 {
				matched++
				winners[hit[0]] = true
				if ents[hit[0]].a.Match.Inner.Enabled {
					innerWins++
				}
			}
			if n > 1 {
				overlap++
			}
			if hit[0] != hit[1] {
				fail("%s packet %d: %v\n soft:  %s\n ebpf:  %s\n model: %s", round, k, p,
					dwlFmtEntry(ents, hit[0]), dwlFmtEntry(ents, hit[1]), dwlFmtEntry(ents, want))
			}
		}
		t.Logf("%s: %d packets (%d tunnelled), %d matched (%d several entries, %d by a tunnel match), %d distinct winners, %v",
			round, len(pkts), tunnelled, matched, overlap, innerWins, len(winners), time.Since(start).Round(time.Millisecond))
	}
	gen := func(n int, ents []dwlEntry) []*dwlPacket {
		var out []*dwlPacket
		for len(out) < n {
			out = append(out, g.packet(ents))
			for len(out) < n && g.r.IntN(3) == 0 {
				out = append(out, g.variant(out[len(out)-1]))
			}
		}
		return out
	}

	// The first packets are drawn for the first entries but go through
	// an empty watchlist first: the verdicts cached then must not
	// survive the entries' creation.
	pending := make([]dwlEntry, capacity)
	for i := range pending {
		pending[i].a = g.entry()
	}
	first := gen(nPkts, pending)
	run("empty watchlist", first)
	fill(pending)
	run("round 1", first)
	run("round 1 again (flow cache)", first)

	// Replace a random third: the verdicts cached for the first packets
	// must not survive the change either.
	for range capacity / 3 {
		remove(g.r.IntN(len(ents)))
	}
	fill(nil)
	run("round 2 (old packets)", first)
	run("round 2 (new packets)", gen(nPkts, ents))

	// Lists in which some fields are open in every entry (the eBPF
	// classifier then skips their sets): each field open half the time;
	// then every outer address and port (tunnel matches on the inner
	// headers alone).
	for _, open := range []dwlField{dwlField(g.r.UintN(1 << dwlFields)), dwlSrc | dwlDst | dwlSport | dwlDport | dwlProto} {
		bn.Defer()
		for len(ents) > 0 {
			remove(len(ents) - 1)
		}
		g.open = open
		for len(ents) < capacity {
			create(g.entry())
		}
		if err := bn.Flush(); err != nil {
			t.Fatal(err)
		}
		run(fmt.Sprintf("fields open %#x", open), gen(nPkts, ents))
	}
}

// dwlRunIngress is bpfNode.process for a frame whose skb came in on
// ingressIfindex (0: locally generated).
func dwlRunIngress(t testing.TB, p *ebpf.Program, frame []byte, ingressIfindex uint32) []byte {
	t.Helper()
	out := make([]byte, len(frame)+2048)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx{IngressIfindex: ingressIfindex, Ifindex: 1}}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	if ret == 2 { // TC_ACT_SHOT
		return nil
	}
	return opts.DataOut
}

// TestDeferFlush: between Defer and Flush, watchlist changes are recorded
// but packets are classified by the watchlist as it was; Flush programs
// them all at once.
func TestDeferFlush(t *testing.T) {
	n := newBPFNode(t)
	setup{sess: &mdSession, noEntry: true}.apply(t, n)
	st, _ := n.Stats(t.Context())
	var sess sai.OID
	for oid := range st.IntSessions {
		sess = oid
	}
	f80 := tcpFrame("10.0.1.1", "10.0.2.1", 1, 80, 0, []byte("x"))
	isINT := func() bool {
		var p wire.Packet
		out := n.process(t, bytes.Clone(f80))
		return out != nil && dscpParser.Parse(out, &p) == nil && p.INT >= 0
	}
	n.Defer()
	act := sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100}
	for i := 0; i < 100; i++ {
		m := port80()
		m.L4SrcPort = sai.PortRange{Lo: uint16(1 + i), Hi: uint16(1 + i)}
		if _, err := n.Create(sai.WatchlistEntryAttrs{Priority: uint16(i + 1), Match: m, Action: act}); err != nil {
			t.Fatal(err)
		}
	}
	if isINT() {
		t.Fatal("INT before Flush")
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if !isINT() {
		t.Fatal("no INT after Flush")
	}
	if err := n.Flush(); err != nil { // nothing pending
		t.Fatal(err)
	}
}

package wire

import (
	"encoding/binary"

	"github.com/intd-project/intd/sai/spec"
)

// TunnelKind is the encapsulation a packet's inner packet was found in;
// the values are sai.TunnelType's.
type TunnelKind uint8

const (
	TunnelNone     TunnelKind = iota
	TunnelVXLAN               // UDP 4789 (RFC 7348)
	TunnelVXLANGPE            // UDP 4790
	TunnelGeneve              // UDP 6081 (RFC 8926)
	TunnelGRE                 // IP protocol 47 (RFC 2784, RFC 2890)
	TunnelGTPU                // UDP 2152, G-PDU (3GPP TS 29.281)
)

var tunnelNames = [...]string{"none", "vxlan", "vxlan-gpe", "geneve", "gre", "gtpu"}

func (k TunnelKind) String() string {
	if int(k) < len(tunnelNames) {
		return tunnelNames[k]
	}
	return "tunnel?"
}

// Port is the UDP destination port of the tunnel, 0 for GRE and none.
func (k TunnelKind) Port() uint16 {
	switch k {
	case TunnelVXLAN:
		return PortVXLAN
	case TunnelVXLANGPE:
		return spec.PortVXLANGPE
	case TunnelGeneve:
		return spec.PortGeneve
	case TunnelGTPU:
		return PortGTPU
	}
	return 0
}

// Tunnel code points (VXLAN's and GTP-U's UDP ports, GTP-U's G-PDU).
const (
	PortVXLAN   = 4789
	PortGTPU    = 2152
	GTPUMsgGPDU = 255
	// MaxGTPUExt is how many GTP-U extension headers FindInner steps
	// over; a longer chain is not looked into (the eBPF dataplane walks
	// the same number).
	MaxGTPUExt = 4
)

// Tunneled is where the inner packet of a tunnelled packet starts.
type Tunneled struct {
	Kind TunnelKind
	// ID is the VNI (VXLAN, VXLAN-GPE, Geneve), the key (GRE with the K
	// bit, else 0) or the TEID (GTP-U).
	ID    uint32
	Start int  // offset of the inner packet in the frame
	Eth   bool // the inner packet starts with Ethernet, else with IP
}

// FindInner locates the inner packet of the VXLAN, VXLAN-GPE, Geneve,
// GRE or GTP-U (G-PDU) tunnel of the parsed frame p. INT inside a
// VXLAN-GPE or GRE tunnel is stepped over. ok is false for other packets
// and for headers that run past the IP datagram.
func FindInner(data []byte, p *Packet) (t Tunneled, ok bool) {
	return findInner(data, p, p.L4+UDPLen)
}

// findInner is FindInner with a UDP tunnel's header at u.
func findInner(data []byte, p *Packet, u int) (t Tunneled, ok bool) {
	switch {
	case p.Proto == ProtoGRE && p.Tunnel >= 0:
		g := p.Tunnel
		if len(data) < g+4 {
			return t, false
		}
		flags := binary.BigEndian.Uint16(data[g:])
		t.Kind, t.Start = TunnelGRE, g+4
		if flags&0x8000 != 0 {
			t.Start += 4
		}
		if flags&0x2000 != 0 {
			if p.End < t.Start+4 {
				return t, false
			}
			t.ID = binary.BigEndian.Uint32(data[t.Start:])
			t.Start += 4
		}
		if flags&0x1000 != 0 {
			t.Start += 4
		}
		proto := binary.BigEndian.Uint16(data[g+2:])
		if p.Encap == spec.EncapGRE {
			t.Start = p.Next
			proto = binary.BigEndian.Uint16(data[p.Shim+2:])
		}
		switch proto {
		case EtherTypeIPv4, EtherTypeIPv6:
		case EtherTypeTEB:
			t.Eth = true
		default:
			return t, false
		}
	case p.Proto == ProtoUDP && p.L4 >= 0 && p.End >= u+8:
		t.ID = binary.BigEndian.Uint32(data[u+4:]) >> 8
		t.Start = u + 8
		switch binary.BigEndian.Uint16(data[p.L4+2:]) {
		case PortVXLAN:
			t.Kind, t.Eth = TunnelVXLAN, true
		case spec.PortVXLANGPE:
			t.Kind = TunnelVXLANGPE
			next := data[u+3]
			if p.Encap == spec.EncapVXLANGPE {
				next, t.Start = data[p.Shim+3], p.Next
			}
			switch next {
			case 1, 2:
			case 3:
				t.Eth = true
			default:
				return t, false
			}
		case spec.PortGeneve:
			t.Kind = TunnelGeneve
			t.Start = u + 8 + int(data[u]&0x3f)*4
			switch binary.BigEndian.Uint16(data[u+2:]) {
			case EtherTypeIPv4, EtherTypeIPv6:
			case EtherTypeTEB:
				t.Eth = true
			default:
				return t, false
			}
		case PortGTPU:
			t.Kind = TunnelGTPU
			t.ID = binary.BigEndian.Uint32(data[u+4:])
			var good bool
			if t.Start, good = gtpuPayload(data[:p.End], u); !good {
				return t, false
			}
		default:
			return t, false
		}
	default:
		return t, false
	}
	return t, t.Start < p.End
}

// gtpuPayload returns the offset of the T-PDU of the GTP-U header at g
// (TS 29.281 §5.1, §5.2): version 1, protocol type GTP, message G-PDU;
// with any of the E, S and PN flags the optional sequence number, N-PDU
// number and next extension header type follow, then with E the chain of
// extension headers (length in 4-octet units, last octet the next type).
func gtpuPayload(b []byte, g int) (int, bool) {
	f := b[g]
	if f>>5 != 1 || f&0x10 == 0 || b[g+1] != GTPUMsgGPDU {
		return 0, false
	}
	at := g + 8
	if f&0x07 == 0 {
		return at, true
	}
	if len(b) < at+4 {
		return 0, false
	}
	next := b[at+3]
	at += 4
	if f&0x04 == 0 {
		return at, true // E clear: the next-type octet is not meaningful
	}
	for range MaxGTPUExt {
		if next == 0 {
			return at, true
		}
		if len(b) < at+1 || b[at] == 0 {
			return 0, false
		}
		n := int(b[at]) * 4
		if len(b) < at+n {
			return 0, false
		}
		next = b[at+n-1]
		at += n
	}
	return at, next == 0
}

// ParseInner finds the inner packet of p's tunnel in data (FindInner) and
// parses it with c into in. ok says there was a tunnel with an IP packet
// inside.
func (c *Parser) ParseInner(data []byte, p *Packet, in *Packet) (t Tunneled, ok bool) {
	u := p.L4 + UDPLen
	if c.PastL4INT && p.INT >= 0 && (p.Encap == spec.EncapDSCP || p.Encap == spec.EncapProbeMarker) {
		u = p.Next
	}
	if t, ok = findInner(data, p, u); !ok {
		return t, false
	}
	var err error
	if t.Eth {
		err = c.Parse(data[t.Start:p.End], in)
	} else {
		err = c.ParseIP(data[t.Start:p.End], in)
	}
	return t, err == nil && in.L3 >= 0
}

// FlowInner is ParseInner for the inner packet that names a tunnelled
// packet's flow: found behind INT over UDP, never parsed as INT itself,
// and read from a truncated copy too. The dataplanes' events and the
// collector key tunnelled flows (and drops) on it, so that they agree.
func FlowInner(data []byte, p *Packet, in *Packet) (Tunneled, bool) {
	return flowInner.ParseInner(data, p, in)
}

var flowInner = Parser{AllowTruncated: true, NoINT: true, PastL4INT: true}

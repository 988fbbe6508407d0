package wiretest

import (
	"encoding/binary"

	"github.com/intd-project/intd/dataplane/wire"
)

// Tunnel describes the encapsulation TunnelFrame puts around an inner IP
// packet.
type Tunnel struct {
	Kind wire.TunnelKind
	// ID is the VNI (VXLAN, VXLAN-GPE, Geneve), the GRE key (0: no K
	// bit) or the GTP-U TEID.
	ID uint32
	// Eth puts an Ethernet header in front of the inner packet (VXLAN
	// always has one; GTP-U never).
	Eth bool
	// GTPUExt is the number of GTP-U extension headers (PDU session
	// containers, TS 38.415) before the T-PDU; GTPUSeq sets the S flag.
	GTPUExt int
	GTPUSeq bool
	// GTPUMsg is the GTP-U message type; 0 means G-PDU (255).
	GTPUMsg uint8
	// GeneveOptWords is the length of Geneve options (an experimental
	// class), in 4-byte words.
	GeneveOptWords int
	// SrcPort is the outer UDP source port (0: 49152).
	SrcPort uint16
}

// TunnelFrame wraps the IP packet inner (no Ethernet header) in t from
// src to dst (outer IPv4 or IPv6 by the family of src), with valid
// checksums. inner may come from IPFrame[EthernetLen:].
func TunnelFrame(t Tunnel, src, dst string, dscp uint8, inner []byte) []byte {
	payload := inner
	v6 := inner[0]>>4 == 6
	if t.Eth || t.Kind == wire.TunnelVXLAN {
		et := uint16(wire.EtherTypeIPv4)
		if v6 {
			et = wire.EtherTypeIPv6
		}
		payload = make([]byte, wire.EthernetLen+len(inner))
		_ = wire.PutEthernet(payload, DstMAC, SrcMAC, et)
		copy(payload[wire.EthernetLen:], inner)
	}
	var hdr []byte
	switch t.Kind {
	case wire.TunnelVXLAN:
		hdr = make([]byte, wire.VXLANLen)
		hdr[0] = 0x08
		binary.BigEndian.PutUint32(hdr[4:], t.ID<<8)
	case wire.TunnelVXLANGPE:
		hdr = make([]byte, wire.VXLANLen)
		np := uint8(1)
		switch {
		case t.Eth:
			np = 3
		case v6:
			np = 2
		}
		_ = wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: np, VNI: t.ID}.Put(hdr)
	case wire.TunnelGeneve:
		hdr = make([]byte, wire.GeneveLen+4*t.GeneveOptWords)
		_ = wire.Geneve{OptLen: uint8(t.GeneveOptWords), Protocol: innerProto(t.Eth, v6), VNI: t.ID}.Put(hdr)
		if t.GeneveOptWords > 0 {
			// One option of an experimental class filling the space.
			binary.BigEndian.PutUint16(hdr[8:], 0xfff0)
			hdr[10], hdr[11] = 1, uint8(t.GeneveOptWords-1)
		}
	case wire.TunnelGRE:
		hdr = make([]byte, 4, 8)
		binary.BigEndian.PutUint16(hdr[2:], innerProto(t.Eth, v6))
		if t.ID != 0 {
			hdr[0] = 0x20
			hdr = binary.BigEndian.AppendUint32(hdr, t.ID)
		}
	case wire.TunnelGTPU:
		hdr = GTPUHeader(t, len(payload))
	}
	if t.Kind == wire.TunnelGRE {
		return IPFrame(src, dst, wire.ProtoGRE, dscp, append(hdr, payload...), true)
	}
	sport := t.SrcPort
	if sport == 0 {
		sport = 49152
	}
	l4 := make([]byte, wire.UDPLen, wire.UDPLen+len(hdr)+len(payload))
	l4 = append(append(l4, hdr...), payload...)
	_ = wire.UDPHeader{SrcPort: sport, DstPort: t.Kind.Port(), Length: uint16(len(l4))}.Put(l4)
	return IPFrame(src, dst, wire.ProtoUDP, dscp, l4, true)
}

func innerProto(eth, v6 bool) uint16 {
	switch {
	case eth:
		return wire.EtherTypeTEB
	case v6:
		return wire.EtherTypeIPv6
	}
	return wire.EtherTypeIPv4
}

// GTPUHeader is a GTP-U header (TS 29.281 §5.1) for a T-PDU of n bytes:
// version 1, PT 1, t.GTPUMsg (0: G-PDU), TEID t.ID; with t.GTPUSeq or
// t.GTPUExt the optional fields, and t.GTPUExt PDU session container
// extension headers (type 0x85, one 4-octet unit each).
func GTPUHeader(t Tunnel, n int) []byte {
	msg := t.GTPUMsg
	if msg == 0 {
		msg = wire.GTPUMsgGPDU
	}
	h := []byte{0x30, msg, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[4:], t.ID)
	if t.GTPUSeq || t.GTPUExt > 0 {
		opt := []byte{0, 7, 0, 0}
		if t.GTPUSeq {
			h[0] |= 0x02
		}
		if t.GTPUExt > 0 {
			h[0] |= 0x04
			opt[3] = 0x85
		}
		h = append(h, opt...)
		for i := range t.GTPUExt {
			next := byte(0x85)
			if i == t.GTPUExt-1 {
				next = 0
			}
			// PDU session container: PDU type 0 (DL), QFI 9.
			h = append(h, 1, 0x00, 0x09, next)
		}
	}
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)-8+n))
	return h
}

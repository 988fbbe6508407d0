package wire

import (
	"errors"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

func TestPushHopLimits(t *testing.T) {
	c := Parser{UDPPort: exINTPort}
	build := func(remaining uint8, room int) ([]byte, Packet) {
		orig := udpPacket(t, exOrigPort, payld, false)
		pkt := withRoom(orig, 64)
		var p Packet
		must(t, c.ParseIP(pkt, &p))
		pkt, err := InsertINT(pkt, &p, spec.TypeMD, mdSource(t, exMD(remaining)), &SourceOptions{Encap: spec.EncapUDPPort, NPT: spec.NPTUDPPort, UDPPort: exINTPort})
		must(t, err)
		out := make([]byte, len(pkt), len(pkt)+room)
		copy(out, pkt)
		must(t, c.ParseIP(out, &p))
		return out, p
	}
	// Remaining Hop Count 0: no metadata, E bit set, checksums still valid.
	pkt, p := build(0, 64)
	n := len(pkt)
	pkt, err := PushHop(pkt, &p, hopNQ(1), PushOptions{})
	if !errors.Is(err, ErrHopLimit) || len(pkt) != n {
		t.Fatalf("err %v len %d", err, len(pkt))
	}
	h, _ := DecodeMDHeader(pkt[p.INT:])
	if !h.HopCountExceeded || h.MTUExceeded {
		t.Fatalf("header %+v", h)
	}
	checkChecksums(t, pkt, &p)
	// No room in the buffer (egress MTU): M bit set, nothing inserted.
	pkt, p = build(8, 0)
	pkt, err = PushHop(pkt, &p, hopNQ(1), PushOptions{})
	if !errors.Is(err, ErrNoRoom) {
		t.Fatalf("err %v", err)
	}
	h, _ = DecodeMDHeader(pkt[p.INT:])
	if !h.MTUExceeded || h.RemainingHops != 8 {
		t.Fatalf("header %+v", h)
	}
	checkChecksums(t, pkt, &p)
	// Geneve: the 5-bit option length caps the stack at 31 words.
	inner := innerEthernet(t)
	md := mdSource(t, MDHeader{Version: 2, HopML: 8, RemainingHops: 8, Instructions: spec.InstNodeID})
	body := make([]byte, GeneveLen+4, 64)
	must(t, Geneve{OptLen: 4, Protocol: EtherTypeTEB}.Put(body))
	must(t, GeneveOption{Class: spec.GeneveClassINT, Type: 1, Length: 3}.Put(body[GeneveLen:]))
	body = append(append(body, md...), inner...)
	pkt = withRoom(udpTunnel(t, spec.PortGeneve, body), 512)
	g := Parser{GenevePort: spec.PortGeneve}
	for i := 0; ; i++ {
		must(t, g.ParseIP(pkt, &p))
		pkt, err = PushHop(pkt, &p, hopNQ(1), PushOptions{})
		if err != nil {
			if !errors.Is(err, ErrGeneveTooLong) || i != 3 { // 3 + 3*8 = 27 words; one more would be 35
				t.Fatalf("hop %d: %v", i, err)
			}
			break
		}
		checkChecksums(t, pkt, &p)
	}
	if err := (GeneveOption{Length: 32}).Put(make([]byte, 4)); !errors.Is(err, ErrGeneveTooLong) {
		t.Fatal("option length 32 accepted")
	}
}

func TestParseVLANAndChainedGPE(t *testing.T) {
	// Ethernet + two VLAN tags + IPv4/UDP/VXLAN-GPE with an INT-MD shim
	// followed by a destination-type shim, then Ethernet.
	inner := innerEthernet(t)
	md := mdSource(t, exMD(8))
	body := make([]byte, VXLANLen+ShimLen, 128)
	must(t, VXLANGPE{Flags: GPEFlagI | GPEFlagP, NextProto: spec.VXLANGPENextProtoINT, VNI: 7}.Put(body))
	must(t, GPEShim{Type: spec.TypeMD, Length: uint8(len(md) / 4), NextProto: spec.VXLANGPENextProtoINT}.Put(body[VXLANLen:]))
	body = append(body, md...)
	dst := make([]byte, 8)
	must(t, GPEShim{Type: spec.TypeDestination, Length: 1, NextProto: 3}.Put(dst))
	body = append(append(body, dst...), inner...)
	ip := udpTunnel(t, spec.PortVXLANGPE, body)
	frame := make([]byte, 22, 22+len(ip)+64)
	must(t, PutEthernet(frame, macO2, macO1, EtherTypeQinQ))
	copy(frame[14:], []byte{0x00, 0x64, 0x81, 0x00, 0x20, 0xc8, 0x08, 0x00}) // VLAN 100, VLAN 200
	frame = append(frame, ip...)
	c := Parser{VXLANGPEPort: spec.PortVXLANGPE}
	var p Packet
	must(t, c.Parse(frame, &p))
	if p.VLANs != 2 || p.VLAN != [2]uint16{100, 200} || p.Encap != spec.EncapVXLANGPE || p.INTType != spec.TypeMD {
		t.Fatalf("parse %+v", p)
	}
	frame, err := PushHop(frame, &p, hopNQ(1), PushOptions{})
	must(t, err)
	checkChecksums(t, frame, &p)
	must(t, c.Parse(frame, &p))
	checkMD(t, frame, &p, 7, 1)
	// Stripping removes only the MD shim; the destination header stays.
	frame, err = Strip(frame, &p, SinkOptions{})
	must(t, err)
	must(t, c.Parse(frame, &p))
	if p.HasINT() || frame[p.Tunnel+3] != spec.VXLANGPENextProtoINT || spec.HeaderType(frame[p.Tunnel+VXLANLen]>>4) != spec.TypeDestination {
		t.Fatalf("after strip: %+v", p)
	}
	checkChecksums(t, frame, &p)
}

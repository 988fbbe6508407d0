package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/intd-project/intd/sai/spec"
)

func TestUpdateChecksumMatchesRecompute(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := make([]byte, 20)
	for i := 0; i < 10000; i++ {
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		binary.BigEndian.PutUint16(h[10:], IPv4HeaderChecksum(h))
		off := 2 * r.IntN(10)
		if off == 10 {
			continue
		}
		old := binary.BigEndian.Uint16(h[off:])
		nv := uint16(r.Uint32())
		binary.BigEndian.PutUint16(h[off:], nv)
		inc := UpdateChecksum(binary.BigEndian.Uint16(h[10:]), old, nv)
		if full := IPv4HeaderChecksum(h); inc != full && !(inc == 0xffff && full == 0) && !(inc == 0 && full == 0xffff) {
			t.Fatalf("incremental %#x, full %#x", inc, full)
		}
		binary.BigEndian.PutUint16(h[10:], inc)
		if Fold(Sum(0, h)) != 0xffff {
			t.Fatal("header does not verify")
		}
	}
}

// randPacket builds a random IPv4 or IPv6, TCP or UDP packet with correct
// checksums; zeroUDP leaves the UDP checksum zero.
func randPacket(r *rand.Rand, v6, tcp, zeroUDP bool) []byte {
	plen := r.IntN(300)
	l3 := IPv4MinLen
	if v6 {
		l3 = IPv6Len
	}
	l4 := UDPLen
	proto := uint8(ProtoUDP)
	if tcp {
		l4, proto = TCPMinLen, ProtoTCP
	}
	b := make([]byte, l3+l4+plen, l3+l4+plen+512)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if v6 {
		binary.BigEndian.PutUint32(b, 6<<28|uint32(r.IntN(64))<<22)
		binary.BigEndian.PutUint16(b[4:], uint16(l4+plen))
		b[6], b[7] = proto, 64
	} else {
		var src, dst [4]byte
		copy(src[:], b[12:])
		copy(dst[:], b[16:])
		_ = IPv4Header{TOS: uint8(r.IntN(64)) << 2, TotalLen: uint16(len(b)), ID: uint16(r.Uint32()), TTL: 64, Proto: proto, Src: src, Dst: dst}.Put(b)
	}
	if tcp {
		b[l3+12] = 5 << 4
	} else {
		binary.BigEndian.PutUint16(b[l3+4:], uint16(l4+plen))
		binary.BigEndian.PutUint16(b[l3+6:], 0)
	}
	var p Packet
	if err := (&Parser{}).ParseIP(b, &p); err != nil {
		panic(err)
	}
	SetL4Checksum(b, &p, !zeroUDP)
	return b
}

// checkAgainstFull checks the packet's checksums against a full
// recomputation: IPv4 header, and the L4 checksum either equal to the
// recomputed one (or its other zero) or, with a checksum complement in
// play, at least verifying. A zero UDP checksum must stay zero.
func checkAgainstFull(t *testing.T, pkt []byte, p *Packet, zeroUDP, complement bool) {
	t.Helper()
	checkIPv4Checksum(t, pkt, p)
	var fp Packet
	if err := (&Parser{}).ParseIP(pkt, &fp); err != nil {
		t.Fatal(err)
	}
	off := fp.L4 + 16
	if fp.Proto == ProtoUDP {
		off = fp.L4 + 6
	}
	got := binary.BigEndian.Uint16(pkt[off:])
	if zeroUDP && fp.Proto == ProtoUDP {
		if got != 0 {
			t.Fatalf("zero UDP checksum became %#x", got)
		}
		return
	}
	if !VerifyL4Checksum(pkt, &fp) {
		t.Fatalf("L4 checksum %#x does not verify", got)
	}
	if complement {
		return
	}
	full := bytes.Clone(pkt)
	SetL4Checksum(full, &fp, true)
	want := binary.BigEndian.Uint16(full[off:])
	if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
		t.Fatalf("incremental checksum %#x, full recomputation %#x", got, want)
	}
}

func TestIncrementalChecksumProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	instSets := []Instructions{
		spec.InstNodeID | spec.InstQueue,
		spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTxUtil,
		spec.InstNodeID | spec.InstIngressTimestamp | spec.InstEgressTimestamp | spec.InstChecksumComplement,
		spec.InstL2Interfaces | spec.InstBuffer | spec.InstChecksumComplement | 1<<4, // reserved bit 11
	}
	for iter := 0; iter < 3000; iter++ {
		v6, tcp := r.IntN(2) == 0, r.IntN(2) == 0
		zeroUDP := !tcp && r.IntN(3) == 0
		orig := randPacket(r, v6, tcp, zeroUDP)
		inst := instSets[r.IntN(len(instSets))]
		h := MDHeader{Version: 2, HopML: uint8(inst.Words() + r.IntN(2)), RemainingHops: 8, Instructions: inst}
		src := make([]byte, MDHeaderLen+int(h.HopML)*4)
		_ = h.Put(src)
		m := HopMetadata{NodeID: r.Uint32(), HopLatency: r.Uint32(), EgressTimestamp: r.Uint64(), Valid: Instructions(r.Uint32())}
		if _, err := PutHop(src[MDHeaderLen:], inst, int(h.HopML)-inst.Words(), &m); err != nil {
			t.Fatal(err)
		}
		opt := SourceOptions{UDPPort: 9999, ProbeMarker: 0x1122334455667788, DSCP: 0x17, Mask: 0x3f}
		c := Parser{UDPPort: 9999}
		switch k := r.IntN(4); {
		case k == 0:
			opt.Encap, c = spec.EncapDSCP, Parser{DSCP: 0x17, DSCPMask: 0x3f}
		case k == 1:
			opt.Encap, c = spec.EncapProbeMarker, Parser{ProbeMarker: opt.ProbeMarker}
		case k == 2 && !tcp:
			opt.Encap, opt.NPT = spec.EncapUDPPort, spec.NPTUDPPort
		default:
			opt.Encap, opt.NPT = spec.EncapUDPPort, spec.NPTIPProto
		}
		pkt := bytes.Clone(orig)
		pkt = append(pkt[:len(pkt):len(pkt)], make([]byte, 512)...)[:len(orig)]
		var p Packet
		if err := c.ParseIP(pkt, &p); err != nil || p.HasINT() {
			continue // random DSCP or payload happened to match the marking
		}
		pkt, err := InsertINT(pkt, &p, spec.TypeMD, src, &opt)
		if err != nil {
			t.Fatalf("insert %v: %v", opt.Encap, err)
		}
		// NPT 2 keeps the original L4 checksum; the new UDP one is zero.
		checkAgainstFull(t, pkt, &p, zeroUDP || opt.NPT == spec.NPTIPProto, false)
		for hop := 0; hop < 1+r.IntN(3); hop++ {
			if err := c.ParseIP(pkt, &p); err != nil {
				t.Fatal(err)
			}
			cc := r.IntN(2) == 0 && inst&spec.InstChecksumComplement != 0
			pkt, err = PushHop(pkt, &p, &m, PushOptions{UseChecksumComplement: cc})
			if err != nil {
				t.Fatalf("push: %v", err)
			}
			checkAgainstFull(t, pkt, &p, zeroUDP || opt.NPT == spec.NPTIPProto, cc)
		}
		if err := c.ParseIP(pkt, &p); err != nil {
			t.Fatal(err)
		}
		pkt, err = Strip(pkt, &p, SinkOptions{RestoreDSCP: true})
		if err != nil {
			t.Fatal(err)
		}
		// Stripping restores the exact original bytes, except that a UDP
		// checksum of 0xffff and 0x0000 are the same number; and, after
		// checksum-complement hops, the L4 checksum may be any value that
		// verifies.
		var sp Packet
		if err := (&Parser{}).ParseIP(pkt, &sp); err != nil {
			t.Fatal(err)
		}
		checkAgainstFull(t, pkt, &sp, zeroUDP, true)
		if len(pkt) != len(orig) {
			t.Fatalf("stripped length %d, original %d", len(pkt), len(orig))
		}
		csOff := sp.L4 + 16
		if sp.Proto == ProtoUDP {
			csOff = sp.L4 + 6
		}
		a, b := bytes.Clone(pkt), bytes.Clone(orig)
		a[csOff], a[csOff+1], b[csOff], b[csOff+1] = 0, 0, 0, 0
		if !bytes.Equal(a, b) {
			i := 0
			for a[i] == b[i] {
				i++
			}
			t.Fatalf("stripped packet differs from original (%v, v6 %v tcp %v) at byte %d: % x vs % x", opt.Encap, v6, tcp, i, a[i:min(i+8, len(a))], b[i:min(i+8, len(b))])
		}
	}
}

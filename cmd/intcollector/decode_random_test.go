package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// The markings of the randomized frames: the GPE next protocol and Geneve
// class are not the spec's, so that the flags are seen to matter.
const (
	rndUDPPort  = 5555
	rndProbe    = 0xa1b2c3d4e5f60718
	rndGRE      = 0x88b6
	rndGPENext  = 0x90
	rndGeneve   = 0x0199
	rndDSCP     = 0x17
	rndFrames   = 400
	rndReportTo = 32766
)

var rndFlags = []string{"-int-udp-port", strconv.Itoa(rndUDPPort), "-int-probe-marker", fmt.Sprintf("%#x", uint64(rndProbe)),
	"-int-gre-proto", strconv.Itoa(rndGRE), "-int-gpe-next-protocol", strconv.Itoa(rndGPENext),
	"-int-geneve-option-class", strconv.Itoa(rndGeneve)}

// rndParser is the wire package's parser with the same markings.
func rndParser() wire.Parser {
	return wire.Parser{DSCP: rndDSCP, DSCPMask: 0x3f, UDPPort: rndUDPPort, ProbeMarker: rndProbe, GREProto: rndGRE,
		VXLANGPEPort: spec.PortVXLANGPE, GenevePort: spec.PortGeneve, GPENextProto: rndGPENext, GeneveClass: rndGeneve}
}

// rndINT is a random INT-MD header and stack, or an INT-MX header.
func rndINT(rng *rand.Rand, mx bool) ([]byte, spec.HeaderType) {
	if mx {
		b := make([]byte, wire.MXHeaderLen)
		_ = wire.MXHeader{Version: 2, Instructions: wire.Instructions(rng.Uint32() & 0xfe00), DomainID: uint16(rng.Uint32()),
			DSInstructions: uint16(rng.Uint32()), DSFlags: uint16(rng.Uint32())}.Put(b)
		return b, spec.TypeMX
	}
	// Instructions without the checksum complement (bit 15) and bit 7/8
	// mixes that fit a Geneve option (at most 31 words in all).
	inst := wire.Instructions(rng.Uint32()&0x7f00) | spec.InstNodeID
	hops := 1 + rng.IntN(3)
	hl := inst.Words() * 4
	b := make([]byte, wire.MDHeaderLen+hops*hl)
	_ = wire.MDHeader{Version: 2, HopML: uint8(inst.Words()), RemainingHops: uint8(rng.IntN(8)), Instructions: inst,
		DomainID: uint16(rng.Uint32()), DSInstructions: uint16(rng.Uint32()), DSFlags: uint16(rng.Uint32())}.Put(b)
	for i := 0; i < hops; i++ {
		m := wire.HopMetadata{NodeID: rng.Uint32() >> 1, IngressPort: uint16(rng.Uint32()), EgressPort: uint16(rng.Uint32()),
			HopLatency: rng.Uint32() >> 1, QueueID: uint8(rng.Uint32()), QueueOccupancy: rng.Uint32() & 0x7fffff,
			IngressTimestamp: rng.Uint64() >> 1, EgressTimestamp: rng.Uint64() >> 1, L2IngressPort: rng.Uint32() >> 1,
			L2EgressPort: rng.Uint32() >> 1, TxUtilization: rng.Uint32() >> 1, BufferID: uint8(rng.Uint32() >> 25),
			BufferOccupancy: rng.Uint32() & 0x7fffff, Valid: inst}
		if _, err := wire.PutHop(b[wire.MDHeaderLen+i*hl:], inst, 0, &m); err != nil {
			panic(err)
		}
	}
	return b, spec.TypeMD
}

// rndFrame is a random INT frame of one of the supported kinds.
func rndFrame(rng *rand.Rand) (kind string, frame []byte) {
	src, dst := "10.1.2.3", "10.4.5.6"
	if rng.IntN(2) == 0 {
		src, dst = "2001:db8::1", "2001:db8::2"
	}
	payload := make([]byte, rng.IntN(40))
	sport, dport := uint16(1024+rng.IntN(60000)), uint16(1024+rng.IntN(2000))
	in, typ := rndINT(rng, rng.IntN(5) == 0)
	shim := func(npt spec.NPT, v uint16) []byte {
		b := make([]byte, wire.ShimLen)
		_ = wire.Shim{Type: typ, NPT: npt, Length: uint8(len(in) / 4), Value: v}.Put(b)
		return append(b, in...)
	}
	udp := func(dport uint16, body []byte) []byte {
		l4 := make([]byte, wire.UDPLen, wire.UDPLen+len(body))
		l4 = append(l4, body...)
		_ = wire.UDPHeader{SrcPort: sport, DstPort: dport, Length: uint16(len(l4))}.Put(l4)
		return l4
	}
	inner := wiretest.UDPFrame("192.0.2.1", "192.0.2.2", 7, 8, payload, false)
	switch k := rng.IntN(7); k {
	case 0:
		return "dscp-udp", wiretest.IPFrame(src, dst, wire.ProtoUDP, rndDSCP, udp(dport, append(shim(0, wire.ShimDSCP(0)), payload...)), true)
	case 1:
		l4 := make([]byte, wire.TCPMinLen)
		_ = wire.TCPHeader{SrcPort: sport, DstPort: dport, Seq: 1, Flags: 0x18, Window: 100}.Put(l4)
		return "dscp-tcp", wiretest.IPFrame(src, dst, wire.ProtoTCP, rndDSCP, append(append(l4, shim(0, wire.ShimDSCP(0))...), payload...), true)
	case 2:
		return "udp-port", wiretest.IPFrame(src, dst, wire.ProtoUDP, 0, udp(rndUDPPort, append(shim(spec.NPTUDPPort, dport), payload...)), true)
	case 3:
		var m [8]byte
		binary.BigEndian.PutUint64(m[:], rndProbe)
		return "probe", wiretest.IPFrame(src, dst, wire.ProtoUDP, 0, udp(dport, append(append(m[:], shim(0, 0)...), payload...)), true)
	case 4:
		g := make([]byte, 4+wire.ShimLen)
		_ = wire.PutGRE(g, rndGRE)
		_ = wire.GREShim{Type: typ, Length: uint8(len(in) / 4), NextProto: wire.EtherTypeIPv4}.Put(g[4:])
		return "gre", wiretest.IPFrame(src, dst, wire.ProtoGRE, 0, append(append(g, in...), inner[wire.EthernetLen:]...), false)
	case 5:
		v := make([]byte, wire.VXLANLen+wire.ShimLen)
		_ = wire.VXLANGPE{Flags: wire.GPEFlagI | wire.GPEFlagP, NextProto: rndGPENext, VNI: 5}.Put(v)
		_ = wire.GPEShim{Type: typ, Length: uint8(len(in) / 4), NextProto: 3}.Put(v[wire.VXLANLen:])
		return "vxlan-gpe", wiretest.IPFrame(src, dst, wire.ProtoUDP, 0, udp(spec.PortVXLANGPE, append(append(v, in...), inner...)), false)
	default:
		words := len(in) / 4
		g := make([]byte, wire.GeneveLen+4)
		_ = wire.Geneve{OptLen: uint8(1 + words), Protocol: 0x6558, VNI: 9}.Put(g)
		_ = wire.GeneveOption{Class: rndGeneve, Type: uint8(typ), Length: uint8(words)}.Put(g[wire.GeneveLen:])
		return "geneve", wiretest.IPFrame(src, dst, wire.ProtoUDP, 0, udp(spec.PortGeneve, append(append(g, in...), inner...)), false)
	}
}

// rndReport wraps random frames in a v2.0 report packet with random
// metadata (drop reports included) and returns it as a UDP frame.
func rndReport(rng *rand.Rand) []byte {
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: uint8(rng.IntN(64)), Seq: rng.Uint32() & wire.MaxReportSeq, NodeID: rng.Uint32()})
	for n := 1 + rng.IntN(3); n > 0; n-- {
		_, f := rndFrame(rng)
		bits := uint16(rng.Uint32()) & 0x7f00
		if rng.IntN(3) == 0 {
			bits |= wire.RepDrop
		}
		h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: bits&wire.RepDrop != 0,
			Congested: rng.IntN(4) == 0, TrackedFlow: rng.IntN(2) == 0, Intermediate: rng.IntN(4) == 0,
			RepMdBits: bits, DomainID: uint16(rng.Uint32()), DSMdBits: uint16(rng.Uint32()), DSMdStatus: uint16(rng.Uint32())}
		md := wire.ReportMetadata{IngressPort: uint16(rng.Uint32()), EgressPort: uint16(rng.Uint32()), HopLatency: rng.Uint32(),
			QueueID: uint8(rng.Uint32()), QueueOccupancy: rng.Uint32() & 0xffffff, IngressTimestamp: rng.Uint64() >> 12,
			EgressTimestamp: rng.Uint64() >> 12, L2IngressPort: rng.Uint32(), L2EgressPort: rng.Uint32(), TxUtilization: rng.Uint32(),
			BufferID: uint8(rng.Uint32()), BufferOccupancy: rng.Uint32() & 0xffffff, DropQueueID: uint8(rng.Uint32()), DropReason: uint8(rng.Uint32())}
		var ds []byte
		if rng.IntN(3) == 0 {
			ds = []byte{1, 2, 3, 4}
		}
		var err error
		if b, err = wire.AppendReport(b, &h, &md, ds, f); err != nil {
			panic(err)
		}
	}
	return wiretest.UDPFrame("192.0.2.9", "192.0.2.10", 4000, rndReportTo, b, false)
}

// writePcap writes frames as a classic pcap file (Ethernet).
func writePcap(t *testing.T, frames [][]byte) string {
	var buf bytes.Buffer
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h, 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535)
	binary.LittleEndian.PutUint32(h[20:], 1)
	buf.Write(h)
	for i, f := range frames {
		r := make([]byte, 16)
		binary.LittleEndian.PutUint32(r, uint32(i))
		binary.LittleEndian.PutUint32(r[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(r[12:], uint32(len(f)))
		buf.Write(r)
		buf.Write(f)
	}
	name := filepath.Join(t.TempDir(), "frames.pcap")
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestDecodeRandomAgreesWithWire runs `intcollector decode` with the
// randomized frames' markings on frames of every kind, bare and inside
// reports, and checks each decoded field against the wire package.
func TestDecodeRandomAgreesWithWire(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 26))
	var frames [][]byte
	var kinds []string
	for i := 0; i < rndFrames; i++ {
		if i%4 == 3 {
			frames, kinds = append(frames, rndReport(rng)), append(kinds, "report")
			continue
		}
		k, f := rndFrame(rng)
		frames, kinds = append(frames, f), append(kinds, k)
	}
	name := writePcap(t, frames)
	var out, errOut bytes.Buffer
	if code := decodeMain(append(rndFlags, name), &out, &errOut); code != 0 {
		t.Fatalf("decode exited %d: %s", code, errOut.String())
	}
	dec := json.NewDecoder(&out)
	dec.UseNumber()
	seen := map[string]int{}
	for i, f := range frames {
		var got map[string]any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		seen[kinds[i]]++
		var want map[string]any
		if kinds[i] == "report" {
			want = wantReport(t, f)
		} else {
			want = map[string]any{"frame": i + 1, "int": wantINT(t, f, false)}
		}
		want["frame"] = i + 1
		if w, g := norm(want), norm(got); w != g {
			t.Fatalf("frame %d (%s):\n got  %s\n want %s", i+1, kinds[i], g, w)
		}
	}
	for _, k := range []string{"dscp-udp", "dscp-tcp", "udp-port", "probe", "gre", "vxlan-gpe", "geneve", "report"} {
		if seen[k] == 0 {
			t.Errorf("no frame of kind %s", k)
		}
	}
	// With the default markings the custom GRE type, GPE next protocol
	// and Geneve class announce nothing.
	out.Reset()
	if code := decodeMain([]string{name}, &out, &errOut); code != 0 {
		t.Fatalf("decode exited %d: %s", code, errOut.String())
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if k := kinds[i]; (k == "gre" || k == "vxlan-gpe" || k == "geneve") && strings.Contains(line, `"int"`) {
			t.Fatalf("frame %d (%s) decoded INT with the default markings: %s", i+1, k, line)
		}
	}
}

// norm is v as canonical JSON.
func norm(v any) string {
	b, _ := json.Marshal(v)
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&x)
	b, _ = json.Marshal(x)
	return string(b)
}

// wantINT is what the wire package finds in frame: its INT header and
// hops, in the decoder's JSON names (nil without INT).
func wantINT(t *testing.T, frame []byte, truncated bool) map[string]any {
	p := rndParser()
	p.AllowTruncated = truncated
	var pk wire.Packet
	if err := p.Parse(frame, &pk); err != nil {
		t.Fatalf("wire: %v", err)
	}
	if !pk.HasINT() {
		return nil
	}
	b := frame[pk.INT : pk.INT+pk.INTLen]
	j := map[string]any{"encap": pk.Encap.String()}
	if pk.INTType == spec.TypeMX {
		h, err := wire.DecodeMXHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		j["type"], j["version"], j["d"], j["e"], j["m"] = "mx", h.Version, h.Discard, false, false
		j["hop_ml"], j["remaining_hop_count"], j["instruction_bitmap"] = 0, 0, uint16(h.Instructions)
		j["domain_id"], j["ds_instruction"], j["ds_flags"] = h.DomainID, h.DSInstructions, h.DSFlags
		j["hops"] = []any{}
		return j
	}
	h, st, err := wire.DecodeMD(b, -1)
	if err != nil {
		t.Fatal(err)
	}
	j["type"], j["version"], j["d"], j["e"], j["m"] = "md", h.Version, h.Discard, h.HopCountExceeded, h.MTUExceeded
	j["hop_ml"], j["remaining_hop_count"], j["instruction_bitmap"] = h.HopML, h.RemainingHops, uint16(h.Instructions)
	j["domain_id"], j["ds_instruction"], j["ds_flags"] = h.DomainID, h.DSInstructions, h.DSFlags
	hops := []any{}
	for i := 0; i < st.Count(); i++ {
		var m wire.HopMetadata
		if err := wire.DecodeHop(st.Hop(i), h.Instructions, &m); err != nil {
			t.Fatal(err)
		}
		hops = append(hops, hopFields(&m, true))
	}
	j["hops"] = hops
	return j
}

// hopFields names the valid fields of m as the decoder's JSON does.
func hopFields(m *wire.HopMetadata, node bool) map[string]any {
	h := map[string]any{}
	v := m.Valid
	set := func(bit spec.Instruction, kv ...any) {
		if v&bit != 0 {
			for i := 0; i < len(kv); i += 2 {
				h[kv[i].(string)] = kv[i+1]
			}
		}
	}
	if node {
		set(spec.InstNodeID, "node_id", m.NodeID)
	}
	set(spec.InstL1Interfaces, "ingress_if", m.IngressPort, "egress_if", m.EgressPort)
	set(spec.InstHopLatency, "hop_latency", m.HopLatency)
	set(spec.InstQueue, "queue_id", m.QueueID, "queue_occupancy", m.QueueOccupancy)
	set(spec.InstIngressTimestamp, "ingress_timestamp", m.IngressTimestamp)
	set(spec.InstEgressTimestamp, "egress_timestamp", m.EgressTimestamp)
	set(spec.InstL2Interfaces, "ingress_if_l2", m.L2IngressPort, "egress_if_l2", m.L2EgressPort)
	set(spec.InstEgressTxUtil, "tx_utilization", m.TxUtilization)
	set(spec.InstBuffer, "buffer_id", m.BufferID, "buffer_occupancy", m.BufferOccupancy)
	return h
}

// wantReport is what the wire package reads from a report frame.
func wantReport(t *testing.T, frame []byte) map[string]any {
	var pk wire.Packet
	if err := (&wire.Parser{}).Parse(frame, &pk); err != nil {
		t.Fatal(err)
	}
	g, rr, err := wire.NewReportReader(frame[pk.L4+wire.UDPLen : pk.End])
	if err != nil {
		t.Fatal(err)
	}
	reps := []any{}
	var r wire.Report
	for rr.Next(&r) {
		j := map[string]any{"rep_type": uint8(r.Type), "in_type": uint8(r.InType), "d": r.Dropped, "q": r.Congested,
			"f": r.TrackedFlow, "i": r.Intermediate, "domain_id": r.DomainID, "ds_md_bits": r.DSMdBits, "ds_md_status": r.DSMdStatus}
		var md wire.ReportMetadata
		ds, err := r.Baseline(&md)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			j["ds_metadata"] = fmt.Sprintf("%x", ds)
		}
		m := wire.HopMetadata{IngressPort: md.IngressPort, EgressPort: md.EgressPort, HopLatency: md.HopLatency, QueueID: md.QueueID,
			QueueOccupancy: md.QueueOccupancy, IngressTimestamp: md.IngressTimestamp, EgressTimestamp: md.EgressTimestamp,
			L2IngressPort: md.L2IngressPort, L2EgressPort: md.L2EgressPort, TxUtilization: md.TxUtilization,
			BufferID: md.BufferID, BufferOccupancy: md.BufferOccupancy, Valid: wire.Instructions(r.RepMdBits &^ wire.RepDrop)}
		j["md"] = hopFields(&m, false)
		if r.RepMdBits&wire.RepDrop != 0 {
			j["drop_reason"], j["drop_queue_id"] = md.DropReason, md.DropQueueID
		}
		var ip wire.Packet
		p := rndParser()
		if err := p.Parse(r.Inner, &ip); err != nil {
			t.Fatal(err)
		}
		// A tunnelled packet's flow is its inner packet's, INT in the
		// tunnel header included.
		fl := ip.Flow
		var tp wire.Packet
		tun, inTunnel := wire.FlowInner(r.Inner, &ip, &tp)
		if inTunnel {
			fl = tp.Flow
		}
		in := map[string]any{"length": len(r.Inner), "src": fl.Src.String(), "dst": fl.Dst.String(), "proto": fl.Proto}
		if fl.Proto == wire.ProtoUDP || fl.Proto == wire.ProtoTCP {
			in["src_port"], in["dst_port"] = fl.SrcPort, fl.DstPort
		}
		if inTunnel {
			in["tunnel"], in["tunnel_id"] = tun.Kind.String(), tun.ID
			in["outer_src"], in["outer_dst"] = ip.Flow.Src.String(), ip.Flow.Dst.String()
		}
		if w := wantINT(t, r.Inner, false); w != nil {
			in["int"] = w
		}
		j["inner"] = in
		reps = append(reps, j)
	}
	if rr.Err() != nil {
		t.Fatal(rr.Err())
	}
	return map[string]any{"report": map[string]any{"version": g.Version, "hw_id": g.HWID, "sequence": g.Seq, "node_id": g.NodeID, "reports": reps}}
}

// TestDecodeMalformedShim decodes a frame whose DSCP-marked INT shim
// claims more words than the packet carries between two good frames: it
// alone is reported with an error.
func TestDecodeMalformedShim(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in, _ := rndINT(rng, false)
	body := func(words uint8) []byte {
		b := make([]byte, wire.ShimLen)
		_ = wire.Shim{Type: spec.TypeMD, Length: words, Value: wire.ShimDSCP(0)}.Put(b)
		return append(b, in...)
	}
	l4 := func(b []byte) []byte {
		u := make([]byte, wire.UDPLen, wire.UDPLen+len(b))
		u = append(u, b...)
		_ = wire.UDPHeader{SrcPort: 1000, DstPort: 2000, Length: uint16(len(u))}.Put(u)
		return u
	}
	good := wiretest.IPFrame("10.0.0.1", "10.0.0.2", wire.ProtoUDP, rndDSCP, l4(body(uint8(len(in)/4))), true)
	bad := wiretest.IPFrame("10.0.0.1", "10.0.0.2", wire.ProtoUDP, rndDSCP, l4(body(uint8(len(in)/4)+20)), true)
	name := writePcap(t, [][]byte{good, bad, good})
	var out, errOut bytes.Buffer
	if code := decodeMain([]string{name}, &out, &errOut); code != 0 {
		t.Fatalf("decode exited %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), out.String())
	}
	for i, l := range lines {
		hasErr, hasINT := strings.Contains(l, `"error"`), strings.Contains(l, `"int"`)
		if i == 1 && (!hasErr || !strings.Contains(l, "length")) || i != 1 && (hasErr || !hasINT) {
			t.Errorf("frame %d: %s", i+1, l)
		}
	}
}

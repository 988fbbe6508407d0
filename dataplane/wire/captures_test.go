package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/intd-project/intd/dataplane/wire/pcap"
	"github.com/intd-project/intd/sai/spec"
)

// Peer captures (pcapng) from Host-INT (INT 0.5 data packets and its
// Telemetry Report 0.5 variant) and int-host-reporter (TR 0.5 switch-local
// reports). Expected values are read off the bytes.
const capturesDir = "../../../shared/captures"

func readCapture(t *testing.T, name string) [][]byte {
	t.Helper()
	path := filepath.Join(capturesDir, name)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("capture %s missing: shared/captures must sit next to the repository", path)
	}
	must(t, err)
	r, err := pcap.NewReader(bytes.NewReader(data))
	must(t, err)
	var out [][]byte
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		if p.LinkType != pcap.LinkTypeEthernet {
			t.Fatalf("link type %d", p.LinkType)
		}
		out = append(out, bytes.Clone(p.Data))
	}
}

// udpFrames returns the parsed IPv4/UDP frames of a capture.
func udpFrames(t *testing.T, name string, c *Parser) ([][]byte, []Packet) {
	var frames [][]byte
	var pkts []Packet
	for _, f := range readCapture(t, name) {
		var p Packet
		if err := c.Parse(f, &p); err != nil || p.IPVersion != 4 || p.Proto != ProtoUDP {
			continue
		}
		frames, pkts = append(frames, f), append(pkts, p)
	}
	if len(frames) == 0 {
		t.Fatalf("%s: no UDP packets", name)
	}
	return frames, pkts
}

func checkHostINTSourceBlock(t *testing.T, d INT05) {
	t.Helper()
	h := d.Header
	if d.Shim.Type != INT05TypeHostSeq || d.Shim.Length != 9 || h.Version != 0 || h.InstCount != 4 ||
		h.MaxHops != 2 || h.TotalHops != 1 || h.Instructions != 0xcc00 {
		t.Fatalf("INT 0.5 shim/header %+v %+v", d.Shim, h)
	}
	if !d.HasSeq || d.Seq != 1 {
		t.Fatalf("sequence %v %d", d.HasSeq, d.Seq)
	}
	var m INT05HopMetadata
	d.DecodeINT05Hop(0, &m)
	// Host-INT writes the same value for both ports and both timestamps.
	if m.SwitchID != 1 || m.IngressPort != 3 || m.EgressPort != 3 || m.IngressTimestamp != m.EgressTimestamp {
		t.Fatalf("source hop %+v", m)
	}
}

func TestCaptureHostINT05OverUDPDSCP(t *testing.T) {
	frames, pkts := udpFrames(t, "host-int-int05-over-udp-dscp.pcap", &Parser{})
	if len(frames) != 20 {
		t.Fatalf("%d data packets, want 20", len(frames))
	}
	var lastTS uint32
	for i, f := range frames {
		p := &pkts[i]
		if dscp := f[p.L3+1] >> 2; dscp != 1 { // DSCP 1 marks INT in this capture
			t.Fatalf("packet %d DSCP %d", i, dscp)
		}
		if p.Flow.SrcPort != 59629 || p.Flow.DstPort != 5000 {
			t.Fatalf("flow %+v", p.Flow)
		}
		d, err := DecodeINT05(f[p.L4+UDPLen:p.End], INT05Options{})
		must(t, err)
		checkHostINTSourceBlock(t, d)
		if d.Tail != (INT05Tail{}) { // original DSCP 0, no port/proto rewrite
			t.Fatalf("tail %+v", d.Tail)
		}
		want := fmt.Sprintf("hello-int-%d", i)
		if got := string(f[p.L4+UDPLen+d.Len : p.End]); got != want {
			t.Fatalf("payload %q, want %q", got, want)
		}
		var m INT05HopMetadata
		d.DecodeINT05Hop(0, &m)
		// 32-bit nanosecond timestamps wrap every 4.3 s; packets are ~100 ms apart.
		if gap := m.IngressTimestamp - lastTS; i > 0 && (gap < 50e6 || gap > 200e6) {
			t.Fatalf("packet %d: timestamp gap %d ns", i, gap)
		}
		lastTS = m.IngressTimestamp
	}
	// First packet, byte for byte: ingress timestamp 0xf51f0d9a.
	d, _ := DecodeINT05(frames[0][pkts[0].L4+UDPLen:], INT05Options{})
	var m INT05HopMetadata
	d.DecodeINT05Hop(0, &m)
	if m.IngressTimestamp != 0xf51f0d9a {
		t.Fatalf("first timestamp %#x", m.IngressTimestamp)
	}
}

func TestCaptureHostINT05UDPExtension(t *testing.T) {
	frames, pkts := udpFrames(t, "host-int-int05-udp-extension.pcap", &Parser{})
	if len(frames) != 20 {
		t.Fatalf("%d data packets, want 20", len(frames))
	}
	for i, f := range frames {
		p := &pkts[i]
		if p.Flow.DstPort != HostINTDefaultPort || be16(f, p.L4+6) != 0 {
			t.Fatalf("outer UDP %+v checksum %#x", p.Flow, be16(f, p.L4+6))
		}
		d, err := DecodeINT05(f[p.L4+UDPLen:p.End], INT05Options{})
		must(t, err)
		checkHostINTSourceBlock(t, d)
		if d.Tail.Proto != ProtoUDP {
			t.Fatalf("tail %+v", d.Tail)
		}
		// The original UDP header follows the INT block.
		orig := f[p.L4+UDPLen+d.Len:]
		if be16(orig, 0) != 47695 || be16(orig, 2) != 5000 || string(orig[8:p.End-(p.L4+UDPLen+d.Len)]) != fmt.Sprintf("hello-int-%d", i) {
			t.Fatalf("original UDP % x", orig)
		}
	}
}

func TestCaptureHostINTReports(t *testing.T) {
	for _, tc := range []struct {
		file    string
		ts      uint32
		sinkTS  uint32
		srcTS   uint32
		srcPort uint16
	}{
		{"host-int-report-int05-over-udp-dscp.pcap", 0x6b01ee15, 0x98bc36a8, 0xf51f0d9a, 59629},
		// In the UDP-extension variant the report carries the original UDP
		// header (not the added one) in front of the INT block.
		{"host-int-report-int05-udp-extension.pcap", 0x6b01ee2c, 0x0ee51dc3, 0x6b48d7e2, 47695},
	} {
		t.Run(tc.file, func(t *testing.T) {
			frames, pkts := udpFrames(t, tc.file, &Parser{})
			f, p := frames[0], &pkts[0]
			if p.Flow.DstPort != 32766 {
				t.Fatalf("report port %d", p.Flow.DstPort)
			}
			r, err := DecodeTR05(f[p.L4+UDPLen : p.End])
			must(t, err)
			want := TR05Header{NextProto: spec.TR05IPv4, TrackedFlow: true, Seq: 1, IngressTimestamp: tc.ts}
			if r.Header != want || !r.HasReporterID || r.ReporterID != 2 {
				t.Fatalf("TR 0.5 %+v reporter %d", r.Header, r.ReporterID)
			}
			var in Packet
			must(t, (&Parser{AllowTruncated: true}).ParseIP(r.Inner, &in))
			if in.Flow.Src.String() != "10.0.0.1" || in.Flow.Dst.String() != "10.0.0.2" || in.Flow.SrcPort != tc.srcPort || in.Flow.DstPort != 5000 {
				t.Fatalf("inner flow %+v", in.Flow)
			}
			d, err := DecodeINT05(r.Inner[in.L4+UDPLen:], INT05Options{NoTail: true})
			must(t, err)
			if d.Shim.Length != 12 || d.Header.TotalHops != 2 || !d.HasSeq || d.Seq != 1 {
				t.Fatalf("embedded INT %+v", d)
			}
			var sink, src INT05HopMetadata
			d.DecodeINT05Hop(0, &sink)
			d.DecodeINT05Hop(1, &src)
			if sink.SwitchID != 2 || sink.IngressPort != 2 || sink.EgressPort != 2 || sink.EgressTimestamp != tc.sinkTS {
				t.Fatalf("sink hop %+v", sink)
			}
			if src.SwitchID != 1 || src.IngressPort != 3 || src.IngressTimestamp != tc.srcTS {
				t.Fatalf("source hop %+v", src)
			}
		})
	}
}

func TestCaptureIntHostReporterTR05(t *testing.T) {
	frames, pkts := udpFrames(t, "int-host-reporter-tr05-flow-reports.pcap", &Parser{})
	want := []struct {
		seq, igTS, egTS uint32
		payload         string
	}{
		{1, 0x17f6c864, 0x17f786de, "hello-int-0"},
		{2, 0x839e1ad3, 0x839e9206, "hello-int-18"},
	}
	if len(frames) != len(want) {
		t.Fatalf("%d reports", len(frames))
	}
	for i, w := range want {
		f, p := frames[i], &pkts[i]
		r, err := DecodeTR05(f[p.L4+UDPLen : p.End])
		must(t, err)
		h := TR05Header{NextProto: spec.TR05Local, TrackedFlow: true, HWID: 1, Seq: w.seq, IngressTimestamp: w.igTS}
		if r.Header != h {
			t.Fatalf("report %d header %+v", i, r.Header)
		}
		s := TR05Switch{SwitchID: 1, IngressPort: 3, EgressPort: 5, EgressTimestamp: w.egTS}
		if r.Switch != s {
			t.Fatalf("report %d switch-local %+v", i, r.Switch)
		}
		if i == 0 && s.EgressTimestamp-h.IngressTimestamp != 48762 { // hop latency in ns
			t.Fatalf("hop latency %d", s.EgressTimestamp-h.IngressTimestamp)
		}
		var in Packet
		must(t, (&Parser{}).Parse(r.Inner, &in))
		if in.Flow.Src.String() != "10.1.0.2" || in.Flow.Dst.String() != "10.2.0.2" || in.Flow.SrcPort != 56728 || in.Flow.DstPort != 5000 {
			t.Fatalf("inner flow %+v", in.Flow)
		}
		if got := string(bytes.TrimRight(r.Inner[in.L4+UDPLen:in.End], "\x00")); got != w.payload {
			t.Fatalf("payload %q", got)
		}
	}
}

// The 2016 spec examples (Geneve and VXLAN-GPE, switch id + queue
// occupancy, BOS in the top bit of the last value of the bottom hop).
func TestSpec2016Examples(t *testing.T) {
	hop := func(vals ...uint32) []byte {
		var b []byte
		for _, v := range vals {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		return b
	}
	hdr := func(ins, total uint8, bitmap uint16) []byte {
		b := make([]byte, 8)
		must(t, LegacyHeader{InstCount: ins, MaxHops: 16, TotalHops: total, Instructions: Instructions(bitmap)}.Put(b, false))
		return b
	}
	// GPE shim chain: hop-by-hop (type 1, length 9) then destination (type 2, length 6).
	var b []byte
	b = append(b, 1, 0, 9, GPENextProtoINT2016)
	b = append(b, hdr(2, 3, 0x9000)...)
	b = append(b, hop(0x33, 0x300, 0x22, 0x200, 0x11, 0x8000_0100)...)
	b = append(b, 2, 0, 6, 3)
	b = append(b, hdr(1, 3, 0x1000)...)
	b = append(b, hop(0x300, 0x200, 0x8000_0100)...)
	b = append(b, 0xee) // encapsulated Ethernet payload
	want := hx(t, `
01 00 09 05 // shim: Type 1 (hop-by-hop), Reserved, Length 9, NextProto 0x5 (INT)
00 02 10 03 // Ver 0 Rep 0 C 0 E 0, InsCnt 2, MaxHopCnt 16, TotalHopCnt 3
90 00 00 00 // Instruction bitmap 1001 0000 0000 0000, Reserved
00 00 00 33 // 0 | sw id of hop3
00 00 03 00 // 0 | queue occupancy of hop3
00 00 00 22 // 0 | sw id of hop2
00 00 02 00
00 00 00 11 // 0 | sw id of hop1
80 00 01 00 // 1 (BOS) | queue occupancy of hop1
02 00 06 03 // shim: Type 2 (destination), Length 6, NextProto 0x3 (Ethernet)
00 01 10 03 // InsCnt 1, MaxHopCnt 16, TotalHopCnt 3
10 00 00 00 // Instruction bitmap 0001 0000 0000 0000
00 00 03 00
00 00 02 00
80 00 01 00 // BOS
ee          // Encapsulated Ethernet payload
`)
	mustEqual(t, "INT 2016 over VXLAN-GPE", b, want)
	var got []Legacy2016GPE
	off, err := Decode2016GPE(want, func(g *Legacy2016GPE) { got = append(got, *g) })
	must(t, err)
	if off != len(want)-1 || len(got) != 2 || got[0].Type != 1 || got[1].Type != 2 || got[1].NextProto != 3 {
		t.Fatalf("decoded %+v off %d", got, off)
	}
	if h := got[0].Hop(2); h.Value(0, true) != 0x11 || h.Value(1, true) != 0x100 || !h.BOS() || got[0].Hop(0).BOS() {
		t.Fatalf("hop1 of hop-by-hop stack % x", h.Values)
	}
	if got[1].Hops() != 3 || got[1].Hop(0).Value(0, true) != 0x300 {
		t.Fatal("destination stack")
	}
	// Geneve option body of the Geneve example is the same header + stack.
	s, err := Decode2016Geneve(want[4:36])
	must(t, err)
	if s.Header.InstCount != 2 || s.Header.MaxHops != 16 || s.Hops() != 3 {
		t.Fatalf("geneve %+v", s.Header)
	}
}

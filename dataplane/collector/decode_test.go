package collector

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const capturesDir = "../../../shared/captures"

// mdFrame builds an Ethernet/IPv4/UDP frame carrying an INT-MD stack with
// the given hops (top of stack first) after a DSCP-marked shim.
func mdFrame(t testing.TB, hops []wire.HopMetadata, inst wire.Instructions, payload int) []byte {
	t.Helper()
	hopLen := inst.Words() * 4
	intLen := wire.MDHeaderLen + hopLen*len(hops)
	n := wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen + wire.ShimLen + intLen + payload
	b := make([]byte, n)
	must(t, wire.PutEthernet(b, [6]byte{2, 0, 0, 0, 0, 2}, [6]byte{2, 0, 0, 0, 0, 1}, wire.EtherTypeIPv4))
	ip := b[wire.EthernetLen:]
	must(t, wire.IPv4Header{TOS: 0x17 << 2, TotalLen: uint16(len(ip)), TTL: 64, Proto: wire.ProtoUDP,
		Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}}.Put(ip))
	udp := ip[wire.IPv4MinLen:]
	must(t, wire.UDPHeader{SrcPort: 40000, DstPort: 5001, Length: uint16(len(udp))}.Put(udp))
	sh := udp[wire.UDPLen:]
	must(t, wire.Shim{Type: spec.TypeMD, Length: uint8(intLen / 4), Value: wire.ShimDSCP(0)}.Put(sh))
	md := sh[wire.ShimLen:]
	must(t, wire.MDHeader{Version: 2, HopML: uint8(inst.Words()), RemainingHops: 5, Instructions: inst,
		DomainID: 7}.Put(md))
	off := wire.MDHeaderLen
	for i := range hops {
		n, err := wire.PutHop(md[off:], inst, 0, &hops[i])
		must(t, err)
		off += n
	}
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var testInst = spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTimestamp

func testHops() []wire.HopMetadata {
	v := testInst
	return []wire.HopMetadata{ // top of stack (last hop) first
		{NodeID: 3, IngressPort: 1, EgressPort: 2, HopLatency: 3000, QueueID: 1, QueueOccupancy: 30, EgressTimestamp: 3_000_000, Valid: v},
		{NodeID: 2, IngressPort: 1, EgressPort: 2, HopLatency: 2000, QueueID: 1, QueueOccupancy: 20, EgressTimestamp: 2_000_000, Valid: v},
		{NodeID: 1, IngressPort: 1, EgressPort: 2, HopLatency: 1000, QueueID: 1, QueueOccupancy: 10, EgressTimestamp: 1_000_000, Valid: v},
	}
}

// testPayload builds a v2.0 report packet with three reports: a sink
// report embedding the 3-hop INT-MD frame, a drop report and an INT-MX
// style intermediate report with an IPv4 inner packet.
func testPayload(t testing.TB, seq uint32) []byte {
	b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 5, Seq: seq, NodeID: 4})
	must(t, err)
	frame := mdFrame(t, testHops(), testInst, 16)
	h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true,
		RepMdBits: wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue, DomainID: 7}
	md := wire.ReportMetadata{IngressPort: 1, EgressPort: 9, HopLatency: 4000, QueueID: 2, QueueOccupancy: 40}
	b, err = wire.AppendReport(b, &h, &md, nil, frame)
	must(t, err)
	h = wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: true,
		RepMdBits: wire.RepL1Ports | wire.RepDrop, DomainID: 7}
	md = wire.ReportMetadata{IngressPort: 1, EgressPort: 9, DropQueueID: 2, DropReason: 71}
	b, err = wire.AppendReport(b, &h, &md, nil, frame[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen])
	must(t, err)
	h = wire.ReportHeader{Type: spec.RepINT, InType: spec.InIPv4, Congested: true, Intermediate: true,
		RepMdBits: wire.RepHopLatency | wire.RepQueue, DomainID: 7}
	md = wire.ReportMetadata{HopLatency: 50000, QueueID: 3, QueueOccupancy: 5000}
	b, err = wire.AppendReport(b, &h, &md, nil, frame[wire.EthernetLen:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen])
	must(t, err)
	return b
}

type collect struct{ reps []IndividualJSON }

func (c *collect) HandleReport(r *Report) { c.reps = append(c.reps, ReportToJSON(r)) }

func TestDecodeEncodedReports(t *testing.T) {
	d := NewDecoder()
	var c collect
	n, err := d.Decode(testPayload(t, 77), &c)
	if err != nil || n != 3 {
		t.Fatalf("Decode = %d, %v", n, err)
	}
	r := c.reps[0]
	if r.RepType != 1 || r.InType != 3 || !r.F || *r.MD.HopLatency != 4000 || *r.MD.EgressIf != 9 || r.Inner == nil {
		t.Fatalf("report 0 = %+v", r)
	}
	in := r.Inner
	if in.Src != "10.0.0.1" || in.Dst != "10.0.0.2" || *in.DstPort != 5001 || in.INT == nil {
		t.Fatalf("inner = %+v", in)
	}
	st := in.INT
	if st.Type != "md" || st.Version != 2 || st.Encap != "dscp" || len(st.Hops) != 3 || *st.DomainID != 7 || st.RemainingHopCount != 5 {
		t.Fatalf("int = %+v", st)
	}
	for i, want := range []uint32{3, 2, 1} {
		h := st.Hops[i]
		if *h.NodeID != want || *h.HopLatency != want*1000 || *h.QueueOccupancy != want*10 || *h.EgressTimestamp != uint64(want)*1_000_000 {
			t.Errorf("hop %d = %+v", i, h)
		}
		if h.IngressTimestamp != nil || h.TxUtilization != nil {
			t.Errorf("hop %d has fields not requested", i)
		}
	}
	if d := c.reps[1]; !d.D || d.DropReason == nil || *d.DropReason != 71 || d.Inner.INT != nil || *d.Inner.DstPort != 5001 {
		t.Errorf("drop report = %+v", d)
	}
	if q := c.reps[2]; !q.Q || !q.I || q.InType != 4 || *q.MD.QueueOccupancy != 5000 || q.Inner.Src != "10.0.0.1" {
		t.Errorf("congestion report = %+v", q)
	}
	// The JSON form keeps the group header.
	j := d.PayloadToJSON(testPayload(t, 78))
	if j.Version != 2 || j.HWID != 5 || j.Sequence != 78 || j.NodeID != 4 || len(j.Reports) != 3 || j.Error != "" {
		t.Fatalf("PayloadToJSON = %+v", j)
	}
}

func TestDecodeMalformed(t *testing.T) {
	d := NewDecoder()
	var c collect
	good := testPayload(t, 1)
	for i := 0; i < len(good); i++ {
		d.Decode(good[:i], &c) // must not panic
	}
	bad := append([]byte(nil), good...)
	bad[8+1] = 200 // report length past the end
	if _, err := d.Decode(bad, &c); err != wire.ErrTruncated {
		t.Errorf("long report: %v", err)
	}
	if _, err := d.Decode([]byte{0x30, 0, 0, 0, 0, 0, 0, 0}, &c); err != wire.ErrBadVersion {
		t.Errorf("version 3: %v", err)
	}
}

func decodeCapture(t *testing.T, name string) []byte {
	f, err := os.Open(filepath.Join(capturesDir, name))
	if err != nil {
		t.Skipf("capture: %v", err)
	}
	defer f.Close()
	var out bytes.Buffer
	if err := NewFrameDecoder(32766).DecodePcap(f, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func parseLines(t *testing.T, b []byte) []FrameJSON {
	var fs []FrameJSON
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var f FrameJSON
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		fs = append(fs, f)
	}
	return fs
}

func TestCapturesGolden(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(capturesDir, "*.pcap"))
	if len(names) == 0 {
		t.Skip("no captures")
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			got := decodeCapture(t, name)
			golden := filepath.Join("testdata", strings.TrimSuffix(name, ".pcap")+".jsonl")
			if *update {
				must(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			must(t, err)
			if !bytes.Equal(got, want) {
				t.Errorf("decode output differs from %s (run with -update after checking)\n%s", golden, got)
			}
			for _, f := range parseLines(t, got) {
				if f.Error != "" || (f.Report != nil && f.Report.Error != "") {
					t.Errorf("frame %d: error %q", f.Frame, f.Error)
				}
			}
		})
	}
}

// Values asserted here were read off the captures with tshark -x.
func TestCaptureINT05Data(t *testing.T) {
	for _, c := range []struct {
		file, encap string
		frames      []int
		firstTS     uint64
	}{
		// 03 00 09 00 | 00 04 02 01 cc 00 | 00000001 00030003 f51f0d9a f51f0d9a | 00000001 | tail
		{"host-int-int05-over-udp-dscp.pcap", "dscp", []int{12, 13, 14, 15, 16, 17, 18, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}, 0xf51f0d9a},
		// UDP to 33122; same stack, tail proto 0x11, then the original UDP header.
		{"host-int-int05-udp-extension.pcap", "udp-port", []int{13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30, 31, 32, 33, 34}, 0x6b48d7e2},
	} {
		fs := parseLines(t, decodeCapture(t, c.file))
		var got []int
		for _, f := range fs {
			if f.INT == nil {
				continue
			}
			got = append(got, f.Frame)
			st := f.INT
			if st.Encap != c.encap || st.Type != "md" || st.Version != 0 || st.HopML != 4 || st.InstructionBitmap != 0xcc00 ||
				st.RemainingHopCount != 1 || st.Sequence == nil || *st.Sequence != 1 || len(st.Hops) != 1 {
				t.Fatalf("%s frame %d: %+v", c.file, f.Frame, st)
			}
			h := st.Hops[0]
			if *h.NodeID != 1 || *h.IngressIf != 3 || *h.EgressIf != 3 || h.HopLatency != nil || *h.IngressTimestamp != *h.EgressTimestamp {
				t.Fatalf("%s frame %d hop: %+v", c.file, f.Frame, h)
			}
			if f.Frame == c.frames[0] && *h.IngressTimestamp != c.firstTS {
				t.Errorf("%s first timestamp %#x", c.file, *h.IngressTimestamp)
			}
		}
		if len(got) != len(c.frames) {
			t.Errorf("%s: INT frames %v, want %v", c.file, got, c.frames)
		}
	}
}

func TestCaptureReports(t *testing.T) {
	// Host-INT TR 0.5 "inner IPv4" reports: 04 20 00 00 | seq 1 | ts |
	// reporter 00000002 | IPv4 + UDP + INT 0.5 with two hops (2 then 1).
	for _, c := range []struct {
		file   string
		sport  uint16
		ts     uint32
		hop0TS uint64
		hop1TS uint64
	}{
		{"host-int-report-int05-over-udp-dscp.pcap", 59629, 0x6b01ee15, 0x98bc36a8, 0xf51f0d9a},
		{"host-int-report-int05-udp-extension.pcap", 47695, 0x6b01ee2c, 0x0ee51dc3, 0x6b48d7e2},
	} {
		fs := parseLines(t, decodeCapture(t, c.file))
		rep := fs[0].Report
		if rep == nil || rep.Version != 0 || rep.Sequence != 1 || rep.NodeID != 2 || rep.HWID != 0 || len(rep.Reports) != 1 {
			t.Fatalf("%s: %+v", c.file, rep)
		}
		r := rep.Reports[0]
		if !r.F || r.InType != 4 || *r.MD.IngressTimestamp != uint64(c.ts) {
			t.Errorf("%s: report %+v", c.file, r)
		}
		in := r.Inner
		if in.Src != "10.0.0.1" || in.Dst != "10.0.0.2" || *in.SrcPort != c.sport || *in.DstPort != 5000 || in.INT == nil {
			t.Fatalf("%s: inner %+v", c.file, in)
		}
		hs := in.INT.Hops
		if len(hs) != 2 || *hs[0].NodeID != 2 || *hs[1].NodeID != 1 || *hs[0].IngressIf != 2 || *hs[1].EgressIf != 3 ||
			*hs[0].IngressTimestamp != c.hop0TS || *hs[1].EgressTimestamp != c.hop1TS || in.INT.RemainingHopCount != 0 {
			t.Errorf("%s: hops %+v", c.file, in.INT)
		}
		if fs[1].Report != nil || fs[1].INT != nil {
			t.Errorf("%s: ICMP frame decoded as %+v", c.file, fs[1])
		}
	}
	// int-host-reporter TR 0.5 local reports: 02 20 00 01 | seq | ingress
	// ts | switch 1, ports 3/5, queue 0/0, egress ts | Ethernet frame.
	fs := parseLines(t, decodeCapture(t, "int-host-reporter-tr05-flow-reports.pcap"))
	for i, want := range []struct {
		seq     uint32
		in, out uint64
	}{{1, 0x17f6c864, 0x17f786de}, {2, 0x839e1ad3, 0x839e9206}} {
		rep := fs[i].Report
		if rep == nil || rep.Sequence != want.seq || rep.NodeID != 1 || rep.HWID != 1 || len(rep.Reports) != 1 {
			t.Fatalf("frame %d: %+v", i+1, rep)
		}
		r := rep.Reports[0]
		md := r.MD
		if r.RepType != 1 || r.InType != 3 || !r.F || *md.IngressIf != 3 || *md.EgressIf != 5 ||
			*md.IngressTimestamp != want.in || *md.EgressTimestamp != want.out || uint64(*md.HopLatency) != want.out-want.in {
			t.Errorf("frame %d: %+v", i+1, md)
		}
		if r.Inner.Src != "10.1.0.2" || r.Inner.Dst != "10.2.0.2" || *r.Inner.SrcPort != 56728 || *r.Inner.DstPort != 5000 {
			t.Errorf("frame %d inner: %+v", i+1, r.Inner)
		}
	}
	if want := 48762; *fs[0].Report.Reports[0].MD.HopLatency != uint32(want) {
		t.Errorf("hop latency %d", *fs[0].Report.Reports[0].MD.HopLatency)
	}
}

func TestFlowAddrs(t *testing.T) {
	d := NewDecoder()
	var st INTStack
	k, ok, err := d.DecodeFrame(mdFrame(t, testHops(), testInst, 0), &st)
	if err != nil || !ok || k.Src != netip.MustParseAddr("10.0.0.1") || k.DstPort != 5001 || len(st.Hops) != 3 {
		t.Fatalf("DecodeFrame = %v %v %v %+v", k, ok, err, len(st.Hops))
	}
}

// TestResetReport: resetReport clears every field of a report that set
// them all (a field added to Report must be cleared there too).
func TestResetReport(t *testing.T) {
	d := NewDecoder()
	r := &d.rep
	v := reflect.ValueOf(r).Elem()
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(netip.Addr{}) {
				v.Set(reflect.ValueOf(netip.MustParseAddr("10.1.2.3")))
				return
			}
			for i := 0; i < v.NumField(); i++ {
				if v.Field(i).CanSet() {
					fill(v.Field(i))
				}
			}
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(1)
		case reflect.Int:
			v.SetInt(1)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		case reflect.Interface:
			v.Set(reflect.ValueOf(wire.ErrTruncated))
		}
	}
	fill(v)
	d.resetReport(r)
	want := Report{INT: INTStack{Hops: d.hops[:0]}}
	if !reflect.DeepEqual(*r, want) || len(r.INT.Hops) != 0 {
		t.Errorf("after reset: %+v", *r)
	}
}

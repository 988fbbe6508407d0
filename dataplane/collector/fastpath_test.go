package collector

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// fuzzCorpus returns the FuzzDecode seed corpus in testdata.
func fuzzCorpus(t *testing.T) [][]byte {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	must(t, err)
	if len(files) == 0 {
		t.Fatal("no FuzzDecode corpus")
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s: unexpected corpus format", f)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		must(t, err)
		out = append(out, []byte(s))
	}
	return out
}

// fastPathInputs is the corpus plus report packets exercising the fused
// sink-report path: several instruction bitmaps, unavailable values, stacks
// with and without the sink's own hop, deeper than the path, and paths
// that change.
func fastPathInputs(t *testing.T) [][]byte {
	in := fuzzCorpus(t)
	in = append(in, testPayload(t, 1), benchPayload(t, 8, 0), benchPayload(t, 8, 1))
	// Tunnelled inner packets (an outer flow) between sink reports of
	// plain ones, in one packet.
	udp := wiretest.UDPFrame("10.250.0.1", "192.0.2.53", 4000, 53, []byte("query"), true)[wire.EthernetLen:]
	plain := mdFrame(t, testHops(), testInst, 0)
	mixed, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, NodeID: 4})
	must(t, err)
	for _, f := range [][]byte{
		wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelGTPU, ID: 7}, "10.0.0.1", "10.0.0.2", 0, udp), plain,
		wiretest.TunnelFrame(wiretest.Tunnel{Kind: wire.TunnelVXLAN, ID: 9}, "10.0.0.1", "10.0.0.2", 0, udp), plain,
	} {
		h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true, RepMdBits: wire.RepHopLatency}
		mixed, err = wire.AppendReport(mixed, &h, &wire.ReportMetadata{HopLatency: 400}, nil, f)
		must(t, err)
	}
	in = append(in, mixed)
	insts := []wire.Instructions{
		testInst,
		spec.InstNodeID,
		spec.InstNodeID | spec.InstHopLatency,
		spec.InstNodeID | spec.InstIngressTimestamp | spec.InstEgressTimestamp,
		spec.InstNodeID | spec.InstIngressTimestamp,
		spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstL2Interfaces | spec.InstEgressTxUtil | spec.InstBuffer | spec.InstChecksumComplement,
		0xffff,
		spec.InstL1Interfaces | spec.InstHopLatency, // no node ID: not the fused path
	}
	const un32, un64 = wire.Unavailable32, wire.Unavailable64
	for k, inst := range insts {
		for variant := 0; variant < 6; variant++ {
			var hops []wire.HopMetadata
			nh := []int{1, 3, 7, 8, 12, 3}[variant]
			for j := 0; j < nh; j++ {
				m := wire.HopMetadata{NodeID: uint32(nh - j), IngressPort: 1, EgressPort: uint16(j), HopLatency: uint32(1000 * (j + 1)),
					QueueID: uint8(j), QueueOccupancy: uint32(10 * j), IngressTimestamp: uint64(5000 + j), EgressTimestamp: uint64(9000 - 3000*(j%2)),
					TxUtilization: 3, BufferID: 1, BufferOccupancy: 5}
				switch (j + variant) % 5 {
				case 1:
					m.HopLatency = un32
				case 2:
					m.IngressTimestamp, m.EgressTimestamp = un64, un64
				case 3:
					m.NodeID, m.IngressPort, m.EgressPort, m.QueueOccupancy, m.QueueID = un32, 0xffff, 0xffff, 0xffffff, 0xff
				case 4:
					m.HopLatency, m.EgressTimestamp = un32, un64
				}
				if variant == 5 && j == 0 {
					m.NodeID = 4 // the sink put its own hop on the stack
				}
				hops = append(hops, m)
			}
			frame := mdFrame(t, hops, inst, variant)
			if variant == 4 {
				// Unmarked INT over UDP whose shim carries the original
				// destination port (NPT 1).
				const shim = wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen
				frame[wire.EthernetLen+1] = 0
				frame[shim] |= 1 << 2
				frame[shim+2], frame[shim+3] = 0x15, 0xb3
			}
			b, err := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: uint32(k*6 + variant), NodeID: 4})
			must(t, err)
			for rep := 0; rep < 5; rep++ {
				h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true,
					RepMdBits: []uint16{wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue, 0, wire.RepIngressTimestamp | wire.RepEgressTimestamp,
						wire.RepL1Ports | wire.RepHopLatency | wire.RepQueue, wire.RepIngressTimestamp | wire.RepEgressTimestamp}[rep]}
				md := wire.ReportMetadata{IngressPort: 1, EgressPort: 9, HopLatency: 4000, QueueOccupancy: 40, IngressTimestamp: 7, EgressTimestamp: 99}
				if rep >= 3 {
					// All ones: report metadata has no unavailable value.
					md = wire.ReportMetadata{IngressPort: 0xffff, EgressPort: 0xffff, HopLatency: un32, QueueID: 0xff, QueueOccupancy: 0xffffff,
						IngressTimestamp: un64 - uint64(k), EgressTimestamp: un64}
				}
				b, err = wire.AppendReport(b, &h, &md, nil, frame)
				must(t, err)
			}
			in = append(in, b)
		}
	}
	return in
}

// TestFusedPathMatchesReference: the collector's fused sink-report path
// (hops decoded into the path, Report.raw) leaves exactly the state of the
// reference path (hops decoded into Report.INT.Hops, then mdPath), which
// the collector takes when OnReport is set, on the fuzz corpus, on
// crafted stacks and on random mutations of both.
func TestFusedPathMatchesReference(t *testing.T) {
	in := mutated(fastPathInputs(t), rand.New(rand.NewPCG(1, 2)), 40, 4)
	for _, maxFlows := range []int{4, 1024} {
		fast, ref := New(Config{MaxFlows: maxFlows}), New(Config{MaxFlows: maxFlows})
		refReports := 0
		ref.OnReport = func(*Report) { refReports++ }
		for round := 0; round < 2; round++ {
			for i, b := range in {
				now := int64(round*len(in) + i)
				fast.HandlePacket(b, now)
				ref.HandlePacket(b, now)
				if i%16 == 0 || i == len(in)-1 {
					fs, rs := fast.Snapshot(0), ref.Snapshot(0)
					if !reflect.DeepEqual(fs, rs) {
						t.Fatalf("max flows %d, round %d, input %d (%x): fused and reference state differ: %s",
							maxFlows, round, i, b, snapshotDiff(fs, rs))
					}
				}
			}
		}
		if refReports == 0 || fast.Snapshot(0).Counters.Reports != uint64(refReports) {
			t.Fatalf("reports: fused %d, reference %d", fast.Snapshot(0).Counters.Reports, refReports)
		}
	}
}

// mutated is in followed by rounds*len(in) mutations of its non-empty
// packets, each 1 to edits random byte changes, bit flips or truncations.
func mutated(in [][]byte, rng *rand.Rand, rounds, edits int) [][]byte {
	n := len(in)
	for i := 0; i < rounds*n; i++ {
		b := append([]byte(nil), in[i%n]...)
		if len(b) == 0 {
			continue
		}
		for k := rng.IntN(edits); k >= 0; k-- {
			switch rng.IntN(3) {
			case 0:
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			case 1:
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			case 2:
				b = b[:rng.IntN(len(b)+1)]
			}
			if len(b) == 0 {
				break
			}
		}
		in = append(in, b)
	}
	return in
}

// snapshotDiff describes the first difference between two snapshots.
func snapshotDiff(a, b *Snapshot) string {
	if !reflect.DeepEqual(a.Counters, b.Counters) {
		return fmt.Sprintf("counters\n%+v\n%+v", a.Counters, b.Counters)
	}
	if !reflect.DeepEqual(a.Sources, b.Sources) {
		return fmt.Sprintf("sources\n%+v\n%+v", a.Sources, b.Sources)
	}
	if len(a.Flows) != len(b.Flows) {
		return fmt.Sprintf("%d flows, want %d", len(a.Flows), len(b.Flows))
	}
	for i := range a.Flows {
		x, y := a.Flows[i], b.Flows[i]
		if reflect.DeepEqual(x, y) {
			continue
		}
		for j := range x.Path {
			if x.Path[j] != y.Path[j] {
				return fmt.Sprintf("flow %d %v hop %d\n%+v\n%+v", i, x.Key, j, x.Path[j], y.Path[j])
			}
		}
		x.Path, y.Path = [MaxPathHops]HopState{}, [MaxPathHops]HopState{}
		return fmt.Sprintf("flow %d\n%+v\n%+v", i, x, y)
	}
	return "none"
}

// TestInnerFastMatchesReference: where innerFast takes a report's inner
// packet, it leaves exactly the Report the general path (wire.Parser, then
// the INT searches) does, for the inner packets of the corpus and crafted
// reports, their random mutations, and several marking configurations.
func TestInnerFastMatchesReference(t *testing.T) {
	var inner [][]byte
	var eth []bool
	collect := handlerFunc(func(r *Report) {
		if len(r.Inner) > 0 && (r.InType == spec.InEthernet || r.InType == spec.InIPv4 || r.InType == spec.InIPv6) {
			inner = append(inner, append([]byte(nil), r.Inner...))
			eth = append(eth, r.InType == spec.InEthernet)
		}
	})
	d := NewDecoder()
	for _, b := range fastPathInputs(t) {
		d.Decode(b, collect)
	}
	frame := mdFrame(t, testHops(), testInst, 4)
	tcp := append([]byte(nil), frame...)
	tcp[wire.EthernetLen+9] = wire.ProtoTCP
	tcp[wire.EthernetLen+wire.IPv4MinLen+12] = 5 << 4
	// The v2.1 marking (DSCP 0x17) with an INT 0.5 shim and header where
	// the v2.1 shim would be: INT 0.5 when its marking matches too.
	int05 := append([]byte(nil), frame...)
	at := wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen
	int05[at], int05[at+1], int05[at+2], int05[at+4] = wire.INT05TypeHopByHop, 0, 3, 0
	if !looksINT05(int05[at:]) {
		t.Fatal("crafted INT 0.5 header does not look like one")
	}
	// A shim with NPT 1 (the original destination port), unmarked and
	// then marked: the marked one must not take the header the unmarked
	// one left cached (the DSCP marking allows NPT 0 only).
	npt := append([]byte(nil), frame...)
	npt[at] |= 1 << 2
	npt[at+2], npt[at+3] = 0x15, 0xb3
	nptMarked := append([]byte(nil), npt...)
	npt[wire.EthernetLen+1] = 0
	for _, f := range [][]byte{frame, tcp, int05, npt, nptMarked} {
		inner = append(inner, f, f[wire.EthernetLen:])
		eth = append(eth, true, false)
	}
	if len(inner) < 50 {
		t.Fatalf("only %d inner packets", len(inner))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := len(inner)
	for i := 0; i < 80*n; i++ {
		b := append([]byte(nil), inner[i%n]...)
		for k := rng.IntN(3); k >= 0 && len(b) > 0; k-- {
			switch rng.IntN(4) {
			case 0:
				b[rng.IntN(min(len(b), 60))] = byte(rng.Uint32())
			case 1:
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			case 2:
				b = b[:rng.IntN(len(b)+1)]
			case 3:
				b[rng.IntN(min(len(b), 60))] = []byte{0, 4, 6, 17, 0x45, 0x08, 0x50, 0x86, 0xdd, 0x81, 0xff}[rng.IntN(11)]
			}
		}
		inner, eth = append(inner, b), append(eth, eth[i%n])
	}
	taken := 0
	for k, cfg := range markingConfigs {
		fast, ref := decoderPair(cfg)
		ref.noFast = true
		for i, b := range inner {
			for _, raw := range []bool{false, true} {
				fast.rawHops, ref.rawHops = raw, raw
				rf, rr := &fast.rep, &ref.rep
				fast.resetReport(rf)
				ref.resetReport(rr)
				fast.sink, ref.sink = raw, raw // as decodeV2 for a sink's report
				rf.NodeID, rr.NodeID = 4, 4
				if fast.innerFast(rf, b, eth[i]) {
					taken++
				}
				fast.resetReport(rf)
				fast.sink = raw
				rf.NodeID = 4
				fast.decodeInner(rf, b, eth[i], true)
				ref.decodeInner(rr, b, eth[i], true)
				// The fast path's index key, read from the packet, is the
				// one the collector derives from the flow.
				if rf.hasKey {
					if want := keyBits(&rf.Flow, tunnelTag(rf.Tunnel, rf.TunnelID)); rf.key != want || !rf.HasFlow {
						t.Fatalf("decoder %d, %x: key bits %+v, from the flow %+v", k, b, rf.key, want)
					}
					rf.key, rf.hasKey = flowKeyBits{}, false
				}
				if !reflect.DeepEqual(rf, rr) {
					t.Fatalf("decoder %d, %x (ethernet %v, raw %v):\nfast %+v\nref  %+v", k, b, eth[i], raw, *rf, *rr)
				}
			}
		}
	}
	if taken < len(inner) {
		t.Fatalf("fast path taken %d times for %d packets", taken, len(inner))
	}
}

// markingConfigs are the decoder configurations the differential tests
// compare paths under: defaults, no markings, an INT port and GRE
// protocol with INT before TCP options, DSCP only, a probe marker, INT 0.5
// by port and DSCP.
var markingConfigs = []func(d *Decoder){
	func(d *Decoder) {},
	func(d *Decoder) { d.Parser = wire.Parser{} },
	func(d *Decoder) {
		d.Parser = wire.Parser{UDPPort: 5001, GREProto: 0x1234, TCPBeforeOptions: true}
		d.INT05Port, d.INT05DSCPMask = 0, 0
	},
	func(d *Decoder) { d.Parser.DSCP, d.Parser.DSCPMask = 0x17, 0x3f },
	func(d *Decoder) { d.Parser.ProbeMarker = 0x0102030405060708 },
	func(d *Decoder) { d.INT05Port, d.INT05DSCP, d.INT05DSCPMask = 40000, 0x17, 0x3f },
}

// decoderPair is two decoders configured by cfg.
func decoderPair(cfg func(d *Decoder)) (*Decoder, *Decoder) {
	a, b := NewDecoder(), NewDecoder()
	cfg(a)
	cfg(b)
	return a, b
}

// handlerFunc adapts a function to Handler (tests).
type handlerFunc func(r *Report)

func (f handlerFunc) HandleReport(r *Report) { f(r) }

// TestResetHeadMatchesResetReport: the collector's own decoding, which
// clears each report only as far as the next one does not overwrite it
// (resetHead), delivers exactly the Reports that a whole clear
// (resetReport) gives, report by report, on the fuzz corpus, crafted
// stacks and their random mutations, in every marking configuration,
// with the index key the collector fills in between reports.
func TestResetHeadMatchesResetReport(t *testing.T) {
	in := mutated(fastPathInputs(t), rand.New(rand.NewPCG(5, 6)), 20, 3)
	lazyTaken := 0
	for k, cfg := range markingConfigs {
		lazy, full := decoderPair(cfg)
		full.fullReset = true
		var got, want []Report
		// As the collector: the index key filled in when the decoder did
		// not read it.
		record := func(out *[]Report) Handler {
			return handlerFunc(func(r *Report) {
				*out = append(*out, *r)
				if !r.hasKey {
					r.key = keyBits(&r.Flow, tunnelTag(r.Tunnel, r.TunnelID))
				}
			})
		}
		hl, hf := record(&got), record(&want)
		for i, b := range in {
			got, want = got[:0], want[:0]
			nl, errl := lazy.decodeRaw(b, hl, true)
			nf, errf := full.decodeRaw(b, hf, true)
			if nl != nf || errl != errf || len(got) != len(want) {
				t.Fatalf("config %d, input %d (%x): %d reports (%v), want %d (%v)", k, i, b, nl, errl, nf, errf)
			}
			for j := range got {
				if !reflect.DeepEqual(got[j], want[j]) {
					t.Fatalf("config %d, input %d (%x), report %d:\nhead %+v\nfull %+v", k, i, b, j, got[j], want[j])
				}
			}
			if nl > 1 {
				lazyTaken++
			}
		}
	}
	if lazyTaken == 0 {
		t.Fatal("no packet with several reports")
	}
}

// TestReportWalkMatchesReader: the decoder's walk over a v2.0 packet's
// individual reports finds what wire.ReportReader finds, report by report
// (type, flags, fixed metadata, the metadata bytes, domain-specific
// metadata and inner contents, the same bytes in place), and stops with
// the same error, on the fuzz corpus, crafted packets and their random
// mutations, in the collector's own decoding and with a whole clear.
func TestReportWalkMatchesReader(t *testing.T) {
	in := mutated(fastPathInputs(t), rand.New(rand.NewPCG(7, 8)), 30, 4)
	walked := 0
	for _, full := range []bool{false, true} {
		d := NewDecoder()
		d.fullReset = full
		var got []Report
		var inners, dss [][]byte
		h := handlerFunc(func(r *Report) {
			got = append(got, *r)
			inners, dss = append(inners, r.Inner), append(dss, r.DS)
		})
		for i, b := range in {
			if len(b) == 0 || b[0]>>4 != wire.Version2 {
				continue
			}
			got, inners, dss = got[:0], inners[:0], dss[:0]
			n, err := d.decodeRaw(b, h, true)
			_, rr, rerr := wire.NewReportReader(b)
			if rerr != nil {
				if err != rerr || n != 0 {
					t.Fatalf("input %d (%x): %d reports, %v; want 0, %v", i, b, n, err, rerr)
				}
				continue
			}
			var w wire.Report
			k := 0
			for ; rr.Next(&w); k++ {
				if k >= len(got) {
					t.Fatalf("input %d (%x): %d reports, reader has more", i, b, len(got))
				}
				r := &got[k]
				if r.Index != k || r.RepType != w.Type || r.InType != w.InType || r.D != w.Dropped || r.Q != w.Congested ||
					r.F != w.TrackedFlow || r.I != w.Intermediate || !sameBytes(inners[k], w.Inner) {
					t.Fatalf("input %d (%x), report %d: header or inner differ:\n%+v\n%+v", i, b, k, *r, w)
				}
				if w.Type != spec.RepINT {
					if r.HasMD || r.DS != nil {
						t.Fatalf("input %d (%x), report %d: metadata in a %v report", i, b, k, w.Type)
					}
					continue
				}
				var md wire.ReportMetadata
				ds, err := w.Baseline(&md)
				if err != nil {
					t.Fatalf("input %d (%x), report %d: %v", i, b, k, err)
				}
				m := &r.MD
				if !r.HasMD || r.DomainID != w.DomainID || r.DSMdBits != w.DSMdBits || r.DSStatus != w.DSMdStatus || !sameBytes(dss[k], ds) ||
					r.HasDrop != (w.RepMdBits&wire.RepDrop != 0) || r.HasDrop && (r.DropReason != md.DropReason || r.DropQueueID != md.DropQueueID) ||
					m.IngressPort != md.IngressPort || m.EgressPort != md.EgressPort || m.HopLatency != md.HopLatency ||
					m.QueueID != md.QueueID || m.QueueOccupancy != md.QueueOccupancy || m.IngressTimestamp != md.IngressTimestamp ||
					m.EgressTimestamp != md.EgressTimestamp || m.L2IngressPort != md.L2IngressPort || m.L2EgressPort != md.L2EgressPort ||
					m.TxUtilization != md.TxUtilization || m.BufferID != md.BufferID || m.BufferOccupancy != md.BufferOccupancy {
					t.Fatalf("input %d (%x), report %d: metadata differ:\n%+v\n%+v %+v", i, b, k, *r, w, md)
				}
				walked++
			}
			if k != len(got) || k != n || err != rr.Err() {
				t.Fatalf("input %d (%x): %d reports delivered (%d counted), %v; reader %d, %v", i, b, len(got), n, err, k, rr.Err())
			}
		}
	}
	if walked < 100 {
		t.Fatalf("only %d INT reports compared", walked)
	}
}

// sameBytes reports whether a and b are the same bytes in place (both
// empty counts as the same).
func sameBytes(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return len(a) == len(b) && &a[0] == &b[0]
}

// TestRawStackChecked: every raw stack the decoder hands over (the
// cached header's included) is as mdPathRaw, which reads it unchecked,
// needs: whole hops inside the report's inner packet, a node ID in the
// layout of the stack's bitmap, its fields within a hop.
func TestRawStackChecked(t *testing.T) {
	in := mutated(fastPathInputs(t), rand.New(rand.NewPCG(9, 10)), 30, 4)
	raw := 0
	d := NewDecoder()
	h := handlerFunc(func(r *Report) {
		s := &r.raw
		if s.layout == nil {
			return
		}
		raw++
		inner := uintptr(unsafe.Pointer(unsafe.SliceData(r.Inner)))
		at := uintptr(unsafe.Pointer(unsafe.SliceData(s.b)))
		if s.n <= 0 || len(s.b) != s.n*s.hopLen || at < inner || at+uintptr(len(s.b)) > inner+uintptr(len(r.Inner)) ||
			s.layout != &d.layout || s.layout.inst != r.INT.Instructions || s.layout.node < 0 || s.layout.fixed > s.hopLen ||
			r.I || r.D || r.Q {
			t.Fatalf("report %d: bad raw stack %d hops of %d bytes (%d), layout %+v, stack %+v", r.Index, s.n, s.hopLen, len(s.b), *s.layout, r.INT)
		}
	})
	for _, b := range in {
		d.decodeRaw(b, h, true)
	}
	if raw < 100 {
		t.Fatalf("only %d raw stacks", raw)
	}
}

package report

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

const (
	frameHopInst = spec.InstNodeID | spec.InstHopLatency
	hopML        = 2
	maxHops      = 6
)

// testFrame is a reusable Ethernet/IPv4/UDP frame with an INT-MD shim,
// header and stack (node id + hop latency per hop) and an 8-byte payload
// holding the flow index and a packet id.
type testFrame struct {
	buf    []byte
	flow   wire.FlowKey
	intOff int
	intLen int
	hops   int
}

func flowKey(i int) wire.FlowKey {
	return wire.FlowKey{
		Src:     netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
		Dst:     netip.AddrFrom4([4]byte{10, 255, 0, 1}),
		SrcPort: uint16(1024 + i%50000), DstPort: 80, Proto: wire.ProtoUDP,
	}
}

// newFrame builds the frame of flow i with the given stack (node ids,
// latencies, most recent first).
func newFrame(i int, nodes, lats []uint32) *testFrame {
	f := &testFrame{flow: flowKey(i)}
	f.build(nodes, lats)
	return f
}

func (f *testFrame) build(nodes, lats []uint32) {
	n := len(nodes)
	intLen := wire.MDHeaderLen + n*hopML*4
	total := wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen + wire.ShimLen + intLen + 8
	if cap(f.buf) < total {
		f.buf = make([]byte, total, wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen+wire.ShimLen+wire.MDHeaderLen+maxHops*8+8)
	}
	b := f.buf[:total]
	wire.PutEthernet(b, [6]byte{2, 0, 0, 0, 0, 2}, [6]byte{2, 0, 0, 0, 0, 1}, wire.EtherTypeIPv4)
	ip := wire.IPv4Header{TOS: 0, TotalLen: uint16(total - wire.EthernetLen), TTL: 64, Proto: wire.ProtoUDP,
		Src: f.flow.Src.As4(), Dst: f.flow.Dst.As4(), Flags: 2}
	ip.Put(b[wire.EthernetLen:])
	u := wire.UDPHeader{SrcPort: f.flow.SrcPort, DstPort: 5000, Length: uint16(total - wire.EthernetLen - wire.IPv4MinLen)}
	u.Put(b[wire.EthernetLen+wire.IPv4MinLen:])
	off := wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen
	wire.Shim{Type: spec.TypeMD, NPT: spec.NPTUDPPort, Length: uint8(intLen / 4), Value: f.flow.DstPort}.Put(b[off:])
	off += wire.ShimLen
	f.intOff, f.intLen, f.hops = off, intLen, n
	wire.MDHeader{Version: 2, HopML: hopML, RemainingHops: uint8(8 - n), Instructions: frameHopInst}.Put(b[off:])
	off += wire.MDHeaderLen
	for h := 0; h < n; h++ {
		binary.BigEndian.PutUint32(b[off:], nodes[h])
		binary.BigEndian.PutUint32(b[off+4:], lats[h])
		off += 8
	}
	f.buf = b
}

// setLat rewrites hop h's latency in place.
func (f *testFrame) setLat(h int, lat uint32) {
	binary.BigEndian.PutUint32(f.buf[f.intOff+wire.MDHeaderLen+h*8+4:], lat)
}

// setNode rewrites hop h's node id in place.
func (f *testFrame) setNode(h int, id uint32) {
	binary.BigEndian.PutUint32(f.buf[f.intOff+wire.MDHeaderLen+h*8:], id)
}

// setID writes the flow index and packet id into the payload.
func (f *testFrame) setID(flow int, id uint32) {
	p := f.buf[len(f.buf)-8:]
	binary.BigEndian.PutUint32(p, uint32(flow))
	binary.BigEndian.PutUint32(p[4:], id)
}

// event fills ev as an INT-MD sink observation of f at now.
func (f *testFrame) event(ev *Event, now int64, lat uint32) {
	*ev = Event{Kind: KindFlow, Now: now, Flow: f.flow, Packet: f.buf, INT: f.intOff, INTLen: f.intLen,
		INTType: spec.TypeMD}
	ev.Hop = wire.HopMetadata{NodeID: 99, IngressPort: 1, EgressPort: 2, HopLatency: lat, QueueID: 0,
		Valid: spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue}
}

// decoded is one individual report from a captured packet.
type decoded struct {
	pkt   Packet
	group wire.GroupHeader
	hdr   wire.ReportHeader
	md    wire.ReportMetadata
	inner []byte
}

// decodeAll decodes every captured v2.0 packet, checking lengths.
func decodeAll(t testing.TB, pkts []Packet) []decoded {
	t.Helper()
	var out []decoded
	for _, p := range pkts {
		g, rr, err := wire.NewReportReader(p.Payload)
		if err != nil {
			t.Fatalf("group header: %v", err)
		}
		n := 0
		var r wire.Report
		for rr.Next(&r) {
			d := decoded{pkt: p, group: g, hdr: r.ReportHeader, inner: r.Inner}
			if r.Type == spec.RepINT {
				if _, err := r.Baseline(&d.md); err != nil {
					t.Fatalf("baseline: %v", err)
				}
			}
			out = append(out, d)
			n++
		}
		if err := rr.Err(); err != nil {
			t.Fatalf("report reader: %v", err)
		}
		if n != p.Reports {
			t.Fatalf("packet says %d reports, decoded %d", p.Reports, n)
		}
	}
	return out
}

// innerID reads the flow index and packet id from a report's inner frame
// (ok false when truncated away).
func innerID(inner []byte, hops int) (flow int, id uint32, ok bool) {
	off := wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen + wire.ShimLen + wire.MDHeaderLen + hops*8
	if len(inner) < off+8 {
		return 0, 0, false
	}
	return int(binary.BigEndian.Uint32(inner[off:])), binary.BigEndian.Uint32(inner[off+4:]), true
}

var (
	srcIP = netip.MustParseAddr("192.0.2.1")
	coll1 = netip.MustParseAddrPort("192.0.2.10:32766")
	coll2 = netip.MustParseAddrPort("192.0.2.11:32766")
)

// baseConfig routes every event type to one session "s" with the given
// coalescing.
func baseConfig(maxReports int) Config {
	cfg := Config{
		NodeID: 99, HWID: 3, DropReports: true, QueueReports: true, Filter: DefaultFilter(),
		Sessions: []Session{{Name: "s", Src: srcIP, Collectors: []Collector{{coll1}}, TruncateSize: 128,
			MaxReports: maxReports, MaxDelay: time.Millisecond}},
		Events: map[EventType]Route{},
	}
	for e := EventType(1); e < spec.NumEventTypes; e++ {
		cfg.Events[e] = Route{Session: "s", DSCP: 0}
	}
	return cfg
}

// udpConfig is baseConfig(maxReports) with report-all flow events sent
// from src to one collector dst.
func udpConfig(maxReports int, src string, dst netip.AddrPort) Config {
	cfg := baseConfig(maxReports)
	cfg.Sessions[0].Src = netip.MustParseAddr(src)
	cfg.Sessions[0].Collectors = []Collector{{dst}}
	cfg.Events[spec.EventFlowReportAllPackets] = Route{Session: "s"}
	return cfg
}

// newTest returns a pipeline with a manual clock and a capturing sender.
func newTest(t testing.TB, cfg Config) (*Pipeline, *Capture) {
	t.Helper()
	c := &Capture{}
	p, err := New(cfg, Options{Sender: c, TickInterval: -1, QueueLen: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// finish closes p and decodes what it sent.
func finish(t testing.TB, p *Pipeline, c *Capture) []decoded {
	t.Helper()
	p.Close()
	return decodeAll(t, c.Packets())
}

const ms = int64(time.Millisecond)

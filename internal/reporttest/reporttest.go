// Package reporttest builds Telemetry Report v2.0 packets for tests of
// the collector and its exporters: a sink's report group holding a flow
// report with an INT-MD stack, and drop and congestion reports for the
// same flow.
package reporttest

import (
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// Inst is what every hop of the stack carries: node id, level 1
// interfaces (ingress 1, egress 2), hop latency and queue occupancy.
const Inst = spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue

// Hop is one transit hop's metadata.
type Hop struct {
	Node, Latency, Queue uint32
}

// Flow is the IPv4 flow the reported packet belongs to.
type Flow struct {
	Src, Dst         [4]byte
	Proto            uint8
	SrcPort, DstPort uint16
}

// MDFrame is an Ethernet/IPv4 packet of f (UDP header, whatever f.Proto
// says) carrying an INT-MD stack of hops, top of stack first.
func MDFrame(t testing.TB, f Flow, hops ...Hop) []byte {
	t.Helper()
	intLen := wire.MDHeaderLen + len(hops)*Inst.Words()*4
	b := make([]byte, wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen+wire.ShimLen+intLen)
	wire.PutEthernet(b, [6]byte{2}, [6]byte{2}, wire.EtherTypeIPv4)
	ip := b[wire.EthernetLen:]
	wire.IPv4Header{TotalLen: uint16(len(ip)), TTL: 64, Proto: f.Proto, Src: f.Src, Dst: f.Dst}.Put(ip)
	wire.UDPHeader{SrcPort: f.SrcPort, DstPort: f.DstPort, Length: uint16(len(ip) - wire.IPv4MinLen)}.Put(ip[wire.IPv4MinLen:])
	sh := ip[wire.IPv4MinLen+wire.UDPLen:]
	wire.Shim{Type: spec.TypeMD, Length: uint8(intLen / 4)}.Put(sh)
	wire.MDHeader{Version: 2, HopML: uint8(Inst.Words()), RemainingHops: 4, Instructions: Inst}.Put(sh[wire.ShimLen:])
	off := wire.ShimLen + wire.MDHeaderLen
	for _, h := range hops {
		m := wire.HopMetadata{NodeID: h.Node, IngressPort: 1, EgressPort: 2, HopLatency: h.Latency, QueueOccupancy: h.Queue, Valid: Inst}
		k, err := wire.PutHop(sh[off:], Inst, 0, &m)
		if err != nil {
			t.Fatal(err)
		}
		off += k
	}
	return b
}

// Extra is a report about the same packet after the flow report.
type Extra struct {
	h  wire.ReportHeader
	md wire.ReportMetadata
}

// Drop is a drop report for reason.
func Drop(reason uint8) Extra {
	return Extra{wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Dropped: true, RepMdBits: wire.RepDrop}, wire.ReportMetadata{DropReason: reason}}
}

// Congestion is a congestion report with md, bits selecting its metadata.
func Congestion(bits uint16, md wire.ReportMetadata) Extra {
	return Extra{wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, Congested: true, RepMdBits: bits}, md}
}

// Group is report group seq from sink node 4: the flow report of frame
// with the sink's hop latency, then each extra report carrying frame's
// Ethernet, IPv4 and UDP headers.
func Group(seq uint32, frame []byte, latency uint32, extra ...Extra) []byte {
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: seq, NodeID: 4})
	h := wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet, TrackedFlow: true, RepMdBits: wire.RepHopLatency}
	b, _ = wire.AppendReport(b, &h, &wire.ReportMetadata{HopLatency: latency}, nil, frame)
	for _, x := range extra {
		b, _ = wire.AppendReport(b, &x.h, &x.md, nil, frame[:wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen])
	}
	return b
}

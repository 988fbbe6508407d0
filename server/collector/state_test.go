package collector

import (
	"testing"

	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// TestFlowCountIsTableSize checks that flow-count is the flow table's
// size when fewer flows are exported.
func TestFlowCountIsTableSize(t *testing.T) {
	c := collector.New(collector.Config{})
	for i := 0; i < 3; i++ {
		frame := make([]byte, wire.EthernetLen+wire.IPv4MinLen+wire.UDPLen)
		wire.PutEthernet(frame, [6]byte{2}, [6]byte{2}, wire.EtherTypeIPv4)
		ip := frame[wire.EthernetLen:]
		wire.IPv4Header{TotalLen: uint16(len(ip)), TTL: 64, Proto: wire.ProtoUDP, Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}}.Put(ip)
		wire.UDPHeader{SrcPort: uint16(1000 + i), DstPort: 2000, Length: wire.UDPLen}.Put(ip[wire.IPv4MinLen:])
		b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: uint32(i), NodeID: 1})
		b, _ = wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepINT, InType: spec.InEthernet}, &wire.ReportMetadata{}, nil, frame)
		c.HandlePacket(b, 1)
	}
	d := Tree(c.Snapshot(1))
	if got := d.GetCollector().GetState().GetFlowCount(); got != 3 {
		t.Errorf("flow-count = %d, want 3", got)
	}
	if n := len(d.GetCollector().GetFlows().Flow); n != 1 {
		t.Errorf("%d flows exported, want 1", n)
	}
}

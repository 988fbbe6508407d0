// Package wiretest builds the plain Ethernet/IPv4/TCP/UDP frames that the
// dataplanes' tests feed in, with valid checksums, so every backend's tests
// start from the same bytes.
package wiretest

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// The frames go from SrcMAC to DstMAC.
var (
	SrcMAC = [6]byte{2, 0, 0, 0, 0, 1}
	DstMAC = [6]byte{2, 0, 0, 0, 0, 2}
)

// IPv4Frame wraps an L4 segment (checksum still to be set) in Ethernet and
// IPv4 and sets every checksum; udpCsum false leaves a UDP checksum zero.
func IPv4Frame(src, dst string, proto, dscp uint8, l4 []byte, udpCsum bool) []byte {
	f := make([]byte, wire.EthernetLen+wire.IPv4MinLen+len(l4))
	_ = wire.PutEthernet(f, DstMAC, SrcMAC, wire.EtherTypeIPv4)
	_ = wire.IPv4Header{TOS: dscp << 2, TotalLen: uint16(wire.IPv4MinLen + len(l4)), ID: 7, Flags: 2,
		TTL: 64, Proto: proto, Src: netip.MustParseAddr(src).As4(), Dst: netip.MustParseAddr(dst).As4()}.Put(f[wire.EthernetLen:])
	copy(f[wire.EthernetLen+wire.IPv4MinLen:], l4)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(f, &p); err != nil {
		panic(err) // the frame was built above: a parse error is a bug here
	}
	wire.SetL4Checksum(f, &p, udpCsum)
	return f
}

// IPv6Frame wraps an L4 segment (checksum still to be set) in Ethernet and
// IPv6 (flow label 0x12345, hop limit 64) and sets the L4 checksum;
// udpCsum false leaves a UDP checksum zero.
func IPv6Frame(src, dst string, proto, dscp uint8, l4 []byte, udpCsum bool) []byte {
	f := make([]byte, wire.EthernetLen+wire.IPv6Len+len(l4))
	_ = wire.PutEthernet(f, DstMAC, SrcMAC, wire.EtherTypeIPv6)
	h := f[wire.EthernetLen:]
	binary.BigEndian.PutUint32(h, 6<<28|uint32(dscp)<<22|0x12345)
	binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
	h[6], h[7] = proto, 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	copy(h[wire.IPv6Len:], l4)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(f, &p); err != nil {
		panic(err) // the frame was built above: a parse error is a bug here
	}
	wire.SetL4Checksum(f, &p, udpCsum)
	return f
}

// IPFrame is IPv4Frame or IPv6Frame, by the family of src.
func IPFrame(src, dst string, proto, dscp uint8, l4 []byte, udpCsum bool) []byte {
	if netip.MustParseAddr(src).Is4() {
		return IPv4Frame(src, dst, proto, dscp, l4, udpCsum)
	}
	return IPv6Frame(src, dst, proto, dscp, l4, udpCsum)
}

// TCPFrame is a TCP segment (PSH|ACK) carrying payload, over IPv4 or IPv6
// by the family of src.
func TCPFrame(src, dst string, sport, dport uint16, dscp uint8, payload []byte) []byte {
	l4 := make([]byte, wire.TCPMinLen+len(payload))
	_ = wire.TCPHeader{SrcPort: sport, DstPort: dport, Seq: 1000, Ack: 2000, Flags: 0x18, Window: 512}.Put(l4)
	copy(l4[wire.TCPMinLen:], payload)
	return IPFrame(src, dst, wire.ProtoTCP, dscp, l4, true)
}

// UDPFrame is a UDP datagram carrying payload, with a checksum when csum
// is set, over IPv4 or IPv6 by the family of src.
func UDPFrame(src, dst string, sport, dport uint16, payload []byte, csum bool) []byte {
	l4 := make([]byte, wire.UDPLen+len(payload))
	_ = wire.UDPHeader{SrcPort: sport, DstPort: dport, Length: uint16(len(l4))}.Put(l4)
	copy(l4[wire.UDPLen:], payload)
	return IPFrame(src, dst, wire.ProtoUDP, 0, l4, csum)
}

// SYNFrame is a TCP segment without payload carrying the options opts
// (padded with end-of-options to a multiple of 4 bytes) and flags (SYN
// 0x02, SYN-ACK 0x12), over IPv4 or IPv6 by the family of src.
func SYNFrame(src, dst string, sport, dport uint16, dscp, flags uint8, opts []byte) []byte {
	n := (len(opts) + 3) &^ 3
	l4 := make([]byte, wire.TCPMinLen+n)
	_ = wire.TCPHeader{SrcPort: sport, DstPort: dport, Seq: 1000, Flags: flags, Window: 64240}.Put(l4)
	l4[12] = byte((wire.TCPMinLen+n)/4) << 4
	copy(l4[wire.TCPMinLen:], opts)
	return IPFrame(src, dst, wire.ProtoTCP, dscp, l4, true)
}

// MSSOption is a TCP MSS option (kind 2, length 4).
func MSSOption(mss uint16) []byte { return []byte{2, 4, byte(mss >> 8), byte(mss)} }

// MSS is the value of the MSS option among a TCP header's options (the
// bytes after its fixed 20), or 0 when there is none before end-of-options.
// A length below 2 counts as 2 so that a bad option cannot stall the walk.
func MSS(opts []byte) uint16 {
	for i := 0; i+3 < len(opts); {
		switch opts[i] {
		case 0:
			return 0
		case 1:
			i++
			continue
		case 2:
			return binary.BigEndian.Uint16(opts[i+2:])
		}
		i += max(int(opts[i+1]), 2)
	}
	return 0
}

// Unavailable returns the fields of inst (bits 0-14) whose words in hop,
// one hop's metadata in instruction order, all hold the reserved value
// 0xFFFFFFFF.
func Unavailable(hop []byte, inst wire.Instructions) wire.Instructions {
	var out wire.Instructions
	at := 0
	for bit := 0; bit < 15; bit++ {
		m := wire.Instructions(0x8000 >> bit)
		if inst&m == 0 {
			continue
		}
		words := 1
		if bit >= 4 && bit <= 6 {
			words = 2
		}
		all := at+4*words <= len(hop)
		for w := 0; all && w < words; w++ {
			all = binary.BigEndian.Uint32(hop[at+4*w:]) == 0xffffffff
		}
		if all {
			out |= m
		}
		at += 4 * words
	}
	return out
}

// Median returns the median of v (the upper one of an even count), 0 for
// none; v is left as it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// InstructionsJSON is the YANG JSON (RFC 7951) of an INT session's
// instructions leaf-list holding the defined bits of inst.
func InstructionsJSON(inst spec.Instruction) string {
	var names []string
	for _, r := range spec.Instructions {
		if inst&r.Inst != 0 {
			names = append(names, `"intd-int-metadata-semantics:`+r.YANG+`"`)
		}
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// ReportPaths decodes a telemetry report datagram and returns, for each
// report whose inner packet (parsed with pr) carries INT-MD, the node ids
// of its stack, last hop first.
func ReportPaths(dgram []byte, pr *wire.Parser) [][]uint32 {
	_, rr, err := wire.NewReportReader(dgram)
	if err != nil {
		return nil
	}
	var paths [][]uint32
	var r wire.Report
	for rr.Next(&r) {
		var p wire.Packet
		if pr.Parse(r.Inner, &p) != nil || p.INT < 0 || p.INT+p.INTLen > len(r.Inner) {
			continue
		}
		md := r.Inner[p.INT : p.INT+p.INTLen]
		_, st, err := wire.DecodeMD(md, 0)
		if err != nil {
			continue
		}
		inst := wire.Instructions(uint16(md[4])<<8 | uint16(md[5]))
		path := []uint32{}
		for i := 0; i < st.Count(); i++ {
			var m wire.HopMetadata
			if wire.DecodeHop(st.Hop(i), inst, &m) == nil {
				path = append(path, m.NodeID)
			}
		}
		paths = append(paths, path)
	}
	return paths
}

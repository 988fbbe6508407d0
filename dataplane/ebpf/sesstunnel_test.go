package ebpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// sessionTunnelConfig is routerConfig with INT recognised in VXLAN-GPE,
// the node's tunnel-address tun and, when dst is set, the session in a
// VXLAN-GPE tunnel to dst.
func sessionTunnelConfig(node int, sink string, source bool, tun, dst string) string {
	c := routerConfig(node, sink, source)
	c = strings.Replace(c, `"vxlan-gpe-next-protocol": 0, `, "", 1)
	if tun != "" {
		c = strings.Replace(c, `"latency-sensitivity": 8`, `"latency-sensitivity": 8, "tunnel-address": "`+tun+`"`, 1)
	}
	if dst != "" {
		c = strings.Replace(c, `"remaining-hop-count": 8}`, `"remaining-hop-count": 8, "encapsulation": "VXLAN_GPE", "tunnel-destination": "`+dst+`"}`, 1)
	}
	return c
}

// dataplaneR3 starts a dataplane on r3's interfaces, closed at cleanup.
func (l *lab) dataplaneR3(t *testing.T) *Dataplane {
	t.Helper()
	var d *Dataplane
	if err := l.in("r3", func() (err error) {
		d, err = New(Config{Interfaces: []Interface{{Name: "r3-r2"}, {Name: "r3-h2"}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.in("r3", d.Close) })
	return d
}

// listenH2 listens for UDP at h2 (10.0.2.2) on port.
func (l *lab) listenH2(t *testing.T, port int) *net.UDPConn {
	t.Helper()
	var rx *net.UDPConn
	if err := l.in("h2", func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rx
}

// tunnelSinkR3 starts a dataplane on r3's interfaces (dataplaneR3) and
// applies r3's session tunnel sink configuration: the dataplane and the
// error of the apply.
func (l *lab) tunnelSinkR3(t *testing.T) (*Dataplane, error) {
	t.Helper()
	d := l.dataplaneR3(t)
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(sessionTunnelConfig(3, "r3-h2", false, "10.0.23.2", "")), dev); err != nil {
		t.Fatal(err)
	}
	return d, dtel.New(d).Apply(context.Background(), dev)
}

// innerTCP is a captured IPv4 TCP frame from 10.0.1.2 to 10.0.2.2 at
// off (the inner IP header of a tunnel frame).
func innerTCP(f []byte, off int) bool {
	return len(f) >= off+40 && f[off]>>4 == 4 && f[off+9] == wire.ProtoTCP &&
		bytes.Equal(f[off+12:off+16], []byte{10, 0, 1, 2}) && bytes.Equal(f[off+16:off+20], []byte{10, 0, 2, 2})
}

// tunnelFrame returns the offset of the inner IP header of a session
// tunnel frame r1 -> r3 and its hop count, or -1.
func tunnelFrame(f []byte) (int, int) {
	if len(f) < 14+52 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != wire.ProtoUDP ||
		!bytes.Equal(f[26:30], []byte{10, 0, 12, 1}) || binary.BigEndian.Uint16(f[36:]) != spec.PortVXLANGPE {
		return -1, 0
	}
	shim := 14 + 36
	hopML := int(f[shim+6] & 0x1f)
	words := int(f[shim+1])
	if hopML == 0 || (words-3)%hopML != 0 {
		return -1, 0
	}
	return shim + 4 + words*4, (words - 3) / hopML
}

// TestSessionTunnel: r1's INT session puts the watched TCP flow h1 -> h2
// into a VXLAN-GPE tunnel to r3 (tunnel-address 10.0.23.2) with INT-MD,
// TSO/GSO on every veth. GSO super-packets stay whole (no detour) with the
// tunnel and INT on them; r2 adds its hop to every packet, super-packets
// included (its egress is a veth); r3 takes the tunnel on arrival, reports and removes it at its
// sink port. h2 receives the inner packets as h1 sent them (TTL one lower,
// r1 forwarded them), the byte stream arrives whole, and the collector
// sees the path r3, r2, r1. One frame is checked byte by byte against INT
// v2.1's INT over VXLAN-GPE layout. r1-h1 is r1's edge (a sink
// interface), where the SYN-ACK's MSS is clamped, so that every segment
// h1 sends has room for the tunnel.
func TestSessionTunnel(t *testing.T) {
	l := newLab(t)
	col := &collector{pr: &wire.Parser{VXLANGPEPort: spec.PortVXLANGPE, AllowTruncated: true}}
	l.listen(t, col)
	pipe := l.r3Pipeline(t)

	atH1 := l.capture(t, "r1", "r1-h1")
	atR2 := l.capture(t, "r2", "r2-r1")
	atR3 := l.capture(t, "r3", "r3-r2")
	atH2 := l.capture(t, "h2", "h2-r3")
	// Strict reverse path filtering on r3, as some distributions set it:
	// the inner packets appear on intd-gpe, their source routed through
	// r3-r2 (intd-gpe's filtering is made loose).
	l.exec(t, "r3", "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1")
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, sessionTunnelConfig(1, "r1-h1", true, "10.0.12.1", "10.0.23.2"))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, sessionTunnelConfig(2, "", false, "", ""))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe, sessionTunnelConfig(3, "r3-h2", false, "10.0.23.2", ""))

	l.tcpEcho(t, "tcp4", "10.0.2.2:9998", r)
	time.Sleep(200 * time.Millisecond)

	// r1: every frame of the flow leaves in the tunnel, super-packets
	// whole; none takes the detour.
	if g := r[0].rawCounters(0)[intdCounterC_GSO] + r[0].rawCounters(1)[intdCounterC_GSO] + r[0].rawCounters(2)[intdCounterC_GSO]; g != 0 {
		t.Errorf("r1 sent %d super-packets through the detour", g)
	}
	var plain, tun, super int
	for _, f := range atR2.got() {
		if innerTCP(f, 14) {
			plain++
			t.Logf("r1 -> r2: plain TCP frame of %d bytes: %x", len(f), f[:min(len(f), 70)])
		}
		in, hops := tunnelFrame(f)
		if in < 0 || !innerTCP(f, in) {
			continue
		}
		tun++
		if len(f)-14 > 1500 {
			super++
		}
		if hops != 1 {
			t.Errorf("r1 -> r2: tunnel frame with %d hops, want 1", hops)
		}
	}
	t.Logf("r1 -> r2: %d tunnel frames (%d GSO super-packets), %d plain", tun, super, plain)
	if tun == 0 || super == 0 || plain != 0 {
		t.Fatalf("r1 -> r2: %d tunnel frames, %d of them super-packets, %d left plain: want all in the tunnel, super-packets among them", tun, super, plain)
	}

	// r2 -> r3: packets forwarded one by one carry r2's hop too; one of
	// them, a bare ACK, is checked byte by byte.
	// h1's frames by IP ID, TCP sequence, ack, flags and length (the ID
	// tells apart duplicate ACKs, which differ only in window and SACK).
	orig := map[string][]byte{}
	key := func(f []byte, ip int) string {
		return fmt.Sprintf("%x/%x/%x/%d", f[ip+4:ip+6], f[ip+24:ip+32], f[ip+33], binary.BigEndian.Uint16(f[ip+2:]))
	}
	for _, f := range atH1.got() {
		if innerTCP(f, 14) {
			orig[key(f, 14)] = f
		}
	}
	two, super2, checked := 0, 0, false
	for _, f := range atR3.got() {
		in, hops := tunnelFrame(f)
		if in < 0 || !innerTCP(f, in) {
			continue
		}
		if hops != 2 {
			t.Errorf("r2 -> r3: %d-byte tunnel frame with %d hops, want 2", len(f), hops)
			continue
		}
		two++
		if len(f)-14 > 1500 {
			super2++
		}
		ipLen := int(binary.BigEndian.Uint16(f[in+2:]))
		if hops == 2 && !checked && ipLen == 52 && f[in+33] == 0x10 {
			checked = true
			checkTunnelFrame(t, f, in, orig[key(f, in)])
		}
	}
	t.Logf("r2 -> r3: %d tunnel frames with 2 hops, %d of them super-packets", two, super2)
	if two == 0 || super2 == 0 || !checked {
		t.Fatalf("r2 -> r3: %d tunnel frames with 2 hops, %d super-packets, bare ACK checked %v", two, super2, checked)
	}

	// h2 gets plain TCP: the inner packets as h1 sent them.
	same, other := 0, 0
	for _, f := range atH2.got() {
		if !innerTCP(f, 14) {
			if _, h := tunnelFrame(f); h > 0 {
				t.Fatalf("h2 received a tunnel frame: %x", f[:min(len(f), 80)])
			}
			continue
		}
		o, ok := orig[key(f, 14)]
		if !ok {
			other++
			continue
		}
		if f[14+33]&0x02 != 0 {
			// The SYN's MSS: clamped by r1 so that full-sized
			// segments have room for the tunnel and 8 hops of 3 words.
			o = bytes.Clone(o)
			if mss := tcpMSS(f[14:]); mss != 1500-40-(52+8*12) {
				t.Errorf("h2: SYN with MSS %d, want %d", mss, 1500-40-(52+8*12))
			}
			setTCPMSS(o[14:], tcpMSS(f[14:]))
			copy(o[14+36:14+38], f[14+36:14+38]) // its checksum
		}
		if err := sameInner(o[14:], f[14:]); err != nil {
			t.Errorf("h2: %v", err)
			continue
		}
		same++
	}
	t.Logf("h2: %d frames as h1 sent them, %d without a match at r1 (segmented differently)", same, other)
	wholeAtH2(t, atH2.got())
	handedOff(t, r[2])
	if same == 0 {
		t.Fatal("h2: no frame matched one h1 sent")
	}

	// The collector: reports with every hop.
	var paths [][]uint32
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		pipe.Flush()
		paths = col.got()
		if pathsHave(paths, "[3 2 1]") {
			break
		}
	}
	for _, p := range paths {
		if fmt.Sprint(p) != "[3 2 1]" {
			t.Fatalf("collector paths %v, want [3 2 1] only", paths)
		}
	}
	s, _ := r[2].Stats(context.Background())
	t.Logf("%d reports, paths %v; r3 stripped %d", len(paths), paths, s.Node.IntStripped)
}

// handedOff fails unless the sink d's VXLAN-GPE device received
// packets: super-packets left the tunnel through the kernel (tun_handoff).
func handedOff(t *testing.T, d *Dataplane) {
	t.Helper()
	ln, err := d.nl.LinkByName(tunDevName)
	if err != nil {
		t.Fatalf("%s: %v", tunDevName, err)
	}
	st := ln.Attrs().Statistics
	t.Logf("%s received %d packets (%d bytes) to take out of the tunnel", tunDevName, st.RxPackets, st.RxBytes)
	if st.RxPackets == 0 {
		t.Errorf("%s received nothing: no super-packet was handed to the kernel's tunnel receive", tunDevName)
	}
}

// wholeAtH2 fails unless some of the TCP frames h2 received (captured on
// h2-r3) are GSO super-packets: the session tunnel's super-packets left
// r3's sink interface whole, not segmented there.
func wholeAtH2(t *testing.T, frames [][]byte) {
	t.Helper()
	tcp, super := 0, 0
	for _, f := range frames {
		if len(f) < 14+40 {
			continue
		}
		v4 := binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == wire.ProtoTCP
		v6 := binary.BigEndian.Uint16(f[12:]) == 0x86dd && f[20] == wire.ProtoTCP
		if !v4 && !v6 {
			continue
		}
		tcp++
		if len(f)-14 > 1500 {
			super++
		}
	}
	t.Logf("h2: %d TCP frames, %d of them GSO super-packets (r3's sink interface passed them whole)", tcp, super)
	if super == 0 {
		t.Errorf("h2 received %d TCP frames, no super-packet: r3 segmented the session tunnel's super-packets", tcp)
	}
}

func pathsHave(paths [][]uint32, want string) bool {
	for _, p := range paths {
		if fmt.Sprint(p) == want {
			return true
		}
	}
	return false
}

// sameInner: b is the IPv4 packet a one forwarding hop later (TTL and
// header checksum apart), byte for byte.
func sameInner(a, b []byte) error {
	n := int(binary.BigEndian.Uint16(a[2:]))
	if len(a) < n || len(b) < n || int(binary.BigEndian.Uint16(b[2:])) != n {
		return fmt.Errorf("lengths %d and %d", len(a), len(b))
	}
	if b[8] != a[8]-1 {
		return fmt.Errorf("TTL %d, sent with %d", b[8], a[8])
	}
	if !bytes.Equal(a[:8], b[:8]) || a[9] != b[9] || !bytes.Equal(a[12:n], b[12:n]) {
		return fmt.Errorf("packet changed:\n sent %x\n got  %x", a[:min(n, 80)], b[:min(n, 80)])
	}
	if ipSum(b[:20]) != 0 {
		return fmt.Errorf("bad IP header checksum %x", b[:20])
	}
	return nil
}

// ipSum is the ones' complement sum of an IP header: 0 when valid.
func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// checkTunnelFrame checks a tunnel frame received at r3 from r2 (a bare
// ACK with r1's and r2's hops) field by field against INT v2.1 (INT over
// VXLAN-GPE: VXLAN-GPE header, INT shim, INT-MD header and stack) and its
// inner packet against the one h1 sent.
func checkTunnelFrame(t *testing.T, f []byte, in int, sent []byte) {
	t.Helper()
	ip := f[14:]
	total := in - 14 + 52
	hdrs := []struct {
		name      string
		got, want []byte
	}{
		{"outer IPv4 version, IHL, DSCP/ECN of the inner", ip[0:2], []byte{0x45, f[in+1]}},
		{"outer IPv4 total length", ip[2:4], binary.BigEndian.AppendUint16(nil, uint16(total))},
		{"outer IPv4 DF, no fragment", ip[6:8], []byte{0x40, 0}},
		{"outer IPv4 TTL (64, r2 forwarded), protocol UDP", ip[8:10], []byte{63, wire.ProtoUDP}},
		{"outer IPv4 source, destination (r1's and r3's tunnel-address)", ip[12:20], []byte{10, 0, 12, 1, 10, 0, 23, 2}},
		{"UDP destination port 4790", ip[22:24], []byte{0x12, 0xb6}},
		{"UDP length", ip[24:26], binary.BigEndian.AppendUint16(nil, uint16(total-20))},
		{"UDP checksum (none)", ip[26:28], []byte{0, 0}},
		{"VXLAN-GPE flags I, P; reserved; next protocol INT", ip[28:32], []byte{0x0c, 0, 0, spec.VXLANGPENextProtoINT}},
		{"VXLAN-GPE VNI 0, reserved", ip[32:36], []byte{0, 0, 0, 0}},
		{"INT shim: type MD, length (header + 2 hops of 3 words), G 0, next protocol IPv4", ip[36:40], []byte{0x10, 3 + 6, 0, 1}},
		{"INT-MD header: version 2, no flags, hop ML 3, remaining hop count 8-2", ip[40:44], []byte{0x20, 0, 3, 6}},
		{"INT-MD instructions: node id, level 1 interfaces, hop latency; domain 0", ip[44:48], []byte{0xe0, 0, 0, 0}},
		{"INT-MD DS instruction, DS flags", ip[48:52], []byte{0, 0, 0, 0}},
		{"hop 2 node id", ip[52:56], []byte{0, 0, 0, 2}},
		{"hop 1 node id", ip[64:68], []byte{0, 0, 0, 1}},
	}
	for _, h := range hdrs {
		if !bytes.Equal(h.got, h.want) {
			t.Errorf("tunnel frame: %s: %x, want %x", h.name, h.got, h.want)
		}
	}
	if ipSum(ip[:20]) != 0 {
		t.Errorf("tunnel frame: bad outer IPv4 checksum %x", ip[:20])
	}
	if sp := binary.BigEndian.Uint16(ip[20:]); sp < 0xc000 {
		t.Errorf("tunnel frame: UDP source port %d outside the dynamic range", sp)
	}
	if sent == nil {
		t.Fatal("tunnel frame: the bare ACK is not among h1's frames")
	}
	if err := sameInner(sent[14:], f[in:]); err != nil {
		t.Errorf("tunnel frame: inner packet: %v", err)
	}
	t.Logf("tunnel frame %x", f[:min(len(f), in+52)])
}

// tcpMSS returns the MSS option of the TCP SYN in the IPv4 packet ip,
// when it is the first option.
func tcpMSS(ip []byte) int {
	if len(ip) < 44 || ip[40] != 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(ip[42:]))
}

func setTCPMSS(ip []byte, mss int) { binary.BigEndian.PutUint16(ip[42:], uint16(mss)) }

// setTOS sets the IPv4 TOS byte of frame f and its header checksum.
func setTOS(f []byte, ip int, tos byte) {
	f[ip+1] = tos
	binary.BigEndian.PutUint16(f[ip+10:], 0)
	binary.BigEndian.PutUint16(f[ip+10:], ipSum(f[ip:ip+20]))
}

// TestSessionTunnelSteps runs the source and sink steps of a session
// tunnel on single frames (BPF_PROG_TEST_RUN): the source's frame is the
// original packet behind the tunnel and INT; one that would not fit the
// egress MTU leaves untouched; the sink, given the frame as it arrives
// (outer destination rewritten by intd_ingress), reports it and returns
// the original packet, with a congestion mark of the tunnel when the
// inner packet is ECN-capable. A VXLAN-GPE INT packet whose outer
// destination is not the inner one is somebody's tunnel: only INT is
// stripped, the tunnel stays.
func TestSessionTunnelSteps(t *testing.T) {
	sess := sai.DefaultIntSessionAttrs()
	sess.Encapsulation, sess.TunnelDestination = sai.SessionEncapVXLANGPE, netip.MustParseAddr("10.0.23.2")
	src := newBPFNode(t)
	setup{sess: &sess, match: port80(), dt: func(a *sai.DTelAttrs) { a.TunnelAddress = netip.MustParseAddr("10.0.12.1") }}.apply(t, src)
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("inside the tunnel"))
	setTOS(orig, 14, 0x02) // ECT(0)
	out := src.process(t, bytes.Clone(orig))
	in, hops := tunnelFrame(out)
	if in != 14+36+4+12+12 || hops != 1 || !bytes.Equal(out[in:], orig[14:]) || !bytes.Equal(out[:14], orig[:14]) {
		t.Fatalf("source: %x\nwant the original %x behind the tunnel", out, orig)
	}
	if ipSum(out[14:34]) != 0 || out[15] != 0x02 || !bytes.Equal(out[30:34], []byte{10, 0, 23, 2}) {
		t.Errorf("source: outer IPv4 %x", out[14:34])
	}
	src.setMTU(1500)
	big := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 1500-40-40))
	if got := src.process(t, bytes.Clone(big)); !bytes.Equal(got, big) {
		t.Errorf("source: a packet without room for the tunnel changed: %x", got[:80])
	}
	st, _ := src.Stats(context.Background())
	for _, s := range st.IntSessions {
		if s.PacketsInitiated != 1 || s.NotInitiatedNoRoom != 1 {
			t.Errorf("source: session stats %+v, want 1 initiated, 1 without room", s)
		}
	}

	sink := newBPFNode(t)
	setup{sink: true, dt: func(a *sai.DTelAttrs) { a.TunnelAddress = netip.MustParseAddr("10.0.23.2") }}.apply(t, sink)
	arrived := func(f []byte, outerTOS byte) []byte {
		f = bytes.Clone(f)
		copy(f[30:34], f[in+16:in+20]) // intd_ingress: the inner destination
		setTOS(f, 14, outerTOS)
		return f
	}
	if got := sink.process(t, arrived(out, 0x02)); !bytes.Equal(got, orig) {
		t.Errorf("sink: %x\nwant the original %x", got, orig)
	}
	ce := bytes.Clone(orig)
	setTOS(ce, 14, 0x03)
	if got := sink.process(t, arrived(out, 0x03)); !bytes.Equal(got, ce) {
		t.Errorf("sink, tunnel marked CE: %x\nwant %x", got, ce)
	}
	notECT := bytes.Clone(out)
	setTOS(notECT, in, 0)
	plain := bytes.Clone(orig)
	setTOS(plain, 14, 0)
	if got := sink.process(t, arrived(notECT, 0x03)); !bytes.Equal(got, plain) {
		t.Errorf("sink, tunnel marked CE, inner not ECN-capable: %x\nwant %x", got, plain)
	}
	evs := sink.rec.wait(t, 1)
	if len(evs) == 0 {
		t.Fatal("sink: no report")
	}
	var p wire.Packet
	if err := (&wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}).Parse(evs[0].Packet, &p); err != nil || p.INT < 0 {
		t.Fatalf("sink: report frame without INT (%v): %x", err, evs[0].Packet)
	}
	if path, err := nodePath(evs[0].Packet, p.INT, p.INTLen); err != nil || fmt.Sprint(path) != fmt.Sprint([]uint32{nodeID, nodeID}) {
		t.Errorf("sink: report path %v (%v), want the source's hop and the sink's", path, err)
	}
	// Not a session tunnel (the outer destination was not rewritten):
	// INT goes, the VXLAN-GPE tunnel stays, announcing IPv4.
	got := sink.process(t, bytes.Clone(out))
	if len(got) != len(out)-4-24 || got[14+28+3] != 1 || !bytes.Equal(got[14+36:], orig[14:]) {
		t.Errorf("sink, somebody's tunnel: %x", got)
	}
}

// TestSessionTunnelIPv6: TestSessionTunnel's flow over IPv6, in IPv6
// tunnels (tunnel-address-ipv6, tunnel-destination-ipv6) with TSO/GSO on:
// super-packets cross r1 -> r2 and r2 -> r3 whole in the tunnel with 1
// and 2 hops, the byte stream arrives whole, h2 receives no tunnel frame,
// and the collector sees the path r3, r2, r1.
func TestSessionTunnelIPv6(t *testing.T) {
	l := newLab(t)
	l.addIPv6(t)
	col := &collector{pr: &wire.Parser{VXLANGPEPort: spec.PortVXLANGPE, AllowTruncated: true}}
	l.listen(t, col)
	pipe := l.r3Pipeline(t)
	v6 := func(cfg, tun, dst string) string {
		cfg = v6Config(cfg)
		if tun != "" {
			cfg = strings.Replace(cfg, `"latency-sensitivity": 8`, `"latency-sensitivity": 8, "tunnel-address-ipv6": "`+tun+`"`, 1)
		}
		if dst != "" {
			cfg = strings.Replace(cfg, `"remaining-hop-count": 8}`, `"remaining-hop-count": 8, "encapsulation": "VXLAN_GPE", "tunnel-destination-ipv6": "`+dst+`"}`, 1)
		}
		return cfg
	}
	atR2 := l.capture(t, "r2", "r2-r1")
	atR3 := l.capture(t, "r3", "r3-r2")
	atH2 := l.capture(t, "h2", "h2-r3")
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, v6(sessionTunnelConfig(1, "r1-h1", true, "", ""), "fd00:12::1", "fd00:23::2"))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, sessionTunnelConfig(2, "", false, "", ""))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, pipe, v6(sessionTunnelConfig(3, "r3-h2", false, "", ""), "fd00:23::2", ""))

	l.tcpEcho(t, "tcp6", "[fd00:2::2]:9998", r)
	time.Sleep(200 * time.Millisecond)

	// Tunnel frames fd00:12::1 -> fd00:23::2, UDP to 4790, by hop count
	// and size, at r2 and r3.
	count := func(frames [][]byte, hops int) (n, super, plain int) {
		pr := &wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}
		for _, f := range frames {
			var p wire.Packet
			if pr.Parse(f, &p) != nil || p.IPVersion != 6 {
				continue
			}
			if p.INT < 0 {
				if p.Proto == wire.ProtoTCP {
					plain++
				}
				continue
			}
			if !bytes.Equal(f[22:38], net.ParseIP("fd00:12::1")) || !bytes.Equal(f[38:54], net.ParseIP("fd00:23::2")) {
				t.Errorf("tunnel frame between other addresses: %x", f[:54])
				continue
			}
			if path, err := nodePath(f, p.INT, p.INTLen); err != nil || len(path) != hops {
				t.Errorf("tunnel frame of %d bytes: path %v (%v), want %d hops", len(f), path, err, hops)
				continue
			}
			n++
			if len(f)-14 > 1500 {
				super++
			}
		}
		return n, super, plain
	}
	n, super, plain := count(atR2.got(), 1)
	t.Logf("r1 -> r2: %d tunnel frames (%d super-packets), %d plain TCP", n, super, plain)
	if n == 0 || super == 0 || plain != 0 {
		t.Errorf("r1 -> r2: %d tunnel frames, %d super-packets, %d plain TCP frames", n, super, plain)
	}
	n, super, _ = count(atR3.got(), 2)
	t.Logf("r2 -> r3: %d tunnel frames (%d super-packets)", n, super)
	if n == 0 || super == 0 {
		t.Errorf("r2 -> r3: %d tunnel frames, %d super-packets", n, super)
	}
	for _, f := range atH2.got() {
		if len(f) > 62 && f[20] == wire.ProtoUDP && binary.BigEndian.Uint16(f[56:]) == spec.PortVXLANGPE {
			t.Fatalf("h2 received a tunnel frame: %x", f[:80])
		}
	}
	wholeAtH2(t, atH2.got())
	handedOff(t, r[2])
	// The hop limit as r1 forwarded them (64 - 1), super-packets that
	// the kernel forwarded from intd-gpe included.
	h1, hops := net.ParseIP("fd00:1::2"), 0
	for _, f := range atH2.got() {
		if len(f) <= 54 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[20] != wire.ProtoTCP || !bytes.Equal(f[22:38], h1) {
			continue
		}
		if hops++; f[21] != 63 {
			t.Errorf("h2: %d-byte TCP frame from h1 with hop limit %d, want 63", len(f), f[21])
			break
		}
	}
	if hops == 0 {
		t.Error("h2: no TCP frame from h1")
	}
	var paths [][]uint32
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && len(paths) == 0; time.Sleep(20 * time.Millisecond) {
		pipe.Flush()
		paths = col.got()
	}
	if len(paths) == 0 {
		t.Fatal("collector got no INT reports")
	}
	for _, p := range paths {
		if fmt.Sprint(p) != "[3 2 1]" {
			t.Fatalf("collector paths %v, want [3 2 1] only", paths)
		}
	}
}

// TestSessionTunnelStepsIPv6 is TestSessionTunnelSteps for IPv6 packets
// in IPv6 tunnels: outer IPv6 with the inner traffic class, the ECN field
// in bits 4-5 of the second byte, no header checksum.
func TestSessionTunnelStepsIPv6(t *testing.T) {
	sess := sai.DefaultIntSessionAttrs()
	sess.Encapsulation, sess.TunnelDestination6 = sai.SessionEncapVXLANGPE, netip.MustParseAddr("fd00:23::2")
	src := newBPFNode(t)
	setup{sess: &sess, match: port80(), dt: func(a *sai.DTelAttrs) { a.TunnelAddress6 = netip.MustParseAddr("fd00:12::1") }}.apply(t, src)
	ecn := func(f []byte, ip int, e byte) []byte {
		f = bytes.Clone(f)
		f[ip+1] = f[ip+1]&^0x30 | e<<4
		return f
	}
	orig := ecn(tcpFrame("fd00:1::2", "fd00:2::2", 1234, 80, 0x0a, []byte("inside the IPv6 tunnel")), 14, 2) // ECT(0)
	out := src.process(t, bytes.Clone(orig))
	const in = 14 + 40 + 16 + 4 + 12 + 12
	var p wire.Packet
	if err := (&wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}).Parse(out, &p); err != nil || p.INT != 14+40+16+4 ||
		len(out) != len(orig)+in-14 || !bytes.Equal(out[in:], orig[14:]) {
		t.Fatalf("source (%v): %x\nwant the original %x behind the tunnel", err, out, orig)
	}
	plen := uint16(len(out) - 14 - 40)
	want := append([]byte{0x60 | orig[14]&0x0f, orig[15] & 0xf0, 0, 0, byte(plen >> 8), byte(plen), wire.ProtoUDP, 64},
		append(net.ParseIP("fd00:12::1"), net.ParseIP("fd00:23::2")...)...)
	if !bytes.Equal(out[14:54], want) || binary.BigEndian.Uint16(out[54+2:]) != spec.PortVXLANGPE ||
		binary.BigEndian.Uint16(out[54+4:]) != plen || out[54+19] != 2 {
		t.Errorf("source: outer IPv6 %x, UDP, GPE, shim %x; want IPv6 %x, UDP to 4790, shim next protocol IPv6", out[14:54], out[54:74], want)
	}

	sink := newBPFNode(t)
	setup{sink: true, dt: func(a *sai.DTelAttrs) { a.TunnelAddress6 = netip.MustParseAddr("fd00:23::2") }}.apply(t, sink)
	arrived := func(f []byte, outerECN byte) []byte {
		f = ecn(f, 14, outerECN)
		copy(f[14+24:14+40], f[in+24:in+40])
		return f
	}
	if got := sink.process(t, arrived(out, 2)); !bytes.Equal(got, orig) {
		t.Errorf("sink: %x\nwant the original %x", got, orig)
	}
	if got := sink.process(t, arrived(out, 3)); !bytes.Equal(got, ecn(orig, 14, 3)) {
		t.Errorf("sink, tunnel marked CE: %x\nwant %x", got, ecn(orig, 14, 3))
	}
	if got := sink.process(t, arrived(ecn(out, in, 0), 3)); !bytes.Equal(got, ecn(orig, 14, 0)) {
		t.Errorf("sink, tunnel marked CE, inner not ECN-capable: %x\nwant %x", got, ecn(orig, 14, 0))
	}
	if evs := sink.rec.wait(t, 1); len(evs) == 0 {
		t.Error("sink: no report")
	}
}

// TestSessionTunnelClampBothFamilies: a session with IPv4 and IPv6 tunnel
// destinations clamps an IPv4 SYN for an IPv4 tunnel (outer 20 bytes),
// not for the larger IPv6 one.
func TestSessionTunnelClampBothFamilies(t *testing.T) {
	sess := sai.DefaultIntSessionAttrs()
	sess.Encapsulation, sess.ClampTCPMSS = sai.SessionEncapVXLANGPE, true
	sess.TunnelDestination, sess.TunnelDestination6 = netip.MustParseAddr("10.0.23.2"), netip.MustParseAddr("2001:db8:23::2")
	src := newBPFNode(t)
	setup{sess: &sess, match: port80(), dt: func(a *sai.DTelAttrs) {
		a.TunnelAddress, a.TunnelAddress6 = netip.MustParseAddr("10.0.12.1"), netip.MustParseAddr("2001:db8:12::1")
	}}.apply(t, src)
	src.setMTU(1500)
	syn := wiretest.SYNFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, 0x02, wiretest.MSSOption(1460))
	out := src.process(t, syn)
	in, hops := tunnelFrame(out)
	if in < 0 || hops != 1 {
		t.Fatalf("source: SYN not in an IPv4 tunnel: %x", out)
	}
	// 1500 - IPv4 - TCP - (outer IPv4, UDP, GPE, shim, MD header, 8 hops
	// of 3 words).
	want := 1500 - 20 - 20 - (20 + 8 + 8 + 4 + 12 + int(sess.MaxHopCount)*3*4)
	if got := tcpMSS(out[in:]); got != want {
		t.Errorf("source: SYN's MSS %d, want %d", got, want)
	}
}

// TestDecapProbe: the probe's frame and program are valid (the kernel
// removes the tunnel with the DECAP_L3 flag alone), so its answer with
// BPF_F_ADJ_ROOM_DECAP_L4_UDP is the kernel's word on that flag.
func TestDecapProbe(t *testing.T) {
	needRoot(t)
	if !decapTakes(adjRoomDecapIPv4) {
		t.Fatal("bpf_skb_adjust_room refused to remove outer IPv4, UDP and VXLAN-GPE with DECAP_L3_IPV4")
	}
	t.Logf("BPF_F_ADJ_ROOM_DECAP_L4_UDP known: %v", decapClearsUDPTunnel())
}

// TestSessionTunnelDevice: a node with a tunnel-address on a kernel whose
// bpf_skb_adjust_room cannot clear a UDP tunnel's GSO state adds intd-gpe,
// an external VXLAN-GPE device on UDP 4790 whose ingress passes only what
// the sink hands it, with its sink interface's default offloads
// (tx-udp_tnl-segmentation on); the device goes when the tunnel-address
// does. A VXLAN-GPE tunnel from elsewhere to that port does not get
// through to h2. One left by an intd killed before Close goes at New.
// With another external VXLAN-GPE device on the port the
// apply fails, naming /int/node/config/tunnel-address and the port, and
// the tunnel address does not reach the program.
func TestSessionTunnelDevice(t *testing.T) {
	if decapClearsUDPTunnel() {
		t.Skip("this kernel clears a UDP tunnel's GSO state on decapsulation: no device needed")
	}
	l := newLab(t)
	// What an intd killed before Close leaves: New removes it.
	l.exec(t, "r3", "ip", "link", "add", tunDevName, "type", "vxlan", "external", "gpe", "dstport", "4790")
	d := l.dataplaneR3(t)
	if _, err := d.nl.LinkByName(tunDevName); err == nil {
		t.Fatalf("New left the %s of an instance gone", tunDevName)
	}
	o := dtel.New(d)
	apply := func(tun string) error {
		dev := &gen.Device{}
		if err := gen.Unmarshal([]byte(sessionTunnelConfig(3, "r3-h2", false, tun, "")), dev); err != nil {
			t.Fatal(err)
		}
		return o.Apply(context.Background(), dev)
	}
	if err := apply("10.0.23.2"); err != nil {
		t.Fatalf("apply with tx-udp_tnl-segmentation on r3-h2: %v", err)
	}
	cfg := func(d *Dataplane) intdCfg {
		var c intdCfg
		if err := d.objs.CfgMap.Lookup(uint32(0), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	dev := func() (int, string) {
		var idx int
		var kind string
		_ = l.in("r3", func() error {
			if ln, err := d.nl.LinkByName(tunDevName); err == nil {
				idx, kind = ln.Attrs().Index, ln.Type()
			}
			return nil
		})
		return idx, kind
	}
	idx, kind := dev()
	if c := cfg(d); idx == 0 || kind != "vxlan" || c.TunDev != uint32(idx) || c.TunAddr == 0 {
		t.Fatalf("%s: index %d, kind %q; program's tunnel device %d, tunnel address %#x", tunDevName, idx, kind, c.TunDev, c.TunAddr)
	}
	out := l.exec(t, "r3", "ip", "-d", "link", "show", tunDevName)
	if !strings.Contains(out, "external") || !strings.Contains(out, "gpe") || !strings.Contains(out, "dstport 4790") {
		t.Errorf("%s: %s", tunDevName, out)
	}

	// A tunnel from elsewhere: r2 sends h2 a UDP datagram in VXLAN-GPE
	// (next protocol IPv4) to r3's tunnel address, port 4790.
	rx := l.listenH2(t, 9997)
	defer rx.Close()
	inner := wiretest.UDPFrame("10.0.12.2", "10.0.2.2", 1234, 9997, []byte("from elsewhere"), true)[14:]
	gpe := append([]byte{0x0c, 0, 0, 1, 0, 0, 0, 0}, inner...)
	if err := l.in("r2", func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 23, 2), Port: int(spec.PortVXLANGPE)})
		if err != nil {
			return err
		}
		defer c.Close()
		for range 5 {
			if _, err := c.Write(gpe); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, _, err := rx.ReadFrom(make([]byte, 100)); err == nil {
		t.Errorf("h2 received a %d-byte datagram tunnelled to r3's %s from elsewhere", n, tunDevName)
	}

	// Without the tunnel address the device goes.
	if err := apply(""); err != nil {
		t.Fatal(err)
	}
	if idx, _ := dev(); idx != 0 || cfg(d).TunDev != 0 {
		t.Fatalf("%s still there (index %d, program's %d) without a tunnel-address", tunDevName, idx, cfg(d).TunDev)
	}

	// Another external VXLAN-GPE device holds port 4790.
	l.exec(t, "r3", "ip", "link", "add", "other-gpe", "type", "vxlan", "external", "gpe", "dstport", "4790")
	l.exec(t, "r3", "ip", "link", "set", "other-gpe", "up")
	err := apply("10.0.23.2")
	t.Logf("with other-gpe on UDP 4790: %v", err)
	if err == nil || !strings.Contains(err.Error(), "/int/node/config/tunnel-address") || !strings.Contains(err.Error(), "4790") {
		t.Fatalf("apply with UDP port 4790 taken: %v, want an error naming /int/node/config/tunnel-address and the port", err)
	}
	if c := cfg(d); c.TunAddr != 0 || c.TunDev != 0 {
		t.Fatalf("refused tunnel address reached the program: %+v", c)
	}
	if idx, _ := dev(); idx != 0 {
		t.Fatalf("%s left behind by the refused apply", tunDevName)
	}

	// The port free again, the apply takes; Close removes the device.
	l.exec(t, "r3", "ip", "link", "del", "other-gpe")
	if err := apply("10.0.23.2"); err != nil {
		t.Fatal(err)
	}
	if idx, _ := dev(); idx == 0 {
		t.Fatalf("no %s after the apply", tunDevName)
	}
	if err := l.in("r3", d.Close); err != nil {
		t.Fatal(err)
	}
	if out := l.exec(t, "r3", "ip", "-o", "link", "show"); strings.Contains(out, tunDevName) {
		t.Fatalf("%s left after Close: %s", tunDevName, out)
	}
}

// markCE attaches to dev's tc egress in namespace ns a program that sets
// the ECN field of every IPv4 packet to CE (header checksum updated).
func (l *lab) markCE(t *testing.T, ns, dev string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SchedCLS,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.LoadMem(asm.R0, asm.R6, 16, asm.Word), // skb->protocol
			asm.JNE.Imm(asm.R0, 0x0008, "out"),        // htons(ETH_P_IP)
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, 14),
			asm.Mov.Reg(asm.R3, asm.R10),
			asm.Add.Imm(asm.R3, -8),
			asm.Mov.Imm(asm.R4, 2),
			asm.FnSkbLoadBytes.Call(),
			asm.JNE.Imm(asm.R0, 0, "out"),
			asm.LoadMem(asm.R7, asm.R10, -8, asm.Half), // version/IHL, TOS
			asm.Mov.Reg(asm.R8, asm.R7),
			asm.Or.Imm(asm.R8, 0x0300),
			asm.StoreMem(asm.R10, -8, asm.R8, asm.Half),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, 14+10),
			asm.Mov.Reg(asm.R3, asm.R7),
			asm.Mov.Reg(asm.R4, asm.R8),
			asm.Mov.Imm(asm.R5, 2),
			asm.FnL3CsumReplace.Call(),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, 14),
			asm.Mov.Reg(asm.R3, asm.R10),
			asm.Add.Imm(asm.R3, -8),
			asm.Mov.Imm(asm.R4, 2),
			asm.Mov.Imm(asm.R5, 0),
			asm.FnSkbStoreBytes.Call(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	if err := l.in(ns, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		ln, err := h.LinkByName(dev)
		if err != nil {
			return err
		}
		q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ln.Attrs().Index,
			Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
		if err := h.QdiscReplace(q); err != nil {
			return err
		}
		return h.FilterReplace(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: ln.Attrs().Index,
			Parent: netlink.HANDLE_MIN_EGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
			Fd: prog.FD(), Name: "mark_ce", DirectAction: true})
	}); err != nil {
		t.Fatalf("%s: CE marking on %s: %v", ns, dev, err)
	}
}

// TestSessionTunnelCE: r2 marks congestion (CE) on every tunnel packet it
// sends r3 (a tc program on r2-r3's egress). Super-packets leave the
// tunnel through the kernel (tun_handoff) and must end as single packets
// do: an inner packet that is not ECN-capable arrives unmarked (the
// kernel's decapsulation would drop it: the 1 MiB echo would stall), an
// ECN-capable one (ECN negotiated by h1 and h2) arrives marked CE.
func TestSessionTunnelCE(t *testing.T) {
	if decapClearsUDPTunnel() {
		t.Skip("this kernel clears a UDP tunnel's GSO state on decapsulation: no device")
	}
	l := newLab(t)
	l.markCE(t, "r2", "r2-r3")
	atH2 := l.capture(t, "h2", "h2-r3")
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, sessionTunnelConfig(1, "r1-h1", true, "10.0.12.1", "10.0.23.2"))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, sessionTunnelConfig(2, "", false, "", ""))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, nil, sessionTunnelConfig(3, "r3-h2", false, "10.0.23.2", ""))
	ecn := func() (super, ce int) {
		time.Sleep(200 * time.Millisecond) // the capture catching up
		for _, f := range atH2.got() {
			if innerTCP(f, 14) && len(f)-14 > 1500 {
				super++
				if f[15]&3 == 3 {
					ce++
				}
			}
		}
		return super, ce
	}
	l.tcpEcho(t, "tcp4", "10.0.2.2:9996", r)
	handedOff(t, r[2])
	super, ce := ecn()
	t.Logf("not ECN-capable: h2 got %d super-packets, %d marked CE", super, ce)
	if super == 0 || ce != 0 {
		t.Errorf("not ECN-capable: h2 got %d super-packets, %d of them CE", super, ce)
	}
	for _, h := range []string{"h1", "h2"} {
		l.exec(t, h, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
	}
	l.tcpEcho(t, "tcp4", "10.0.2.2:9995", r)
	super2, ce2 := ecn()
	t.Logf("ECN-capable: h2 got %d more super-packets, %d marked CE", super2-super, ce2)
	if super2 == super || ce2 == 0 {
		t.Errorf("ECN-capable: h2 got %d super-packets, %d of them CE: want CE copied from the tunnel", super2-super, ce2)
	}
}

// TestSessionTunnelNotLocal: a tunnel-address that is not one of the
// sink node's addresses (10.0.2.99, in h2's subnet) cannot take the
// kernel's tunnel receive, which would forward the handed packet on as a
// tunnel: the sink removes the tunnel itself, as from single packets, and
// the 1 MiB echo still arrives whole; intd-gpe receives nothing.
func TestSessionTunnelNotLocal(t *testing.T) {
	if decapClearsUDPTunnel() {
		t.Skip("this kernel clears a UDP tunnel's GSO state on decapsulation: no device")
	}
	l := newLab(t)
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, sessionTunnelConfig(1, "r1-h1", true, "10.0.12.1", "10.0.2.99"))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, sessionTunnelConfig(2, "", false, "", ""))
	r[2] = l.router(t, "r3", []string{"r3-r2", "r3-h2"}, nil, sessionTunnelConfig(3, "r3-h2", false, "10.0.2.99", ""))
	l.tcpEcho(t, "tcp4", "10.0.2.2:9998", r)
	s, _ := r[2].Stats(context.Background())
	ln, err := r[2].nl.LinkByName(tunDevName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("r3 stripped %d; %s received %d packets", s.Node.IntStripped, tunDevName, ln.Attrs().Statistics.RxPackets)
	if s.Node.IntStripped == 0 || ln.Attrs().Statistics.RxPackets != 0 {
		t.Errorf("r3 stripped %d tunnel packets, %s received %d: want the sink's own removal only", s.Node.IntStripped, tunDevName,
			ln.Attrs().Statistics.RxPackets)
	}
}

// tunOffloads are TUNSETOFFLOAD's flags for a tap that takes checksum,
// TCP, UDP and UDP tunnel segmentation offloads, as a VM's virtio NIC
// that negotiated them does (uapi linux/if_tun.h).
const tunOffloads = 0x01 | 0x02 | 0x04 | 0x20 | 0x40 | 0x80 | 0x100

// tapFrame is a frame a tap got and its virtio-net header.
type tapFrame struct{ hdr, frame []byte }

// tunnelOffsets returns the virtio-net header's GSO type and UDP tunnel
// offsets (outer transport header, inner network header).
func (f tapFrame) tunnelOffsets() (gsoType byte, outerTH, innerNH int) {
	return f.hdr[1], int(binary.LittleEndian.Uint16(f.hdr[20:])), int(binary.LittleEndian.Uint16(f.hdr[22:]))
}

// tunnelTSOTap adds tap tp0 in namespace ns with a virtio-net header on
// every frame (24 bytes: the one with the UDP tunnel offsets) and the
// offloads above, a device that segments UDP tunnels itself whose
// "hardware" is the test, and mirrors what dev receives to it, as a
// bridge would pass it on. It returns a function that stops reading and
// returns the IPv4 frames the tap got.
func (l *lab) tunnelTSOTap(t *testing.T, ns, dev string) func() []tapFrame {
	t.Helper()
	fd := -1
	err := l.in(ns, func() error {
		var err error
		if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
			return err
		}
		ifr, err := unix.NewIfreq("tp0")
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return err
		}
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, 24); err != nil {
			return err
		}
		return unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads)
	})
	if fd >= 0 {
		t.Cleanup(func() { unix.Close(fd) })
	}
	if err != nil {
		t.Skipf("no tap with UDP tunnel segmentation offload here: %v", err)
	}
	l.exec(t, ns, "ip", "link", "set", "tp0", "up")
	if err := l.in(ns, func() error {
		f, err := ethtool.ActiveFeatures("tp0")
		if err == nil && !f["tx-udp_tnl-segmentation"] {
			err = fmt.Errorf("tp0 features %v", f)
		}
		return err
	}); err != nil {
		t.Skipf("tap without UDP tunnel segmentation: %v", err)
	}
	l.exec(t, ns, "tc", "qdisc", "add", "dev", dev, "clsact")
	l.exec(t, ns, strings.Fields("tc filter add dev "+dev+" ingress pref 1 protocol all u32 match u32 0 0 action mirred egress mirror dev tp0 continue")...)
	var got []tapFrame
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<17)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				continue
			}
			if n >= 24+34 && binary.BigEndian.Uint16(buf[24+12:]) == 0x0800 {
				got = append(got, tapFrame{bytes.Clone(buf[:24]), bytes.Clone(buf[24:n])})
			}
		}
	}()
	return func() []tapFrame {
		time.Sleep(100 * time.Millisecond)
		close(stop)
		<-done
		return got
	}
}

// TestSessionTunnelToTunnelTSODevice: what a device that segments UDP
// tunnels itself (a tap standing for a VM's virtio NIC that negotiated
// it) is asked to do with the session's super-packets. One tap at r3
// gets the tunnel frames r2 forwards (its hop pushed onto super-packets
// through a veth); one at h2 gets what leaves r3's sink interface, whose
// offloads are a veth's defaults (tx-udp_tnl-segmentation on). The TCP
// flow (1 MiB echoed) and UDP datagrams that h1 sends as GSO
// super-packets must arrive intact at h2; at r3 every super-packet must
// be a UDP tunnel whose offsets name its outer UDP and inner IP headers;
// at h2 super-packets must arrive (the kernel took the tunnel off them,
// tun_handoff), each plain TCP over IPv4 to the device, none claiming a
// UDP tunnel the frame does not have.
func TestSessionTunnelToTunnelTSODevice(t *testing.T) {
	l := newLab(t)
	atR3 := l.tunnelTSOTap(t, "r3", "r3-r2")
	atH2 := l.tunnelTSOTap(t, "h2", "h2-r3")
	var r [3]*Dataplane
	r[0] = l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, sessionTunnelConfig(1, "r1-h1", true, "10.0.12.1", "10.0.23.2"))
	r[1] = l.router(t, "r2", []string{"r2-r1", "r2-r3"}, nil, sessionTunnelConfig(2, "", false, "", ""))
	var err error
	if r[2], err = l.tunnelSinkR3(t); err != nil {
		t.Fatalf("r3 with UDP tunnel segmentation on r3-h2: %v", err)
	}

	l.tcpEcho(t, "tcp4", "10.0.2.2:9998", r)
	detoured := func() uint64 {
		return r[0].rawCounters(0)[intdCounterC_GSO] + r[0].rawCounters(1)[intdCounterC_GSO] + r[0].rawCounters(2)[intdCounterC_GSO]
	}
	tcpDetoured := detoured()
	l.udpGSO(t)
	// UDP super-packets go into the tunnel segmented (the detour), TCP
	// ones whole.
	if tcpDetoured != 0 || detoured() == 0 {
		t.Errorf("r1 detoured %d super-packets of the TCP flow and %d of the UDP one, want none and some", tcpDetoured, detoured()-tcpDetoured)
	}

	// r3's tap: tunnel super-packets with r1's and r2's hops, offsets on
	// their outer UDP and inner IP headers (VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4).
	tunSuper, tunBad := 0, 0
	for _, f := range atR3() {
		in, hops := tunnelFrame(f.frame)
		gt, outerTH, innerNH := f.tunnelOffsets()
		if in < 0 || gt == 0 {
			continue
		}
		tunSuper++
		if gt&0x20 == 0 || outerTH != 34 || innerNH != in || hops != 2 {
			if tunBad++; tunBad <= 5 {
				t.Errorf("r3's tap: tunnel super-packet with %d hops, inner IP at %d: gso type %#x, outer transport at %d, inner IP at %d",
					hops, in, gt, outerTH, innerNH)
			}
		}
	}
	// h2's tap: h1's flows, never a UDP tunnel (an outer UDP header, then
	// the inner IP header).
	frames, super, bad := 0, 0, 0
	for _, f := range atH2() {
		if !bytes.Equal(f.frame[26:30], []byte{10, 0, 1, 2}) {
			continue
		}
		frames++
		gt, outerTH, innerNH := f.tunnelOffsets()
		if gt != 0 {
			super++
			// TCP over IPv4 (VIRTIO_NET_HDR_GSO_TCPV4, ECN bit aside),
			// checksum from the TCP header on.
			if gt&0x7f != 1 || binary.LittleEndian.Uint16(f.hdr[6:]) != 34 || binary.LittleEndian.Uint16(f.hdr[4:]) == 0 {
				if bad++; bad <= 5 {
					t.Errorf("h2's tap: super-packet of %d bytes with gso type %#x, gso size %d, checksum start %d: want TCPv4 from byte 34",
						len(f.frame), gt, binary.LittleEndian.Uint16(f.hdr[4:]), binary.LittleEndian.Uint16(f.hdr[6:]))
				}
			}
		}
		if gt&0x60 != 0 && (f.frame[23] != wire.ProtoUDP || outerTH != 14+int(f.frame[14]&0xf)*4 || innerNH < outerTH+8) {
			if bad++; bad <= 5 {
				t.Errorf("h2's tap was asked to segment a UDP tunnel the frame does not have: gso type %#x, outer transport at %d, inner IP at %d: %x",
					gt, outerTH, innerNH, f.frame[:min(len(f.frame), 60)])
			}
		}
	}
	handedOff(t, r[2])
	t.Logf("r3's tap: %d tunnel super-packets; h2's tap: %d frames of h1's flows, %d of them GSO super-packets, %d claiming a tunnel they lack",
		tunSuper, frames, super, bad)
	if tunSuper == 0 || frames == 0 || super == 0 {
		t.Fatalf("r3's tap got %d tunnel super-packets, h2's %d frames of h1's flows, %d of them super-packets", tunSuper, frames, super)
	}
}

// udpGSO sends 8 datagrams of 1000 bytes from h1 to h2 as one GSO
// super-packet (UDP_SEGMENT), ten times, and fails unless h2 receives
// them all intact (it goes on, for what else the caller checks).
func (l *lab) udpGSO(t *testing.T) {
	t.Helper()
	rx := l.listenH2(t, 9999)
	defer rx.Close()
	_ = rx.SetReadBuffer(4 << 20)
	var tx *net.UDPConn
	if err := l.in("h1", func() (err error) {
		tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 2, 2), Port: 9999})
		if err != nil {
			return err
		}
		raw, err := tx.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) }); err != nil {
			return err
		}
		return serr
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const writes = 10
	msg := make([]byte, 8*1000)
	for i := range msg {
		msg[i] = byte(i/1000 + 1)
	}
	for range writes {
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := 0
	buf := make([]byte, 2000)
	_ = rx.SetReadDeadline(time.Now().Add(2 * time.Second))
	for got < writes*8 {
		n, err := rx.Read(buf)
		if err != nil {
			break
		}
		if n == 1000 && bytes.Count(buf[:n], buf[:1]) == n {
			got++
		}
	}
	if got != writes*8 {
		t.Errorf("h2 received %d of %d datagrams h1 sent as GSO super-packets", got, writes*8)
	}
}

// TestSessionTunnelBothBackends: the soft dataplane's session tunnel
// steps on single frames give the eBPF dataplane's bytes. The source
// (ECT(0) inner packet, one that does not fit): the same tunnel frame
// and the same refusal. The sink, given the frame as it arrives: the soft
// switch takes the tunnel to its tunnel-address and rewrites the outer
// destination itself (the eBPF program under test starts at egress, so
// its frame is rewritten as intd_ingress does), and both return the
// original packet, CE of the tunnel copied to an ECN-capable one only.
func TestSessionTunnelBothBackends(t *testing.T) {
	sess := sai.DefaultIntSessionAttrs()
	sess.Instructions = detInst
	sess.Encapsulation, sess.TunnelDestination = sai.SessionEncapVXLANGPE, netip.MustParseAddr("10.0.23.2")
	src := nodes(t, setup{sess: &sess, match: port80(), mtu: 1500,
		dt: func(a *sai.DTelAttrs) { a.TunnelAddress = netip.MustParseAddr("10.0.12.1") }})
	orig := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, []byte("inside the tunnel"))
	setTOS(orig, 14, 0x02)
	big := tcpFrame("10.0.1.1", "10.0.2.1", 1234, 80, 0, make([]byte, 1500-40-40))
	var tunnelled []byte
	for _, frame := range [][]byte{orig, big} {
		var outs [2][]byte
		for i, n := range src {
			outs[i] = n.process(t, bytes.Clone(frame))
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("source, %d-byte frame:\n soft %x\n eBPF %x", len(frame), outs[0], outs[1])
		}
		if len(frame) == len(orig) {
			tunnelled = outs[0]
		}
	}
	if in, hops := tunnelFrame(tunnelled); in < 0 || hops != 1 || !bytes.Equal(tunnelled[in:], orig[14:]) {
		t.Fatalf("source: %x is not the original in the tunnel", tunnelled)
	}
	for i, n := range src {
		st, _ := n.Stats(context.Background())
		for _, s := range st.IntSessions {
			if s.PacketsInitiated != 1 || s.NotInitiatedNoRoom != 1 {
				t.Errorf("%s source: session stats %+v, want 1 initiated, 1 without room", []string{"soft", "eBPF"}[i], s)
			}
		}
	}

	sink := nodes(t, setup{sink: true, dt: func(a *sai.DTelAttrs) { a.TunnelAddress = netip.MustParseAddr("10.0.23.2") }})
	in, _ := tunnelFrame(tunnelled)
	ce := bytes.Clone(orig)
	setTOS(ce, 14, 0x03)
	notECT := bytes.Clone(tunnelled)
	setTOS(notECT, in, 0)
	plain := bytes.Clone(orig)
	setTOS(plain, 14, 0)
	for _, c := range []struct {
		name     string
		f        []byte
		outerTOS byte
		want     []byte
	}{{"ECT(0)", tunnelled, 0x02, orig}, {"tunnel CE", tunnelled, 0x03, ce}, {"tunnel CE, inner not ECN-capable", notECT, 0x03, plain}} {
		for i, n := range sink {
			f := bytes.Clone(c.f)
			setTOS(f, 14, c.outerTOS)
			if i == 1 {
				copy(f[30:34], f[in+16:in+20]) // intd_ingress: the inner destination
				setTOS(f, 14, c.outerTOS)
			}
			if got := n.process(t, f); !bytes.Equal(got, c.want) {
				t.Errorf("%s sink, %s: %x\nwant %x", n.name(), c.name, got, c.want)
			}
		}
	}
}

package report

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"golang.org/x/sys/unix"
)

// The report packets' UDP source port: the kernel's by default, one fixed
// port, or the flow's entropy port in a range, with a packet coalescing
// reports of one source port only.
func TestSourcePortModes(t *testing.T) {
	a, b := newFrame(1, []uint32{1}, []uint32{1}), newFrame(2, []uint32{1}, []uint32{1})
	// Two flows whose entropy ports differ in 1000..1999.
	for i := 3; a.flow.EntropyPortIn(1000, 1999) == b.flow.EntropyPortIn(1000, 1999); i++ {
		b = newFrame(i, []uint32{1}, []uint32{1})
	}
	for _, tc := range []struct {
		name          string
		port, lo, hi  uint16
		wantA, wantB  uint16
		wantCoalesced []int // reports per packet
	}{
		{"kernel", 0, 0, 0, 0, 0, []int{5}},
		{"fixed", 4789, 0, 0, 4789, 4789, []int{5}},
		{"flow-hash", 0, 1000, 1999, a.flow.EntropyPortIn(1000, 1999), b.flow.EntropyPortIn(1000, 1999), []int{3, 2}},
		{"flow-hash-one-port", 0, 7000, 7000, 7000, 7000, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var capt Capture
			cfg := baseConfig(8)
			cfg.Sessions[0].SrcPort, cfg.Sessions[0].SrcPortMin, cfg.Sessions[0].SrcPortMax = tc.port, tc.lo, tc.hi
			cfg.Sessions[0].MaxDelay = time.Second
			p, err := New(cfg, Options{Sender: &capt, TickInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			var ev Event
			for i, f := range []*testFrame{a, a, a, b, b} {
				f.event(&ev, int64(i), 10)
				ev.ReportAll = true
				p.Report(&ev)
			}
			p.Close()
			pkts := capt.Packets()
			var got []int
			for _, pk := range pkts {
				got = append(got, pk.Reports)
			}
			if len(got) != len(tc.wantCoalesced) {
				t.Fatalf("%d packets of %v reports, want %v", len(got), got, tc.wantCoalesced)
			}
			for i, pk := range pkts {
				want := tc.wantA
				if i > 0 {
					want = tc.wantB
				}
				if pk.SrcPort != want || pk.Reports != tc.wantCoalesced[i] {
					t.Errorf("packet %d: source port %d with %d reports, want %d with %d", i, pk.SrcPort, pk.Reports, want, tc.wantCoalesced[i])
				}
			}
		})
	}
}

// The entropy port of the default range is the NPT 2 entropy port, and
// every range holds its ports.
func TestEntropyPortIn(t *testing.T) {
	for i := range 2000 {
		k := flowKey(i)
		if got, want := k.EntropyPortIn(49152, 65535), k.EntropyPort(); got != want {
			t.Fatalf("flow %d: %d in the dynamic range, EntropyPort %d", i, got, want)
		}
		lo := uint16(1 + i*31)
		hi := lo + uint16(i%7)
		if p := k.EntropyPortIn(lo, hi); p < lo || p > hi {
			t.Fatalf("flow %d: port %d outside %d..%d", i, p, lo, hi)
		}
		if p := k.EntropyPortIn(1, 65535); p == 0 {
			t.Fatalf("flow %d: port 0", i)
		}
	}
}

type noSourcePorts struct{ Capture }

func (*noSourcePorts) SourcePorts(bool) error { return errors.New("no raw socket") }

// A sender that cannot choose source ports makes Configure refuse a session
// that asks for them, and keep the configuration it had.
func TestSourcePortRefused(t *testing.T) {
	snd := &noSourcePorts{}
	p, err := New(baseConfig(1), Options{Sender: snd, TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg := baseConfig(1)
	cfg.Sessions[0].SrcPortMin, cfg.Sessions[0].SrcPortMax = 1000, 2000
	if err := p.Configure(cfg); err == nil || !strings.Contains(err.Error(), "no raw socket") {
		t.Fatalf("Configure with flow-hash source ports: %v", err)
	}
	cfg.Sessions[0].SrcPortMin, cfg.Sessions[0].SrcPortMax = 3000, 2000
	if err := p.Configure(cfg); err == nil || !strings.Contains(err.Error(), "range 3000..2000 is empty") {
		t.Fatalf("Configure with an empty range: %v", err)
	}
}

// Packets with a source port leave through the raw socket: a UDP socket
// receives them (so the kernel found the checksum right) from that port,
// with the payload and DSCP; one sent to a closed port is refused.
func TestRawSourcePort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raw sockets need CAP_NET_RAW: run as root")
	}
	for _, fam := range []string{"127.0.0.1", "::1"} {
		ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(fam)})
		if err != nil {
			t.Skip("no loopback UDP:", err)
		}
		v6 := fam == "::1"
		rc, _ := ln.SyscallConn()
		rc.Control(func(fd uintptr) {
			if v6 {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
			} else {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			}
		})
		dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
		snd := NewUDPSender()
		if err := snd.SourcePorts(v6); err != nil {
			t.Fatal(err)
		}
		payload := []byte("group header + reports, 27b")
		for _, port := range []uint16{40000, 1234} {
			if err := snd.Send(&Packet{Src: netip.MustParseAddr(fam), Dst: dst, DSCP: 46, SrcPort: port, Seq: 1, Payload: payload}); err != nil {
				t.Fatalf("%s: %v", fam, err)
			}
			buf, oob := make([]byte, 2048), make([]byte, 256)
			ln.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, oobn, _, from, err := ln.ReadMsgUDPAddrPort(buf, oob)
			if err != nil {
				t.Fatalf("%s port %d: %v", fam, port, err)
			}
			if string(buf[:n]) != string(payload) || from.Port() != port || from.Addr().Unmap() != netip.MustParseAddr(fam) {
				t.Errorf("%s: %q from %v, want %q from port %d", fam, buf[:n], from, payload, port)
			}
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			tos := -1
			for _, m := range msgs {
				if len(m.Data) > 0 && (m.Header.Type == unix.IP_TOS || m.Header.Type == unix.IPV6_TCLASS) {
					tos = int(m.Data[0])
				}
			}
			if tos>>2 != 46 {
				t.Errorf("%s: traffic class %#x, want DSCP 46", fam, tos)
			}
		}
		closed := dst
		ln.Close()
		for i := uint32(0); i < 3; i++ {
			snd.Send(&Packet{Src: netip.MustParseAddr(fam), Dst: closed, SrcPort: 40000, Payload: groupHeaderWithSeq(10 + i)})
			time.Sleep(20 * time.Millisecond)
		}
		var refused []uint32
		snd.Refused(closed, func(seq uint32) { refused = append(refused, seq) })
		t.Logf("%s: refused %v", fam, refused)
		if len(refused) < 2 || refused[0] != 10 {
			t.Errorf("%s: refused sequence numbers %v, want 10, 11 (12's error is read by the next send)", fam, refused)
		}
		snd.Close()
	}
}

func groupHeaderWithSeq(seq uint32) []byte {
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, Seq: seq, NodeID: 1})
	return b
}

// A packet, from the kernel's or a chosen source port, allocates nothing
// once the collector's socket state exists (reading the ICMP error queue
// included).
func TestRawSourcePortAllocs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raw sockets need CAP_NET_RAW: run as root")
	}
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback UDP:", err)
	}
	defer ln.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := ln.Read(buf); err != nil {
				return
			}
		}
	}()
	snd := NewUDPSender()
	defer snd.Close()
	for _, port := range []uint16{0, 40000} {
		pkt := &Packet{Src: netip.MustParseAddr("127.0.0.1"), Dst: ln.LocalAddr().(*net.UDPAddr).AddrPort(), SrcPort: port,
			Payload: groupHeaderWithSeq(1)}
		if err := snd.Send(pkt); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { snd.Send(pkt) }); n != 0 {
			t.Errorf("source port %d: %v allocations per packet", port, n)
		}
	}
}

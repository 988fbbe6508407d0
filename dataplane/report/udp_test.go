package report

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
	"golang.org/x/sys/unix"
)

// TestUDPLoopback sends reports over a real UDP socket to 127.0.0.1 and
// checks the payload, the DSCP (IP_RECVTOS) and that DF is requested.
func TestUDPLoopback(t *testing.T) {
	ln, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback UDP:", err)
	}
	defer ln.Close()
	rc, _ := ln.SyscallConn()
	recvTOS := true
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) != nil {
			recvTOS = false
		}
	})
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, src := range []string{"127.0.0.1", "192.0.2.1"} { // local, then not local
		snd := NewUDPSender()
		cfg := baseConfig(4)
		cfg.Sessions[0].Src = netip.MustParseAddr(src)
		cfg.Sessions[0].Collectors = []Collector{{dst}}
		cfg.Events[spec.EventFlowReportAllPackets] = Route{Session: "s", DSCP: 46}
		p, err := New(cfg, Options{Sender: snd, TickInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		f := newFrame(1, []uint32{1}, []uint32{1})
		var ev Event
		for i := 0; i < 4; i++ {
			f.event(&ev, time.Now().UnixNano(), 10)
			ev.ReportAll = true
			p.Report(&ev)
		}
		buf, oob := make([]byte, 2048), make([]byte, 256)
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, oobn, _, from, err := ln.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			t.Fatalf("src %s: %v", src, err)
		}
		g, rr, err := wire.NewReportReader(buf[:n])
		var r wire.Report
		cnt := 0
		for rr.Next(&r) {
			cnt++
		}
		if err != nil || cnt != 4 || g.NodeID != 99 {
			t.Errorf("src %s: %d reports, group %+v, err %v", src, cnt, g, err)
		}
		if src == "127.0.0.1" && (from.Addr() != netip.MustParseAddr(src) || snd.NotLocal(cfg.Sessions[0].Src)) {
			t.Errorf("sent from %v", from)
		}
		if src == "192.0.2.1" && !snd.NotLocal(cfg.Sessions[0].Src) {
			t.Errorf("non-local source not noted")
		}
		if recvTOS {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			found := false
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) > 0 {
					found = true
					if m.Data[0]>>2 != 46 {
						t.Errorf("DSCP %d, want 46", m.Data[0]>>2)
					}
				}
			}
			if err != nil || !found {
				t.Logf("no IP_TOS control message (%v)", err)
			}
		}
		// DF: the socket does path MTU discovery.
		snd.mu.Lock()
		for _, c := range snd.conns {
			crc, _ := c.SyscallConn()
			crc.Control(func(fd uintptr) {
				v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER)
				if err != nil || v != unix.IP_PMTUDISC_DO {
					t.Errorf("IP_MTU_DISCOVER %d %v", v, err)
				}
			})
		}
		snd.mu.Unlock()
		p.Close()
		snd.Close()
	}
}

// TestUDPCollectorDown sends reports to a loopback port nobody listens
// on: every packet is refused (ICMP port unreachable) and must count as a
// send error, none as sent, although the connected socket only fails
// every other write.
func TestUDPCollectorDown(t *testing.T) {
	for _, fam := range []string{"127.0.0.1", "::1"} {
		ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(fam)})
		if err != nil {
			t.Skip("no loopback UDP:", err)
		}
		dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
		ln.Close() // the port is now closed
		snd := NewUDPSender()
		p, err := New(udpConfig(1, fam, dst), Options{Sender: snd, TickInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		f := newFrame(1, []uint32{1}, []uint32{1})
		var ev Event
		const n = 40
		for i := 0; i < n; i++ {
			f.event(&ev, int64(i), 10)
			ev.ReportAll = true
			p.Report(&ev)
			p.Flush()
			// Let the worker send and the ICMP error come back.
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				c := p.Stats().Sessions["s"].Collectors[0]
				if c.Packets+c.SendErrors >= uint64(i+1) && c.Queued == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(time.Millisecond)
		}
		// One more send reads the last error.
		f.event(&ev, n, 10)
		ev.ReportAll = true
		p.Report(&ev)
		p.Close()
		snd.Close()
		st := p.Stats()
		c := st.Sessions["s"].Collectors[0]
		tot := st.ByType[spec.EventFlowReportAllPackets]
		// The last packet's error may still be on its way.
		if c.Packets > 1 || c.SendErrors < n || c.Refused == 0 || tot.Sent > 1 || tot.Dropped < n {
			t.Errorf("%s: collector %+v, reports %+v: want every packet a send error", fam, c, tot)
		}
	}
}

// TestUDPIPv6PathMTU: reports reach an IPv6 collector over a real socket;
// with the session's path MTU at 9000 a 4000-byte packet travels whole
// (a 1500-byte path cuts it to fit).
func TestUDPIPv6PathMTU(t *testing.T) {
	ln, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skip("no IPv6 loopback UDP:", err)
	}
	defer ln.Close()
	dst := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, c := range []struct{ mtu, path int }{{9000, 9000}, {0, 1500}} {
		snd := NewUDPSender()
		cfg := baseConfig(1)
		cfg.Sessions[0].Src, cfg.Sessions[0].Collectors = netip.IPv6Loopback(), []Collector{{dst}}
		cfg.Sessions[0].MTU, cfg.Sessions[0].TruncateSize = c.mtu, 9000
		cfg.Events[spec.EventFlowReportAllPackets] = Route{Session: "s"}
		p, err := New(cfg, Options{Sender: snd, TickInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		f := newFrame(1, []uint32{1}, []uint32{1})
		var ev Event
		f.event(&ev, time.Now().UnixNano(), 10)
		ev.ReportAll = true
		ev.Packet = append(ev.Packet[:len(ev.Packet):len(ev.Packet)], make([]byte, 4000-len(ev.Packet))...)
		p.Report(&ev)
		buf := make([]byte, 65536)
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := ln.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("MTU %d: %v", c.mtu, err)
		}
		_, rr, err := wire.NewReportReader(buf[:n])
		var r wire.Report
		if err != nil || !rr.Next(&r) {
			t.Fatalf("MTU %d: undecodable report: %v", c.mtu, err)
		}
		// The datagram and its IPv6 and UDP headers fit the path.
		whole := len(r.Inner) == 4000
		if from.Addr() != netip.IPv6Loopback() || n+40+8 > c.path || whole != (c.mtu == 9000) {
			t.Errorf("MTU %d: from %v, %d-byte datagram with a %d-byte inner packet", c.mtu, from, n, len(r.Inner))
		}
		t.Logf("path MTU %d: %d-byte datagram, inner %d bytes", c.mtu, n, len(r.Inner))
		p.Close()
		snd.Close()
	}
}

package ebpf

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// edgeConfig is a router of a deployed domain: DSCP marking 23/63 with
// remark-dscp 8, the host-facing interface sink (none for ""), a watch-all
// INT entry on the source, malformed INT dropped when drop is set, drop
// reports, reports to the collector 10.0.9.2:32766.
func edgeConfig(node int, sink string, watchAll, drop bool) string {
	ifs, wl, action := "", "", "FORWARD"
	if sink != "" {
		ifs = fmt.Sprintf(`"interfaces": {"interface": [{"name": %q, "config": {"name": %q, "int-sink": true}}]},`, sink, sink)
	}
	if watchAll {
		wl = `"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10},
			"match": {"config": {"source-prefix": "0.0.0.0/0"}},
			"actions": {"config": {"flow-op": "INT", "int-session": "default", "sample-percent": 100}}}]}},`
	}
	if drop {
		action = "DROP"
	}
	return fmt.Sprintf(`{"intd-int:int": {
	"node": {"config": {"enabled": true, "node-id": %d, "int-endpoint": true, "int-transit": true, "drop-report": true,
		"malformed-int-action": %q}},
	"marking": {"config": {"l4-marking": "DSCP", "dscp-value": 23, "dscp-mask": 63, "remark-dscp": 8,
		"vxlan-gpe-next-protocol": 0, "geneve-option-class": 0}},
	%s %s
	"int-sessions": {"int-session": [{"name": "default", "config": {"name": "default", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"],
		"remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "collector",
		"config": {"name": "collector", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0"},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "DROP_REPORT", "config": {"type": "DROP_REPORT", "report-session": "collector"}}]}
}}`, node, action, ifs, wl)
}

// tosConn receives UDP datagrams with their TOS byte (IP_RECVTOS).
type tosConn struct{ c *net.UDPConn }

func (l *lab) tosListen(t *testing.T, ns, addr string) *tosConn {
	t.Helper()
	var c *net.UDPConn
	if err := l.in(ns, func() (err error) {
		a, _ := net.ResolveUDPAddr("udp4", addr)
		c, err = net.ListenUDP("udp4", a)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) }); err != nil || serr != nil {
		t.Fatalf("IP_RECVTOS: %v %v", err, serr)
	}
	return &tosConn{c}
}

// next returns the next datagram and its TOS, or nil after a second.
func (c *tosConn) next() ([]byte, int) {
	buf, oob := make([]byte, 2048), make([]byte, 128)
	_ = c.c.SetReadDeadline(time.Now().Add(time.Second))
	n, oobn, _, _, err := c.c.ReadMsgUDP(buf, oob)
	if err != nil {
		return nil, 0
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) > 0 {
			return buf[:n], int(m.Data[0])
		}
	}
	return buf[:n], -1
}

// sendTOS sends payload from namespace ns to addr with the TOS byte tos.
func (l *lab) sendTOS(t *testing.T, ns, addr string, tos int, payload []byte) {
	t.Helper()
	if err := l.in(ns, func() error {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := ipv4.NewConn(c).SetTOS(tos); err != nil {
			return err
		}
		_, err = c.Write(payload)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// synMSS returns the MSS option of the first captured TCP segment with
// flags (SYN 0x02, SYN-ACK 0x12) between the ports, or 0.
func synMSS(frames [][]byte, flags uint8, sport, dport uint16) uint16 {
	for _, f := range frames {
		var p wire.Packet
		if (&wire.Parser{}).Parse(f, &p) != nil || p.Proto != wire.ProtoTCP || p.L4 < 0 ||
			f[p.L4+13] != flags || p.Flow.SrcPort != sport || p.Flow.DstPort != dport {
			continue
		}
		return wiretest.MSS(f[p.L4+20 : p.L4+p.L4HeaderLen])
	}
	return 0
}

// TestEdgeEndToEnd runs a deployed domain in namespaces (h1 - r1 - r2 -
// r3 - h2 with kernel forwarding; r1-h1 and r3-h2 sink ports; r1 watches
// everything with INT; r2 drops malformed INT): user datagrams marked EF,
// AF41 and CS6 arrive with their DSCP, a colliding one re-marked; packets
// the routers send themselves are never taken for INT; marked garbage
// from a fabric port is forwarded by r3 and dropped by r2, counted once
// with one drop report; a report to the collector gets no INT; TCP's SYN
// and SYN-ACK carry a clamped MSS, and every full-sized data segment
// (TSO off at h1) gets INT.
func TestEdgeEndToEnd(t *testing.T) {
	l := newLab(t)
	rec2 := &recorder{}
	r1 := l.router(t, "r1", []string{"r1-h1", "r1-r2"}, nil, edgeConfig(1, "r1-h1", true, false))
	r2 := l.router(t, "r2", []string{"r2-r1", "r2-r3"}, rec2, edgeConfig(2, "", false, true))
	r3 := l.router(t, "r3", []string{"r3-r2", "r3-h2", "r3-col"}, nil, edgeConfig(3, "r3-h2", false, false))

	// User datagrams h1 -> h2, watched at r1, INT stripped at r3.
	h2 := l.tosListen(t, "h2", "10.0.2.2:7000")
	for _, c := range []struct {
		name     string
		tos, got int
	}{{"EF", 46 << 2, 46 << 2}, {"AF41", 34<<2 | 1, 34<<2 | 1}, {"CS6", 48 << 2, 48 << 2}, {"colliding", 23<<2 | 2, 8<<2 | 2}} {
		msg := []byte("user datagram " + c.name)
		l.sendTOS(t, "h1", "10.0.2.2:7000", c.tos, msg)
		got, tos := h2.next()
		if !bytes.Equal(got, msg) || tos != c.got {
			t.Errorf("%s: h2 got %q with TOS %#x, want %q with %#x", c.name, got, tos, msg, c.got)
		}
	}
	// Sent by the routers themselves, marked, not INT: r1's goes into the
	// domain (re-marked), r3's leaves it (untouched).
	garbage := []byte{0x70, 0x03, 0x00, 0x00, 'n', 'o', 't', ' ', 'I', 'N', 'T'}
	for _, c := range []struct {
		ns  string
		tos int
	}{{"r1", 8 << 2}, {"r3", 23 << 2}} {
		l.sendTOS(t, c.ns, "10.0.2.2:7000", 23<<2, garbage)
		got, tos := h2.next()
		if !bytes.Equal(got, garbage) || tos != c.tos {
			t.Errorf("marked datagram from %s: h2 got %x with TOS %#x, want %x with %#x", c.ns, got, tos, garbage, c.tos)
		}
	}
	// Marked garbage into r3 from the collector's side (a fabric port):
	// r3 forwards it, r2 drops it.
	h1 := l.tosListen(t, "h1", "10.0.1.2:7001")
	l.sendTOS(t, "col", "10.0.1.2:7001", 23<<2, garbage)
	if got, _ := h1.next(); got != nil {
		t.Errorf("h1 got the marked garbage r2 should drop: %x", got)
	}
	// A report to the collector under r1's watch-all entry: no INT.
	col := l.tosListen(t, "col", "10.0.9.2:32766")
	report1 := []byte("a telemetry report from a node behind h1")
	l.sendTOS(t, "h1", "10.0.9.2:32766", 0, report1)
	if got, _ := col.next(); !bytes.Equal(got, report1) {
		t.Errorf("collector got %x, want the report as sent %x", got, report1)
	}

	// TCP h1 -> h2 with TSO/GSO off at h1: full-sized segments.
	if err := l.in("h1", func() error {
		return ethtool.SetFeatures("h1-r1", func(f string) bool { return strings.HasSuffix(f, "-segmentation") }, false)
	}); err != nil {
		t.Fatal(err)
	}
	atH2, atH1, atR2 := l.capture(t, "h2", "h2-r3"), l.capture(t, "h1", "h1-r1"), l.capture(t, "r2", "r2-r1")
	var ln net.Listener
	if err := l.in("h2", func() (err error) {
		ln, err = net.Listen("tcp4", "10.0.2.2:5001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	recv := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recv <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		recv <- b
	}()
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	var sport uint16
	if err := l.in("h1", func() error {
		c, err := net.DialTimeout("tcp4", "10.0.2.2:5001", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		sport = uint16(c.LocalAddr().(*net.TCPAddr).Port)
		_, err = c.Write(data)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-recv:
		if !bytes.Equal(got, data) {
			t.Fatalf("h2 got %d bytes, not the %d sent", len(got), len(data))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("TCP transfer did not finish")
	}
	time.Sleep(200 * time.Millisecond)
	// 1500 - 20 - 20 - (shim 4 + header 12 + 8 hops of 3 words).
	const mss = 1500 - 20 - 20 - (4 + 12 + 8*3*4)
	if m := synMSS(atH2.got(), 0x02, sport, 5001); m != mss {
		t.Errorf("SYN at h2: MSS %d, want %d", m, mss)
	}
	if m := synMSS(atH1.got(), 0x12, 5001, sport); m != mss {
		t.Errorf("SYN-ACK at h1: MSS %d, want %d", m, mss)
	}
	pr := &wire.Parser{DSCP: 23, DSCPMask: 63}
	seg, withINT := 0, 0
	for _, f := range atR2.got() {
		var p wire.Packet
		if pr.Parse(f, &p) != nil || p.Flow.Proto != wire.ProtoTCP || p.Flow.SrcPort != sport || p.End-p.Next <= 0 && p.INT >= 0 {
			continue
		}
		if p.INT < 0 && p.End-(p.L4+p.L4HeaderLen) == 0 {
			continue // no payload
		}
		seg++
		if p.INT >= 0 {
			withINT++
		}
	}
	t.Logf("r1 -> r2: %d of %d data segments carry INT", withINT, seg)
	if seg < len(data)/mss || withINT != seg {
		t.Errorf("r1 -> r2: %d of %d data segments carry INT", withINT, seg)
	}

	// Counters.
	st1, _ := r1.Stats(t.Context())
	st2, _ := r2.Stats(t.Context())
	st3, _ := r3.Stats(t.Context())
	if n := st1.Interfaces["r1-h1"].DSCPRemarked; n != 1 || st1.Node.DSCPRemarked != 2 {
		t.Errorf("r1: %d re-marked from h1 (want 1), %d in all (want 2: h1's and r1's own)", n, st1.Node.DSCPRemarked)
	}
	if st3.Interfaces["r3-col"].IntMalformedForward != 1 || st3.Node.IntMalformedDrop != 0 {
		t.Errorf("r3: %+v", st3.Interfaces["r3-col"])
	}
	if st2.Node.IntMalformedDrop != 1 || st2.Interfaces["r2-r3"].IntMalformedDrop != 1 {
		t.Errorf("r2: %d malformed drops (r2-r3 %d), want 1", st2.Node.IntMalformedDrop, st2.Interfaces["r2-r3"].IntMalformedDrop)
	}
	if st2.Drops[spec.DropUnknown] != 1 || st2.Drops[spec.DropACLDeny] != 0 {
		t.Errorf("r2: drops %v: the malformed drop counts once, as reason 0", st2.Drops)
	}
	var drops []report.Event
	for _, ev := range rec2.wait(t, 1) {
		if ev.Kind == report.KindDrop {
			drops = append(drops, ev)
		}
	}
	if len(drops) != 1 || drops[0].DropReason != 0 || drops[0].Unwatched || drops[0].Flow.DstPort != 7001 {
		t.Errorf("r2: drop reports %+v", drops)
	}
	for i, st := range []sai.Stats{st1, st2, st3} {
		for oid, s := range st.IntSessions {
			t.Logf("r%d session %v: %+v", i+1, oid, s)
		}
	}
}

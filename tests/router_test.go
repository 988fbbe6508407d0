package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/internal/promtest"
)

// routers is h1 - r1 - r2 - h2 with the kernel forwarding on both routers
// and a collector namespace c behind r1, whose reports path crosses r1's
// INT pipeline (r2's reports cross r1 on their way):
//
//	h1 eth0 10.0.1.1/24 - p1 10.0.1.254  r1  p2 10.0.12.1/24 - p1 10.0.12.2  r2  p2 10.0.2.254 - eth0 10.0.2.1/24 h2
//	r1 p3 10.0.9.1/24 - eth0 10.0.9.2/24 c
//
// Every link has MTU 1500; hosts keep their default offloads (TSO, GSO,
// checksum offload).
type routers struct {
	*lab
	gnmi    map[string]gpb.GNMIClient
	procs   map[string]*proc
	reports *reportLog
	metrics *http.Client
}

func newRouters(t *testing.T) *routers {
	l := newLab(t)
	l.addNS("h1", "r1", "r2", "h2", "c")
	l.veth("h1", "eth0", "r1", "p1")
	l.veth("r1", "p2", "r2", "p1")
	l.veth("r2", "p2", "h2", "eth0")
	l.veth("r1", "p3", "c", "eth0")
	l.addr("h1", "eth0", "10.0.1.1/24")
	l.addr("r1", "p1", "10.0.1.254/24")
	l.addr("r1", "p2", "10.0.12.1/24")
	l.addr("r2", "p1", "10.0.12.2/24")
	l.addr("r2", "p2", "10.0.2.254/24")
	l.addr("h2", "eth0", "10.0.2.1/24")
	l.addr("r1", "p3", "10.0.9.1/24")
	l.addr("c", "eth0", "10.0.9.2/24")
	l.ip("-n", l.ns("h1"), "route", "add", "default", "via", "10.0.1.254")
	l.ip("-n", l.ns("h2"), "route", "add", "default", "via", "10.0.2.254")
	l.ip("-n", l.ns("c"), "route", "add", "default", "via", "10.0.9.1")
	l.ip("-n", l.ns("r1"), "route", "add", "10.0.2.0/24", "via", "10.0.12.2")
	l.ip("-n", l.ns("r2"), "route", "add", "10.0.1.0/24", "via", "10.0.12.1")
	l.ip("-n", l.ns("r2"), "route", "add", "10.0.9.0/24", "via", "10.0.12.1")
	for _, r := range []string{"r1", "r2"} {
		l.sh(r, "echo 1 > /proc/sys/net/ipv4/ip_forward")
	}
	return &routers{lab: l, gnmi: map[string]gpb.GNMIClient{}, procs: map[string]*proc{}, reports: &reportLog{}}
}

// start runs `intd run --dataplane dp` on both routers as an operator
// would, with no configuration, and waits for their gNMI servers.
func (r *routers) start(t *testing.T, dp string) {
	t.Helper()
	ifaces := map[string]string{"r1": "p1,p2,p3", "r2": "p1,p2"}
	for _, n := range []string{"r1", "r2"} {
		r.procs[n] = r.start1(n, dp, ifaces[n])
	}
	for _, n := range []string{"r1", "r2"} {
		r.gnmi[n] = r.gnmiUp(t, n, r.procs[n])
	}
}

func (r *routers) start1(n, dp, ifaces string) *proc {
	return r.lab.start(n, "intd", nil, "run", "--dataplane", dp, "--interfaces", ifaces, "--insecure",
		"--addr", "127.0.0.1:9339", "--save", "", "--target", n, "--state-interval", "200ms")
}

// stop ends both routers' intd with SIGTERM.
func (r *routers) stop(t *testing.T) {
	t.Helper()
	for n, p := range r.procs {
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		if code := exited(t, p, 10*time.Second); code != 0 {
			t.Errorf("%s: exit code %d after SIGTERM", n, code)
		}
	}
}

// dscpSink keeps, per sequence number, the datagrams h2 receives on a
// port and the DSCP each arrived with.
type dscpSink struct {
	mu   sync.Mutex
	got  map[uint64][][]byte
	dscp map[uint64][]uint8
	conn *net.UDPConn
}

func (r *routers) dscpSink(t *testing.T, port int) *dscpSink {
	s := &dscpSink{got: map[uint64][][]byte{}, dscp: map[uint64][]uint8{}}
	r.in("h2", func() (err error) {
		s.conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: port})
		return err
	})
	t.Cleanup(func() { s.conn.Close() })
	s.conn.SetReadBuffer(8 << 20)
	sc, _ := s.conn.SyscallConn()
	sc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) })
	go func() {
		buf, oob := make([]byte, 65536), make([]byte, 128)
		for {
			n, oobn, _, _, err := s.conn.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			if n < 8 {
				continue
			}
			tos := uint8(0xff)
			cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, c := range cms {
				if c.Header.Level == unix.IPPROTO_IP && c.Header.Type == unix.IP_TOS && len(c.Data) > 0 {
					tos = c.Data[0]
				}
			}
			seq := binary.BigEndian.Uint64(buf)
			s.mu.Lock()
			s.got[seq] = append(s.got[seq], bytes.Clone(buf[:n]))
			s.dscp[seq] = append(s.dscp[seq], tos>>2)
			s.mu.Unlock()
		}
	}()
	return s
}

// udpFlow sends datagrams from h1 (source port srcPort) to h2:dstPort
// with DSCP dscp.
func (r *routers) udpFlow(t *testing.T, srcPort, dstPort int, dscp uint8) *net.UDPConn {
	var c *net.UDPConn
	r.in("h1", func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 1, 1), Port: srcPort},
			&net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: dstPort})
		return err
	})
	t.Cleanup(func() { c.Close() })
	sc, _ := c.SyscallConn()
	sc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, int(dscp)<<2) })
	return c
}

// userClasses are the standard per-hop behaviours sent through the
// routers, and the INT marking's value a user packet may carry.
var userClasses = []struct {
	name string
	dscp uint8
}{{"EF", 46}, {"AF41", 34}, {"CS6", 48}}

const collidingDSCP = 0x17

// checkUDP sends n datagrams per class (sequence numbers base+class*n+i,
// sizes up to 1400 bytes) and checks that each arrives exactly once, byte
// for byte, with the DSCP wantDSCP gives for the class's DSCP.
func (r *routers) checkUDP(t *testing.T, classes []struct {
	name string
	dscp uint8
}, base uint64, wantDSCP func(uint8) uint8) {
	t.Helper()
	const n = 40
	sink := r.dscpSink(t, 5001)
	sent := map[uint64][]byte{}
	want := map[uint64]uint8{}
	for ci, c := range classes {
		tx := r.udpFlow(t, 41000+ci, 5001, c.dscp)
		// The first datagram of a flow may wait for the routers to
		// resolve their next hops.
		for i := range n {
			seq := base + uint64(ci*n+i)
			p := payload(seq, 16+(i*97)%1385)
			sent[seq], want[seq] = p, wantDSCP(c.dscp)
			if _, err := tx.Write(p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	eventually(t, 10*time.Second, "all datagrams at h2", func() (bool, string) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		got := 0
		for seq := range sent {
			if len(sink.got[seq]) > 0 {
				got++
			}
		}
		return got == len(sent), fmt.Sprintf("%d of %d", got, len(sent))
	})
	time.Sleep(200 * time.Millisecond) // room for duplicates
	sink.mu.Lock()
	defer sink.mu.Unlock()
	bad := 0
	for seq, p := range sent {
		ci := int(seq-base) / n
		switch {
		case len(sink.got[seq]) != 1:
			t.Errorf("%s datagram %d arrived %d times", classes[ci].name, seq, len(sink.got[seq]))
		case !bytes.Equal(sink.got[seq][0], p):
			t.Errorf("%s datagram %d: sent %d bytes, received %d different", classes[ci].name, seq, len(p), len(sink.got[seq][0]))
		case sink.dscp[seq][0] != want[seq]:
			t.Errorf("%s datagram %d arrived with DSCP %d, want %d", classes[ci].name, seq, sink.dscp[seq][0], want[seq])
		default:
			continue
		}
		if bad++; bad > 10 {
			t.Fatal("too many errors")
		}
	}
}

// tcpCapture counts, on r2's p1 (what r1 sends to r2), h1's TCP data
// segments to h2 on dstPort, and those that carry INT.
type tcpCapture struct {
	mu        sync.Mutex
	data, int int
	stop      chan struct{}
	done      chan struct{}
}

func (r *routers) captureTCP(t *testing.T, dstPort uint16) *tcpCapture {
	var port *afpacket.Port
	r.in("r2", func() (err error) { port, err = afpacket.Open("p1", afpacket.PortConfig{}); return err })
	c := &tcpCapture{stop: make(chan struct{}), done: make(chan struct{})}
	parser := &wire.Parser{DSCP: collidingDSCP, DSCPMask: 0x3f}
	var pkt wire.Packet
	seg := func(f []byte) {
		if parser.Parse(f, &pkt) != nil || pkt.L4 < 0 || pkt.Proto != 6 || pkt.Flow.Dst != h2Addr ||
			pkt.Flow.Src != h1Addr || pkt.Flow.DstPort != dstPort {
			return
		}
		data := pkt.End - (pkt.L4 + pkt.L4HeaderLen)
		if pkt.HasINT() {
			data -= pkt.Next - pkt.Shim
		}
		if data <= 0 {
			return
		}
		c.mu.Lock()
		c.data++
		if pkt.HasINT() {
			c.int++
		}
		c.mu.Unlock()
	}
	go func() {
		defer close(c.done)
		defer port.Close()
		fds := []unix.PollFd{{Fd: int32(port.Fd()), Events: unix.POLLIN}}
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			unix.Poll(fds, 20)
			for {
				k, err := port.Read()
				if err != nil || k == 0 {
					break
				}
				for i := range k {
					port.Segments(i, seg) // the wire carries segments
				}
			}
		}
	}()
	t.Cleanup(func() { c.close() })
	return c
}

func (c *tcpCapture) close() (data, withINT int) {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data, c.int
}

// checkTCP sends 2 MB from h1 (source port srcPort) to h2:dstPort and
// checks that they arrive byte for byte.
func (r *routers) checkTCP(t *testing.T, srcPort, dstPort int) {
	t.Helper()
	var ln net.Listener
	r.in("h2", func() (err error) { ln, err = net.Listen("tcp4", "10.0.2.1:"+strconv.Itoa(dstPort)); return err })
	defer ln.Close()
	data := payload(uint64(srcPort), 2<<20)
	got := receiveAll(ln, 30*time.Second)
	var c net.Conn
	r.in("h1", func() (err error) {
		c, err = (&net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(10, 0, 1, 1), Port: srcPort}}).
			Dial("tcp4", "10.0.2.1:"+strconv.Itoa(dstPort))
		return err
	})
	start := time.Now()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatalf("sending: %v", err)
	}
	c.Close()
	b := <-got
	if !bytes.Equal(b, data) {
		same := 0
		for same < min(len(b), len(data)) && b[same] == data[same] {
			same++
		}
		t.Fatalf("h2 received %d bytes, not the %d h1 sent (the first %d equal)", len(b), len(data), same)
	}
	t.Logf("2 MB over TCP in %v", time.Since(start).Round(time.Millisecond))
}

var (
	h1Addr = netip.MustParseAddr("10.0.1.1")
	h2Addr = netip.MustParseAddr("10.0.2.1")
)

// TestUnconfiguredRouters starts `intd run` with no configuration on two
// routers that forward with the kernel, for each dataplane, and checks
// that user traffic is untouched: 2 MB of TCP and UDP datagrams marked EF,
// AF41 and CS6 arrive byte for byte, once each, with their DSCP.
func TestUnconfiguredRouters(t *testing.T) {
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			r := newRouters(t)
			r.start(t, dp)
			r.checkUDP(t, userClasses, 1<<40, func(d uint8) uint8 { return d })
			r.checkTCP(t, 40100, 5002)
			r.stop(t)
		})
	}
}

// intRouterConfig is /int for router n of the INT domain r1-r2: INT-MD
// over TCP/UDP with the default DSCP marking on every packet (a
// watch-all entry), the host-facing interface a sink, reports to the
// collector in c.
func intRouterConfig(n int) []byte {
	sink := map[int]string{1: "p1", 2: "p2"}[n]
	coll := map[string]any{"address": "10.0.9.2", "port": 32766}
	src := map[int]string{1: "10.0.9.1", 2: "10.0.12.2"}[n]
	cfg := map[string]any{
		"node": map[string]any{"config": map[string]any{"enabled": true, "node-id": n, "int-endpoint": true,
			"int-transit": true}},
		"marking": map[string]any{"config": map[string]any{"l4-marking": "DSCP"}},
		"interfaces": map[string]any{"interface": []any{map[string]any{"name": sink,
			"config": map[string]any{"name": sink, "int-sink": true}}}},
		"int-sessions": map[string]any{"int-session": []any{map[string]any{"name": "md", "config": map[string]any{
			"name": "md", "mode": "INT_MD", "remaining-hop-count": 8, "instructions": []any{
				"intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
				"intd-int-metadata-semantics:METADATA_FIELD_LEVEL_1_INTERFACE_IDS",
				"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY",
				"intd-int-metadata-semantics:METADATA_FIELD_QUEUE_OCCUPANCY"}}}}},
		"report-sessions": map[string]any{"report-session": []any{map[string]any{
			"name": "collector",
			"config": map[string]any{"name": "collector", "source-address": src,
				"report-format": "TELEMETRY_REPORT_V2_0", "truncate-size": 256},
			"collectors": map[string]any{"collector": []any{map[string]any{"address": coll["address"], "port": coll["port"], "config": coll}}},
		}}},
		"events": map[string]any{"event": []any{map[string]any{"type": "FLOW_STATE",
			"config": map[string]any{"type": "FLOW_STATE", "report-session": "collector"}}}},
		"watchlist": map[string]any{"entries": map[string]any{"entry": []any{map[string]any{"sequence-id": 10,
			"config":  map[string]any{"sequence-id": 10, "description": "everything"},
			"match":   map[string]any{"config": map[string]any{"source-prefix": "0.0.0.0/0"}},
			"actions": map[string]any{"config": map[string]any{"flow-op": "INT", "int-session": "md", "sample-percent": 100}}}}}},
	}
	b, _ := json.Marshal(cfg)
	return b
}

// counter reads a node counter of router n over gNMI.
func (r *routers) counter(t *testing.T, n, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "node"}, {Name: "state"}, {Name: "counters"}, {Name: name}}}
	resp, err := r.gnmi[n].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: n}, Path: []*gpb.Path{p}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("%s: gNMI Get %s: %v", n, name, err)
	}
	for _, nt := range resp.GetNotification() {
		for _, u := range nt.GetUpdate() {
			if v := u.GetVal(); v.GetUintVal() != 0 {
				return v.GetUintVal()
			} else if j := v.GetJsonIetfVal(); len(j) > 0 {
				var s json.Number
				if json.Unmarshal(bytes.Trim(j, `"`), &s) == nil {
					x, _ := strconv.ParseUint(s.String(), 10, 64)
					return x
				}
			}
		}
	}
	return 0
}

// watchCollectorLink counts the report packets arriving at c and those
// that carry INT; the returned function stops counting and returns both.
func (r *routers) watchCollectorLink(t *testing.T) func() (reports, withINT int) {
	var port *afpacket.Port
	r.in("c", func() (err error) { port, err = afpacket.Open("eth0", afpacket.PortConfig{}); return err })
	stop, done := make(chan struct{}), make(chan struct{})
	var total, marked int
	parser := &wire.Parser{DSCP: collidingDSCP, DSCPMask: 0x3f}
	var pkt wire.Packet
	go func() {
		defer close(done)
		defer port.Close()
		fds := []unix.PollFd{{Fd: int32(port.Fd()), Events: unix.POLLIN}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.Poll(fds, 20)
			for {
				k, err := port.Read()
				if err != nil || k == 0 {
					break
				}
				for i := range k {
					port.Segments(i, func(f []byte) {
						if parser.Parse(f, &pkt) != nil || pkt.Proto != 17 || pkt.L4 < 0 {
							return
						}
						if binary.BigEndian.Uint16(f[pkt.L4+2:]) != 32766 && !(pkt.HasINT() && pkt.Flow.DstPort == 32766) {
							return
						}
						total++
						if pkt.HasINT() {
							marked++
						}
					})
				}
			}
		}
	}()
	var once sync.Once
	finish := func() (int, int) {
		once.Do(func() { close(stop); <-done })
		return total, marked
	}
	t.Cleanup(func() { finish() })
	return finish
}

// TestINTRouters configures INT across r1 and r2 over gNMI (DSCP marking
// with its default value, a watch-all entry, the host-facing interfaces
// as sinks, reports to an intcollector in c behind r1) for each
// dataplane, and checks that user traffic still arrives byte for byte,
// once; that user packets whose DSCP collides with the marking are
// re-marked (to 0) and counted; that bulk TCP at MTU 1500 carries INT on
// at least 99 % of its data segments between r1 and r2; that the
// collector sees the path r1, r2 for every flow; and that no report
// packet carries INT.
func TestINTRouters(t *testing.T) {
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			r := newRouters(t)
			r.lab.start("c", "intcollector", r.reports.line, "--listen", "10.0.9.2:32766", "--metrics", "127.0.0.1:23266",
				"--gnmi", "127.0.0.1:23267", "--state-dir", t.TempDir(), "--flow-metrics", "100", "--json", "--int-dscp", strconv.Itoa(collidingDSCP), "--int-dscp-mask", "63")
			r.metrics = r.httpClient("c")
			reportsSeen := r.watchCollectorLink(t)
			r.start(t, dp)
			for i, n := range []string{"r1", "r2"} {
				gnmiReplaceInt(t, r.gnmi[n], n, intRouterConfig(i+1))
			}

			classes := append(userClasses[:len(userClasses):len(userClasses)], struct {
				name string
				dscp uint8
			}{"colliding", collidingDSCP})
			t.Run("udp", func(t *testing.T) {
				before := r.counter(t, "r1", "dscp-remarked")
				r.checkUDP(t, classes, 1<<41, func(d uint8) uint8 {
					if d == collidingDSCP {
						return 0 // remark-dscp's default
					}
					return d
				})
				if got := r.counter(t, "r1", "dscp-remarked") - before; got < 40 {
					t.Errorf("r1 counted %d packets re-marked, want the 40 sent with DSCP %#x", got, collidingDSCP)
				}
			})
			t.Run("tcp", func(t *testing.T) {
				capt := r.captureTCP(t, 5003)
				r.checkTCP(t, 40200, 5003)
				time.Sleep(100 * time.Millisecond)
				data, withINT := capt.close()
				t.Logf("r1 -> r2: %d TCP data segments, %d with INT (%.2f %%)", data, withINT, 100*float64(withINT)/float64(max(data, 1)))
				if data < 1400 || withINT*100 < data*99 {
					t.Errorf("%d of %d TCP data segments carry INT between r1 and r2, want at least 99 %%", withINT, data)
				}
			})
			t.Run("collector paths", func(t *testing.T) {
				type flow struct {
					proto        string
					sport, dport int
				}
				flows := []flow{{"tcp", 40200, 5003}}
				for ci := range classes {
					flows = append(flows, flow{"udp", 41000 + ci, 5001})
				}
				eventually(t, 10*time.Second, "path r1, r2 of every flow at the collector", func() (bool, string) {
					m := r.scrape()
					for _, f := range flows {
						for hop, node := range []int{1, 2} {
							labels := flowLabels(f.proto, f.sport, f.dport, "hop", strconv.Itoa(hop), "node_id", strconv.Itoa(node))
							if _, ok := promtest.Value(m, "intcollector_flow_hop_max_latency_seconds", labels); !ok {
								return false, fmt.Sprintf("flow %v: hop %d (r%d) missing", f, hop, node)
							}
						}
					}
					return true, ""
				})
			})
			t.Run("no INT in reports", func(t *testing.T) {
				total, marked := reportsSeen()
				nested := 0
				r.reports.mu.Lock()
				for _, rep := range r.reports.reports {
					for _, x := range rep.Reports {
						if x.Inner != nil && x.Inner.DstPort != nil && *x.Inner.DstPort == 32766 {
							nested++
						}
					}
				}
				r.reports.mu.Unlock()
				t.Logf("%d report packets at c, %d with INT; %d reports about report packets", total, marked, nested)
				if total == 0 || marked != 0 || nested != 0 {
					t.Errorf("%d of %d report packets carry INT, %d reports are about report packets; want none", marked, total, nested)
				}
			})
			r.stop(t)
		})
	}
}

func (r *routers) scrape() string { return scrapeCollector(r.metrics) }

package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/dataplane/afpacket"
)

// dataplaneNames are the dataplanes `intd run` offers on a real host.
var dataplaneNames = []string{"ebpf", "soft"}

// routerLab is h1 - r - h2 with a collector namespace c behind r's
// management interface m0 (not given to intd):
//
//	h1 eth0 10.0.1.1/24 - p1 10.0.1.254  r  p2 10.0.2.254 - eth0 10.0.2.1/24 h2
//	r m0 10.0.9.1/24 - eth0 10.0.9.2/24 c
func routerLab(t *testing.T) *lab {
	l := routerLinks(t)
	l.addr("h1", "eth0", "10.0.1.1/24")
	l.addr("r", "p1", "10.0.1.254/24")
	l.addr("r", "p2", "10.0.2.254/24")
	l.addr("h2", "eth0", "10.0.2.1/24")
	l.addr("r", "m0", "10.0.9.1/24")
	l.addr("c", "eth0", "10.0.9.2/24")
	l.ip("-n", l.ns("h1"), "route", "add", "default", "via", "10.0.1.254")
	l.ip("-n", l.ns("h2"), "route", "add", "default", "via", "10.0.2.254")
	l.ip("-n", l.ns("c"), "route", "add", "default", "via", "10.0.9.1")
	l.sh("r", "echo 1 > /proc/sys/net/ipv4/ip_forward")
	return l
}

// routerLinks is routerLab's namespaces and links, without addresses.
func routerLinks(t *testing.T) *lab {
	l := newLab(t)
	l.addNS("h1", "r", "h2", "c")
	l.veth("h1", "eth0", "r", "p1")
	l.veth("r", "p2", "h2", "eth0")
	l.veth("r", "m0", "c", "eth0")
	return l
}

// intdRun starts `intd run` in namespace n with dataplane dp on ifaces,
// gNMI on 127.0.0.1:9339 inside n.
func (l *lab) intdRun(n, dp, ifaces string) *proc {
	return l.start(n, "intd", nil, "run", "--dataplane", dp, "--interfaces", ifaces, "--insecure",
		"--addr", "127.0.0.1:9339", "--save", "", "--target", n, "--node-id", "1", "--state-interval", "200ms")
}

// gnmiUp returns a gNMI client of the intd in namespace n once it answers.
func (l *lab) gnmiUp(t *testing.T, n string, p *proc) gpb.GNMIClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:9339", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(l.dialer(n)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := gpb.NewGNMIClient(conn)
	eventually(t, 30*time.Second, n+" gNMI up", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("intd in %s exited: %v\n%s", n, p.cmd.ProcessState, readLog(p))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Capabilities(ctx, &gpb.CapabilityRequest{})
		return err == nil, fmt.Sprint(err)
	})
	return c
}

func readLog(p *proc) string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// exited waits up to d for p to exit and returns its exit code.
func exited(t *testing.T, p *proc, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s still running after %v\n%s", p.name, d, readLog(p))
		return 0
	}
}

// hostState lists what intd may add to namespace n: GSO detour devices,
// tc filters and clsact qdiscs, policy routing rules of priority
// afpacket.RulePriority.
func (l *lab) hostState(t *testing.T, n string) []string {
	t.Helper()
	h, err := netlink.NewHandleAt(l.handle(n))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, lk := range links {
		name := lk.Attrs().Name
		if strings.HasPrefix(name, "intd-") {
			out = append(out, "device "+name)
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := h.FilterList(lk, parent)
			for _, f := range fs {
				desc := f.Type()
				if b, ok := f.(*netlink.BpfFilter); ok {
					desc = b.Name
				}
				out = append(out, fmt.Sprintf("%s filter %s", name, desc))
			}
		}
		qs, _ := h.QdiscList(lk)
		for _, q := range qs {
			if q.Type() == "clsact" {
				out = append(out, name+" clsact")
			}
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := h.RuleList(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Priority == afpacket.RulePriority {
				out = append(out, fmt.Sprintf("rule family %d iif %s proto %d", fam, r.IifName, r.Protocol))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRunFailsFast checks that `intd run` with an interface that does not
// exist stops within 10 s, non-zero, naming it, and leaves the host as it
// was, for both dataplanes (alone and after an interface that exists).
func TestRunFailsFast(t *testing.T) {
	l := routerLab(t)
	before := l.hostState(t, "r")
	for _, dp := range dataplaneNames {
		for _, ifaces := range []string{"nosuch0", "p1,nosuch0"} {
			t.Run(dp+" "+ifaces, func(t *testing.T) {
				start := time.Now()
				p := l.intdRun("r", dp, ifaces)
				code := exited(t, p, 10*time.Second)
				log := readLog(p)
				t.Logf("exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(log))
				if code == 0 || !strings.Contains(log, "nosuch0") {
					t.Errorf("exit code %d, log %q: want non-zero naming nosuch0", code, log)
				}
				if after := l.hostState(t, "r"); !slices.Equal(after, before) {
					t.Errorf("host state after the failed start:\n%v\nwant as before:\n%v", after, before)
				}
			})
		}
	}
}

// TestCrashThenRestart kills `intd run` with SIGKILL, starts it again and
// checks that the second instance removed what the first left (tc
// filters, GSO detour devices, policy routing rules) rather than adding
// to it, that it says so, and that SIGTERM then leaves the host as it
// was before the first start. Started without INT, neither adds a device;
// both are then configured as an INT endpoint (the eBPF dataplane's GSO
// detour pair).
func TestCrashThenRestart(t *testing.T) {
	l := routerLab(t)
	before := l.hostState(t, "r")
	endpoint := []byte(`{"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true}}}`)
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			first := l.intdRun("r", dp, "p1,p2")
			c := l.gnmiUp(t, "r", first)
			for _, s := range l.hostState(t, "r") {
				if strings.HasPrefix(s, "device ") {
					t.Errorf("intd %s without INT configured added %s", dp, s)
				}
			}
			gnmiReplaceInt(t, c, "r", endpoint)
			running := l.hostState(t, "r")
			if slices.Equal(running, before) {
				t.Fatalf("intd %s changed nothing in the namespace: %v", dp, running)
			}
			syscall.Kill(first.cmd.Process.Pid, syscall.SIGKILL)
			exited(t, first, 5*time.Second)
			crashed := l.hostState(t, "r")
			t.Logf("left by the killed instance: %v", crashed)

			second := l.intdRun("r", dp, "p1,p2")
			gnmiReplaceInt(t, l.gnmiUp(t, "r", second), "r", endpoint)
			if again := l.hostState(t, "r"); !slices.Equal(again, running) {
				t.Errorf("after kill -9 and restart:\n%v\nwant what one instance has:\n%v", again, running)
			}
			if !slices.Equal(crashed, before) && !strings.Contains(readLog(second), "did not stop cleanly") {
				t.Errorf("the second instance does not log what it removed:\n%s", readLog(second))
			}
			syscall.Kill(second.cmd.Process.Pid, syscall.SIGTERM)
			if code := exited(t, second, 10*time.Second); code != 0 {
				t.Errorf("exit code %d after SIGTERM\n%s", code, readLog(second))
			}
			if after := l.hostState(t, "r"); !slices.Equal(after, before) {
				t.Errorf("after SIGTERM:\n%v\nwant as before the first start:\n%v", after, before)
			}
		})
	}
}

// reportConfig is r's /int configuration for TestSIGTERMFlushesReports:
// a postcard for every packet to h2, reports coalesced up to 64 per
// packet and held up to 1 s.
const reportConfig = `{
	"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "int-transit": true, "postcard": true}},
	"int-sessions": {"int-session": [{"name": "pc", "config": {"name": "pc", "mode": "INT_MD",
		"instructions": ["intd-int-metadata-semantics:METADATA_FIELD_NODE_ID",
			"intd-int-metadata-semantics:METADATA_FIELD_HOP_LATENCY"], "remaining-hop-count": 8}}]},
	"report-sessions": {"report-session": [{"name": "c",
		"config": {"name": "c", "source-address": "10.0.9.1", "report-format": "TELEMETRY_REPORT_V2_0",
			"max-reports-per-packet": 64, "max-delay": 1000000},
		"collectors": {"collector": [{"address": "10.0.9.2", "port": 32766, "config": {"address": "10.0.9.2", "port": 32766}}]}}]},
	"events": {"event": [{"type": "FLOW_STATE", "config": {"type": "FLOW_STATE", "report-session": "c"}}]},
	"watchlist": {"entries": {"entry": [{"sequence-id": 10, "config": {"sequence-id": 10},
		"match": {"config": {"destination-prefix": "10.0.2.0/24"}},
		"actions": {"config": {"flow-op": "POSTCARD", "int-session": "pc", "sample-percent": 100}}}]}}
}`

// gnmiReplaceInt replaces /int on target with cfg (JSON_IETF).
func gnmiReplaceInt(t *testing.T, c gpb.GNMIClient, target string, cfg []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: target}, Replace: []*gpb.Update{{
		Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}}},
		Val:  &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: cfg}}}}})
	if err != nil {
		t.Fatalf("gNMI Set on %s: %v", target, err)
	}
}

// TestSIGTERMFlushesReports checks, for both dataplanes, that a report
// held back for coalescing when intd receives SIGTERM reaches the
// collector before intd exits.
func TestSIGTERMFlushesReports(t *testing.T) {
	l := routerLab(t)
	var coll *net.UDPConn
	l.in("c", func() (err error) {
		coll, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 9, 2), Port: 32766})
		return err
	})
	defer coll.Close()
	var rx *net.UDPConn
	l.in("h2", func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: 5001})
		return err
	})
	defer rx.Close()
	dial := func() *net.UDPConn {
		var c *net.UDPConn
		l.in("h1", func() (err error) {
			c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 0, 2, 1), Port: 5001})
			return err
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	reports := func(wait time.Duration) int {
		n := 0
		buf := make([]byte, 9000)
		for {
			coll.SetReadDeadline(time.Now().Add(wait))
			if _, err := coll.Read(buf); err != nil {
				return n
			}
			n++
		}
	}
	through := func(tx *net.UDPConn, msg string) (bool, string) {
		tx.Write([]byte(msg))
		buf := make([]byte, 100)
		rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := rx.Read(buf)
		return err == nil && string(buf[:n]) == msg, fmt.Sprint(err)
	}
	for _, dp := range dataplaneNames {
		t.Run(dp, func(t *testing.T) {
			p := l.intdRun("r", dp, "p1,p2")
			gnmiReplaceInt(t, l.gnmiUp(t, "r", p), "r", []byte(reportConfig))
			// A first flow resolves r's neighbours; its report goes out
			// within the 1 s coalescing delay.
			warm := dial()
			eventually(t, 10*time.Second, "a datagram through r", func() (bool, string) { return through(warm, "warm-up") })
			if n := reports(1500 * time.Millisecond); n == 0 {
				t.Fatalf("no report within the coalescing delay\n%s", readLog(p))
			}
			// A new flow's report is held back when SIGTERM comes.
			if ok, err := through(dial(), "new flow"); !ok {
				t.Fatalf("new flow: %s", err)
			}
			if n := reports(0); n != 0 {
				t.Fatalf("%d report packets before SIGTERM: the report was not held back", n)
			}
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
			if code := exited(t, p, 10*time.Second); code != 0 {
				t.Errorf("exit code %d after SIGTERM\n%s", code, readLog(p))
			}
			if n := reports(500 * time.Millisecond); n == 0 {
				t.Errorf("the coalesced report was lost at SIGTERM\n%s", readLog(p))
			}
		})
	}
}

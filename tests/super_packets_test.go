package tests

import (
	"io"
	"testing"
	"time"

	"github.com/intd-project/intd/internal/promtest"
)

// TestSoftSuperPackets sends 8 MiB over TCP from h1 to h2 through three
// soft switches (unshaped; hosts with TSO on) with INT off and on. Off,
// the hosts' super-packets must cross whole: s2 receives far fewer
// packets than the transfer's 1340-byte segments. On, every segment is
// cut at s1 and carries INT: s2 receives at least one packet per
// segment and the collector learns the flow's 3-hop path. Both times
// every byte must arrive as sent.
func TestSoftSuperPackets(t *testing.T) {
	f := buildFabric(t, true, 0)
	const size, mss = 8 << 20, 1340
	segs := float64(size / mss)
	for _, c := range []struct {
		name    string
		watch   bool
		srcPort int
	}{{"INT off", false, 40011}, {"INT on", true, 40012}} {
		t.Run(c.name, func(t *testing.T) {
			f.configure(t, c.watch)
			before := f.nodeCounter(t, "s2", "p1")
			f.tcpTransfer(t, c.srcPort, 5011, size)
			n := f.nodeCounter(t, "s2", "p1") - before
			t.Logf("s2 received %.0f packets for %.0f segments", n, segs)
			if !c.watch && n > segs/4 {
				t.Errorf("INT off: s2 received %.0f packets for %.0f segments; super-packets were cut", n, segs)
			}
			if c.watch {
				if n < segs {
					t.Errorf("INT on: s2 received %.0f packets, fewer than the %.0f segments", n, segs)
				}
				f.waitPath(t, c.srcPort, 5011)
			}
		})
	}
}

// nodeCounter reads intd_interface_in_packets_total of interface dev
// from switch s's /metrics once it has settled (state is published every
// 200 ms).
func (f *fabric) nodeCounter(t *testing.T, s, dev string) float64 {
	t.Helper()
	last := -1.0
	for i := 0; i < 50; i++ {
		v := f.readCounter(t, s, dev)
		if v == last {
			return v
		}
		last = v
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("%s: %s's counter does not settle", s, dev)
	return 0
}

func (f *fabric) readCounter(t *testing.T, s, dev string) float64 {
	t.Helper()
	resp, err := f.httpClient(s).Get("http://127.0.0.1:23268/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	v, ok := promtest.Value(string(b), "intd_interface_in_packets_total", map[string]string{"interface": dev})
	if !ok {
		t.Fatalf("%s: no intd_interface_in_packets_total for %s", s, dev)
	}
	return v
}

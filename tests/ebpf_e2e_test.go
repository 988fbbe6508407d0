package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/intd-project/intd/dataplane/collector"
)

// ebpfFabric is the soft test's fabric (h1 - s1 - s2 - s3 - h2, collector
// in c) with the kernel forwarding and `intd run --dataplane ebpf` on every
// switch: the BPF programs sit on tc ingress/egress of p1 and p2.
func ebpfFabric(t *testing.T) *fabric {
	f := buildFabric(t, false, 0) // kernel forwarding on, no intd yet
	// The tc filters and clsact qdiscs intd adds go with the namespaces,
	// deleted at cleanup with their veths.
	f.startNodes(t, "ebpf")
	return f
}

// gnmiState reads one leaf of switch s's state with gNMI Get.
func gnmiState(t *testing.T, f *fabric, s string, elems ...string) *gpb.TypedValue {
	t.Helper()
	var p gpb.Path
	for _, e := range elems {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: e})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := f.sw[s].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: s}, Path: []*gpb.Path{&p}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("gNMI Get %v on %s: %v", elems, s, err)
	}
	for _, n := range r.GetNotification() {
		for _, u := range n.GetUpdate() {
			return u.GetVal()
		}
	}
	return nil
}

// TestEBPFEndToEnd runs three `intd run --dataplane ebpf` routers (kernel
// forwarding, BPF on tc) and an intcollector in network namespaces,
// configures them only over gNMI (the same /int configuration as the soft
// test) and sends ping, UDP and TCP from h1 to h2.
func TestEBPFEndToEnd(t *testing.T) {
	start := time.Now()
	f := ebpfFabric(t)
	t.Logf("fabric up in %v", time.Since(start))
	f.configure(t, true)
	for _, s := range switches {
		if v := gnmiState(t, f, s, "int", "node", "state", "dataplane"); !bytes.Contains(v.GetJsonIetfVal(), []byte("ebpf")) {
			t.Fatalf("%s: /int/node/state/dataplane %s, want ebpf", s, v)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters, sink, tx := f.warmUp(t, ctx, 10*time.Second)

	t.Run("udp exact bytes", func(t *testing.T) {
		const n = 200
		sent := map[uint64][]byte{}
		for i := uint64(1); i <= n; i++ {
			p := payload(i, 16+int(i*37%1200))
			sent[i] = p
			if _, err := tx.Write(p); err != nil {
				t.Fatal(err)
			}
			if i%20 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
		eventually(t, 10*time.Second, "all datagrams at h2", func() (bool, string) {
			got := 0
			for i := uint64(1); i <= n; i++ {
				if sink.has(i) {
					got++
				}
			}
			return got == n, fmt.Sprintf("%d of %d received", got, n)
		})
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for i, p := range sent {
			if !bytes.Equal(sink.got[i], p) {
				t.Errorf("datagram %d differs: sent %d bytes, received %d", i, len(p), len(sink.got[i]))
			}
		}
	})

	t.Run("tcp exact stream", func(t *testing.T) {
		var ln net.Listener
		f.in("h2", func() (err error) { ln, err = net.Listen("tcp4", "10.0.2.1:5002"); return err })
		defer ln.Close()
		got := receiveAll(ln, 15*time.Second)
		var c net.Conn
		f.in("h1", func() (err error) { c, err = net.DialTimeout("tcp4", "10.0.2.1:5002", 5*time.Second); return err })
		data := payload(7, 4<<20)
		c.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if b := <-got; !bytes.Equal(b, data) {
			t.Fatalf("h2 received %d bytes, not the %d sent (equal %v)", len(b), len(data), bytes.Equal(b, data))
		}
	})

	t.Run("path", func(t *testing.T) {
		var m string
		f.pathHops(t, func() { tx.Write(payload(1<<61, 64)) }, &m)
		hist := map[int]int{}
		f.reports.count(3, func(r *collector.IndividualJSON) bool {
			if r.F && r.Inner != nil && r.Inner.INT != nil {
				hist[len(r.Inner.INT.Hops)]++
			}
			return false
		})
		t.Logf("node 3 flow reports by INT stack depth: %v", hist)
		if hist[3] == 0 {
			t.Errorf("no sink flow report from node 3 with the 3 hops of s1, s2 and s3")
		}
	})

	f.checkDropsAndCounters(t, counters, sink, tx, 10*time.Second)
	f.checkSampling(t, sink)
	t.Logf("total %v", time.Since(start))
}

package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// sampledSeq is the watchlist entry checkSampling adds on s1 before the
// h1 -> h2 entry (10) of intConfig: it matches only the sampled flow, so
// its counters count that flow alone.
const sampledSeq = "5"

// entryPath is s1's watchlist entry sampledSeq followed by elems.
func entryPath(elems ...string) *gpb.Path {
	p := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}, {Name: "watchlist"}, {Name: "entries"},
		{Name: "entry", Key: map[string]string{"sequence-id": sampledSeq}}}}
	for _, e := range elems {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: e})
	}
	return p
}

// unsampled reads the entry's unsampled-packets counter over gNMI.
func (f *fabric) unsampled(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := f.sw["s1"].Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: "s1"},
		Path: []*gpb.Path{entryPath("state", "counters", "unsampled-packets")}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("gNMI Get unsampled-packets: %v", err)
	}
	for _, n := range r.GetNotification() {
		if u := n.GetUpdate(); len(u) > 0 {
			v, err := strconv.ParseUint(strings.Trim(string(u[0].GetVal().GetJsonIetfVal()), `"`), 10, 64)
			if err != nil {
				t.Fatalf("unsampled-packets %s: %v", u[0].GetVal(), err)
			}
			return v
		}
	}
	return 0
}

// setSampledEntry adds (or with remove deletes) s1's entry sampledSeq for
// UDP from port 40077 with a packet-interval of intervalUs, by gNMI Set.
func (f *fabric) setSampledEntry(t *testing.T, intervalUs int, remove bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &gpb.SetRequest{Prefix: &gpb.Path{Target: "s1"}}
	if remove {
		req.Delete = []*gpb.Path{entryPath()}
	} else {
		entry := fmt.Sprintf(`{"sequence-id": %s, "config": {"sequence-id": %s, "description": "sampled flow"},
			"match": {"config": {"protocol": 17, "source-port-min": 40077, "source-port-max": 40077}},
			"actions": {"config": {"flow-op": "INT", "int-session": "md", "packet-interval": %d}}}`, sampledSeq, sampledSeq, intervalUs)
		req.Update = []*gpb.Update{{Path: entryPath(), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(entry)}}}}
	}
	if _, err := f.sw["s1"].Set(ctx, req); err != nil {
		t.Fatalf("gNMI Set of the sampled entry (remove %v): %v", remove, err)
	}
}

// checkSampling adds a watchlist entry with a 5 s packet-interval on s1
// through gNMI, sends 100 datagrams of its flow at once and expects all of
// them at h2 and all but the first (INT) counted unsampled; then removes it.
func (f *fabric) checkSampling(t *testing.T, sink *udpSink) {
	t.Run("packet sampling", func(t *testing.T) {
		f.setSampledEntry(t, 5_000_000, false)
		defer f.setSampledEntry(t, 0, true)
		before := f.unsampled(t)
		tx := f.udpSender(t, 40077)
		const n = 100
		start := time.Now()
		for i := uint64(1); i <= n; i++ {
			tx.Write(payload(1<<48+i, 200))
		}
		took := time.Since(start)
		eventually(t, 10*time.Second, "the sampled flow's datagrams at h2", func() (bool, string) {
			got := 0
			for i := uint64(1); i <= n; i++ {
				if sink.has(1<<48 + i) {
					got++
				}
			}
			return got == n, fmt.Sprintf("%d of %d", got, n)
		})
		if took > 4*time.Second {
			t.Fatalf("sending %d datagrams took %v, near the interval", n, took)
		}
		eventually(t, 10*time.Second, "unsampled-packets over gNMI", func() (bool, string) {
			d := f.unsampled(t) - before
			return d == n-1, fmt.Sprintf("%d more unsampled, want %d", d, n-1)
		})
	})
}

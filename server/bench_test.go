package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// BenchmarkSetWatchlist1000 replaces a 1000-entry watchlist through gRPC,
// end to end: decode, validate, apply (fake), publish to the cache.
func BenchmarkSetWatchlist1000(b *testing.B) {
	env := startServer(b, TargetOptions{})
	ctx := context.Background()
	vals := []*gpb.TypedValue{watchlistBatch(1000, 1000), watchlistBatch(5000, 1000)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := env.client.Set(ctx, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(b, "/int/watchlist/entries"), Val: vals[i%2]}}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetFullState reads all state (1000 watchlist entries with
// counters) through gRPC in each encoding.
func BenchmarkGetFullState(b *testing.B) {
	env := startServer(b, TargetOptions{})
	ctx := context.Background()
	set(b, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(b, "/int/watchlist/entries"), Val: watchlistBatch(1000, 1000)}}})
	for _, enc := range []gpb.Encoding{gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO} {
		b.Run(enc.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				// Move a counter so no view is reused between iterations.
				env.fake.setCounter(uint64(i))
				env.srv.RefreshState(ctx)
				if _, err := env.client.Get(ctx, &gpb.GetRequest{Type: gpb.GetRequest_STATE, Encoding: enc}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// BenchmarkOnChangeLatency measures the time from a state change being
// published to the subscriber receiving it (ON_CHANGE, one counter leaf).
func BenchmarkOnChangeLatency(b *testing.B) {
	env := startServer(b, TargetOptions{})
	s := subscribeTo(b, env.client, subList(gpb.SubscriptionList_STREAM, onChange(b, "/int/node/state/counters/in-packets")))
	s.untilSync()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env.fake.setCounter(uint64(1000 + i))
		start := time.Now()
		env.srv.RefreshState(context.Background())
		for {
			r, err := s.next()
			if err != nil {
				b.Fatal(err)
			}
			if r.GetUpdate().GetUpdate()[0].GetVal().GetUintVal() == uint64(1000+i) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSampleFanout runs many SAMPLE subscribers on many counter
// leaves (50 subscribers x 1000 watchlist counters at 100ms) for one
// second per iteration and reports the process CPU used per second of
// wall time, the updates delivered per second and the sample latency
// (from a sample's tick to its last update reaching the client).
func BenchmarkSampleFanout(b *testing.B) {
	const subscribers, entries, interval = 50, 1000, 100 * time.Millisecond
	env := startServer(b, TargetOptions{})
	set(b, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(b, "/int/watchlist/entries"), Val: watchlistBatch(1, entries)}}})
	var delivered atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < subscribers; i++ {
		st, err := env.client.Subscribe(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sl := subList(gpb.SubscriptionList_STREAM, sampleSub(b, "/int/watchlist/entries/entry/state/counters/matched-packets", interval))
		sl.UpdatesOnly = true
		if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first time.Time
			n := 0
			for {
				r, err := st.Recv()
				if err != nil {
					return
				}
				if r.GetSyncResponse() {
					continue
				}
				if n == 0 {
					first = time.Now()
				}
				n++
				delivered.Add(1)
				if n == entries {
					mu.Lock()
					lat = append(lat, time.Since(first))
					mu.Unlock()
					n = 0
				}
			}
		}()
	}
	b.ResetTimer()
	cpu0, wall0, d0 := cpuTime(), time.Now(), delivered.Load()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	wall := time.Since(wall0)
	cpu := cpuTime() - cpu0
	d := delivered.Load() - d0
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-s/s")
	b.ReportMetric(float64(d)/wall.Seconds(), "updates/s")
	mu.Lock()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "sample-spread-p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "sample-spread-p99-µs")
	mu.Unlock()
	_ = fmt.Sprint()
}

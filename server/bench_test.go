package server

import (
	"context"
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
// counters) through gRPC in each encoding. "cached" reads the same
// published tree repeatedly (the STATE view is built once per publish);
// "after-publish" moves the counters and publishes first, so every Get
// also pays for the applier poll, the merge and diff, and a new view.
func BenchmarkGetFullState(b *testing.B) {
	env := startServer(b, TargetOptions{})
	ctx := context.Background()
	set(b, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(b, "/int/watchlist/entries"), Val: watchlistBatch(1000, 1000)}}})
	for _, enc := range []gpb.Encoding{gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO} {
		for _, publish := range []bool{false, true} {
			name := enc.String() + "/cached"
			if publish {
				name = enc.String() + "/after-publish"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if publish {
						env.fake.setCounter(uint64(i))
						env.srv.RefreshState(ctx)
					}
					if _, err := env.client.Get(ctx, &gpb.GetRequest{Type: gpb.GetRequest_STATE, Encoding: enc}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
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
// leaves (50 subscribers x 1000 watchlist counters every second, i.e.
// 50k sampled leaves a second) for one second per iteration while the
// state poller publishes changed counters every second. It reports the
// process CPU used per second of wall time, the sampled leaves delivered
// per second, and the gap between consecutive sample rounds arriving at
// a subscriber (p50/p99; ideally the interval).
func BenchmarkSampleFanout(b *testing.B) {
	const subscribers, entries, interval = 50, 1000, time.Second
	env := startServer(b, TargetOptions{})
	set(b, env.client, &gpb.SetRequest{Replace: []*gpb.Update{{Path: gp(b, "/int/watchlist/entries"), Val: watchlistBatch(1, entries)}}})
	var delivered atomic.Int64
	var mu sync.Mutex
	var gaps []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < subscribers; i++ {
		st, err := env.client.Subscribe(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sl := subList(gpb.SubscriptionList_STREAM, sampleSub(b, "/int/watchlist/entries/entry/state/counters/matched-packets", interval))
		if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last time.Time
			n := 0
			for {
				r, err := st.Recv()
				if err != nil {
					return
				}
				k := len(r.GetUpdate().GetUpdate())
				n += k
				delivered.Add(int64(k))
				if n >= entries {
					n -= entries
					now := time.Now()
					if !last.IsZero() {
						mu.Lock()
						gaps = append(gaps, now.Sub(last))
						mu.Unlock()
					}
					last = now
				}
			}
		}()
	}
	// Counters move every interval, as the poller would publish them.
	env.moveCounters(ctx, &wg, interval)
	time.Sleep(2 * interval)
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
	b.ReportMetric(float64(d)/wall.Seconds(), "leaves/s")
	mu.Lock()
	b.ReportMetric(float64(percentile(gaps, 0.5).Milliseconds()), "round-gap-p50-ms")
	b.ReportMetric(float64(percentile(gaps, 0.99).Milliseconds()), "round-gap-p99-ms")
	mu.Unlock()
}

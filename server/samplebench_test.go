package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// BenchmarkSampleFanoutScale is the SAMPLE fan-out at full size: 100
// subscribers each sampling 10,000 watchlist counter leaves every second
// (1M sampled leaves a second) while the state poller publishes changed
// counters every second.
//
// The subscribers run in a child process (this test binary re-executed
// as TestSampleClients), each on its own connection, and count updates
// with a wire-format scan instead of unmarshalling, so this process's CPU
// is the server's (gRPC, sampling, the state publisher) and the clients'
// CPU is reported separately. One iteration is one second of wall time.
//
// Metrics: server-cpu-s/s and client-cpu-s/s (CPU seconds per second of
// wall time), leaves/s delivered, round-gap (time between the ends of
// consecutive sample rounds at a subscriber; ideally the interval) and
// round-spread (first to last message of one round at a subscriber: how
// long a round takes to deliver) p50/p99.
func BenchmarkSampleFanoutScale(b *testing.B) {
	b.StopTimer()
	subscribers, entries := 100, 10000
	if s := os.Getenv("INTD_BENCH_SAMPLE"); s != "" { // e.g. 50x1000
		fmt.Sscanf(s, "%dx%d", &subscribers, &entries)
	}
	const interval = time.Second
	env := startServer(b, TargetOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// More entries than the watchlist's max-elements: state only.
	env.fake.mu.Lock()
	env.fake.synthetic = entries
	env.fake.mu.Unlock()
	// Counters move every interval, as the poller would publish them; one
	// publish now gives every entry's counter the same timestamp from the
	// start, as it would have on a running node.
	env.fake.setCounter(1 << 40)
	env.srv.RefreshState(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	env.moveCounters(ctx, &wg, interval)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSampleClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("INTD_SAMPLE_CLIENTS=%s,%d,%d,%d", env.addr, subscribers, entries, b.N))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	var cpu0 time.Duration
	var wall0 time.Time
	var cpu time.Duration
	var wall time.Duration
	var res sampleClientResult
	b.StopTimer()
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "start":
			b.StartTimer()
			cpu0, wall0 = cpuTime(), time.Now()
		case line == "end":
			cpu, wall = cpuTime()-cpu0, time.Since(wall0)
			b.StopTimer()
		case strings.HasPrefix(line, "result "):
			if err := json.Unmarshal([]byte(line[len("result "):]), &res); err != nil {
				b.Fatal(err)
			}
		default:
			fmt.Fprintln(os.Stderr, line)
		}
	}
	if wall == 0 {
		b.Fatal("the client process ended early")
	}
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "server-cpu-s/s")
	b.ReportMetric(res.CPU/res.Wall, "client-cpu-s/s")
	b.ReportMetric(float64(res.Leaves)/res.Wall, "leaves/s")
	b.ReportMetric(float64(res.Messages)/res.Wall, "msgs/s")
	b.ReportMetric(res.GapP50, "round-gap-p50-ms")
	b.ReportMetric(res.GapP99, "round-gap-p99-ms")
	b.ReportMetric(res.SpreadP50, "round-spread-p50-ms")
	b.ReportMetric(res.SpreadP99, "round-spread-p99-ms")
}

type sampleClientResult struct {
	Leaves, Messages     int64
	Wall, CPU            float64 // seconds
	GapP50, GapP99       float64 // ms
	SpreadP50, SpreadP99 float64 // ms
}

// countCodec is the client side of BenchmarkSampleFanoutScale: it
// marshals requests with proto and, instead of unmarshalling responses,
// counts the updates of a SubscribeResponse by walking its wire format.
type countCodec struct{}

type countedResp struct {
	updates int
	sync    bool
}

func (countCodec) Name() string { return "proto" }

func (countCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (countCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	r := v.(*countedResp)
	*r = countedResp{}
	b := buf.ReadOnlyData()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType { // update: Notification
			nb, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			for len(nb) > 0 {
				fnum, ftyp, n := protowire.ConsumeTag(nb)
				if n < 0 {
					return protowire.ParseError(n)
				}
				nb = nb[n:]
				if fnum == 4 { // Notification.update
					r.updates++
				}
				n = protowire.ConsumeFieldValue(fnum, ftyp, nb)
				if n < 0 {
					return protowire.ParseError(n)
				}
				nb = nb[n:]
			}
			continue
		}
		if num == 3 { // sync_response
			r.sync = true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

// TestSampleClients is BenchmarkSampleFanoutScale's client process; it
// does nothing unless INTD_SAMPLE_CLIENTS is set.
func TestSampleClients(t *testing.T) {
	spec := os.Getenv("INTD_SAMPLE_CLIENTS")
	if spec == "" {
		t.Skip("the client half of BenchmarkSampleFanoutScale")
	}
	f := strings.Split(spec, ",")
	addr := f[0]
	subscribers, _ := strconv.Atoi(f[1])
	entries, _ := strconv.Atoi(f[2])
	seconds, _ := strconv.Atoi(f[3])
	const interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leaves, msgs atomic.Int64
	var measuring atomic.Bool
	var mu sync.Mutex
	var gaps, spreads []time.Duration
	var synced sync.WaitGroup
	var wg sync.WaitGroup
	for i := 0; i < subscribers; i++ {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(countCodec{})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true, ClientStreams: true}, "/gnmi.gNMI/Subscribe")
		if err != nil {
			t.Fatal(err)
		}
		sl := subList(gpb.SubscriptionList_STREAM, sampleSub(t, "/int/watchlist/entries/entry/state/counters/matched-packets", interval))
		if err := st.SendMsg(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: sl}}); err != nil {
			t.Fatal(err)
		}
		synced.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r countedResp
			var first, last time.Time
			n := 0
			for {
				if err := st.RecvMsg(&r); err != nil {
					return
				}
				if r.sync {
					synced.Done()
					continue
				}
				now := time.Now()
				if n == 0 {
					first = now
				}
				n += r.updates
				if measuring.Load() {
					leaves.Add(int64(r.updates))
					msgs.Add(1)
				}
				if n >= entries {
					n -= entries
					if measuring.Load() {
						mu.Lock()
						if !last.IsZero() {
							gaps = append(gaps, now.Sub(last))
						}
						spreads = append(spreads, now.Sub(first))
						mu.Unlock()
					}
					last = now
				}
			}
		}()
	}
	synced.Wait()
	time.Sleep(2 * interval)
	cpu0, wall0 := cpuTime(), time.Now()
	measuring.Store(true)
	fmt.Println("start")
	time.Sleep(time.Duration(seconds) * time.Second)
	measuring.Store(false)
	fmt.Println("end")
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	mu.Lock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res := sampleClientResult{
		Leaves: leaves.Load(), Messages: msgs.Load(), Wall: wall.Seconds(), CPU: cpu.Seconds(),
		GapP50: ms(percentile(gaps, 0.5)), GapP99: ms(percentile(gaps, 0.99)),
		SpreadP50: ms(percentile(spreads, 0.5)), SpreadP99: ms(percentile(spreads, 0.99)),
	}
	mu.Unlock()
	js, _ := json.Marshal(res)
	fmt.Println("result " + string(js))
	cancel()
	wg.Wait()
}

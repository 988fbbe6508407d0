package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/intd-project/intd/gen"
)

// fakeApplier records applies, fails when told to, and reports state
// that echoes the configuration plus counters the test moves.
type fakeApplier struct {
	mu      sync.Mutex
	cfg     *gen.Device
	applies int
	fail    error
	counter uint64
	drops   []uint8 // drop reasons present in state (config-false-only list)
	delay   time.Duration
	// synthetic, when set, adds that many watchlist entries (1..n) to the
	// state, as if configured with the descriptions watchlistBatch gives:
	// more counters than the watchlist's max-elements allow, for
	// benchmarks.
	synthetic int
	// hold, when set, is called by State after it read the configuration
	// and before it returns (outside mu): a slow dataplane's counters.
	hold func()
}

// refused is an applier error that marks the configuration as refused.
type refused struct{ msg string }

func (r refused) Error() string         { return r.msg }
func (r refused) InvalidArgument() bool { return true }

func (f *fakeApplier) Apply(ctx context.Context, root ygot.GoStruct) error {
	cfg := root.(*gen.Device)
	f.mu.Lock()
	d := f.delay
	f.mu.Unlock()
	time.Sleep(d) // a slow dataplane, which does not watch ctx
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.cfg = cfg
	f.applies++
	return nil
}

func (f *fakeApplier) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func (f *fakeApplier) setDelay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// applied returns the configuration last applied.
func (f *fakeApplier) applied() *gen.Device {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg
}

func (f *fakeApplier) setCounter(v uint64) {
	f.mu.Lock()
	f.counter = v
	f.mu.Unlock()
}

func (f *fakeApplier) setDrops(d ...uint8) {
	f.mu.Lock()
	f.drops = d
	f.mu.Unlock()
}

func (f *fakeApplier) applyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applies
}

func (f *fakeApplier) State(ctx context.Context) (ygot.GoStruct, error) {
	f.mu.Lock()
	d, hold := f.stateLocked(), f.hold
	f.mu.Unlock()
	if hold != nil {
		hold()
	}
	return d, nil
}

func (f *fakeApplier) stateLocked() *gen.Device {
	d := &gen.Device{}
	if f.cfg == nil {
		return d
	}
	n := d.GetOrCreateInt().GetOrCreateNode()
	st := n.GetOrCreateState()
	st.Dataplane = ygot.String("fake")
	if c := f.cfg.GetInt().GetNode().GetConfig(); c != nil {
		st.Enabled = c.Enabled
		st.NodeId = c.NodeId
	}
	st.GetOrCreateCounters().InPackets = ygot.Uint64(f.counter)
	st.GetOrCreateCounters().OutPackets = ygot.Uint64(f.counter / 2)
	var entries map[uint32]*gen.IntdInt_Int_Watchlist_Entries_Entry
	if es := f.cfg.GetInt().GetWatchlist().GetEntries(); es != nil {
		entries = es.Entry
	}
	for seq, e := range entries {
		se := d.GetOrCreateInt().GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(seq)
		ss := se.GetOrCreateState()
		ss.SequenceId = ygot.Uint32(seq)
		ss.Description = e.GetConfig().Description
		ss.GetOrCreateCounters().MatchedPackets = ygot.Uint64(f.counter)
	}
	for seq := uint32(1); seq <= uint32(f.synthetic); seq++ {
		ss := d.GetOrCreateInt().GetOrCreateWatchlist().GetOrCreateEntries().GetOrCreateEntry(seq).GetOrCreateState()
		ss.SequenceId = ygot.Uint32(seq)
		ss.Description = ygot.String(fmt.Sprintf("entry %d", seq))
		ss.GetOrCreateCounters().MatchedPackets = ygot.Uint64(f.counter)
	}
	for _, r := range f.drops {
		dr := d.GetOrCreateInt().GetOrCreateNode().GetOrCreateDrops().GetOrCreateDrop(r)
		dr.GetOrCreateState().Reason = ygot.Uint8(r)
		dr.GetOrCreateState().Packets = ygot.Uint64(f.counter)
	}
	return d
}

var _ Applier = (*fakeApplier)(nil)

// intdSchema is intd's model, which these tests serve.
var intdSchema = sync.OnceValues(func() (*Schema, error) {
	ys, err := gen.Schema()
	if err != nil {
		return nil, err
	}
	return NewSchema(ys, gen.Models(), func(b []byte) (ygot.GoStruct, error) { return gen.ParseConfig(b) })
})

// newIntd returns a server of intd's model.
func newIntd(opts ...Option) (*Server, error) {
	sc, err := intdSchema()
	if err != nil {
		return nil, err
	}
	return New(append([]Option{WithSchema(sc)}, opts...)...)
}

func exampleConfig(t testing.TB) *gen.Device {
	t.Helper()
	data, err := os.ReadFile("../yang/examples/full-config.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := gen.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type testEnv struct {
	srv    *Server
	fake   *fakeApplier
	addr   string
	conn   *grpc.ClientConn
	client gpb.GNMIClient
}

// startServer serves one target "dut" with a fake applier over plaintext
// TCP on 127.0.0.1.
func startServer(t testing.TB, topts TargetOptions, opts ...Option) *testEnv {
	t.Helper()
	if topts.Initial == nil {
		topts.Initial = exampleConfig(t)
	}
	opts = append([]Option{WithStatePollInterval(time.Hour), WithLogger(quietLogger())}, opts...)
	srv, err := newIntd(opts...)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 100}
	if err := srv.AddTarget(context.Background(), "dut", fake, topts); err != nil {
		t.Fatal(err)
	}
	return serve(t, srv, fake)
}

func serve(t testing.TB, srv *Server, fake *fakeApplier, dopts ...grpc.DialOption) *testEnv {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	if len(dopts) == 0 {
		dopts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(lis.Addr().String(), dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Close()
	})
	return &testEnv{srv: srv, fake: fake, addr: lis.Addr().String(), conn: conn, client: gpb.NewGNMIClient(conn)}
}

// moveCounters sets the fake's counters to a new value every interval
// and publishes them, as the state poller would, until ctx is done.
func (e *testEnv) moveCounters(ctx context.Context, wg *sync.WaitGroup, interval time.Duration) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := uint64(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			e.fake.setCounter(i)
			e.srv.RefreshState(ctx)
		}
	}()
}

var errBoom = errors.New("backend exploded")

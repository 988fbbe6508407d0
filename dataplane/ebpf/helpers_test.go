package ebpf

import (
	"encoding/binary"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (loads BPF programs): run as root, e.g. sudo go test ./dataplane/ebpf")
	}
}

// Test frames come from wiretest, shared by both dataplanes' tests.
var (
	ipv4Frame = wiretest.IPv4Frame
	tcpFrame  = wiretest.TCPFrame
	udpFrame  = wiretest.UDPFrame
)

// recorder keeps copies of report events.
type recorder struct {
	mu  sync.Mutex
	evs []report.Event
}

func (r *recorder) Report(ev *report.Event) {
	e := *ev
	e.Packet = slices.Clone(ev.Packet)
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) wait(t testing.TB, n int) []report.Event {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		evs := slices.Clone(r.evs)
		r.mu.Unlock()
		if len(evs) >= n || time.Now().After(end) {
			return evs
		}
	}
}

// portID and l2ID are the interface ids both backends put in metadata.
const (
	portID = 7
	l2ID   = 0x10007
	nodeID = 0x0a0b0c0d
)

// nodePath returns the node ids of the INT-MD stack at pkt[at:at+n]
// (the INT header and its stack), last hop first.
func nodePath(pkt []byte, at, n int) ([]uint32, error) {
	_, st, err := wire.DecodeMD(pkt[at:at+n], 0)
	if err != nil {
		return nil, err
	}
	inst := wire.Instructions(uint16(pkt[at+4])<<8 | uint16(pkt[at+5]))
	var path []uint32
	for i := 0; i < st.Count(); i++ {
		var m wire.HopMetadata
		if wire.DecodeHop(st.Hop(i), inst, &m) == nil {
			path = append(path, m.NodeID)
		}
	}
	return path, nil
}

// recorderOf returns the report recorder of a test node of either backend.
func recorderOf(n node) *recorder {
	switch n := n.(type) {
	case *softNode:
		return n.rec
	case *bpfNode:
		return n.rec
	}
	return nil
}

// node is one INT node under test: either backend.
type node interface {
	sai.Backend
	// process runs one frame through the node and returns what leaves it,
	// nil when it was dropped.
	process(t testing.TB, frame []byte) []byte
	setMTU(mtu int)
	name() string
}

// bpfNode runs frames through intd_egress with BPF_PROG_TEST_RUN on lo,
// as if they came in through "in" (ifindex inIfindex), a port that exists
// only in the maps: the soft node's ports are "in" and "lo" too.
type bpfNode struct {
	*Dataplane
	rec *recorder
	in  uint32 // ingress ifindex of process: inIfindex, 1 (lo), 0 (the host)
}

// inIfindex is the ifindex of the ebpf node's "in" port: BPF_PROG_TEST_RUN
// takes any ingress ifindex, the egress device must exist (lo).
const inIfindex = 65000

// skbCtx is the head of struct __sk_buff up to ifindex.
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	IngressIfindex, Ifindex                                                               uint32
}

func newBPFNode(t testing.TB) *bpfNode {
	t.Helper()
	needRoot(t)
	rec := &recorder{}
	d, err := New(Config{Interfaces: []Interface{{Name: "lo", ID: portID, L2ID: l2ID}}, NoAttach: true, Reporter: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	n := &bpfNode{Dataplane: d, rec: rec, in: inIfindex}
	d.mu.Lock()
	defer d.mu.Unlock()
	slot := slices.Index(d.slots[:], false)
	i := &iface{cfg: Interface{Name: "in", ID: portID, L2ID: l2ID}, ifindex: inIfindex, mtu: 1500, slot: slot}
	if err := d.objs.Ctrs.Put(uint32(slot), make([]intdCounters, ebpf.MustPossibleCPU())); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.Ifaces.Put(uint32(inIfindex), d.ifaceValue(i)); err != nil {
		t.Fatal(err)
	}
	d.slots[slot] = true
	d.ifaces["in"] = i
	return n
}

func (n *bpfNode) name() string { return "ebpf" }

func (n *bpfNode) setMTU(mtu int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := n.ifaces["lo"]
	i.mtu = mtu
	_ = n.objs.Ifaces.Put(uint32(i.ifindex), n.ifaceValue(i))
}

func runProg(t testing.TB, p *ebpf.Program, frame []byte) (uint32, []byte) {
	return runProgFrom(t, p, frame, 1)
}

// runProgFrom runs p on lo for a frame that came in on ifindex in (0: sent
// by the host).
func runProgFrom(t testing.TB, p *ebpf.Program, frame []byte, in uint32) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+2048)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx{IngressIfindex: in, Ifindex: 1}}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

func (n *bpfNode) process(t testing.TB, frame []byte) []byte {
	t.Helper()
	ret, out := runProgFrom(t, n.objs.IntdEgress, frame, n.in)
	switch ret {
	case 0: // TC_ACT_OK
		return out
	case 2: // TC_ACT_SHOT
		return nil
	}
	t.Fatalf("intd_egress returned %d", ret)
	return nil
}

// softNode is a one-switch software dataplane used as the reference:
// frames enter on "in" and leave on "lo" (the ebpf node's test device), no
// TTL decrement, same interface ids.
type softNode struct {
	*soft.Switch
	out [][]byte
	rec *recorder
}

func newSoftNode(t testing.TB, mtu int) *softNode {
	t.Helper()
	n := &softNode{rec: &recorder{}}
	sw, err := soft.New(soft.Config{
		Name: "ref", NoTTLDecrement: true, Reporter: n.rec,
		Ports: []soft.PortConfig{
			{Name: "in", ID: portID, L2ID: l2ID},
			{Name: "lo", ID: portID, L2ID: l2ID, MTU: mtu,
				Link: soft.LinkFunc(func(f []byte) { n.out = append(n.out, slices.Clone(f)) })},
		},
		Routes: []soft.Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Ports: []string{"lo"}},
			{Prefix: netip.MustParsePrefix("::/0"), Ports: []string{"lo"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Switch = sw
	return n
}

func (n *softNode) name() string { return "soft" }
func (n *softNode) setMTU(int)   {}

func (n *softNode) process(t testing.TB, frame []byte) []byte {
	before := len(n.out)
	n.Receive(0, frame)
	if len(n.out) == before {
		return nil
	}
	return n.out[len(n.out)-1]
}

// detInst is the instruction set whose values are the same on both
// backends (no timestamps or latency).
const detInst = spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstL2Interfaces

// hopOf returns the metadata a node under test writes, for detInst.
func testHop(node uint32) wire.HopMetadata {
	return wire.HopMetadata{NodeID: node, IngressPort: portID, EgressPort: portID, L2IngressPort: l2ID, L2EgressPort: l2ID,
		Valid: spec.InstNodeID | spec.InstL1Interfaces | spec.InstQueue | spec.InstL2Interfaces}
}

// intFrame returns orig with INT inserted by node "prev" as a source would
// (DSCP 0x17 marking), using wire.
func intFrame(t testing.TB, orig []byte, sa sai.IntSessionAttrs, prevHops int, discard bool) []byte {
	t.Helper()
	inst := wire.Instructions(sa.Instructions)
	hdr := make([]byte, 512)
	h := wire.MDHeader{Version: 2, Discard: discard, HopML: uint8(inst.Words()), RemainingHops: sa.MaxHopCount - uint8(prevHops),
		Instructions: inst}
	_ = h.Put(hdr)
	n := wire.MDHeaderLen
	for i := prevHops; i > 0; i-- {
		m := testHop(uint32(i))
		k, _ := wire.PutHop(hdr[n:], inst, 0, &m)
		n += k
	}
	return sourceMD(t, orig, hdr[:n])
}

// sourceMD returns orig with the INT-MD header and stack md inserted as a
// source would (DSCP 0x17 marking), using wire.
func sourceMD(t testing.TB, orig, md []byte) []byte {
	t.Helper()
	f := make([]byte, len(orig), len(orig)+len(md)+64)
	copy(f, orig)
	var p wire.Packet
	if err := (&wire.Parser{}).Parse(f, &p); err != nil {
		t.Fatal(err)
	}
	out, err := wire.InsertINT(f, &p, spec.TypeMD, md, &wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pushHop returns f with testHop(node) pushed by wire (transit).
func pushHop(t testing.TB, f []byte, node uint32) []byte {
	t.Helper()
	return pushHopBy(t, dscpParser, f, node)
}

// pushHopBy is pushHop with INT found by parser c.
func pushHopBy(t testing.TB, c *wire.Parser, f []byte, node uint32) []byte {
	t.Helper()
	g := make([]byte, len(f), len(f)+256)
	copy(g, f)
	var p wire.Packet
	if err := c.Parse(g, &p); err != nil {
		t.Fatal(err)
	}
	m := testHop(node)
	out, err := wire.PushHop(g, &p, &m, wire.PushOptions{})
	if err != nil && err != wire.ErrHopLimit && err != wire.ErrNoRoom {
		t.Fatal(err)
	}
	return out
}

var dscpParser = &wire.Parser{DSCP: 0x17, DSCPMask: 0x3f}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// counterSum is d's counters, summed over its interfaces.
func (d *Dataplane) counterSum() [intdCounterNCTR]uint64 {
	var sum [intdCounterNCTR]uint64
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, i := range d.ifaces {
		for k, v := range d.rawCounters(i.slot) {
			sum[k] += v
		}
	}
	return sum
}

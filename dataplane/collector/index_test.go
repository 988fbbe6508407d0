package collector

import (
	"math/rand"
	"net/netip"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
)

// TestFlowIndex checks the open-addressed index against a map through
// random inserts and removals in a small, crowded table.
func TestFlowIndex(t *testing.T) {
	const max = 32
	rng := rand.New(rand.NewSource(1))
	x := newFlowIndex(max, 7)
	flows := make([]FlowState, max)
	keys := make([]flowKeyBits, max)
	type tkey struct {
		k  wire.FlowKey
		id uint32
	}
	ref := map[tkey]int32{}
	var free []int32
	for i := int32(0); i < max; i++ {
		free = append(free, i)
	}
	// IPv4 keys (compared by their key bits) and mixed ones (in full).
	key := func(n int) wire.FlowKey {
		dst := netip.MustParseAddr("2001:db8::1")
		if n%2 == 0 {
			dst = netip.AddrFrom4([4]byte{10, 0, 1, byte(n % 3)})
		}
		return wire.FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}), Dst: dst,
			SrcPort: uint16(n % 7), DstPort: 80, Proto: wire.ProtoTCP}
	}
	for op := 0; op < 200000; op++ {
		// The same 5-tuple in two GTP-U tunnels is two flows.
		k, id := key(rng.Intn(100)), uint32(rng.Intn(2))
		tag := tunnelTag(wire.TunnelGTPU, id)
		kb := keyBits(&k, tag)
		h := x.hash(&kb, &k)
		p := x.find(keys, flows, &kb, &k, h)
		if rp, ok := ref[tkey{k, id}]; ok != (p >= 0) || ok && rp != p {
			t.Fatalf("op %d: find %v = %d, want %d %v", op, k, p, rp, ok)
		}
		switch {
		case p >= 0 && rng.Intn(2) == 0:
			x.remove(h, p)
			delete(ref, tkey{k, id})
			free = append(free, p)
		case p < 0 && len(free) > 0:
			p = free[len(free)-1]
			free = free[:len(free)-1]
			flows[p].Key, flows[p].Tunnel, flows[p].TunnelID = k, wire.TunnelGTPU, id
			keys[p] = kb
			x.insert(h, p)
			ref[tkey{k, id}] = p
		}
	}
	n := 0
	for _, s := range x.slots {
		if s != 0 {
			n++
		}
	}
	if n != len(ref) {
		t.Errorf("%d slots used, %d flows", n, len(ref))
	}
}

// TestIPv4KeyUndoesKeyBits: the flow a new flow made from key bits alone
// gets is the one its key bits came from.
func TestIPv4KeyUndoesKeyBits(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 1000; i++ {
		var s, d [4]byte
		rng.Read(s[:])
		rng.Read(d[:])
		k := wire.FlowKey{Src: netip.AddrFrom4(s), Dst: netip.AddrFrom4(d),
			SrcPort: uint16(rng.Uint32()), DstPort: uint16(rng.Uint32()), Proto: uint8(rng.Uint32())}
		kb := keyBits(&k, 0)
		if got := ipv4Key(&kb); got != k {
			t.Fatalf("key %+v: from its bits %+v", k, got)
		}
	}
}

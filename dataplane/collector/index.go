package collector

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/intd-project/intd/dataplane/wire"
)

// flowIndex maps flow keys to positions in Collector.flows: an
// open-addressed table with linear probing, at most half full. A slot
// holds the upper 32 bits of the key's hash and the position plus one (0:
// empty), so a probe compares keys only when the hash bits match; the
// home slot is taken from the same bits, so that removal can recompute it.
type flowIndex struct {
	slots []uint64
	mask  uint64
	seed  uint64
}

func newFlowIndex(maxFlows int, seed uint64) flowIndex {
	n := 16
	for n < 2*maxFlows {
		n <<= 1
	}
	return flowIndex{slots: make([]uint64, n), mask: uint64(n - 1), seed: seed}
}

// tunnelTag is a flow's tunnel kind and id as the index keys them.
func tunnelTag(kind wire.TunnelKind, id uint32) uint64 { return uint64(kind)<<32 | uint64(id) }

// flowKeyBits is a flow key as the index compares it: an IPv4 key's
// addresses (source in the upper half) and its ports and protocol as two
// words, which innerFast reads straight from the packet, and the tunnel
// tag. Other keys have keyNot4 set in rest and are compared in full.
type flowKeyBits struct{ addrs, rest, tag uint64 }

const keyNot4 = 1 << 63

// keyBits is k's flowKeyBits in tunnel tag.
func keyBits(k *wire.FlowKey, tag uint64) flowKeyBits {
	rest := uint64(k.SrcPort)<<32 | uint64(k.DstPort)<<16 | uint64(k.Proto)
	if k.Src.Is4() && k.Dst.Is4() {
		s, d := k.Src.As4(), k.Dst.As4()
		return flowKeyBits{uint64(binary.BigEndian.Uint32(s[:]))<<32 | uint64(binary.BigEndian.Uint32(d[:])), rest, tag}
	}
	return flowKeyBits{0, rest | keyNot4, tag}
}

// ipv4Key is the IPv4 key whose flowKeyBits (outside tunnels) are kb:
// keyBits undone.
func ipv4Key(kb *flowKeyBits) wire.FlowKey {
	var s, d [4]byte
	binary.BigEndian.PutUint32(s[:], uint32(kb.addrs>>32))
	binary.BigEndian.PutUint32(d[:], uint32(kb.addrs))
	return wire.FlowKey{Src: netip.AddrFrom4(s), Dst: netip.AddrFrom4(d),
		SrcPort: uint16(kb.rest >> 32), DstPort: uint16(kb.rest >> 16), Proto: uint8(kb.rest)}
}

// hash is a wyhash-style hash of the key (kb, and k for keys that are not
// IPv4) and tunnel tag: folded 64x64->128 multiplies. IPv4 keys, the
// common case, take two multiplies over the addresses as 32-bit words
// rather than the 16-byte forms.
func (x *flowIndex) hash(kb *flowKeyBits, k *wire.FlowKey) uint64 {
	if kb.rest&keyNot4 == 0 {
		return x.hash4(kb.addrs, kb.rest, kb.tag)
	}
	return x.hash16(kb, k)
}

// hash16 is hash for a key that is not IPv4.
func (x *flowIndex) hash16(kb *flowKeyBits, k *wire.FlowKey) uint64 {
	s, d := k.Src.As16(), k.Dst.As16()
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(s[:8])^x.seed, binary.LittleEndian.Uint64(s[8:])^0xe7037ed1a0b428db)
	a := hi ^ lo
	hi, lo = bits.Mul64(binary.LittleEndian.Uint64(d[:8])^0x8ebc6af09c88c6e3, binary.LittleEndian.Uint64(d[8:])^0x589965cc75374cc3)
	b := hi ^ lo
	hi, lo = bits.Mul64(a^b^0xa0761d6478bd642f^kb.tag, (kb.rest&^keyNot4)^x.seed^0x1d8e4e27c47d124f)
	return hi ^ lo
}

// hash4 hashes an IPv4 key: addrs holds the source and destination
// addresses, rest the ports and protocol, tun the tunnel tag.
func (x *flowIndex) hash4(addrs, rest, tun uint64) uint64 {
	hi, lo := bits.Mul64(addrs^x.seed^0xa0761d6478bd642f, rest^0xe7037ed1a0b428db)
	hi, lo = bits.Mul64(hi^lo^tun^0x8ebc6af09c88c6e3, x.seed^0x589965cc75374cc3)
	return hi ^ lo
}

// sameKey reports whether flow p (keys[p], flows[p]) has the key kb, k.
func sameKey(keys []flowKeyBits, flows []FlowState, p int32, kb *flowKeyBits, k *wire.FlowKey) bool {
	q := &keys[p]
	return q.addrs == kb.addrs && q.rest == kb.rest && q.tag == kb.tag &&
		(kb.rest&keyNot4 == 0 || flows[p].Key.Src == k.Src && flows[p].Key.Dst == k.Dst)
}

// find returns the position of the key (kb, and k for keys that are not
// IPv4; keys[p] is the key bits of flows[p]) with hash h, or -1.
func (x *flowIndex) find(keys []flowKeyBits, flows []FlowState, kb *flowKeyBits, k *wire.FlowKey, h uint64) int32 {
	tag := h >> 32 << 32
	for i := h >> 32 & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s == 0 {
			return -1
		}
		if s&^0xffffffff == tag {
			if p := int32(uint32(s)) - 1; sameKey(keys, flows, p, kb, k) {
				return p
			}
		}
	}
}

// insert adds position p for a key with hash h that is not in the index.
func (x *flowIndex) insert(h uint64, p int32) {
	i := h >> 32 & x.mask
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = h>>32<<32 | uint64(uint32(p+1))
}

// remove deletes position p (key hash h), shifting back the entries after
// it in its probe run so that no probe stops early.
func (x *flowIndex) remove(h uint64, p int32) {
	want := uint64(uint32(p + 1))
	i := h >> 32 & x.mask
	for x.slots[i]&0xffffffff != want {
		i = (i + 1) & x.mask
	}
	for j := (i + 1) & x.mask; ; j = (j + 1) & x.mask {
		s := x.slots[j]
		if s == 0 {
			break
		}
		// The entry at j may move to i when its home slot is not in (i, j].
		home := x.home(s)
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.slots[i] = s
			i = j
		}
	}
	x.slots[i] = 0
}

// home is the first slot probed for the entry s.
func (x *flowIndex) home(s uint64) uint64 { return (s >> 32) & x.mask }

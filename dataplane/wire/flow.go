package wire

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// FlowKey is a transport 5-tuple. It is a comparable value, usable directly
// as a map key; addresses are netip.Addr so IPv4 and IPv6 share one type.
type FlowKey struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
}

// Hash returns a 64-bit non-cryptographic hash of the key. It does not
// allocate. The seed lets different tables use independent hashes.
func (k FlowKey) Hash(seed uint64) uint64 {
	s, d := k.Src.As16(), k.Dst.As16()
	h := seed ^ 0x9e3779b97f4a7c15
	h = mix(h, binary.LittleEndian.Uint64(s[:8]))
	h = mix(h, binary.LittleEndian.Uint64(s[8:]))
	h = mix(h, binary.LittleEndian.Uint64(d[:8]))
	h = mix(h, binary.LittleEndian.Uint64(d[8:]))
	h = mix(h, uint64(k.SrcPort)<<32|uint64(k.DstPort)<<16|uint64(k.Proto))
	// splitmix64 finaliser spreads the last word into all bits.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

func mix(h, w uint64) uint64 {
	hi, lo := bits.Mul64(h^w, 0xa0761d6478bd642f)
	return hi ^ lo
}

// EntropyPort derives a UDP source port for a newly inserted UDP header
// (NPT 2) from the original flow, in the dynamic range 49152-65535 so that
// it never collides with well-known service ports.
func (k FlowKey) EntropyPort() uint16 {
	return 0xc000 | uint16(k.Hash(0)>>50)
}

// EntropyPortIn is the flow's entropy port in lo..hi (lo <= hi): the
// same hash scaled to the range, so that in 49152-65535 it is EntropyPort.
func (k FlowKey) EntropyPortIn(lo, hi uint16) uint16 {
	n := uint64(hi-lo) + 1
	return lo + uint16((k.Hash(0)>>32*n)>>32)
}

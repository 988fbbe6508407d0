package wire

import (
	"encoding/binary"
	"math/bits"
)

// Internet checksum helpers (RFC 1071) and incremental updates (RFC 1624).
// Sums are kept as uint32 accumulators of 16-bit words and folded at the end.

// Sum adds the 16-bit big-endian words of b to acc. An odd trailing byte is
// padded with zero, as RFC 1071 requires.
func Sum(acc uint32, b []byte) uint32 {
	for len(b) >= 8 {
		acc += uint32(binary.BigEndian.Uint16(b)) + uint32(binary.BigEndian.Uint16(b[2:])) +
			uint32(binary.BigEndian.Uint16(b[4:])) + uint32(binary.BigEndian.Uint16(b[6:]))
		b = b[8:]
		// Fold now and then so the accumulator cannot overflow on jumbo frames.
		if acc >= 0x8000_0000 {
			acc = (acc & 0xffff) + acc>>16
		}
	}
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// Sum64 adds b (starting at an even offset of the summed data; an odd
// trailing byte padded with zero) to the 64-bit one's complement
// accumulator acc, in 64-bit big-endian words with end-around carry. It
// is congruent to Sum modulo 0xffff and zero only when Sum is, so
// Fold64(Sum64(0, b)) == Fold(Sum(0, b)); it reads 8 bytes per step.
func Sum64(acc uint64, b []byte) uint64 {
	var c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[8:]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[16:]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	var t uint64
	if len(b) >= 4 {
		t = uint64(binary.BigEndian.Uint32(b)) << 32 // keep the 16-bit alignment
		b = b[4:]
	}
	if len(b) >= 2 {
		t |= uint64(binary.BigEndian.Uint16(b)) << 16
		b = b[2:]
	}
	if len(b) == 1 {
		t |= uint64(b[0]) << 8
	}
	acc, c = bits.Add64(acc, t, c)
	acc, c = bits.Add64(acc, c, 0)
	return acc + c
}

// Fold64 reduces a Sum64 accumulator to a 16-bit one's complement sum.
func Fold64(acc uint64) uint16 { return Fold(fold64(acc)) }

// Fold reduces a 32-bit accumulator to a 16-bit one's complement sum.
func Fold(acc uint32) uint16 {
	acc = (acc & 0xffff) + acc>>16
	acc = (acc & 0xffff) + acc>>16
	return uint16(acc)
}

// UpdateChecksum returns the checksum after a 16-bit word covered by it
// changed from old to new: HC' = ~(~HC + ~m + m') (RFC 1624 eqn. 3).
func UpdateChecksum(cksum, old, new uint16) uint16 {
	acc := uint32(^cksum) + uint32(^old) + uint32(new)
	return ^Fold(acc)
}

// AdjustChecksum applies a precomputed delta to a checksum: delta is the
// one's complement sum of added words minus removed words (use Negate).
func AdjustChecksum(cksum uint16, delta uint32) uint16 {
	return ^Fold(uint32(^cksum) + delta)
}

// Negate returns the one's complement negation of a 16-bit sum, for
// subtracting words from a delta.
func Negate(sum uint16) uint32 { return uint32(^sum) }

// PseudoHeaderSum returns the sum of the TCP/UDP pseudo-header fields other
// than the length: addresses and protocol. src and dst are 4 or 16 bytes.
func PseudoHeaderSum(src, dst []byte, proto uint8) uint32 {
	return Sum(Sum(uint32(proto), src), dst)
}

// IPv4HeaderChecksum computes the header checksum of an IPv4 header whose
// checksum field may hold any value (it is skipped).
func IPv4HeaderChecksum(h []byte) uint16 {
	acc := Sum(0, h[:10])
	return ^Fold(Sum(acc, h[12:]))
}

// L4Checksum computes a full TCP or UDP checksum over seg (header+payload,
// checksum field skipped) with the given pseudo-header sum. UDP callers map
// a zero result to 0xffff themselves (see UDPChecksum).
func L4Checksum(pseudo uint32, seg []byte, csumOff int) uint16 {
	acc := Sum(pseudo+uint32(len(seg)), seg[:csumOff])
	return ^Fold(Sum(acc, seg[csumOff+2:]))
}

// UDPChecksum is L4Checksum for UDP: a computed zero is sent as all ones
// because zero means "no checksum" (RFC 768).
func UDPChecksum(pseudo uint32, seg []byte) uint16 {
	c := L4Checksum(pseudo, seg, 6)
	if c == 0 {
		return 0xffff
	}
	return c
}

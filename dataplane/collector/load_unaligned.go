//go:build amd64 || arm64 || 386 || ppc64le || s390x || riscv64 || loong64

package collector

import (
	"math/bits"
	"unsafe"
)

// be32 and be64 read big-endian words at byte offset o of p, which the
// caller has checked is in bounds (unaligned loads are allowed here).
func be32(p unsafe.Pointer, o int) uint32 {
	return bits.ReverseBytes32(*(*uint32)(unsafe.Add(p, o)))
}

func be64(p unsafe.Pointer, o int) uint64 {
	return bits.ReverseBytes64(*(*uint64)(unsafe.Add(p, o)))
}

//go:build !(amd64 || arm64 || 386 || ppc64le || s390x || riscv64 || loong64)

package collector

import (
	"encoding/binary"
	"unsafe"
)

// be32 and be64 read big-endian words at byte offset o of p, which the
// caller has checked is in bounds (byte loads: no unaligned access).
func be32(p unsafe.Pointer, o int) uint32 {
	return binary.BigEndian.Uint32(unsafe.Slice((*byte)(unsafe.Add(p, o)), 4))
}

func be64(p unsafe.Pointer, o int) uint64 {
	return binary.BigEndian.Uint64(unsafe.Slice((*byte)(unsafe.Add(p, o)), 8))
}

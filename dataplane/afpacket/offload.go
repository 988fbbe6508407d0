//go:build linux

package afpacket

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offload is a device offload that SetOffload switches (the legacy
// ethtool ioctls, what `ethtool -K` does).
type Offload uint32

// Offloads.
const (
	GRO        Offload = unix.ETHTOOL_SGRO
	GSO        Offload = unix.ETHTOOL_SGSO
	TSO        Offload = unix.ETHTOOL_STSO
	TxChecksum Offload = unix.ETHTOOL_STXCSUM
	LRO        Offload = unix.ETHTOOL_SFLAGS // ETH_FLAG_LRO
)

const ethFlagLRO = 1 << 15

// ifreqPtr is struct ifreq with ifr_data.
type ifreqPtr struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// SetOffload switches offloads of the named interface on or off, in the
// calling thread's network namespace. A router on AF_PACKET wants GRO and
// LRO off on its ports (frames are forwarded as received, never merged
// beyond the MTU). Hosts sending to it through veth pairs may keep TSO and
// GSO on: Port.Segments cuts their super-packets.
func SetOffload(name string, on bool, offloads ...Offload) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, o := range offloads {
		val := struct{ cmd, data uint32 }{uint32(o), 0}
		if on {
			val.data = 1
		}
		if o == LRO {
			cur := struct{ cmd, data uint32 }{unix.ETHTOOL_GFLAGS, 0}
			if err := ethtool(fd, name, unsafe.Pointer(&cur)); err != nil {
				return fmt.Errorf("afpacket: %s: reading flags: %w", name, err)
			}
			val.data = cur.data &^ ethFlagLRO
			if on {
				val.data |= ethFlagLRO
			}
		}
		if err := ethtool(fd, name, unsafe.Pointer(&val)); err != nil && !(o == LRO && err == unix.EOPNOTSUPP) {
			return fmt.Errorf("afpacket: %s: ethtool command %#x: %w", name, uint32(o), err)
		}
	}
	return nil
}

func ethtool(fd int, name string, data unsafe.Pointer) error {
	var ifr ifreqPtr
	copy(ifr.name[:unix.IFNAMSIZ-1], name)
	ifr.data = data
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

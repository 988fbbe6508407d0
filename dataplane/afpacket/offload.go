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

// getCmd is the ethtool command reading an offload SetOffload switches.
var getCmd = map[Offload]uint32{GRO: unix.ETHTOOL_GGRO, GSO: unix.ETHTOOL_GGSO, TSO: unix.ETHTOOL_GTSO,
	TxChecksum: unix.ETHTOOL_GTXCSUM, LRO: unix.ETHTOOL_GFLAGS}

// String is the offload's name as `ethtool -k` prints it.
func (o Offload) String() string {
	switch o {
	case GRO:
		return "generic-receive-offload"
	case GSO:
		return "generic-segmentation-offload"
	case TSO:
		return "tcp-segmentation-offload"
	case TxChecksum:
		return "tx-checksumming"
	case LRO:
		return "large-receive-offload"
	}
	return fmt.Sprintf("ethtool command %#x", uint32(o))
}

// GetOffload reports whether an offload of the named interface is on,
// in the calling thread's network namespace.
func GetOffload(name string, o Offload) (bool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	cmd, ok := getCmd[o]
	if !ok {
		return false, fmt.Errorf("afpacket: %s: unknown offload %#x", name, uint32(o))
	}
	val := struct{ cmd, data uint32 }{cmd, 0}
	if err := ethtool(fd, name, unsafe.Pointer(&val)); err != nil {
		return false, fmt.Errorf("afpacket: %s: reading %s: %w", name, o, err)
	}
	if o == LRO {
		return val.data&ethFlagLRO != 0, nil
	}
	return val.data != 0, nil
}

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

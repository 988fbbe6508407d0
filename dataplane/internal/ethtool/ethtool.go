//go:build linux

// Package ethtool reads and switches device offloads and features through
// the SIOCETHTOOL ioctl (what `ethtool -k` and `ethtool -K` do), for the
// dataplanes that must see frames as they are on the wire.
package ethtool

import (
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offload is a device offload switched by the legacy ethtool commands.
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

// getCmd is the ethtool command reading an offload.
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

// GetOffload reports whether an offload of the named interface is on, in
// the calling thread's network namespace.
func GetOffload(name string, o Offload) (bool, error) {
	cmd, ok := getCmd[o]
	if !ok {
		return false, fmt.Errorf("%s: unknown offload %#x", name, uint32(o))
	}
	fd, err := socket()
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	val := struct{ cmd, data uint32 }{cmd, 0}
	if err := ioctl(fd, name, unsafe.Pointer(&val)); err != nil {
		return false, fmt.Errorf("%s: reading %s: %w", name, o, err)
	}
	if o == LRO {
		return val.data&ethFlagLRO != 0, nil
	}
	return val.data != 0, nil
}

// SetOffload switches offloads of the named interface on or off, in the
// calling thread's network namespace. LRO is skipped where the device
// cannot switch it.
func SetOffload(name string, on bool, offloads ...Offload) error {
	fd, err := socket()
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
			if err := ioctl(fd, name, unsafe.Pointer(&cur)); err != nil {
				return fmt.Errorf("%s: reading flags: %w", name, err)
			}
			val.data = cur.data &^ ethFlagLRO
			if on {
				val.data |= ethFlagLRO
			}
		}
		if err := ioctl(fd, name, unsafe.Pointer(&val)); err != nil && !(o == LRO && err == unix.EOPNOTSUPP) {
			return fmt.Errorf("%s: setting %s: %w", name, o, err)
		}
	}
	return nil
}

// ethtool ioctl commands and string set (linux/ethtool.h).
const (
	cmdGSTRINGS  = 0x1b
	cmdGSSETINFO = 0x37
	cmdGFEATURES = 0x3a
	cmdSFEATURES = 0x3b
	ssFeatures   = 4
	gstringLen   = 32
	flagsWords   = 8 // feature blocks read at most: 256 features
)

// SetFeatures turns the device's features whose ethtool names match on or
// off (ETHTOOL_SFEATURES, as `ethtool -K dev name off`), in the calling
// thread's network namespace.
func SetFeatures(ifname string, match func(string) bool, on bool) error {
	fd, err := socket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	names, err := featureNames(fd, ifname)
	if err != nil {
		return err
	}
	var set struct {
		cmd, size uint32
		blocks    [flagsWords]struct{ valid, requested uint32 }
	}
	set.cmd, set.size = cmdSFEATURES, uint32((len(names)+31)/32)
	any := false
	for i, name := range names {
		if match(name) {
			set.blocks[i/32].valid |= 1 << (i % 32)
			if on {
				set.blocks[i/32].requested |= 1 << (i % 32)
			}
			any = true
		}
	}
	if !any {
		return nil
	}
	if err := ioctl(fd, ifname, unsafe.Pointer(&set)); err != nil {
		return fmt.Errorf("ETHTOOL_SFEATURES: %w", err)
	}
	return nil
}

// ActiveFeatures returns the device's features by ethtool name, true for
// the active ones, in the calling thread's network namespace.
func ActiveFeatures(ifname string) (map[string]bool, error) {
	fd, err := socket()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	names, err := featureNames(fd, ifname)
	if err != nil {
		return nil, err
	}
	var get struct {
		cmd, size uint32
		blocks    [flagsWords]struct{ available, requested, active, never uint32 }
	}
	get.cmd, get.size = cmdGFEATURES, flagsWords
	if err := ioctl(fd, ifname, unsafe.Pointer(&get)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	out := map[string]bool{}
	for i, name := range names {
		out[name] = get.blocks[i/32].active&(1<<(i%32)) != 0
	}
	return out, nil
}

// featureNames returns the device's ethtool feature names, by bit
// (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS), through the socket fd.
func featureNames(fd int, ifname string) ([]string, error) {
	var info struct {
		cmd, _ uint32
		mask   uint64
		n      uint32
	}
	info.cmd, info.mask = cmdGSSETINFO, 1<<ssFeatures
	if err := ioctl(fd, ifname, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	n := int(info.n)
	if n == 0 || n > 32*flagsWords {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %d features", n)
	}
	strs := make([]byte, 12+n*gstringLen)
	*(*[3]uint32)(unsafe.Pointer(&strs[0])) = [3]uint32{cmdGSTRINGS, ssFeatures, uint32(n)}
	if err := ioctl(fd, ifname, unsafe.Pointer(&strs[0])); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	names := make([]string, n)
	for i := range names {
		b := strs[12+i*gstringLen : 12+(i+1)*gstringLen]
		names[i] = string(b[:max(0, strings.IndexByte(string(b), 0))])
	}
	return names, nil
}

func socket() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}

// ifreq is struct ifreq with ifr_data. data is a real pointer, not a
// uintptr, so the garbage collector keeps (and moves) what it points to.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ioctl(fd int, ifname string, data unsafe.Pointer) error {
	var r ifreq
	copy(r.name[:unix.IFNAMSIZ-1], ifname)
	r.data = data
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&r))); e != 0 {
		return e
	}
	return nil
}

// ethtoolCmd is struct ethtool_cmd (ETHTOOL_GSET).
type ethtoolCmd struct {
	cmd, supported, advertising uint32
	speed                       uint16
	duplex, port, phyAddress    uint8
	transceiver, autoneg, mdio  uint8
	maxTxPkt, maxRxPkt          uint32
	speedHi                     uint16
	mdix, mdixCtrl              uint8
	lpAdvertising               uint32
	_                           [2]uint32
}

// Speed returns the link speed of the named interface in bits/s
// (ETHTOOL_GSET, what `ethtool IFACE` shows), 0 when the device reports
// none.
func Speed(ifname string) (int64, error) {
	fd, err := socket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	c := ethtoolCmd{cmd: unix.ETHTOOL_GSET}
	if err := ioctl(fd, ifname, unsafe.Pointer(&c)); err != nil {
		return 0, fmt.Errorf("ethtool %s: %w", ifname, err)
	}
	mbit := uint32(c.speedHi)<<16 | uint32(c.speed)
	if mbit == 0 || mbit == 0xffffffff {
		return 0, nil
	}
	return int64(mbit) * 1_000_000, nil
}

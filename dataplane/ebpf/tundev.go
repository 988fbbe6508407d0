package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/hostlock"
	"github.com/intd-project/intd/dataplane/internal/netnsrun"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// tunDev is the VXLAN-GPE device (external, UDP 4790) through which the
// sink hands session tunnel super-packets to the kernel's own tunnel
// receive (tun_handoff in the program): bpf_skb_adjust_room on this
// kernel cannot clear a UDP tunnel's GSO state, the kernel's
// decapsulation does, so the inner super-packet leaves the sink port
// whole and with plain TCP segmentation state. It exists while a tunnel
// address is configured.
type tunDev struct {
	index int
	lock  *hostlock.Lock
}

// tunDevName names the device; tunDevLock marks it as a running
// instance's.
const (
	tunDevName = "intd-gpe"
	tunDevLock = "intd/gpe"
)

// tunHandoff reports whether super-packets of session tunnels ending here
// take the kernel's decapsulation: on a kernel whose
// bpf_skb_adjust_room leaves the UDP tunnel GSO state, with the programs
// attached.
func (d *Dataplane) tunHandoff() bool { return !d.decapL4UDP && !d.cfg.NoAttach }

// wantTunDev reports whether dt calls for the device.
func (d *Dataplane) wantTunDev(dt *sai.DTelAttrs) bool {
	return d.tunHandoff() && dt != nil && (dt.TunnelAddress.IsValid() || dt.TunnelAddress6.IsValid())
}

// ensureTunDev adds the device if dt calls for it and it is not there
// yet: checkAttrs does, so that a failure names the tunnel address. Called
// with d.mu held.
func (d *Dataplane) ensureTunDev(dt *sai.DTelAttrs) error {
	if !d.wantTunDev(dt) || d.tun != nil {
		return nil
	}
	var t *tunDev
	if err := netnsrun.Run(d.ns, func() (err error) { t, err = d.newTunDev(); return err }); err != nil {
		attr := sai.AttrDTelTunnelAddress
		if !dt.TunnelAddress.IsValid() {
			attr = sai.AttrDTelTunnelAddress6
		}
		return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: attr, Index: -1, Err: sai.ErrUnsupported,
			Msg: fmt.Sprintf("session tunnels ending here without the VXLAN-GPE device %s, through which the kernel takes "+
				"the tunnel off GSO super-packets (external mode, UDP port %d), which could not be added (%v), are not supported",
				tunDevName, spec.PortVXLANGPE, err)}
	}
	d.tun = t
	return nil
}

// syncTunDev adds the device when dt has a tunnel address and removes it
// when not; it returns the device's ifindex (0: none). Called with d.mu
// held.
func (d *Dataplane) syncTunDev(dt *sai.DTelAttrs) (uint32, error) {
	if !d.wantTunDev(dt) {
		if d.tun != nil {
			d.closeTunDev()
		}
		return 0, nil
	}
	if err := d.ensureTunDev(dt); err != nil {
		return 0, err
	}
	return uint32(d.tun.index), nil
}

// newTunDev adds and sets up the device in the calling thread's network
// namespace. A device of that name no running instance holds (one killed
// before Close) is deleted first.
func (d *Dataplane) newTunDev() (*tunDev, error) {
	lock, err := hostlock.Acquire(tunDevLock)
	if err != nil {
		return nil, fmt.Errorf("another intd in this network namespace ends session tunnels (%s)", tunDevName)
	}
	t := &tunDev{lock: lock}
	if l, err := d.nl.LinkByName(tunDevName); err == nil {
		if err := d.nl.LinkDel(l); err != nil {
			lock.Release()
			return nil, fmt.Errorf("removing %s left by an intd that did not stop cleanly: %w", tunDevName, err)
		}
		d.log.Warn("removed a session tunnel device left by an intd that did not stop cleanly", "interface", tunDevName)
	}
	if err := addVXLANGPE(tunDevName, spec.PortVXLANGPE); err != nil {
		lock.Release()
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("add %s: another VXLAN-GPE device in external mode has UDP port %d: %w", tunDevName, spec.PortVXLANGPE, err)
		}
		return nil, fmt.Errorf("add %s: %w", tunDevName, err)
	}
	if err := t.setup(d); err != nil {
		d.delTunDev()
		lock.Release()
		return nil, err
	}
	d.log.Info("host setting changed; restored when no tunnel-address needs it or at exit", "interface", tunDevName, "setting", "session tunnel end",
		"added", fmt.Sprintf("VXLAN-GPE device %s (external, UDP port %d, address 192.0.0.8/32 scope link, rp_filter 2, forwarding 1), "+
			"passing only tunnels intd hands it", tunDevName, spec.PortVXLANGPE))
	return t, nil
}

// setup turns GRO off (the inner packet is whole already), makes reverse
// path filtering pass the inner packets (their source is routed through
// another device), lets the device's packets be forwarded,
// attaches intd_tun_rx and sets the device up, which binds its UDP port.
func (t *tunDev) setup(d *Dataplane) error {
	l, err := d.nl.LinkByName(tunDevName)
	if err != nil {
		return fmt.Errorf("%s: %w", tunDevName, err)
	}
	t.index = l.Attrs().Index
	if err := ethtool.SetFeatures(tunDevName, func(f string) bool { return strings.HasPrefix(f, "rx-gro") }, false); err != nil {
		return fmt.Errorf("%s: %w", tunDevName, err)
	}
	// Reverse path filtering: the kernel applies the larger of conf/all
	// and the device's value, so loose (2) is the least a device can
	// ask for whatever conf/all says, now or later; and it drops every
	// packet arriving on a device without an IPv4 address, so the
	// device gets IANA's IPv4 dummy address (RFC 7600), link scope so
	// that no source address selection picks it.
	if err := d.nl.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 0, 0, 8), Mask: net.CIDRMask(32, 32)},
		Scope: unix.RT_SCOPE_LINK}); err != nil {
		return fmt.Errorf("%s: add address 192.0.0.8/32: %w", tunDevName, err)
	}
	for _, s := range [][2]string{{"rp_filter", "2"}, {"forwarding", "1"}} {
		p := "/proc/sys/net/ipv4/conf/" + tunDevName + "/" + s[0]
		if err := os.WriteFile(p, []byte(s[1]), 0); err != nil {
			return fmt.Errorf("%s: %w", tunDevName, err)
		}
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: t.index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := d.nl.QdiscAdd(q); err != nil {
		return fmt.Errorf("%s: add clsact qdisc: %w", tunDevName, err)
	}
	bf := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: t.index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: filterHandle, Protocol: unix.ETH_P_ALL, Priority: filterPrio},
		Fd: d.objs.IntdTunRx.FD(), Name: "intd_tun_rx", DirectAction: true,
	}
	if err := d.nl.FilterReplace(bf); err != nil {
		return fmt.Errorf("%s: attach intd_tun_rx: %w", tunDevName, err)
	}
	if err := d.nl.LinkSetUp(l); err != nil {
		if errors.Is(err, unix.EADDRINUSE) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s up: UDP port %d is taken (another VXLAN-GPE device or program): %w", tunDevName, spec.PortVXLANGPE, err)
		}
		return fmt.Errorf("%s up: %w", tunDevName, err)
	}
	return nil
}

// addVXLANGPE adds a VXLAN-GPE device in external (collect metadata)
// mode on UDP port, taking IPv6 tunnels with a zero UDP checksum; netlink
// by hand, as the netlink package knows no GPE flag.
func addVXLANGPE(name string, port uint16) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("vxlan"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	data.AddRtAttr(unix.IFLA_VXLAN_COLLECT_METADATA, []byte{1})
	data.AddRtAttr(unix.IFLA_VXLAN_GPE, nil)
	data.AddRtAttr(unix.IFLA_VXLAN_LEARNING, []byte{0})
	data.AddRtAttr(unix.IFLA_VXLAN_UDP_ZERO_CSUM6_RX, []byte{1})
	data.AddRtAttr(unix.IFLA_VXLAN_PORT, binary.BigEndian.AppendUint16(nil, port))
	req.AddData(info)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// removeStaleTunDev deletes the device if no running instance holds it
// (one killed before Close left it).
func (d *Dataplane) removeStaleTunDev() {
	if hostlock.Held(tunDevLock) {
		return
	}
	l, err := d.nl.LinkByName(tunDevName)
	if err != nil {
		return
	}
	if err := d.nl.LinkDel(l); err != nil {
		d.log.Warn("ebpf: removing a session tunnel device left by a previous instance", "interface", tunDevName, "err", err)
		return
	}
	d.log.Warn("removed a session tunnel device left by an intd that did not stop cleanly", "interface", tunDevName)
}

// delTunDev deletes the device (with its qdisc and filter).
func (d *Dataplane) delTunDev() error {
	l, err := d.nl.LinkByName(tunDevName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return d.nl.LinkDel(l)
}

// closeTunDev removes the device. Called with d.mu held, or from Close.
func (d *Dataplane) closeTunDev() error {
	t := d.tun
	d.tun = nil
	defer t.lock.Release()
	if err := d.delTunDev(); err != nil {
		d.log.Error("could not restore a host setting", "interface", tunDevName, "setting", "session tunnel end", "err", err)
		return fmt.Errorf("ebpf: delete %s: %w", tunDevName, err)
	}
	d.log.Info("host setting restored", "interface", tunDevName, "setting", "session tunnel end", "removed", "VXLAN-GPE device "+tunDevName)
	return nil
}

package ebpf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/hostlock"
	"github.com/intd-project/intd/dataplane/internal/netnsrun"
	"github.com/intd-project/intd/sai"
)

// gsoDetour is the veth pair a watched GSO super-packet takes to be
// segmented in software before INT goes into every segment (see the
// package documentation): intd_egress redirects it into dev, whose
// segmentation and checksum offloads are off, so the kernel segments it
// there; intd_gso on tc ingress of peer (GRO off) inserts INT into each
// segment and redirects it to the egress device. It exists while the
// node is an INT endpoint (only a source step takes the detour); without
// it such packets leave without INT, counted as unsupported.
type gsoDetour struct {
	h         *netlink.Handle // in the namespace New ran in
	dev, peer string
	devIndex  int
	peerIndex int
	lock      *hostlock.Lock // marks the pair as a running instance's
}

// detourPrefix begins the names of GSO detour devices: intd-gsoN and
// intd-gsoN+1, N even.
const detourPrefix = "intd-gso"

// maxDetours bounds the detour pairs of one namespace.
const maxDetours = 32

func detourLock(n int) string { return "intd/gso/" + strconv.Itoa(n) }

// wantGSODetour reports whether dt calls for the pair: a source step
// (int-endpoint) can take a watched GSO super-packet or a packet whose
// checksum is pending.
func (d *Dataplane) wantGSODetour(dt *sai.DTelAttrs) bool {
	return !d.cfg.NoAttach && !d.cfg.NoGSODetour && dt != nil && dt.IntEndpointEnable
}

// ensureGSODetour adds the pair if dt calls for it and it is not there
// yet: checkAttrs does, so that a failure names int-endpoint. Called with
// d.mu held.
func (d *Dataplane) ensureGSODetour(dt *sai.DTelAttrs) error {
	if !d.wantGSODetour(dt) || d.gso != nil {
		return nil
	}
	var g *gsoDetour
	if err := netnsrun.Run(d.ns, func() (err error) { g, err = d.newGSODetour(); return err }); err != nil {
		return &sai.AttrError{Object: sai.ObjectTypeDTel, Attr: sai.AttrDTelIntEndpointEnable, Index: -1, Err: sai.ErrUnsupported,
			Msg: fmt.Sprintf("an INT endpoint without the GSO detour veth pair %sN/%sN+1, through which watched GSO "+
				"super-packets and packets with a pending checksum are segmented in software before INT, which could "+
				"not be added (%v), is not supported", detourPrefix, detourPrefix, err)}
	}
	d.gso = g
	d.log.Info("host setting changed; restored when no int-endpoint needs it or at exit", "interface", g.dev, "peer", g.peer,
		"setting", "GSO detour", "added", fmt.Sprintf("veth pair %s/%s (%s: segmentation and checksum offloads off; "+
			"%s: GRO off, intd_gso on tc ingress), passing only packets intd sends it", g.dev, g.peer, g.dev, g.peer))
	return nil
}

// closeGSODetour removes the pair. Called with d.mu held, or from Close.
func (d *Dataplane) closeGSODetour() error {
	g := d.gso
	d.gso = nil
	if err := g.close(); err != nil {
		d.log.Error("could not restore a host setting", "interface", g.dev, "peer", g.peer, "setting", "GSO detour", "err", err)
		return err
	}
	d.log.Info("host setting restored", "interface", g.dev, "peer", g.peer, "setting", "GSO detour", "removed", "veth pair "+g.dev+"/"+g.peer)
	return nil
}

// newGSODetour creates the pair intd-gsoN/intd-gsoN+1 (the first N no
// running instance holds) in the calling thread's network namespace and
// attaches intd_gso. Pairs whose owner is gone (an instance killed before
// Close) were deleted by New.
func (d *Dataplane) newGSODetour() (*gsoDetour, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("ebpf: GSO detour: netlink: %w", err)
	}
	g := &gsoDetour{h: h}
	for n := 0; ; n += 2 {
		if n >= 2*maxDetours {
			h.Close()
			return nil, fmt.Errorf("ebpf: GSO detour: no free %sN name", detourPrefix)
		}
		if g.lock, err = hostlock.Acquire(detourLock(n)); err != nil {
			continue // another running instance's pair
		}
		g.dev, g.peer = detourPrefix+strconv.Itoa(n), detourPrefix+strconv.Itoa(n+1)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: g.dev, MTU: 65535, TxQLen: 1000}, PeerName: g.peer}
		err = h.LinkAdd(v)
		if errors.Is(err, unix.EINVAL) {
			v.MTU = 9000 // an older kernel's veth maximum
			err = h.LinkAdd(v)
		}
		if err == nil {
			break
		}
		g.lock.Release()
		if !errors.Is(err, unix.EEXIST) {
			h.Close()
			return nil, fmt.Errorf("ebpf: GSO detour: add veth %s: %w", g.dev, err)
		}
	}
	if err := g.setup(d); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *gsoDetour) setup(d *Dataplane) error {
	for _, x := range []struct {
		name  string
		index *int
	}{{g.dev, &g.devIndex}, {g.peer, &g.peerIndex}} {
		l, err := g.h.LinkByName(x.name)
		if err != nil {
			return fmt.Errorf("ebpf: GSO detour: %s: %w", x.name, err)
		}
		*x.index = l.Attrs().Index
	}
	// Segmentation happens on the sending side: no TSO/GSO (and no
	// checksum offload, so that segments carry full checksums that INT
	// insertion then updates); the receiving side must not merge the
	// segments again.
	tx := func(f string) bool {
		return strings.HasPrefix(f, "tx-") && (strings.HasSuffix(f, "-segmentation") ||
			strings.HasPrefix(f, "tx-checksum") || f == "tx-gso-list" || f == "tx-gso-partial")
	}
	if err := ethtool.SetFeatures(g.dev, tx, false); err != nil {
		return fmt.Errorf("ebpf: GSO detour: %s: %w", g.dev, err)
	}
	if err := ethtool.SetFeatures(g.peer, func(f string) bool { return strings.HasPrefix(f, "rx-gro") || f == "rx-lro" }, false); err != nil {
		return fmt.Errorf("ebpf: GSO detour: %s: %w", g.peer, err)
	}
	for _, n := range []string{g.dev, g.peer} {
		l, err := g.h.LinkByName(n)
		if err == nil {
			err = g.h.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("ebpf: GSO detour: %s up: %w", n, err)
		}
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: g.peerIndex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := g.h.QdiscAdd(q); err != nil {
		return fmt.Errorf("ebpf: GSO detour: %s: add clsact qdisc: %w", g.peer, err)
	}
	bf := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: g.peerIndex, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: filterHandle, Protocol: unix.ETH_P_ALL, Priority: filterPrio},
		Fd: d.objs.IntdGso.FD(), Name: "intd_gso", DirectAction: true,
	}
	if err := g.h.FilterReplace(bf); err != nil {
		return fmt.Errorf("ebpf: GSO detour: %s: attach intd_gso: %w", g.peer, err)
	}
	return nil
}

// removeStaleDetours deletes the detour pairs no running instance holds.
func (d *Dataplane) removeStaleDetours(h *netlink.Handle) {
	links, err := h.LinkList()
	if err != nil {
		d.log.Warn("ebpf: listing interfaces for leftovers of a previous instance", "err", err)
		return
	}
	for _, l := range links {
		name := l.Attrs().Name
		n, err := strconv.Atoi(strings.TrimPrefix(name, detourPrefix))
		if !strings.HasPrefix(name, detourPrefix) || err != nil || n < 0 || l.Type() != "veth" {
			continue
		}
		if hostlock.Held(detourLock(n &^ 1)) {
			continue
		}
		// Deleting one end deletes the pair (the other end is then gone).
		if err := h.LinkDel(l); errors.Is(err, unix.ENODEV) {
			continue
		} else if err != nil {
			d.log.Warn("ebpf: removing a GSO detour left by a previous instance", "interface", name, "err", err)
			continue
		}
		d.log.Warn("removed a GSO detour veth pair left by an intd that did not stop cleanly", "interface", name)
	}
}

// close deletes the pair (and with it the qdisc and filter).
func (g *gsoDetour) close() error {
	defer g.lock.Release()
	defer g.h.Close()
	l, err := g.h.LinkByName(g.dev)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("ebpf: GSO detour: %w", err)
	}
	if err := g.h.LinkDel(l); err != nil {
		return fmt.Errorf("ebpf: GSO detour: delete %s: %w", g.dev, err)
	}
	return nil
}

//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
)

// Kernel makes a soft switch forward like the kernel's router would: it
// mirrors the namespace's main routing table and neighbour table into
// Switch.SetRoutes, and tells Node what to do with every received frame
// (Classify). See the package documentation.
type Kernel struct {
	sw      *soft.Switch
	ports   []*Port
	byIndex map[int]int // ifindex -> index in ports
	log     *slog.Logger

	view    atomic.Pointer[kview]
	resolve chan resolveReq
	asked   map[netip.Addr]time.Time // last resolution request per address
	routes  atomic.Int64             // routes installed by the last Sync
	synced  func()                   // called after every Sync (Node's wake-up)
	// tunnelEnd says whether a session tunnel to a local address
	// arriving on a port (index in ports) ends at the switch.
	tunnelEnd func(port int, a netip.Addr) bool
}

// Verdict is what Classify decides for a received frame.
type Verdict uint8

// Verdicts.
const (
	// ToKernel: not the switch's to forward (ARP, neighbour discovery,
	// traffic to the node itself, frames seen in promiscuous mode).
	ToKernel Verdict = iota
	// Forward: the switch forwards it (or counts a routing miss).
	Forward
	// Hold: its next hop has no neighbour entry yet; it waits (bounded)
	// for the kernel to resolve it, and is dropped if it does not.
	Hold
	// NoPortRoute: the kernel routes it through an interface that is not
	// a port; the switch cannot, and the kernel must not (see
	// RulePriority): dropped and counted as a routing miss.
	NoPortRoute
)

type routeKind uint8

const (
	onLink  routeKind = iota // connected, through a port
	viaPort                  // through a gateway on a port
	foreign                  // through an interface that is not a port
)

type vroute struct {
	kind      routeKind
	ifindex   int
	gw        netip.Addr // viaPort: the gateway resolved for the route
	installed bool       // viaPort: the switch has the route
	metric    int
}

// lpm is a longest-prefix-match table: one map per distinct prefix
// length, looked up longest first, without allocation.
type lpm struct {
	lens   []int
	routes map[netip.Prefix]vroute
}

func (t *lpm) add(p netip.Prefix, r vroute) {
	if t.routes == nil {
		t.routes = map[netip.Prefix]vroute{}
	}
	if old, ok := t.routes[p]; ok && old.metric <= r.metric {
		return // the kernel uses the route with the lowest metric
	}
	if !slices.Contains(t.lens, p.Bits()) {
		t.lens = append(t.lens, p.Bits())
		slices.SortFunc(t.lens, func(a, b int) int { return b - a })
	}
	t.routes[p] = r
}

func (t *lpm) lookup(a netip.Addr) (vroute, bool) {
	for _, l := range t.lens {
		p, err := a.Prefix(l)
		if err != nil {
			continue
		}
		if r, ok := t.routes[p]; ok {
			return r, true
		}
	}
	return vroute{}, false
}

type kview struct {
	local    map[netip.Addr]bool
	resolved map[netip.Addr]bool // addresses with a usable neighbour entry on a port
	v4, v6   lpm                 // the main table's unicast routes
}

type resolveReq struct {
	ifindex int
	addr    netip.Addr
}

// NewKernel returns a Kernel for sw, whose ports are ports (the Node's).
func NewKernel(sw *soft.Switch, ports []*Port, log *slog.Logger) *Kernel {
	if log == nil {
		log = slog.Default()
	}
	k := &Kernel{sw: sw, ports: ports, byIndex: map[int]int{}, log: log,
		resolve: make(chan resolveReq, 64), asked: map[netip.Addr]time.Time{}}
	if sw != nil {
		swPort := make([]int, len(ports)) // the switch's index of each port, looked up once
		for i, p := range ports {
			swPort[i] = sw.Port(p.Name)
		}
		k.tunnelEnd = func(port int, a netip.Addr) bool { return sw.IsTunnelEnd(swPort[port], a) }
	}
	for i, p := range ports {
		k.byIndex[p.Index] = i
	}
	k.view.Store(&kview{local: map[netip.Addr]bool{}, resolved: map[netip.Addr]bool{}})
	return k
}

// Routes returns the number of routes installed by the last Sync.
func (k *Kernel) Routes() int { return int(k.routes.Load()) }

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

var usableNeigh = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE |
	netlink.NUD_PERMANENT | netlink.NUD_NOARP

// Sync reads the routing, neighbour and address tables and installs the
// routes in the switch. Gateways without a usable neighbour entry are
// resolved by the kernel (a neighbour request with NTF_USE, rate limited)
// and their routes left out until the entry appears.
func (k *Kernel) Sync() error {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("afpacket: listing addresses: %w", err)
	}
	v := &kview{local: map[netip.Addr]bool{}, resolved: map[netip.Addr]bool{}}
	for _, a := range addrs {
		v.local[addrOf(a.IP)] = true
	}
	type nkey struct {
		ifindex int
		addr    netip.Addr
	}
	neigh := map[nkey][6]byte{}
	byLink := map[int][]nkey{}
	for _, p := range k.ports {
		ns, err := netlink.NeighList(p.Index, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("afpacket: listing neighbours of %s: %w", p.Name, err)
		}
		for _, n := range ns {
			if n.State&usableNeigh == 0 || len(n.HardwareAddr) != 6 {
				continue
			}
			key := nkey{p.Index, addrOf(n.IP)}
			neigh[key] = [6]byte(n.HardwareAddr)
			byLink[p.Index] = append(byLink[p.Index], key)
			v.resolved[key.addr] = true
		}
	}
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("afpacket: listing routes: %w", err)
	}
	var routes []soft.Route
	hosts := map[netip.Addr]bool{}
	linkLocal := netip.MustParsePrefix("fe80::/10")
	for _, r := range rs {
		reject := r.Type == unix.RTN_BLACKHOLE || r.Type == unix.RTN_UNREACHABLE || r.Type == unix.RTN_PROHIBIT
		if r.Type != unix.RTN_UNICAST && !reject {
			continue
		}
		var pfx netip.Prefix
		if r.Dst == nil {
			pfx = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			if r.Family == netlink.FAMILY_V6 {
				pfx = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
			}
		} else {
			ones, _ := r.Dst.Mask.Size()
			pfx = netip.PrefixFrom(addrOf(r.Dst.IP), ones)
		}
		if !pfx.IsValid() || linkLocal.Overlaps(pfx) && pfx.Bits() >= 10 {
			continue
		}
		tbl := &v.v4
		if pfx.Addr().Is6() {
			tbl = &v.v6
		}
		if reject {
			// The kernel drops these; a less specific route must not
			// take them.
			tbl.add(pfx, vroute{kind: foreign, metric: r.Priority})
			continue
		}
		type hop struct {
			link int
			gw   net.IP
		}
		hops := []hop{{r.LinkIndex, r.Gw}}
		if len(r.MultiPath) > 0 {
			hops = hops[:0]
			for _, h := range r.MultiPath {
				hops = append(hops, hop{h.LinkIndex, h.Gw})
			}
		}
		var route *soft.Route
		vr := vroute{kind: foreign, metric: r.Priority}
		for _, h := range hops {
			pi, ok := k.byIndex[h.link]
			if !ok {
				continue // not one of the switch's ports (management)
			}
			if h.gw == nil {
				// Connected: one host route per resolved neighbour;
				// Classify holds frames to the others.
				if vr.kind == foreign {
					vr = vroute{kind: onLink, ifindex: h.link, metric: r.Priority}
				}
				for _, key := range byLink[h.link] {
					if pfx.Contains(key.addr) && !v.local[key.addr] && !hosts[key.addr] {
						hosts[key.addr] = true
						routes = append(routes, soft.Route{Prefix: netip.PrefixFrom(key.addr, key.addr.BitLen()),
							Ports: []string{k.ports[pi].Name}, NextHopMAC: neigh[key]})
					}
				}
				continue
			}
			gw := addrOf(h.gw)
			if vr.kind == foreign {
				vr = vroute{kind: viaPort, ifindex: h.link, gw: gw, metric: r.Priority}
			}
			mac, ok := neigh[nkey{h.link, gw}]
			if !ok {
				k.requestResolve(h.link, gw)
				continue
			}
			switch {
			case route == nil:
				route = &soft.Route{Prefix: pfx, Ports: []string{k.ports[pi].Name}, NextHopMAC: mac}
				vr = vroute{kind: viaPort, ifindex: h.link, gw: gw, installed: true, metric: r.Priority}
			case route.NextHopMAC == mac && !slices.Contains(route.Ports, k.ports[pi].Name):
				// ECMP over ports reaching the same next hop; soft
				// rewrites one MAC per route, so other gateways of a
				// multipath route are not used.
				route.Ports = append(route.Ports, k.ports[pi].Name)
			}
		}
		if route != nil {
			routes = append(routes, *route)
		}
		tbl.add(pfx, vr)
	}
	if err := k.sw.SetRoutes(routes); err != nil {
		return err
	}
	k.view.Store(v)
	k.routes.Store(int64(len(routes)))
	if k.synced != nil {
		k.synced()
	}
	return nil
}

// Resolved reports whether addr had a usable neighbour entry on a port at
// the last Sync (so the switch has its routes).
func (k *Kernel) Resolved(addr netip.Addr) bool { return k.view.Load().resolved[addr] }

// requestResolve asks the kernel to resolve addr on ifindex, at most once
// a second per address.
func (k *Kernel) requestResolve(ifindex int, addr netip.Addr) {
	select {
	case k.resolve <- resolveReq{ifindex, addr}:
	default:
	}
}

func (k *Kernel) doResolve(r resolveReq) {
	now := time.Now()
	if t, ok := k.asked[r.addr]; ok && now.Sub(t) < time.Second {
		return
	}
	if len(k.asked) >= 4096 {
		for a, t := range k.asked {
			if now.Sub(t) >= time.Second {
				delete(k.asked, a)
			}
		}
	}
	k.asked[r.addr] = now
	fam := netlink.FAMILY_V4
	if r.addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	// NTF_USE makes the kernel start resolution (neigh_event_send) as if
	// it had a packet for the address.
	err := netlink.NeighSet(&netlink.Neigh{LinkIndex: r.ifindex, Family: fam, IP: net.IP(r.addr.AsSlice()), Flags: netlink.NTF_USE})
	if err != nil {
		k.log.Debug("afpacket: neighbour resolution", "addr", r.addr, "err", err)
	}
}

// Run keeps the switch's routes in sync until ctx ends: on every route,
// neighbour or address change (debounced by 10 ms) and every 10 s. It
// also serves resolution requests from Accept and Sync.
func (k *Kernel) Run(ctx context.Context) {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	defer close(done)
	subscribe := func() {
		ru, nu, au := make(chan netlink.RouteUpdate, 256), make(chan netlink.NeighUpdate, 256), make(chan netlink.AddrUpdate, 256)
		opts := func(err error) {
			if ctx.Err() != nil {
				return // closing
			}
			k.log.Warn("afpacket: netlink subscription", "err", err)
			poke()
		}
		if err := netlink.RouteSubscribeWithOptions(ru, done, netlink.RouteSubscribeOptions{ErrorCallback: opts}); err != nil {
			k.log.Warn("afpacket: route subscription", "err", err)
		}
		if err := netlink.NeighSubscribeWithOptions(nu, done, netlink.NeighSubscribeOptions{ErrorCallback: opts}); err != nil {
			k.log.Warn("afpacket: neighbour subscription", "err", err)
		}
		if err := netlink.AddrSubscribeWithOptions(au, done, netlink.AddrSubscribeOptions{ErrorCallback: opts}); err != nil {
			k.log.Warn("afpacket: address subscription", "err", err)
		}
		go func() {
			for {
				select {
				case _, ok := <-ru:
					if !ok {
						return
					}
				case _, ok := <-nu:
					if !ok {
						return
					}
				case _, ok := <-au:
					if !ok {
						return
					}
				}
				poke()
			}
		}()
	}
	subscribe()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	sync := func() {
		if err := k.Sync(); err != nil {
			k.log.Warn("afpacket: syncing routes", "err", err)
		}
	}
	sync()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-k.resolve:
			k.doResolve(r)
		case <-changed:
			debounce.Reset(10 * time.Millisecond)
		case <-debounce.C:
			sync()
		case <-tick.C:
			sync()
		}
	}
}

// Classify decides what becomes of a frame received on port (index in
// the Node's ports): IPv4 and IPv6 unicast (optionally VLAN tagged) sent
// to the port's MAC address and not to one of the namespace's own
// addresses is the switch's, everything else the kernel's. Of the
// switch's, a frame whose next hop (the destination on a connected
// subnet, or the gateway of its route) has no neighbour entry yet is held
// while the kernel resolves it (Hold, with that next hop) - the switch
// would otherwise take a less specific route, the default route towards
// another router and back -, and a frame the kernel would route through
// an interface that is not a port is NoPortRoute. It does not allocate.
func (k *Kernel) Classify(port int, f []byte) (Verdict, netip.Addr) {
	if len(f) < 34 || [6]byte(f[0:6]) != k.ports[port].MAC {
		return ToKernel, netip.Addr{}
	}
	off, et := 14, binary.BigEndian.Uint16(f[12:])
	if et == unix.ETH_P_8021Q || et == unix.ETH_P_8021AD {
		off, et = 18, binary.BigEndian.Uint16(f[16:])
	}
	var dst netip.Addr
	switch {
	case et == unix.ETH_P_IP && len(f) >= off+20:
		dst = netip.AddrFrom4([4]byte(f[off+16 : off+20]))
		if dst.IsMulticast() || dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return ToKernel, netip.Addr{}
		}
	case et == unix.ETH_P_IPV6 && len(f) >= off+40:
		dst = netip.AddrFrom16([16]byte(f[off+24 : off+40]))
		if dst.IsLinkLocalUnicast() || dst.IsMulticast() {
			return ToKernel, netip.Addr{}
		}
	default:
		return ToKernel, netip.Addr{}
	}
	v := k.view.Load()
	if v.local[dst] {
		// A session tunnel ending at this node goes by its inner
		// destination (the switch takes it out at the sink port).
		st, ok := wire.ParseSessionTunnel(f, off)
		if !ok || k.tunnelEnd == nil || !k.tunnelEnd(port, dst) {
			return ToKernel, netip.Addr{}
		}
		dst = st.InnerDst(f)
		if v.local[dst] {
			return ToKernel, netip.Addr{}
		}
	}
	t := &v.v4
	if dst.Is6() {
		t = &v.v6
	}
	r, ok := t.lookup(dst)
	switch {
	case !ok:
		return Forward, netip.Addr{} // the switch counts a routing miss
	case r.kind == foreign:
		return NoPortRoute, netip.Addr{}
	case r.kind == onLink && !v.resolved[dst]:
		k.requestResolve(r.ifindex, dst)
		return Hold, dst
	case r.kind == viaPort && !r.installed:
		k.requestResolve(r.ifindex, r.gw)
		return Hold, r.gw
	}
	return Forward, netip.Addr{}
}

// Shaping returns the rate (bits/s) and limit (bytes) of a tbf root qdisc
// on the named interface, or ok false when there is none.
func Shaping(name string) (rate int64, limit int, ok bool, err error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, 0, false, err
	}
	qs, err := netlink.QdiscList(l)
	if err != nil {
		return 0, 0, false, err
	}
	for _, q := range qs {
		if t, isTbf := q.(*netlink.Tbf); isTbf && t.Attrs().Parent == netlink.HANDLE_ROOT {
			return int64(t.Rate) * 8, int(t.Limit), true, nil
		}
	}
	return 0, 0, false, nil
}

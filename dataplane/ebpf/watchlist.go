package ebpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/intd-project/intd/sai"
)

// Watchlist classification sets (struct wl_bm and the wl_* maps of the
// program, enum wl_set): per field, the bitmap of the entries (in
// priority order) that accept a value; the BPF program intersects the
// packet's and takes the first bit.
const (
	wlWords   = maxWatchlist / 64
	wlsProto  = int(intdWlSetWLS_PROTO)
	wlsDSCP   = int(intdWlSetWLS_DSCP)
	wlsFlags  = int(intdWlSetWLS_FLAGS)
	wlsFam    = int(intdWlSetWLS_FAM)
	wlsIfxAny = int(intdWlSetWLS_IFX_ANY)
	wlsTun    = int(intdWlSetWLS_TUN)  // tunnel kind: 0 none, sai.TunnelType
	wlsIFam   = int(intdWlSetWLS_IFAM) // inner family: IPv4, IPv6
	wlsIProto = int(intdWlSetWLS_IPROTO)
	wlsTidAny = int(intdWlSetWLS_TID_ANY)
	wlsICMPT  = int(intdWlSetWLS_ICMP_TYPE)
	wlsICMPC  = int(intdWlSetWLS_ICMP_CODE)
	wlsN      = int(intdWlSetWLS_N)
	wlInner   = int(intdWlSetWL_INNER) // first inner address and port region
	wlPfx     = int(intdWlSetWL_PFX)
	wlIval    = int(intdWlSetWL_IVAL)
	wlPorts   = int(intdWlSetWL_PORTS)
	bmBytes   = wlWords * 8
)

type bitmap [wlWords]uint64

func (b *bitmap) set(i int)   { b[i/64] |= 1 << (i % 64) }
func (b *bitmap) clear(i int) { b[i/64] &^= 1 << (i % 64) }

func (b *bitmap) or(o *bitmap) {
	for j := range b {
		b[j] |= o[j]
	}
}

// put writes b as the BPF program reads a struct wl_bm.
func (b *bitmap) put(dst []byte) {
	for j, w := range b {
		binary.NativeEndian.PutUint64(dst[8*j:], w)
	}
}

// wlMatch is what classification needs of one entry.
type wlMatch struct {
	src, dst  netip.Prefix // 16-byte form (IPv4 as ::ffff:a.b.c.d/96+n), ::/0 for any
	family    uint8        // prefixFamily
	proto     uint8
	sport     [2]uint16 // lo, hi
	dport     [2]uint16
	dscpVal   uint8
	dscpMask  uint8
	flagsVal  uint8
	flagsMask uint8
	inIfindex uint32
	icmp      sai.ICMPMatch
	// Tunnel and inner headers, when inner.
	inner          bool
	tun            sai.TunnelType
	tid            uint32 // 0: any
	ifamily        uint8  // 0 any, 4, 6
	isrc, idst     netip.Prefix
	iproto         uint8
	isport, idport [2]uint16
}

// prefix16 is p in the BPF program's 16-byte address form.
func prefix16(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	a := p.Masked().Addr()
	if a.Is4() {
		return netip.PrefixFrom(netip.AddrFrom16(a.As16()), p.Bits()+96)
	}
	return netip.PrefixFrom(a, p.Bits())
}

// wlTables are the classification sets of one half of the watchlist.
type wlTables struct {
	small []byte            // wlsN bitmaps
	pfx   [4][]netip.Prefix // per field: trie nodes, index = wl_pfx slot
	pfxBM [4][]byte         // their bitmaps
	ival  [4][]byte         // per field: interval bitmaps
	port  [4][]byte         // per field: port -> interval (__u16)
	ifx   map[uint32]bitmap // ingress ports with entries of their own
	tid   map[uint32]bitmap // tunnel ids with entries of their own
	flags intdCfgFlag       // F_WL_*
	use   intdWlUse         // WLU_*: the fields some entry matches
}

// buildWatchlist computes the classification sets of entries (in
// priority order).
func buildWatchlist(ents []wlMatch) *wlTables {
	t := &wlTables{small: make([]byte, wlsN*bmBytes)}
	small := make([]bitmap, wlsN)
	// Entries that accept every protocol, DSCP or TCP flags value: added
	// to all of that field's sets at the end.
	var anyIfx, anyProto, anyDSCP, anyFlags, anyIProto, anyICMPT, anyICMPC, anyTid bitmap
	own := map[uint32]bitmap{}
	ownTid := map[uint32]bitmap{}
	for i, e := range ents {
		maskedSets(small[wlsICMPT:wlsICMPT+256], &anyICMPT, i, e.icmp.Type, e.icmp.TypeMask)
		maskedSets(small[wlsICMPC:wlsICMPC+256], &anyICMPC, i, e.icmp.Code, e.icmp.CodeMask)
		if e.icmp != (sai.ICMPMatch{}) {
			t.flags |= intdCfgFlagF_WL_ICMP
		}
		switch {
		case !e.inner:
			// Any packet, tunnelled or not, whatever its inner headers.
			for v := range 8 {
				small[wlsTun+v].set(i)
			}
			small[wlsIFam].set(i)
			small[wlsIFam+1].set(i)
			anyIProto.set(i)
			anyTid.set(i)
		default:
			t.flags |= intdCfgFlagF_WL_INNER
			for v := 1; v < int(sai.NumTunnelTypes); v++ {
				if e.tun == sai.TunnelAny || int(e.tun) == v {
					small[wlsTun+v].set(i)
				}
			}
			familySets(small, wlsIFam, i, e.ifamily)
			valueSet(small, &anyIProto, wlsIProto, i, e.iproto)
			if e.ifamily != 0 {
				t.flags |= intdCfgFlagF_WL_IFAM
			}
			if e.iproto != 0 {
				t.flags |= intdCfgFlagF_WL_IPROTO
			}
			if e.tid == 0 {
				anyTid.set(i)
			} else {
				addTo(ownTid, e.tid, i)
				t.flags |= intdCfgFlagF_WL_TID
			}
		}
		t.use |= fieldsOf(e)
		familySets(small, wlsFam, i, e.family)
		valueSet(small, &anyProto, wlsProto, i, e.proto)
		maskedSets(small[wlsDSCP:wlsDSCP+64], &anyDSCP, i, e.dscpVal, e.dscpMask)
		maskedSets(small[wlsFlags:wlsFlags+256], &anyFlags, i, e.flagsVal, e.flagsMask)
		if e.inIfindex == 0 {
			anyIfx.set(i)
		} else {
			addTo(own, e.inIfindex, i)
			t.flags |= intdCfgFlagF_WL_IFX
		}
		if e.dscpMask != 0 {
			t.flags |= intdCfgFlagF_WL_DSCP
		}
		if e.flagsMask != 0 {
			t.flags |= intdCfgFlagF_WL_FLAGS
		}
	}
	for v := range 256 {
		small[wlsProto+v].or(&anyProto)
		small[wlsFlags+v].or(&anyFlags)
		small[wlsIProto+v].or(&anyIProto)
		small[wlsICMPT+v].or(&anyICMPT)
		small[wlsICMPC+v].or(&anyICMPC)
	}
	small[wlsTidAny] = anyTid
	t.tid = withAny(ownTid, &anyTid)
	for v := range 64 {
		small[wlsDSCP+v].or(&anyDSCP)
	}
	small[wlsIfxAny] = anyIfx
	t.ifx = withAny(own, &anyIfx)
	for i := range small {
		small[i].put(t.small[i*bmBytes:])
	}
	// Fields 0, 1: outer source and destination; 2, 3: inner ones
	// (::/0 and any port for entries without a tunnel match).
	for f := range 4 {
		pick := func(e wlMatch) netip.Prefix { return e.src }
		ports := func(e wlMatch) [2]uint16 { return e.sport }
		switch f {
		case 1:
			pick = func(e wlMatch) netip.Prefix { return e.dst }
			ports = func(e wlMatch) [2]uint16 { return e.dport }
		case 2:
			pick = func(e wlMatch) netip.Prefix { return e.isrc }
			ports = func(e wlMatch) [2]uint16 { return e.isport }
		case 3:
			pick = func(e wlMatch) netip.Prefix { return e.idst }
			ports = func(e wlMatch) [2]uint16 { return e.idport }
		}
		t.pfx[f], t.pfxBM[f] = prefixSets(ents, pick)
		t.ival[f], t.port[f] = portSets(ents, ports)
	}
	return t
}

// fieldsOf returns the address, port and protocol fields e matches
// (not every value).
func fieldsOf(e wlMatch) intdWlUse {
	var u intdWlUse
	anyPort := [2]uint16{0, 65535}
	for _, f := range []struct {
		used bool
		bit  intdWlUse
	}{
		{e.src.Bits() != 0, intdWlUseWLU_SRC}, {e.dst.Bits() != 0, intdWlUseWLU_DST},
		{e.sport != anyPort, intdWlUseWLU_SPORT}, {e.dport != anyPort, intdWlUseWLU_DPORT},
		{e.isrc.Bits() != 0, intdWlUseWLU_ISRC}, {e.idst.Bits() != 0, intdWlUseWLU_IDST},
		{e.isport != anyPort, intdWlUseWLU_ISPORT}, {e.idport != anyPort, intdWlUseWLU_IDPORT},
		{e.proto != 0, intdWlUseWLU_PROTO},
	} {
		if f.used {
			u |= f.bit
		}
	}
	return u
}

// familySets adds entry i to the family sets at small[at] (IPv4) and
// small[at+1] (IPv6) that fam (0 any, 4, 6, familyNone) accepts.
func familySets(small []bitmap, at, i int, fam uint8) {
	if fam == 0 || fam == 4 {
		small[at].set(i)
	}
	if fam == 0 || fam == 6 {
		small[at+1].set(i)
	}
}

// valueSet adds entry i to the set of value v at small[at+v], or to any
// (every value's, at the end) when v is 0.
func valueSet(small []bitmap, any *bitmap, at, i int, v uint8) {
	if v == 0 {
		any.set(i)
		return
	}
	small[at+int(v)].set(i)
}

// withAny is own with the entries of any added to every set: what a key
// with entries of its own matches.
func withAny(own map[uint32]bitmap, any *bitmap) map[uint32]bitmap {
	out := make(map[uint32]bitmap, len(own))
	for k, b := range own {
		b.or(any)
		out[k] = b
	}
	return out
}

// addTo adds entry i to the set of key k in m.
func addTo(m map[uint32]bitmap, k uint32, i int) {
	b := m[k]
	b.set(i)
	m[k] = b
}

// maskedSets adds entry i to the sets of the values v with v&mask == val
// (all of them, through any, when mask is 0).
func maskedSets(sets []bitmap, any *bitmap, i int, val, mask uint8) {
	if mask == 0 {
		any.set(i)
		return
	}
	for v := range sets {
		if uint8(v)&mask == val {
			sets[v].set(i)
		}
	}
}

// prefixSets returns the trie nodes (the entries' distinct prefixes and
// ::/0) and, for each, the set of entries whose prefix contains it.
func prefixSets(ents []wlMatch, pick func(wlMatch) netip.Prefix) ([]netip.Prefix, []byte) {
	own := map[netip.Prefix]*bitmap{netip.PrefixFrom(netip.IPv6Unspecified(), 0): {}}
	for i, e := range ents {
		p := pick(e)
		b := own[p]
		if b == nil {
			b = &bitmap{}
			own[p] = b
		}
		b.set(i)
	}
	nodes := make([]netip.Prefix, 0, len(own))
	for p := range own {
		nodes = append(nodes, p)
	}
	slices.SortFunc(nodes, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	// A node's containing prefixes can only have the lengths entries use.
	var lens []int
	for p := range own {
		lens = append(lens, p.Bits())
	}
	slices.Sort(lens)
	lens = slices.Compact(lens)
	out := make([]byte, len(nodes)*bmBytes)
	for n, p := range nodes {
		var b bitmap
		for _, bits := range lens {
			if bits > p.Bits() {
				break
			}
			if o := own[netip.PrefixFrom(p.Addr(), bits).Masked()]; o != nil {
				b.or(o)
			}
		}
		b.put(out[n*bmBytes:])
	}
	return nodes, out
}

// portSets splits the port space at the entries' range bounds and returns
// each interval's set of entries and the interval of every port.
func portSets(ents []wlMatch, pick func(wlMatch) [2]uint16) ([]byte, []byte) {
	type ev struct {
		at    int
		entry int
		add   bool
	}
	evs := make([]ev, 0, 2*len(ents))
	bounds := []int{0}
	for i, e := range ents {
		r := pick(e)
		evs = append(evs, ev{int(r[0]), i, true})
		bounds = append(bounds, int(r[0]))
		if int(r[1])+1 < wlPorts {
			evs = append(evs, ev{int(r[1]) + 1, i, false})
			bounds = append(bounds, int(r[1])+1)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	slices.SortFunc(evs, func(a, b ev) int { return a.at - b.at })
	sets := make([]byte, len(bounds)*bmBytes)
	port := make([]byte, 2*wlPorts)
	var run bitmap
	k := 0
	for n, lo := range bounds {
		for ; k < len(evs) && evs[k].at == lo; k++ {
			if evs[k].add {
				run.set(evs[k].entry)
			} else {
				run.clear(evs[k].entry)
			}
		}
		run.put(sets[n*bmBytes:])
		hi := wlPorts
		if n+1 < len(bounds) {
			hi = bounds[n+1]
		}
		for p := lo; p < hi; p++ {
			binary.NativeEndian.PutUint16(port[2*p:], uint16(n))
		}
	}
	return sets, port
}

// wlHalf is what is installed in one half of the BPF watchlist maps
// besides the mmap'ed arrays: the trie's keys and the ingress-port sets.
type wlHalf struct {
	lpm map[intdWlLpmKey]uint32
	ifx map[uint64]bool
	tid map[uint64]bool
}

func lpmKey(tag uint8, p netip.Prefix) intdWlLpmKey {
	return intdWlLpmKey{Prefixlen: 8 + uint32(p.Bits()), Tag: tag, Addr: p.Addr().As16()}
}

// writeWatchlist installs t as half h of the classification maps.
func (d *Dataplane) writeWatchlist(h uint8, t *wlTables) error {
	mem := func(name string, m interface {
		WriteAt([]byte, int64) (int, error)
	}, b []byte, off int) error {
		if _, err := m.WriteAt(b, int64(off)); err != nil {
			return fmt.Errorf("ebpf: %s: %w", name, err)
		}
		return nil
	}
	small, err := d.objs.WlSmall.Memory()
	if err != nil {
		return fmt.Errorf("ebpf: wl_small: %w", err)
	}
	pfx, err := d.objs.WlPfx.Memory()
	if err != nil {
		return fmt.Errorf("ebpf: wl_pfx: %w", err)
	}
	ival, err := d.objs.WlIval.Memory()
	if err != nil {
		return fmt.Errorf("ebpf: wl_ival: %w", err)
	}
	port, err := d.objs.WlPort.Memory()
	if err != nil {
		return fmt.Errorf("ebpf: wl_port: %w", err)
	}
	if err := mem("wl_small", small, t.small, int(h)*wlsN*bmBytes); err != nil {
		return err
	}
	hw := &d.wlHalves[h]
	if hw.lpm == nil {
		hw.lpm, hw.ifx, hw.tid = map[intdWlLpmKey]uint32{}, map[uint64]bool{}, map[uint64]bool{}
	}
	want := map[intdWlLpmKey]uint32{}
	for f := range 4 {
		region := int(h)*2 + f
		if f >= 2 {
			region = wlInner + int(h)*2 + f - 2
		}
		if err := mem("wl_pfx", pfx, t.pfxBM[f], region*wlPfx*bmBytes); err != nil {
			return err
		}
		if err := mem("wl_ival", ival, t.ival[f], region*wlIval*bmBytes); err != nil {
			return err
		}
		if err := mem("wl_port", port, t.port[f], region*wlPorts*2); err != nil {
			return err
		}
		for n, p := range t.pfx[f] {
			want[lpmKey(uint8(region), p)] = uint32(region*wlPfx + n)
		}
	}
	for k := range hw.lpm {
		if _, ok := want[k]; !ok {
			if err := d.objs.WlLpm.Delete(k); err != nil {
				return fmt.Errorf("ebpf: wl_lpm: delete: %w", err)
			}
			delete(hw.lpm, k)
		}
	}
	for k, v := range want {
		if old, ok := hw.lpm[k]; ok && old == v {
			continue
		}
		if err := d.objs.WlLpm.Put(k, v); err != nil {
			return fmt.Errorf("ebpf: wl_lpm: %w", err)
		}
		hw.lpm[k] = v
	}
	wantIfx := map[uint64]bool{}
	for ifx, b := range t.ifx {
		k := uint64(h)<<32 | uint64(ifx)
		var v [bmBytes]byte
		b.put(v[:])
		if err := d.objs.WlIfx.Put(k, v); err != nil {
			return fmt.Errorf("ebpf: wl_ifx: %w", err)
		}
		wantIfx[k] = true
	}
	for k := range hw.ifx {
		if !wantIfx[k] {
			if err := d.objs.WlIfx.Delete(k); err != nil {
				return fmt.Errorf("ebpf: wl_ifx: delete: %w", err)
			}
		}
	}
	hw.ifx = wantIfx
	return d.writeBitmapMap(d.objs.WlTid, "wl_tid", h, t.tid, &hw.tid)
}

// writeBitmapMap installs sets (by 32-bit value) as half h of m, keyed
// half << 32 | value, removing those of the half no longer there.
func (d *Dataplane) writeBitmapMap(m *ebpf.Map, name string, h uint8, sets map[uint32]bitmap, have *map[uint64]bool) error {
	want := map[uint64]bool{}
	for v, b := range sets {
		k := uint64(h)<<32 | uint64(v)
		var buf [bmBytes]byte
		b.put(buf[:])
		if err := m.Put(k, buf); err != nil {
			return fmt.Errorf("ebpf: %s: %w", name, err)
		}
		want[k] = true
	}
	for k := range *have {
		if !want[k] {
			if err := m.Delete(k); err != nil {
				return fmt.Errorf("ebpf: %s: delete: %w", name, err)
			}
		}
	}
	*have = want
	return nil
}

// wlMatchOf is the classification view of a sai watchlist entry.
func (d *Dataplane) wlMatchOf(a sai.WatchlistEntryAttrs) wlMatch {
	m := a.Match
	e := wlMatch{
		src: prefix16(m.SrcPrefix), dst: prefix16(m.DstPrefix), family: prefixFamily(m.SrcPrefix, m.DstPrefix),
		proto: m.IPProtocol, dscpVal: m.DSCP.Value, dscpMask: m.DSCP.Mask,
		flagsVal: m.TCPFlags.Value, flagsMask: m.TCPFlags.Mask,
	}
	e.sport[0], e.sport[1] = portRange(m.L4SrcPort)
	e.dport[0], e.dport[1] = portRange(m.L4DstPort)
	if m.InPort != "" {
		e.inIfindex = uint32(d.ifaces[m.InPort].ifindex)
	}
	e.family = etherFamily(e.family, m.EtherType)
	e.icmp = m.ICMP
	in := m.Inner
	e.isrc, e.idst = prefix16(netip.Prefix{}), prefix16(netip.Prefix{})
	e.isport, e.idport = [2]uint16{0, 65535}, [2]uint16{0, 65535}
	if !in.Enabled {
		return e
	}
	e.inner, e.tun, e.tid, e.iproto = true, in.Tunnel, in.TunnelID, in.IPProtocol
	e.isrc, e.idst = prefix16(in.SrcPrefix), prefix16(in.DstPrefix)
	e.ifamily = etherFamily(prefixFamily(in.SrcPrefix, in.DstPrefix), in.EtherType)
	e.isport[0], e.isport[1] = portRange(in.L4SrcPort)
	e.idport[0], e.idport[1] = portRange(in.L4DstPort)
	return e
}

// etherFamily narrows a family (0 any, 4, 6) by an EtherType match: the
// watchlist sees IP packets only, so another EtherType matches none
// (familyNone).
func etherFamily(fam uint8, et uint16) uint8 {
	switch et {
	case 0:
		return fam
	case sai.EtherTypeIPv4:
		return 4
	case sai.EtherTypeIPv6:
		return 6
	}
	return familyNone
}

// familyNone is a family no packet has.
const familyNone = 255

// writeEntries writes the entries (intdWlEntry in priority order, as
// bytes) into half h of the watchlist array, whose elements are 8-byte
// aligned in its mmap.
func (d *Dataplane) writeEntries(h uint8, b []byte) error {
	const size = int(unsafe.Sizeof(intdWlEntry{}))
	if size%8 != 0 {
		return fmt.Errorf("ebpf: watchlist entry of %d bytes: not 8-byte aligned", size)
	}
	m, err := d.objs.Watchlist.Memory()
	if err != nil {
		return fmt.Errorf("ebpf: watchlist map: %w", err)
	}
	if _, err := m.WriteAt(b, int64(int(h)*maxWatchlist*size)); err != nil {
		return fmt.Errorf("ebpf: watchlist map: %w", err)
	}
	return nil
}

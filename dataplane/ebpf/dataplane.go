package ebpf

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/hostlock"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/saireport"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Interface is a network interface the dataplane attaches to.
type Interface struct {
	Name string
	// ID is the level-1 interface id in INT metadata; 0 means the
	// ifindex (truncated to 16 bits).
	ID uint16
	// L2ID is the level-2 interface id; 0 means the ifindex.
	L2ID uint32
}

// Config configures a Dataplane.
type Config struct {
	// Interfaces are attached at New; see AddInterface.
	Interfaces []Interface
	// Reporter receives report events from the ring buffer; nil discards
	// them. A report.Pipeline (anything implementing ReportPipeline) is
	// configured from the sai objects and feeds Stats.Reports.
	Reporter report.Reporter
	// NoAttach registers interfaces in the maps without attaching
	// programs to them: for BPF_PROG_TEST_RUN tests and benchmarks.
	NoAttach bool
	// NoDropTrace does not attach the skb:kfree_skb tracepoint (no drop
	// reports).
	NoDropTrace bool
	// NoGSODetour does not create the GSO detour veth pair: watched GSO
	// super-packets then leave without INT (counted as not initiated).
	// It is implied by NoAttach.
	NoGSODetour bool
	// Logger logs what New finds and removes of a crashed instance
	// (default slog.Default()).
	Logger *slog.Logger
}

// requirements is what loading the programs needs of the system: the
// kfuncs bpf_cast_to_kern_ctx and bpf_rdonly_cast (Linux 6.2; also
// bpf_ktime_get_tai_ns, 6.1, and tp_btf tracing), kernel BTF for CO-RE,
// and the privileges to load programs and change qdiscs.
const requirements = "needs Linux 6.2 or later with BTF (/sys/kernel/btf/vmlinux), and CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)"

// ReportPipeline is what a *report.Pipeline offers besides Report.
type ReportPipeline = saireport.Pipeline

const (
	// Table sizes: the program's enum limit.
	maxWatchlist = int(intdLimitMAX_WL)
	maxSessions  = int(intdLimitMAX_SESS)
	maxSlots     = int(intdLimitMAX_SLOTS)
	maxQueueRep  = int(intdLimitMAX_QR)
	maxTxq       = int(intdLimitMAX_TXQ) // tx queues with state of their own
	maxIfindex   = int(intdLimitMAX_IFINDEX)

	filterHandle = 0x1d0
	filterPrio   = 0xc1d
)

type iface struct {
	cfg     Interface
	ifindex int
	mtu     int
	slot    int
	txqs    int   // tx queues of the device
	veth    bool  // a veth: its peer gets GSO packets whole
	speed   int64 // link speed, bits/s (0: unknown)
	// tx utilisation: the device's tx bytes at the last poll
	txBytes  uint64
	txAt     time.Time
	attached bool
	ownQdisc bool
	lock     *hostlock.Lock // held while attached
}

// Dataplane is the tc/eBPF INT dataplane. It implements sai.Backend.
type Dataplane struct {
	mu     sync.Mutex
	cfg    Config
	objs   intdObjects
	ifaces map[string]*iface
	slots  [maxSlots]bool
	tp     link.Link
	xmit   link.Link // intd_xmit on net_dev_start_xmit
	// tracersNew: attached by the apply in progress (undone if it fails)
	tracersNew tracing
	nl         *netlink.Handle // in the namespace New ran in (queue state)
	// gso: while int-endpoint is configured (wantGSODetour)
	gso        *gsoDetour
	tun        *tunDev        // while a tunnel address is configured (tunHandoff)
	ns         netns.NsHandle // the namespace New ran in (host changes made later)
	rd         *ringbuf.Reader
	done       chan struct{}
	reading    bool        // readEvents runs (and closes done)
	stopping   atomic.Bool // readEvents returns once the ring buffer is empty
	closed     bool
	log        *slog.Logger
	timeOff    uint64
	netns      uint32 // inode of the network namespace New ran in
	decapL4UDP bool   // bpf_skb_adjust_room clears a UDP tunnel's GSO state on decapsulation

	store     *sai.Store
	sessIdx   map[sai.OID]int
	wlIdx     map[sai.OID]int
	qrIdx     map[sai.OID]int
	qrOf      [maxSlots * maxTxq]uint8 // qr_of as written
	wlGen     uint32
	wlBase    uint8
	wlHalves  [2]wlHalf
	deferred  bool // sai.Deferrer: between Defer and Flush
	dirty     bool // objects changed while deferred
	reportErr error

	ev evState
}

// New loads the BPF programs, attaches them to cfg.Interfaces and starts
// reading reports. Close detaches everything. Unless cfg.NoAttach, it
// first removes what an instance that crashed left in the namespace (see
// the package documentation); an interface another running intd is
// attached to is refused.
func New(cfg Config) (*Dataplane, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dataplane{
		log:     cfg.Logger,
		cfg:     cfg,
		ifaces:  map[string]*iface{},
		sessIdx: map[sai.OID]int{},
		wlIdx:   map[sai.OID]int{},
		qrIdx:   map[sai.OID]int{},
		done:    make(chan struct{}),
	}
	d.slots[0] = true // "other"
	d.store = sai.NewStore(d.Capabilities(), d.checkAttrs)
	// The namespace of the calling thread (tests start dataplanes on
	// threads inside namespaces).
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("ebpf: network namespace: %w", err)
	}
	d.netns = uint32(st.Ino)
	if err := loadObjects(&d.objs, d.netns); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("ebpf: load: %+v", ve)
		}
		return nil, fmt.Errorf("ebpf: load (%s): %w", requirements, err)
	}
	d.timeOff = timeOffset()
	d.decapL4UDP = decapClearsUDPTunnel()
	nl, err := netlink.NewHandle()
	if err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("ebpf: netlink: %w", err)
	}
	d.nl = nl
	if d.ns, err = netns.Get(); err != nil {
		d.nl.Close()
		d.objs.Close()
		return nil, fmt.Errorf("ebpf: network namespace: %w", err)
	}
	if err := d.loadDropReasons(); err != nil {
		d.nl.Close()
		d.ns.Close()
		d.objs.Close()
		return nil, err
	}
	if !cfg.NoAttach {
		// Before anything is attached, so that nothing of ours is taken
		// for a leftover. The tunnel device first: without its filter
		// it would decapsulate anybody's tunnels.
		d.removeStaleTunDev()
		d.removeStaleFilters()
		d.removeStaleDetours(d.nl)
	}
	if d.rd, err = ringbuf.NewReader(d.objs.Events); err != nil {
		d.nl.Close()
		d.ns.Close()
		d.objs.Close()
		return nil, fmt.Errorf("ebpf: ring buffer: %w", err)
	}
	d.mu.Lock()
	err = d.compileLocked()
	d.mu.Unlock()
	if err != nil {
		d.Close()
		return nil, err
	}
	for _, i := range cfg.Interfaces {
		if err := d.AddInterface(i); err != nil {
			d.Close()
			return nil, err
		}
	}
	d.reading = true
	go d.readEvents()
	if !cfg.NoAttach {
		go d.pollUtil()
	}
	return d, nil
}

// loadObjects loads the programs and maps for the network namespace
// whose inode is netns.
func loadObjects(objs *intdObjects, netns uint32) error {
	spec, err := loadIntd()
	if err != nil {
		return err
	}
	if err := spec.Variables[intdVarOwnNetns].Set(netns); err != nil {
		return err
	}
	return spec.LoadAndAssign(objs, nil)
}

// The tracing programs run for every packet of the host, every namespace:
// they are attached only while the configuration uses them (tracersFor).
type tracing struct {
	drop  bool // intd_kfree_skb on skb:kfree_skb
	qtime bool // intd_xmit on net_dev_start_xmit
}

// tracersFor says which tracing programs a configuration needs. The
// queueing delay (intd_xmit following one packet per tx queue to the
// driver) is in every report a node's egress sends (hop latency, egress
// timestamp, the flow filter's latency buckets) and in the hop metadata
// of sessions asking for time: needed by postcards, queue reports,
// transit (the packet's instructions decide, and INT-MX transit
// reports), sinks (their reports carry their own hop) and sources with
// a session of time instructions or of INT-MX (reports per packet). The
// drop tracer reports drops, and also lets a followed packet dropped in
// its queue be replaced at once.
func (d *Dataplane) tracersFor(dt *sai.DTelAttrs) tracing {
	if dt == nil {
		return tracing{}
	}
	var t tracing
	switch {
	case dt.PostcardEnable, dt.IntTransitEnable:
		t.qtime = true
	case dt.QueueReportEnable && len(d.qrIdx) > 0:
		t.qtime = true
	case dt.IntEndpointEnable && len(dt.SinkPortList) > 0:
		t.qtime = true
	case dt.IntEndpointEnable:
		for oid := range d.sessIdx {
			a := d.attrs(oid).(sai.IntSessionAttrs)
			if a.Mode == sai.IntModeMX || a.Instructions&(spec.InstHopLatency|spec.InstEgressTimestamp) != 0 {
				t.qtime = true
			}
		}
	}
	t.drop = dt.DropReportEnable || t.qtime
	return t
}

// attachTracers attaches the tracing programs t needs that are not
// attached; on error it leaves them as they were.
func (d *Dataplane) attachTracers(t tracing) error {
	if d.cfg.NoAttach {
		return nil
	}
	var err error
	if t.qtime && d.xmit == nil {
		if d.xmit, err = link.AttachTracing(link.TracingOptions{Program: d.objs.IntdXmit}); err != nil {
			d.xmit = nil
			return fmt.Errorf("ebpf: attach net_dev_start_xmit (queueing delay): %w", err)
		}
		d.log.Debug("ebpf: queueing delay measured: net_dev_start_xmit attached")
		d.tracersNew.qtime = true
	}
	if t.drop && !d.cfg.NoDropTrace && d.tp == nil {
		if d.tp, err = link.AttachTracing(link.TracingOptions{Program: d.objs.IntdKfreeSkb}); err != nil {
			d.tp = nil
			d.undoTracers()
			return fmt.Errorf("ebpf: attach kfree_skb (drop reports): %w", err)
		}
		d.log.Debug("ebpf: drops traced: kfree_skb attached")
		d.tracersNew.drop = true
	}
	return nil
}

// undoTracers detaches what attachTracers attached since the last
// detachTracers: an apply that fails after attaching.
func (d *Dataplane) undoTracers() {
	if d.tracersNew.qtime {
		_ = d.xmit.Close()
		d.xmit = nil
	}
	if d.tracersNew.drop {
		_ = d.tp.Close()
		d.tp = nil
	}
	d.tracersNew = tracing{}
}

// detachTracers detaches the tracing programs t does not need, once the
// configuration word that stops using them is written.
func (d *Dataplane) detachTracers(t tracing) {
	d.tracersNew = tracing{}
	if !t.qtime && d.xmit != nil {
		if err := d.xmit.Close(); err != nil {
			d.log.Warn("ebpf: detaching net_dev_start_xmit", "err", err)
		}
		d.xmit = nil
		// A packet followed when it was detached never arrives: nothing
		// is followed when it is attached again. The last estimate stays
		// (queue state's delay).
		for k := range uint32(maxSlots * maxTxq) {
			var j intdSojourn
			if d.objs.Sojourns.Lookup(k, &j) == nil && j.Skb != 0 {
				j.Skb = 0
				_ = d.objs.Sojourns.Put(k, j)
			}
		}
		d.log.Debug("ebpf: queueing delay unused: net_dev_start_xmit detached")
	}
	if !t.drop && d.tp != nil {
		if err := d.tp.Close(); err != nil {
			d.log.Warn("ebpf: detaching kfree_skb", "err", err)
		}
		d.tp = nil
		d.log.Debug("ebpf: drops untraced: kfree_skb detached")
	}
}

// timeOffset is CLOCK_REALTIME - CLOCK_TAI (bpf_ktime_get_tai_ns), so
// that BPF timestamps are POSIX nanoseconds. Both clocks take the same
// NTP/PTP corrections: the offset only changes when the kernel's TAI
// offset is set (leap seconds, or a time daemon setting it).
func timeOffset() uint64 {
	var rt, tai unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_TAI, &tai)
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &rt)
	// Whole seconds: the kernel keeps the offset in seconds, and the two
	// reads are a few hundred ns apart.
	return uint64((rt.Nano() - tai.Nano() - 5e8) / 1e9 * 1e9)
}

// Close detaches the programs from every interface, stops reporting and
// frees the BPF objects.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var errs []error
	for name, i := range d.ifaces {
		errs = append(errs, d.detach(i))
		delete(d.ifaces, name)
	}
	if d.tun != nil {
		errs = append(errs, d.closeTunDev())
	}
	if d.gso != nil {
		errs = append(errs, d.closeGSODetour())
	}
	d.mu.Unlock()
	if d.tp != nil {
		errs = append(errs, d.tp.Close())
	}
	if d.xmit != nil {
		errs = append(errs, d.xmit.Close())
	}
	if d.nl != nil {
		d.nl.Close()
	}
	// Nothing adds events any more: readEvents hands the ones in the ring
	// buffer to the reporter, then returns.
	if d.reading {
		d.stopping.Store(true)
		<-d.done
	}
	if d.rd != nil {
		errs = append(errs, d.rd.Close())
	}
	errs = append(errs, d.objs.Close())
	d.ns.Close()
	return errors.Join(errs...)
}

// Interfaces lists the attached interfaces' names.
func (d *Dataplane) Interfaces() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for n := range d.ifaces {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// AddInterface attaches the programs to an interface (clsact qdisc,
// direct-action filters on ingress and egress).
func (d *Dataplane) AddInterface(cfg Interface) error {
	l, err := netlink.LinkByName(cfg.Name)
	if err != nil {
		return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("ebpf: closed")
	}
	if _, ok := d.ifaces[cfg.Name]; ok {
		return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, sai.ErrExists)
	}
	slot := slices.Index(d.slots[:], false)
	if slot < 0 {
		return fmt.Errorf("ebpf: interface %q: more than %d interfaces", cfg.Name, maxSlots-1)
	}
	if l.Attrs().Index >= maxIfindex {
		return fmt.Errorf("ebpf: interface %q: ifindex %d not below %d", cfg.Name, l.Attrs().Index, maxIfindex)
	}
	i := &iface{cfg: cfg, ifindex: l.Attrs().Index, mtu: l.Attrs().MTU, slot: slot, txqs: max(l.Attrs().NumTxQueues, 1),
		veth: l.Type() == "veth"}
	if i.cfg.ID == 0 {
		i.cfg.ID = uint16(i.ifindex)
	}
	if i.cfg.L2ID == 0 {
		i.cfg.L2ID = uint32(i.ifindex)
	}
	zeros := make([]intdCounters, ebpf.MustPossibleCPU())
	if err := d.objs.Ctrs.Put(uint32(slot), zeros); err != nil {
		return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
	}
	if i.speed, err = ethtool.Speed(cfg.Name); err != nil {
		i.speed = 0
	}
	if err := d.objs.TxUtil.Put(uint32(slot), uint32(utilUnknown)); err != nil {
		return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
	}
	for q := range maxTxq {
		// What a previous interface of the slot left.
		if err := d.objs.Sojourns.Put(uint32(slot*maxTxq+q), intdSojourn{}); err != nil {
			return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
		}
	}
	if err := d.objs.Ifaces.Put(uint32(i.ifindex), d.ifaceValue(i)); err != nil {
		return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
	}
	if !d.cfg.NoAttach {
		// One intd per interface: a second would replace the first's
		// filters.
		if i.lock, err = hostlock.Acquire(hostlock.Interface(i.ifindex)); err != nil {
			_ = d.objs.Ifaces.Put(uint32(i.ifindex), intdIface{})
			return fmt.Errorf("ebpf: interface %q: %w", cfg.Name, err)
		}
		if err := d.attach(i, l); err != nil {
			i.lock.Release()
			_ = d.objs.Ifaces.Put(uint32(i.ifindex), intdIface{})
			return err
		}
	}
	d.slots[slot] = true
	d.ifaces[cfg.Name] = i
	return nil
}

// RemoveInterface detaches the programs from an interface. Sink ports,
// queue reports and in-port matches naming it keep their configuration
// but stop matching.
func (d *Dataplane) RemoveInterface(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	i, ok := d.ifaces[name]
	if !ok {
		return fmt.Errorf("ebpf: interface %q: %w", name, sai.ErrNotFound)
	}
	err := d.detach(i)
	d.slots[i.slot] = false
	delete(d.ifaces, name)
	return err
}

func (d *Dataplane) attach(i *iface, l netlink.Link) error {
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: i.ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(q); err == nil {
		i.ownQdisc = true
	} else if !errors.Is(err, os.ErrExist) && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("ebpf: %s: add clsact qdisc: %w", i.cfg.Name, err)
	}
	for _, f := range []struct {
		parent uint32
		prog   *ebpf.Program
		name   string
	}{
		{netlink.HANDLE_MIN_INGRESS, d.objs.IntdIngress, "intd_ingress"},
		{netlink.HANDLE_MIN_EGRESS, d.objs.IntdEgress, "intd_egress"},
	} {
		bf := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: i.ifindex, Parent: f.parent,
				Handle: filterHandle, Protocol: unix.ETH_P_ALL, Priority: filterPrio},
			Fd: f.prog.FD(), Name: f.name, DirectAction: true,
		}
		if err := netlink.FilterReplace(bf); err != nil {
			_ = d.detach(i)
			return fmt.Errorf("ebpf: %s: attach %s: %w", i.cfg.Name, f.name, err)
		}
	}
	i.attached = true
	return nil
}

func (d *Dataplane) detach(i *iface) error {
	_ = d.objs.Ifaces.Put(uint32(i.ifindex), intdIface{})
	if d.cfg.NoAttach {
		return nil
	}
	var errs []error
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: i.ifindex, Parent: parent,
			Handle: filterHandle, Protocol: unix.ETH_P_ALL, Priority: filterPrio}}
		if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("ebpf: %s: detach: %w", i.cfg.Name, err))
		}
	}
	if i.ownQdisc {
		q := &netlink.GenericQdisc{
			QdiscAttrs: netlink.QdiscAttrs{LinkIndex: i.ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
			QdiscType:  "clsact",
		}
		if err := netlink.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("ebpf: %s: delete clsact: %w", i.cfg.Name, err))
		}
	}
	i.attached = false
	i.lock.Release()
	return errors.Join(errs...)
}

// ownFilter reports whether a tc filter is one attach or the GSO detour
// installs: intd's handle and priority, a BPF program named intd_*.
func ownFilter(f netlink.Filter) bool {
	b, ok := f.(*netlink.BpfFilter)
	return ok && b.Handle == filterHandle && b.Priority == filterPrio && strings.HasPrefix(b.Name, "intd_")
}

// removeStaleFilters deletes intd's tc filters from interfaces no running
// intd is attached to (an instance killed before Close left them, its
// programs still running with its last configuration), and the clsact
// qdiscs that held nothing else. GSO detour devices are left to
// removeStaleDetours.
func (d *Dataplane) removeStaleFilters() {
	links, err := netlink.LinkList()
	if err != nil {
		d.log.Warn("ebpf: listing interfaces for leftovers of a previous instance", "err", err)
		return
	}
	for _, l := range links {
		a := l.Attrs()
		if strings.HasPrefix(a.Name, detourPrefix) || hostlock.Held(hostlock.Interface(a.Index)) {
			continue
		}
		var stale []string
		others := 0
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				continue // no clsact qdisc
			}
			for _, f := range fs {
				if !ownFilter(f) {
					others++
					continue
				}
				if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
					d.log.Warn("ebpf: removing a filter left by a previous instance", "interface", a.Name, "err", err)
					others++
					continue
				}
				stale = append(stale, f.(*netlink.BpfFilter).Name)
			}
		}
		if len(stale) == 0 {
			continue
		}
		qdisc := false
		if others == 0 {
			q := &netlink.GenericQdisc{
				QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
				QdiscType:  "clsact",
			}
			qdisc = netlink.QdiscDel(q) == nil
		}
		d.log.Warn("removed tc filters left by an intd that did not stop cleanly", "interface", a.Name,
			"filters", stale, "clsact-removed", qdisc)
	}
}

func (d *Dataplane) ifaceValue(i *iface) intdIface {
	v := intdIface{L1Id: i.cfg.ID, L2Id: i.cfg.L2ID, Mtu: uint16(min(i.mtu, 0xffff)), Slot: uint8(i.slot), On: 1}
	if i.veth {
		v.Veth = 1
	}
	if _, o, ok := d.store.First(sai.ObjectTypeDTel); ok {
		if slices.Contains(o.(sai.DTelAttrs).SinkPortList, i.cfg.Name) {
			v.Sink = 1
		}
	}
	for oid := range d.qrIdx {
		if d.attrs(oid).(sai.QueueReportAttrs).Port == i.cfg.Name {
			v.Qr = 1
		}
	}
	return v
}

// utilUnknown is tx_util's value for an unknown utilisation.
const utilUnknown = 0xffffffff

// utilPeriod is how often tx utilisation is measured.
const utilPeriod = 100 * time.Millisecond

// pollUtil measures each interface's tx utilisation every utilPeriod
// until Close: the bits the device transmitted since the last poll
// against its capacity, the link speed or a tbf root qdisc's rate when
// lower, in tenths of a percent for intd_egress (tx_util). Every 100
// polls it also follows a change of the kernel's TAI offset (a time
// daemon setting it, a leap second) into cfg.time_offset.
func (d *Dataplane) pollUtil() {
	t := time.NewTicker(utilPeriod)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		for _, i := range d.ifaces {
			_ = d.objs.TxUtil.Put(uint32(i.slot), d.txUtil(i))
		}
		if n%100 == 0 {
			d.followTAI()
		}
		d.mu.Unlock()
	}
}

// txUtil returns i's tx utilisation since the last call in tenths of a
// percent, utilUnknown on the first call or without a capacity.
func (d *Dataplane) txUtil(i *iface) uint32 {
	l, err := d.nl.LinkByIndex(i.ifindex)
	if err != nil || l.Attrs().Statistics == nil {
		return utilUnknown
	}
	now, bytes := time.Now(), l.Attrs().Statistics.TxBytes
	prevBytes, prevAt := i.txBytes, i.txAt
	i.txBytes, i.txAt = bytes, now
	capacity := i.speed
	if qs, err := d.nl.QdiscList(l); err == nil {
		for _, q := range qs {
			if t, ok := q.(*netlink.Tbf); ok && t.Parent == netlink.HANDLE_ROOT && (capacity == 0 || int64(t.Rate)*8 < capacity) {
				capacity = int64(t.Rate) * 8
			}
		}
	}
	dt := now.Sub(prevAt).Seconds()
	if prevAt.IsZero() || capacity <= 0 || dt <= 0 || bytes < prevBytes {
		return utilUnknown
	}
	return uint32(min(1000, float64(bytes-prevBytes)*8/dt/float64(capacity)*1000))
}

// followTAI writes a changed CLOCK_REALTIME - CLOCK_TAI offset into
// cfg.time_offset. d.mu is held.
func (d *Dataplane) followTAI() {
	off := timeOffset()
	if off == d.timeOff {
		return
	}
	var c intdCfg
	if d.objs.CfgMap.Lookup(uint32(0), &c) != nil {
		return
	}
	c.TimeOffset = off
	if d.objs.CfgMap.Put(uint32(0), c) == nil {
		d.timeOff = off
		d.log.Info("the kernel's TAI offset changed: timestamps follow", "realtime-minus-tai-ns", int64(off))
	}
}

//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/dataplane/internal/hostlock"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// Config configures a Dataplane.
type Config struct {
	// Interfaces are the switch's ports, by name (required).
	Interfaces []string
	// Queues is the number of egress queues of every port, 1 (default)
	// to soft.MaxQueues; packets pick theirs by DSCP class selector.
	Queues int
	// Name is the switch's name (default: the host name).
	Name string
	// Logger logs host settings changed and restored, leftovers removed
	// and shaping found (default slog.Default()).
	Logger *slog.Logger
}

// Dataplane is the soft switch on AF_PACKET ports of the calling thread's
// network namespace, forwarding by the kernel's tables, reporting over UDP
// through the kernel's stack: what `intd run --dataplane soft` runs. It
// implements sai.Backend (the embedded switch's, with the frames dropped
// before they reach the switch - next hop not resolved, route through an
// interface that is not a port - added to its drop counters as routing
// misses).
//
// New prepares the host (see the package documentation, "Host
// settings"), Run forwards, Close stops forwarding, sends pending reports,
// closes the sockets and restores the host.
type Dataplane struct {
	*soft.Switch
	ns     netns.NsHandle // the namespace New ran in
	log    *slog.Logger
	ports  []*Port
	locks  []*hostlock.Lock
	host   *hostSettings
	pipe   *report.Pipeline
	kernel *Kernel
	node   *Node

	tunMu    sync.Mutex // the ports' Tunnel, opened and closed
	released bool       // release has run: no more tunnel output

	mu      sync.Mutex
	cancel  context.CancelFunc // stops Run
	running chan struct{}      // closed when Run returns
	closed  chan struct{}      // closed when Close has finished
}

// New opens the interfaces and prepares the host for the soft dataplane:
// leftovers of an instance that did not stop cleanly are removed, each
// interface is claimed (one intd per interface), the kernel is kept from
// forwarding what arrives on them and GRO/LRO are turned off, each change
// logged. On error nothing is left changed.
func New(cfg Config) (_ *Dataplane, err error) {
	if len(cfg.Interfaces) == 0 {
		return nil, errors.New("afpacket: no interfaces")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	d := &Dataplane{log: cfg.Logger, ns: -1}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	// Run's netlink work and Close's restoring happen here too, whatever
	// thread they are called on.
	if d.ns, err = netns.Get(); err != nil {
		return nil, fmt.Errorf("afpacket: network namespace: %w", err)
	}
	seen := map[string]bool{}
	for _, name := range cfg.Interfaces {
		if seen[name] {
			return nil, fmt.Errorf("afpacket: interface %q listed twice", name)
		}
		seen[name] = true
	}
	// Before claiming anything, so that nothing of ours is taken for a
	// leftover.
	removeStaleRules(d.log)
	var pcs []soft.PortConfig
	for _, name := range cfg.Interfaces {
		p, err := Open(name, PortConfig{Promiscuous: true})
		if err != nil {
			return nil, err
		}
		d.ports = append(d.ports, p)
		l, err := hostlock.Acquire(hostlock.Interface(p.Index))
		if err != nil {
			return nil, fmt.Errorf("afpacket: interface %q: %w", name, err)
		}
		d.locks = append(d.locks, l)
		pc := soft.PortConfig{Name: name, ID: uint16(p.Index), MTU: p.MTU, MAC: p.MAC, Rate: linkSpeed(name), Queues: cfg.Queues}
		// A tbf root qdisc's shaping is done by the switch's own egress
		// queue, so INT latency, queue occupancy and queue reports see it.
		if rate, limit, ok, err := Shaping(name); err == nil && ok {
			pc.Rate, pc.QueueBytes = rate, limit
			d.log.Info("port shaped like its tbf qdisc", "interface", name, "rate", rate, "queue-bytes", limit)
		}
		pcs = append(pcs, pc)
	}
	if d.host, err = takeOver(cfg.Interfaces, d.log); err != nil {
		return nil, err
	}
	clk := soft.NewRealClock()
	if d.pipe, err = report.New(report.Config{}, report.Options{Clock: clk.Now}); err != nil {
		return nil, err
	}
	// Session tunnels leave whole through a TAP per port (TunnelOut),
	// made when a configuration first needs them.
	if d.Switch, err = soft.New(soft.Config{Name: cfg.Name, Ports: pcs, Clock: clk, Reporter: d.pipe,
		TunnelOutput: d.tunnelOutput}); err != nil {
		return nil, err
	}
	d.kernel = NewKernel(d.Switch, d.ports, d.log)
	if err := d.kernel.Sync(); err != nil {
		return nil, err
	}
	if d.node, err = NewNode(d.Switch, d.ports, d.kernel); err != nil {
		return nil, err
	}
	return d, nil
}

// linkSpeed is the interface's line rate in bits/s (sysfs speed), or
// 10 Gbit/s when the device has none (veth): the soft switch's egress
// queue drains at it, so hop latency includes the time a packet spends in
// the switch before it is written to the socket.
func linkSpeed(name string) int64 {
	b, err := os.ReadFile("/sys/class/net/" + name + "/speed")
	if err == nil {
		if mbit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && mbit > 0 {
			return mbit * 1_000_000
		}
	}
	return 10_000_000_000
}

// Routes returns the number of routes installed from the kernel's tables.
func (d *Dataplane) Routes() int { return d.kernel.Routes() }

// Ports returns the dataplane's ports (their counters: Node.Stats).
func (d *Dataplane) Ports() []*Port { return d.ports }

// Node returns the dataplane's run loop, for its counters.
func (d *Dataplane) Node() *Node { return d.node }

// Run forwards until ctx ends or Close is called (returning nil), or a
// socket fails. It runs once.
func (d *Dataplane) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.closed != nil || d.running != nil {
		d.mu.Unlock()
		return errors.New("afpacket: dataplane closed or already running")
	}
	ctx, d.cancel = context.WithCancel(ctx)
	d.running = make(chan struct{})
	defer close(d.running)
	d.mu.Unlock()
	defer d.cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The thread stays locked and ends with the goroutine: it never
		// goes back to the runtime in another namespace.
		runtime.LockOSThread()
		if cur, err := netns.Get(); err != nil || !cur.Equal(d.ns) {
			cur.Close()
			if err := netns.Set(d.ns); err != nil {
				d.log.Error("afpacket: entering the network namespace; routes are not kept in sync", "err", err)
				return
			}
		} else {
			cur.Close()
		}
		d.kernel.Run(ctx)
	}()
	err := d.node.Run(ctx)
	d.cancel()
	wg.Wait()
	return err
}

// Close stops Run, sends the reports the pipeline holds back (coalesced),
// closes the sockets and restores the host settings New changed. It may
// be called more than once (later calls wait for the first to finish).
func (d *Dataplane) Close() error {
	d.mu.Lock()
	if d.closed != nil {
		closed := d.closed
		d.mu.Unlock()
		<-closed
		return nil
	}
	d.closed = make(chan struct{})
	defer close(d.closed)
	running := d.running
	if d.cancel != nil {
		d.cancel()
	}
	d.mu.Unlock()
	if running != nil {
		<-running
	}
	var err error
	if ierr := InNamespace(d.ns, func() error { err = d.release(); return nil }); ierr != nil {
		err = errors.Join(ierr, d.release())
	}
	return err
}

// release frees what New took, in the calling thread's namespace.
func (d *Dataplane) release() error {
	defer func() {
		if d.ns.IsOpen() {
			d.ns.Close()
		}
	}()
	var errs []error
	if d.pipe != nil {
		errs = append(errs, d.pipe.Close())
	}
	d.tunMu.Lock()
	d.released = true
	errs = append(errs, d.closeTunnels())
	d.tunMu.Unlock()
	for _, p := range d.ports {
		errs = append(errs, p.Close())
	}
	errs = append(errs, d.host.restore())
	for _, l := range d.locks {
		l.Release()
	}
	return errors.Join(errs...)
}

// tunnelOutput is the switch's soft.Config.TunnelOutput: it gives every
// port a TunnelOut (on) or takes them away (off), in the dataplane's
// namespace, each change logged, while the ports forward. Turning on is
// all or nothing.
func (d *Dataplane) tunnelOutput(on bool) error {
	d.tunMu.Lock()
	defer d.tunMu.Unlock()
	if d.released {
		if !on {
			return nil
		}
		return errors.New("afpacket: dataplane closed")
	}
	if !on {
		return InNamespace(d.ns, d.closeTunnels)
	}
	err := InNamespace(d.ns, func() error {
		for _, p := range d.ports {
			if p.CanTunnel() {
				continue
			}
			o, err := OpenTunnelOut(p.Name)
			if err != nil {
				return err
			}
			// Ready before the port sees it.
			p.setTunnel(o)
			d.log.Info("host setting changed; restored when no INT configuration needs it or at exit", "interface", p.Name,
				"setting", "session tunnel output", "added", "TAP "+o.tap+" redirected to the port, tx-udp_tnl-segmentation on",
				"why", "INT session tunnels leave whole through it")
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if cerr := InNamespace(d.ns, d.closeTunnels); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, ErrNoTunnelGSO) {
		return fmt.Errorf("%w: %w", soft.ErrNoSessionTunnels, ErrNoTunnelGSO)
	}
	return err
}

// closeTunnels removes the ports' TunnelOuts, in the calling thread's
// namespace, with d.tunMu held.
func (d *Dataplane) closeTunnels() error {
	var errs []error
	for _, p := range d.ports {
		// Taken from the port first: a super-packet sent meanwhile is cut.
		o := p.setTunnel(nil)
		if o == nil {
			continue
		}
		if err := o.Close(); err != nil {
			d.log.Error("could not restore a host setting", "interface", p.Name, "setting", "session tunnel output", "err", err)
			errs = append(errs, err)
		} else {
			d.log.Info("host setting restored", "interface", p.Name, "setting", "session tunnel output", "removed", "TAP "+o.tap)
		}
	}
	return errors.Join(errs...)
}

// Stats implements sai.Backend: the switch's counters, with the frames the
// node dropped before the switch (HoldDrops, NoPortRoute) counted as
// received and dropped for a routing miss.
func (d *Dataplane) Stats(ctx context.Context) (sai.Stats, error) {
	st, err := d.Switch.Stats(ctx)
	if err != nil {
		return st, err
	}
	for _, p := range d.ports {
		pi := st.Ports[p.Name]
		pi.Ifindex = uint32(p.Index)
		st.Ports[p.Name] = pi
	}
	for i, ps := range d.node.Stats() {
		n := ps.HoldDrops + ps.NoPortRoute
		if n == 0 {
			continue
		}
		st.Drops[spec.DropRoutingMiss] += n
		st.Node.InPackets += n
		st.Node.DroppedPackets += n
		c := st.Interfaces[d.ports[i].Name]
		c.InPackets += n
		c.DroppedPackets += n
		st.Interfaces[d.ports[i].Name] = c
	}
	return st, nil
}

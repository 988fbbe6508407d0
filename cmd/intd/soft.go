//go:build linux

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/intd-project/intd/dataplane/afpacket"
	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/server"
)

// The soft dataplane: the software INT switch (dataplane/soft) on
// AF_PACKET sockets of the --interfaces, forwarding by the namespace's
// kernel routing and neighbour tables (see dataplane/afpacket), reporting
// over UDP through the kernel's own stack. Run it with IP forwarding off
// (net.ipv4.ip_forward=0, net.ipv6.conf.all.forwarding=0): the kernel gets
// a copy of every frame the switch forwards and would forward it a second
// time.
func init() {
	dataplanes["soft"] = newSoftDataplane
}

func newSoftDataplane(ifaces []string) (server.Applier, error) {
	if len(ifaces) == 0 {
		return nil, errors.New("--interfaces is required (comma-separated interface names)")
	}
	log := slog.Default().With("dataplane", "soft")
	var ports []*afpacket.Port
	closeAll := func() {
		for _, p := range ports {
			p.Close()
		}
	}
	var pcs []soft.PortConfig
	for _, name := range ifaces {
		// A router forwards frames as they were received: no merging of
		// segments beyond the MTU on its ports.
		if err := afpacket.SetOffload(name, false, afpacket.GRO, afpacket.LRO); err != nil {
			log.Warn("could not turn off GRO/LRO", "interface", name, "err", err)
		}
		p, err := afpacket.Open(name, afpacket.PortConfig{Promiscuous: true})
		if err != nil {
			closeAll()
			return nil, err
		}
		ports = append(ports, p)
		pc := soft.PortConfig{Name: name, ID: uint16(p.Index), MTU: p.MTU, MAC: p.MAC, Rate: linkSpeed(name)}
		// A tbf root qdisc's shaping is done by the switch's own egress
		// queue, so INT latency, queue occupancy and queue reports see it.
		if rate, limit, ok, err := afpacket.Shaping(name); err == nil && ok {
			pc.Rate, pc.QueueBytes = rate, limit
			log.Info("port shaped like its tbf qdisc", "interface", name, "rate", rate, "queue-bytes", limit)
		}
		pcs = append(pcs, pc)
	}
	clk := soft.NewRealClock()
	pipe, err := report.New(report.Config{}, report.Options{Clock: clk.Now})
	if err != nil {
		closeAll()
		return nil, err
	}
	host, _ := os.Hostname()
	sw, err := soft.New(soft.Config{Name: host, Ports: pcs, Clock: clk, Reporter: pipe})
	if err != nil {
		closeAll()
		return nil, err
	}
	k := afpacket.NewKernel(sw, ports, log)
	if err := k.Sync(); err != nil {
		closeAll()
		return nil, err
	}
	node, err := afpacket.NewNode(sw, ports, k.Accept)
	if err != nil {
		closeAll()
		return nil, err
	}
	// The dataplane lives as long as the process.
	go k.Run(context.Background())
	go func() {
		if err := node.Run(context.Background()); err != nil {
			log.Error("dataplane stopped", "err", err)
			os.Exit(1)
		}
	}()
	log.Info("soft dataplane on AF_PACKET", "interfaces", ifaces, "routes", k.Routes())
	return dtel.New(sw, dtel.WithLogger(log), dtel.WithDataplaneName("soft")), nil
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

package lab

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// The DSCP marking of INT packets in the lab (INT over TCP/UDP, INT v2.1
// section 5.6.1); a collector decoding the lab's reports needs it.
const (
	DSCPValue = 0x17
	DSCPMask  = 0x3f
)

// QueueLatencyThreshold is the hop latency above which the lab's queue
// reports fire on fabric ports.
const QueueLatencyThreshold = time.Millisecond

// QueueReportRateLimit caps each fabric queue's congestion reports per
// second: the lab's bursty flow breaches s2's queue 100 times a second.
const QueueReportRateLimit = 100

// ReportSource is the source address of the i-th switch's (topology
// order, from 0) telemetry reports to an IPv4 collector.
func ReportSource(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 255, 0, byte(i + 1)}) }

// HopLatencyChange is the hop-latency change that makes `intd lab`'s
// switches report a flow again in the fixed filter mode (the lab runs
// sai's default, the adaptive filter). A software switch's queueing jitter is
// microseconds, not the nanoseconds of an ASIC: with the 256 ns default
// nearly every packet of a flow sharing a busy queue would count as a
// latency change. New keeps the default, which the package's report tests
// are written for.
const HopLatencyChange = 100 * time.Microsecond

// ReportTruncateSize is the lab's report sessions' truncate size: the
// whole INT stack of its longest path.
const ReportTruncateSize = 192

// DefaultSession is the lab's INT session: node id, level-1 ports, hop
// latency, queue occupancy and egress time at every hop (a sink's report
// carries what the stack asks, and the lab's report tests time it), TCP
// MSS
// clamped for the metadata.
func DefaultSession() sai.IntSessionAttrs {
	return sai.IntSessionAttrs{Mode: sai.IntModeMD, MaxHopCount: 8,
		Instructions: spec.InstNodeID | spec.InstL1Interfaces | spec.InstHopLatency | spec.InstQueue | spec.InstEgressTimestamp,
		ClampTCPMSS:  true}
}

// configure applies the default INT configuration to every switch
// through its sai.Backend (ConfigureSwitch), with reports to collector
// when set.
func (l *Lab) configure(collector string, more []string, distribute bool) error {
	var dsts []netip.AddrPort
	if collector != "" {
		for _, c := range append([]string{collector}, more...) {
			dst, err := netip.ParseAddrPort(c)
			if err != nil {
				return fmt.Errorf("lab: collector %q: %w", c, err)
			}
			dsts = append(dsts, dst)
		}
	}
	for i, name := range l.order {
		if err := l.ConfigureSwitchTo(l.switches[name], i, dsts, distribute, 0); err != nil {
			return err
		}
	}
	return nil
}

// ConfigureSwitch creates, through b, the lab's default INT configuration
// of the i-th switch (topology order, from 0): DSCP 0x17 marking, INT
// source on host-facing ports (watchlist on the ingress port), sink on
// host-facing ports, transit everywhere, queue reports on fabric ports,
// and a report session to collector when it is valid. hopLatencyChange
// sets the flow report filter's (0: sai's default). `intd lab` states the
// same configuration in YANG.
func (l *Lab) ConfigureSwitch(b sai.Backend, i int, dst netip.AddrPort, hopLatencyChange time.Duration) error {
	var dsts []netip.AddrPort
	if dst.IsValid() {
		dsts = []netip.AddrPort{dst}
	}
	return l.ConfigureSwitchTo(b, i, dsts, false, hopLatencyChange)
}

// ConfigureSwitchTo is ConfigureSwitch with a report session to every
// collector of dsts, distributing the reports by flow when distribute is
// set.
func (l *Lab) ConfigureSwitchTo(b sai.Backend, i int, dsts []netip.AddrPort, distribute bool, hopLatencyChange time.Duration) error {
	name := l.order[i]
	d := sai.DefaultDTelAttrs()
	d.SwitchID = l.NodeID(name)
	d.IntEndpointEnable, d.IntTransitEnable = true, true
	d.DropReportEnable, d.QueueReportEnable = true, true
	d.IntL4DSCP = sai.DSCPMatch{Value: DSCPValue, Mask: DSCPMask}
	d.SinkPortList = l.HostPorts(name)
	if l.filter != nil {
		d.FlowReport = *l.filter
	}
	if hopLatencyChange != 0 {
		d.FlowReport.HopLatencyChange = hopLatencyChange
	}
	if _, err := b.Create(d); err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	if len(dsts) > 0 {
		rs := sai.DefaultReportSessionAttrs()
		rs.TruncateSize = ReportTruncateSize
		rs.SrcIP = ReportSource(i)
		if dsts[0].Addr().Is6() {
			rs.SrcIP = netip.IPv6Loopback()
		}
		for _, dst := range dsts {
			rs.Destinations = append(rs.Destinations, sai.ReportDestination{IP: dst.Addr(), UDPPort: dst.Port()})
		}
		rs.DistributeByFlow = distribute
		rso, err := b.Create(rs)
		if err != nil {
			return fmt.Errorf("lab: %s: %w", name, err)
		}
		for _, et := range []sai.EventType{spec.EventFlowState, spec.EventDropReport,
			spec.EventQueueReportThresholdBreach, spec.EventQueueReportTailDrop} {
			if _, err := b.Create(sai.EventAttrs{Type: et, ReportSession: rso}); err != nil {
				return fmt.Errorf("lab: %s: %w", name, err)
			}
		}
	}
	for _, p := range l.FabricPorts(name) {
		if _, err := b.Create(sai.QueueReportAttrs{Port: p, LatencyThreshold: QueueLatencyThreshold,
			BreachQuota: sai.DefaultBreachQuota, TailDrop: true, RateLimit: QueueReportRateLimit}); err != nil {
			return fmt.Errorf("lab: %s: %w", name, err)
		}
	}
	hostPorts := l.HostPorts(name)
	if len(hostPorts) == 0 {
		return nil
	}
	sess, err := b.Create(DefaultSession())
	if err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	for j, p := range hostPorts {
		// One entry per host port, the first port's first.
		if _, err := b.Create(sai.WatchlistEntryAttrs{Priority: uint16(len(hostPorts) - j), Match: sai.WatchlistMatch{InPort: p},
			Action: sai.WatchlistAction{FlowOp: sai.FlowOpInt, IntSession: sess, FlowSamplePercent: 100,
				DropReportEnable: true, TailDropReportEnable: true}}); err != nil {
			return fmt.Errorf("lab: %s: %w", name, err)
		}
	}
	return nil
}

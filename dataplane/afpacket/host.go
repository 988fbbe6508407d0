//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/internal/hostlock"
)

// RulePriority is the priority of the policy routing rules ("ip rule")
// that keep the kernel from forwarding what arrives on the soft
// dataplane's ports: right after the local table (priority 0), so that
// traffic to the node's own addresses is still delivered.
const RulePriority = 1

// RuleProtocol marks those rules as intd's (FRA_PROTOCOL, shown by
// `ip rule` as "proto 29").
const RuleProtocol = 29

// forwardingRule is `ip [-6] rule add pref 1 iif <iface> proto 29
// blackhole`: packets received on iface that are not for a local address
// are dropped instead of forwarded by the kernel.
func forwardingRule(iface string, family int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = family
	r.Priority = RulePriority
	r.IifName = iface
	r.Protocol = RuleProtocol
	r.Type = unix.FR_ACT_BLACKHOLE
	return r
}

func familyName(family int) string {
	if family == netlink.FAMILY_V6 {
		return "ipv6"
	}
	return "ipv4"
}

// ruleString is the rule as `ip rule` prints it.
func ruleString(r *netlink.Rule) string {
	return fmt.Sprintf("pref %d iif %s proto %d blackhole", r.Priority, r.IifName, r.Protocol)
}

// hostSettings are the changes New made to the host, undone by restore.
type hostSettings struct {
	log      *slog.Logger
	rules    []*netlink.Rule
	offloads []offloadChange
}

type offloadChange struct {
	iface string
	o     ethtool.Offload
}

// removeStaleRules deletes intd's forwarding rules whose interface no
// running intd holds: an instance killed before it could restore them
// left them, and with them the kernel drops what arrives there.
func removeStaleRules(log *slog.Logger) {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RuleList(fam)
		if err != nil {
			log.Warn("afpacket: listing policy routing rules", "family", familyName(fam), "err", err)
			continue
		}
		for _, r := range rs {
			if r.Priority != RulePriority || r.Protocol != RuleProtocol || r.IifName == "" {
				continue
			}
			if l, err := net.InterfaceByName(r.IifName); err == nil && hostlock.Held(hostlock.Interface(l.Index)) {
				continue
			}
			del := forwardingRule(r.IifName, fam)
			if err := netlink.RuleDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
				log.Warn("afpacket: removing a rule left by a previous instance", "setting", familyName(fam)+" rule", "rule", ruleString(del), "err", err)
				continue
			}
			log.Warn("removed a policy routing rule left by an intd that did not stop cleanly", "setting", familyName(fam)+" rule", "rule", ruleString(del))
		}
	}
}

// takeOver prepares the ports' interfaces for the soft dataplane and logs
// every change: a blackhole rule per interface and family, so that the
// kernel does not forward a second copy of what the switch forwards, and
// GRO and LRO off, so that frames are forwarded as they were received.
// On error, what was changed is restored.
func takeOver(ifaces []string, log *slog.Logger) (*hostSettings, error) {
	h := &hostSettings{log: log}
	for _, name := range ifaces {
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			r := forwardingRule(name, fam)
			if err := netlink.RuleAdd(r); err != nil {
				if fam == netlink.FAMILY_V6 && errors.Is(err, unix.EAFNOSUPPORT) {
					continue // a kernel without IPv6 forwards none
				}
				h.restore()
				return nil, fmt.Errorf("afpacket: %s: keeping the kernel from forwarding (%s rule %s): %w", name, familyName(fam), ruleString(r), err)
			}
			h.rules = append(h.rules, r)
			log.Info("host setting changed; restored at exit", "interface", name, "setting", familyName(fam)+" rule",
				"added", ruleString(r), "why", "the kernel must not forward a second copy of what intd forwards")
		}
		for _, o := range []ethtool.Offload{ethtool.GRO, ethtool.LRO} {
			// Merged frames are cut again (Port.Segments), so an offload
			// that stays on costs work, not correctness.
			on, err := ethtool.GetOffload(name, o)
			if err != nil || !on {
				if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
					log.Warn("could not read an offload setting", "interface", name, "setting", o.String(), "err", err)
				}
				continue
			}
			if err := ethtool.SetOffload(name, false, o); err != nil {
				log.Warn("could not turn an offload off", "interface", name, "setting", o.String(), "err", err)
				continue
			}
			h.offloads = append(h.offloads, offloadChange{name, o})
			log.Info("host setting changed; restored at exit", "interface", name, "setting", o.String(),
				"was", "on", "now", "off", "why", "frames are forwarded as received, never merged beyond the MTU")
		}
	}
	return h, nil
}

// restore undoes the changes, in reverse order, and logs each.
func (h *hostSettings) restore() error {
	if h == nil {
		return nil
	}
	var errs []error
	for i := len(h.offloads) - 1; i >= 0; i-- {
		c := h.offloads[i]
		if err := ethtool.SetOffload(c.iface, true, c.o); err != nil {
			errs = append(errs, err)
			h.log.Error("could not restore a host setting", "interface", c.iface, "setting", c.o.String(), "err", err)
			continue
		}
		h.log.Info("host setting restored", "interface", c.iface, "setting", c.o.String(), "now", "on")
	}
	h.offloads = nil
	for i := len(h.rules) - 1; i >= 0; i-- {
		r := h.rules[i]
		if err := netlink.RuleDel(r); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("afpacket: removing %s rule %s: %w", familyName(r.Family), ruleString(r), err))
			h.log.Error("could not restore a host setting", "interface", r.IifName, "rule", ruleString(r), "err", err)
			continue
		}
		h.log.Info("host setting restored", "interface", r.IifName, "setting", familyName(r.Family)+" rule",
			"removed", ruleString(r))
	}
	h.rules = nil
	return errors.Join(errs...)
}

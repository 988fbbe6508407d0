// Package lab runs a small fabric of software INT switches (package
// dataplane/soft) in one process, with hosts and a traffic generator: the
// engine behind `intd lab`. No root or network namespaces are needed.
//
// The default topology is h1 - s1 - s2 - s3 - h2: s1 is the INT source, s2
// transit and s3 the sink. A JSON Topology describes others (more switches,
// parallel paths; routes are computed as shortest paths with ECMP).
package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// Topology describes a lab fabric.
type Topology struct {
	Switches []SwitchSpec `json:"switches"`
	Hosts    []HostSpec   `json:"hosts"`
	Links    []LinkSpec   `json:"links"`
}

// SwitchSpec is one software switch. NodeID 0 means its 1-based index.
type SwitchSpec struct {
	Name   string `json:"name"`
	NodeID uint32 `json:"node_id,omitempty"`
}

// HostSpec is a host attached to a switch port ("s1:h1").
type HostSpec struct {
	Name string     `json:"name"`
	IP   netip.Addr `json:"ip"`
	Port string     `json:"port"`
}

// LinkSpec connects two switch ports ("s1:p2", "s2:p1"). Rate is in
// Mbit/s (0: 1000), QueueBytes the egress queue size at each end (0:
// 256 KiB), MTU the IP MTU (0: 1500, INT then grows packets into it).
type LinkSpec struct {
	A          string `json:"a"`
	B          string `json:"b"`
	RateMbps   int64  `json:"rate_mbps,omitempty"`
	QueueBytes int    `json:"queue_bytes,omitempty"`
	MTU        int    `json:"mtu,omitempty"`
}

// DefaultTopology is h1 - s1 - s2 - s3 - h2 with 1 Gb/s links and a
// 100 Mb/s link from s2 to s3, so a burst congests s2's queue.
func DefaultTopology() *Topology {
	return &Topology{
		Switches: []SwitchSpec{{Name: "s1"}, {Name: "s2"}, {Name: "s3"}},
		Hosts: []HostSpec{
			{Name: "h1", IP: netip.MustParseAddr("10.0.1.1"), Port: "s1:h1"},
			{Name: "h2", IP: netip.MustParseAddr("10.0.2.1"), Port: "s3:h2"},
		},
		Links: []LinkSpec{
			{A: "s1:p2", B: "s2:p1", MTU: 1600},
			{A: "s2:p2", B: "s3:p1", RateMbps: 100, MTU: 1600},
		},
	}
}

// LoadTopology reads a JSON topology file.
func LoadTopology(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Topology
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("lab: %s: %w", path, err)
	}
	return &t, t.validate()
}

func splitPort(s string) (sw, port string, err error) {
	sw, port, ok := strings.Cut(s, ":")
	if !ok || sw == "" || port == "" {
		return "", "", fmt.Errorf("lab: %q is not switch:port", s)
	}
	return sw, port, nil
}

func (t *Topology) validate() error {
	sws := map[string]bool{}
	for _, s := range t.Switches {
		if s.Name == "" || sws[s.Name] {
			return fmt.Errorf("lab: switch name %q is empty or duplicated", s.Name)
		}
		sws[s.Name] = true
	}
	used := map[string]bool{}
	use := func(ep string) error {
		sw, _, err := splitPort(ep)
		if err != nil {
			return err
		}
		if !sws[sw] {
			return fmt.Errorf("lab: %q: no switch %q", ep, sw)
		}
		if used[ep] {
			return fmt.Errorf("lab: port %q is used twice", ep)
		}
		used[ep] = true
		return nil
	}
	for _, h := range t.Hosts {
		if !h.IP.Is4() {
			return fmt.Errorf("lab: host %s: IPv4 address required", h.Name)
		}
		if err := use(h.Port); err != nil {
			return err
		}
	}
	for _, l := range t.Links {
		if err := use(l.A); err != nil {
			return err
		}
		if err := use(l.B); err != nil {
			return err
		}
	}
	return nil
}

// clone returns a deep copy of t.
func (t *Topology) clone() *Topology {
	return &Topology{Switches: slices.Clone(t.Switches), Hosts: slices.Clone(t.Hosts), Links: slices.Clone(t.Links)}
}

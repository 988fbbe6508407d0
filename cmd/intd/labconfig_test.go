package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/intd-project/intd/dataplane/lab"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/sai"
)

// recorder passes every call to a real backend and keeps the objects that
// are live, as their attributes.
type recorder struct {
	sai.Backend
	live map[sai.OID]sai.Attrs
}

func (r *recorder) Create(a sai.Attrs) (sai.OID, error) {
	oid, err := r.Backend.Create(a)
	if err == nil {
		r.live[oid] = a
	}
	return oid, err
}

func (r *recorder) Set(oid sai.OID, a sai.Attrs) error {
	err := r.Backend.Set(oid, a)
	if err == nil {
		r.live[oid] = a
	}
	return err
}

func (r *recorder) Remove(oid sai.OID) error {
	err := r.Backend.Remove(oid)
	if err == nil {
		delete(r.live, oid)
	}
	return err
}

// objects lists the live objects as text, sorted, with references
// replaced by the kind of object they name (each switch has at most one
// report session and one INT session, so the kind identifies it),
// defaults resolved (a queue's reset threshold) and watchlist priorities
// replaced by their rank: the order of the entries is what they mean.
func (r *recorder) objects() []string {
	var prios []uint32
	for _, a := range r.live {
		if w, ok := a.(sai.WatchlistEntryAttrs); ok {
			prios = append(prios, uint32(w.Priority))
		}
	}
	slices.Sort(prios)
	var out []string
	for _, a := range r.live {
		switch x := a.(type) {
		case sai.QueueReportAttrs:
			x.ResetThreshold = x.EffectiveResetThreshold()
			a = x
		case sai.EventAttrs:
			ref := x.ReportSession.Type()
			x.ReportSession = 0
			a = x
			out = append(out, fmt.Sprintf("%T %+v -> %v", a, a, ref))
			continue
		case sai.WatchlistEntryAttrs:
			ref := x.Action.IntSession.Type()
			x.Action.IntSession = 0
			rank, _ := slices.BinarySearch(prios, uint32(x.Priority))
			x.Priority = 0
			a = x
			out = append(out, fmt.Sprintf("rank %d: %T %+v -> %v", rank, a, a, ref))
			continue
		}
		out = append(out, fmt.Sprintf("%T %+v", a, a))
	}
	slices.Sort(out)
	return out
}

// TestLabConfigEqualsLab: the YANG configuration `intd lab` applies,
// translated by dtel, creates on every switch the same sai objects as the
// lab package's own configuration, with reports to an IPv4 and an IPv6
// collector and with none, on the default topology and a larger one.
func TestLabConfigEqualsLab(t *testing.T) {
	// A ring with two hosts on s3 and a switch with no host (s4).
	ring := &lab.Topology{
		Switches: []lab.SwitchSpec{{Name: "s1"}, {Name: "s2"}, {Name: "s3", NodeID: 30}, {Name: "s4"}},
		Hosts: []lab.HostSpec{
			{Name: "h1", IP: netip.MustParseAddr("10.0.1.1"), Port: "s1:h1"},
			{Name: "h2", IP: netip.MustParseAddr("10.0.2.1"), Port: "s3:h2"},
			{Name: "h3", IP: netip.MustParseAddr("10.0.3.1"), Port: "s3:h3"},
		},
		Links: []lab.LinkSpec{{A: "s1:p2", B: "s2:p1"}, {A: "s2:p2", B: "s3:p1"}, {A: "s3:p2", B: "s4:p1"}, {A: "s4:p2", B: "s1:p3"}},
	}
	for _, topo := range []*lab.Topology{lab.DefaultTopology(), ring} {
		for _, collector := range []string{"", lab.DefaultCollector, "[::1]:32766"} {
			t.Run(fmt.Sprintf("%d switches, collector %q", len(topo.Switches), collector), func(t *testing.T) {
				var dst netip.AddrPort
				if collector != "" {
					dst = netip.MustParseAddrPort(collector)
				}
				direct, err := lab.New(lab.Options{Topology: topo, NoConfig: true, Flows: []lab.Flow{}})
				if err != nil {
					t.Fatal(err)
				}
				defer direct.Close()
				viaYANG, err := lab.New(lab.Options{Topology: topo, NoConfig: true, Flows: []lab.Flow{}})
				if err != nil {
					t.Fatal(err)
				}
				defer viaYANG.Close()
				for i, name := range direct.SwitchNames() {
					want := &recorder{Backend: direct.Backends()[name], live: map[sai.OID]sai.Attrs{}}
					if err := direct.ConfigureSwitch(want, i, dst, lab.HopLatencyChange); err != nil {
						t.Fatal(err)
					}
					got := &recorder{Backend: viaYANG.Backends()[name], live: map[sai.OID]sai.Attrs{}}
					cfg, err := labConfig(viaYANG, name, i, dst)
					if err != nil {
						t.Fatal(err)
					}
					if err := dtel.New(got).Apply(context.Background(), cfg); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					w, g := want.objects(), got.objects()
					if len(w) == 0 {
						t.Fatalf("%s: the lab created no object", name)
					}
					if !slices.Equal(g, w) {
						t.Errorf("%s: YANG configuration gives\n%s\nthe lab's own\n%s", name, join(g), join(w))
					}
				}
			})
		}
	}
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += "  " + x + "\n"
	}
	return out
}

// Package metrics exposes the counters of a gNMI server's targets to
// Prometheus. On every scrape it reads each target's latest published
// state, the tree gNMI Get serves, and turns every counter leaf (YANG
// type counter64 or counter32) into a counter named after its YANG path,
// and any other integer leaf of a 'counters' container into a gauge:
//
//	/int/interfaces/interface[name=eth1]/state/counters/in-packets
//	  -> intd_interface_in_packets_total{interface="eth1"}
//
// The name is "intd_", the path's elements joined by "_" without the
// top-level container, the 'state', 'config' and 'counters' containers
// and containers that only wrap a list, then "_total" for counters. List
// keys become
// labels named after the key, except a key called "name", which takes the
// list's name. An entry with a state/name leaf besides its key (drop
// reasons) is labelled by that name. With more than one target a
// "target" label tells them apart. Leaf names Prometheus' linter would
// read as units are spelled out (renamed below). It knows YANG, not
// packets.
package metrics

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intd-project/intd/gen"
)

// Source is what the exporter reads: a server's targets and the state
// published for each (server.Server satisfies it).
type Source interface {
	Targets() []string
	State(target string) (ygot.GoStruct, error)
}

// Exporter is a prometheus.Collector over a Source's counters. Its
// metrics depend on the state, so it describes none up front (an
// unchecked collector); names and labels follow from the schema alone,
// so they are the same on every scrape.
type Exporter struct {
	src  Source
	root *yang.Entry

	mu       sync.Mutex
	families map[string]*family // by schema path ("/int/node/state/counters/in-packets")
}

// family is how the leaves at one schema path are exported (nil desc: not
// a counter).
type family struct {
	desc   *prometheus.Desc
	name   string
	typ    prometheus.ValueType
	keys   []keyLabel // in path order
	target bool
}

// keyLabel maps one list key of the path to a label.
type keyLabel struct {
	elem  int    // index of the list element in the path
	key   string // key leaf name
	label string
}

// New returns an exporter of src's counters.
func New(src Source) (*Exporter, error) {
	root, err := gen.RootEntry()
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &Exporter{src: src, root: root, families: map[string]*family{}}, nil
}

// Describe implements prometheus.Collector: nothing, see Exporter.
func (e *Exporter) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	targets := e.src.Targets()
	multi := len(targets) > 1
	for _, t := range targets {
		dev, err := e.src.State(t)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("intd_state_error", "State could not be read.", nil, nil),
				fmt.Errorf("target %s: %w", t, err))
			continue
		}
		if dev == nil {
			continue
		}
		if err := e.collect(ch, dev, t, multi); err != nil {
			ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("intd_state_error", "State could not be read.", nil, nil),
				fmt.Errorf("target %s: %w", t, err))
		}
	}
}

func (e *Exporter) collect(ch chan<- prometheus.Metric, dev ygot.GoStruct, target string, multi bool) error {
	ns, err := ygot.TogNMINotifications(dev, 0, ygot.GNMINotificationsConfig{UsePathElem: true})
	if err != nil {
		return fmt.Errorf("flattening state: %w", err)
	}
	type leaf struct {
		elems []*gpb.PathElem
		val   *gpb.TypedValue
	}
	var leaves []leaf
	// Entries' state/name leaves, by the entry's path (for their labels).
	names := map[string]string{}
	for _, n := range ns {
		pre := n.GetPrefix().GetElem()
		for _, u := range n.GetUpdate() {
			el := append(append([]*gpb.PathElem(nil), pre...), u.GetPath().GetElem()...)
			if k := len(el); k >= 3 && el[k-1].GetName() == "name" && el[k-2].GetName() == "state" && len(el[k-3].GetKey()) > 0 {
				if _, isKey := el[k-3].GetKey()["name"]; !isKey {
					names[entryKey(el[:k-2])] = u.GetVal().GetStringVal()
				}
			}
			leaves = append(leaves, leaf{el, u.GetVal()})
		}
	}
	for _, l := range leaves {
		f := e.family(l.elems, multi)
		if f == nil {
			continue
		}
		v, ok := number(l.val)
		if !ok {
			continue
		}
		lv := make([]string, 0, len(f.keys)+1)
		for _, k := range f.keys {
			val := l.elems[k.elem].GetKey()[k.key]
			if n, ok := names[entryKey(l.elems[:k.elem+1])]; ok && n != "" {
				val = n
			}
			lv = append(lv, val)
		}
		if f.target {
			lv = append(lv, target)
		}
		m, err := prometheus.NewConstMetric(f.desc, f.typ, v, lv...)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		ch <- m
	}
	return nil
}

// entryKey identifies a list entry by its path (names and sorted keys).
func entryKey(el []*gpb.PathElem) string {
	var b strings.Builder
	for _, e := range el {
		b.WriteString("/" + e.GetName())
		ks := make([]string, 0, len(e.GetKey()))
		for k := range e.GetKey() {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			b.WriteString("[" + k + "=" + e.GetKey()[k] + "]")
		}
	}
	return b.String()
}

func number(v *gpb.TypedValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_UintVal:
		return float64(x.UintVal), true
	case *gpb.TypedValue_IntVal:
		return float64(x.IntVal), true
	}
	return 0, false
}

// family returns how leaves at el's schema path are exported, nil for
// leaves that are not counters.
func (e *Exporter) family(el []*gpb.PathElem, multi bool) *family {
	var b strings.Builder
	for _, x := range el {
		b.WriteString("/" + x.GetName())
	}
	path := b.String()
	if multi {
		path += "+target"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.families[path]; ok {
		return f
	}
	f := familyOf(e.root, names(el), multi)
	e.families[path] = f
	return f
}

func names(el []*gpb.PathElem) []string {
	out := make([]string, len(el))
	for i, x := range el {
		out[i] = x.GetName()
	}
	return out
}

// familyOf derives the metric of the leaf at schema path p (element names
// from the root), or nil when the leaf is not a counter or not in the
// schema.
func familyOf(root *yang.Entry, p []string, withTarget bool) *family {
	entries := make([]*yang.Entry, len(p))
	e := root
	for i, n := range p {
		if e = e.Dir[n]; e == nil {
			return nil
		}
		entries[i] = e
	}
	typ := valueType(e, p)
	if len(p) < 2 || typ == 0 {
		return nil
	}
	var parts []string
	f := &family{target: withTarget, typ: typ}
	used := map[string]bool{}
	for i := 1; i < len(p); i++ { // the top-level container is left out
		x := entries[i]
		switch {
		case p[i] == "state" || p[i] == "config" || p[i] == "counters":
			continue
		case x.IsContainer() && len(x.Dir) == 1 && onlyChild(x).IsList():
			continue
		}
		part := snake(p[i])
		if r, ok := renamed[p[i]]; ok {
			part = r
		}
		parts = append(parts, part)
		if !x.IsList() {
			continue
		}
		for _, k := range strings.Fields(x.Key) {
			label := snake(k)
			if k == "name" {
				label = snake(p[i])
			}
			if used[label] {
				label = snake(p[i]) + "_" + label
			}
			used[label] = true
			f.keys = append(f.keys, keyLabel{elem: i, key: k, label: label})
		}
	}
	f.name = "intd_" + strings.Join(parts, "_")
	if typ == prometheus.CounterValue {
		f.name += "_total"
	}
	labels := make([]string, 0, len(f.keys)+1)
	for _, k := range f.keys {
		labels = append(labels, k.label)
	}
	if withTarget {
		labels = append(labels, "target")
	}
	f.desc = prometheus.NewDesc(f.name, "YANG leaf /"+strings.Join(p, "/")+".", labels, nil)
	return f
}

// valueType: counters for the counter types, gauges for other integer
// leaves of a 'counters' container, 0 for the rest.
func valueType(e *yang.Entry, p []string) prometheus.ValueType {
	if e.IsDir() || e.Type == nil {
		return 0
	}
	switch e.Type.Name {
	case "counter64", "counter32", "zero-based-counter64", "zero-based-counter32":
		return prometheus.CounterValue
	}
	if len(p) >= 2 && p[len(p)-2] == "counters" {
		switch e.Type.Kind {
		case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64, yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
			return prometheus.GaugeValue
		}
	}
	return 0
}

func onlyChild(e *yang.Entry) *yang.Entry {
	for _, c := range e.Dir {
		return c
	}
	return nil
}

// renamed spells out leaf names whose one-letter words promtool takes for
// abbreviated units ("_m_"): the INT header's E and M bits.
var renamed = map[string]string{
	"e-bit-set": "hop_count_exceeded_bit_set",
	"m-bit-set": "mtu_exceeded_bit_set",
}

func snake(s string) string { return strings.ReplaceAll(s, "-", "_") }

package server

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/util"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
)

// Leafref validation. ygot's (ytypes.ValidateLeafRefData, part of
// ΛValidate) walks the whole tree with per-field schema look-ups and
// resolves each leafref by a path query: about two thirds of a Set of a
// 1000-entry watchlist. validateConfig runs ΛValidate without it (types,
// ranges, patterns, mandatory, list keys) and checks the leafrefs itself
// with the same rules, in one walk: every leaf whose type is leafref (not
// leaf-lists, not unions: ygot skips those too) and whose value is set
// and not the zero value must equal some set, non-zero node at its path;
// relative paths are resolved from the leaf's own data node, absolute
// ones once per validation into a value set. Paths with predicates or
// functions are not compiled; a model holding any makes validateConfig
// fall back to ygot's walk, so nothing is ever checked less.

// lrPath is a compiled leafref path: up ".." steps from the leaf's
// parent node (-1: absolute, from the root), then child names.
type lrPath struct {
	text  string
	up    int
	names []string
}

type lrModel struct {
	paths    map[*yang.Entry]*lrPath // every leafref leaf of the model
	fallback string                  // why ygot's walk is needed, or ""
}

var (
	lrOnce sync.Once
	lrM    *lrModel
)

func leafrefModel(root *yang.Entry) *lrModel {
	lrOnce.Do(func() {
		m := &lrModel{paths: map[*yang.Entry]*lrPath{}}
		var walk func(e *yang.Entry)
		walk = func(e *yang.Entry) {
			for _, c := range e.Dir {
				if c.IsDir() {
					walk(c)
					continue
				}
				if !util.IsLeafRef(c) || c.IsLeafList() {
					continue
				}
				p, err := compileLeafref(c.Type.Path)
				if err != nil {
					m.fallback = fmt.Sprintf("%s: %v", c.Path(), err)
					continue
				}
				m.paths[c] = anchored(c, p)
			}
		}
		walk(root)
		lrM = m
	})
	return lrM
}

func compileLeafref(s string) (*lrPath, error) {
	s = strings.Join(strings.Fields(s), "")
	if strings.ContainsAny(s, "[]()") {
		return nil, fmt.Errorf("leafref path %q has predicates or functions", s)
	}
	p := &lrPath{text: util.StripModulePrefixesStr(s)}
	if strings.HasPrefix(s, "/") {
		p.up = -1
		s = s[1:]
	} else {
		for strings.HasPrefix(s, "../") {
			p.up++
			s = s[3:]
		}
		if p.up == 0 {
			return nil, fmt.Errorf("leafref path %q is neither absolute nor relative with ../", s)
		}
	}
	for _, n := range strings.Split(s, "/") {
		if n == "" || n == "." || n == ".." {
			return nil, fmt.Errorf("leafref path %q: unsupported step %q", p.text, n)
		}
		if i := strings.IndexByte(n, ':'); i >= 0 {
			n = n[i+1:]
		}
		p.names = append(p.names, n)
	}
	return p, nil
}

// anchored is p made absolute when its ".." steps climb above every list
// around leaf: the target then does not depend on the leaf's list entry,
// so it is collected once per validation and a dangling reference is
// reported with the target's list name, as for absolute paths.
func anchored(leaf *yang.Entry, p *lrPath) *lrPath {
	if p.up < 0 {
		return p
	}
	a := leaf
	for i := 0; i < p.up && a != nil; i++ {
		a = a.Parent
	}
	var names []string
	for e := a; e != nil && e.Parent != nil; e = e.Parent {
		if e.IsList() || e.IsChoice() || e.IsCase() {
			return p
		}
		names = append([]string{e.Name}, names...)
	}
	if a == nil {
		return p
	}
	return &lrPath{text: p.text, up: -1, names: append(names, p.names...)}
}

// validateConfig is cand.ΛValidate() with the leafref part done by
// checkLeafrefs. prev, when set, is the configuration cand was made from:
// a reference left dangling by a removal is reported as such.
func validateConfig(root *yang.Entry, cand, prev ygot.GoStruct) error {
	m := leafrefModel(root)
	v, ok := cand.(interface {
		ΛValidate(...ygot.ValidationOption) error
	})
	if !ok {
		return fmt.Errorf("%T cannot be validated", cand)
	}
	if m.fallback != "" {
		return v.ΛValidate()
	}
	if err := v.ΛValidate(&ytypes.LeafrefOptions{IgnoreMissingData: true}); err != nil {
		return err
	}
	return checkLeafrefs(m, root, cand, prev)
}

// structField is a GoStruct field with a schema entry.
type structField struct {
	index int
	name  string
	entry *yang.Entry
}

var fieldCache sync.Map // reflect.Type -> []structField

func fieldsOf(t reflect.Type, e *yang.Entry) []structField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]structField)
	}
	var fs []structField
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Tag.Get("path")
		if ce := e.Dir[name]; ce != nil {
			fs = append(fs, structField{index: i, name: name, entry: ce})
		}
	}
	fieldCache.Store(t, fs)
	return fs
}

type lrChecker struct {
	m     *lrModel
	root  reflect.Value
	rootE *yang.Entry
	abs   map[*lrPath]*valueSet // absolute paths' target values
	prev  ygot.GoStruct
}

// lrStep is one data node on the way down: a container, or a list entry
// with its map key.
type lrStep struct {
	name  string
	entry *yang.Entry
	key   reflect.Value // valid for list entries
}

func checkLeafrefs(m *lrModel, root *yang.Entry, dev ygot.GoStruct, prev ygot.GoStruct) error {
	c := &lrChecker{m: m, root: reflect.ValueOf(dev).Elem(), rootE: root, abs: map[*lrPath]*valueSet{}, prev: prev}
	return c.walk(c.root, root, []reflect.Value{c.root}, []*yang.Entry{root}, nil)
}

// walk checks the leafrefs in struct v (schema e); stack holds v and its
// ancestors' data nodes (list entries and containers), innermost last;
// steps is the data path to v, for messages.
func (c *lrChecker) walk(v reflect.Value, e *yang.Entry, stack []reflect.Value, estack []*yang.Entry, steps []lrStep) error {
	for _, f := range fieldsOf(v.Type(), e) {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			if err := c.walk(fv.Elem(), f.entry, append(stack, fv.Elem()), append(estack, f.entry), append(steps, lrStep{name: f.name, entry: f.entry})); err != nil {
				return err
			}
		case fv.Kind() == reflect.Map:
			it := fv.MapRange()
			for it.Next() {
				ev := it.Value().Elem()
				if err := c.walk(ev, f.entry, append(stack, ev), append(estack, f.entry), append(steps, lrStep{name: f.name, entry: f.entry, key: it.Key()})); err != nil {
					return err
				}
			}
		default:
			p := c.m.paths[f.entry]
			if p == nil {
				continue
			}
			src := fv.Interface()
			if util.IsValueNilOrDefault(src) {
				continue
			}
			if !c.matches(p, src, stack, estack) {
				return c.dangling(p, f, deref(src), steps)
			}
		}
	}
	return nil
}

// dangling describes a leafref without target in YANG terms: the data
// path of the referring leaf, what it refers to, and, when this change
// removed the target, what still uses it.
func (c *lrChecker) dangling(p *lrPath, f structField, val any, steps []lrStep) error {
	leaf := stepsPath(steps) + "/" + f.name
	if p.up >= 0 {
		return fmt.Errorf("%s: %v matches no %s", leaf, val, p.text)
	}
	noun := p.text
	if t := schemaAt(c.rootE, p.names); t != nil && t.Parent != nil && t.Parent.IsList() && containsStr(strings.Fields(t.Parent.Key), t.Name) {
		noun = t.Parent.Name // the target is a list's key: name the list
	}
	if c.prev != nil {
		was := &valueSet{m: map[any]bool{}}
		c.collect(reflect.ValueOf(c.prev).Elem(), c.rootE, p.names, was.add)
		if was.has(val) {
			return fmt.Errorf("%s %v is used by %s (%s); remove or change that use in the same Set", noun, val, referrer(steps, leaf), leaf)
		}
	}
	return fmt.Errorf("%s: there is no %s %v", leaf, noun, val)
}

// schemaAt is the schema node at names below e, or nil.
func schemaAt(e *yang.Entry, names []string) *yang.Entry {
	for _, n := range names {
		if e = e.Dir[n]; e == nil {
			return nil
		}
	}
	return e
}

// stepsPath renders steps as a data path with list keys.
func stepsPath(steps []lrStep) string {
	var b strings.Builder
	for _, st := range steps {
		b.WriteByte('/')
		b.WriteString(st.name)
		if !st.key.IsValid() {
			continue
		}
		for _, kv := range keyValues(st) {
			fmt.Fprintf(&b, "[%s=%s]", kv[0], kv[1])
		}
	}
	return b.String()
}

// keyValues lists a list entry's key names and values, in key order.
func keyValues(st lrStep) [][2]string {
	names := strings.Fields(st.entry.Key)
	k := st.key
	if k.Kind() != reflect.Struct {
		return [][2]string{{names[0], fmt.Sprint(k.Interface())}}
	}
	var out [][2]string
	for _, n := range names {
		for i := 0; i < k.NumField(); i++ {
			if k.Type().Field(i).Tag.Get("path") == n {
				out = append(out, [2]string{n, fmt.Sprint(k.Field(i).Interface())})
			}
		}
	}
	return out
}

// referrer names the list entry a referring leaf belongs to the way an
// operator would ("watchlist entry 10", "event DROP_REPORT"), or the
// leaf's path when it belongs to none.
func referrer(steps []lrStep, leaf string) string {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		if !st.key.IsValid() {
			continue
		}
		noun := st.name
		// A list wrapped in a plural container below a container that is
		// not a top-level one takes that container's name too.
		if i >= 2 && !steps[i-2].key.IsValid() && i-2 > 0 {
			noun = steps[i-2].name + " " + noun
		}
		var vals []string
		for _, kv := range keyValues(st) {
			vals = append(vals, kv[1])
		}
		return noun + " " + strings.Join(vals, " ")
	}
	return leaf
}

func deref(x any) any {
	if rv := reflect.ValueOf(x); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		return rv.Elem().Interface()
	}
	return x
}

func (c *lrChecker) matches(p *lrPath, src any, stack []reflect.Value, estack []*yang.Entry) bool {
	want := deref(src)
	if p.up < 0 {
		set := c.abs[p]
		if set == nil {
			set = &valueSet{m: map[any]bool{}}
			c.collect(c.root, c.rootE, p.names, set.add)
			c.abs[p] = set
		}
		return set.has(want)
	}
	// The leaf's parent is stack's last node; each ".." beyond the first
	// goes one data node up.
	i := len(stack) - p.up
	if i < 0 {
		return false
	}
	found := false
	c.collect(stack[i], estack[i], p.names, func(x any) {
		if !found && reflect.DeepEqual(x, want) {
			found = true
		}
	})
	return found
}

// collect calls fn with every set, non-zero leaf value (dereferenced; a
// leaf-list's elements) at names below struct v (schema e).
func (c *lrChecker) collect(v reflect.Value, e *yang.Entry, names []string, fn func(any)) {
	for _, f := range fieldsOf(v.Type(), e) {
		if f.name != names[0] {
			continue
		}
		fv := v.Field(f.index)
		if fv.IsZero() {
			return
		}
		rest := names[1:]
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			if len(rest) > 0 {
				c.collect(fv.Elem(), f.entry, rest, fn)
			}
		case fv.Kind() == reflect.Map:
			if len(rest) > 0 {
				it := fv.MapRange()
				for it.Next() {
					c.collect(it.Value().Elem(), f.entry, rest, fn)
				}
			}
		case len(rest) == 0:
			if fv.Kind() == reflect.Slice {
				for j := 0; j < fv.Len(); j++ {
					if x := fv.Index(j).Interface(); !util.IsValueNilOrDefault(x) {
						fn(deref(x))
					}
				}
				return
			}
			if x := fv.Interface(); !util.IsValueNilOrDefault(x) {
				fn(deref(x))
			}
		}
		return
	}
}

// valueSet holds leaf values: comparable ones hashed, others in a list.
type valueSet struct {
	m     map[any]bool
	other []any
}

func (s *valueSet) add(x any) {
	if x != nil && reflect.TypeOf(x).Comparable() {
		s.m[x] = true
		return
	}
	s.other = append(s.other, x)
}

func (s *valueSet) has(x any) bool {
	if x != nil && reflect.TypeOf(x).Comparable() {
		if s.m[x] {
			return true
		}
	}
	for _, o := range s.other {
		if reflect.DeepEqual(o, x) {
			return true
		}
	}
	return false
}

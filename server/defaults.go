package server

import (
	"reflect"
	"sync"

	"github.com/openconfig/goyang/pkg/yang"

	"github.com/openconfig/ygot/ygot"
)

// YANG defaults in use (RFC 7950 §7.6.1) are data: Get returns them and
// a leaf falling back to its default is an update to the default value
// (gNMI §3.3.4, §3.5.2.3). The running configuration keeps what clients
// set, so that it is saved as set; what is published is a view of it
// with the defaults filled in. A default is in use when the leaf's
// nearest ancestor that is not a non-presence container exists: the root
// for top-level containers, else the list entry. Only configuration is
// filled: state comes from the applier.

// withDefaults returns dev with every configuration default in use
// filled in. dev is not modified: the result shares its leaves and
// copies the structs and maps on the way to them.
func (s *schema) withDefaults(dev ygot.GoStruct) ygot.GoStruct {
	if dev == nil || reflect.ValueOf(dev).IsNil() {
		dev = s.newRoot()
	}
	out, _ := fillDefaults(reflect.ValueOf(dev), s.root)
	return out.Interface().(ygot.GoStruct)
}

// fillDefaults returns a copy of the struct p points to (a zero one when
// p is nil) with defaults filled, and whether it holds any data.
func fillDefaults(p reflect.Value, e *yang.Entry) (reflect.Value, bool) {
	st := p.Type().Elem()
	cp := reflect.New(st)
	if !p.IsNil() {
		cp.Elem().Set(p.Elem())
	}
	v := cp.Elem()
	dflt := defaultsOf(st, e)
	has := false
	for _, f := range fieldsOf(st, e) {
		if !isConfigEntry(f.entry) {
			if !v.Field(f.index).IsZero() {
				has = true
			}
			continue
		}
		fv := v.Field(f.index)
		switch {
		case fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct:
			if f.entry.IsList() {
				continue
			}
			nv, ok := fillDefaults(fv, f.entry)
			if ok {
				fv.Set(nv)
				has = true
			}
		case fv.Kind() == reflect.Map:
			if fv.Len() == 0 {
				continue
			}
			m := reflect.MakeMapWithSize(fv.Type(), fv.Len())
			it := fv.MapRange()
			for it.Next() {
				nv, _ := fillDefaults(it.Value(), f.entry)
				m.SetMapIndex(it.Key(), nv)
			}
			fv.Set(m)
			has = true
		default:
			if fv.IsZero() {
				if d, ok := dflt[f.index]; ok {
					fv.Set(d)
				}
			}
			if !fv.IsZero() {
				has = true
			}
		}
	}
	return cp, has
}

var defaultCache sync.Map // reflect.Type -> map[int]reflect.Value

// defaultsOf returns, by field index, the default values of the leaves of
// a generated struct type, taken from its generated PopulateDefaults.
// The values are shared by every filled tree and never modified.
func defaultsOf(st reflect.Type, e *yang.Entry) map[int]reflect.Value {
	if d, ok := defaultCache.Load(st); ok {
		return d.(map[int]reflect.Value)
	}
	out := map[int]reflect.Value{}
	inst := reflect.New(st)
	if pd, ok := inst.Interface().(interface{ PopulateDefaults() }); ok {
		pd.PopulateDefaults()
		for _, f := range fieldsOf(st, e) {
			if f.entry.IsDir() || !isConfigEntry(f.entry) {
				continue
			}
			if fv := inst.Elem().Field(f.index); !fv.IsZero() {
				out[f.index] = fv
			}
		}
	}
	defaultCache.Store(st, out)
	return out
}

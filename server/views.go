package server

import (
	"reflect"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
)

// keepFunc decides whether a leaf belongs to a view (a Get data type).
type keepFunc func(e *yang.Entry) bool

func keepFor(t gpb.GetRequest_DataType) keepFunc {
	switch t {
	case gpb.GetRequest_CONFIG:
		return isConfigEntry
	case gpb.GetRequest_STATE:
		return func(e *yang.Entry) bool { return !isConfigEntry(e) }
	case gpb.GetRequest_OPERATIONAL:
		return func(e *yang.Entry) bool { return !isConfigEntry(e) && !hasConfigTwin(e) }
	}
	return nil
}

// filterTree removes, in place, every leaf of the GoStruct s (whose schema
// is e) that keep refuses, then every container and list entry left
// without leaves other than list keys. It reports whether s still holds
// data. ygot has PruneConfigFalse for the CONFIG case; the STATE and
// OPERATIONAL views need the other cuts, so one walk serves all three.
func filterTree(s ygot.GoStruct, e *yang.Entry, keep keepFunc) bool {
	return filterStruct(reflect.ValueOf(s).Elem(), e, keep, nil)
}

func filterStruct(v reflect.Value, e *yang.Entry, keep keepFunc, keys []string) bool {
	nonEmpty := false
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("path")
		if name == "" {
			continue
		}
		if j := strings.LastIndexByte(name, '/'); j >= 0 {
			name = name[j+1:]
		}
		ce := e.Dir[name]
		fv := v.Field(i)
		if ce == nil || fv.IsZero() {
			continue
		}
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			if filterStruct(fv.Elem(), ce, keep, nil) {
				nonEmpty = true
			} else {
				fv.Set(reflect.Zero(fv.Type()))
			}
		case fv.Kind() == reflect.Map:
			lk := strings.Fields(ce.Key)
			for _, k := range fv.MapKeys() {
				if !filterStruct(fv.MapIndex(k).Elem(), ce, keep, lk) {
					fv.SetMapIndex(k, reflect.Value{})
				}
			}
			if fv.Len() == 0 {
				fv.Set(reflect.Zero(fv.Type()))
			} else {
				nonEmpty = true
			}
		default: // a leaf or leaf-list
			if containsStr(keys, name) {
				continue // list keys stay while the entry has other data
			}
			if keep(ce) {
				nonEmpty = true
			} else {
				fv.Set(reflect.Zero(fv.Type()))
			}
		}
	}
	return nonEmpty
}

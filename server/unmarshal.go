package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
)

// unmarshalJSON merges a JSON object, already checked and normalized
// against the schema (yangjson.NormalizeJSON: RFC 7951 numbers, keys present
// in list entries), into the generated struct v of schema node e, as
// ytypes.Unmarshal does: members set fields, list entries are created or
// merged into the existing entry of the same key. ytypes.Unmarshal formats
// every container and list it fills for a debug message it then drops
// (about a third of a 1000-entry Set's allocations); the values here are
// already checked, so the walk is a plain one.
func unmarshalJSON(v reflect.Value, e *yang.Entry, obj map[string]any) error {
	for _, f := range fieldsOf(v.Type(), e) {
		val, ok := memberValue(obj, f.name)
		if !ok {
			continue
		}
		if err := setField(v.Field(f.index), f.entry, val); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// memberValue is obj's member name, module-qualified or not.
func memberValue(obj map[string]any, name string) (any, bool) {
	if v, ok := obj[name]; ok {
		return v, true
	}
	for k, v := range obj {
		if i := strings.IndexByte(k, ':'); i >= 0 && k[i+1:] == name {
			return v, true
		}
	}
	return nil, false
}

func setField(fv reflect.Value, e *yang.Entry, val any) error {
	switch {
	case e.IsList():
		items, ok := val.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %T", val)
		}
		if fv.Kind() != reflect.Map {
			return fmt.Errorf("unkeyed lists are not supported")
		}
		if fv.IsNil() {
			fv.Set(reflect.MakeMap(fv.Type()))
		}
		for _, it := range items {
			obj, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("want objects in the array, got %T", it)
			}
			key, err := listKey(fv.Type().Key(), e, obj)
			if err != nil {
				return err
			}
			ent := fv.MapIndex(key)
			if !ent.IsValid() || ent.IsNil() {
				ent = reflect.New(fv.Type().Elem().Elem())
			}
			if err := unmarshalJSON(ent.Elem(), e, obj); err != nil {
				return err
			}
			fv.SetMapIndex(key, ent)
		}
	case e.IsDir():
		obj, ok := val.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %T", val)
		}
		if fv.IsNil() {
			fv.Set(reflect.New(fv.Type().Elem()))
		}
		return unmarshalJSON(fv.Elem(), e, obj)
	case e.IsLeafList():
		items, ok := val.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %T", val)
		}
		s := reflect.MakeSlice(fv.Type(), 0, len(items))
		for _, it := range items {
			x, err := scalarValue(fv.Type().Elem(), it)
			if err != nil {
				return err
			}
			s = reflect.Append(s, x)
		}
		fv.Set(s)
	default:
		t := fv.Type()
		ptr := t.Kind() == reflect.Pointer
		if ptr {
			t = t.Elem()
		}
		x, err := scalarValue(t, val)
		if err != nil {
			return err
		}
		if ptr {
			p := reflect.New(t)
			p.Elem().Set(x)
			x = p
		}
		fv.Set(x)
	}
	return nil
}

// listKey builds the map key of a list entry from its key leaves.
func listKey(kt reflect.Type, e *yang.Entry, obj map[string]any) (reflect.Value, error) {
	names := strings.Fields(e.Key)
	if kt.Kind() != reflect.Struct || len(names) == 1 {
		val, ok := memberValue(obj, names[0])
		if !ok {
			return reflect.Value{}, fmt.Errorf("entry lacks its key %s", names[0])
		}
		return scalarValue(kt, val)
	}
	k := reflect.New(kt).Elem()
	for i := 0; i < kt.NumField(); i++ {
		name := kt.Field(i).Tag.Get("path")
		val, ok := memberValue(obj, name)
		if !ok {
			return reflect.Value{}, fmt.Errorf("entry lacks its key %s", name)
		}
		x, err := scalarValue(kt.Field(i).Type, val)
		if err != nil {
			return reflect.Value{}, err
		}
		k.Field(i).Set(x)
	}
	return k, nil
}

// scalarValue converts a normalized JSON leaf value to Go type t.
func scalarValue(t reflect.Type, val any) (reflect.Value, error) {
	if t.Implements(goEnumType) {
		s, ok := val.(string)
		if !ok {
			return reflect.Value{}, fmt.Errorf("want an enumeration name, got %T", val)
		}
		n, ok := enumValue(t, s)
		if !ok {
			return reflect.Value{}, fmt.Errorf("%q is not a value of %s", s, t.Name())
		}
		return reflect.ValueOf(n).Convert(t), nil
	}
	// Every generated package defines its own Binary and YANGEmpty.
	switch {
	case t.Name() == "Binary" && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		s, _ := val.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		return reflect.ValueOf(b).Convert(t), err
	case t.Name() == "YANGEmpty" && t.Kind() == reflect.Bool:
		return reflect.ValueOf(true).Convert(t), nil
	}
	text := func() string {
		switch x := val.(type) {
		case json.Number:
			return x.String()
		case string:
			return x
		}
		return fmt.Sprint(val)
	}
	x := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return reflect.Value{}, fmt.Errorf("want a string, got %T", val)
		}
		x.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return reflect.Value{}, fmt.Errorf("want a boolean, got %T", val)
		}
		x.SetBool(b)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(text(), 10, t.Bits())
		if err != nil {
			return reflect.Value{}, err
		}
		x.SetUint(u)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(text(), 10, t.Bits())
		if err != nil {
			return reflect.Value{}, err
		}
		x.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(text(), 64)
		if err != nil {
			return reflect.Value{}, err
		}
		x.SetFloat(f)
	default:
		return reflect.Value{}, fmt.Errorf("unsupported field type %v", t)
	}
	return x, nil
}

var (
	goEnumType = reflect.TypeOf((*ygot.GoEnum)(nil)).Elem()
	enumValues sync.Map // reflect.Type -> map[string]int64
)

// enumValue is the value of the enumeration or identity name (module
// prefix or not) of the generated enum type t.
func enumValue(t reflect.Type, name string) (int64, bool) {
	m, ok := enumValues.Load(t)
	if !ok {
		vals := map[string]int64{}
		if ge, ok := reflect.Zero(t).Interface().(ygot.GoEnum); ok {
			for n, def := range ge.ΛMap()[t.Name()] {
				vals[def.Name] = n
			}
		}
		m, _ = enumValues.LoadOrStore(t, vals)
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	n, ok := m.(map[string]int64)[name]
	return n, ok
}

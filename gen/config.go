// Hand-written helpers next to the generated code; `make generate` only
// rewrites intd.go and versions.go.

package gen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/openconfig/goyang/pkg/yang"
)

var (
	schemaOnce sync.Once
	schemaRoot *yang.Entry
	schemaErr  error
)

// RootEntry returns the schema entry of the fake root (Device).
func RootEntry() (*yang.Entry, error) {
	schemaOnce.Do(func() {
		s, err := Schema()
		if err != nil {
			schemaErr = fmt.Errorf("loading schema: %w", err)
			return
		}
		schemaRoot = s.RootSchema()
	})
	return schemaRoot, schemaErr
}

// ParseConfig decodes an RFC 7951 JSON document into a Device and validates
// it against the schema (types, ranges, patterns, leafrefs). Errors name the
// data path of the offending node, with list keys, e.g.
// /intd-int:int/int-sessions/int-session[name=md]/config/mode.
func ParseConfig(data []byte) (*Device, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config is not JSON: %w", err)
	}
	root, err := RootEntry()
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(root, doc, ""); err != nil {
		return nil, err
	}
	dev := &Device{}
	if err := Unmarshal(data, dev); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := dev.ΛValidate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return dev, nil
}

// CheckJSON walks an RFC 7951 JSON value against the schema entry it
// belongs to and reports the first unknown node or invalid enumeration or
// identity value with its data path. ygot's own unmarshalling reports these
// without the path; everything else is left to it. prefix is the data path
// of v.
func CheckJSON(e *yang.Entry, v any, prefix string) error {
	switch {
	case e.IsList():
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want a JSON array for list %s", orRoot(prefix), e.Name)
		}
		for _, it := range items {
			obj, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: want JSON objects in list %s", orRoot(prefix), e.Name)
			}
			if err := checkMembers(e, obj, prefix+listKeys(e, obj)); err != nil {
				return err
			}
		}
		return nil
	case e.IsDir():
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want a JSON object for container %s", orRoot(prefix), e.Name)
		}
		return checkMembers(e, obj, prefix)
	case e.IsLeafList():
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want a JSON array for leaf-list %s", orRoot(prefix), e.Name)
		}
		for _, it := range items {
			if err := checkLeafValue(e, e.Type, it, prefix); err != nil {
				return err
			}
		}
		return nil
	default:
		return checkLeafValue(e, e.Type, v, prefix)
	}
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func checkMembers(e *yang.Entry, obj map[string]any, prefix string) error {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names) // report the same error every time
	for _, name := range names {
		local := name
		if i := strings.IndexByte(name, ':'); i >= 0 {
			local = name[i+1:]
		}
		child := e.Dir[local]
		if child == nil {
			return fmt.Errorf("%s/%s: unknown node", prefix, name)
		}
		if err := CheckJSON(child, obj[name], prefix+"/"+name); err != nil {
			return err
		}
	}
	return nil
}

func listKeys(e *yang.Entry, obj map[string]any) string {
	var b strings.Builder
	for _, k := range strings.Fields(e.Key) {
		fmt.Fprintf(&b, "[%s=%v]", k, obj[k])
	}
	return b.String()
}

func checkLeafValue(e *yang.Entry, t *yang.YangType, v any, path string) error {
	if t == nil {
		return nil
	}
	switch t.Kind {
	case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yuint8, yang.Yuint16, yang.Yuint32:
		if _, ok := v.(float64); !ok {
			return fmt.Errorf("%s: want a JSON number, got %s", path, jsonKind(v))
		}
	case yang.Ybool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want true or false, got %s", path, jsonKind(v))
		}
	case yang.Yenum:
		s, ok := v.(string)
		if !ok || !t.Enum.IsDefined(s) {
			return fmt.Errorf("%s: %v is not one of %s", path, v, strings.Join(t.Enum.Names(), ", "))
		}
	case yang.Yidentityref:
		s, ok := v.(string)
		if !ok || !identityDefined(t.IdentityBase, s) {
			return fmt.Errorf("%s: %v is not an identity derived from %s", path, v, t.IdentityBase.Name)
		}
	case yang.Yunion:
		// A union is valid when any member accepts the value.
		var first error
		for _, m := range t.Type {
			err := checkLeafValue(e, m, v, path)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		if first != nil && unionOfNamed(t) {
			return first
		}
	}
	return nil
}

// unionOfNamed reports whether every member of a union is an enumeration
// or identityref, the only kinds checked here.
func unionOfNamed(t *yang.YangType) bool {
	for _, m := range t.Type {
		if m.Kind != yang.Yenum && m.Kind != yang.Yidentityref {
			return false
		}
	}
	return true
}

func identityDefined(base *yang.Identity, value string) bool {
	if base == nil {
		return false
	}
	local := value
	if i := strings.IndexByte(value, ':'); i >= 0 {
		local = value[i+1:]
	}
	for _, id := range base.Values {
		if id.Name == local {
			return true
		}
	}
	return false
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

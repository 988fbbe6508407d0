package server

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/gen"
)

// schema bundles what the server needs to know about the YANG model: the
// fake root's entry and which module each top-level node belongs to.
type schema struct {
	root     *yang.Entry
	moduleOf map[string]string // top-level node name -> module name
	modules  map[string]bool   // module names served
}

var (
	schemaOnce sync.Once
	theSchema  *schema
	schemaErr  error
)

func loadSchema() (*schema, error) {
	schemaOnce.Do(func() {
		root, err := gen.RootEntry()
		if err != nil {
			schemaErr = err
			return
		}
		s := &schema{root: root, moduleOf: map[string]string{}, modules: map[string]bool{}}
		t := reflect.TypeOf(gen.Device{})
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			s.moduleOf[f.Tag.Get("path")] = f.Tag.Get("module")
		}
		for _, m := range gen.ΓModelData {
			s.modules[m.Name] = true
		}
		theSchema = s
	})
	return theSchema, schemaErr
}

// resolved is one concrete schema path that a (possibly wildcarded)
// request path expands to. Element names are concrete; list keys are all
// present, "*" where any value matches.
type resolved struct {
	path  *gpb.Path
	entry *yang.Entry
	wild  bool // some key is "*"
}

// queryStrings turns a resolved path into the string form the gNMI cache
// indexes leaves by (names, then key values sorted by key name).
func (r resolved) queryStrings() []string {
	out := make([]string, 0, len(r.path.Elem)*2)
	for _, e := range r.path.Elem {
		out = append(out, e.Name)
		if len(e.Key) == 0 {
			continue
		}
		names := make([]string, 0, len(e.Key))
		for k := range e.Key {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, e.Key[k])
		}
	}
	return out
}

// pathError carries the gRPC code a malformed or unknown path maps to.
type pathError struct {
	code codes.Code
	msg  string
}

func (e *pathError) Error() string { return e.msg }

func (e *pathError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

func badPath(format string, args ...any) error {
	return &pathError{codes.InvalidArgument, fmt.Sprintf(format, args...)}
}

func unknownPath(format string, args ...any) error {
	return &pathError{codes.NotFound, fmt.Sprintf(format, args...)}
}

// acceptedOrigin reports whether origin names this server's data: unset,
// "openconfig" (the schema is OpenConfig-style), or one of the modules.
func (s *schema) acceptedOrigin(origin string) bool {
	return origin == "" || origin == "openconfig" || s.modules[origin]
}

// joinPaths joins a request prefix and path into one element list, checking
// the origin and the deprecated element field.
func (s *schema) joinPaths(prefix, p *gpb.Path) ([]*gpb.PathElem, string, error) {
	prefixElems, err := elemsOf(prefix)
	if err != nil {
		return nil, "", err
	}
	pathElems, err := elemsOf(p)
	if err != nil {
		return nil, "", err
	}
	origin := prefix.GetOrigin()
	if o := p.GetOrigin(); o != "" {
		if origin != "" && origin != o {
			return nil, "", badPath("origin %q in path conflicts with origin %q in prefix", o, origin)
		}
		origin = o
	}
	if !s.acceptedOrigin(origin) {
		return nil, "", badPath("unsupported origin %q", origin)
	}
	elems := make([]*gpb.PathElem, 0, len(prefixElems)+len(pathElems))
	elems = append(elems, prefixElems...)
	elems = append(elems, pathElems...)
	if s.modules[origin] && len(elems) > 0 {
		name := localName(elems[0].GetName())
		if m, ok := s.moduleOf[name]; ok && m != origin {
			return nil, "", badPath("%s is not in module %s (origin)", name, origin)
		}
	}
	return elems, origin, nil
}

// elemsOf returns a path's elements, converting the deprecated string
// 'element' form (still sent by some clients, e.g. gnmi_cli's subscribe).
func elemsOf(p *gpb.Path) ([]*gpb.PathElem, error) {
	// Clients that send both (as gnmi_cli does) mean the same path: elem
	// wins.
	//lint:ignore SA1019 the deprecated form is what those clients send
	elements := p.GetElement()
	if len(elements) == 0 || len(p.GetElem()) > 0 {
		return p.GetElem(), nil
	}
	out := make([]*gpb.PathElem, 0, len(elements))
	for _, s := range elements {
		sp, err := ygot.StringToStructuredPath("/" + s)
		if err != nil || len(sp.GetElem()) != 1 {
			return nil, badPath("cannot parse path element %q", s)
		}
		out = append(out, sp.GetElem()[0])
	}
	return out, nil
}

func localName(n string) string {
	if i := strings.IndexByte(n, ':'); i >= 0 {
		return n[i+1:]
	}
	return n
}

// resolve expands a path into concrete schema paths: element-name wildcards
// ("*" one level, "..." any number of levels) are expanded against the
// schema and missing list keys become "*".
func (s *schema) resolve(elems []*gpb.PathElem) ([]resolved, error) {
	var out []resolved
	seen := map[string]bool{}
	err := s.expand(s.root, elems, nil, false, false, &out, seen)
	if err != nil && len(out) == 0 {
		return nil, err
	}
	if len(out) == 0 {
		return nil, unknownPath("%s matches no schema node", pathString(elems))
	}
	return out, nil
}

func (s *schema) expand(e *yang.Entry, elems, acc []*gpb.PathElem, wild, lenient bool, out *[]resolved, seen map[string]bool) error {
	if len(elems) == 0 {
		p := &gpb.Path{Elem: append([]*gpb.PathElem(nil), acc...)}
		key := pathString(p.Elem)
		if !seen[key] {
			seen[key] = true
			*out = append(*out, resolved{path: p, entry: e, wild: wild})
		}
		return nil
	}
	pe := elems[0]
	switch pe.GetName() {
	case "":
		return badPath("empty element name in path %s", pathString(append(acc, elems...)))
	case "*":
		var first error
		for _, c := range sortedChildren(e) {
			if len(pe.GetKey()) > 0 && !c.IsList() {
				continue
			}
			if err := s.child(c, pe.GetKey(), elems[1:], acc, wild, true, out, seen); err != nil && first == nil {
				first = err
			}
		}
		return first
	case "...":
		if len(elems) == 1 {
			// A trailing "..." is the subtree itself.
			return s.expand(e, nil, acc, wild, lenient, out, seen)
		}
		first := s.expand(e, elems[1:], acc, wild, true, out, seen)
		for _, c := range sortedChildren(e) {
			if !c.IsDir() {
				continue
			}
			if err := s.child(c, nil, elems, acc, wild, true, out, seen); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	name := pe.GetName()
	if i := strings.IndexByte(name, ':'); i >= 0 {
		mod := name[:i]
		name = name[i+1:]
		if !s.modules[mod] {
			return unknownPath("unknown module %q in path element %q", mod, pe.GetName())
		}
	}
	c := e.Dir[name]
	if c == nil {
		return unknownPath("%s: no schema node %q under %s", pathString(append(acc, elems...)), name, orRoot(pathString(acc)))
	}
	return s.child(c, pe.GetKey(), elems[1:], acc, wild, lenient, out, seen)
}

func (s *schema) child(c *yang.Entry, keys map[string]string, rest, acc []*gpb.PathElem, wild, lenient bool, out *[]resolved, seen map[string]bool) error {
	ne := &gpb.PathElem{Name: c.Name}
	if c.IsList() {
		names := strings.Fields(c.Key)
		ne.Key = make(map[string]string, len(names))
		for k := range keys {
			if !containsStr(names, k) {
				return badPath("%s has no key %q (keys: %s)", c.Name, k, c.Key)
			}
		}
		for _, k := range names {
			v, ok := keys[k]
			if !ok || v == "*" {
				v = "*"
				wild = true
			}
			ne.Key[k] = v
		}
	} else if len(keys) > 0 {
		return badPath("%s is not a list but the path gives it keys", c.Name)
	}
	if len(rest) > 0 && !c.IsDir() {
		return unknownPath("%s is a leaf; the path continues below it", c.Name)
	}
	return s.expand(c, rest, append(acc, ne), wild, lenient, out, seen)
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func sortedChildren(e *yang.Entry) []*yang.Entry {
	names := make([]string, 0, len(e.Dir))
	for n := range e.Dir {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*yang.Entry, 0, len(names))
	for _, n := range names {
		out = append(out, e.Dir[n])
	}
	return out
}

// pathString renders elements in the gNMI path string convention. It is
// on every published leaf's path (the publisher keys leaves by it), so it
// sizes its buffer once and sorts keys only when there are several.
func pathString(elems []*gpb.PathElem) string {
	n := 0
	for _, e := range elems {
		n += 1 + len(e.GetName())
		for k, v := range e.GetKey() {
			n += 3 + len(k) + len(v)
		}
	}
	var b strings.Builder
	b.Grow(n)
	var names []string
	for _, e := range elems {
		b.WriteByte('/')
		b.WriteString(e.GetName())
		keys := e.GetKey()
		switch len(keys) {
		case 0:
			continue
		case 1:
			for k, v := range keys {
				writeKey(&b, k, v)
			}
			continue
		}
		names = names[:0]
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			writeKey(&b, k, keys[k])
		}
	}
	return b.String()
}

func writeKey(b *strings.Builder, k, v string) {
	b.WriteByte('[')
	b.WriteString(k)
	b.WriteByte('=')
	b.WriteString(v)
	b.WriteByte(']')
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Leaf classification, used for data types and TARGET_DEFINED.

// isConfigEntry reports whether a schema node is configuration (config
// true and no config-false ancestor).
func isConfigEntry(e *yang.Entry) bool { return !e.ReadOnly() }

// hasConfigTwin reports whether a config-false leaf echoes a configuration
// leaf: a leaf of a 'state' container whose sibling 'config' container has
// a leaf of the same name (the OpenConfig applied-config pattern).
func hasConfigTwin(e *yang.Entry) bool {
	p := e.Parent
	if p == nil || p.Name != "state" || p.Parent == nil {
		return false
	}
	cfg := p.Parent.Dir["config"]
	return cfg != nil && cfg.Dir[e.Name] != nil
}

// isCounterPath reports whether a data path lies under a 'counters'
// container: such leaves are counters, sampled under TARGET_DEFINED.
func isCounterPath(p *gpb.Path) bool {
	for _, e := range p.GetElem() {
		if e.GetName() == "counters" {
			return true
		}
	}
	return false
}

package server

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/gen/yangjson"
)

// schema bundles what the server needs to know about the YANG model: the
// fake root's entry, which module each top-level node belongs to, how to
// make and parse roots of its generated type.
type schema struct {
	root     *yang.Entry
	moduleOf map[string]string // top-level node name -> module name
	modules  map[string]bool   // module names served
	models   []*gpb.ModelData  // served modules with versions (Capabilities)
	rootType reflect.Type      // the generated root struct
	parse    func([]byte) (ygot.GoStruct, error)
	model    *yangjson.Model // identities' modules, from the generated enumerations
}

// Schema is a YANG model the server serves, as ygot generated it. Make one
// with NewSchema; a Server serves intd's model unless given another with
// WithSchema.
type Schema struct{ s *schema }

// NewSchema describes a generated model to the server: ys is what the
// generated package's Schema function returns, models names the served
// modules with their versions (revisions), and parse, when not nil,
// decodes a saved configuration (RFC 7951 JSON) into a validated root;
// without it targets cannot save or load their configuration.
func NewSchema(ys *ytypes.Schema, models []*gpb.ModelData, parse func([]byte) (ygot.GoStruct, error)) (*Schema, error) {
	if ys == nil || ys.Root == nil {
		return nil, errors.New("schema: no root")
	}
	rt := reflect.TypeOf(ys.Root)
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("schema: root %T is not a pointer to a generated struct", ys.Root)
	}
	root := ys.RootSchema()
	if root == nil {
		return nil, fmt.Errorf("schema: no entry for root %T", ys.Root)
	}
	s := &schema{root: root, moduleOf: map[string]string{}, modules: map[string]bool{}, rootType: rt.Elem(), parse: parse, model: yangjson.NewModel(enumTable(ys.Root))}
	for i := 0; i < rt.Elem().NumField(); i++ {
		f := rt.Elem().Field(i)
		s.moduleOf[f.Tag.Get("path")] = f.Tag.Get("module")
	}
	for _, m := range models {
		s.modules[m.GetName()] = true
		s.models = append(s.models, &gpb.ModelData{Name: m.GetName(), Organization: m.GetOrganization(), Version: m.GetVersion()})
	}
	return &Schema{s: s}, nil
}

// newRoot returns an empty root of the schema's generated type.
func (s *schema) newRoot() ygot.GoStruct {
	return reflect.New(s.rootType).Interface().(ygot.GoStruct)
}

// enumTable is the enumeration table of the generated package root
// belongs to (every generated enumeration's ΛMap returns it whole).
func enumTable(root ygot.GoStruct) map[string]map[int64]ygot.EnumDefinition {
	et, ok := root.(interface {
		ΛEnumTypeMap() map[string][]reflect.Type
	})
	if !ok {
		return nil
	}
	for _, ts := range et.ΛEnumTypeMap() {
		for _, t := range ts {
			if e, ok := reflect.Zero(t).Interface().(ygot.GoEnum); ok {
				return e.ΛMap()
			}
		}
	}
	return nil
}

// CheckConfig checks a whole configuration (a root of this schema)
// against the schema as a Set replacing everything would (completing
// list keys in cfg), before any dataplane sees it. The dataplane's own
// checks come when it is applied.
func (sc *Schema) CheckConfig(cfg ygot.GoStruct) error {
	if reflect.TypeOf(cfg) != reflect.PointerTo(sc.s.rootType) {
		return fmt.Errorf("configuration is a %T, not a root of this schema", cfg)
	}
	return (&Server{schema: sc.s}).checkCandidate(cfg, nil)
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
// A path naming nodes the schema (or the request's use_models) does not
// have is not a valid path: INVALID_ARGUMENT (§3.3.1, §3.5.2.4), except in
// a Set's update and replace, where §3.4.7 makes it NOT_FOUND (setPath).
type pathError struct {
	code    codes.Code
	msg     string
	unknown bool // names a node the schema does not have
}

func (e *pathError) Error() string { return e.msg }

func (e *pathError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

func badPath(format string, args ...any) error {
	return &pathError{code: codes.InvalidArgument, msg: fmt.Sprintf(format, args...)}
}

func unknownPath(format string, args ...any) error {
	return &pathError{code: codes.InvalidArgument, msg: fmt.Sprintf(format, args...), unknown: true}
}

// asNotFound turns an unknown-path error into NOT_FOUND.
func asNotFound(err error) error {
	var pe *pathError
	if errors.As(err, &pe) && pe.unknown {
		return status.Error(codes.NotFound, pe.msg)
	}
	return err
}

// modelSet is the modules a Get or Subscribe may use (use_models, §2.6);
// nil allows every served module.
type modelSet map[string]bool

// useModels checks a request's use_models against the served modules.
func (s *schema) useModels(ms []*gpb.ModelData) (modelSet, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	set := modelSet{}
	for _, m := range ms {
		name := m.GetName()
		md := s.servedModel(name)
		if md == nil {
			return nil, status.Errorf(codes.InvalidArgument, "use_models: model %q is not served (see Capabilities)", name)
		}
		if v := m.GetVersion(); v != "" && v != md.GetVersion() {
			return nil, status.Errorf(codes.InvalidArgument, "use_models: model %s version %q is not served (version %q is)", name, v, md.GetVersion())
		}
		if o := m.GetOrganization(); o != "" && o != md.GetOrganization() {
			return nil, status.Errorf(codes.InvalidArgument, "use_models: model %s of organization %q is not served (%q's is)", name, o, md.GetOrganization())
		}
		set[name] = true
	}
	for name := range s.modules {
		if !set[name] {
			return set, nil
		}
	}
	return nil, nil // every module: no restriction
}

func (s *schema) servedModel(name string) *gpb.ModelData {
	for _, m := range s.models {
		if m.GetName() == name {
			return m
		}
	}
	return nil
}

// forOrigin narrows a model set to an origin that names a module: the
// data of <origin, path> is that module's (§2.7), which matters at the
// root and under wildcards.
func (s *schema) forOrigin(origin string, m modelSet) modelSet {
	if !s.modules[origin] || (m != nil && !m[origin]) {
		return m
	}
	return modelSet{origin: true}
}

// key names the set, for sharing work between requests with equal sets.
func (m modelSet) key() string {
	if m == nil {
		return ""
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// allows reports whether a schema node may be used: it is defined in one
// of the modules, and, for an identityref, its identities are too (values
// from a module outside the set must not be sent, §2.6).
func (m modelSet) allows(s *schema, e *yang.Entry) bool {
	if m == nil {
		return true
	}
	if !m[s.entryModule(e)] {
		return false
	}
	if e.IsDir() {
		return true
	}
	return m.identitiesAllowed(s, yangjson.LeafType(e))
}

func (m modelSet) identitiesAllowed(s *schema, t *yang.YangType) bool {
	if t == nil {
		return true
	}
	switch t.Kind {
	case yang.Yunion:
		for _, mt := range t.Type {
			if !m.identitiesAllowed(s, mt) {
				return false
			}
		}
	case yang.Yidentityref:
		if t.IdentityBase == nil {
			return true
		}
		for _, id := range t.IdentityBase.Values {
			if mod := s.model.IdentityModule(id); mod != "" && !m[mod] {
				return false
			}
		}
	}
	return true
}

// allowsPath is allows for the schema node of a data path.
func (m modelSet) allowsPath(s *schema, p *gpb.Path) bool {
	if m == nil {
		return true
	}
	e := s.entry(p.GetElem())
	return e != nil && m.allows(s, e)
}

// entryModule names the module defining a schema node: the module of its
// top-level ancestor (the served modules augment none of each other).
func (s *schema) entryModule(e *yang.Entry) string {
	for e.Parent != nil && e.Parent.Parent != nil {
		e = e.Parent
	}
	return s.moduleOf[e.Name]
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
func (s *schema) resolve(elems []*gpb.PathElem, models modelSet) ([]resolved, error) {
	var out []resolved
	seen := map[string]bool{}
	x := &expander{s: s, models: models, out: &out, seen: seen}
	err := x.expand(s.root, elems, nil, false, false)
	if err != nil && len(out) == 0 {
		return nil, err
	}
	if len(out) == 0 {
		return nil, unknownPath("%s matches no schema node", pathString(elems))
	}
	return out, nil
}

// expander holds what one resolve shares across its recursion.
type expander struct {
	s      *schema
	models modelSet
	out    *[]resolved
	seen   map[string]bool
}

func (x *expander) expand(e *yang.Entry, elems, acc []*gpb.PathElem, wild, lenient bool) error {
	s := x.s
	if len(elems) == 0 {
		p := &gpb.Path{Elem: append([]*gpb.PathElem(nil), acc...)}
		key := pathString(p.Elem)
		if !x.seen[key] {
			x.seen[key] = true
			*x.out = append(*x.out, resolved{path: p, entry: e, wild: wild})
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
			if !x.models.allows(s, c) {
				continue
			}
			if err := x.child(c, pe.GetKey(), elems[1:], acc, wild, true); err != nil && first == nil {
				first = err
			}
		}
		return first
	case "...":
		if len(elems) == 1 {
			// A trailing "..." is the subtree itself.
			return x.expand(e, nil, acc, wild, lenient)
		}
		first := x.expand(e, elems[1:], acc, wild, true)
		for _, c := range sortedChildren(e) {
			if !c.IsDir() || !x.models.allows(s, c) {
				continue
			}
			if err := x.child(c, nil, elems, acc, wild, true); err != nil && first == nil {
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
	if !x.models.allows(s, c) {
		return unknownPath("%s: %s is outside the models in use_models (%s)", pathString(append(acc, elems...)), name, x.models.key())
	}
	return x.child(c, pe.GetKey(), elems[1:], acc, wild, lenient)
}

func (x *expander) child(c *yang.Entry, keys map[string]string, rest, acc []*gpb.PathElem, wild, lenient bool) error {
	ne := &gpb.PathElem{Name: c.Name}
	if c.IsList() {
		names := strings.Fields(c.Key)
		ne.Key = make(map[string]string, len(names))
		for k := range keys {
			if !containsStr(names, k) {
				return badPath("%s: %s has no key %q (keys: %s)", pathString(append(acc, &gpb.PathElem{Name: c.Name, Key: keys})), c.Name, k, c.Key)
			}
		}
		for _, k := range names {
			v, ok := keys[k]
			if !ok || v == "*" {
				v = "*"
				wild = true
			} else if ke := c.Dir[k]; ke != nil {
				// A key value must be a value of its leaf's type.
				if _, _, err := x.s.model.NormalizeJSON(ke, v, k, yangjson.LegacyJSON); err != nil {
					return badPath("%s: bad key: %v", pathString(append(acc, &gpb.PathElem{Name: c.Name, Key: keys})), err)
				}
			}
			ne.Key[k] = v
		}
	} else if len(keys) > 0 {
		return badPath("%s: %s is not a list but the path gives it keys", pathString(append(acc, &gpb.PathElem{Name: c.Name, Key: keys})), c.Name)
	}
	if len(rest) > 0 && !c.IsDir() {
		return unknownPath("%s: %s is a leaf; the path continues below it", pathString(append(append(acc, ne), rest...)), c.Name)
	}
	return x.expand(c, rest, append(acc, ne), wild, lenient)
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

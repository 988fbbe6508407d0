// Package yangjson checks and normalizes JSON values against a YANG
// schema (goyang entries), for any generated model: RFC 7951 and gNMI's
// legacy JSON spellings, ranges, patterns, identities and list limits,
// with errors that name the data path.
package yangjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/util"
	"github.com/openconfig/ygot/ygot"
)

// DecodeJSON decodes one JSON value, keeping numbers as json.Number so
// that integers of 64 bits and fractions are seen as sent.
func DecodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// JSONRules selects which JSON spellings of leaf values are accepted.
type JSONRules int

const (
	// RFC7951 reads JSON_IETF: integers of up to 32 bits are JSON
	// numbers, 64-bit integers and decimal64 strings (numbers are taken
	// too), identities "module:NAME" (or NAME), enumerations and strings
	// JSON strings, booleans true or false, empty [null].
	RFC7951 JSONRules = iota
	// LegacyJSON reads gNMI's plain JSON encoding, which RFC 7159 leaves
	// unconstrained: as RFC7951, and integers and decimal64 of any width
	// may also be strings holding the number.
	LegacyJSON
)

// Model is what checking values needs beyond their schema entries: the
// module defining each identity, which the schema ygot embeds does not
// keep but the generated enumeration table does.
type Model struct {
	identMods map[string]string
}

// NewModel returns the Model of a generated package from its enumeration
// table (the generated ΛEnum, or a GoEnum's ΛMap(); nil for a model
// without enumerations).
func NewModel(enums map[string]map[int64]ygot.EnumDefinition) *Model {
	m := &Model{identMods: map[string]string{}}
	for _, defs := range enums {
		for _, d := range defs {
			if d.DefiningModule != "" {
				m.identMods[d.Name] = d.DefiningModule
			}
		}
	}
	return m
}

// IdentityModule names the module that defines an identity, the prefix
// RFC 7951 gives its values ("" when unknown).
func (m *Model) IdentityModule(id *yang.Identity) string { return m.identMods[id.Name] }

// CheckJSON walks an RFC 7951 JSON value (as encoding/json decodes it)
// against the schema entry it belongs to and reports the first unknown
// node or invalid leaf value with its data path. prefix is the data path
// of v.
func (m *Model) CheckJSON(e *yang.Entry, v any, prefix string) error {
	_, _, err := m.NormalizeJSON(e, v, prefix, RFC7951)
	return err
}

// NormalizeJSON checks a JSON value (from DecodeJSON, or encoding/json)
// against the schema entry e it belongs to, as CheckJSON does, and returns
// it in the RFC 7951 form ygot unmarshals: 64-bit integers and decimal64
// as strings, smaller integers as numbers. changed reports whether any
// value was rewritten (otherwise the result is v). Errors name the data
// path (prefix is v's) and speak YANG: the node, the value, the type and
// its restriction.
func (m *Model) NormalizeJSON(e *yang.Entry, v any, prefix string, rules JSONRules) (out any, changed bool, err error) {
	n := &normalizer{rules: rules, model: m}
	out, err = n.node(e, v, prefix)
	return out, n.changed, err
}

type normalizer struct {
	rules   JSONRules
	model   *Model
	changed bool
}

func (n *normalizer) node(e *yang.Entry, v any, prefix string) (any, error) {
	switch {
	case e.IsList():
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a JSON array for list %s", orRoot(prefix), e.Name)
		}
		if err := CheckMaxElements(e, len(items), prefix); err != nil {
			return nil, err
		}
		for i, it := range items {
			obj, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: want JSON objects in list %s", orRoot(prefix), e.Name)
			}
			for _, k := range strings.Fields(e.Key) {
				if _, ok := memberNamed(obj, k); !ok {
					return nil, fmt.Errorf("%s%s: an entry of list %s lacks its key %s", orRoot(prefix), listKeys(e, obj), e.Name, k)
				}
			}
			if err := n.members(e, obj, prefix+listKeys(e, obj)); err != nil {
				return nil, err
			}
			items[i] = obj
		}
		return items, nil
	case e.IsDir():
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a JSON object for container %s", orRoot(prefix), e.Name)
		}
		return obj, n.members(e, obj, prefix)
	case e.IsLeafList():
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a JSON array for leaf-list %s", orRoot(prefix), e.Name)
		}
		for i, it := range items {
			nv, err := n.leaf(e, LeafType(e), it, prefix)
			if err != nil {
				return nil, err
			}
			items[i] = nv
		}
		return items, nil
	default:
		return n.leaf(e, LeafType(e), v, prefix)
	}
}

// CheckMaxElements reports a list (at data path where) holding more
// entries than its max-elements allows.
func CheckMaxElements(e *yang.Entry, n int, where string) error {
	if e.ListAttr != nil && e.ListAttr.MaxElements > 0 && uint64(n) > e.ListAttr.MaxElements {
		return fmt.Errorf("%s: %d entries, more than the %d list %s may hold (max-elements)", orRoot(where), n, e.ListAttr.MaxElements, e.Name)
	}
	return nil
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// members checks (and normalizes in place) the members of a JSON object.
func (n *normalizer) members(e *yang.Entry, obj map[string]any, prefix string) error {
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
		nv, err := n.node(child, obj[name], prefix+"/"+name)
		if err != nil {
			return err
		}
		obj[name] = nv
	}
	return nil
}

func listKeys(e *yang.Entry, obj map[string]any) string {
	var b strings.Builder
	for _, k := range strings.Fields(e.Key) {
		if v, ok := memberNamed(obj, k); ok {
			fmt.Fprintf(&b, "[%s=%v]", k, v)
		}
	}
	return b.String()
}

// memberNamed is obj's member of local name name, module-qualified or not.
func memberNamed(obj map[string]any, name string) (any, bool) {
	if v, ok := obj[name]; ok {
		return v, true
	}
	for k, v := range obj {
		if _, local, ok := strings.Cut(k, ":"); ok && local == name {
			return v, true
		}
	}
	return nil, false
}

// LeafType is a leaf's type, a leafref's being its target's.
func LeafType(e *yang.Entry) *yang.YangType {
	if e.Type == nil || e.Type.Kind != yang.Yleafref {
		return e.Type
	}
	if t, ok := leafrefTypes.Load(e); ok {
		return t.(*yang.YangType)
	}
	t := e.Type
	if target, err := util.ResolveIfLeafRef(e); err == nil && target != nil && target.Type != nil {
		t = target.Type
	}
	leafrefTypes.Store(e, t)
	return t
}

var leafrefTypes sync.Map // *yang.Entry -> *yang.YangType

// leaf checks one leaf value of type t and returns its RFC 7951 form.
func (n *normalizer) leaf(e *yang.Entry, t *yang.YangType, v any, path string) (any, error) {
	if t == nil {
		return v, nil
	}
	if t.Kind == yang.Yunion {
		// The first member type that takes the value (RFC 7950 §9.12).
		var errs []string
		for _, m := range t.Type {
			sub := &normalizer{rules: n.rules}
			nv, err := sub.leaf(e, m, v, path)
			if err == nil {
				n.changed = n.changed || sub.changed
				return nv, nil
			}
			errs = append(errs, typeName(m))
		}
		return nil, fmt.Errorf("%s: %s is not a valid %s", path, jsonText(v), strings.Join(dedup(errs), " or "))
	}
	nv, err := n.scalar(t, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nv, nil
}

func dedup(l []string) []string {
	var out []string
	for _, s := range l {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// typeName names a type for messages: its typedef, else its built-in.
func typeName(t *yang.YangType) string {
	if t.Name != "" {
		return t.Name
	}
	return t.Kind.String()
}

func (n *normalizer) scalar(t *yang.YangType, v any) (any, error) {
	switch t.Kind {
	case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64, yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
		return n.integer(t, v)
	case yang.Ydecimal64:
		s, ok := n.numberText(v, true)
		if !ok {
			return nil, fmt.Errorf("want a decimal number, got %s", jsonText(v))
		}
		num, err := yang.ParseDecimal(s, uint8(t.FractionDigits))
		if err != nil {
			return nil, fmt.Errorf("%s is not a decimal64 with %d fraction digits", s, t.FractionDigits)
		}
		if !inRange(t.Range, num) {
			return nil, fmt.Errorf("%s is outside the range %s of %s", s, t.Range, typeName(t))
		}
		if _, isStr := v.(string); !isStr {
			n.changed = true
		}
		return s, nil
	case yang.Ybool:
		if _, ok := v.(bool); !ok {
			return nil, fmt.Errorf("want true or false, got %s", jsonText(v))
		}
	case yang.Yempty:
		if l, ok := v.([]any); !ok || len(l) != 1 || l[0] != nil {
			return nil, fmt.Errorf("want [null] for an empty leaf, got %s", jsonText(v))
		}
	case yang.Yenum:
		s, ok := v.(string)
		if !ok || !t.Enum.IsDefined(s) {
			return nil, fmt.Errorf("%s is not one of %s", jsonText(v), strings.Join(t.Enum.Names(), ", "))
		}
	case yang.Yidentityref:
		s, ok := v.(string)
		if !ok || !n.identityDefined(t.IdentityBase, s) {
			base := "?"
			if t.IdentityBase != nil {
				base = t.IdentityBase.Name
			}
			return nil, fmt.Errorf("%s is not an identity derived from %s", jsonText(v), base)
		}
	case yang.Ystring:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, got %s", jsonText(v))
		}
		if !inRange(t.Length, yang.FromInt(int64(utf8.RuneCountInString(s)))) {
			return nil, fmt.Errorf("%q is not a valid %s: its length must be %s", s, typeName(t), t.Length)
		}
		if !matchesPatterns(t, s) {
			return nil, fmt.Errorf("%q is not a valid %s", s, typeName(t))
		}
	case yang.Ybinary:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a base64 string, got %s", jsonText(v))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not base64", s)
		}
		if !inRange(t.Length, yang.FromInt(int64(len(b)))) {
			return nil, fmt.Errorf("%d bytes of binary: the length must be %s", len(b), t.Length)
		}
	case yang.Ybits:
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("want a string of bit names, got %s", jsonText(v))
		}
	}
	return v, nil
}

// integer checks an integer leaf value: integral, within its type's
// bounds and range; the result is a json.Number for up to 32 bits, a
// string for 64.
func (n *normalizer) integer(t *yang.YangType, v any) (any, error) {
	wide := t.Kind == yang.Yint64 || t.Kind == yang.Yuint64
	// RFC 7951 §6.1: up to 32 bits a number, 64 bits a string; a 64-bit
	// integer sent as a number is taken too.
	s, ok := n.numberText(v, wide)
	if !ok {
		want := "a JSON number"
		if wide {
			want = "a string or number holding an integer"
		}
		return nil, fmt.Errorf("want %s, got %s", want, jsonText(v))
	}
	var num yang.Number
	signed := false
	switch t.Kind {
	case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64:
		signed = true
	}
	if signed {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, notInteger(s, t, err)
		}
		num = yang.FromInt(i)
	} else {
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, notInteger(s, t, err)
		}
		num = yang.FromUint(u)
	}
	if !inRange(kindRange(t.Kind), num) || !inRange(t.Range, num) {
		r := t.Range
		if len(r) == 0 {
			r = kindRange(t.Kind)
		}
		return nil, fmt.Errorf("%s is outside the range %s of %s", s, r, typeName(t))
	}
	if wide {
		if _, isStr := v.(string); !isStr {
			n.changed = true
		}
		return s, nil
	}
	if _, isNum := v.(json.Number); !isNum {
		n.changed = true
	}
	return json.Number(s), nil
}

func notInteger(s string, t *yang.YangType, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s is outside the range of %s", s, t.Kind)
	}
	return fmt.Errorf("%s is not an integer of type %s", s, typeName(t))
}

// numberText returns the text of a numeric JSON value: a number, or a
// string when the rules or the type (strOK) allow it.
func (n *normalizer) numberText(v any, strOK bool) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case string:
		if strOK || n.rules == LegacyJSON {
			return x, true
		}
	}
	return "", false
}

var kindRanges = map[yang.TypeKind]yang.YangRange{
	yang.Yint8:   {{Min: yang.FromInt(math.MinInt8), Max: yang.FromInt(math.MaxInt8)}},
	yang.Yint16:  {{Min: yang.FromInt(math.MinInt16), Max: yang.FromInt(math.MaxInt16)}},
	yang.Yint32:  {{Min: yang.FromInt(math.MinInt32), Max: yang.FromInt(math.MaxInt32)}},
	yang.Yint64:  {{Min: yang.FromInt(math.MinInt64), Max: yang.FromInt(math.MaxInt64)}},
	yang.Yuint8:  {{Min: yang.FromUint(0), Max: yang.FromUint(math.MaxUint8)}},
	yang.Yuint16: {{Min: yang.FromUint(0), Max: yang.FromUint(math.MaxUint16)}},
	yang.Yuint32: {{Min: yang.FromUint(0), Max: yang.FromUint(math.MaxUint32)}},
	yang.Yuint64: {{Min: yang.FromUint(0), Max: yang.FromUint(math.MaxUint64)}},
}

func kindRange(k yang.TypeKind) yang.YangRange { return kindRanges[k] }

func inRange(r yang.YangRange, v yang.Number) bool {
	return r.Contains(yang.YangRange{{Min: v, Max: v}})
}

var patterns sync.Map // pattern text -> *regexp.Regexp, or nil when Go cannot compile it

// matchesPatterns reports whether s matches every pattern of t (POSIX
// forms when the model gives them, as ygot does). A pattern Go's regexp
// cannot compile is left to ygot's validation.
func matchesPatterns(t *yang.YangType, s string) bool {
	ps := t.POSIXPattern
	if len(ps) == 0 {
		ps = t.Pattern
	}
	for _, p := range ps {
		var re *regexp.Regexp
		if c, ok := patterns.Load(p); ok {
			re, _ = c.(*regexp.Regexp)
		} else {
			expr := p
			if len(t.POSIXPattern) == 0 {
				expr = "^(" + p + ")$" // YANG (XSD) patterns are anchored
			}
			re, _ = regexp.Compile(expr)
			patterns.Store(p, re)
		}
		if re != nil && !re.MatchString(s) {
			return false
		}
	}
	return true
}

func (n *normalizer) identityDefined(base *yang.Identity, value string) bool {
	if base == nil {
		return false
	}
	mod, local, qualified := strings.Cut(value, ":")
	if !qualified {
		local = value
	}
	for _, id := range base.Values {
		if id.Name == local {
			m := n.model.IdentityModule(id)
			return !qualified || m == "" || mod == m
		}
	}
	return false
}

// jsonText renders a JSON value for a message.
func jsonText(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > 80 {
		return jsonKind(v)
	}
	return string(b)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64, json.Number:
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

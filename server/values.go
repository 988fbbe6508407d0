package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/gen/yangjson"
)

// Values a client sends are read into one form whatever their encoding,
// checked against the schema with the data path in every message, and
// handed to ygot as RFC 7951 JSON. JSON_IETF follows RFC 7951 (a 64-bit
// integer may also be a number); plain JSON is read the same way, except
// that integers and decimal64 of any width may also be strings, since
// RFC 7159 leaves numbers' spelling open; scalar TypedValues (PROTO) are
// read as plain JSON would read the same value.

// clientValue returns the JSON value a TypedValue carries, with the rules
// to read it by.
func clientValue(tv *gpb.TypedValue, op, where string) (any, yangjson.JSONRules, error) {
	switch v := tv.GetValue().(type) {
	case *gpb.TypedValue_JsonIetfVal:
		doc, err := yangjson.DecodeJSON(v.JsonIetfVal)
		if err != nil {
			return nil, 0, status.Errorf(codes.InvalidArgument, "%s %s: value is not JSON: %v", op, where, err)
		}
		return doc, yangjson.RFC7951, nil
	case *gpb.TypedValue_JsonVal:
		doc, err := yangjson.DecodeJSON(v.JsonVal)
		if err != nil {
			return nil, 0, status.Errorf(codes.InvalidArgument, "%s %s: value is not JSON: %v", op, where, err)
		}
		return doc, yangjson.LegacyJSON, nil
	case *gpb.TypedValue_AsciiVal, *gpb.TypedValue_BytesVal, *gpb.TypedValue_ProtoBytes, *gpb.TypedValue_AnyVal:
		return nil, 0, status.Errorf(codes.Unimplemented, "%s %s: the %s encoding of values is not supported (use JSON, JSON_IETF or PROTO scalar values)", op, where, valueEncoding(tv))
	case nil:
		return nil, 0, status.Errorf(codes.InvalidArgument, "%s %s: no value", op, where)
	}
	doc, err := scalarJSON(tv)
	if err != nil {
		return nil, 0, status.Errorf(codes.InvalidArgument, "%s %s: %v", op, where, err)
	}
	return doc, yangjson.LegacyJSON, nil
}

func valueEncoding(tv *gpb.TypedValue) string {
	switch tv.GetValue().(type) {
	case *gpb.TypedValue_AsciiVal:
		return "ASCII"
	case *gpb.TypedValue_BytesVal:
		return "BYTES"
	}
	return "protobuf message"
}

// scalarJSON is the JSON value of a scalar TypedValue.
func scalarJSON(tv *gpb.TypedValue) (any, error) {
	switch v := tv.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return v.StringVal, nil
	case *gpb.TypedValue_BoolVal:
		return v.BoolVal, nil
	case *gpb.TypedValue_UintVal:
		return json.Number(strconv.FormatUint(v.UintVal, 10)), nil
	case *gpb.TypedValue_IntVal:
		return json.Number(strconv.FormatInt(v.IntVal, 10)), nil
	case *gpb.TypedValue_DoubleVal:
		return json.Number(strconv.FormatFloat(v.DoubleVal, 'f', -1, 64)), nil
	case *gpb.TypedValue_FloatVal:
		//lint:ignore SA1019 deprecated, still sent by clients
		return json.Number(strconv.FormatFloat(float64(v.FloatVal), 'f', -1, 32)), nil
	case *gpb.TypedValue_DecimalVal:
		//lint:ignore SA1019 deprecated, still sent by clients
		d := v.DecimalVal
		return json.Number(decimalText(d.GetDigits(), d.GetPrecision())), nil
	case *gpb.TypedValue_LeaflistVal:
		out := make([]any, 0, len(v.LeaflistVal.GetElement()))
		for _, e := range v.LeaflistVal.GetElement() {
			x, err := scalarJSON(e)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value type %T", tv.GetValue())
}

func decimalText(digits int64, precision uint32) string {
	s := strconv.FormatInt(digits, 10)
	if precision == 0 {
		return s
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	for uint32(len(s)) <= precision {
		s = "0" + s
	}
	s = s[:len(s)-int(precision)] + "." + s[len(s)-int(precision):]
	if neg {
		s = "-" + s
	}
	return s
}

// normalizedValue checks a client's value for the node e at data path
// where (whose last element is pe) and returns it normalized (RFC 7951
// numbers, list keys filled in from the path), both as the JSON value
// and, for leaves, as RFC 7951 JSON ready for ytypes.SetNode.
func (sc *schema) normalizedValue(e *yang.Entry, pe *gpb.PathElem, tv *gpb.TypedValue, replace bool, op, where string) (*gpb.TypedValue, any, error) {
	doc, rules, err := clientValue(tv, op, where)
	if err != nil {
		return nil, nil, err
	}
	keysAdded := false
	if e.IsList() {
		if err := checkEntryKeys(e, pe, doc, replace, op, where); err != nil {
			return nil, nil, err
		}
		// The path gives the entry's keys; the value need not repeat them.
		if obj, ok := doc.(map[string]any); ok {
			for _, k := range strings.Fields(e.Key) {
				if member(obj, k) != nil || e.Dir[k] == nil {
					continue
				}
				v, _, err := sc.model.NormalizeJSON(e.Dir[k], pe.GetKey()[k], where, yangjson.LegacyJSON)
				if err != nil {
					return nil, nil, status.Errorf(codes.InvalidArgument, "%s %s: key %s: %v", op, where, k, err)
				}
				obj[k] = v
				keysAdded = true
			}
		}
	}
	if e.IsDir() {
		if _, isObj := doc.(map[string]any); !isObj {
			if _, isJSON := tv.GetValue().(*gpb.TypedValue_JsonIetfVal); !isJSON {
				if _, isJSON := tv.GetValue().(*gpb.TypedValue_JsonVal); !isJSON {
					return nil, nil, status.Errorf(codes.InvalidArgument, "%s %s: a scalar value cannot set a container or list entry; use JSON", op, where)
				}
			}
		}
	}
	check := doc
	if e.IsList() {
		check = []any{doc} // one entry of the list
	}
	norm, changed, err := sc.model.NormalizeJSON(e, check, where, rules)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	if e.IsList() {
		norm = norm.([]any)[0]
	}
	if e.IsDir() {
		return nil, norm, nil // unmarshalJSON takes it from here
	}
	if !changed && !keysAdded {
		switch v := tv.GetValue().(type) {
		case *gpb.TypedValue_JsonIetfVal:
			return tv, norm, nil
		case *gpb.TypedValue_JsonVal:
			return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: v.JsonVal}}, norm, nil
		}
	}
	b, err := json.Marshal(norm)
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "%s %s: re-encoding the value: %v", op, where, err)
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}, norm, nil
}

// checkEntryKeys checks the JSON value of a keyed list entry addressed by
// pe: a replace with {} would leave the entry without its keys (§3.4.4),
// and key leaves in the value, at its top or in its 'config' container,
// must not contradict the path's keys (§3.4.5).
func checkEntryKeys(e *yang.Entry, pe *gpb.PathElem, doc any, replace bool, op, where string) error {
	obj, _ := doc.(map[string]any)
	if replace && len(obj) == 0 {
		return status.Errorf(codes.InvalidArgument, "replace %s with an empty value: an entry cannot lose its keys; delete it instead", where)
	}
	cfg, _ := member(obj, "config").(map[string]any)
	for _, k := range strings.Fields(e.Key) {
		want := pe.GetKey()[k]
		for _, in := range []map[string]any{obj, cfg} {
			v := member(in, k)
			if v == nil {
				continue
			}
			if got := keyText(v); got != want {
				return status.Errorf(codes.InvalidArgument, "%s %s: key %s is %s in the path but %s in the value", op, where, k, want, got)
			}
		}
	}
	return nil
}

// member is obj's member name, module-qualified or not.
func member(obj map[string]any, name string) any {
	if v, ok := obj[name]; ok {
		return v
	}
	for k, v := range obj {
		if localName(k) == name {
			return v
		}
	}
	return nil
}

// keyText renders a JSON key value as a path key is written.
func keyText(v any) string {
	if s, ok := v.(string); ok {
		return localName(s)
	}
	return fmt.Sprint(v)
}

package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"

	"github.com/intd-project/intd/gen/yangjson"
)

// leafJSON encodes the scalar value of the leaf at p (a cached PROTO
// value) as JSON the way Get's ygot.Marshal7951 encodes the same leaf:
// RFC 7951 for both JSON encodings (64-bit integers and decimal64 as
// strings, smaller integers as numbers), with identities qualified by
// their module for JSON_IETF only.
func (sc *schema) leafJSON(p []*gpb.PathElem, tv *gpb.TypedValue, ietf bool) *gpb.TypedValue {
	switch tv.GetValue().(type) {
	case *gpb.TypedValue_JsonVal, *gpb.TypedValue_JsonIetfVal:
		return tv
	}
	var t *yang.YangType
	if e := sc.entry(p); e != nil {
		t = yangjson.LeafType(e)
	}
	v, ok := sc.jsonOf(t, tv, ietf)
	if !ok {
		return tv
	}
	b, err := json.Marshal(v)
	if err != nil {
		return tv
	}
	if ietf {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
}

// schemaEntry is the schema node of a data path, or nil.
func (sc *schema) entry(p []*gpb.PathElem) *yang.Entry {
	e := sc.root
	for _, pe := range p {
		if e = e.Dir[localName(pe.GetName())]; e == nil {
			return nil
		}
	}
	return e
}

// memberFor picks, for a union, the member type a value of tv's kind
// belongs to (the first that can hold it).
func memberFor(t *yang.YangType, tv *gpb.TypedValue) *yang.YangType {
	if t == nil || t.Kind != yang.Yunion {
		return t
	}
	for _, m := range t.Type {
		if m.Kind == yang.Yunion {
			if mm := memberFor(m, tv); mm != nil {
				return mm
			}
			continue
		}
		switch tv.GetValue().(type) {
		case *gpb.TypedValue_UintVal:
			switch m.Kind {
			case yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
				return m
			}
		case *gpb.TypedValue_IntVal:
			switch m.Kind {
			case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64:
				return m
			}
		case *gpb.TypedValue_DoubleVal:
			if m.Kind == yang.Ydecimal64 {
				return m
			}
		case *gpb.TypedValue_BoolVal:
			if m.Kind == yang.Ybool || m.Kind == yang.Yempty {
				return m
			}
		case *gpb.TypedValue_StringVal:
			switch m.Kind {
			case yang.Yidentityref:
				if m.IdentityBase != nil && m.IdentityBase.IsDefined(tv.GetStringVal()) {
					return m
				}
			case yang.Yenum:
				if m.Enum.IsDefined(tv.GetStringVal()) {
					return m
				}
			case yang.Ystring, yang.Ybits:
				return m
			}
		}
	}
	return nil
}

func (sc *schema) jsonOf(lt *yang.YangType, tv *gpb.TypedValue, ietf bool) (any, bool) {
	t := memberFor(lt, tv)
	kind := yang.Ynone
	if t != nil {
		kind = t.Kind
	}
	switch x := tv.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		if ietf && kind == yang.Yidentityref && t.IdentityBase != nil {
			if id := t.IdentityBase.GetValue(x.StringVal); id != nil {
				if m := sc.model.IdentityModule(id); m != "" {
					return m + ":" + x.StringVal, true
				}
			}
		}
		return x.StringVal, true
	case *gpb.TypedValue_BoolVal:
		if kind == yang.Yempty {
			return []any{nil}, true
		}
		return x.BoolVal, true
	case *gpb.TypedValue_UintVal:
		if kind == yang.Yuint64 || kind == yang.Ynone {
			return strconv.FormatUint(x.UintVal, 10), true
		}
		return x.UintVal, true
	case *gpb.TypedValue_IntVal:
		if kind == yang.Yint64 || kind == yang.Ynone {
			return strconv.FormatInt(x.IntVal, 10), true
		}
		return x.IntVal, true
	case *gpb.TypedValue_DoubleVal:
		return fmt.Sprintf("%v", x.DoubleVal), true
	case *gpb.TypedValue_BytesVal:
		return base64.StdEncoding.EncodeToString(x.BytesVal), true
	case *gpb.TypedValue_LeaflistVal:
		l := make([]any, 0, len(x.LeaflistVal.GetElement()))
		for _, e := range x.LeaflistVal.GetElement() {
			v, ok := sc.jsonOf(lt, e, ietf)
			if !ok {
				return nil, false
			}
			l = append(l, v)
		}
		return l, true
	}
	return nil, false
}

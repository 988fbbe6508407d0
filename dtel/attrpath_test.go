package dtel

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/goyang/pkg/yang"

	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai"
)

// The configuration list each object type comes from (keys are dropped
// before the schema lookup).
var attrObjectPaths = map[sai.ObjectType]string{
	sai.ObjectTypeDTel:           "/int",
	sai.ObjectTypeIntSession:     gen.IntSessionPath("x"),
	sai.ObjectTypeReportSession:  gen.ReportSessionPath("x"),
	sai.ObjectTypeQueueReport:    gen.QueueReportPath("x", 0),
	sai.ObjectTypeEvent:          eventPath(gen.IntdInt_DtelEventType_DROP_REPORT),
	sai.ObjectTypeWatchlistEntry: gen.EntryPath(1),
}

var attrSamples = []sai.Attrs{
	sai.DTelAttrs{}, sai.IntSessionAttrs{}, sai.ReportSessionAttrs{},
	sai.QueueReportAttrs{}, sai.EventAttrs{}, sai.WatchlistEntryAttrs{},
}

// TestAttrPathsCoverSchema holds the attribute table to both ends: every
// field of every sai attribute type maps to a configuration path, every
// entry names a field that exists (a renamed field fails here, not in a
// user's error message), and every path exists in the YANG schema.
func TestAttrPathsCoverSchema(t *testing.T) {
	root := gen.SchemaTree["Device"]
	if root == nil {
		t.Fatal("no Device in the generated schema")
	}
	for _, a := range attrSamples {
		ot := a.ObjectType()
		fields := attrFields(reflect.TypeOf(a), "")
		for _, f := range fields {
			if _, ok := attrLeaf(ot, f); !ok {
				t.Errorf("%v attribute %s maps to no configuration path", ot, f)
			}
		}
		base := attrObjectPaths[ot]
		for _, m := range attrPaths[ot] {
			if m[0] != "" && !namesField(fields, m[0]) {
				t.Errorf("%v: %q in the path table is no attribute", ot, m[0])
			}
			if p := base + m[1]; schemaEntry(root, p) == nil {
				t.Errorf("%v attribute %q maps to %s, not in the YANG schema", ot, m[0], p)
			}
		}
	}
	if len(attrPaths) != len(attrSamples) {
		t.Errorf("path table has %d object types, want %d", len(attrPaths), len(attrSamples))
	}
}

// attrFields lists the field paths of t as AttrError.Attr writes them
// ("Match.Inner.VNI", "Destinations[0].UDPPort").
func attrFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := prefix + f.Name
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			name += "[0]"
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeOf(sai.OID(0)).PkgPath() {
			out = append(out, attrFields(ft, name+".")...)
			continue
		}
		switch ft {
		case reflect.TypeOf(netip.Addr{}), reflect.TypeOf(netip.Prefix{}), reflect.TypeOf(time.Duration(0)):
		default:
			if ft.Kind() == reflect.Struct {
				continue
			}
		}
		out = append(out, name)
	}
	return out
}

func namesField(fields []string, attr string) bool {
	for _, f := range fields {
		if f == attr || strings.HasPrefix(f, attr+".") || strings.HasPrefix(f, attr+"[") {
			return true
		}
	}
	return false
}

// schemaEntry walks a data path (keys ignored) down the schema.
func schemaEntry(root *yang.Entry, path string) *yang.Entry {
	e := root
	for _, el := range strings.Split(strings.Trim(path, "/"), "/") {
		if i := strings.IndexByte(el, '['); i >= 0 {
			el = el[:i]
		}
		if e = e.Dir[el]; e == nil {
			return nil
		}
	}
	return e
}

package dtel

import (
	"net/netip"
	"strings"
	"testing"

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

// TestAttrPathsCoverSchema holds the binding table to both ends: every
// sai attribute id is bound to a configuration field, and every bound
// path, list entries' included, exists in the YANG schema.
func TestAttrPathsCoverSchema(t *testing.T) {
	root := gen.SchemaTree["Device"]
	if root == nil {
		t.Fatal("no Device in the generated schema")
	}
	for _, id := range sai.AttrIDs() {
		p, ok := attrPaths[id]
		if !ok {
			t.Errorf("%v attribute %v maps to no configuration path", id.Object(), id)
			continue
		}
		if full := attrObjectPaths[id.Object()] + p; schemaEntry(root, full) == nil {
			t.Errorf("%v attribute %v maps to %s, not in the YANG schema", id.Object(), id, full)
		}
	}
	for ot, p := range wholePaths {
		if full := attrObjectPaths[ot] + p; schemaEntry(root, full) == nil {
			t.Errorf("%v as a whole maps to %s, not in the YANG schema", ot, full)
		}
	}
	for _, p := range []string{
		attrObjectPaths[sai.ObjectTypeDTel] + sinkListPath + sinkLeafPath,
		attrObjectPaths[sai.ObjectTypeReportSession] + collectListPath + collectConfPath,
	} {
		if schemaEntry(root, p) == nil {
			t.Errorf("list entry path %s is not in the YANG schema", p)
		}
	}
	if len(attrRoots) != len(attrObjectPaths) {
		t.Errorf("%d object types have a configuration root, want %d", len(attrRoots), len(attrObjectPaths))
	}
}

// TestAttrListEntryPaths checks that errors about one entry of a list
// attribute name that entry with the schema's keys.
func TestAttrListEntryPaths(t *testing.T) {
	dtelObj := &object{key: key{t: sai.ObjectTypeDTel}, attrs: sai.DTelAttrs{SinkPortList: []string{"eth0", "eth1"}}}
	rs := &object{key: key{t: sai.ObjectTypeReportSession}, attrs: sai.ReportSessionAttrs{Destinations: []sai.ReportDestination{{IP: netip.MustParseAddr("10.0.0.1"), UDPPort: 32766}}}}
	for _, tt := range []struct {
		obj  *object
		ae   sai.AttrError
		want string
	}{
		{dtelObj, sai.AttrError{Attr: sai.AttrDTelSinkPortList, Index: 1}, "/interfaces/interface[name=eth1]/config/int-sink"},
		{dtelObj, sai.AttrError{Attr: sai.AttrDTelSinkPortList, Index: -1}, "/interfaces"},
		{rs, sai.AttrError{Attr: sai.AttrReportSessionDestinationUDPPort, Index: 0}, "/collectors/collector[address=10.0.0.1][port=32766]/config"},
		{rs, sai.AttrError{Attr: sai.AttrReportSessionDestinations, Index: -1}, "/collectors"},
		{rs, sai.AttrError{Attr: sai.AttrReportSessionCoalesceMaxDelay, Index: -1}, "/config/max-delay"},
		{&object{key: key{t: sai.ObjectTypeQueueReport}, attrs: sai.QueueReportAttrs{}}, sai.AttrError{Attr: sai.AttrNone, Index: -1}, "/config"},
	} {
		if got := subPath(tt.obj, &tt.ae); got != tt.want {
			t.Errorf("subPath(%v, %v[%d]) = %q, want %q", tt.obj.key.t, tt.ae.Attr, tt.ae.Index, got, tt.want)
		}
	}
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

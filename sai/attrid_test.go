package sai

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAttrIDsCoverAttrs holds the id table to the attribute types: every
// id names a field of its object's type (a renamed field fails here), and
// every field of every attribute type has an id.
func TestAttrIDsCoverAttrs(t *testing.T) {
	samples := map[ObjectType]Attrs{}
	for _, a := range []Attrs{DTelAttrs{}, IntSessionAttrs{}, ReportSessionAttrs{}, QueueReportAttrs{}, EventAttrs{}, WatchlistEntryAttrs{}} {
		samples[a.ObjectType()] = a
	}
	fields := map[ObjectType][]string{}
	for ot, a := range samples {
		fields[ot] = leafFields(reflect.TypeOf(a), "")
	}
	for _, id := range AttrIDs() {
		a, ok := samples[id.Object()]
		if !ok {
			t.Errorf("%v (%d) belongs to no attribute type", id, id)
			continue
		}
		if !attrExists(reflect.TypeOf(a), id.field(0)) {
			t.Errorf("%v names no field of %T", id, a)
		}
	}
	for ot, fs := range fields {
	field:
		for _, f := range fs {
			for _, id := range AttrIDs() {
				if n := id.field(0); id.Object() == ot && (f == n || strings.HasPrefix(f, n+".")) {
					continue field
				}
			}
			t.Errorf("%v field %s has no attribute id", ot, f)
		}
	}
}

func TestAttrErrorField(t *testing.T) {
	for _, tt := range []struct {
		e    AttrError
		want string
	}{
		{AttrError{Attr: AttrNone, Index: -1}, ""},
		{AttrError{Attr: AttrReportSessionDestinations, Index: -1}, "Destinations"},
		{AttrError{Attr: AttrReportSessionDestinations, Index: 1}, "Destinations[1]"},
		{AttrError{Attr: AttrReportSessionDestinationUDPPort, Index: 2}, "Destinations[2].UDPPort"},
		{AttrError{Attr: AttrWatchlistMatchInnerTunnelID, Index: -1}, "Match.Inner.TunnelID"},
	} {
		if got := tt.e.Field(); got != tt.want {
			t.Errorf("Field() of %v[%d] = %q, want %q", tt.e.Attr, tt.e.Index, got, tt.want)
		}
	}
}

// leafFields lists the field paths of t down to values
// ("Match.Inner.VNI", "Destinations[0].UDPPort").
func leafFields(t reflect.Type, prefix string) []string {
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
		switch ft {
		case reflect.TypeOf(netip.Addr{}), reflect.TypeOf(netip.Prefix{}), reflect.TypeOf(time.Duration(0)):
		default:
			if ft.Kind() == reflect.Struct {
				out = append(out, leafFields(ft, name+".")...)
				continue
			}
		}
		out = append(out, name)
	}
	return out
}

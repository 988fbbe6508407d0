package dtel

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/intd-project/intd/sai"
)

// key names one configured object independently of its OID: the object
// type and the YANG list key(s) it comes from.
type key struct {
	t    sai.ObjectType
	name string
}

func (k key) String() string {
	if k.name == "" {
		return k.t.String()
	}
	return k.t.String() + " " + k.name
}

// depRank orders object types so that an object only references objects
// of a lower rank: the DTel switch object, report sessions, INT sessions,
// queue reports, events (-> report sessions), watchlist entries (-> INT
// sessions). Creates run in ascending rank, removals in descending rank.
var depRank = map[sai.ObjectType]int{
	sai.ObjectTypeDTel:           0,
	sai.ObjectTypeReportSession:  1,
	sai.ObjectTypeIntSession:     2,
	sai.ObjectTypeQueueReport:    3,
	sai.ObjectTypeEvent:          4,
	sai.ObjectTypeWatchlistEntry: 5,
}

func compareKeys(a, b key) int {
	if r := depRank[a.t] - depRank[b.t]; r != 0 {
		return r
	}
	return strings.Compare(a.name, b.name)
}

// object is one desired sai object: its attributes with every reference
// OID left null, and the keys of the objects it references, in the order
// resolve fills them in.
type object struct {
	key   key
	path  string // YANG data path of the configuration it comes from
	attrs sai.Attrs
	refs  []key
}

// resolve returns a with its references set to oids (in the order of
// object.refs).
func resolve(a sai.Attrs, oids []sai.OID) sai.Attrs {
	switch a := a.(type) {
	case sai.WatchlistEntryAttrs:
		if len(oids) > 0 {
			a.Action.IntSession = oids[0]
		}
		return a
	case sai.EventAttrs:
		if len(oids) > 0 {
			a.ReportSession = oids[0]
		}
		return a
	}
	return sai.Clone(a)
}

// placeholderOIDs stands in for OIDs not yet known when attributes are
// validated before anything is created.
func placeholderOIDs(refs []key) []sai.OID {
	out := make([]sai.OID, len(refs))
	for i, r := range refs {
		out[i] = sai.MakeOID(r.t, 1<<55)
	}
	return out
}

// equalAttrs compares logical attributes (references null).
func equalAttrs(a, b sai.Attrs) bool {
	switch a := a.(type) {
	case sai.DTelAttrs:
		b, ok := b.(sai.DTelAttrs)
		if !ok || !slices.Equal(a.SinkPortList, b.SinkPortList) {
			return false
		}
		a.SinkPortList, b.SinkPortList = nil, nil
		return reflect.DeepEqual(a, b)
	case sai.ReportSessionAttrs:
		b, ok := b.(sai.ReportSessionAttrs)
		if !ok || !slices.Equal(a.Destinations, b.Destinations) {
			return false
		}
		a.Destinations, b.Destinations = nil, nil
		return reflect.DeepEqual(a, b)
	case sai.IntSessionAttrs, sai.QueueReportAttrs, sai.EventAttrs, sai.WatchlistEntryAttrs:
		return any(a) == any(b)
	}
	panic(fmt.Sprintf("dtel: unexpected attributes %T", a))
}

package sonic

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/gen"
)

// DiffRequest is the gNMI Set that turns configuration old (as applied)
// into dev: replaces of the entries and containers that changed, deletes
// of those gone. With old nil it replaces /int whole (SetRequest). An
// edit of one rule among thousands thus sends, and the server decodes,
// one entry. It returns nil when nothing changed.
func DiffRequest(target string, old, dev *gen.Device) (*gpb.SetRequest, error) {
	if old == nil || old.GetInt() == nil || dev.GetInt() == nil {
		return SetRequest(target, dev)
	}
	d := &differ{req: &gpb.SetRequest{Prefix: &gpb.Path{Target: target}}}
	o, n := old.GetInt(), dev.GetInt()
	d.one(path("int", "node", "config"), o.GetNode().GetConfig(), n.GetNode().GetConfig())
	d.one(path("int", "marking", "config"), o.GetMarking().GetConfig(), n.GetMarking().GetConfig())
	d.one(path("int", "flow-report-filter", "config"), o.GetFlowReportFilter().GetConfig(), n.GetFlowReportFilter().GetConfig())
	var oi, ni map[string]*gen.IntdInt_Int_Interfaces_Interface
	if o.Interfaces != nil {
		oi = o.Interfaces.Interface
	}
	if n.Interfaces != nil {
		ni = n.Interfaces.Interface
	}
	diffList(d, []string{"int", "interfaces", "interface"}, oi, ni, func(k string) map[string]string { return map[string]string{"name": k} })
	var os, ns map[string]*gen.IntdInt_Int_IntSessions_IntSession
	if o.IntSessions != nil {
		os = o.IntSessions.IntSession
	}
	if n.IntSessions != nil {
		ns = n.IntSessions.IntSession
	}
	diffList(d, []string{"int", "int-sessions", "int-session"}, os, ns, func(k string) map[string]string { return map[string]string{"name": k} })
	var or, nr map[string]*gen.IntdInt_Int_ReportSessions_ReportSession
	if o.ReportSessions != nil {
		or = o.ReportSessions.ReportSession
	}
	if n.ReportSessions != nil {
		nr = n.ReportSessions.ReportSession
	}
	diffList(d, []string{"int", "report-sessions", "report-session"}, or, nr, func(k string) map[string]string { return map[string]string{"name": k} })
	var ow, nw map[uint32]*gen.IntdInt_Int_Watchlist_Entries_Entry
	if e := o.GetWatchlist().GetEntries(); e != nil {
		ow = e.Entry
	}
	if e := n.GetWatchlist().GetEntries(); e != nil {
		nw = e.Entry
	}
	diffList(d, []string{"int", "watchlist", "entries", "entry"}, ow, nw, func(k uint32) map[string]string {
		return map[string]string{"sequence-id": strconv.FormatUint(uint64(k), 10)}
	})
	var oq, nq map[gen.IntdInt_Int_QueueReports_QueueReport_Key]*gen.IntdInt_Int_QueueReports_QueueReport
	if o.QueueReports != nil {
		oq = o.QueueReports.QueueReport
	}
	if n.QueueReports != nil {
		nq = n.QueueReports.QueueReport
	}
	diffList(d, []string{"int", "queue-reports", "queue-report"}, oq, nq, func(k gen.IntdInt_Int_QueueReports_QueueReport_Key) map[string]string {
		return map[string]string{"interface": k.Interface, "queue-id": strconv.Itoa(int(k.QueueId))}
	})
	var oe, ne map[gen.E_IntdInt_DtelEventType]*gen.IntdInt_Int_Events_Event
	if o.Events != nil {
		oe = o.Events.Event
	}
	if n.Events != nil {
		ne = n.Events.Event
	}
	diffList(d, []string{"int", "events", "event"}, oe, ne, func(k gen.E_IntdInt_DtelEventType) map[string]string {
		return map[string]string{"type": k.String()}
	})
	if d.err != nil {
		return nil, d.err
	}
	if len(d.req.Replace)+len(d.req.Delete) == 0 {
		return nil, nil
	}
	return d.req, nil
}

type differ struct {
	req *gpb.SetRequest
	err error
}

func path(elems ...string) *gpb.Path {
	p := &gpb.Path{}
	for _, e := range elems {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: e})
	}
	return p
}

func encode(s ygot.GoStruct) (string, error) {
	b, err := ygot.Marshal7951(s, &ygot.RFC7951JSONConfig{AppendModuleName: true})
	return string(b), err
}

// one compares a container and replaces (or deletes) it when it changed.
func (d *differ) one(p *gpb.Path, old, new ygot.GoStruct) {
	if d.err != nil {
		return
	}
	on, nn := isNil(old), isNil(new)
	switch {
	case on && nn:
		return
	case nn:
		d.req.Delete = append(d.req.Delete, p)
		return
	}
	if !on && reflect.DeepEqual(old, new) {
		return
	}
	js, err := encode(new)
	if err != nil {
		d.err = fmt.Errorf("encoding %v: %w", p, err)
		return
	}
	d.req.Replace = append(d.req.Replace, &gpb.Update{Path: p, Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(js)}}})
}

func isNil(s ygot.GoStruct) bool {
	switch v := s.(type) {
	case nil:
		return true
	case *gen.IntdInt_Int_Node_Config:
		return v == nil
	case *gen.IntdInt_Int_Marking_Config:
		return v == nil
	case *gen.IntdInt_Int_FlowReportFilter_Config:
		return v == nil
	}
	return false
}

// diffList replaces the entries of a list that are new or changed and
// deletes those gone, in key order.
func diffList[K comparable, V ygot.GoStruct](d *differ, elems []string, old, new map[K]V, keys func(K) map[string]string) {
	entryPath := func(k K) *gpb.Path {
		p := path(elems...)
		p.Elem[len(p.Elem)-1].Key = keys(k)
		return p
	}
	less := func(a, b K) int { return compareKeys(keys(a), keys(b)) }
	for _, k := range slices.SortedFunc(maps.Keys(old), less) {
		if _, ok := new[k]; !ok {
			d.req.Delete = append(d.req.Delete, entryPath(k))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(new), less) {
		if d.err != nil {
			return
		}
		if o, ok := old[k]; ok && reflect.DeepEqual(o, new[k]) {
			continue
		}
		js, err := encode(new[k])
		if err != nil {
			d.err = fmt.Errorf("encoding %v: %w", entryPath(k), err)
			return
		}
		d.req.Replace = append(d.req.Replace, &gpb.Update{Path: entryPath(k), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(js)}}})
	}
}

func compareKeys(a, b map[string]string) int {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if a[k] != b[k] {
			if a[k] < b[k] {
				return -1
			}
			return 1
		}
	}
	return 0
}

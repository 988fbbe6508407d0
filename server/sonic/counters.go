package sonic

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CountersPrefix starts every key intd writes to COUNTERS_DB.
const CountersPrefix = "COUNTERS"

// counterSources are the state containers copied to COUNTERS_DB: the
// gNMI path (list keys omitted: every entry) and the table of the
// COUNTERS_DB key.
var counterSources = []struct {
	path  []string
	table string
}{
	{[]string{"int", "node", "state", "counters"}, TableDTel},
	{[]string{"int", "int-sessions", "int-session", "state", "counters"}, TableIntSession},
	{[]string{"int", "report-sessions", "report-session", "state", "counters"}, TableReportSession},
	{[]string{"int", "queue-reports", "queue-report", "state", "counters"}, TableQueueReport},
	{[]string{"int", "node", "reports", "report", "state", "counters"}, "REPORTS"},
	{[]string{"int", "watchlist", "entries", "entry", "state", "counters"}, TableACLRule},
}

func (s *Source) countersLoop(ctx context.Context, srv Server) {
	t := time.NewTicker(s.o.StateInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.writeCounters(ctx, srv); err != nil {
			if !failing && ctx.Err() == nil {
				s.log.Warn("writing counters to COUNTERS_DB", "err", err)
			}
			failing = true
			continue
		}
		failing = false
	}
}

// Counters reads the target's DTel counters over gNMI Get (the state any
// client sees) and returns them as COUNTERS_DB hashes by key (without
// the COUNTERS prefix): DTEL:SWITCH, DTEL_INT_SESSION:<name>,
// DTEL_REPORT_SESSION:<name>, DTEL_QUEUE_REPORT:<port>:<queue>,
// DTEL:REPORTS:<FLOW|DROP|QUEUE> and, for watchlist rules,
// <ACL table>:<rule> (Packets and Bytes as SONiC's ACL counters name them,
// summed over the entries of the rule). rules maps sequence-ids to rules.
func Counters(ctx context.Context, srv Server, target, sep string, rules map[uint32]Key) (map[string]map[string]uint64, error) {
	out := map[string]map[string]uint64{}
	for _, src := range counterSources {
		p := &gpb.Path{}
		for _, e := range src.path {
			p.Elem = append(p.Elem, &gpb.PathElem{Name: e})
		}
		resp, err := srv.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: target}, Path: []*gpb.Path{p},
			Type: gpb.GetRequest_STATE, Encoding: gpb.Encoding_PROTO})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				elems := u.GetPath().GetElem()
				if len(elems) < 2 {
					continue
				}
				key, ok := counterKey(src.table, elems, sep, rules)
				if !ok {
					continue
				}
				field := strings.ToUpper(strings.ReplaceAll(elems[len(elems)-1].GetName(), "-", "_"))
				if src.table == TableACLRule {
					switch field {
					case "MATCHED_PACKETS":
						field = "Packets"
					case "MATCHED_BYTES":
						field = "Bytes"
					}
				}
				h := out[key]
				if h == nil {
					h = map[string]uint64{}
					out[key] = h
				}
				h[field] += u.GetVal().GetUintVal()
			}
		}
	}
	return out, nil
}

// counterKey names the COUNTERS_DB hash of one state leaf.
func counterKey(table string, elems []*gpb.PathElem, sep string, rules map[uint32]Key) (string, bool) {
	keys := map[string]string{}
	for _, e := range elems {
		maps.Copy(keys, e.GetKey())
	}
	switch table {
	case TableDTel:
		return TableDTel + sep + "SWITCH", true
	case TableIntSession, TableReportSession:
		return table + sep + keys["name"], keys["name"] != ""
	case TableQueueReport:
		return table + sep + keys["interface"] + sep + keys["queue-id"], keys["interface"] != ""
	case "REPORTS":
		return TableDTel + sep + "REPORTS" + sep + keys["type"], keys["type"] != ""
	case TableACLRule:
		seq, err := strconv.ParseUint(keys["sequence-id"], 10, 32)
		if err != nil {
			return "", false
		}
		k, ok := rules[uint32(seq)]
		if !ok {
			return "", false
		}
		t, r, _ := strings.Cut(k.Name, "|")
		return t + sep + r, true
	}
	return "", false
}

// writeCounters copies the counters to COUNTERS_DB and deletes the keys
// of entries gone.
func (s *Source) writeCounters(ctx context.Context, srv Server) error {
	s.mu.Lock()
	rules, written := s.rules, s.counters
	s.mu.Unlock()
	if rules == nil {
		return nil // not synced yet
	}
	sep := s.o.DBs.Counters.Sep
	got, err := Counters(ctx, srv, s.o.Target, sep, rules)
	if err != nil {
		return err
	}
	pipe := s.countersDB.Pipeline()
	want := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		full := CountersPrefix + sep + k
		want[full] = true
		f := make(map[string]any, len(got[k]))
		for name, v := range got[k] {
			f[name] = strconv.FormatUint(v, 10)
		}
		pipe.HSet(ctx, full, f)
	}
	if written == nil {
		// Keys an earlier run left behind (rules of tables not named
		// DTEL* are only known while they exist).
		keys, err := scanKeys(ctx, s.countersDB, CountersPrefix+globEscape(sep)+"DTEL*")
		if err != nil {
			return err
		}
		written = map[string]bool{}
		for _, k := range keys {
			written[k] = true
		}
	}
	for k := range written {
		if !want[k] {
			pipe.Del(ctx, k)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.counters = want
	s.mu.Unlock()
	return nil
}

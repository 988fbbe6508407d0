package sonic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/intd-project/intd/gen"
)

// ApplyFunc applies a whole configuration atomically (a gNMI Set
// replacing /int, or an orchestrator's Apply): on error nothing changed,
// and the error names the YANG path at fault when one is.
type ApplyFunc func(ctx context.Context, dev *gen.Device) error

// Result is a configuration resolved and applied.
type Result struct {
	// Device is the applied configuration.
	Device *gen.Device
	// Statuses says, for every DTel entry of CONFIG_DB, sorted by key,
	// whether it is in effect and why not.
	Statuses []*Status
	// Used is the version in effect of every entry (to keep when a later
	// version is refused).
	Used map[Key]Fields
	// Rules maps watchlist sequence-ids to the ACL_RULE they came from.
	Rules map[uint32]Key
	// Attempts counts the applies tried.
	Attempts int
}

// Refused counts the refused entries.
func (r *Result) Refused() int {
	n := 0
	for _, s := range r.Statuses {
		if !s.Applied {
			n++
		}
	}
	return n
}

// ErrUnattributed wraps apply errors that name no entry of CONFIG_DB: the
// configuration as a whole could not be applied.
var ErrUnattributed = errors.New("the configuration could not be applied")

// Resolve translates cfg and applies it. Entries the translation refuses
// are left out (their version in previous, the last applied, is kept if
// it still translates); when apply refuses the result and its error names
// a path that came from an entry, that entry is refused the same way and
// apply tried again, so that one bad entry (and those referring to it)
// never holds back the others. Apply errors that name no entry end the
// attempt with an error wrapping ErrUnattributed (and the partial Result,
// whose statuses say what the translation refused).
func Resolve(ctx context.Context, cfg Config, previous map[Key]Fields, opts TranslateOptions, apply ApplyFunc) (*Result, error) {
	in := input{cfg: cfg, previous: previous, refused: map[Key]*refusal{}, dropPrev: map[Key]bool{}, opts: opts}
	limit := 2
	for _, keys := range cfg {
		limit += len(keys)
	}
	for attempt := 1; ; attempt++ {
		tr := translate(in)
		res := tr.result(attempt)
		err := apply(ctx, tr.dev)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, err
		}
		k, rf, ok := tr.attribute(err)
		if !ok || attempt >= limit {
			return res, fmt.Errorf("%w: %v", ErrUnattributed, err)
		}
		if tr.prev[k] {
			in.dropPrev[k] = true
		} else {
			in.refused[k] = rf
		}
	}
}

func (tr *translation) result(attempt int) *Result {
	res := &Result{Device: tr.dev, Used: tr.used, Rules: tr.seqs, Attempts: attempt}
	for _, st := range tr.status {
		slices.Sort(st.Paths)
		res.Statuses = append(res.Statuses, st)
	}
	slices.SortFunc(res.Statuses, func(a, b *Status) int {
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return res
}

// attribute finds the entry in effect an apply error is about: the one
// whose longest YANG path the message names; for the DTel switch object
// as a whole, a sink port the message quotes.
func (tr *translation) attribute(err error) (Key, *refusal, bool) {
	msg := status.Convert(err).Message()
	best := ""
	for p := range tr.srcs {
		if len(p) > len(best) && strings.Contains(msg, p) {
			best = p
		}
	}
	if best == "" {
		for _, p := range tr.sinkPorts {
			if strings.Contains(msg, `"`+p+`"`) {
				k := Key{TableDTel, "SINK_PORT_LIST"}
				return k, &refusal{Field: p, Reason: msg}, true
			}
		}
		return Key{}, nil, false
	}
	src := tr.srcs[best]
	if _, ok := tr.used[src.key]; !ok {
		return Key{}, nil, false
	}
	// The path as the message has it (it may go deeper than the entry
	// knows), and the words after it.
	i := strings.Index(msg, best)
	rest := msg[i:]
	path := rest
	if j := strings.IndexAny(rest, ") "); j >= 0 {
		path = rest[:j]
	}
	path = strings.TrimSuffix(path, ":")
	reason := rest[len(path):]
	if j := strings.Index(reason, ": "); j >= 0 {
		reason = reason[j+2:]
	}
	field := src.field
	if f, ok := tr.srcs[path]; ok && f.key == src.key {
		field = f.field
	}
	return src.key, &refusal{Field: field, Reason: strings.TrimSpace(reason), yangPath: path}, true
}

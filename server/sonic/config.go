package sonic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// CONFIG_DB tables intd reads.
const (
	TableDTel          = "DTEL"
	TableReportSession = "DTEL_REPORT_SESSION"
	TableIntSession    = "DTEL_INT_SESSION"
	TableQueueReport   = "DTEL_QUEUE_REPORT"
	TableEvent         = "DTEL_EVENT"
	TableACLTable      = "ACL_TABLE"
	TableACLRule       = "ACL_RULE"

	// WatchlistType is the ACL_TABLE type of DTel watchlists, and the
	// name of the watchlist table orchagent creates by itself (rules may
	// name it without an ACL_TABLE entry).
	WatchlistType = "DTEL_FLOW_WATCHLIST"
)

// Tables lists the CONFIG_DB tables of DTel configuration, in the order
// entries depend on each other.
var Tables = []string{TableDTel, TableIntSession, TableReportSession, TableQueueReport, TableEvent, TableACLTable, TableACLRule}

// Fields are the field-value pairs of one CONFIG_DB entry (a Redis hash).
type Fields map[string]string

// Config is the DTel part of CONFIG_DB: table, then key (without the
// table and its separator, e.g. "Ethernet0|0"), then fields. List fields
// (a trailing "@" in Redis, a JSON array in config_db.json) are held
// comma-separated under their name without the "@".
type Config map[string]map[string]Fields

// Key names one CONFIG_DB entry.
type Key struct {
	Table, Name string
}

// String is the Redis key, TABLE|NAME.
func (k Key) String() string { return k.Table + "|" + k.Name }

func (c Config) set(k Key, f Fields) {
	t := c[k.Table]
	if t == nil {
		t = map[string]Fields{}
		c[k.Table] = t
	}
	t[k.Name] = f
}

// Get returns the fields of an entry, nil if absent.
func (c Config) Get(k Key) Fields { return c[k.Table][k.Name] }

// Keys returns every entry, tables in Tables order, keys sorted.
func (c Config) Keys() []Key {
	var out []Key
	for _, t := range Tables {
		for _, n := range slices.Sorted(maps.Keys(c[t])) {
			out = append(out, Key{t, n})
		}
	}
	return out
}

// Equal reports whether two configurations hold the same entries.
func (c Config) Equal(o Config) bool {
	n := 0
	for t, keys := range c {
		for k, f := range keys {
			g, ok := o[t][k]
			if !ok || !maps.Equal(f, g) {
				return false
			}
			n++
		}
	}
	m := 0
	for _, keys := range o {
		m += len(keys)
	}
	return n == m
}

// relevant reports whether a table belongs to DTel configuration.
func relevant(table string) bool { return slices.Contains(Tables, table) }

// ParseConfigDB reads the DTel tables of a SONiC config_db.json (other
// tables are ignored). Values may be JSON strings, numbers, booleans or
// arrays of strings (list fields).
func ParseConfigDB(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("config_db.json: %w", err)
	}
	cfg := Config{}
	for t, v := range raw {
		if !relevant(t) {
			continue
		}
		var keys map[string]map[string]json.RawMessage
		if err := json.Unmarshal(v, &keys); err != nil {
			return nil, fmt.Errorf("config_db.json: table %s: want an object of objects: %w", t, err)
		}
		for k, fields := range keys {
			f := Fields{}
			for name, v := range fields {
				s, err := jsonValue(v)
				if err != nil {
					return nil, fmt.Errorf("config_db.json: %s|%s field %s: %w", t, k, name, err)
				}
				f[strings.TrimSuffix(name, "@")] = s
			}
			cfg.set(Key{t, k}, f)
		}
	}
	return cfg, nil
}

func jsonValue(v json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	switch x := x.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strings.ToUpper(strconv.FormatBool(x)), nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("list values must be strings, not %v", e)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("unsupported JSON value %s", v)
}

// MarshalConfigDB renders cfg as config_db.json tables, keys and fields
// sorted, two-space indented.
func MarshalConfigDB(cfg Config) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	first := true
	for _, t := range slices.Sorted(maps.Keys(cfg)) {
		if len(cfg[t]) == 0 {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "\n  %s: {", quote(t))
		for i, k := range slices.Sorted(maps.Keys(cfg[t])) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n    %s: {", quote(k))
			f := cfg[t][k]
			for j, name := range slices.Sorted(maps.Keys(f)) {
				if j > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "\n      %s: %s", quote(name), quote(f[name]))
			}
			if len(f) > 0 {
				b.WriteString("\n    ")
			}
			b.WriteString("}")
		}
		b.WriteString("\n  }")
	}
	if !first {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

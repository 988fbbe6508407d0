package sonic

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// numericFields are the sonic-dtel leaves of integer type, rendered as
// JSON numbers in YANG instance data (RFC 7951).
var numericFields = map[string]bool{
	"SWITCH_ID": true, "FLOW_STATE_CLEAR_CYCLE": true, "LATENCY_SENSITIVITY": true,
	"INT_L4_DSCP_VALUE": true, "INT_L4_DSCP_MASK": true,
	"TRUNCATE_SIZE": true, "UDP_DEST_PORT": true, "MAX_HOP_COUNT": true,
	"queue": true, "QUEUE_DEPTH_THRESHOLD": true, "QUEUE_LATENCY_THRESHOLD": true, "THRESHOLD_BREACH_QUOTA": true,
	"EVENT_DSCP_VALUE": true, "PRIORITY": true, "IP_PROTOCOL": true, "NEXT_HEADER": true,
	"L4_SRC_PORT": true, "L4_DST_PORT": true, "TUNNEL_VNI": true, "INNER_IP_PROTOCOL": true,
	"INNER_L4_SRC_PORT": true, "INNER_L4_DST_PORT": true, "FLOW_SAMPLE_PERCENT": true,
	"ICMP_TYPE": true, "ICMP_CODE": true, "ICMPV6_TYPE": true, "ICMPV6_CODE": true,
}

func yangValue(field, v string) any {
	if numericFields[field] {
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 32); err == nil {
			return n
		}
	}
	return v
}

// YANGInstance renders the DTel entries of cfg as instance data of the
// sonic-dtel YANG module (RFC 7951 JSON), for validation with a YANG tool
// such as yanglint.
func YANGInstance(cfg Config) ([]byte, error) {
	top := map[string]any{}
	list := func(table string) *[]any {
		c, _ := top[table].(map[string]any)
		if c == nil {
			c = map[string]any{table + "_LIST": &[]any{}}
			top[table] = c
		}
		return c[table+"_LIST"].(*[]any)
	}
	entry := func(f Fields, upper bool, keys map[string]any) map[string]any {
		e := map[string]any{}
		for k, v := range f {
			if upper {
				k = strings.ToUpper(k)
			}
			e[k] = yangValue(k, v)
		}
		maps.Copy(e, keys)
		return e
	}
	for _, k := range cfg.Keys() {
		if !cfg.Owned(k) {
			continue
		}
		f := cfg.Get(k)
		switch k.Table {
		case TableDTel:
			d, _ := top[TableDTel].(map[string]any)
			if d == nil {
				d = map[string]any{}
				top[TableDTel] = d
			}
			if k.Name == "SINK_PORT_LIST" {
				var ports []any
				for _, p := range slices.Sorted(maps.Keys(f)) {
					ports = append(ports, map[string]any{"port": p, "value": f[p]})
				}
				d[k.Name] = map[string]any{"SINK_PORT_LIST_LIST": ports}
				continue
			}
			d[k.Name] = entry(f, false, nil)
		case TableReportSession, TableIntSession:
			l := list(k.Table)
			*l = append(*l, entry(f, false, map[string]any{"name": k.Name}))
		case TableQueueReport:
			port, q, _ := strings.Cut(k.Name, "|")
			l := list(k.Table)
			*l = append(*l, entry(f, false, map[string]any{"port": port, "queue": yangValue("queue", q)}))
		case TableEvent:
			l := list(k.Table)
			*l = append(*l, entry(f, false, map[string]any{"event": k.Name}))
		case TableACLTable:
			e := map[string]any{"ACL_TABLE_NAME": k.Name}
			for name, v := range f {
				e[strings.ToLower(name)] = v
			}
			l := list(k.Table)
			*l = append(*l, e)
		case TableACLRule:
			t, r, _ := strings.Cut(k.Name, "|")
			l := list(k.Table)
			*l = append(*l, entry(f, true, map[string]any{"ACL_TABLE_NAME": t, "RULE_NAME": r}))
		}
	}
	return json.MarshalIndent(map[string]any{"sonic-dtel:sonic-dtel": top}, "", "  ")
}

package server

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"

	"github.com/intd-project/intd/gen"
)

func strVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// Every leafref of the model, made to dangle in the example
// configuration, is refused by validateConfig exactly as by ygot's full
// ΛValidate; the same leaf set to a value it refers to passes both. A
// leafref added to the YANG fails the test until it has a case here.
func TestLeafrefsDangling(t *testing.T) {
	root := theSchemaRoot(t)
	m := leafrefModel(root)
	if m.fallback != "" {
		t.Fatalf("a leafref is not compiled, Set falls back to ygot's walk: %s", m.fallback)
	}
	cases := []struct {
		schema  string // the leafref leaf
		path    string // a data leaf whose value makes it dangle
		bad, ok *gpb.TypedValue
	}{
		{"/device/int/interfaces/interface/name", "/int/interfaces/interface[name=eth0]/config/name", strVal("eth9"), strVal("eth0")},
		{"/device/int/int-sessions/int-session/name", "/int/int-sessions/int-session[name=md-5]/config/name", strVal("md-6"), strVal("md-5")},
		{"/device/int/report-sessions/report-session/name", "/int/report-sessions/report-session[name=collector]/config/name", strVal("other"), strVal("collector")},
		{"/device/int/report-sessions/report-session/collectors/collector/address", "/int/report-sessions/report-session[name=collector]/collectors/collector[address=192.0.2.100][port=32766]/config/address", strVal("192.0.2.101"), strVal("192.0.2.100")},
		{"/device/int/report-sessions/report-session/collectors/collector/port", "/int/report-sessions/report-session[name=collector]/collectors/collector[address=192.0.2.100][port=32766]/config/port", uintVal(32767), uintVal(32766)},
		{"/device/int/watchlist/entries/entry/sequence-id", "/int/watchlist/entries/entry[sequence-id=10]/config/sequence-id", uintVal(11), uintVal(10)},
		{"/device/int/watchlist/entries/entry/actions/config/int-session", "/int/watchlist/entries/entry[sequence-id=10]/actions/config/int-session", strVal("no-such-session"), strVal("md-5")},
		{"/device/int/watchlist/entries/entry/actions/state/int-session", "/int/watchlist/entries/entry[sequence-id=10]/actions/state/int-session", strVal("no-such-session"), strVal("md-5")},
		{"/device/int/queue-reports/queue-report/interface", "/int/queue-reports/queue-report[interface=eth1][queue-id=0]/config/interface", strVal("eth2"), strVal("eth1")},
		{"/device/int/queue-reports/queue-report/queue-id", "/int/queue-reports/queue-report[interface=eth1][queue-id=0]/config/queue-id", uintVal(1), uintVal(0)},
		{"/device/int/events/event/type", "/int/events/event[type=FLOW_STATE]/config/type", strVal("DROP_REPORT"), strVal("FLOW_STATE")},
		{"/device/int/events/event/config/report-session", "/int/events/event[type=FLOW_STATE]/config/report-session", strVal("no-such-session"), strVal("collector")},
		{"/device/int/events/event/state/report-session", "/int/events/event[type=FLOW_STATE]/state/report-session", strVal("no-such-session"), strVal("collector")},
		{"/device/int/node/drops/drop/reason", "/int/node/drops/drop[reason=3]/state/reason", uintVal(4), uintVal(3)},
		{"/device/int/interfaces/interface/state/queues/queue/id", "/int/interfaces/interface[name=eth0]/state/queues/queue[id=1]/state/id", uintVal(2), uintVal(1)},
		{"/device/int/node/reports/report/type", "/int/node/reports/report[type=DROP]/state/type", strVal("QUEUE"), strVal("DROP")},
		{"/device/metadata-semantics/metadata-field/metadata-field-id", "/metadata-semantics/metadata-field[metadata-field-id=METADATA_FIELD_QUEUE_OCCUPANCY]/config/metadata-field-id", strVal("METADATA_FIELD_NODE_ID"), strVal("METADATA_FIELD_QUEUE_OCCUPANCY")},
		{"/device/domain-specific-metadata/domain/domain-specific-id", "/domain-specific-metadata/domain[domain-specific-id=4660]/config/domain-specific-id", uintVal(4661), uintVal(4660)},
		{"/device/domain-specific-metadata/domain/fields/field/domain-metadata-bit-position", "/domain-specific-metadata/domain[domain-specific-id=4660]/fields/field[domain-metadata-bit-position=0]/config/domain-metadata-bit-position", uintVal(1), uintVal(0)},
		{"/device/drop-reasons/drop-reason/code", "/drop-reasons/drop-reason[code=3]/state/code", uintVal(4), uintVal(3)},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.schema] = true
	}
	for e := range m.paths {
		if !covered[e.Path()] {
			t.Errorf("leafref %s has no dangling case", e.Path())
		}
	}
	base := exampleConfig(t)
	if err := validateConfig(root, base, nil); err != nil {
		t.Fatalf("example configuration: %v", err)
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) {
			for _, v := range []*gpb.TypedValue{c.bad, c.ok} {
				cp, err := ygot.DeepCopy(base)
				if err != nil {
					t.Fatal(err)
				}
				dev := cp.(*gen.Device)
				if err := ytypes.SetNode(root, dev, gp(t, c.path), v, &ytypes.InitMissingElements{}); err != nil {
					t.Fatalf("setting %s: %v", c.path, err)
				}
				ours, ygots := validateConfig(root, dev, nil), dev.ΛValidate()
				if (ours == nil) != (ygots == nil) {
					t.Fatalf("%s = %v: validateConfig says %v, ygot says %v", c.path, v, ours, ygots)
				}
				if want := v == c.ok; (ours == nil) != want {
					t.Fatalf("%s = %v: validateConfig says %v", c.path, v, ours)
				}
			}
		})
	}
}

func theSchemaRoot(t *testing.T) *yang.Entry {
	s, err := intdSchema()
	if err != nil {
		t.Fatal(err)
	}
	return s.s.root
}

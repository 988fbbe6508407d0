// Hand-written helpers next to the generated code; `make generate` only
// rewrites intd.go and versions.go.

package gen

import (
	"encoding/json"
	"fmt"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"

	"github.com/intd-project/intd/gen/yangjson"
)

var (
	schemaOnce sync.Once
	schemaRoot *yang.Entry
	schemaErr  error
)

// RootEntry returns the schema entry of the fake root (Device).
func RootEntry() (*yang.Entry, error) {
	schemaOnce.Do(func() {
		s, err := Schema()
		if err != nil {
			schemaErr = fmt.Errorf("loading schema: %w", err)
			return
		}
		schemaRoot = s.RootSchema()
	})
	return schemaRoot, schemaErr
}

// Model is intd's model for checking JSON values (package yangjson).
var Model = sync.OnceValue(func() *yangjson.Model { return yangjson.NewModel(ΛEnum) })

// ParseConfig decodes an RFC 7951 JSON document into a Device and validates
// it against the schema (types, ranges, patterns, leafrefs). Errors name the
// data path of the offending node, with list keys, e.g.
// /intd-int:int/int-sessions/int-session[name=md]/config/mode.
func ParseConfig(data []byte) (*Device, error) {
	doc, err := yangjson.DecodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config is not JSON: %w", err)
	}
	root, err := RootEntry()
	if err != nil {
		return nil, err
	}
	norm, changed, err := Model().NormalizeJSON(root, doc, "", yangjson.RFC7951)
	if err != nil {
		return nil, err
	}
	if changed {
		if data, err = json.Marshal(norm); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	dev := &Device{}
	if err := Unmarshal(data, dev); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := dev.ΛValidate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return dev, nil
}

// Models lists the served modules with their versions (revisions), as
// gNMI Capabilities reports them.
func Models() []*gpb.ModelData {
	models := make([]*gpb.ModelData, 0, len(ΓModelData))
	for _, m := range ΓModelData {
		models = append(models, &gpb.ModelData{Name: m.Name, Organization: m.Organization, Version: ModelVersions[m.Name]})
	}
	return models
}

package cache

import (
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/client-go/discovery"

	"ray-service/internal/ray"
)

// declaredCheck remembers the OpenAPI document of the Ray group last read, by the address the
// apiserver gives it, which carries the document's hash: an unchanged document is not read again.
type declaredCheck struct {
	mu   sync.Mutex
	seen string
}

// CheckDeclared learns which of the fields KubeRay versions added (ray.VersionedFields) the installed
// CRDs declare, from the apiserver's OpenAPI v3 document of ray.io/v1 (discovery: no rights needed), and
// tells the kinds (ray.Kinds.Declared). It returns the fields whose presence changed.
func (s *Store) CheckDeclared(disc discovery.DiscoveryInterface) ([]string, error) {
	paths, err := disc.OpenAPIV3().Paths()
	if err != nil {
		return nil, err
	}
	gv, ok := paths["apis/"+ray.RayGroupVersion.String()]
	if !ok {
		return s.kinds.Declared().Set(map[string]bool{}), nil
	}
	s.declared.mu.Lock()
	defer s.declared.mu.Unlock()
	if gv.ServerRelativeURL() == s.declared.seen {
		return nil, nil
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		return nil, err
	}
	fields, err := declaredIn(doc)
	if err != nil {
		return nil, err
	}
	s.declared.seen = gv.ServerRelativeURL()
	return s.kinds.Declared().Set(fields), nil
}

// openAPISchema is the part of an OpenAPI schema the check reads: the properties, nested.
type openAPISchema struct {
	Properties map[string]*openAPISchema `json:"properties"`
}

// declaredIn reads, in an OpenAPI v3 document of ray.io/v1, which versioned fields its kinds' schemas
// declare. A CRD's kind is the schema named after its group reversed, its version and its kind
// ("io.ray.v1.RayService", as the apiserver names CRD schemas).
func declaredIn(doc []byte) (map[string]bool, error) {
	var d struct {
		Components struct {
			Schemas map[string]*openAPISchema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document of %s: %w", ray.RayGroupVersion, err)
	}
	out := map[string]bool{}
	for _, f := range ray.VersionedFields() {
		kind, path := ray.SplitField(f)
		s := d.Components.Schemas["io.ray."+ray.RayGroupVersion.Version+"."+kind]
		for _, p := range path {
			if s == nil {
				break
			}
			s = s.Properties[p]
		}
		out[f] = s != nil
	}
	return out, nil
}

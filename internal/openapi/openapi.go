// Package openapi makes the API's published documents from the Swagger 2.0 document swag generates from
// the handlers' annotations: the Swagger 2.0 document completed where annotations cannot say it (an
// empty security on the anonymous operations, one operation id per method of a route served for several
// methods, the tags described), and an OpenAPI 3 document converted from it, in which a request body
// that may be JSON, YAML or an uploaded file lists the three media types. Validate checks both.
package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-openapi/loads"
	"github.com/go-openapi/strfmt"
	"github.com/go-openapi/validate"
	"sigs.k8s.io/yaml"
)

// Tags are the groups of operations, as a user looks for them, in the order documents list them.
func Tags() []Tag {
	return []Tag{
		{"resources", "Ray objects: list, create, show, replace, delete; a RayCronJob's runs."},
		{"lifecycle", "Start, stop, scale, run now, delete many."},
		{"observe", "Pods, logs, events and the Ray dashboard of an object."},
		{"overview", "What Ray clusters request and use; a cluster's health over a window."},
		{"streams", "Live updates (server-sent events) of lists, objects and the overview."},
		{"history", "What ran, kept after the objects are gone; run again from a record."},
		{"audit", "The signed trail of the writes made through the service."},
		{"notifications", "Webhooks told of jobs, clusters and services (signed CloudEvents); the stop of idle clusters by policy."},
		{"utilization", "Who held and who used the Ray clusters' CPUs, memory, GPUs and NPUs, per day, kept after the objects are gone."},
		{"service", "The service's own probes, metrics and documents; no token needed."},
	}
}

// Tag is one group of operations.
type Tag struct{ Name, Description string }

// FileField is the multipart field an uploaded manifest is sent in.
const FileField = "file"

// Documents are the published documents.
type Documents struct {
	// Swagger2JSON and Swagger2YAML are the Swagger 2.0 document; OpenAPI3JSON the OpenAPI 3.0 one.
	Swagger2JSON, Swagger2YAML, OpenAPI3JSON []byte
}

// methods are the operations of a path item, in the order Swagger 2.0 names them.
func methods() []string { return []string{"get", "put", "post", "delete", "options", "head", "patch"} }

// Build makes the documents from swag's Swagger 2.0 JSON.
func Build(swag []byte) (*Documents, error) {
	var doc map[string]any
	if err := json.Unmarshal(swag, &doc); err != nil {
		return nil, fmt.Errorf("the Swagger document: %w", err)
	}
	if err := complete(doc); err != nil {
		return nil, err
	}
	v2, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return nil, err
	}
	v2yaml, err := yaml.JSONToYAML(v2)
	if err != nil {
		return nil, err
	}
	v3, err := toV3(v2)
	if err != nil {
		return nil, err
	}
	return &Documents{Swagger2JSON: append(v2, '\n'), Swagger2YAML: v2yaml, OpenAPI3JSON: append(v3, '\n')}, nil
}

// complete says in the Swagger 2.0 document what the annotations cannot: that an operation without
// security needs none; an operation id per method where one handler serves several methods of a path
// (proxyDashboard: proxyDashboardGet, ...); and the tags, described. It refuses an operation without an
// id and an id given twice.
func complete(doc map[string]any) error {
	paths, _ := doc["paths"].(map[string]any)
	ids := map[string]string{}
	var problems []string
	for _, path := range sortedKeys(paths) {
		item, _ := paths[path].(map[string]any)
		shared := map[string]int{} // ids by how many methods of this path have them
		for _, m := range methods() {
			if op, ok := item[m].(map[string]any); ok {
				id, _ := op["operationId"].(string)
				shared[id]++
			}
		}
		for _, m := range methods() {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			if _, ok := op["security"]; !ok {
				op["security"] = []any{}
			}
			id, _ := op["operationId"].(string)
			if id == "" {
				problems = append(problems, fmt.Sprintf("%s %s has no operation id (@ID)", strings.ToUpper(m), path))
				continue
			}
			if shared[id] > 1 {
				id += strings.ToUpper(m[:1]) + m[1:]
				op["operationId"] = id
			}
			if other, dup := ids[id]; dup {
				problems = append(problems, fmt.Sprintf("operation id %s is given to %s and %s %s", id, other, strings.ToUpper(m), path))
			}
			ids[id] = strings.ToUpper(m) + " " + path
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	sized(doc)
	tags := []any{}
	for _, t := range Tags() {
		tags = append(tags, map[string]any{"name": t.Name, "description": t.Description})
	}
	doc["tags"] = tags
	return nil
}

// sized gives every number and integer without a format the one the service encodes: Go's float64 and
// int (64-bit) are "double" and "int64". Without it, generators take a number for a float32 and lose
// digits (2147483648 bytes of memory decode as 2.1474836e+09).
func sized(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, has := v["format"]; !has {
			switch v["type"] {
			case "number":
				v["format"] = "double"
			case "integer":
				v["format"] = "int64"
			}
		}
		for _, c := range v {
			sized(c)
		}
	case []any:
		for _, c := range v {
			sized(c)
		}
	}
}

// toV3 converts the completed Swagger 2.0 document: a request body of an operation that consumes
// multipart/form-data is, in that media type, a form whose field "file" holds the manifest.
func toV3(v2 []byte) ([]byte, error) {
	var doc2 openapi2.T
	if err := json.Unmarshal(v2, &doc2); err != nil {
		return nil, err
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, fmt.Errorf("converting to OpenAPI 3: %w", err)
	}
	for _, item := range doc3.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			content := op.RequestBody.Value.Content
			if mt, ok := content["multipart/form-data"]; ok {
				file := openapi3.NewStringSchema().WithFormat("binary")
				file.Description = "the manifest, JSON or YAML"
				form := openapi3.NewObjectSchema().WithProperty(FileField, file)
				form.Required = []string{FileField}
				mt.Schema = form.NewRef()
			}
		}
	}
	return json.MarshalIndent(doc3, "", "    ")
}

// Validate checks both documents as OpenAPI tools do: the Swagger 2.0 one against the Swagger 2.0
// specification (go-openapi's validator, as go-swagger runs it), the OpenAPI 3 one with kin-openapi's.
func Validate(docs *Documents) error {
	var errs []error
	spec, err := loads.Analyzed(docs.Swagger2JSON, "2.0")
	if err == nil {
		err = validate.Spec(spec, strfmt.Default)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("the Swagger 2.0 document: %w", err))
	}
	loader := openapi3.NewLoader()
	doc3, err := loader.LoadFromData(docs.OpenAPI3JSON)
	if err == nil {
		err = doc3.Validate(context.Background())
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("the OpenAPI 3 document: %w", err))
	}
	return errors.Join(errs...)
}

// Equal tells whether the documents are the same as others, byte for byte.
func (d *Documents) Equal(o *Documents) bool {
	return bytes.Equal(d.Swagger2JSON, o.Swagger2JSON) && bytes.Equal(d.Swagger2YAML, o.Swagger2YAML) &&
		bytes.Equal(d.OpenAPI3JSON, o.OpenAPI3JSON)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package openapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/docs"
)

// The published documents (make swagger) pass both validators, and hold what a generated client needs:
// a unique id, a known tag and a security (empty where anonymous) on every operation, and, in the
// OpenAPI 3 one, the three media types of a create.
func TestPublishedDocuments(t *testing.T) {
	published := &Documents{Swagger2JSON: docs.Swagger2(), OpenAPI3JSON: docs.OpenAPI3()}
	require.NoError(t, Validate(published))

	tags := []string{}
	for _, tg := range Tags() {
		tags = append(tags, tg.Name)
	}
	for name, doc := range map[string][]byte{"Swagger 2.0": docs.Swagger2(), "OpenAPI 3": docs.OpenAPI3()} {
		var d struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(doc, &d), name)
		ids := map[string]bool{}
		for path, item := range d.Paths {
			for method, raw := range item {
				if !slices.Contains(methods(), method) {
					continue
				}
				var op struct {
					ID       string            `json:"operationId"`
					Tags     []string          `json:"tags"`
					Security *[]map[string]any `json:"security"`
				}
				require.NoError(t, json.Unmarshal(raw, &op))
				where := name + " " + strings.ToUpper(method) + " " + path
				assert.NotEmpty(t, op.ID, where)
				assert.False(t, ids[op.ID], "%s: id %s given twice", where, op.ID)
				ids[op.ID] = true
				if assert.Len(t, op.Tags, 1, where) {
					assert.Contains(t, tags, op.Tags[0], where)
				}
				if assert.NotNil(t, op.Security, where) && strings.HasPrefix(path, "/rest/ray/v1/") &&
					!strings.HasSuffix(path, "/openapi.json") {
					assert.NotEmpty(t, *op.Security, "%s needs a token", where)
				}
			}
		}
		assert.Len(t, ids, 51, name)
	}

	var v3 struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]json.RawMessage `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(docs.OpenAPI3(), &v3))
	for _, op := range []struct{ path, method string }{{"/rest/ray/v1/namespaces/{namespace}/{kind}", "post"},
		{"/rest/ray/v1/namespaces/{namespace}/{kind}/{name}", "put"}} {
		content := v3.Paths[op.path][op.method].RequestBody.Content
		assert.ElementsMatch(t, []string{"application/json", "application/yaml", "multipart/form-data"}, keys(content), op.path)
		assert.Contains(t, string(content["multipart/form-data"]), `"file"`)
		assert.Contains(t, string(content["multipart/form-data"]), `"binary"`)
	}
}

// What the documents were before they were made valid fails the validators: a create with both a body
// and a form field, an id missing or given twice.
func TestValidatorsRefuse(t *testing.T) {
	doc := func(params string) []byte {
		return []byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{"/x":{"post":{"operationId":"createX",
			"consumes":["application/json","multipart/form-data"],"parameters":[` + params + `],"responses":{"200":{"description":"ok"}}}}}}`)
	}
	body := `{"name":"body","in":"body","schema":{"type":"object"}}`
	valid, err := Build(doc(body))
	require.NoError(t, err)
	require.NoError(t, Validate(valid))

	both := doc(body + `,{"name":"file","in":"formData","type":"file"}`)
	_, err = Build(both)
	require.ErrorContains(t, err, "body and form parameters cannot exist together")
	err = Validate(&Documents{Swagger2JSON: both, OpenAPI3JSON: valid.OpenAPI3JSON})
	require.Error(t, err, "the Swagger 2.0 validator refuses it too")
	assert.Contains(t, err.Error(), "formData")

	_, err = Build([]byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{"/x":{"get":{"responses":{"200":{"description":"ok"}}}}}}`))
	require.ErrorContains(t, err, "GET /x has no operation id")
	_, err = Build([]byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{"/x":{"get":{"operationId":"a","responses":{"200":{"description":"ok"}}}},
		"/y":{"get":{"operationId":"a","responses":{"200":{"description":"ok"}}}}}}`))
	require.ErrorContains(t, err, "operation id a is given to")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

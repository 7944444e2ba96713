//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file's tests run last: they check what every earlier test saw against docs/swagger.

// recorded are the service's answers the tests received, as call saw them.
var recorded struct {
	sync.Mutex
	answers []answer
}

type answer struct {
	method, path, contentType string
	status                    int
	body                      []byte
}

func record(method, path string, r *response) {
	recorded.Lock()
	defer recorded.Unlock()
	recorded.answers = append(recorded.answers, answer{method: strings.ToLower(method), path: strings.SplitN(path, "?", 2)[0],
		contentType: r.Header.Get("Content-Type"), status: r.Status, body: r.Raw})
}

type spec struct {
	Paths       map[string]map[string]operation `json:"paths"`
	Definitions map[string]jsonSchema           `json:"definitions"`
}

type operation struct {
	Produces  []string                                `json:"produces"`
	Responses map[string]struct{ Schema *jsonSchema } `json:"responses"`
}

type jsonSchema struct {
	Ref        string                `json:"$ref"`
	Type       string                `json:"type"`
	AllOf      []jsonSchema          `json:"allOf"`
	Properties map[string]jsonSchema `json:"properties"`
	Items      *jsonSchema           `json:"items"`
	Required   []string              `json:"required"`
	Additional json.RawMessage       `json:"additionalProperties"` // a schema, or true
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "docs", "swagger", "swagger.json"))
	require.NoError(t, err)
	var s spec
	require.NoError(t, json.Unmarshal(b, &s))
	return &s
}

// route finds the documented path a request path falls under: the one with the fewest parameters.
func (s *spec) route(path string) string {
	best, bestParams := "", 1<<30
	for p := range s.Paths {
		params := strings.Count(p, "{")
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllStringFunc(regexp.QuoteMeta(p), func(m string) string {
			if m == `\{path\}` {
				return ".*"
			}
			return "[^/]+"
		}) + "$"
		if regexp.MustCompile(re).MatchString(path) && params < bestParams {
			best, bestParams = p, params
		}
	}
	return best
}

// check reports where v does not fit the jsonSchema.
func (s *spec) check(sc jsonSchema, v any, at string) []string {
	if sc.Ref != "" {
		return s.check(s.Definitions[strings.TrimPrefix(sc.Ref, "#/definitions/")], v, at)
	}
	var errs []string
	for _, part := range sc.AllOf {
		errs = append(errs, s.check(part, v, at)...)
	}
	if v == nil {
		return errs // absent or null: swag marks no field required, and pointers may be null
	}
	switch sc.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want an object, got %T", at, v))
		}
		for name, p := range sc.Properties {
			errs = append(errs, s.check(p, m[name], at+"."+name)...)
		}
		var additional jsonSchema
		if len(sc.Additional) > 0 && sc.Additional[0] == '{' && json.Unmarshal(sc.Additional, &additional) == nil {
			for name, val := range m {
				errs = append(errs, s.check(additional, val, at+"."+name)...)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want an array, got %T", at, v))
		}
		if sc.Items != nil {
			for i, item := range a {
				errs = append(errs, s.check(*sc.Items, item, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			errs = append(errs, fmt.Sprintf("%s: want a string, got %T", at, v))
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			errs = append(errs, fmt.Sprintf("%s: want an integer, got %v", at, v))
		}
	case "number":
		if _, ok := v.(float64); !ok {
			errs = append(errs, fmt.Sprintf("%s: want a number, got %T", at, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, fmt.Sprintf("%s: want a boolean, got %T", at, v))
		}
	}
	return errs
}

// Every answer the tests received has a documented route, method and status, and its JSON body fits
// the documented jsonSchema: the docs and the behaviour cannot drift apart.
func TestResponsesMatchSpec(t *testing.T) {
	s := loadSpec(t)
	recorded.Lock()
	answers := append([]answer(nil), recorded.answers...)
	recorded.Unlock()
	if len(answers) < 500 {
		t.Skipf("only %d answers recorded: run the whole suite", len(answers))
	}
	seen := map[string]bool{}
	problems := map[string]int{}
	for _, a := range answers {
		route := s.route(a.path)
		if route == "" {
			problems[fmt.Sprintf("%s %s: no documented path", a.method, a.path)]++
			continue
		}
		op, ok := s.Paths[route][a.method]
		if !ok {
			if a.status == 405 {
				continue
			}
			problems[fmt.Sprintf("%s %s: method not documented", a.method, route)]++
			continue
		}
		key := fmt.Sprintf("%s %s %d", a.method, route, a.status)
		seen[key] = true
		res, ok := op.Responses[fmt.Sprint(a.status)]
		if !ok {
			problems[key+": status not documented"]++
			continue
		}
		if !strings.HasPrefix(a.contentType, "application/json") || res.Schema == nil || strings.HasSuffix(route, "/dashboard/{path}") {
			continue
		}
		var body any
		if err := json.Unmarshal(a.body, &body); err != nil {
			problems[key+": not JSON"]++
			continue
		}
		for _, e := range s.check(*res.Schema, body, "body") {
			problems[key+": "+e]++
		}
	}
	var keys []string
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d answers checked, %d distinct route/status pairs", len(answers), len(keys))
	for p, n := range problems {
		assert.Fail(t, p, "%d times", n)
	}
}

// The Swagger UI, rendered by headless Chromium, lists the operations.
func TestSwaggerUIRenders(t *testing.T) {
	dom := renderPage(t, env.serviceURL+"/rest/ray/v1/swagger/index.html")
	assert.Contains(t, dom, "opblock", "operations rendered")
	for _, path := range []string{"/rest/ray/v1/namespaces/{namespace}/{kind}", "/rest/ray/v1/namespaces/{namespace}/rayclusters/{name}/metrics",
		"/rest/ray/v1/{kind}/batch-delete", "/rest/ray/v1/overview"} {
		assert.Contains(t, dom, `data-path="`+path+`"`, path)
	}
	assert.GreaterOrEqual(t, strings.Count(dom, `class="opblock opblock-`), 15, "every operation listed")
}

// recordStream keeps the opening of a stream among the answers checked against the docs.
func recordStream(method, path string, res *http.Response, body []byte) {
	record(method, path, &response{Status: res.StatusCode, Header: res.Header, Raw: body})
}

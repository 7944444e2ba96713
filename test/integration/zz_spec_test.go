//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The answers the tests received are checked against docs/swagger once every test that ran has ended
// (checkAnswers, from TestMain): a subset chosen with -test.run is checked too, and the check cannot be
// filtered out.

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

// loadSpec reads docs/swagger/swagger.json. The swagger lists no required fields (swag marks none), so
// each definition's required fields are read from the Go type it documents: a field without omitempty
// (or omitzero) is in every answer that carries the type, so a documented one that is missing means the
// answer was not made of the documented type.
func loadSpec(root string) (*spec, error) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "swagger", "swagger.json"))
	if err != nil {
		return nil, err
	}
	var s spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	types, err := readStructs(filepath.Join(root, "internal"))
	if err != nil {
		return nil, err
	}
	for name, def := range s.Definitions {
		if len(def.Required) > 0 || def.Type != "object" {
			continue
		}
		// swag names a definition package.Type, and an instance of a generic type package.Type-arguments.
		base, _, _ := strings.Cut(name, "-")
		if types.ambiguous[base] {
			return nil, fmt.Errorf("definition %s: two Go structs of that name under internal/", name)
		}
		always, ok := types.alwaysPresent(base)
		if !ok {
			return nil, fmt.Errorf("definition %s: no Go struct of that name under internal/", name)
		}
		for field := range def.Properties {
			if always[field] {
				def.Required = append(def.Required, field)
			}
		}
		sort.Strings(def.Required)
		s.Definitions[name] = def
	}
	return &s, nil
}

// goStructs are the struct types of the service's packages, by package name and type name, with the
// types that encode themselves (a MarshalJSON method) apart.
type goStructs struct {
	structs   map[string]*ast.StructType // "pkg.Type"
	marshaled map[string]bool            // "pkg.Type" with a MarshalJSON method
	ambiguous map[string]bool            // "pkg.Type" of two packages of one name
}

func readStructs(dir string) (*goStructs, error) {
	g := &goStructs{structs: map[string]*ast.StructType{}, marshaled: map[string]bool{}, ambiguous: map[string]bool{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							if _, twice := g.structs[pkg+"."+ts.Name.Name]; twice {
								g.ambiguous[pkg+"."+ts.Name.Name] = true
							}
							g.structs[pkg+"."+ts.Name.Name] = st
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "MarshalJSON" {
					if name := typeName(pkg, d.Recv.List[0].Type); name != "" {
						g.marshaled[name] = true
					}
				}
			}
		}
		return nil
	})
	return g, err
}

// typeName names the type of expr (T, *T, pkg.T, T[X]) as "pkg.T", pkg being the package expr is in
// unless it says another; "" for any other type.
func typeName(pkg string, expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return typeName(pkg, e.X)
	case *ast.IndexExpr:
		return typeName(pkg, e.X)
	case *ast.IndexListExpr:
		return typeName(pkg, e.X)
	case *ast.Ident:
		return pkg + "." + e.Name
	case *ast.SelectorExpr:
		if p, ok := e.X.(*ast.Ident); ok {
			return p.Name + "." + e.Sel.Name
		}
	}
	return ""
}

// alwaysPresent returns the JSON names of the fields of the struct name that encoding/json always
// writes, the fields of embedded structs included; ok is false when no such struct is known. A type
// that encodes itself has none that can be told.
func (g *goStructs) alwaysPresent(name string) (map[string]bool, bool) {
	st, ok := g.structs[name]
	if !ok {
		return nil, false
	}
	out := map[string]bool{}
	if g.marshaled[name] {
		return out, true
	}
	pkg, _, _ := strings.Cut(name, ".")
	for _, f := range st.Fields.List {
		tag := reflect.StructTag("")
		if f.Tag != nil {
			if v, err := strconv.Unquote(f.Tag.Value); err == nil {
				tag = reflect.StructTag(v)
			}
		}
		if tag.Get("swaggerignore") == "true" {
			continue
		}
		jsonName, opts, _ := strings.Cut(tag.Get("json"), ",")
		if jsonName == "-" && opts == "" {
			continue
		}
		if len(f.Names) == 0 && jsonName == "" { // embedded: its fields are the struct's
			if _, pointer := f.Type.(*ast.StarExpr); pointer {
				continue // a nil pointer writes none of them
			}
			if inner, ok := g.alwaysPresent(typeName(pkg, f.Type)); ok {
				for n := range inner {
					out[n] = true
				}
			}
			continue
		}
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		for _, n := range f.Names {
			if !n.IsExported() || optional {
				continue
			}
			if jsonName != "" {
				out[jsonName] = true
			} else {
				out[n.Name] = true
			}
		}
		if len(f.Names) == 0 && !optional { // embedded with a name of its own
			out[jsonName] = true
		}
	}
	return out, true
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
		return errs // null (a nil pointer, slice or map) or absent: the object holding it says whether it may be absent
	}
	switch sc.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want an object, got %T", at, v))
		}
		for _, name := range sc.Required {
			if _, ok := m[name]; !ok {
				errs = append(errs, fmt.Sprintf("%s.%s: a documented field always sent is missing", at, name))
			}
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

// checkAnswers checks every answer the tests received: its route, method and status are documented, and
// its JSON body fits the documented schema, with every documented field that is always sent. It returns
// the problems, each with how often it was seen, and the documented route/status pairs each with
// whether an answer was seen ("get /path 200").
func checkAnswers(root string, answers []answer) (problemList []string, pairs map[string]bool, err error) {
	s, err := loadSpec(root)
	if err != nil {
		return nil, nil, err
	}
	pairs = map[string]bool{}
	for route, ops := range s.Paths {
		for method, op := range ops {
			for status := range op.Responses {
				pairs[fmt.Sprintf("%s %s %s", method, route, status)] = false
			}
		}
	}
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
		res, ok := op.Responses[fmt.Sprint(a.status)]
		if !ok {
			problems[key+": status not documented"]++
			continue
		}
		pairs[key] = true
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
	for p, n := range problems {
		problemList = append(problemList, fmt.Sprintf("%s (%d times)", p, n))
	}
	sort.Strings(problemList)
	return problemList, pairs, nil
}

// recordedAnswers returns a copy of the answers recorded so far.
func recordedAnswers() []answer {
	recorded.Lock()
	defer recorded.Unlock()
	return append([]answer(nil), recorded.answers...)
}

// The check finds a documented field that is always sent missing from an answer, a field of the wrong
// type, and an undocumented status; it passes the same answers whole, and counts the pair they answered
// (and not an undocumented one).
func TestAnswersCheckFindsWhatIsMissing(t *testing.T) {
	t.Parallel()
	const path = "/rest/ray/v1/namespaces/default/rayclusters"
	whole := answer{method: "get", path: path, contentType: "application/json; charset=utf-8", status: 200,
		body: []byte(`{"code":200,"msg":"OK","data":{"items":[],"total":0,"page":1,"pageSize":20}}`)}
	teapot := whole
	teapot.status = 418
	problems, pairs, err := checkAnswers(env.root, []answer{whole, whole, teapot})
	require.NoError(t, err)
	assert.Equal(t, []string{"get /rest/ray/v1/namespaces/{namespace}/{kind} 418: status not documented (1 times)"}, problems)
	var answered []string
	for p, seen := range pairs {
		if seen {
			answered = append(answered, p)
		}
	}
	assert.Equal(t, []string{"get /rest/ray/v1/namespaces/{namespace}/{kind} 200"}, answered)
	assert.Contains(t, pairs, "get /rest/ray/v1/namespaces/{namespace}/{kind} 404", "a documented pair not answered")
	assert.Greater(t, len(pairs), 300, "every documented pair")

	noTotal, noData, wrongType, undocumented := whole, whole, whole, whole
	noTotal.body = []byte(`{"code":200,"msg":"OK","data":{"items":[],"page":1,"pageSize":20}}`)
	noData.body = []byte(`{"code":200,"msg":"OK"}`)
	wrongType.body = []byte(`{"code":200,"msg":"OK","data":{"items":[],"total":"0","page":1,"pageSize":20}}`)
	undocumented.status = 418
	problems, _, err = checkAnswers(env.root, []answer{noTotal, noData, wrongType, undocumented})
	require.NoError(t, err)
	joined := strings.Join(problems, "\n")
	assert.Contains(t, joined, "body.data.total: a documented field always sent is missing")
	assert.Contains(t, joined, "body.data: a documented field always sent is missing")
	assert.Contains(t, joined, "body.data.total: want an integer")
	assert.Contains(t, joined, "418: status not documented")
	assert.Len(t, problems, 4, "%s", joined)
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

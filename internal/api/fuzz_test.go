package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
)

// The fuzz targets send what a caller controls (query strings, bodies, content types) through the real
// router, with fakes behind it, and hold every answer to the API's promises: no panic, never a 500, an
// envelope whose code is the HTTP status, and a 4xx that says what is wrong. `go test` runs their seeds;
// `make test` fuzzes each for a bounded time.

// routes a fuzzed query string goes to: every parser of query parameters.
var fuzzQueryRoutes = []string{
	"/rest/ray/v1/rayclusters",
	"/rest/ray/v1/namespaces/a/rayjobs",
	"/rest/ray/v1/overview",
	"/rest/ray/v1/namespaces/a/rayclusters/x/logs",
	"/rest/ray/v1/namespaces/a/rayclusters/x/events",
	"/rest/ray/v1/namespaces/a/rayclusters/x/metrics",
	"/rest/ray/v1/namespaces/a/rayservices/x/pods",
}

// content types a fuzzed body is sent as; "multipart" wraps it as an uploaded file.
var fuzzContentTypes = []string{"application/json", "application/yaml", "text/plain", "multipart", "multipart/form-data; boundary=b", ""}

// routes a fuzzed body goes to: every reader of request bodies.
var fuzzBodyRoutes = []struct{ method, path string }{
	{"POST", "/rest/ray/v1/namespaces/a/rayclusters"},
	{"POST", "/rest/ray/v1/namespaces/a/rayjobs?start=false"},
	{"PUT", "/rest/ray/v1/namespaces/a/rayservices/x"},
	{"POST", "/rest/ray/v1/rayclusters/batch-delete"},
}

func fuzzEnv() *handlerEnv {
	return &handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true,
		scopes: map[string]auth.Scope{}}, store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}}
}

// checkAnswer holds one answer to the API's promises.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("%s: %d %s", what, w.Code, w.Body.String())
	}
	if w.Header().Get("Content-Type") != "application/json; charset=utf-8" {
		return // a log stream or a YAML export
	}
	var env Envelope
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
		t.Fatalf("%s: the answer is no envelope: %v: %q", what, err, w.Body.String())
	}
	if env.Code != w.Code {
		t.Fatalf("%s: envelope code %d, HTTP status %d", what, env.Code, w.Code)
	}
	if w.Code >= 400 && (env.Msg == "" || env.Reason == "") {
		t.Fatalf("%s: a %d without a reason: %q", what, w.Code, w.Body.String())
	}
}

func FuzzQueryParameters(f *testing.F) {
	for _, q := range []string{"", "search=demo&status=Running,Stopped&sortBy=name&order=asc&page=2&pageSize=20",
		"labelSelector=team%3Dml,tier!%3Dweb&type=template", "page=0", "pageSize=100000", "sortBy=owner", "order=up",
		"labelSelector=a+in+(", "window=1h&namespace=a", "window=31d", "window=-5m", "start=1&end=0",
		"follow=true&tailLines=-1&sinceSeconds=9999999999999&container=ray-head&pod=x-head",
		"previous=maybe&limitBytes=0", "status=%ff%00", "page=99999999999999999999", "namespace=A_B"} {
		for i := range fuzzQueryRoutes {
			f.Add(uint8(i), q)
		}
	}
	env := fuzzEnv()
	h := env.router()
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		env.objects.calls = nil
		path := fuzzQueryRoutes[int(route)%len(fuzzQueryRoutes)]
		r := httptest.NewRequest("GET", path, nil)
		r.URL.RawQuery = query
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		serveWithin(t, h, w, r)
		checkAnswer(t, w, "GET "+path+"?"+query)
	})
}

func FuzzRequestBodies(f *testing.F) {
	files, _ := filepath.Glob("../../test/integration/testdata/ray*.yaml")
	var seeds [][]byte
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			seeds = append(seeds, data)
		}
	}
	seeds = append(seeds, []byte(`{"metadata":{"name":"demo"},"spec":{}}`), []byte(`{"items":[{"namespace":"a","name":"x"}]}`),
		[]byte("metadata: {name: demo}\n---\nmetadata: {name: other}\n"), []byte("a: &a [*a, *a]\n"), []byte(`[1,2]`),
		[]byte(`{"metadata":{"name":"x","namespace":"b"},"kind":"RayJob","apiVersion":"v0"}`), []byte("\xff\xfe"), nil)
	for i, s := range seeds { // each seed through two routes and content types; the fuzzer varies them
		f.Add(uint8(i), uint8(i), s)
		f.Add(uint8(i+1), uint8(i+3), s)
	}
	env := fuzzEnv()
	h := env.router()
	f.Fuzz(func(t *testing.T, route, ct uint8, body []byte) {
		env.objects.calls = nil
		rt := fuzzBodyRoutes[int(route)%len(fuzzBodyRoutes)]
		contentType := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]
		if contentType == "multipart" {
			var b bytes.Buffer
			b.WriteString("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.yaml\"\r\n\r\n")
			b.Write(body)
			b.WriteString("\r\n--b--\r\n")
			body, contentType = b.Bytes(), "multipart/form-data; boundary=b"
		}
		r := httptest.NewRequest(rt.method, "/", bytes.NewReader(body))
		r.URL.Path, r.URL.RawQuery = splitPath(rt.path)
		r.Header.Set("Authorization", "Bearer t")
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		serveWithin(t, h, w, r)
		checkAnswer(t, w, rt.method+" "+rt.path+" as "+contentType)
		if w.Code != http.StatusOK && w.Code != http.StatusCreated && w.Code < 400 {
			t.Fatalf("%s %s: unexpected %d", rt.method, rt.path, w.Code)
		}
	})
}

// serveWithin serves r, failing (by crashing the fuzzing process, which the fuzzer reports with the
// input) when the answer takes longer than any request may.
func serveWithin(t *testing.T, h http.Handler, w *httptest.ResponseRecorder, r *http.Request) {
	t.Helper()
	const limit = 5 * time.Second
	timer := time.AfterFunc(limit, func() { panic(fmt.Sprintf("%s %s took over %s", r.Method, r.URL, limit)) })
	defer timer.Stop()
	h.ServeHTTP(w, r)
}

func splitPath(p string) (path, query string) {
	for i := range len(p) {
		if p[i] == '?' {
			return p[:i], p[i+1:]
		}
	}
	return p, ""
}

package api

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConfineLocation(t *testing.T) {
	const prefix = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard"
	const addr = "x-head-svc.a.svc.cluster.local:8265"
	for loc, want := range map[string]string{
		"/api/jobs/":                            prefix + "/api/jobs/",
		"/#/overview?x=1":                       prefix + "/#/overview?x=1",
		"/jobs?state=RUNNING":                   prefix + "/jobs?state=RUNNING",
		"jobs/":                                 "jobs/",
		"../other":                              "../other",
		"http://" + addr + "/logs":              prefix + "/logs",
		"http://attacker.example/phish":         prefix + "/",
		"//attacker.example/phish":              prefix + "/",
		"javascript:alert(1)":                   prefix + "/",
		"https://" + addr + ".attacker.example": prefix + "/",
		"http://[::1":                           prefix + "/",
	} {
		assert.Equal(t, want, confineLocation(loc, prefix, addr), loc)
	}
}

func TestRequestOrigin(t *testing.T) {
	r := httptest.NewRequest("GET", "http://svc.local:8080/x", nil)
	assert.Equal(t, "http://svc.local:8080", requestOrigin(r))
	r.TLS = &tls.ConnectionState{}
	assert.Equal(t, "https://svc.local:8080", requestOrigin(r))
	r.Header.Set("X-Forwarded-Proto", "http, https")
	r.Header.Set("X-Forwarded-Host", "console.example.com, inner")
	assert.Equal(t, "http://console.example.com", requestOrigin(r), "the first of each, from the gateway")
	r.Header.Set("X-Forwarded-Host", "evil.example; script-src *")
	r.Header.Set("X-Forwarded-Proto", "javascript")
	assert.Equal(t, "https://svc.local:8080", requestOrigin(r), "a malformed forwarded value is not used")
}

// The proxy asks the apiserver's verb for each method, and refuses methods it does not proxy.
func TestDashboardProxyVerbs(t *testing.T) {
	for method, verb := range map[string]string{"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
		"PATCH": "update", "DELETE": "delete"} {
		authz := &recordingAuthz{}
		e := handlerEnv{objects: &fakeObjects{}, authz: &fakeAuthz{}, store: &fakeStore{}}
		h := e.routerWith(func(d *Deps) { d.Authz = authz })
		r := httptest.NewRequest(method, "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/api/", nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusForbidden, w.Code, method)
		assert.Equal(t, []string{verb + " services/proxy a"}, authz.asked, method)
	}
}

// With a separate dashboard origin, the proxy is served there only: requests for it on the console's
// origin are redirected, the API is not served there, and details link to it.
func TestDashboardOrigin(t *testing.T) {
	e := handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true}, store: &fakeStore{}}
	h := e.routerWith(func(d *Deps) { d.DashboardOrigin = "https://dash.example" })
	do := func(host, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = host
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const dash = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/api/version"
	w := do("console.example", dash)
	assert.Equal(t, http.StatusTemporaryRedirect, w.Code)
	assert.Equal(t, "https://dash.example"+dash, w.Header().Get("Location"))
	w = do("dash.example", "/rest/ray/v1/rayclusters")
	assert.Equal(t, http.StatusNotFound, w.Code, "the API is not served on the dashboard origin")
	w = do("console.example", "/rest/ray/v1/namespaces/a/rayclusters/x")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `"dashboardURL":"https://dash.example/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/"`)
}

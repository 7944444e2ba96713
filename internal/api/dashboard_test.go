package api

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

func TestConfineLocation(t *testing.T) {
	const prefix = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard"
	const addr = "x-head-svc.a.svc.cluster.local:8265"
	const at = prefix + "/jobs/list"
	kept := map[string]string{
		"/api/jobs/":               prefix + "/api/jobs/",
		"/#/overview?x=1":          prefix + "/#/overview?x=1",
		"/jobs?state=RUNNING":      prefix + "/jobs?state=RUNNING",
		"jobs/":                    prefix + "/jobs/jobs/",
		"../other":                 prefix + "/other",
		"./x/../y":                 prefix + "/jobs/y",
		"?page=2":                  prefix + "/jobs/list?page=2",
		"http://" + addr + "/logs": prefix + "/logs",
		"//" + addr + "/logs":      prefix + "/logs",
		"/../../../../../../audit": prefix + "/audit",
		"/%2e%2e/%2e%2e/audit":     prefix + "/audit",
	}
	for loc, want := range kept {
		got, ok := confineLocation(loc, at, prefix, addr)
		assert.True(t, ok, loc)
		assert.Equal(t, want, got, loc)
	}
	for _, loc := range []string{
		"../../other",
		"../../../../../../../../rest/ray/v1/audit",
		"../%2e%2e/%2e%2e/audit",
		`\\evil.example/phish`,
		`/\evil.example/phish`,
		`/\api`,
		"/\t/evil.example/phish",
		"/\n/evil.example",
		"http://attacker.example/phish",
		"//attacker.example/phish",
		"javascript:alert(1)",
		"data:text/html,<script>",
		"https://" + addr + ".attacker.example",
		"http://user@" + addr + "/x",
		"http://[::1",
	} {
		got, ok := confineLocation(loc, at, prefix, addr)
		assert.False(t, ok, loc)
		assert.Equal(t, prefix+"/", got, loc)
	}
}

// A redirect that would leave the box goes to the dashboard's root as a GET; one within keeps its status.
func TestConfineRedirectStatus(t *testing.T) {
	const prefix = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard"
	res := &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"../../../../audit"}}}
	confine(res, prefix+"/p", "https://dash.example", prefix, "x:8265", false)
	assert.Equal(t, http.StatusSeeOther, res.StatusCode)
	assert.Equal(t, prefix+"/", res.Header.Get("Location"))
	res = &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"./q"}}}
	confine(res, prefix+"/p", "https://dash.example", prefix, "x:8265", false)
	assert.Equal(t, http.StatusTemporaryRedirect, res.StatusCode)
	assert.Equal(t, prefix+"/q", res.Header.Get("Location"))
}

func TestDashboardCSP(t *testing.T) {
	own := dashboardCSP("https://dash.example/p/", false)
	assert.Contains(t, own, "connect-src https://dash.example/p/;")
	assert.Contains(t, own, "frame-ancestors 'none'", "no other dashboard of the origin frames it")
	assert.NotContains(t, own, "sandbox")
	same := dashboardCSP("https://console.example/p/", true)
	assert.Contains(t, same, "sandbox allow-scripts")
	assert.NotContains(t, same, "allow-same-origin", "an opaque origin on the console's")
	assert.NotContains(t, same, "allow-top-navigation")
	assert.NotContains(t, same, "allow-popups-to-escape-sandbox")
}

func TestRequestOrigin(t *testing.T) {
	s := &Server{}
	r := httptest.NewRequest("GET", "http://svc.local:8080/x", nil)
	r.RemoteAddr = "10.0.0.7:4000"
	assert.Equal(t, "http://svc.local:8080", s.requestOrigin(r))
	r.TLS = &tls.ConnectionState{}
	assert.Equal(t, "https://svc.local:8080", s.requestOrigin(r))
	r.Header.Set("X-Forwarded-Proto", "http, https")
	r.Header.Set("X-Forwarded-Host", "console.example.com, inner")
	assert.Equal(t, "https://svc.local:8080", s.requestOrigin(r), "no proxy is trusted by default")
	s.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
	assert.Equal(t, "http://console.example.com", s.requestOrigin(r), "the first of each, from a trusted gateway")
	r.RemoteAddr = "10.0.1.7:4000"
	assert.Equal(t, "https://svc.local:8080", s.requestOrigin(r), "not from another peer")
	r.RemoteAddr = "10.0.0.7:4000"
	r.Header.Set("X-Forwarded-Host", "evil.example; script-src *")
	r.Header.Set("X-Forwarded-Proto", "javascript")
	assert.Equal(t, "https://svc.local:8080", s.requestOrigin(r), "a malformed forwarded value is not used")
}

// The proxy asks the apiserver's verb for each method, and refuses methods it does not proxy.
func TestDashboardProxyVerbs(t *testing.T) {
	for method, verb := range map[string]string{"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
		"PATCH": "update", "DELETE": "delete"} {
		authz := &recordingAuthz{}
		e := handlerEnv{objects: &fakeObjects{}, authz: &fakeAuthz{}, store: &fakeStore{}}
		h := e.routerWith(func(d *Deps) { d.Authz = authz; d.Dashboard.SameOrigin = true })
		r := httptest.NewRequest(method, "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/api/", nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusForbidden, w.Code, method)
		assert.Equal(t, []string{verb + " services/proxy a"}, authz.asked, method)
	}
}

// By default the API's origin sends the dashboards to their own origin (the request's host with the
// dashboards' port, or the one configured), and details link there; the dashboards' origin serves
// nothing else.
func TestDashboardOrigin(t *testing.T) {
	e := handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true}, store: &fakeStore{}}
	const dash = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/api/version?q=1"
	do := func(h http.Handler, host, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = host
		r.Header.Set("X-Forwarded-Host", "evil.example")
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	h := e.routerWith(func(d *Deps) { d.Dashboard.Port = "8081" })
	w := do(h, "console.example:8080", dash)
	assert.Equal(t, http.StatusTemporaryRedirect, w.Code)
	assert.Equal(t, "http://console.example:8081"+dash, w.Header().Get("Location"))
	w = do(h, "[::1]:8080", "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard")
	assert.Equal(t, "http://[::1]:8081/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/", w.Header().Get("Location"))
	w = do(h, "console.example:8080", "/rest/ray/v1/namespaces/a/rayclusters/x")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `"dashboardURL":"http://console.example:8081/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/"`)

	h = e.routerWith(func(d *Deps) { d.Dashboard = DashboardSite{Origin: "https://dash.example", Port: "8081"} })
	w = do(h, "console.example", dash)
	assert.Equal(t, "https://dash.example"+dash, w.Header().Get("Location"))
	w = do(h, "console.example", "/rest/ray/v1/namespaces/a/rayclusters/x")
	assert.Contains(t, w.Body.String(), `"dashboardURL":"https://dash.example/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/"`)

	only := e.dashboardRouter(nil)
	for _, p := range []string{"/rest/ray/v1/rayclusters", "/rest/ray/v1/namespaces/a/rayclusters/x", "/healthz", "/metrics",
		"/rest/ray/v1/swagger/index.html"} {
		w = do(only, "dash.example", p)
		assert.Equal(t, http.StatusNotFound, w.Code, "%s is not served on the dashboards' origin", p)
	}
	w = do(only, "dash.example", "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard")
	assert.Equal(t, http.StatusMovedPermanently, w.Code)
	assert.Equal(t, "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/", w.Header().Get("Location"))
}

// With dashboard-same-origin the API's origin serves the proxy itself, its pages sandboxed.
func TestDashboardSameOriginIsSandboxed(t *testing.T) {
	head := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<script>parent.document</script>"))
	}))
	defer head.Close()
	e := handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true}, store: &fakeStore{}}
	h := e.routerWith(func(d *Deps) {
		d.Dashboard.SameOrigin = true
		d.Dashboards = fixedDashboard{addr: strings.TrimPrefix(head.URL, "http://")}
	})
	// A server of its own: the proxy needs a ResponseWriter that tells when the client leaves.
	srv := httptest.NewServer(h)
	defer srv.Close()
	r, err := http.NewRequest("GET", srv.URL+"/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/", nil)
	require.NoError(t, err)
	r.Header.Set("Authorization", "Bearer t")
	res, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), dashboardSandbox)
}

// The headers passed on are those a dashboard needs.
func TestPassedHeaders(t *testing.T) {
	in := http.Header{}
	for _, h := range []string{"Authorization", "X-OpenFuyao-Authorization", "Cookie", "Proxy-Authorization",
		"X-Forwarded-Access-Token", "X-Auth-Request-User", "X-Remote-User", "X-Csrf-Token", "Referer", "Origin"} {
		in.Set(h, "secret")
	}
	in.Set("Accept", "text/html")
	in.Set("X-Ray-Authorization", "Bearer ray")
	in.Set("Sec-WebSocket-Key", "k")
	out := passedHeaders(in)
	assert.Equal(t, http.Header{"Accept": {"text/html"}, "X-Ray-Authorization": {"Bearer ray"}, "Sec-Websocket-Key": {"k"}}, out)
}

// fixedDashboard is the dashboard at addr for every cluster.
type fixedDashboard struct{ addr string }

func (f fixedDashboard) Address(*ray.Kind, *unstructured.Unstructured, *ray.Summary) string {
	return f.addr
}
func (fixedDashboard) Transport() http.RoundTripper { return http.DefaultTransport }
func (fixedDashboard) GCSEventStats(context.Context, string, string, string) ([]promql.LoopPrint, error) {
	return nil, nil
}

// dashboardRouter is the dashboards' own origin over e.
func (e *handlerEnv) dashboardRouter(change func(d *Deps)) http.Handler {
	var deps Deps
	e.routerWith(func(d *Deps) {
		if change != nil {
			change(d)
		}
		deps = *d
	})
	return NewDashboardRouter(deps)
}

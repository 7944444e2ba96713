package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/dashproxy"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

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

	h = e.routerWith(func(d *Deps) { d.Dashboard = dashproxy.Site{Origin: "https://dash.example", Port: "8081"} })
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
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")
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

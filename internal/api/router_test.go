package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/cache"
	"ray-service/internal/metrics"
	"ray-service/internal/ray"
)

// The routes that answer without Kubernetes: health, readiness, metrics, Swagger, and the refusals that
// come before any Kubernetes call.
func TestRouterWithoutKubernetes(t *testing.T) {
	reg, httpMetrics := metrics.NewRegistry()
	ready := errors.New("watch caches not synced yet")
	h := NewRouter(Deps{Kinds: ray.NewKinds(), Log: zap.NewNop(), Gatherer: reg, HTTP: httpMetrics,
		Ready: func(context.Context) error { return ready }})
	do := func(method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	envelope := func(w *httptest.ResponseRecorder) Envelope {
		var e Envelope
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), w.Body.String())
		assert.Equal(t, w.Code, e.Code)
		return e
	}
	assert.Equal(t, 200, do("GET", "/healthz", "").Code)
	w := do("GET", "/readyz", "")
	assert.Equal(t, 503, w.Code)
	assert.Equal(t, "not ready\n", w.Body.String(), "no detail for anyone who asks")
	ready = nil
	assert.Equal(t, 200, do("GET", "/readyz", "").Code)

	w = do("GET", "/rest/ray/v1/rayclusters", "")
	assert.Equal(t, 401, w.Code)
	assert.Equal(t, "Unauthorized", envelope(w).Reason)
	assert.NotEmpty(t, w.Header().Get("X-Request-ID"))
	w = do("GET", "/rest/ray/v1/widgets", "t")
	assert.Equal(t, 404, w.Code)
	assert.Contains(t, envelope(w).Msg, "unknown kind")
	w = do("GET", "/rest/ray/v1/namespaces/a/widgets/x/yaml", "t")
	assert.Equal(t, 404, w.Code)
	w = do("GET", "/nowhere", "")
	assert.Equal(t, "NotFound", envelope(w).Reason)
	w = do("PATCH", "/rest/ray/v1/namespaces/a/rayclusters/x", "t")
	assert.Equal(t, 405, w.Code)

	w = do("GET", "/rest/ray/v1/swagger/doc.json", "")
	require.Equal(t, 200, w.Code)
	var spec struct {
		Paths map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &spec))
	assert.Contains(t, spec.Paths, "/rest/ray/v1/namespaces/{namespace}/{kind}")
	w = do("GET", "/rest/ray/v1/openapi.json", "")
	require.Equal(t, 200, w.Code, "the OpenAPI 3 document needs no token")
	var v3 struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v3))
	assert.Equal(t, "3.0.3", v3.OpenAPI)
	assert.Contains(t, v3.Paths, "/rest/ray/v1/openapi.json")
	w = do("GET", "/rest/ray/v1/swagger/index.html", "")
	assert.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), "swagger-ui")

	w = do("GET", "/metrics", "")
	require.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `ray_service_http_requests_total{code="401",method="GET",route="/rest/ray/v1/:kind"} 1`, w.Body.String())
}

// Routes served from the watch cache build no clients for the caller; those that call Kubernetes as
// the caller build them once.
func TestCacheRoutesBuildNoClients(t *testing.T) {
	e := &handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true},
		store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}}
	built := 0
	h := e.routerWith(func(d *Deps) {
		objects := d.Objects
		d.Objects = func(k *ray.Kind, token string) (Objects, error) {
			built++
			return objects(k, token)
		}
	})
	for path, want := range map[string]int{
		"/rest/ray/v1/rayclusters":                          0,
		"/rest/ray/v1/namespaces/a/rayclusters":             0,
		"/rest/ray/v1/namespaces/a/rayclusters/x/dashboard": 0,
		"/rest/ray/v1/namespaces/a/rayclusters/x":           1,
	} {
		built = 0
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Less(t, w.Code, 400, path)
		assert.Equal(t, want, built, path)
	}
}

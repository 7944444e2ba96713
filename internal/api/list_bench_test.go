package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// BenchmarkListFromCache is a list request served from the watch cache, with the caller's objects made
// as the service makes them (k8s.Manager): what one list costs the service apart from its access
// reviews.
func BenchmarkListFromCache(b *testing.B) {
	clients, err := k8s.NewClientFactory(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(b, err)
	m := &k8s.Manager{Clients: clients}
	e := &handlerEnv{authz: &fakeAuthz{allowed: true, scopes: map[string]auth.Scope{"rayclusters": auth.AllNamespaces()}},
		store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running"), item("b", "y", "Stopped")}}}}
	h := e.routerWith(func(d *Deps) {
		d.Objects = func(k *ray.Kind, token string) (Objects, error) { return m.For(k, token) }
	})
	req := httptest.NewRequest(http.MethodGet, BasePath+"/rayclusters", nil)
	req.Header.Set("Authorization", "Bearer t")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

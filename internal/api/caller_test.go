package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/audit"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// tokenNames names each token's holder after the token, and counts the asks per token.
type tokenNames struct {
	fakeAuthz
	mu    sync.Mutex
	asked map[string]int
}

func (n *tokenNames) UserName(_ context.Context, token string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked[token]++
	return "user-of-" + token, nil
}

// lockedTrail is a trail many requests record into at once.
type lockedTrail struct {
	fakeTrail
	mu sync.Mutex
}

func (l *lockedTrail) Record(ctx context.Context, w audit.Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fakeTrail.Record(ctx, w)
}

// creatorsOf keeps the creator each create stamped, by the name created.
type creatorsOf struct {
	*fakeObjects
	mu       sync.Mutex
	creators map[string]string
}

func (c *creatorsOf) Create(_ context.Context, obj *unstructured.Unstructured, _, _ bool) (*k8s.Current, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creators[obj.GetName()] = obj.GetAnnotations()[ray.CreatorKey]
	return &k8s.Current{Instance: obj}, nil
}

// The caller's name asked once per request is that request's own: requests one after another (gin reuses
// its contexts) and at once, with different tokens, each stamp and record the holder of their own token,
// and a manifest that names another creator is stamped with the caller all the same.
func TestCallerNameStaysWithItsRequest(t *testing.T) {
	trail, authz := &lockedTrail{}, &tokenNames{fakeAuthz: fakeAuthz{allowed: true}, asked: map[string]int{}}
	objs := &creatorsOf{fakeObjects: &fakeObjects{}, creators: map[string]string{}}
	e := handlerEnv{store: &fakeStore{}}
	h := e.routerWith(func(d *Deps) {
		d.Audit, d.Authz = trail, authz
		d.Objects = func(*ray.Kind, string) (Objects, error) { return objs, nil }
	})
	tokenOf := func(i int) string { return fmt.Sprintf("t%d", i%3) }
	create := func(i int) {
		body := fmt.Sprintf(`{"metadata":{"name":"demo-%d","annotations":{%q:"user-of-t9"},"labels":{%q:"user-of-t9"}}}`,
			i, ray.CreatorKey, ray.CreatorKey)
		r := httptest.NewRequest("POST", "/rest/ray/v1/namespaces/a/rayclusters", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tokenOf(i))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	}
	for i := range 12 {
		create(i)
	}
	var wg sync.WaitGroup
	for i := 12; i < 48; i++ {
		wg.Go(func() { create(i) })
	}
	wg.Wait()

	require.Len(t, trail.recorded, 48)
	for _, rec := range trail.recorded {
		var i int
		_, err := fmt.Sscanf(rec.Name, "demo-%d", &i)
		require.NoError(t, err)
		assert.Equal(t, "user-of-"+tokenOf(i), rec.User, rec.Name)
		assert.Equal(t, "user-of-"+tokenOf(i), objs.creators[rec.Name], rec.Name)
	}
	assert.Equal(t, map[string]int{"t0": 16, "t1": 16, "t2": 16}, authz.asked, "once per request")
}

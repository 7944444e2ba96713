package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

func TestPagesAnswerOnlyFromTheSameVersionsWithinReuse(t *testing.T) {
	p := newPages(1<<20, time.Second)
	k := ray.NewKinds().Cluster()
	key := pageKey{caller: "h", kind: k, query: "page=2"}
	t0 := time.Unix(1000, 0)
	p.put(key, 7, 1, t0, []byte("seven"))

	body, ok := p.get(key, 7, 1, t0.Add(999*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, "seven", string(body))
	for name, miss := range map[string]func() bool{
		"another caller": func() bool { _, ok := p.get(pageKey{caller: "g", kind: k, query: "page=2"}, 7, 1, t0); return ok },
		"another query":  func() bool { _, ok := p.get(pageKey{caller: "h", kind: k, query: "page=3"}, 7, 1, t0); return ok },
		"another namespace": func() bool {
			_, ok := p.get(pageKey{caller: "h", kind: k, namespace: "a", query: "page=2"}, 7, 1, t0)
			return ok
		},
		"the objects changed":  func() bool { _, ok := p.get(key, 8, 1, t0); return ok },
		"the bindings changed": func() bool { p.put(key, 7, 1, t0, []byte("seven")); _, ok := p.get(key, 7, 2, t0); return ok },
		"kept for its reuse": func() bool {
			p.put(key, 7, 1, t0, []byte("seven"))
			_, ok := p.get(key, 7, 1, t0.Add(time.Second))
			return ok
		},
		"asked before it was made": func() bool {
			p.put(key, 7, 1, t0, []byte("seven"))
			_, ok := p.get(key, 7, 1, t0.Add(-time.Millisecond))
			return ok
		},
	} {
		assert.False(t, miss(), name)
	}
	assert.Empty(t, p.byKey, "a page found stale is dropped")
	assert.Zero(t, p.bytes)
}

func TestPagesHoldAtMostTheirBound(t *testing.T) {
	p := newPages(64<<10, time.Hour)
	k := ray.NewKinds().Cluster()
	t0 := time.Unix(1000, 0)
	body := make([]byte, 3000)
	for i := range 100 {
		p.put(pageKey{caller: "h", kind: k, query: fmt.Sprint("page=", i)}, 1, 0, t0, body)
		assert.LessOrEqual(t, p.bytes, 64<<10)
	}
	_, ok := p.get(pageKey{caller: "h", kind: k, query: "page=99"}, 1, 0, t0)
	assert.True(t, ok, "the most recent page is kept")
	_, ok = p.get(pageKey{caller: "h", kind: k, query: "page=0"}, 1, 0, t0)
	assert.False(t, ok, "the least recently used page went first")
	p.put(pageKey{caller: "h", kind: k, query: "huge"}, 1, 0, t0, make([]byte, 8<<10))
	_, ok = p.get(pageKey{caller: "h", kind: k, query: "huge"}, 1, 0, t0)
	assert.False(t, ok, "a page of more than a sixteenth of the bound is not kept")
}

// versionedStore is a fakeStore whose version changes only when the test says so, and which counts
// the lists it makes.
type versionedStore struct {
	fakeStore
	at    uint64
	lists int
}

func (v *versionedStore) Version(*ray.Kind) uint64 { return v.at }

func (v *versionedStore) List(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, int) {
	v.lists++
	return v.fakeStore.List(k, sc, q)
}

// A list asked again while nothing changed is answered with the same bytes and no list of the store;
// a change of the kind's objects, of the RoleBindings, of the caller or of the query makes it anew.
func TestListAskedAgainIsTheKeptPage(t *testing.T) {
	store := &versionedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}}
	var rights uint64
	h := (&handlerEnv{authz: &fakeAuthz{allowed: true, scopes: map[string]auth.Scope{"rayclusters": auth.AllNamespaces()}}}).
		routerWith(func(d *Deps) {
			d.Store, d.RightsVersion, d.PageReuse = store, func() uint64 { return rights }, time.Minute
		})
	ask := func(token, query string) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, BasePath+"/rayclusters?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String()
	}
	first := ask("t", "sortBy=name")
	assert.Equal(t, first, ask("t", "sortBy=name"))
	assert.Equal(t, 1, store.lists, "the second ask was the kept page")

	store.items["rayclusters"] = append(store.items["rayclusters"], item("a", "y", "Running"))
	assert.Equal(t, first, ask("t", "sortBy=name"), "the fake's change is not published: its version is the same")
	store.at++
	assert.Contains(t, ask("t", "sortBy=name"), `"name":"y"`, "a published change is listed")
	assert.Equal(t, 2, store.lists)

	ask("u", "sortBy=name")
	ask("t", "sortBy=name&order=asc")
	assert.Equal(t, 4, store.lists, "another caller, another query: each its own page")
	rights++
	ask("t", "sortBy=name")
	assert.Equal(t, 5, store.lists, "a RoleBinding changed: the page is made again")
	assert.Equal(t, 1, strings.Count(ask("t", "sortBy=name"), `"name":"y"`))
	assert.Equal(t, 5, store.lists)

	// Without reuse (verdicts not kept), every ask makes its page.
	h = (&handlerEnv{authz: &fakeAuthz{allowed: true, scopes: map[string]auth.Scope{"rayclusters": auth.AllNamespaces()}}}).
		routerWith(func(d *Deps) { d.Store = store })
	ask("t", "sortBy=name")
	ask("t", "sortBy=name")
	assert.Equal(t, 7, store.lists)
}

// meetingAuthz answers each Scope once the other scope of the same list is asked too, or after a
// second: whether the two met tells that they were asked at once.
type meetingAuthz struct {
	fakeAuthz
	arrived chan string
	met     atomic.Bool
}

func (m *meetingAuthz) Scope(ctx context.Context, tok string, a auth.Attributes, candidates []string) (auth.Scope, error) {
	select {
	case m.arrived <- a.Resource: // the other is waiting
		m.met.Store(true)
	case other := <-m.arrived:
		m.met.Store(other != a.Resource)
	case <-time.After(time.Second):
	}
	return m.fakeAuthz.Scope(ctx, tok, a, candidates)
}

// A list with templates needs where the caller may list the kind and where it may list ConfigMaps:
// each may cost the apiserver a round trip or two, and both are asked at once.
func TestListAsksItsTwoScopesAtOnce(t *testing.T) {
	authz := &meetingAuthz{fakeAuthz: fakeAuthz{allowed: true, scopes: map[string]auth.Scope{"rayclusters": auth.AllNamespaces()}},
		arrived: make(chan string)}
	h := (&handlerEnv{store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running")}}}}).
		routerWith(func(d *Deps) { d.Authz = authz })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, BasePath+"/rayclusters", nil)
	req.Header.Set("Authorization", "Bearer t")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.True(t, authz.met.Load(), "the ConfigMaps' scope was asked while the RayClusters' was")
}

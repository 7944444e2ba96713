package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// fakeTrail records what the handlers asked of the trail.
type fakeTrail struct {
	recorded   []audit.Write
	queries    []audit.Query
	namespaces []string
	asked      int // calls of Namespaces
}

func (f *fakeTrail) Record(_ context.Context, w audit.Write) { f.recorded = append(f.recorded, w) }

func (f *fakeTrail) List(_ context.Context, q audit.Query) ([]audit.Entry, int, error) {
	f.queries = append(f.queries, q)
	return []audit.Entry{{Seq: 1, Namespace: "a"}}, 1, nil
}

func (f *fakeTrail) Namespaces(context.Context) ([]string, error) {
	f.asked++
	return f.namespaces, nil
}

func (f *fakeTrail) Verify(context.Context) (audit.Verification, error) {
	return audit.Verification{Intact: false, Entries: 3, Head: 3, BrokenAt: 2, Problem: "entry 2 is not as it was appended"}, nil
}

// The audit list checks the caller's rights before it reads the trail, and reads only the namespaces
// allowed, a page in the store.
func TestAuditListAuthorizesFirst(t *testing.T) {
	get := func(authz *fakeAuthz, trail *fakeTrail, path string) (*httptest.ResponseRecorder, Envelope) {
		e := handlerEnv{objects: &fakeObjects{}, authz: authz, store: &fakeStore{}}
		h := e.routerWith(func(d *Deps) {
			if trail != nil {
				d.Audit = trail
			}
		})
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var env Envelope
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &env), w.Body.String())
		return w, env
	}
	nowhere := &fakeAuthz{scopes: map[string]auth.Scope{"events": auth.Namespaces()}}
	trail := &fakeTrail{namespaces: []string{"a", "b"}}
	w, _ := get(nowhere, trail, "/rest/ray/v1/audit?namespace=a")
	assert.Equal(t, http.StatusForbidden, w.Code)
	w, env := get(nowhere, trail, "/rest/ray/v1/audit")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"items":[],"total":0,"page":1,"pageSize":20}`, string(mustJSON(t, env.Data)))
	assert.Empty(t, trail.queries, "nothing of the trail read for a caller who may see none of it")
	assert.Equal(t, 1, trail.asked, "only its namespaces, the candidates")

	onlyB := &fakeAuthz{scopes: map[string]auth.Scope{"events": auth.Namespaces("b")}}
	w, _ = get(onlyB, trail, "/rest/ray/v1/audit?page=2&pageSize=5")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, []audit.Query{{Namespaces: []string{"b"}, Page: 2, PageSize: 5}}, trail.queries)

	trail.queries = nil
	w, _ = get(&fakeAuthz{}, trail, "/rest/ray/v1/audit")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, []audit.Query{{Page: 1, PageSize: 20}}, trail.queries, "cluster-wide: every namespace")
	trail.queries = nil
	w, _ = get(&fakeAuthz{}, trail, "/rest/ray/v1/audit?namespace=a")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, []audit.Query{{Namespaces: []string{"a"}, Page: 1, PageSize: 20}}, trail.queries)

	w, env = get(&fakeAuthz{}, nil, "/rest/ray/v1/audit")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "without a store")
	assert.Contains(t, env.Msg, "history-dsn")
}

// Only a caller who may list events cluster-wide checks the chain.
func TestAuditVerify(t *testing.T) {
	for _, c := range []struct {
		allowed bool
		want    int
	}{{false, http.StatusForbidden}, {true, http.StatusOK}} {
		e := handlerEnv{objects: &fakeObjects{}, authz: &fakeAuthz{allowed: c.allowed}, store: &fakeStore{}}
		h := e.routerWith(func(d *Deps) { d.Audit = &fakeTrail{} })
		r := httptest.NewRequest("GET", "/rest/ray/v1/audit/verify", nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, c.want, w.Code, w.Body.String())
		if c.allowed {
			assert.Contains(t, w.Body.String(), `"brokenAt":2`)
		}
	}
}

// A request id the client sends is kept only when it is 1 to 64 letters, digits and dashes; otherwise the
// service makes one, and the write is recorded under it.
func TestRequestIDIsChecked(t *testing.T) {
	for id, kept := range map[string]bool{
		"abc-DEF-123": true, "a": true, "": false, "has space": false, "tab\there": false, `"q"`: false, "ünï": false,
		"semi;colon": false, string(make([]byte, 65)): false,
	} {
		assert.Equal(t, kept, validRequestID(id), "%q", id)
	}
	trail := &fakeTrail{}
	e := handlerEnv{objects: &fakeObjects{current: instance("a", "x")}, authz: &fakeAuthz{allowed: true}, store: &fakeStore{}}
	h := e.routerWith(func(d *Deps) { d.Audit = trail })
	for _, sent := range []string{"by admin (request x)", "kept-1"} {
		r := httptest.NewRequest("POST", "/rest/ray/v1/namespaces/a/rayclusters/x/stop", nil)
		r.Header.Set("Authorization", "Bearer t")
		r.Header.Set("X-Request-ID", sent)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		got := w.Header().Get("X-Request-ID")
		assert.True(t, validRequestID(got), got)
		assert.Equal(t, sent == "kept-1", got == sent)
		require.NotEmpty(t, trail.recorded)
		assert.Equal(t, got, trail.recorded[len(trail.recorded)-1].RequestID, "recorded before the answer, under the answer's id")
	}
}

// namesAsked counts how often the handlers ask who the caller is.
type namesAsked struct {
	fakeAuthz
	asked atomic.Int32
}

func (n *namesAsked) UserName(ctx context.Context, token string) (string, error) {
	n.asked.Add(1)
	return n.fakeAuthz.UserName(ctx, token)
}

// Who the caller is is asked once per request, however many steps need it: the creator stamped on what a
// create makes is the user its audit record names, and a batch's records share one answer.
func TestCallerIsAskedOncePerRequest(t *testing.T) {
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/rest/ray/v1/namespaces/a/rayclusters", `{"metadata":{"name":"demo"}}`},
		{"POST", "/rest/ray/v1/rayclusters/batch-delete", `{"items":[{"namespace":"a","name":"x"},{"namespace":"a","name":"y"},{"namespace":"b","name":"z"}]}`},
	} {
		trail, authz := &fakeTrail{}, &namesAsked{fakeAuthz: fakeAuthz{allowed: true}}
		e := handlerEnv{objects: &fakeObjects{}, store: &fakeStore{}}
		h := e.routerWith(func(d *Deps) { d.Audit, d.Authz = trail, authz })
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		r.Header.Set("Authorization", "Bearer t")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Less(t, w.Code, 300, w.Body.String())
		assert.Equal(t, int32(1), authz.asked.Load(), c.path)
		require.NotEmpty(t, trail.recorded, c.path)
		for _, rec := range trail.recorded {
			assert.Equal(t, "alice@example", rec.User, c.path)
		}
		if created := e.objects.created; created != nil {
			assert.Equal(t, "alice@example", created.GetAnnotations()[ray.CreatorKey])
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/notify"
)

// memSubscriptions keeps subscriptions in memory.
type memSubscriptions struct {
	mu   sync.Mutex
	subs []notify.Subscription
}

func (m *memSubscriptions) CreateSubscription(_ context.Context, sub notify.Subscription) (notify.Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, sub)
	return sub, nil
}

func (m *memSubscriptions) Subscriptions(_ context.Context, ns string) ([]notify.Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []notify.Subscription
	for _, s := range m.subs {
		if s.Namespace == ns {
			s.Secret = ""
			out = append(out, s)
		}
	}
	return out, nil
}

func (m *memSubscriptions) Subscription(ctx context.Context, ns, id string) (*notify.Subscription, error) {
	subs, _ := m.Subscriptions(ctx, ns)
	for _, s := range subs {
		if s.ID == id {
			return &s, nil
		}
	}
	return nil, errNoSuchSubscription
}

var errNoSuchSubscription = statusError(http.StatusNotFound, "NotFound", "no such subscription")

func (m *memSubscriptions) DeleteSubscription(context.Context, string, string) error { return nil }

func (m *memSubscriptions) Deliveries(context.Context, string, int, int) ([]notify.Delivery, int, error) {
	return []notify.Delivery{{Seq: 1, Kind: "RayJob", Name: "secret-project"}}, 1, nil
}

// resourceAuthz allows everything but the resources denied, to the token "reader"; to any other token,
// only events.
type resourceAuthz struct {
	fakeAuthz
	denied map[string]bool
}

func (r *resourceAuthz) Allowed(_ context.Context, tok string, a auth.Attributes) (bool, error) {
	if tok != "reader" {
		return a.Resource == "events", nil
	}
	return !r.denied[a.Resource], nil
}

func (r *resourceAuthz) AllowedAll(ctx context.Context, tok string, asks []auth.Attributes) ([]bool, error) {
	return eachAllowed(ctx, r.Allowed, tok, asks)
}

// A subscription needs the rights to list what it carries; the create alone answers its secret and its
// whole URL (uncached), get and list show the URL's scheme and host; the delivery log, which names the
// objects, is for who may read them. The deliveries are authorized as the creator's name and groups.
func TestSubscriptionRights(t *testing.T) {
	subs := &memSubscriptions{}
	authz := &resourceAuthz{denied: map[string]bool{"rayclusters": true}}
	e := &handlerEnv{objects: &fakeObjects{}, authz: &fakeAuthz{allowed: true}, store: &fakeStore{}}
	srv := httptest.NewServer(e.routerWith(func(d *Deps) {
		d.Authz = authz
		d.Subscriptions = subs
		d.Guard = &notify.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	}))
	t.Cleanup(srv.Close)
	do := func(method, path, tok, body string) (*http.Response, Envelope) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/rest/ray/v1/namespaces/a/subscriptions"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var env Envelope
		require.NoError(t, json.NewDecoder(res.Body).Decode(&env))
		return res, env
	}
	const hook = `{"url": "http://127.0.0.1:9/hook-t0ken?key=k3y", "kinds": %s}`
	for _, c := range []struct{ tok, kinds, missing string }{
		{"writer", `[]`, "list rayjobs"},
		{"writer", `["RayJob"]`, "list rayjobs"},
		{"reader", `[]`, "list rayclusters"},
		{"reader", `["RayCluster"]`, "list rayclusters"},
	} {
		res, env := do("POST", "", c.tok, strings.Replace(hook, "%s", c.kinds, 1))
		assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s", c.tok, c.kinds)
		assert.Contains(t, env.Msg, c.missing)
	}
	assert.Empty(t, subs.subs)

	res, env := do("POST", "", "reader", strings.Replace(hook, "%s", `["RayJob"]`, 1))
	require.Equal(t, http.StatusCreated, res.StatusCode, "%+v", env)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	created, _ := json.Marshal(env.Data)
	assert.Contains(t, string(created), "hook-t0ken?key=k3y", "the create answers the URL as given")
	assert.Contains(t, string(created), `"secret":"`)
	require.Len(t, subs.subs, 1)
	assert.Equal(t, "alice@example", subs.subs[0].Creator)
	assert.Equal(t, []string{"team-a"}, subs.subs[0].CreatorGroups, "the deliveries are authorized as the creator's groups too")
	id := subs.subs[0].ID

	for _, path := range []string{"", "/" + id} {
		res, env := do("GET", path, "writer", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		shown, _ := json.Marshal(env.Data)
		assert.NotContains(t, string(shown), "t0ken", path)
		assert.NotContains(t, string(shown), "k3y", path)
		assert.Contains(t, string(shown), `"url":"http://127.0.0.1:9/…"`, path)
	}
	res, env = do("GET", "/"+id+"/deliveries", "writer", "")
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.NotContains(t, env.Msg, "secret-project")
	res, _ = do("GET", "/"+id+"/deliveries", "reader", "")
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

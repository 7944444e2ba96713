package api

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// rightsAuthz allows everything but listing pods (unless pods is set), and names users by token.
type rightsAuthz struct {
	fakeAuthz
	pods  bool
	users map[string]string
}

func (r *rightsAuthz) AllowedAll(ctx context.Context, tok string, asks []auth.Attributes) ([]bool, error) {
	return eachAllowed(ctx, r.Allowed, tok, asks)
}

func (r *rightsAuthz) Allowed(_ context.Context, _ string, a auth.Attributes) (bool, error) {
	if a.Resource == "pods" {
		return r.pods, nil
	}
	return true, nil
}

func (r *rightsAuthz) UserName(_ context.Context, token string) (string, error) {
	return r.users[token], nil
}

// countedEvents is a namespace's events that counts its holds.
type countedEvents struct{ held *atomic.Int32 }

func (countedEvents) Changed() <-chan struct{}                             { return nil }
func (countedEvents) Synced() bool                                         { return true }
func (countedEvents) Of(*ray.Kind, *ray.Summary, []string) []ray.EventInfo { return nil }
func (c countedEvents) Release()                                           { c.held.Add(-1) }

func rightsEnv(t *testing.T, authz *rightsAuthz, held *atomic.Int32) string {
	store := &feedStore{fakeStore: fakeStore{items: map[string][]*cache.Item{}}, changed: make(chan struct{})}
	return watchEnv(t, store, func(d *Deps) {
		d.Authz = authz
		d.Watches = stream.NewWatchLimit(10, 1, 0)
		d.WatchEvents = func(string) stream.NamespaceEvents {
			held.Add(1)
			return countedEvents{held: held}
		}
	}).URL
}

// An object stream sends PODS only to a caller who may list pods in the namespace.
func TestObjectStreamPodsNeedPodRights(t *testing.T) {
	for _, pods := range []bool{false, true} {
		var held atomic.Int32
		url := rightsEnv(t, &rightsAuthz{pods: pods, users: map[string]string{"t": "alice"}}, &held)
		lines := readSSE(t, openSSE(t.Context(), t, url+"/rest/ray/v1/namespaces/a/rayclusters/x/watch", nil))
		var names []string
		for {
			ev := lines.event()
			names = append(names, ev["event"])
			if ev["event"] == "SYNCED" {
				break
			}
		}
		if pods {
			assert.Equal(t, []string{"ADDED", "PODS", "SYNCED"}, names)
		} else {
			assert.Equal(t, []string{"ADDED", "SYNCED"}, names, "no PODS without the right to list pods")
		}
	}
}

// The bound on streams counts users, whatever their tokens; an object stream beyond it is refused before
// it holds the namespace's events.
func TestWatchLimitCountsUsers(t *testing.T) {
	var held atomic.Int32
	url := rightsEnv(t, &rightsAuthz{users: map[string]string{"t1": "alice", "t2": "alice", "t3": "bob"}}, &held)
	as := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	first := openSSE(t.Context(), t, url+"/rest/ray/v1/rayclusters/watch", as("t1"))
	require.Equal(t, 200, first.StatusCode)
	readSSE(t, first).event()
	assert.Equal(t, 429, openSSE(t.Context(), t, url+"/rest/ray/v1/rayclusters/watch", as("t2")).StatusCode,
		"another token of the same user")
	assert.Equal(t, 429, openSSE(t.Context(), t, url+"/rest/ray/v1/namespaces/a/rayclusters/x/watch", as("t2")).StatusCode)
	assert.Zero(t, held.Load(), "the refused object stream held no events")
	other := openSSE(t.Context(), t, url+"/rest/ray/v1/namespaces/a/rayclusters/x/watch", as("t3"))
	assert.Equal(t, 200, other.StatusCode, "another user is not held up")
	readSSE(t, other).event()
	assert.Equal(t, int32(1), held.Load())
}

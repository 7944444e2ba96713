package api

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// countingAuthz allows what allow says and counts the reviews asked.
type countingAuthz struct {
	fakeAuthz
	mu    sync.Mutex
	asked map[auth.Attributes]int
	allow func(a auth.Attributes) bool
}

func (c *countingAuthz) AllowedAll(ctx context.Context, tok string, asks []auth.Attributes) ([]bool, error) {
	return eachAllowed(ctx, c.Allowed, tok, asks)
}

func (c *countingAuthz) Allowed(_ context.Context, _ string, a auth.Attributes) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[a]++
	return c.allow(a), nil
}

// A page's actions review each distinct permission once, not once per item, and name only the
// actions whose every permission is granted.
func TestActionsReviewEachPermissionOnce(t *testing.T) {
	authz := &countingAuthz{asked: map[auth.Attributes]int{}, allow: func(a auth.Attributes) bool { return a.Resource == "rayclusters" }}
	s := newServer(Deps{Authz: authz}, false)
	k := ray.NewKinds().Cluster()
	var page []ray.Summary
	for i := range 50 {
		page = append(page, ray.Summary{Name: fmt.Sprintf("c%d", i), Namespace: "team", Kind: "RayCluster", Type: ray.TypeInstance,
			Status: []string{ray.StatusRunning, ray.StatusStopped}[i%2], WorkerGroups: []ray.WorkerGroup{{Name: "w", Replicas: 1}}})
	}
	require.NoError(t, s.withActions(t.Context(), "t", k, page))
	for a, n := range authz.asked {
		assert.Equal(t, 1, n, "%+v asked once", a)
		assert.Empty(t, a.Name, "reviewed for the namespace")
	}
	assert.LessOrEqual(t, len(authz.asked), 8)
	assert.Equal(t, []string{"stop", "edit", "scale"}, page[0].Actions, "running; no logs or dashboard without their rights")
	assert.Equal(t, []string{"start", "delete", "edit", "scale"}, page[1].Actions)
}

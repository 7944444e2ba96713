//go:build integration

package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// A delete that finalizers hold: KubeRay puts its own on a RayJob (ray.io/rayjob-finalizer), on a
// RayService from v1.6.2 (ray.io/rayservice-finalizer) and on a RayCluster with GCS fault tolerance
// (ray.io/gcs-ft-redis-cleanup-finalizer), and removes each when it has cleaned up. Here a finalizer of
// the test's own holds a RayCluster (the operator would remove its own at once). The delete, the batch
// delete, the detail, the list and the stream say it is being deleted; it allows no action; the history
// does not say it went until it has.
func TestDeleteHeldByFinalizers(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "final")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "held", "?start=false").Status)
	waitStatus(t, ns, "rayclusters", "held", "Stopped")
	const hold = "ray-service.test/hold"
	patchRay(t, rayClusters, ns, "held", types.MergePatchType, `{"metadata":{"finalizers":["`+hold+`"]}}`)
	type deleted struct {
		Deleting bool `json:"deleting"`
	}
	r := call(t, "DELETE", itemPath(ns, "rayclusters", "held"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.True(t, decode[deleted](t, r).Deleting, "held by a finalizer: %s", r.Raw)

	type shown struct {
		Status        string     `json:"status"`
		DeletingSince *time.Time `json:"deletingSince"`
		Actions       []string   `json:"actions"`
	}
	var s shown
	eventually(t, 30*time.Second, "the detail says it is being deleted", func() bool {
		r := call(t, "GET", itemPath(ns, "rayclusters", "held"), admin, "", nil)
		if r.Status != 200 {
			return false
		}
		s = shown{}
		return json.Unmarshal(dataOf(t, r.Raw), &s) == nil && s.DeletingSince != nil
	})
	assert.Empty(t, s.Actions, "nothing is allowed while it goes")
	r = call(t, "GET", nsPath(ns, "rayclusters")+"?search=held", admin, "", nil)
	require.Equal(t, 200, r.Status)
	assert.Contains(t, string(r.Raw), `"deletingSince"`, "the list says so too")
	rec := recordOf(t, env.serviceURL, "rayclusters", ns, "held", "recorded", func(historyRecord) bool { return true })
	assert.Nil(t, rec.DeletedAt, "not gone while held")

	// Deleting it again changes nothing and says the same, alone or in a batch.
	r = call(t, "DELETE", itemPath(ns, "rayclusters", "held"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.True(t, decode[deleted](t, r).Deleting)
	b, _ := json.Marshal(map[string]any{"items": []map[string]string{{"namespace": ns, "name": "held"}}})
	r = call(t, "POST", "/rest/ray/v1/rayclusters/batch-delete", admin, "application/json", b)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	res := decode[[]struct {
		Code     int  `json:"code"`
		Deleting bool `json:"deleting"`
	}](t, r)
	require.Len(t, res, 1)
	assert.Equal(t, 200, res[0].Code)
	assert.True(t, res[0].Deleting)
	// One who may not delete it is told so, not that it is being deleted.
	r = call(t, "DELETE", itemPath(ns, "rayclusters", "held"), env.tokens["viewer"], "", nil)
	assert.Equal(t, 403, r.Status, "%s", r.Raw)

	// The finalizer done, it goes, and the history says so.
	patchRay(t, rayClusters, ns, "held", types.MergePatchType, `{"metadata":{"finalizers":null}}`)
	eventually(t, 30*time.Second, "gone", func() bool {
		return call(t, "GET", itemPath(ns, "rayclusters", "held"), admin, "", nil).Status == 404
	})
	recordOf(t, env.serviceURL, "rayclusters", ns, "held", "gone", func(r historyRecord) bool { return r.DeletedAt != nil })
	// A delete with no finalizer left is not pending.
	require.Equal(t, 201, createClusterAt(t, admin, ns, "plain", "?start=false").Status)
	waitStatus(t, ns, "rayclusters", "plain", "Stopped")
	r = call(t, "DELETE", itemPath(ns, "rayclusters", "plain"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.False(t, decode[deleted](t, r).Deleting)
}

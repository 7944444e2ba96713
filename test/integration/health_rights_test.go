//go:build integration

package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// A health reason read from the pods (a scheduler's message naming the nodes and what they lack) is
// shown only to a caller who may list pods in the namespace, as the pods route would be: anyone else
// sees the state and that the reason is withheld, in the list and in the detail, and no problem read
// from a pod. Before, the list and the detail showed both to a caller the pods route answered 403.
func TestHealthReasonNeedsTheRightToSeeItsSource(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "health-rights")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "gpu", func(obj map[string]any) {
		res := group(obj, "spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources")
		for _, k := range []string{"requests", "limits"} {
			group(res, k)["nvidia.com/gpu"] = "1000"
		}
	}).Status)
	waitHealth(t, ns, "gpu", "Degraded", "Unschedulable")

	reader, token := tenant(t, ns, "reader")
	grantRole(t, ns, reader, "ray-read", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"list", "get"}})
	require.Equal(t, 403, call(t, "GET", itemPath(ns, "rayclusters", "gpu")+"/pods", token, "", nil).Status, "the reader may not list the pods")
	listed := func() health {
		r := call(t, "GET", nsPath(ns, "rayclusters"), token, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		items := decode[struct {
			Items []struct {
				Health health `json:"health"`
			} `json:"items"`
		}](t, r).Items
		require.Len(t, items, 1)
		return items[0].Health
	}
	shown := func() healthDetail {
		r := call(t, "GET", itemPath(ns, "rayclusters", "gpu"), token, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[healthDetail](t, r)
	}
	h := listed()
	assert.Equal(t, "Degraded", h.State, "the state is the object's own")
	assert.Equal(t, "Withheld", h.Reason)
	assert.NotContains(t, h.Message, "nvidia.com/gpu")
	d := shown()
	assert.Equal(t, "Withheld", d.Health.Reason)
	for _, p := range d.Problems {
		assert.NotEqual(t, "Pod", p.Source.Kind, "no problem read from a pod: %+v", p)
	}
	// A list stream withholds it too.
	status, stream := openWatch(t, env.serviceURL, nsPath(ns, "rayclusters")+"/watch", token, "")
	require.Equal(t, 200, status)
	added := stream.next(t, 10*time.Second)
	stream.close()
	require.Equal(t, "ADDED", added.Name)
	var item struct {
		Health health `json:"health"`
	}
	require.NoError(t, json.Unmarshal(added.Data, &item))
	assert.Equal(t, "Withheld", item.Health.Reason, "in the stream: %s", added.Data)
	// And the object's own stream.
	status, stream = openWatch(t, env.serviceURL, itemPath(ns, "rayclusters", "gpu")+"/watch", token, "")
	require.Equal(t, 200, status)
	added = stream.next(t, 10*time.Second)
	stream.close()
	require.Equal(t, "ADDED", added.Name)
	require.NoError(t, json.Unmarshal(added.Data, &item))
	assert.Equal(t, "Withheld", item.Health.Reason, "in the object's stream: %s", added.Data)
	// Allowed to list pods there, the reader sees the reason (once the verdict cached before has expired).
	grantRole(t, ns, reader, "pods-read", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	eventually(t, 45*time.Second, "the reason shown to the reader", func() bool { return listed().Reason == "Unschedulable" })
	d = shown()
	assert.Equal(t, "Unschedulable", d.Health.Reason)
	assert.Contains(t, d.Health.Message, "Insufficient nvidia.com/gpu")
	require.NotEmpty(t, d.Problems)
	assert.Equal(t, "Pod", d.Problems[0].Source.Kind)
}

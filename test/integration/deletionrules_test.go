//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A RayJob whose deletion rule deletes it soon after it succeeds (KubeRay v1.6 deletionRules: DeleteSelf,
// ttlSeconds 3): its summary shows the rule and its pre-running deadline, and the history still holds how
// it ended — the ending, with the driver's last lines, read before the operator deleted the RayJob and,
// through owner references, its cluster. (With ttlSeconds 0 the head pod can be gone before its log is
// read: the ending then lists pods and events without the log.)
func TestRayJobDeletionRuleKeepsItsEnding(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "delrule")
	var obj map[string]any
	require.NoError(t, json.Unmarshal(rayJob(t, "dj", false), &obj))
	spec := obj["spec"].(map[string]any)
	spec["deletionStrategy"] = map[string]any{"deletionRules": []any{
		map[string]any{"policy": "DeleteSelf", "condition": map[string]any{"jobStatus": "SUCCEEDED", "ttlSeconds": 3}},
	}}
	spec["preRunningDeadlineSeconds"] = 600
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayjobs"), env.tokens["admin"], "application/json", b)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Raw), `"deletionRules":[{"policy":"DeleteSelf","on":"SUCCEEDED","ttlSeconds":3}]`)
	assert.Contains(t, string(r.Raw), `"preRunningDeadlineSeconds":600`)

	waitStatus(t, ns, "rayjobs", "dj", "Running")
	cluster := currentRayCluster(t, ns, "dj")
	for _, p := range clusterPods(t, ns, cluster) {
		if p.Labels["ray.io/node-type"] == "head" {
			podLog(t, ns, p.Name, "ray-head", "the driver's last words")
		}
	}
	finishJobs(t, ns, cluster, "SUCCEEDED")
	eventually(t, 60*time.Second, "the operator deleting the RayJob by its rule", func() bool {
		_, err := env.adminDyn.Resource(rayJobs).Namespace(ns).Get(context.Background(), "dj", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	rec := recordOf(t, env.serviceURL, "rayjobs", ns, "dj", "ended, then deleted, with its ending", func(r historyRecord) bool {
		return r.Status == "Succeeded" && r.DeletedAt != nil && r.Ending != nil
	})
	require.NotNil(t, rec.Ending, "the ending was read before the rule deleted it")
	require.NotNil(t, rec.Ending.Log)
	assert.Contains(t, rec.Ending.Log.Text, "the driver's last words")
}

//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type scaleResult struct {
	summary
	Warnings []string `json:"warnings"`
}

// workers counts the running worker pods the pods route lists.
func workers(t *testing.T, ns, kind, name string) int {
	t.Helper()
	r := call(t, "GET", itemPath(ns, kind, name)+"/pods", env.tokens["admin"], "", nil)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var pods []podInfo
	require.NoError(t, json.Unmarshal(r.Data, &pods))
	n := 0
	for _, p := range pods {
		if p.NodeType == "worker" && p.Phase == "Running" {
			n++
		}
	}
	return n
}

// Scaling a worker group up and down makes KWOK's worker pods come and go; what cannot hold is 422
// naming the field, and nothing is changed by it.
func TestScaleWorkerGroup(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "scale")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "sc")
	eventually(t, 60*time.Second, "two workers", func() bool { return workers(t, ns, "rayclusters", "sc") == 2 })

	r := scaleAs(t, admin, ns, "rayclusters", "sc", `{"group":"workers","replicas":3}`)
	require.Equal(t, 200, r.Status, string(r.Raw))
	res := decode[scaleResult](t, r)
	assert.Equal(t, int64(3), res.WorkerGroups[0].Replicas)
	assert.Empty(t, res.Warnings)
	eventually(t, 60*time.Second, "three workers", func() bool { return workers(t, ns, "rayclusters", "sc") == 3 })

	r = scaleAs(t, admin, ns, "rayclusters", "sc", `{"group":"workers","replicas":1,"minReplicas":1}`)
	require.Equal(t, 200, r.Status, string(r.Raw))
	eventually(t, 60*time.Second, "one worker", func() bool { return workers(t, ns, "rayclusters", "sc") == 1 })
	// Every write of the spec moves its generation: the refused scales below must leave it where it is.
	scaled, err := getRay(t, rayClusters, ns, "sc")
	require.NoError(t, err)

	for body, field := range map[string]string{
		`{"group":"nope","replicas":1}`:    "group",
		`{"group":"workers","replicas":9}`: "replicas",
		`{"group":"workers","replicas":0}`: "replicas",
		`{"group":"workers"}`:              "replicas",
		`{"replicas":2}`:                   "group",
	} {
		r := scaleAs(t, admin, ns, "rayclusters", "sc", body)
		require.Equal(t, 422, r.Status, "%s: %s", body, r.Raw)
		require.Len(t, r.Details, 1, body)
		assert.Equal(t, field, r.Details[0].Field, body)
	}
	for body, want := range map[string]int{`{"group":"workers","replica":2}`: 400, `{"group":"workers"} {}`: 400, `nope`: 400} {
		assert.Equal(t, want, scaleAs(t, admin, ns, "rayclusters", "sc", body).Status, body)
	}
	assert.Equal(t, 415, call(t, "POST", itemPath(ns, "rayclusters", "sc")+"/scale", admin, "application/yaml", []byte("group: workers")).Status)
	assert.Equal(t, 403, scaleAs(t, env.tokens["viewer"], ns, "rayclusters", "sc", `{"group":"workers","replicas":2}`).Status)
	assert.Equal(t, 404, scaleAs(t, admin, ns, "rayclusters", "absent", `{"group":"workers","replicas":2}`).Status)
	s, _ := statusOf(t, ns, "rayclusters", "sc")
	assert.Equal(t, int64(1), s.WorkerGroups[0].Replicas, "refused scales changed nothing")
	// Each refusal was answered once decided: a spec written by one would have moved the generation by
	// now, and with the spec as it was the operator has nothing to change.
	after, err := getRay(t, rayClusters, ns, "sc")
	require.NoError(t, err)
	assert.Equal(t, scaled.GetGeneration(), after.GetGeneration(), "refused scales wrote no spec")
	assert.Equal(t, 1, workers(t, ns, "rayclusters", "sc"))
}

// The cluster spec of a RayJob and of a RayService template scale the same way; a group the Ray
// autoscaler owns warns.
func TestScaleOtherKinds(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "scalekinds")
	admin := env.tokens["admin"]
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "svc")).Status)
	r := scaleAs(t, admin, ns, "rayservices", "svc", `{"group":"workers","replicas":2,"maxReplicas":3}`)
	require.Equal(t, 200, r.Status, string(r.Raw))
	res := decode[scaleResult](t, r)
	assert.Equal(t, "template", res.Type)
	assert.Equal(t, int64(2), res.WorkerGroups[0].Replicas)
	assert.Equal(t, int64(3), res.WorkerGroups[0].MaxReplicas)
	s, _ := statusOf(t, ns, "rayservices", "svc")
	assert.Equal(t, int64(2), s.WorkerGroups[0].Replicas, "the stored template changed")

	r = createCluster(t, admin, ns, "auto", func(obj map[string]any) {
		spec := obj["spec"].(map[string]any)
		spec["enableInTreeAutoscaling"] = true
		spec["suspend"] = true
	})
	require.Equal(t, 201, r.Status, string(r.Raw))
	r = scaleAs(t, admin, ns, "rayclusters", "auto", `{"group":"workers","replicas":3}`)
	require.Equal(t, 200, r.Status, string(r.Raw))
	res = decode[scaleResult](t, r)
	require.Len(t, res.Warnings, 1)
	assert.Contains(t, res.Warnings[0], "autoscaler")

	r = call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/yaml", mustRename(t, "rayjob-example1.yaml", "job"))
	require.Equal(t, 201, r.Status, string(r.Raw))
	job := decode[summary](t, r)
	require.NotEmpty(t, job.WorkerGroups, "the RayJob has a worker group")
	group := job.WorkerGroups[0].Name
	r = scaleAs(t, admin, ns, "rayjobs", "job", fmt.Sprintf(`{"group":%q,"replicas":%d}`, group, job.WorkerGroups[0].Replicas+1))
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, job.WorkerGroups[0].Replicas+1, decode[scaleResult](t, r).WorkerGroups[0].Replicas)
}

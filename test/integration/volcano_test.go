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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

var (
	podGroups     = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	volcanoQueues = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
)

// scheduling is what a summary says of the queue manager.
type scheduling struct {
	Manager, Queue, Group, Phase, Reason, Message string
	MinMember, Running                            int64
}

// The operator runs with the Volcano batch scheduler (stack/up.sh) and makes a PodGroup for a RayCluster
// in queue ray-a; its pods select nodes that no node is yet, so nothing can be placed. The test plays
// Volcano's scheduler: the PodGroup Pending with an Unschedulable condition (reason NotEnoughResources,
// volcano.sh/apis v1.13.0 scheduling/v1beta1). The list item, the detail and the list stream show the
// queue, the phase and why, and the health says it waits in the queue. Then a node gets the label and
// the test writes the group Running: the cluster runs, and the health is its own again.
func TestVolcanoQueueWait(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "volcano")
	admin := env.tokens["admin"]
	ctx := context.Background()
	pool := "ray-service.test/pool-" + ns

	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(mustRename(t, "raycluster-minimal.yaml", "gang"), &obj))
	spec := obj["spec"].(map[string]any)
	for _, tpl := range []map[string]any{spec["headGroupSpec"].(map[string]any), spec["workerGroupSpecs"].([]any)[0].(map[string]any)} {
		tpl["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"] = map[string]any{pool: "yes"}
	}
	body, err := json.Marshal(obj)
	require.NoError(t, err)
	_, stream := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters"), admin, "")
	stream.snapshot(t)
	// Into a queue that does not exist: 422 naming it, and nothing is made.
	r := call(t, "POST", nsPath(ns, "rayclusters")+"?queue=ray-a", admin, "application/json", body)
	require.Equal(t, 422, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Raw), "no Volcano Queue, nor Kueue LocalQueue of namespace "+ns)
	_, err = getRay(t, rayClusters, ns, "gang")
	assert.True(t, apierrors.IsNotFound(err), "nothing is created: %v", err)

	queueObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
		"metadata": map[string]any{"name": "ray-a"}, "spec": map[string]any{"weight": int64(1), "capability": map[string]any{"cpu": "4"}}}}
	_, err = env.adminDyn.Resource(volcanoQueues).Create(ctx, queueObj, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.adminDyn.Resource(volcanoQueues).Delete(context.Background(), "ray-a", metav1.DeleteOptions{})
	})
	// Into the queue, by the create's parameter: the service sets the label KubeRay reads.
	r = call(t, "POST", nsPath(ns, "rayclusters")+"?queue=ray-a", admin, "application/json", body)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	made, err := getRay(t, rayClusters, ns, "gang")
	require.NoError(t, err)
	assert.Equal(t, "ray-a", made.GetLabels()["volcano.sh/queue-name"])
	var pg *unstructured.Unstructured
	eventually(t, 30*time.Second, "the operator's PodGroup", func() bool {
		pg, err = env.adminDyn.Resource(podGroups).Namespace(ns).Get(ctx, "ray-gang-pg", metav1.GetOptions{})
		return err == nil
	})
	queue, _, _ := unstructured.NestedString(pg.Object, "spec", "queue")
	assert.Equal(t, "ray-a", queue, "from the cluster's label")
	minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
	assert.Equal(t, int64(3), minMember, "the head and two workers")

	// As Volcano v1.13.0 writes it: pkg/scheduler/plugins/gang/gang.go (reason NotEnoughResources, message
	// "<unready>/<tasks> tasks in gang unschedulable: " + JobInfo.FitError, pkg/scheduler/api/job_info.go).
	const why = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable"
	writeGroup(t, ns, "ray-gang-pg", map[string]any{"phase": "Pending", "conditions": []any{map[string]any{
		"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": why, "transitionID": "t1",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
	type item struct {
		Status     string      `json:"status"`
		Health     health      `json:"health"`
		Scheduling *scheduling `json:"scheduling"`
	}
	waiting := func(it item) bool {
		return it.Scheduling != nil && it.Scheduling.Phase == "Pending" && it.Health.Reason == "WaitingInQueue"
	}
	eventually(t, 30*time.Second, "waiting in the queue, in the detail", func() bool {
		return waiting(decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", "gang"), admin, "", nil)))
	})
	d := decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", "gang"), admin, "", nil))
	assert.Equal(t, &scheduling{Manager: "volcano", Queue: "ray-a", Group: "ray-gang-pg", Phase: "Pending", Reason: "NotEnoughResources",
		Message: why, MinMember: 3}, d.Scheduling)
	assert.Equal(t, "Progressing", d.Health.State)
	assert.Equal(t, "waiting in volcano queue ray-a: "+why, d.Health.Message)
	l := decode[struct{ Items []item }](t, call(t, "GET", nsPath(ns, "rayclusters"), admin, "", nil))
	if assert.Len(t, l.Items, 1) {
		assert.True(t, waiting(l.Items[0]), "the list item: %+v", l.Items[0])
	}
	stream.until(t, 30*time.Second, "waiting in the queue, on the list stream", func(ev sseEvent) bool {
		var it item
		return json.Unmarshal(ev.Data, &it) == nil && waiting(it)
	})

	// The queues route: the queue with its figures, for whoever may list queues; its name and the objects
	// waiting in it for a viewer who may list the Ray objects but not the queues.
	type queueList struct {
		Items []struct {
			Manager, Name, Withheld string
			Capability              map[string]string
			Waiting                 []struct{ Kind, Namespace, Name, Phase, Reason string }
		}
	}
	queuesOf := func(tok string) queueList {
		t.Helper()
		r := call(t, "GET", "/rest/ray/v1/queues", tok, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[queueList](t, r)
	}
	for _, tok := range []string{admin, env.tokens["viewer"]} {
		found := false
		for _, q := range queuesOf(tok).Items {
			if q.Name != "ray-a" {
				continue
			}
			found = true
			assert.Equal(t, "volcano", q.Manager)
			if tok == admin {
				assert.Equal(t, map[string]string{"cpu": "4"}, q.Capability, "the Queue's own figures")
				assert.Empty(t, q.Withheld)
			} else {
				assert.Nil(t, q.Capability, "the viewer may not list queues")
				assert.Contains(t, q.Withheld, "may not list queues")
			}
			var names []string
			for _, w := range q.Waiting {
				if w.Namespace == ns {
					names = append(names, w.Kind+"/"+w.Name+" "+w.Phase+" "+w.Reason)
				}
			}
			assert.Equal(t, []string{"RayCluster/gang Pending NotEnoughResources"}, names)
		}
		assert.True(t, found, "queue ray-a is listed")
	}
	assert.Empty(t, queuesOf(env.tokens["nobody"]).Items, "nobody sees no queue and no waiting object")

	pendingCPU := func() float64 {
		var o struct{ Pending *struct{ CPU float64 } }
		r := call(t, "GET", "/rest/ray/v1/overview?namespace="+ns, admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		require.NoError(t, json.Unmarshal(r.Data, &o))
		require.NotNil(t, o.Pending)
		return o.Pending.CPU
	}
	assert.InDelta(t, 3.0, pendingCPU(), 1e-9, "the overview's pending demand: the head and two workers, a core each")

	// Room appears: a node gets the pool's label, Volcano admits the group, the pods run.
	label := func(value any) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{pool: value}}})
		require.NoError(t, err)
		_, err = env.admin.CoreV1().Nodes().Patch(ctx, "kwok-node-0", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	label("yes")
	t.Cleanup(func() { label(nil) })
	writeGroup(t, ns, "ray-gang-pg", map[string]any{"phase": "Running", "running": int64(3), "conditions": []any{map[string]any{
		// gang.go v1.13.0: the Scheduled condition once the gang is ready.
		"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled", "transitionID": "t2",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
	eventually(t, 60*time.Second, "Running and Healthy once admitted", func() bool {
		d := decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", "gang"), admin, "", nil))
		return d.Status == "Running" && d.Health.State == "Healthy" && d.Scheduling != nil && d.Scheduling.Phase == "Running"
	})
	assert.Zero(t, pendingCPU(), "admitted: nothing waits")
}

// writeGroup writes a PodGroup's status as Volcano's scheduler does (the CRD has no status subresource),
// retrying on conflict with the operator's own writes.
func writeGroup(t *testing.T, ns, name string, status map[string]any) {
	t.Helper()
	eventually(t, 30*time.Second, "the status of "+name+" written", func() bool {
		u, err := env.adminDyn.Resource(podGroups).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		u.Object["status"] = status
		_, err = env.adminDyn.Resource(podGroups).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{})
		return err == nil
	})
}

//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var kueueWorkloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// createSuspendedRayJob makes, through the service as the holder of token, the minimal RayJob under name
// in ns, suspended (as Kueue's webhook makes a RayJob it admits) and with labels (nil: the manifest's).
func createSuspendedRayJob(t *testing.T, token, ns, name string, labels map[string]any) *response {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(mustRename(t, "rayjob-minimal.yaml", name), &obj))
	if labels != nil {
		obj["metadata"].(map[string]any)["labels"] = labels
	}
	obj["spec"].(map[string]any)["suspend"] = true
	body, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayjobs"), token, "application/json", body)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	return r
}

// A RayJob Kueue admits (label kueue.x-k8s.io/queue-name; suspended at create, as Kueue's webhook makes
// it) is stopped and started through its Workload's spec.active, as Kueue documents, never by toggling
// the spec.suspend Kueue owns. No Kueue controller runs on the stack: the test plays it, making the
// Workload the RayJob owns (kueue v0.17.0 apis/kueue/v1beta2) and writing its conditions. While Kueue
// reserves no quota, the RayJob waits in its LocalQueue, saying why.
func TestKueueStopStartWithoutAFight(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "kueue")
	admin := env.tokens["admin"]
	ctx := context.Background()

	createSuspendedRayJob(t, admin, ns, "queued", map[string]any{"kueue.x-k8s.io/queue-name": "team-queue"})

	r := call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", admin, "", nil)
	assert.Equal(t, 409, r.Status, "no Workload yet: %s", r.Raw)
	assert.Contains(t, r.Msg, "has made no Workload for it yet")

	made := makeWorkload(t, ns, rayJobs, "queued", "rayjob-queued-1a2b3", "team-queue")
	workloads := env.adminDyn.Resource(kueueWorkloads).Namespace(ns)
	// As Kueue v0.17.0 writes it: pkg/scheduler/flavorassigner/flavorassigner.go (Assignment.Message and
	// the "insufficient unused quota" status), on the QuotaReserved condition, reason Pending.
	const noQuota = "couldn't assign flavors to pod set head: insufficient unused quota for cpu in flavor default, 1 more needed"
	made.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False",
		"reason": "Pending", "message": noQuota, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	_, err := workloads.UpdateStatus(ctx, made, metav1.UpdateOptions{})
	require.NoError(t, err)

	type item struct {
		Status     string `json:"status"`
		Health     health `json:"health"`
		Scheduling *struct {
			Manager, Queue, Phase, Reason, Message string
		} `json:"scheduling"`
	}
	var d item
	waits := func() bool {
		d = decode[item](t, call(t, "GET", itemPath(ns, "rayjobs", "queued"), admin, "", nil))
		return d.Scheduling != nil && d.Scheduling.Manager == "kueue" && d.Health.Reason == "WaitingInQueue" &&
			d.Health.Message == "waiting in kueue queue team-queue: "+noQuota
	}
	eventually(t, 30*time.Second, "waiting in its LocalQueue, saying why", waits)
	// Suspended by the operator meanwhile (Stopping, then Stopped): once the detail shows the operator's
	// write, it still says waiting, not stopped.
	eventually(t, 60*time.Second, "the operator's suspension shown (Stopped)", func() bool {
		waits()
		return d.Status == "Stopped"
	})
	assert.True(t, waits(), "still waiting once the operator has suspended it: %+v", d)

	// The queues route: its LocalQueue, with what Kueue wrote of it, and the RayJob waiting there.
	// Its ClusterQueue: quota and use as Kueue writes them (kueue v0.17.0 apis/kueue/v1beta2/clusterqueue_types.go).
	clusterQueues := env.adminDyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"})
	cqName := "cq-" + ns
	cqMade, err := clusterQueues.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind": "ClusterQueue", "metadata": map[string]any{"name": cqName}, "spec": map[string]any{"resourceGroups": []any{
			map[string]any{"coveredResources": []any{"cpu"}, "flavors": []any{map[string]any{"name": "default",
				"resources": []any{map[string]any{"name": "cpu", "nominalQuota": "4"}}}}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = clusterQueues.Delete(context.Background(), cqName, metav1.DeleteOptions{}) })
	cqMade.Object["status"] = map[string]any{"pendingWorkloads": int64(1), "reservingWorkloads": int64(0), "admittedWorkloads": int64(2),
		"flavorsUsage": []any{map[string]any{"name": "default", "resources": []any{map[string]any{"name": "cpu", "total": "4", "borrowed": "0"}}}}}
	_, err = clusterQueues.UpdateStatus(ctx, cqMade, metav1.UpdateOptions{})
	require.NoError(t, err)
	lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "team-queue", "namespace": ns}, "spec": map[string]any{"clusterQueue": cqName}}}
	localQueues := env.adminDyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).Namespace(ns)
	lqMade, err := localQueues.Create(ctx, lq, metav1.CreateOptions{})
	require.NoError(t, err)
	lqMade.Object["status"] = map[string]any{"pendingWorkloads": int64(1), "reservingWorkloads": int64(0), "admittedWorkloads": int64(0)}
	_, err = localQueues.UpdateStatus(ctx, lqMade, metav1.UpdateOptions{})
	require.NoError(t, err)
	var ql struct {
		Items []struct {
			Manager, Namespace, Name, ClusterQueue string
			Workloads                              *struct{ Pending int64 }
			Quota                                  *struct {
				Nominal, Usage map[string]map[string]string
				Workloads      struct{ Pending, Admitted int64 }
			}
			Waiting []struct{ Kind, Name, Reason string }
		}
	}
	r = call(t, "GET", "/rest/ray/v1/queues", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	require.NoError(t, json.Unmarshal(r.Data, &ql))
	found := false
	for _, q := range ql.Items {
		if q.Manager == "kueue" && q.Namespace == ns && q.Name == "team-queue" {
			found = true
			assert.Equal(t, cqName, q.ClusterQueue)
			if assert.NotNil(t, q.Quota, "the admin may read ClusterQueues") {
				assert.Equal(t, "4", q.Quota.Nominal["default"]["cpu"])
				assert.Equal(t, "4", q.Quota.Usage["default"]["cpu"], "its quota used up: why the RayJob waits")
				assert.Equal(t, int64(2), q.Quota.Workloads.Admitted)
			}
			if assert.NotNil(t, q.Workloads) {
				assert.Equal(t, int64(1), q.Workloads.Pending)
			}
			if assert.Len(t, q.Waiting, 1) {
				assert.Equal(t, "RayJob", q.Waiting[0].Kind)
				assert.Equal(t, "queued", q.Waiting[0].Name)
				assert.Equal(t, "Pending", q.Waiting[0].Reason)
			}
		}
	}
	assert.True(t, found, "the LocalQueue is listed: %s", r.Raw)

	active := func() bool {
		got, err := workloads.Get(ctx, "rayjob-queued-1a2b3", metav1.GetOptions{})
		require.NoError(t, err)
		a, _, _ := unstructured.NestedBool(got.Object, "spec", "active")
		return a
	}
	suspended := func() bool {
		got, err := getRay(t, rayJobs, ns, "queued")
		require.NoError(t, err)
		s, _, _ := unstructured.NestedBool(got.Object, "spec", "suspend")
		return s
	}
	r = call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.False(t, active(), "stopped through the Workload")
	assert.True(t, suspended(), "spec.suspend is Kueue's: left as it was")
	r = call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", admin, "", nil)
	assert.Equal(t, 200, r.Status, "stopping what is stopped changes nothing: %s", r.Raw)

	r = call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/start", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	started := decode[struct {
		Queued *struct{ Manager, Queue, Message string } `json:"queued"`
	}](t, r)
	if assert.NotNil(t, started.Queued, "the answer says it is queued, not started: %s", r.Raw) {
		assert.Equal(t, "kueue", started.Queued.Manager)
		assert.Equal(t, "team-queue", started.Queued.Queue)
	}
	assert.True(t, active(), "queued again through the Workload")
	assert.True(t, suspended(), "Kueue resumes it once admitted, not the service")
	viewer := call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", env.tokens["viewer"], "", nil)
	assert.Equal(t, 403, viewer.Status, "a viewer may not: %s", viewer.Raw)
	assert.True(t, active())
}

// makeWorkload makes the Kueue Workload name in ns, in queue, of the Ray object owner (of resource
// res) as its controller, as Kueue makes one (kueue v0.17.0 apis/kueue/v1beta2), and returns it as made.
func makeWorkload(t *testing.T, ns string, res schema.GroupVersionResource, owner, name, queue string) *unstructured.Unstructured {
	t.Helper()
	o, err := getRay(t, res, ns, owner)
	require.NoError(t, err)
	yes := true
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"queueName": queue, "active": true, "podSets": []any{map[string]any{"name": "head", "count": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "ray-head", "image": "rayproject/ray:2.46.0"}}}}}}}}}
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: o.GetKind(), Name: owner, UID: o.GetUID(), Controller: &yes}})
	made, err := env.adminDyn.Resource(kueueWorkloads).Namespace(ns).Create(context.Background(), wl, metav1.CreateOptions{})
	require.NoError(t, err)
	return made
}

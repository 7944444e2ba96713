package queues

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// A Volcano Queue and a Kueue LocalQueue read as their managers write them; the waiting objects go to
// their queue, a LocalQueue's by namespace; a queue the caller may not list is named, withheld.
func TestQueuesAndWhatWaits(t *testing.T) {
	vq := FromVolcano(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "ray-a"},
		"spec":   map[string]any{"weight": int64(2), "capability": map[string]any{"cpu": "16", "huawei.com/Ascend910": "16"}},
		"status": map[string]any{"state": "Open", "pending": int64(1), "running": int64(3), "allocated": map[string]any{"cpu": "4"}}}})
	assert.Equal(t, Queue{Manager: "volcano", Name: "ray-a", State: "Open", Weight: 2,
		Capability: map[string]string{"cpu": "16", "huawei.com/Ascend910": "16"}, Allocated: map[string]string{"cpu": "4"},
		PodGroups: &GroupCounts{Pending: 1, Running: 3}, Waiting: []Waiting{}}, vq)
	lq := FromLocalQueue(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "team-queue", "namespace": "team"},
		"spec": map[string]any{"clusterQueue": "cluster-queue"},
		"status": map[string]any{"pendingWorkloads": int64(2), "admittedWorkloads": int64(1), "flavorsUsage": []any{
			map[string]any{"name": "default", "resources": []any{map[string]any{"name": "cpu", "total": "3"}}}}}}})
	assert.Equal(t, Queue{Manager: "kueue", Namespace: "team", Name: "team-queue", ClusterQueue: "cluster-queue",
		Workloads: &WorkloadCounts{Pending: 2, Admitted: 1}, Usage: map[string]map[string]string{"default": {"cpu": "3"}}, Waiting: []Waiting{}}, lq)

	waiting := map[string][]Waiting{
		Key("volcano", "team", "ray-a"):      {{Kind: "RayCluster", Namespace: "team", Name: "b"}, {Kind: "RayCluster", Namespace: "team", Name: "a"}},
		Key("kueue", "team", "team-queue"):   {{Kind: "RayJob", Namespace: "team", Name: "train"}},
		Key("kueue", "other", "team-queue"):  {{Kind: "RayJob", Namespace: "other", Name: "x"}},
		Key("volcano", "team", "not-listed"): {{Kind: "RayJob", Namespace: "team", Name: "y"}},
	}
	qs := WithWaiting([]Queue{vq, lq}, waiting, true)
	var names []string
	for _, q := range qs {
		names = append(names, Key(q.Manager, q.Namespace, q.Name))
	}
	assert.Equal(t, []string{"kueue/other/team-queue", "kueue/team/team-queue", "volcano//not-listed", "volcano//ray-a"}, names)
	assert.Equal(t, "x", qs[0].Waiting[0].Name, "a LocalQueue's objects are those of its namespace")
	assert.Equal(t, ErrWithheld, qs[2].Withheld, "not listed: its name alone")
	assert.Empty(t, qs[3].Withheld)
	assert.Equal(t, []string{"a", "b"}, []string{qs[3].Waiting[0].Name, qs[3].Waiting[1].Name})
}

// Use finds the queue the caller may put work in, of either manager; a closed, missing, ambiguous or
// unreadable queue is refused with why.
func TestUseAQueue(t *testing.T) {
	scheme := runtime.NewScheme()
	gvrs := map[schema.GroupVersionResource]string{VolcanoResource(): "QueueList", LocalQueueResource(): "LocalQueueList"}
	objs := []runtime.Object{
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
			"metadata": map[string]any{"name": "ray-a"}, "status": map[string]any{"state": "Open"}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
			"metadata": map[string]any{"name": "shut"}, "status": map[string]any{"state": "Closed"}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
			"metadata": map[string]any{"name": "both"}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "both", "namespace": "team"}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "team-queue", "namespace": "team"}}},
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, gvrs, objs...)
	l := &Lister{Dynamic: func(string) (dynamic.Interface, error) { return dyn, nil }}
	ctx := context.Background()

	for _, tc := range []struct{ ns, manager, name, want, refused string }{
		{"team", "", "ray-a", "volcano", ""},
		{"team", "", "team-queue", "kueue", ""},
		{"team", "kueue", "both", "kueue", ""},
		{"team", "volcano", "both", "volcano", ""},
		{"team", "", "both", "", "say which with queueManager"},
		{"other", "", "team-queue", "", "no Volcano Queue, nor Kueue LocalQueue of namespace other"},
		{"team", "kueue", "ray-a", "", "no Kueue LocalQueue of namespace team"},
		{"team", "", "shut", "", "the Volcano queue is Closed"},
	} {
		got, err := l.Use(ctx, "t", tc.ns, tc.manager, tc.name)
		if tc.refused == "" {
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.want, got, tc.name)
			continue
		}
		require.Error(t, err, tc.name)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", tc.name, err)
		assert.Contains(t, err.Error(), tc.refused)
	}

	// A caller who may not read Volcano's queues still uses a LocalQueue; with none, the 403 stands.
	dyn.PrependReactor("get", "queues", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(VolcanoResource().GroupResource(), "ray-a", nil)
	})
	got, err := l.Use(ctx, "t", "team", "", "team-queue")
	require.NoError(t, err)
	assert.Equal(t, "kueue", got)
	_, err = l.Use(ctx, "t", "team", "", "ray-a")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
}

// A LocalQueue is listed with its ClusterQueue's quota and use, as Kueue v0.17.0 writes them, for a
// caller who may list ClusterQueues; without, with its own figures alone.
func TestLocalQueueWithItsClusterQuota(t *testing.T) {
	gvrs := map[schema.GroupVersionResource]string{VolcanoResource(): "QueueList", LocalQueueResource(): "LocalQueueList",
		ClusterQueueResource(): "ClusterQueueList"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "team-queue", "namespace": "team"}, "spec": map[string]any{"clusterQueue": "cluster-queue"}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
			"metadata": map[string]any{"name": "cluster-queue"},
			"spec": map[string]any{"resourceGroups": []any{map[string]any{"coveredResources": []any{"cpu", "nvidia.com/gpu"},
				"flavors": []any{map[string]any{"name": "default", "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": "16"}, map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "4"}}}}}}},
			"status": map[string]any{"pendingWorkloads": int64(3), "admittedWorkloads": int64(1), "flavorsUsage": []any{
				map[string]any{"name": "default", "resources": []any{map[string]any{"name": "cpu", "total": "12", "borrowed": "0"}}}}}}})
	l := &Lister{Dynamic: func(string) (dynamic.Interface, error) { return dyn, nil }}
	qs, forbidden, err := l.List(context.Background(), "t")
	require.NoError(t, err)
	assert.False(t, forbidden)
	require.Len(t, qs, 1)
	assert.Equal(t, &ClusterQuota{Nominal: map[string]map[string]string{"default": {"cpu": "16", "nvidia.com/gpu": "4"}},
		Usage: map[string]map[string]string{"default": {"cpu": "12"}}, Workloads: WorkloadCounts{Pending: 3, Admitted: 1}}, qs[0].Quota)

	dyn.PrependReactor("list", "clusterqueues", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(ClusterQueueResource().GroupResource(), "", nil)
	})
	qs, _, err = l.List(context.Background(), "t")
	require.NoError(t, err)
	assert.Nil(t, qs[0].Quota, "the caller may not read ClusterQueues")
	assert.Equal(t, "cluster-queue", qs[0].ClusterQueue)
}

// A LocalQueue's pending Workloads in line, as Kueue's visibility API answers (kueue v0.17.0
// apis/visibility/v1beta2 PendingWorkloadsSummary); where it is not served, none and no error.
func TestPositionsFromKueuesVisibilityAPI(t *testing.T) {
	served := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !served || r.URL.Path != "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team/localqueues/team-queue/pendingworkloads" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/v1beta2","metadata":{"name":"team-queue"},
			"items":[{"metadata":{"name":"rayjob-train-1a2b3","namespace":"team"},"priority":0,"localQueueName":"team-queue","positionInClusterQueue":4,"positionInLocalQueue":1}]}`))
	}))
	defer srv.Close()
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	l := &Lister{Dynamic: func(string) (dynamic.Interface, error) { return dyn, nil }}
	pos, err := l.Positions(context.Background(), "t", "team", "team-queue")
	require.NoError(t, err)
	assert.Equal(t, map[string]Position{"rayjob-train-1a2b3": {InLocalQueue: 1, InClusterQueue: 4}}, pos)
	served = false
	pos, err = l.Positions(context.Background(), "t", "team", "team-queue")
	require.NoError(t, err)
	assert.Empty(t, pos)
}

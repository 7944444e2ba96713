package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

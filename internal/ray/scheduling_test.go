package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray/raytest"
)

// podGroup is a PodGroup as KubeRay v1.6's Volcano plugin makes it for RayCluster owner and Volcano's
// scheduler then writes its status (volcano.sh/apis v1.13.0 scheduling/v1beta1).
func podGroup(owner, queue string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "ray-" + owner + "-pg", "namespace": "team"},
		"spec":     map[string]any{"minMember": int64(3), "queue": queue}, "status": status}}
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: owner, UID: "u1", Controller: &yes}})
	return u
}

// A PodGroup that Volcano cannot place says its queue, phase and why; the Ray cluster waiting for it is
// Progressing, waiting in the queue, rather than Pending; once the group runs, the health is the
// cluster's own again.
func TestSchedulingFromAPodGroup(t *testing.T) {
	pg := podGroup("demo", "ray-a", map[string]any{"phase": "Inqueue", "running": int64(0), "conditions": []any{
		map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
			"message":            "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable",
			"lastTransitionTime": "2026-12-03T08:00:00Z", "transitionID": "x"}}})
	kind, name := GroupOwner(pg)
	assert.Equal(t, "RayCluster", kind)
	assert.Equal(t, "demo", name)
	st := PodGroupState(pg)
	assert.Equal(t, &Scheduling{Manager: ManagerVolcano, Queue: "ray-a", Group: "ray-demo-pg", Phase: "Inqueue", Reason: "NotEnoughResources",
		Message: "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable",
		Since:   new(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)), MinMember: 3}, st)
	assert.True(t, st.Waiting())

	k := rayClusterKind()
	pending := k.Summarize(raytest.Manifest(t, "RayCluster", k.ClusterSpecPath, "demo", nil))
	require.Equal(t, StatusPending, pending.Status)
	s := k.WithScheduling(&pending, st)
	assert.Equal(t, st, s.Scheduling)
	assert.Equal(t, HealthProgressing, s.Health.State)
	assert.Equal(t, ReasonWaitingInQueue, s.Health.Reason)
	assert.Equal(t, "waiting in volcano queue ray-a: "+st.Message, s.Health.Message)
	assert.Nil(t, pending.Scheduling, "the base is not changed")

	running := PodGroupState(podGroup("demo", "ray-a", map[string]any{"phase": "Running", "running": int64(3)}))
	assert.False(t, running.Waiting())
	s = k.WithScheduling(&pending, running)
	assert.Equal(t, pending.Health, s.Health, "admitted: the cluster's own health")
	assert.Equal(t, int64(3), s.Scheduling.Running)

	stopped := k.Summarize(raytest.Manifest(t, "RayCluster", k.ClusterSpecPath, "demo", map[string]any{"state": "suspended"}))
	assert.Equal(t, HealthStopped, k.WithScheduling(&stopped, st).Health.State, "a stopped cluster is not waiting")
	assert.Same(t, &pending, k.WithScheduling(&pending, nil), "no queue manager: as it is")

	fresh := PodGroupState(podGroup("demo", "ray-a", map[string]any{"phase": "Pending"}))
	assert.False(t, fresh.Waiting(), "just made by KubeRay: Volcano has said nothing yet")
	assert.Equal(t, pending.Health, k.WithScheduling(&pending, fresh).Health)

	orphan := podGroup("demo", "", nil)
	orphan.SetOwnerReferences(nil)
	kind, _ = GroupOwner(orphan)
	assert.Empty(t, kind)
}

// A start hands an object in a queue to its manager: the answer says it is queued, until the manager
// has admitted it.
func TestQueuedByStart(t *testing.T) {
	kueue := map[string]string{KueueQueueLabel: "team"}
	volcano := map[string]string{VolcanoQueueLabel: "ray-a"}
	q := QueuedByStart(kueue, nil)
	require.NotNil(t, q)
	assert.Equal(t, Queued{Manager: "kueue", Queue: "team", Message: "queued in kueue queue team: it runs once kueue admits it"}, *q)
	assert.NotNil(t, QueuedByStart(kueue, &Scheduling{Manager: ManagerKueue, Phase: "QuotaReserved"}))
	assert.Nil(t, QueuedByStart(kueue, &Scheduling{Manager: ManagerKueue, Phase: "Admitted"}), "admitted: it starts")
	assert.Equal(t, "volcano", QueuedByStart(volcano, &Scheduling{Manager: ManagerVolcano, Phase: "Pending"}).Manager)
	assert.Nil(t, QueuedByStart(volcano, &Scheduling{Manager: ManagerVolcano, Phase: "Running"}))
	assert.Nil(t, QueuedByStart(map[string]string{"team": "x"}, nil), "in no queue")
}

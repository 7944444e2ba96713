package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// workload is a Workload as Kueue v0.17 writes it for a RayJob (apis/kueue/v1beta2), with conditions.
func workload(conditions ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "rayjob-train-1a2b3", "namespace": "team"},
		"spec":     map[string]any{"queueName": "team-queue", "active": true},
		"status":   map[string]any{"conditions": conditions}}}
}

// A Workload without quota waits in its LocalQueue, saying why as Kueue does; with quota reserved and
// admitted it runs in its ClusterQueue; evicted, it waits again, saying why it was sent back.
func st0(t *testing.T) *Scheduling {
	t.Helper()
	return WorkloadState(workload(map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "no quota"}))
}

func TestWorkloadState(t *testing.T) {
	// kueue v0.17.0 pkg/scheduler/flavorassigner/flavorassigner.go: the QuotaReserved condition's message.
	const noQuota = "couldn't assign flavors to pod set head: insufficient unused quota for cpu in flavor default, 2 more needed"
	st := WorkloadState(workload(map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": noQuota,
		"lastTransitionTime": "2026-12-03T08:00:00Z"}))
	assert.Equal(t, ManagerKueue, st.Manager)
	assert.Equal(t, "team-queue", st.Queue)
	assert.Equal(t, "rayjob-train-1a2b3", st.Group)
	assert.Equal(t, "Pending", st.Phase)
	assert.Equal(t, "Pending", st.Reason)
	assert.Equal(t, noQuota, st.Message)
	assert.NotNil(t, st.Since)
	assert.True(t, st.Waiting())

	admitted := workload(map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
		map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted"})
	admitted.Object["status"].(map[string]any)["admission"] = map[string]any{"clusterQueue": "cluster-queue"}
	st = WorkloadState(admitted)
	assert.Equal(t, "Admitted", st.Phase)
	assert.Equal(t, "cluster-queue", st.ClusterQueue)
	assert.False(t, st.Waiting())

	evicted := WorkloadState(workload(map[string]any{"type": "Evicted", "status": "True", "reason": "Preempted",
		// kueue v0.17.0 pkg/scheduler/preemption/preemption.go: the eviction's message.
		"message": "Preempted to accommodate a workload (UID: 9f1c, JobUID: 7a2e) due to prioritization in the ClusterQueue; " +
			"preemptor path: /cluster-queue; preemptee path: /cluster-queue"},
		map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Preempted"}))
	assert.Equal(t, "Pending", evicted.Phase)
	assert.Equal(t, "Preempted", evicted.Reason)
	assert.True(t, evicted.Waiting())

	assert.False(t, WorkloadState(workload()).Waiting(), "Kueue has said nothing yet")
	stopped := workload(map[string]any{"type": "Evicted", "status": "True", "reason": "Deactivated"})
	stopped.Object["spec"].(map[string]any)["active"] = false
	assert.Equal(t, "Deactivated", WorkloadState(stopped).Phase)
	assert.False(t, WorkloadState(stopped).Waiting(), "stopped through its Workload: not waiting")

	k := rayJobKind()
	suspended := k.Summarize(cronJob(t, "* * * * *", false, nil))
	suspended.Status, suspended.Health = StatusStopped, Health{State: HealthStopped, Reason: StatusStopped}
	assert.Equal(t, ReasonWaitingInQueue, k.WithScheduling(&suspended, st0(t)).Health.Reason,
		"Kueue keeps what it has not admitted suspended: waiting, not stopped")
	assert.Equal(t, "Finished", WorkloadState(workload(map[string]any{"type": "Finished", "status": "True"})).Phase)
}

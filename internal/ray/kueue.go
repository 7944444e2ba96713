package ray

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kueue admission, as Kueue v0.17 handles Ray objects (sigs.k8s.io/kueue pkg/controller/jobs/raycluster and
// rayjob): an object labelled KueueQueueLabel gets a Workload (kueue.x-k8s.io/v1beta2, owned by it), which
// Kueue admits when its ClusterQueue has quota; apis/kueue/v1beta2/workload_types.go names its
// conditions: QuotaReserved, Admitted, Evicted, Preempted, Finished.
const (
	// ManagerKueue names Kueue as the queue manager of a Ray object.
	ManagerKueue = "kueue"
	// KueueQueueLabel puts a Ray object in a Kueue LocalQueue (pkg/controller/constants QueueLabel).
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
)

// WorkloadResource is the resource of Kueue's Workloads.
func WorkloadResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
}

// WorkloadState reads where a Workload stands: Deactivated (spec.active false: stopped), Finished,
// Admitted, QuotaReserved (waiting for its admission checks) or Pending, and while it is not admitted, why (its QuotaReserved condition, or the
// eviction that sent it back).
func WorkloadState(wl *unstructured.Unstructured) *Scheduling {
	s := &Scheduling{Manager: ManagerKueue, Group: wl.GetName(), Phase: "Pending"}
	s.Queue, _, _ = unstructured.NestedString(wl.Object, "spec", "queueName")
	s.Queue = Clip(s.Queue, MaxNameBytes)
	s.ClusterQueue, _, _ = unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
	s.ClusterQueue = Clip(s.ClusterQueue, MaxNameBytes)
	conds := map[string]map[string]any{}
	for _, c := range nestedSlice(wl.Object, "status", "conditions") {
		if cm, ok := c.(map[string]any); ok {
			if t, _ := cm["type"].(string); t != "" {
				conds[t] = cm
			}
		}
	}
	isTrue := func(t string) bool { return conds[t] != nil && conds[t]["status"] == "True" }
	why := s.heldBy
	if active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); found && !active {
		s.Phase = "Deactivated" // stopped: not waiting for anything
		return s
	}
	switch {
	case isTrue("Finished"):
		s.Phase = "Finished"
	case isTrue("Admitted"):
		s.Phase = "Admitted"
	case isTrue("QuotaReserved"):
		s.Phase = "QuotaReserved"
	case isTrue("Evicted"):
		why(conds["Evicted"])
	case conds["QuotaReserved"] != nil:
		why(conds["QuotaReserved"])
	}
	return s
}

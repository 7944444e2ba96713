package ray

import (
	"cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ClusterKind is the object kind of the Ray clusters every kind runs on, as events name them.
const ClusterKind = "RayCluster"

// rayClusterKind: a RayCluster is a Ray cluster itself. KubeRay derives pod and service names from its
// name, hence the shorter limit. It suspends in place, and a head pod that cannot start makes it Failed.
func rayClusterKind() *Kind {
	return &Kind{
		Resource:        "rayclusters",
		Kind:            ClusterKind,
		MaxNameLength:   53,
		IsCluster:       true,
		ClusterSpecPath: []string{"spec"},
		StatusOf:        rayClusterStatus,
		SignalsOf:       rayClusterSignals,
		ClustersOf:      func(s *Summary) []string { return []string{s.Name} },
		RecordedHeadService: func(o *unstructured.Unstructured) string {
			svc, _, _ := unstructured.NestedString(o.Object, "status", "head", "serviceName")
			return svc
		},
		FailsWithHead: true,
		// KubeRay v1.6.0 batchscheduler/volcano reads its labels; Kueue v0.17.0 pkg/controller/jobs/raycluster.
		QueueManagers: []string{ManagerVolcano, ManagerKueue},
		CanSuspend:    func(*unstructured.Unstructured) bool { return true },
		Notice: func(_, next string) string {
			if next == StatusFailed {
				return "cluster.failed"
			}
			return ""
		},
	}
}

// rayClusterStatus normalizes a RayCluster's state and conditions. Where the operator writes the
// RayClusterSuspended condition (gate RayClusterStatusConditions), it outranks status.state: a resumed
// cluster keeps state "suspended" until its pods run again (raycluster_controller.go
// calculateStatus, KubeRay v1.5 and v1.6), and is starting, not stopped, once the condition is False.
func rayClusterStatus(o *unstructured.Unstructured) string {
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	state, _, _ := unstructured.NestedString(o.Object, "status", "state")
	if c, ok := condition(o, "RayClusterSuspended"); c.Status == "True" || (!ok && state == "suspended") {
		return StatusStopped
	}
	if c, _ := condition(o, "RayClusterSuspending"); c.Status == "True" || suspend {
		return StatusStopping
	}
	if c, _ := condition(o, "ReplicaFailure"); c.Status == "True" || state == "failed" {
		return StatusFailed
	}
	if state == "ready" {
		return StatusRunning
	}
	return StatusPending
}

// rayClusterSignals: a ReplicaFailure condition is a problem (pods the operator cannot create); while
// the head is not ready or the cluster not provisioned, that condition says why it waits.
func rayClusterSignals(o *unstructured.Unstructured, _ *Summary, self InvolvedObjectRef) (problems []Problem, waiting *Health) {
	if c, _ := condition(o, "ReplicaFailure"); c.Status == "True" {
		problems = append(problems, Problem{Source: self, Reason: cmp.Or(c.Reason, "ReplicaFailure"), Message: c.Message, Since: c.Since})
	}
	for _, typ := range []string{"HeadPodReady", "RayClusterProvisioned"} {
		if c, _ := condition(o, typ); c.Status == "False" {
			return problems, &Health{Reason: cmp.Or(c.Reason, typ+"False"), Message: c.Message, Since: c.Since}
		}
	}
	return problems, nil
}

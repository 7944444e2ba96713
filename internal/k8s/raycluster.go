package k8s

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// rayClusterKind: KubeRay derives pod and service names from the cluster's name, hence the shorter limit.
func rayClusterKind() *Kind {
	return &Kind{
		Resource:        "rayclusters",
		Kind:            "RayCluster",
		MaxNameLength:   53,
		clusterSpecPath: []string{"spec"},
		status:          rayClusterStatus,
		suspendable:     func(*unstructured.Unstructured) bool { return true },
	}
}

// rayClusterStatus normalizes a RayCluster's state and conditions.
func rayClusterStatus(o *unstructured.Unstructured) string {
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	state, _, _ := unstructured.NestedString(o.Object, "status", "state")
	if s, _, _ := condition(o, "RayClusterSuspended"); s == "True" || state == "suspended" {
		return StatusStopped
	}
	if s, _, _ := condition(o, "RayClusterSuspending"); s == "True" || suspend {
		return StatusStopping
	}
	if s, _, _ := condition(o, "ReplicaFailure"); s == "True" || state == "failed" {
		return StatusFailed
	}
	if state == "ready" {
		return StatusRunning
	}
	return StatusPending
}

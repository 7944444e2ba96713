package k8s

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// rayCluster is the object kind of a Ray cluster, as events name it.
const rayCluster = "RayCluster"

// rayClusterKind: a RayCluster is a Ray cluster itself. KubeRay derives pod and service names from its
// name, hence the shorter limit. It suspends in place, and a head pod that cannot start makes it Failed.
func rayClusterKind() *Kind {
	return &Kind{
		Resource:        "rayclusters",
		Kind:            rayCluster,
		MaxNameLength:   53,
		IsCluster:       true,
		clusterSpecPath: []string{"spec"},
		status:          rayClusterStatus,
		clusters:        func(s *Summary) []string { return []string{s.Name} },
		headService: func(o *unstructured.Unstructured) string {
			svc, _, _ := unstructured.NestedString(o.Object, "status", "head", "serviceName")
			return svc
		},
		failsWithHead: true,
		suspendable:   func(*unstructured.Unstructured) bool { return true },
	}
}

// rayClusterStatus normalizes a RayCluster's state and conditions.
func rayClusterStatus(o *unstructured.Unstructured) string {
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	state, _, _ := unstructured.NestedString(o.Object, "status", "state")
	if c, _ := condition(o, "RayClusterSuspended"); c.Status == "True" || state == "suspended" {
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

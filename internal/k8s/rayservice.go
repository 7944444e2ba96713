package k8s

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// rayServiceKind: a RayService runs on an active Ray cluster, and on a pending one while it upgrades.
// KubeRay names clusters and services after the RayService, hence the shorter limit. It is stopped by
// storing it as a template and deleting the instance.
func rayServiceKind() *Kind {
	return &Kind{
		Resource:        "rayservices",
		Kind:            "RayService",
		MaxNameLength:   47,
		clusterSpecPath: []string{"spec", "rayClusterConfig"},
		status:          rayServiceStatus,
		summarize:       summarizeRayService,
		clusters:        func(s *Summary) []string { return []string{s.ActiveRayClusterName, s.PendingRayClusterName} },
		headService: func(o *unstructured.Unstructured) string {
			svc, _, _ := unstructured.NestedString(o.Object, "status", "activeServiceStatus", "rayClusterStatus", "head", "serviceName")
			return svc
		},
		stopMode: stopToTemplate,
	}
}

// rayServiceStatus normalizes a RayService's Ready and UpgradeInProgress conditions.
func rayServiceStatus(o *unstructured.Unstructured) string {
	if suspended, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend"); suspended {
		return StatusStopped // only where the installed CRD has spec.suspend
	}
	ready, found := condition(o, "Ready")
	if c, _ := condition(o, "UpgradeInProgress"); c.Status == "True" {
		return StatusUpgrading
	}
	switch {
	case ready.Status == "True":
		return StatusRunning
	case ready.Reason == "InitializingTimeout":
		return StatusFailed
	case !found:
		// Without conditions (older operators), fall back on the deprecated serviceStatus.
		if st, _, _ := unstructured.NestedString(o.Object, "status", "serviceStatus"); st == "Running" {
			return StatusRunning
		}
	}
	return StatusPending
}

func summarizeRayService(o *unstructured.Unstructured, s *Summary) {
	s.ServiceStatus, _, _ = unstructured.NestedString(o.Object, "status", "serviceStatus")
	s.ActiveRayClusterName, _, _ = unstructured.NestedString(o.Object, "status", "activeServiceStatus", "rayClusterName")
	s.PendingRayClusterName, _, _ = unstructured.NestedString(o.Object, "status", "pendingServiceStatus", "rayClusterName")
	n, _ := nestedInt(o.Object, "status", "numServeEndpoints")
	s.NumServeEndpoints = &n
}

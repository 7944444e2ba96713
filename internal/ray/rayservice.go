package ray

import (
	"cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rayServiceKind: a RayService runs on an active Ray cluster, and on a pending one while it upgrades.
// KubeRay names clusters and services after the RayService, hence the shorter limit. It is stopped by
// storing it as a template and deleting the instance.
func rayServiceKind() *Kind {
	return &Kind{
		Resource:        "rayservices",
		Kind:            "RayService",
		MaxNameLength:   47,
		ClusterSpecPath: []string{"spec", "rayClusterConfig"},
		StatusOf:        rayServiceStatus,
		SignalsOf:       rayServiceSignals,
		SummarizeOwn:    summarizeRayService,
		ClustersOf:      func(s *Summary) []string { return []string{s.ActiveRayClusterName, s.PendingRayClusterName} },
		RecordedHeadService: func(o *unstructured.Unstructured) string {
			svc, _, _ := unstructured.NestedString(o.Object, "status", "activeServiceStatus", "rayClusterStatus", "head", "serviceName")
			return svc
		},
		StopBy: StopToTemplate,
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

// rayServiceSignals: an upgrade in progress, or a Ready condition that is False, is why it waits; a
// service that did not initialize in time is a problem.
func rayServiceSignals(o *unstructured.Unstructured, _ *Summary, self InvolvedObjectRef) (problems []Problem, waiting *Health) {
	if c, _ := condition(o, "UpgradeInProgress"); c.Status == "True" {
		waiting = &Health{Reason: cmp.Or(c.Reason, "UpgradeInProgress"), Message: c.Message, Since: c.Since}
	} else if c, _ := condition(o, "Ready"); c.Status == "False" {
		waiting = &Health{Reason: cmp.Or(c.Reason, "NotReady"), Message: c.Message, Since: c.Since}
	}
	if st, _, _ := unstructured.NestedString(o.Object, "status", "serviceStatus"); st == "InitializingTimeout" {
		problems = append(problems, Problem{Source: self, Reason: st, Message: "the RayService did not become ready in time"})
	}
	return problems, waiting
}

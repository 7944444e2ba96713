package ray

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rayServiceKind: a RayService runs on an active Ray cluster, and on a pending one while it upgrades.
// KubeRay names clusters and services after the RayService, hence the shorter limit. Where the installed
// CRD declares spec.suspend (KubeRay v1.7) it is suspended in place; on an older KubeRay it is stopped by
// storing it as a template and deleting the instance.
func rayServiceKind(declared *Declared) *Kind {
	return &Kind{
		Resource:        "rayservices",
		Kind:            "RayService",
		MaxNameLength:   47,
		ClusterSpecPath: []string{"spec", "rayClusterConfig"},
		StatusOf:        rayServiceStatus,
		SignalsOf:       rayServiceSignals,
		SummarizeOwn:    summarizeRayService,
		ClustersOf:      func(s *Summary) []string { return []string{s.ActiveRayClusterName, s.PendingRayClusterName} },
		// The clusters status.activeServiceStatus.rayClusterName and status.pendingServiceStatus.rayClusterName
		// name (KubeRay ray-operator/apis/ray/v1/rayservice_types.go, v1.5.0-v1.7.0). A cluster an upgrade
		// replaced is named no more: the utilization keeps it the RayService's (it was named), the idle
		// policy judges it as a cluster of its own until KubeRay deletes it (RayClusterDeletionDelaySeconds).
		Makes: func(o *unstructured.Unstructured) []string {
			active, _, _ := unstructured.NestedString(o.Object, "status", "activeServiceStatus", "rayClusterName")
			pending, _, _ := unstructured.NestedString(o.Object, "status", "pendingServiceStatus", "rayClusterName")
			return []string{active, pending}
		},
		RecordedHeadService: func(o *unstructured.Unstructured) string {
			svc, _, _ := unstructured.NestedString(o.Object, "status", "activeServiceStatus", "rayClusterStatus", "head", "serviceName")
			return svc
		},
		SuspendDeclared: func() bool { return declared.Has(FieldServiceSuspend) },
		StopBy:          StopToTemplate,
		// KubeRay v1.6.0 copies its labels to its clusters (rayservice_controller.go
		// constructRayClusterForRayService); Kueue v0.17.0 pkg/controller/jobs/rayservice.
		QueueManagers: []string{ManagerVolcano, ManagerKueue},
		Notice: func(prev, next string) string {
			switch {
			case next == StatusFailed:
				return "service.unhealthy"
			case next == StatusRunning && (prev == StatusUpgrading || prev == StatusRollingBack):
				return "service.upgrade-finished"
			}
			return ""
		},
	}
}

// rayServiceStatus normalizes a RayService's Ready, UpgradeInProgress and RollbackInProgress
// conditions (KubeRay v1.6 apis/ray/v1/rayservice_types.go; a rollback runs within an upgrade), and,
// where the installed CRD has spec.suspend (KubeRay v1.7), its Suspending and Suspended conditions:
// the operator deletes the service's clusters while Suspending is True, finishes even when
// spec.suspend is set back meanwhile, and only then says Suspended (v1.7 rayservice_controller.go
// handleSuspend). Until the operator has written Suspending, a spec.suspend asked is Stopping too.
func rayServiceStatus(o *unstructured.Unstructured) string {
	if c, _ := condition(o, "Suspended"); c.Status == "True" {
		return StatusStopped
	}
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	if c, _ := condition(o, "Suspending"); c.Status == "True" || suspend {
		return StatusStopping
	}
	ready, found := condition(o, "Ready")
	if c, _ := condition(o, "RollbackInProgress"); c.Status == "True" {
		return StatusRollingBack
	}
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
	strategy, _, _ := unstructured.NestedString(o.Object, "spec", "upgradeStrategy", "type")
	s.UpgradeStrategy = Clip(strategy, MaxWordBytes)
	for _, role := range []string{"active", "pending"} {
		st, _, _ := unstructured.NestedMap(o.Object, "status", role+"ServiceStatus")
		name, _ := st["rayClusterName"].(string)
		capacity, hasCapacity := nestedInt(st, "targetCapacity")
		traffic, hasTraffic := nestedInt(st, "trafficRoutedPercent")
		if name == "" || !hasCapacity && !hasTraffic {
			continue
		}
		c := RolloutCluster{Role: role, Cluster: Clip(name, MaxNameBytes)}
		if hasCapacity {
			c.TargetCapacity = &capacity
		}
		if hasTraffic {
			c.TrafficPercent = &traffic
		}
		if t, err := time.Parse(time.RFC3339, fmt.Sprint(st["lastTrafficMigratedTime"])); err == nil {
			c.LastTrafficMigrated = &t
		}
		s.Rollout = append(s.Rollout, c)
	}
}

// rayServiceSignals: an upgrade in progress, or a Ready condition that is False, is why it waits; a
// service that did not initialize in time is a problem.
func rayServiceSignals(o *unstructured.Unstructured, _ *Summary, self InvolvedObjectRef) (problems []Problem, waiting *Health) {
	if c, _ := condition(o, "RollbackInProgress"); c.Status == "True" {
		waiting = &Health{Reason: cmp.Or(c.Reason, "RollbackInProgress"), Message: c.Message, Since: c.Since}
	} else if c, _ := condition(o, "UpgradeInProgress"); c.Status == "True" {
		waiting = &Health{Reason: cmp.Or(c.Reason, "UpgradeInProgress"), Message: c.Message, Since: c.Since}
	} else if c, _ := condition(o, "Ready"); c.Status == "False" {
		waiting = &Health{Reason: cmp.Or(c.Reason, "NotReady"), Message: c.Message, Since: c.Since}
	}
	if st, _, _ := unstructured.NestedString(o.Object, "status", "serviceStatus"); st == "InitializingTimeout" {
		problems = append(problems, Problem{Source: self, Reason: st, Message: "the RayService did not become ready in time"})
	}
	return problems, waiting
}

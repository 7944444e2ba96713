package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KubeRay v1.7.0 renamed the reason of a RayService's RollbackInProgress condition: v1.6.2 writes
// TargetClusterChanged (ray-project/kuberay ray-operator/controllers/ray/rayservice_controller.go:2079
// reconcileRollbackState, apis/ray/v1/rayservice_types.go:222), v1.7.0 DesiredClusterSpecChanged, with
// one message when the spec was set back to the active cluster's and another when it changed to a third
// (rayservice_controller.go:2348 and :2371, apis/ray/v1/rayservice_types.go:233). Each is RollingBack, with
// the condition's reason and message as the health's, since the condition turned True.
func TestRayServiceRollbackUnderBothReasonNames(t *testing.T) {
	k := rayServiceKind(&Declared{})
	since := time.Date(2026, 11, 30, 6, 13, 0, 0, time.UTC)
	for _, c := range []struct{ operator, reason, message string }{
		{"v1.6.2", "TargetClusterChanged", "Goal state changed mid-upgrade, rolling back to original cluster."},
		{"v1.7.0", "DesiredClusterSpecChanged", "Goal state reverted to original cluster, rolling back."},
		{"v1.7.0", "DesiredClusterSpecChanged", "Goal state changed mid-upgrade, rolling back to original cluster."},
	} {
		// setCondition (rayservice_controller.go) writes the generation it observed and the time of the
		// transition; the upgrade's conditions stay True while it rolls back.
		rollback := m{"type": "RollbackInProgress", "status": "True", "reason": c.reason, "message": c.message,
			"observedGeneration": int64(3), "lastTransitionTime": since.Format(time.RFC3339)}
		status := m{
			"conditions": l{
				m{"type": "Ready", "status": "True", "reason": "NonZeroServeEndpoints", "observedGeneration": int64(3),
					"message": "Number of serve endpoints is greater than 0", "lastTransitionTime": "2026-11-30T06:00:00Z"},
				m{"type": "UpgradeInProgress", "status": "True", "reason": "BothActivePendingClustersExist", "observedGeneration": int64(3),
					"message": "Both active and pending Ray clusters exist", "lastTransitionTime": "2026-11-30T06:10:00Z"},
				rollback,
			},
			"activeServiceStatus":  m{"rayClusterName": "svc-x2h8q", "targetCapacity": int64(70), "trafficRoutedPercent": int64(80)},
			"pendingServiceStatus": m{"rayClusterName": "svc-k9d4b", "targetCapacity": int64(30), "trafficRoutedPercent": int64(20)},
			"serviceStatus":        "Running", "numServeEndpoints": int64(1), "observedGeneration": int64(3),
		}
		spec := m{"upgradeStrategy": m{"type": "NewClusterWithIncrementalUpgrade"}}
		s := k.Summarize(obj(spec, status))
		what := c.operator + " " + c.reason + ": " + c.message
		assert.Equal(t, StatusRollingBack, s.Status, what)
		assert.Equal(t, HealthProgressing, s.Health.State, what)
		assert.Equal(t, c.reason, s.Health.Reason, what)
		assert.Equal(t, c.message, s.Health.Message, what)
		if assert.NotNil(t, s.Health.Since, what) {
			assert.Equal(t, since, *s.Health.Since, what)
		}
		assert.Len(t, s.Rollout, 2, what)
	}
}

// v1.7.0's RayJob controller records when it first failed to read a Ray job's status from the
// dashboard (ray-project/kuberay ray-operator/controllers/ray/rayjob_controller.go:1325
// recordJobStatusCheckFailure, status.jobStatusCheckFailureStartTime, apis/ray/v1/rayjob_types.go:346),
// clears it on the next success (:329), and fails the RayJob with reason JobStatusCheckTimeoutExceeded
// (rayjob_types.go:76) once that lasts RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, 300 by default
// (checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded, :1336; utils/constant.go:290), never retried
// (checkBackoffLimitAndUpdateStatusIfNeeded, :543). The health says so from the start: the operator
// cannot reach the job's status since then.
func TestRayJobStatusCheckFailing(t *testing.T) {
	k := rayJobKind()
	failing := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	spec := m{"entrypoint": "python /home/ray/samples/sample_code.py", "shutdownAfterJobFinishes": true}
	// As the controller leaves a Running RayJob whose status it could not read (recordJobStatusCheckFailure
	// sets the time only; jobStatus and jobDeploymentStatus keep what the last read said).
	running := func() m {
		return m{
			"jobId": "rayjob-sample-6hk2t", "rayClusterName": "rayjob-sample-c7p4x",
			"dashboardURL": "rayjob-sample-c7p4x-head-svc.team.svc.cluster.local:8265",
			"jobStatus":    "RUNNING", "jobDeploymentStatus": "Running",
			"startTime": "2026-11-30T05:50:00Z", "rayJobInfo": m{"startTime": "2026-11-30T05:51:00Z"},
			"succeeded": int64(0), "failed": int64(0), "observedGeneration": int64(1),
			"jobStatusCheckFailureStartTime": failing.Format(time.RFC3339),
		}
	}
	s := k.Summarize(obj(spec, running()))
	assert.Equal(t, StatusRunning, s.Status, "the operator has not failed it yet")
	assert.Equal(t, HealthDegraded, s.Health.State)
	assert.Equal(t, ReasonJobStatusCheckFailing, s.Health.Reason)
	assert.Contains(t, s.Health.Message, "the operator cannot reach the job's status since 2026-11-30T06:00:00Z")
	require.NotNil(t, s.Health.Since)
	assert.Equal(t, failing, *s.Health.Since)
	require.Len(t, s.Problems(), 1)
	assert.Equal(t, InvolvedObjectRef{Kind: "RayJob", Name: ""}, s.Problems()[0].Source)

	// checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded: Failed with its reason and message (the time in
	// time.DateTime), the failure's start kept; updateRayJobStatus stamps endTime, and
	// checkBackoffLimitAndUpdateStatusIfNeeded counts the failure.
	timedOut := running()
	timedOut["jobDeploymentStatus"] = "Failed"
	timedOut["reason"] = "JobStatusCheckTimeoutExceeded"
	timedOut["message"] = "Job status checks have been failing since 2026-11-30 06:00:00; exceeded timeout of 300s"
	timedOut["endTime"] = "2026-11-30T06:05:02Z"
	timedOut["failed"] = int64(1)
	s = k.Summarize(obj(spec, timedOut))
	assert.Equal(t, StatusFailed, s.Status)
	assert.Equal(t, HealthFailed, s.Health.State)
	assert.Equal(t, "JobStatusCheckTimeoutExceeded", s.Health.Reason)
	assert.Contains(t, s.Health.Message, "the operator cannot reach the job's status since 2026-11-30T06:00:00Z")
	assert.Contains(t, s.Health.Message, "exceeded timeout of 300s", "the operator's own words stay")
	require.NotNil(t, s.Health.Since)
	assert.Equal(t, failing, *s.Health.Since)

	// A check that succeeds again clears the time (rayjob_controller.go:329): healthy once more.
	recovered := running()
	delete(recovered, "jobStatusCheckFailureStartTime")
	s = k.Summarize(obj(spec, recovered))
	assert.Equal(t, Health{State: HealthHealthy, Reason: StatusRunning}, s.Health)

	// A time left on a RayJob that failed otherwise (a Ray job the dashboard no longer knows, :315) is not
	// why it failed: the operator's reason is.
	other := running()
	other["jobDeploymentStatus"], other["reason"] = "Failed", "AppFailed"
	other["message"] = "Submitter completed but Ray job not found in RayCluster."
	s = k.Summarize(obj(spec, other))
	assert.Equal(t, "AppFailed", s.Health.Reason)
	assert.Equal(t, "Submitter completed but Ray job not found in RayCluster.", s.Health.Message)

	// Before v1.7 there is no such field: nothing changes.
	old := running()
	delete(old, "jobStatusCheckFailureStartTime")
	old["jobDeploymentStatus"], old["reason"], old["message"] = "Failed", "DeadlineExceeded", "past activeDeadlineSeconds"
	s = k.Summarize(obj(spec, old))
	assert.Equal(t, "DeadlineExceeded", s.Health.Reason)
	assert.Equal(t, "past activeDeadlineSeconds", s.Health.Message)
}

// A RayService is suspended in place where the installed CRD declares spec.suspend (KubeRay v1.7.0
// apis/ray/v1/rayservice_types.go:129), and stopped to a template where it does not (v1.5, v1.6): its
// stop needs the right to patch it, not to delete it and write a ConfigMap; its start, to patch.
func TestRayServiceStopBySuspendWhereTheCRDDeclaresIt(t *testing.T) {
	kinds := NewKinds()
	service, _ := kinds.Lookup("rayservices")
	running := Summary{Name: "s", Kind: "RayService", Type: TypeInstance, Status: StatusRunning, ActiveRayClusterName: "s-x"}
	stopNeeds := func() Permissions {
		n := service.Possible(&running)
		p, ok := n.Of(ActionStop)
		require.True(t, ok)
		return p
	}
	obj := m{"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": m{"name": "s", "namespace": "n"}, "spec": m{}}
	u := &unstructured.Unstructured{Object: obj}

	assert.False(t, service.Suspendable(u), "KubeRay v1.6's CRD has no spec.suspend")
	assert.Equal(t, Of(PermGet)|Of(PermConfigMapCreate)|Of(PermConfigMapGet)|Of(PermConfigMapUpdate)|Of(PermDelete), stopNeeds())
	assert.Equal(t, "delete", service.StopVerb())
	assert.Equal(t, "create", service.StartVerb())

	assert.Equal(t, []string{FieldServiceSuspend}, kinds.Declared().Set(map[string]bool{FieldServiceSuspend: true}))
	assert.True(t, service.Suspendable(u), "KubeRay v1.7's CRD has spec.suspend")
	assert.Equal(t, Of(PermGet)|Of(PermPatch), stopNeeds())
	assert.Equal(t, "patch", service.StopVerb())
	assert.Equal(t, "patch", service.StartVerb())
	stopped := Summary{Name: "s", Kind: "RayService", Type: TypeInstance, Status: StatusStopped}
	n := service.Possible(&stopped)
	start, _ := n.Of(ActionStart)
	assert.Equal(t, Of(PermGet)|Of(PermPatch), start)

	assert.Equal(t, []string{FieldServiceSuspend}, kinds.Declared().Set(map[string]bool{}), "the CRD went back to v1.6's")
	assert.False(t, service.Suspendable(u))
}

// An object a delete was accepted for stays while finalizers hold it (KubeRay v1.6.2 adds
// ray.io/rayservice-finalizer to a RayService, rayservice_controller.go; v1.7.0 keeps it): its summary
// says since when it is being deleted.
func TestSummaryOfAnObjectBeingDeleted(t *testing.T) {
	k := rayServiceKind(&Declared{})
	o := &unstructured.Unstructured{Object: m{"apiVersion": "ray.io/v1", "kind": "RayService",
		"metadata": m{"name": "s", "namespace": "n", "finalizers": l{"ray.io/rayservice-finalizer"},
			"deletionTimestamp": "2026-12-06T10:00:00Z"}, "spec": m{}}}
	s := k.Summarize(o)
	require.NotNil(t, s.DeletingSince)
	assert.Equal(t, time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), *s.DeletingSince)
	o.SetDeletionTimestamp(nil)
	assert.Nil(t, k.Summarize(o).DeletingSince)
}

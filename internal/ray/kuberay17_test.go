package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// KubeRay v1.7.0 renamed the reason of a RayService's RollbackInProgress condition: v1.6.2 writes
// TargetClusterChanged (ray-project/kuberay ray-operator/controllers/ray/rayservice_controller.go:2079
// reconcileRollbackState, apis/ray/v1/rayservice_types.go:222), v1.7.0 DesiredClusterSpecChanged, with
// one message when the spec was set back to the active cluster's and another when it changed to a third
// (rayservice_controller.go:2348 and :2371, apis/ray/v1/rayservice_types.go:233). Each is RollingBack, with
// the condition's reason and message as the health's, since the condition turned True.
func TestRayServiceRollbackUnderBothReasonNames(t *testing.T) {
	k := rayServiceKind()
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

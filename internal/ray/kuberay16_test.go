package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A RayService's incremental upgrade (KubeRay v1.6, apis/ray/v1/rayservice_types.go): the status says
// Upgrading, or RollingBack while RollbackInProgress is True, and the summary shows each cluster's
// target capacity and share of traffic, with the condition's reason as the health's.
func TestRayServiceRollout(t *testing.T) {
	k := rayServiceKind(&Declared{})
	pct := func(n int64) *int64 { return &n }
	status := m{
		"conditions": l{cond("Ready", "True", "NonZeroServeEndpoints"), cond("UpgradeInProgress", "True", "BothActivePendingClustersExist")},
		"activeServiceStatus": m{"rayClusterName": "svc-a", "targetCapacity": int64(70), "trafficRoutedPercent": int64(80),
			"lastTrafficMigratedTime": "2026-12-03T05:00:00Z"},
		"pendingServiceStatus": m{"rayClusterName": "svc-b", "targetCapacity": int64(30), "trafficRoutedPercent": int64(20)},
	}
	spec := m{"upgradeStrategy": m{"type": "NewClusterWithIncrementalUpgrade",
		"clusterUpgradeOptions": m{"gatewayClassName": "istio", "stepSizePercent": int64(10), "intervalSeconds": int64(30)}}}
	s := k.Summarize(obj(spec, status))
	assert.Equal(t, StatusUpgrading, s.Status)
	assert.Equal(t, "NewClusterWithIncrementalUpgrade", s.UpgradeStrategy)
	require.Len(t, s.Rollout, 2)
	assert.Equal(t, RolloutCluster{Role: "active", Cluster: "svc-a", TargetCapacity: pct(70), TrafficPercent: pct(80),
		LastTrafficMigrated: s.Rollout[0].LastTrafficMigrated}, s.Rollout[0])
	require.NotNil(t, s.Rollout[0].LastTrafficMigrated)
	assert.Equal(t, RolloutCluster{Role: "pending", Cluster: "svc-b", TargetCapacity: pct(30), TrafficPercent: pct(20)}, s.Rollout[1])
	assert.Equal(t, "BothActivePendingClustersExist", s.Health.Reason)

	rollback := cond("RollbackInProgress", "True", "TargetClusterChanged")
	rollback["message"] = "Goal state changed mid-upgrade, rolling back to original cluster."
	status["conditions"] = append(status["conditions"].(l), rollback)
	s = k.Summarize(obj(spec, status))
	assert.Equal(t, StatusRollingBack, s.Status)
	assert.Equal(t, "TargetClusterChanged", s.Health.Reason)
	assert.Contains(t, s.Health.Message, "rolling back")
	needs := k.Possible(&s)
	_, logs := needs.Of(ActionLogs)
	_, dashboard := needs.Of(ActionDashboard)
	assert.True(t, logs && dashboard, "a rolling-back service serves: its logs and dashboard are there")

	// A NewCluster upgrade reports no capacities: no rollout is shown.
	s = k.Summarize(obj(nil, m{"activeServiceStatus": m{"rayClusterName": "svc-a"}}))
	assert.Empty(t, s.Rollout)
	assert.Empty(t, s.UpgradeStrategy)
}

// A RayJob's deletion rules and pre-running deadline (KubeRay v1.6, apis/ray/v1/rayjob_types.go) are in
// its summary; a deadline passed is its failure's reason.
func TestRayJobDeletionRulesAndDeadline(t *testing.T) {
	k := rayJobKind()
	spec := m{"preRunningDeadlineSeconds": int64(600), "deletionStrategy": m{"deletionRules": l{
		m{"policy": "DeleteWorkers", "condition": m{"jobStatus": "FAILED", "ttlSeconds": int64(30)}},
		m{"policy": "DeleteCluster", "condition": m{"jobDeploymentStatus": "Failed", "ttlSeconds": int64(60)}},
		m{"policy": "DeleteSelf", "condition": m{"jobStatus": "SUCCEEDED"}},
	}}}
	s := k.Summarize(obj(spec, m{"jobDeploymentStatus": "Failed", "reason": "PreRunningDeadlineExceeded",
		"message": "The RayJob has passed the preRunningDeadlineSeconds. StartTime: 2026-12-03 05:00:00 +0000 UTC. PreRunningDeadlineSeconds: 600"}))
	require.NotNil(t, s.PreRunningDeadlineSeconds)
	assert.Equal(t, int64(600), *s.PreRunningDeadlineSeconds)
	assert.Equal(t, []DeletionRule{{"DeleteWorkers", "FAILED", 30}, {"DeleteCluster", "Failed", 60}, {"DeleteSelf", "SUCCEEDED", 0}}, s.DeletionRules)
	assert.Equal(t, StatusFailed, s.Status)
	assert.Equal(t, "PreRunningDeadlineExceeded", s.Health.Reason)
	assert.Contains(t, s.Health.Message, "preRunningDeadlineSeconds")

	legacy := m{"ttlSecondsAfterFinished": int64(90), "deletionStrategy": m{"onSuccess": m{"policy": "DeleteCluster"}, "onFailure": m{"policy": "DeleteNone"}}}
	s = k.Summarize(obj(legacy, nil))
	assert.Equal(t, []DeletionRule{{"DeleteCluster", "SUCCEEDED", 90}, {"DeleteNone", "FAILED", 90}}, s.DeletionRules)
	s = k.Summarize(obj(nil, nil))
	assert.Nil(t, s.DeletionRules)
	assert.Nil(t, s.PreRunningDeadlineSeconds)
}

package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray/raytest"
)

// cronJob is a RayCronJob as KubeRay v1.6's sample (config/samples/ray-cronjob.sample.yaml) has it, its
// job template running on the test cluster's spec.
func cronJob(t *testing.T, schedule string, suspend bool, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCronJob",
		"metadata": map[string]any{"name": "nightly", "namespace": "team"},
		"spec": map[string]any{"schedule": schedule, "suspend": suspend, "jobTemplate": map[string]any{
			"entrypoint": "python /home/ray/samples/sample_code.py", "shutdownAfterJobFinishes": true,
			"ttlSecondsAfterFinished": int64(600), "rayClusterSpec": raytest.Cluster(t).Object["spec"]}}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// A RayCronJob schedules (Running) unless suspended (Stopped); a schedule the operator's parser refuses
// is Failed with the parser's reason; its summary carries the schedule, the last run's time and, from its
// job template, what each run's cluster requests.
func TestRayCronJobSummary(t *testing.T) {
	k := rayCronJobKind()
	k.check()
	s := k.Summarize(cronJob(t, "* * * * *", false, map[string]any{"lastScheduleTime": "2026-12-03T08:00:00Z"}))
	assert.Equal(t, StatusRunning, s.Status)
	require.NotNil(t, s.Schedule)
	assert.Equal(t, "* * * * *", s.Schedule.Expression)
	assert.Empty(t, s.Schedule.Error)
	require.NotNil(t, s.Schedule.LastScheduled)
	assert.Equal(t, time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), s.Schedule.LastScheduled.UTC())
	assert.Positive(t, s.Requested.CPU, "a run's cluster, from the job template")
	assert.Empty(t, k.Clusters(&s), "it runs on no cluster of its own")
	assert.True(t, k.Active(s.Status))

	s = k.Summarize(cronJob(t, "* * * * *", true, nil))
	assert.Equal(t, StatusStopped, s.Status, "suspended")
	assert.False(t, k.Active(s.Status))

	s = k.Summarize(cronJob(t, "61 * * * *", false, nil))
	assert.Equal(t, StatusFailed, s.Status)
	assert.Contains(t, s.Schedule.Error, "61", "the parser names what it refused")
	assert.Equal(t, InvalidScheduleReason, s.Health.Reason)
}

// The next run times are the schedule's, as robfig/cron/v3 (the operator's parser) reads it: five
// fields, descriptors and a time zone prefix.
func TestNextRuns(t *testing.T) {
	at := time.Date(2026, 12, 3, 8, 0, 30, 0, time.UTC)
	assert.Equal(t, []time.Time{at.Truncate(time.Minute).Add(time.Minute), at.Truncate(time.Minute).Add(2 * time.Minute),
		at.Truncate(time.Minute).Add(3 * time.Minute)}, NextRuns("* * * * *", at, 3))
	assert.Equal(t, []time.Time{time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}, NextRuns("@daily", at, 1))
	assert.Equal(t, []time.Time{time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)}, NextRuns("CRON_TZ=Asia/Shanghai 0 1 * * *", at, 1),
		"01:00 in Shanghai is 17:00 UTC")
	assert.Empty(t, NextRuns("not a schedule", at, 3))
	assert.Empty(t, NextRuns("0 0 30 2 *", at, 3), "30 February never comes")
}

// The next runs are given at answer time, on a copy: the cached summary keeps none.
func TestRayCronJobNextRunsAtAnswer(t *testing.T) {
	k := rayCronJobKind()
	cached := k.Summarize(cronJob(t, "*/10 * * * *", false, nil))
	answer := cached
	now := time.Date(2026, 12, 3, 8, 5, 0, 0, time.UTC)
	k.AtAnswer(&answer, now)
	require.Len(t, answer.Schedule.NextRuns, NextRunsShown)
	assert.Equal(t, time.Date(2026, 12, 3, 8, 10, 0, 0, time.UTC), answer.Schedule.NextRuns[0])
	assert.Empty(t, cached.Schedule.NextRuns, "the cached summary is not changed")

	suspended := k.Summarize(cronJob(t, "*/10 * * * *", true, nil))
	k.AtAnswer(&suspended, now)
	assert.Empty(t, suspended.Schedule.NextRuns, "none while suspended")
}

// A run made now is the RayJob the operator would make at a scheduled time: named with the suffix,
// labelled, annotated, owned by the RayCronJob, its spec the job template.
func TestRayCronJobRun(t *testing.T) {
	k := rayCronJobKind()
	o := cronJob(t, "* * * * *", true, nil)
	o.SetUID("u-cron")
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	run := k.NewRun(o, now, "abcde")
	assert.Equal(t, "nightly-abcde", run.GetName())
	assert.Equal(t, "team", run.GetNamespace())
	assert.Equal(t, "RayJob", run.GetKind())
	assert.Equal(t, map[string]string{RunOfLabel: "nightly"}, run.GetLabels())
	assert.Equal(t, "2026-12-03T09:00:00Z", run.GetAnnotations()[ScheduledAtAnnotation])
	owners := run.GetOwnerReferences()
	require.Len(t, owners, 1)
	assert.Equal(t, "RayCronJob", owners[0].Kind)
	assert.EqualValues(t, "u-cron", owners[0].UID)
	assert.True(t, *owners[0].Controller)
	entry, _, _ := unstructured.NestedString(run.Object, "spec", "entrypoint")
	assert.Equal(t, "python /home/ray/samples/sample_code.py", entry)
	assert.LessOrEqual(t, len(run.GetName()), 47, "within a RayJob's name limit")
	assert.Equal(t, 41, k.MaxNameLength)
}

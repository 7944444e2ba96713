package ray

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	k := rayCronJobKind(&Declared{})
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
	k := rayCronJobKind(&Declared{})
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
	k := rayCronJobKind(&Declared{})
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
	assert.Equal(t, 36, k.MaxNameLength, "v1.7's limit, on v1.6 too")

	// Where the CRD declares spec.timeZone (KubeRay v1.7), the run is named as v1.7 names its runs:
	// <name>-<Unix minutes> (raycronjob_controller.go:160-168); 2026-12-03T09:00:00Z is minute 29,938,140.
	declared := &Declared{}
	declared.Set(map[string]bool{FieldCronTimeZone: true})
	v17 := rayCronJobKind(declared)
	run = v17.NewRun(o, now.Add(59*time.Second), "abcde")
	assert.Equal(t, "nightly-29938140", run.GetName())
	long := strings.Repeat("n", 36) + "-" + strconv.FormatInt(time.Date(2286, 11, 20, 17, 46, 0, 0, time.UTC).Unix()/60, 10)
	assert.LessOrEqual(t, len(long), 47, "36 characters and ten digits of minutes fit a RayJob's name")
}

// KubeRay v1.7's spec.timeZone: the schedule is read in that zone (next runs, and the ticks the runs
// are judged by), and the summary names it; a schedule that names its own zone is refused there with
// v1.7's message (utils/validation.go:976), as is a zone it cannot load, while v1.6 reads CRON_TZ.
func TestRayCronJobTimeZone(t *testing.T) {
	declared := &Declared{}
	declared.Set(map[string]bool{FieldCronTimeZone: true})
	k := rayCronJobKind(declared)
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	o := cronJob(t, "0 9 * * *", false, nil)
	require.NoError(t, unstructured.SetNestedField(o.Object, "Asia/Shanghai", "spec", "timeZone"))
	s := k.Summarize(o)
	assert.Equal(t, StatusRunning, s.Status)
	assert.Equal(t, "Asia/Shanghai", s.Schedule.TimeZone)
	assert.Equal(t, "0 9 * * *", s.Schedule.Expression)
	k.AtAnswer(&s, now)
	assert.Equal(t, []time.Time{time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC), time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)}, s.Schedule.NextRuns, "09:00 in Shanghai is 01:00 UTC")

	for zone, want := range map[string]string{"": "timeZone must not be empty string", "Mars/Olympus": "invalid time zone: unknown time zone Mars/Olympus"} {
		require.NoError(t, unstructured.SetNestedField(o.Object, zone, "spec", "timeZone"))
		s := k.Summarize(o)
		assert.Equal(t, StatusFailed, s.Status, zone)
		assert.Contains(t, s.Schedule.Error, want)
	}

	tz := cronJob(t, "CRON_TZ=Asia/Shanghai 0 9 * * *", false, nil)
	s = k.Summarize(tz)
	assert.Equal(t, StatusFailed, s.Status, "v1.7 refuses a zone in the schedule")
	assert.Equal(t, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead", s.Schedule.Error)
	v16 := rayCronJobKind(&Declared{})
	s = v16.Summarize(tz)
	assert.Equal(t, StatusRunning, s.Status, "v1.6 reads it")
	assert.Equal(t, "Asia/Shanghai", s.Schedule.TimeZone)
	v16.AtAnswer(&s, now)
	require.NotEmpty(t, s.Schedule.NextRuns)
	assert.Equal(t, time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC), s.Schedule.NextRuns[0])
}

// A RayJob is a RayCronJob's run as KubeRay makes them (RunOf: its controlling owner reference, label
// and tick), and backed by the RayCronJob (Scheduled) only where its tick is one of the schedule's after
// the RayCronJob was made, no later than status.lastScheduleTime, and it was made at that tick or up to
// ScheduledRunGrace after; the time zone spec.timeZone names (KubeRay v1.7) moves the ticks.
func TestRayCronJobScheduledRun(t *testing.T) {
	k := rayCronJobKind(&Declared{})
	made := time.Date(2026, 12, 3, 8, 30, 20, 0, time.UTC)
	tick := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	o := cronJob(t, "*/15 * * * *", false, map[string]any{"lastScheduleTime": tick.Format(time.RFC3339)})
	o.SetUID("u-cron")
	o.SetCreationTimestamp(metav1.NewTime(made))
	f := CronJobFactsOf(o)
	at := func(scheduled, created time.Time) *CronRun {
		run := k.NewRun(o, scheduled, "abcde")
		run.SetCreationTimestamp(metav1.NewTime(created))
		return RunOf(run)
	}
	require.NotNil(t, at(tick, tick))
	assert.Equal(t, CronRun{CronJob: "nightly", UID: "u-cron", ScheduledAt: tick, Created: tick}, *at(tick, tick))
	assert.True(t, f.Scheduled(at(tick, tick.Add(time.Second))), "KubeRay's run of the last tick")
	assert.True(t, f.Scheduled(at(tick.Add(-15*time.Minute), tick.Add(-15*time.Minute))), "of an earlier tick")
	for what, run := range map[string]*CronRun{
		"made before its tick":                 at(tick, tick.Add(-time.Second)),
		"made long after its tick":             at(tick, tick.Add(ScheduledRunGrace+time.Second)),
		"on no tick":                           at(tick.Add(-time.Minute), tick.Add(-time.Minute)),
		"of a tick the status has not reached": at(tick.Add(15*time.Minute), tick.Add(15*time.Minute)),
		"of a tick before the RayCronJob":      at(tick.Add(-30*time.Minute), tick.Add(-30*time.Minute)),
		"none":                                 nil,
	} {
		assert.False(t, f.Scheduled(run), what)
	}
	other := *at(tick, tick)
	other.UID = "u-other"
	assert.False(t, f.Scheduled(&other), "of a RayCronJob of the same name made again")

	// Not a run: without the owner reference, one that is not the controller, or a label of another name.
	run := k.NewRun(o, tick, "abcde")
	run.SetOwnerReferences(nil)
	assert.Nil(t, RunOf(run))
	run = k.NewRun(o, tick, "abcde")
	run.SetLabels(map[string]string{RunOfLabel: "other"})
	assert.Nil(t, RunOf(run))
	run = k.NewRun(o, tick, "abcde")
	no := false
	refs := run.GetOwnerReferences()
	refs[0].Controller = &no
	run.SetOwnerReferences(refs)
	assert.Nil(t, RunOf(run))

	// In a time zone of its own: 9:00 UTC is no tick of "0 9 * * *" in Asia/Shanghai, but of "0 17 * * *".
	require.NoError(t, unstructured.SetNestedField(o.Object, "Asia/Shanghai", "spec", "timeZone"))
	for schedule, want := range map[string]bool{"0 9 * * *": false, "0 17 * * *": true} {
		require.NoError(t, unstructured.SetNestedField(o.Object, schedule, "spec", "schedule"))
		assert.Equal(t, want, CronJobFactsOf(o).Scheduled(at(tick, tick)), schedule)
	}
}

// A RayJob's status names the cluster KubeRay made for it, unless it runs on one its selector names; a
// RayService's names its active and pending clusters.
func TestMadeClusters(t *testing.T) {
	job := rayJobKind()
	o := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"rayClusterName": "train-x1"}}}
	assert.Equal(t, []string{"train-x1"}, job.MadeClusters(o))
	o.Object["spec"] = map[string]any{"clusterSelector": map[string]any{"ray.io/cluster": "train-x1"}}
	assert.Empty(t, job.MadeClusters(o), "a cluster it selects is none it made")
	svc := rayServiceKind(&Declared{})
	o = &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"activeServiceStatus": map[string]any{"rayClusterName": "a"},
		"pendingServiceStatus": map[string]any{"rayClusterName": "b"}}}}
	assert.Equal(t, []string{"a", "b"}, svc.MadeClusters(o))
	delete(o.Object["status"].(map[string]any), "pendingServiceStatus")
	assert.Equal(t, []string{"a"}, svc.MadeClusters(o))
	assert.Empty(t, rayClusterKind().MadeClusters(o), "a RayCluster makes none")
	assert.True(t, Names([]string{"a"}, "a"))
	assert.False(t, Names([]string{"a"}, ""))
	assert.False(t, Names(nil, "a"))
}

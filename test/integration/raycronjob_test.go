//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type cronSummary struct {
	Status  string   `json:"status"`
	Actions []string `json:"actions"`
	Health  health   `json:"health"`
	Runs    struct {
		Total, Active   int
		Last, LastEnded *struct {
			Name, Status    string
			DurationSeconds *float64
		}
	} `json:"runs"`
	Schedule struct {
		Expression    string      `json:"expression"`
		LastScheduled *time.Time  `json:"lastScheduled"`
		NextRuns      []time.Time `json:"nextRuns"`
	} `json:"schedule"`
}

// KubeRay's own sample RayCronJob (config/samples/ray-cronjob.sample.yaml of the operator the stack runs,
// every minute), made through the service: it is listed and shown with its schedule, the operator makes
// its runs (RayJobs labelled ray.io/cronjob-name), which its runs route and the RayJob list stream show;
// run now adds one as the operator would; stop suspends it (no run for more than a minute) and start
// resumes it (a run on schedule follows); deleted, the history keeps it and its runs.
func TestRayCronJobOnSchedule(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "cron")
	admin := env.tokens["admin"]
	ctx := context.Background()
	file, err := os.ReadFile(filepath.Join(kuberayDir(t), "config", "samples", "ray-cronjob.sample.yaml"))
	require.NoError(t, err)
	var sample []byte // the RayCronJob; the file's other document is the ConfigMap of its code
	for _, u := range sampleObjects(t, file) {
		if u.GetKind() == "RayCronJob" {
			sample, err = u.MarshalJSON()
			require.NoError(t, err)
		}
	}
	require.NotNil(t, sample)
	const name = "raycronjob-sample"
	_, runsStream := openWatch(t, env.serviceURL, watchPath(ns, "rayjobs"), admin, "")
	runsStream.snapshot(t)

	r := call(t, "POST", nsPath(ns, "raycronjobs"), admin, "application/json", sample)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	detail := func() cronSummary {
		t.Helper()
		return decode[cronSummary](t, call(t, "GET", itemPath(ns, "raycronjobs", name), admin, "", nil))
	}
	d := detail()
	assert.Equal(t, "Running", d.Status, "it schedules")
	assert.Equal(t, "* * * * *", d.Schedule.Expression)
	if assert.Len(t, d.Schedule.NextRuns, 3, "the next three runs") {
		assert.WithinDuration(t, time.Now(), d.Schedule.NextRuns[0], 61*time.Second)
		assert.Equal(t, time.Minute, d.Schedule.NextRuns[1].Sub(d.Schedule.NextRuns[0]))
	}
	assert.Contains(t, d.Actions, "stop")
	assert.NotContains(t, d.Actions, "logs", "it runs no pods itself")
	l := decode[listData](t, call(t, "GET", nsPath(ns, "raycronjobs"), admin, "", nil))
	assert.Equal(t, 1, l.Total)

	runsOf := func(cron string) []string {
		t.Helper()
		list, err := env.adminDyn.Resource(rayJobs).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cronjob-name=" + cron})
		require.NoError(t, err)
		var out []string
		for _, j := range list.Items {
			out = append(out, j.GetName())
		}
		return out
	}
	runs := func() []string { t.Helper(); return runsOf(name) }
	eventually(t, 90*time.Second, "the first run on schedule", func() bool { return len(runs()) > 0 })
	first := runs()[0]
	runsStream.until(t, 30*time.Second, "the run on the RayJob list stream", func(ev sseEvent) bool {
		return ev.Name == "ADDED" && ev.summary(t).Name == first
	})
	assert.True(t, strings.HasPrefix(first, name+"-"), "named as the operator names its runs: %s", first)
	eventually(t, 10*time.Second, "the last schedule time", func() bool { return detail().Schedule.LastScheduled != nil })
	listed := decode[listData](t, call(t, "GET", itemPath(ns, "raycronjobs", name)+"/runs", admin, "", nil))
	require.GreaterOrEqual(t, listed.Total, 1)
	var names []string
	for i, it := range listed.Items {
		names = append(names, it.Name)
		if i > 0 {
			assert.False(t, it.CreatedAt.After(listed.Items[i-1].CreatedAt), "newest first")
		}
	}
	assert.Contains(t, names, first, "its runs")

	// Run now: a RayJob as the operator makes its runs, among the runs, on the stream.
	r = call(t, "POST", itemPath(ns, "raycronjobs", name)+"/run", admin, "", nil)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	made := decode[summary](t, r)
	assert.Equal(t, "RayJob", made.Kind)
	assert.True(t, strings.HasPrefix(made.Name, name+"-"), made.Name)
	run, err := env.adminDyn.Resource(rayJobs).Namespace(ns).Get(ctx, made.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, name, run.GetLabels()["ray.io/cronjob-name"])
	assert.NotEmpty(t, run.GetAnnotations()["ray.io/cronjob-scheduled-timestamp"])
	if owners := run.GetOwnerReferences(); assert.Len(t, owners, 1) {
		assert.Equal(t, "RayCronJob", owners[0].Kind)
		assert.True(t, *owners[0].Controller)
	}
	runsStream.until(t, 30*time.Second, "the run made now on the stream", func(ev sseEvent) bool {
		return ev.Name == "ADDED" && ev.summary(t).Name == made.Name
	})
	eventually(t, 10*time.Second, "the run made now among the runs", func() bool {
		l := decode[listData](t, call(t, "GET", itemPath(ns, "raycronjobs", name)+"/runs?search="+made.Name, admin, "", nil))
		return l.Total == 1 && l.Items[0].Name == made.Name
	})
	// The scheduled runs and the one made now run at once (none ends by itself on the stack): they
	// pile up, which the health says.
	eventually(t, 30*time.Second, "runs piling up", func() bool {
		d := detail()
		return d.Runs.Active >= 2 && d.Health.Reason == "RunsPilingUp"
	})
	d = detail()
	assert.Equal(t, "Degraded", d.Health.State)
	assert.Contains(t, d.Actions, "run", "run now is allowed")
	assert.Contains(t, d.Health.Message, made.Name)
	o := decode[overviewData](t, call(t, "GET", "/rest/ray/v1/overview?namespace="+ns, admin, "", nil))
	if assert.NotNil(t, o.Counts.RayCronJobs.RunsActive) {
		assert.GreaterOrEqual(t, *o.Counts.RayCronJobs.RunsActive, 2, "the overview counts its active runs")
	}
	// The first run fails (the test writes its end as the operator writes a failed RayJob's status):
	// the last outcome, which the health names and a list filters by.
	endRun(t, ns, first, "Failed", "FAILED")
	eventually(t, 30*time.Second, "the last run failed", func() bool {
		d := detail()
		return d.Health.Reason == "LastRunFailed" && d.Runs.LastEnded != nil && d.Runs.LastEnded.Name == first
	})
	d = detail()
	assert.Equal(t, "Failed", d.Runs.LastEnded.Status)
	if assert.NotNil(t, d.Runs.LastEnded.DurationSeconds) {
		assert.GreaterOrEqual(t, *d.Runs.LastEnded.DurationSeconds, 0.0, "from its start to the end written")
	}
	assert.Contains(t, d.Health.Message, "run "+first+" failed")
	for outcome, want := range map[string]int{"Failed": 1, "Succeeded": 0, "none": 0} {
		l := decode[listData](t, call(t, "GET", nsPath(ns, "raycronjobs")+"?lastOutcome="+outcome, admin, "", nil))
		assert.Equal(t, want, l.Total, "lastOutcome=%s", outcome)
	}
	r = call(t, "GET", nsPath(ns, "raycronjobs")+"?lastOutcome=Maybe", admin, "", nil)
	assert.Equal(t, 400, r.Status)
	assert.Contains(t, string(r.Raw), "lastOutcome")

	// The list stream gives the next runs from the time of each event, as the list does.
	_, cronStream := openWatch(t, env.serviceURL, watchPath(ns, "raycronjobs"), admin, "")
	ev := cronStream.next(t, 30*time.Second)
	require.Equal(t, "ADDED", ev.Name)
	var item cronSummary
	require.NoError(t, json.Unmarshal(ev.Data, &item))
	if assert.Len(t, item.Schedule.NextRuns, 3, "next runs on the stream") {
		assert.WithinDuration(t, time.Now(), item.Schedule.NextRuns[0], 61*time.Second)
	}

	r = call(t, "POST", itemPath(ns, "rayclusters", "none")+"/run", admin, "", nil)
	assert.Equal(t, 404, r.Status, "%s", r.Raw)

	// A second RayCronJob on the same schedule, never suspended, made outside the service: its runs are
	// the operator's ticks, which the check of the stopped one waits for. Its runs are made suspended
	// (they start no Ray cluster).
	const ticker = "raycronjob-ticker"
	var tick map[string]any
	require.NoError(t, json.Unmarshal(sample, &tick))
	tick["metadata"] = map[string]any{"name": ticker}
	tick["spec"].(map[string]any)["jobTemplate"].(map[string]any)["suspend"] = true
	_, err = env.adminDyn.Resource(rayCronJobs).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: tick}, metav1.CreateOptions{})
	require.NoError(t, err)

	r = call(t, "POST", itemPath(ns, "raycronjobs", name)+"/stop", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	eventually(t, 10*time.Second, "Stopped", func() bool { return detail().Status == "Stopped" })
	got, err := env.adminDyn.Resource(rayCronJobs).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, true, got.Object["spec"].(map[string]any)["suspend"])
	before := len(runs())
	// Two periods of the schedule, as the issue asks, told by the operator itself: two runs of the ticker
	// made since the stop, the second a period after the first, at which the stopped one was due too.
	ticks := len(runsOf(ticker))
	eventually(t, 5*time.Minute, "two runs of "+ticker+" on schedule since the stop", func() bool { return len(runsOf(ticker)) >= ticks+2 })
	assert.Len(t, runs(), before, "no run while suspended")
	require.NoError(t, env.adminDyn.Resource(rayCronJobs).Namespace(ns).Delete(ctx, ticker, metav1.DeleteOptions{}))
	r = call(t, "POST", itemPath(ns, "raycronjobs", name)+"/run", admin, "", nil)
	assert.Equal(t, 201, r.Status, "run now runs while suspended too: %s", r.Raw)

	suspended := len(runs()) // with the one run now
	r = call(t, "POST", itemPath(ns, "raycronjobs", name)+"/start", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	eventually(t, 10*time.Second, "Running again", func() bool { return detail().Status == "Running" })
	eventually(t, 90*time.Second, "a run on schedule once resumed", func() bool { return len(runs()) > suspended })

	r = call(t, "DELETE", itemPath(ns, "raycronjobs", name)+"?force=true", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	rec := recordOf(t, env.serviceURL, "raycronjobs", ns, name, "kept after delete", func(r historyRecord) bool { return r.DeletedAt != nil })
	assert.Equal(t, "RayCronJob", rec.Kind)
	statuses := rec.statuses()
	assert.Contains(t, statuses, "Running")
	assert.Contains(t, statuses, "Stopped", "the timeline: %v", statuses)
	// Its runs go with it (the garbage collector follows their owner reference); the history keeps them.
	kept := recordOf(t, env.serviceURL, "rayjobs", ns, first, "its run kept after delete", func(r historyRecord) bool { return r.DeletedAt != nil })
	assert.Equal(t, "RayJob", kept.Kind)
}

// endRun ends a run as the operator records a RayJob's end (status.jobDeploymentStatus, jobStatus,
// endTime), retrying on conflict with the operator's own writes.
func endRun(t *testing.T, ns, name, deployment, job string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 30*time.Second, "the end of "+name+" written", func() bool {
		u, err := env.adminDyn.Resource(rayJobs).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		if status == nil {
			status = map[string]any{}
		}
		now := time.Now().UTC()
		status["jobDeploymentStatus"], status["jobStatus"], status["endTime"] = deployment, job, now.Format(time.RFC3339)
		if status["startTime"] == nil {
			status["startTime"] = now.Add(-time.Second).Format(time.RFC3339)
		}
		u.Object["status"] = status
		_, err = env.adminDyn.Resource(rayJobs).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err == nil
	})
}

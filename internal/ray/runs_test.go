package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(name, status string, created time.Time, start, end *time.Time) *Summary {
	return &Summary{Name: name, Namespace: "team", Kind: "RayJob", Type: TypeInstance, Status: status, CreatedAt: created,
		StartTime: start, EndTime: end, Health: Health{State: HealthFailed, Reason: "DeadlineExceeded", Message: "ran past 60 s"}}
}

// A RayCronJob's summary counts its runs, names the newest and the last outcome with its duration, and
// its health says when the last run failed or runs pile up; suspended, it is Stopped whatever its runs.
func TestWithRuns(t *testing.T) {
	k := rayCronJobKind(&Declared{})
	base := k.Summarize(cronJob(t, "* * * * *", false, nil))
	at := func(m int) *time.Time { t := time.Date(2026, 12, 3, 8, m, 0, 0, time.UTC); return &t }

	none := k.WithRuns(&base, nil)
	require.NotNil(t, none.Runs)
	assert.Zero(t, none.Runs.Total)
	assert.Equal(t, OutcomeNone, none.LastOutcome())
	assert.Equal(t, HealthHealthy, none.Health.State)
	assert.Nil(t, base.Runs, "the base is not changed")

	ok := run("nightly-aaaaa", StatusSucceeded, *at(0), at(0), at(1))
	failed := run("nightly-bbbbb", StatusFailed, *at(1), at(1), at(3))
	running := run("nightly-ccccc", StatusRunning, *at(2), at(2), nil)
	s := k.WithRuns(&base, []*Summary{ok, running, failed})
	assert.Equal(t, 3, s.Runs.Total)
	assert.Equal(t, 1, s.Runs.Active)
	assert.Equal(t, "nightly-ccccc", s.Runs.Last.Name, "the newest run")
	assert.Nil(t, s.Runs.Last.DurationSeconds, "it has not ended")
	require.NotNil(t, s.Runs.LastEnded)
	assert.Equal(t, "nightly-bbbbb", s.Runs.LastEnded.Name)
	assert.InDelta(t, 120.0, *s.Runs.LastEnded.DurationSeconds, 0.001)
	assert.Equal(t, StatusFailed, s.LastOutcome())
	assert.Equal(t, HealthDegraded, s.Health.State)
	assert.Equal(t, ReasonLastRunFailed, s.Health.Reason)
	assert.Equal(t, "run nightly-bbbbb failed: DeadlineExceeded: ran past 60 s", s.Health.Message)
	assert.Equal(t, at(3), s.Health.Since)

	piling := run("nightly-ddddd", StatusRunning, *at(3), at(3), nil)
	s = k.WithRuns(&base, []*Summary{ok, running, piling})
	assert.Equal(t, StatusSucceeded, s.LastOutcome())
	assert.Equal(t, ReasonRunsPilingUp, s.Health.Reason)
	assert.Contains(t, s.Health.Message, "2 runs are active at once (nightly-ddddd, nightly-ccccc)")

	suspended := k.Summarize(cronJob(t, "* * * * *", true, nil))
	s = k.WithRuns(&suspended, []*Summary{failed})
	assert.Equal(t, HealthStopped, s.Health.State)
	assert.Equal(t, StatusFailed, s.LastOutcome())

	other := rayJobKind()
	job := other.Summarize(cronJob(t, "* * * * *", false, nil))
	assert.Same(t, &job, other.WithRuns(&job, []*Summary{ok}), "a kind that makes no runs is left as it is")
	assert.Empty(t, job.LastOutcome())
}

// "run" is allowed on a RayCronJob, suspended or not, to whoever may get it and create RayJobs there.
func TestRunNowAction(t *testing.T) {
	k := rayCronJobKind(&Declared{})
	for _, suspend := range []bool{false, true} {
		s := k.Summarize(cronJob(t, "* * * * *", suspend, nil))
		n := k.Possible(&s)
		need, ok := n.Of(ActionRun)
		require.True(t, ok)
		assert.Equal(t, Of(PermGet, PermRunCreate), need)
		assert.Contains(t, n.Allowed(Of(PermGet, PermRunCreate)), ActionRun)
		assert.NotContains(t, n.Allowed(Of(PermGet, PermCreate, PermPatch)), ActionRun, "creating RayCronJobs is not creating RayJobs")
	}
	a := k.Attributes(PermRunCreate, "team")
	assert.Equal(t, "create", a.Verb)
	assert.Equal(t, "ray.io", a.Group)
	assert.Equal(t, "rayjobs", a.Resource)
	assert.Equal(t, "team", a.Namespace)
	job := rayJobKind().Summarize(cronJob(t, "* * * * *", false, nil))
	jn := rayJobKind().Possible(&job)
	_, ok := jn.Of(ActionRun)
	assert.False(t, ok, "a RayJob has no run now")
}

// A schedule's time zone prefix is named, and one without is read in UTC whatever the process's zone.
func TestScheduleTimeZone(t *testing.T) {
	k := rayCronJobKind(&Declared{})
	s := k.Summarize(cronJob(t, "CRON_TZ=Asia/Shanghai 0 1 * * *", false, nil))
	assert.Equal(t, "Asia/Shanghai", s.Schedule.TimeZone)
	assert.Equal(t, StatusRunning, s.Status)
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	at := time.Date(2026, 12, 3, 8, 0, 30, 0, shanghai)
	assert.Equal(t, []time.Time{time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}, NextRuns("0 0 * * *", at, 1), "midnight UTC")
}

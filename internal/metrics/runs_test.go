package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"ray-service/internal/ray"
)

// Each RayCronJob's runs are exposed as the schedules panel reads them: how many, how many active, and
// whether the last that ended failed.
func TestRunsCollector(t *testing.T) {
	states := func(visit func(kind, namespace, name string, runs *ray.RunsState)) {
		visit("RayCronJob", "team", "nightly", &ray.RunsState{Total: 3, Active: 2,
			LastEnded: &ray.RunOutcome{Name: "nightly-abcde", Status: ray.StatusFailed}})
		visit("RayCronJob", "team", "hourly", &ray.RunsState{Total: 0})
	}
	want := `
# HELP ray_service_runs Runs an object that makes runs (a RayCronJob) has now.
# TYPE ray_service_runs gauge
ray_service_runs{kind="RayCronJob",name="hourly",namespace="team"} 0
ray_service_runs{kind="RayCronJob",name="nightly",namespace="team"} 3
# HELP ray_service_runs_active Runs of an object that makes runs that are active (not stopped or ended).
# TYPE ray_service_runs_active gauge
ray_service_runs_active{kind="RayCronJob",name="hourly",namespace="team"} 0
ray_service_runs_active{kind="RayCronJob",name="nightly",namespace="team"} 2
# HELP ray_service_runs_last_failed 1 when the newest run that ended failed, else 0.
# TYPE ray_service_runs_last_failed gauge
ray_service_runs_last_failed{kind="RayCronJob",name="hourly",namespace="team"} 0
ray_service_runs_last_failed{kind="RayCronJob",name="nightly",namespace="team"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewRunsCollector(states), strings.NewReader(want)))
}

package promql

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/promql/promqltest"
)

// The panels' queries select the cluster by namespace and ray_io_cluster only, and nothing that is not
// a Kubernetes name reaches them.
func TestHealthExpressions(t *testing.T) {
	w := Window{Start: time.Unix(0, 0), End: time.Unix(600, 0), Step: 30 * time.Second}
	exprs, err := HealthExpressions("team", "demo", w)
	require.NoError(t, err)
	require.Len(t, exprs["gcsEventPressure"], 3, "Ray 2.50's histogram, the older gauge, the event loop's lag")
	assert.Equal(t, `max by () (ray_operation_queue_time_ms{namespace="team",ray_io_cluster="demo",Component="gcs_server"})`, exprs["gcsEventPressure"][1])
	assert.Equal(t, `histogram_quantile(0.99, sum by (le) (rate(ray_health_check_rpc_latency_ms_bucket{namespace="team",ray_io_cluster="demo"}[2m])))`,
		exprs["nodeHealthChecks"][0])
	assert.Contains(t, exprs["jobAPIPressure"][0], `submit_job|stop_job|delete_job`)
	assert.Len(t, exprs, 5, "four panels and the job API's breakdown")
	w.Step = 5 * time.Minute
	exprs, err = HealthExpressions("team", "demo", w)
	require.NoError(t, err)
	assert.Contains(t, exprs["dashboardPressure"][0], "[5m]", "the rate spans a step at least")
	for _, bad := range [][2]string{{`team"}`, "demo"}, {"team", `demo",x=~".*`}, {"", "demo"}} {
		_, err := HealthExpressions(bad[0], bad[1], w)
		assert.Error(t, err, "%q", bad)
	}
}

// The panels' PromQL, evaluated by Prometheus' own engine (promtool test rules), on what each
// generation of Ray exports, scraped each way a PodMonitor does:
//   - "current": Ray 2.50 and later, a PodMonitor without honorLabels (KubeRay's): the main loop's
//     queueing-time histogram beside another io_context's, the dashboard's handler names in
//     exported_endpoint (endpoint is the port's name), a log stream that must not count;
//   - "older": Ray 2.49 and before with RAY_event_stats_metrics=1, honorLabels: the per-handler gauge,
//     the raylet's beside gcs_server's; handler names in endpoint;
//   - "lagonly": only the event loop's lag probe;
//   - "paths": a dashboard that labels the request path.
//
// Every observation of a histogram falls in one bucket, 10 per 15 s, so each quantile is exact.
func TestHealthPromQLAcrossRayGenerations(t *testing.T) {
	w := Window{Start: time.Unix(0, 0), End: time.Unix(480, 0), Step: 30 * time.Second}
	var series []map[string]string
	add := func(s, values string) { series = append(series, map[string]string{"series": s, "values": values}) }
	sel := func(c, extra string) string {
		return `namespace="team",ray_io_cluster="` + c + `",pod="` + c + `-head"` + extra
	}
	// histogram adds a histogram's cumulative buckets with 10 observations per sample in (lo, hi].
	histogram := func(name, labels string, _, hi float64) {
		for _, le := range []float64{0.01, 0.05, 0.075, 0.5, 0.75, 1, 10, 20, 40, math.Inf(1)} {
			v := "0x40"
			if le >= hi {
				v = "0+10x40"
			}
			leText := strconv.FormatFloat(le, 'f', -1, 64)
			if math.IsInf(le, 1) {
				leText = "+Inf"
			}
			add(name+"_bucket{"+labels+`,le="`+leText+`"}`, v)
		}
	}
	const dash = "ray_dashboard_api_requests_duration_seconds"
	// current
	add(`ray_operation_queue_time_ms_sum{`+sel("current", `,endpoint="metrics",Component="gcs_server",Name="gcs_server_main_io_context"`)+`}`, "0+300x40")
	add(`ray_operation_queue_time_ms_count{`+sel("current", `,endpoint="metrics",Component="gcs_server",Name="gcs_server_main_io_context"`)+`}`, "0+10x40")
	add(`ray_operation_queue_time_ms_sum{`+sel("current", `,endpoint="metrics",Component="gcs_server",Name="task_io_context"`)+`}`, "0+90000x40")
	add(`ray_operation_queue_time_ms_count{`+sel("current", `,endpoint="metrics",Component="gcs_server",Name="task_io_context"`)+`}`, "0+1x40")
	add(`ray_io_context_event_loop_lag_ms{`+sel("current", `,endpoint="metrics",Component="gcs_server",Name="gcs_server_main_io_context"`)+`}`, "3x40")
	histogram("ray_health_check_rpc_latency_ms", sel("current", `,endpoint="metrics",Component="gcs_server"`), 1, 10)
	for _, h := range []struct {
		name   string
		lo, hi float64
	}{{"submit_job", 0.5, 0.75}, {"get_job_info", 0.05, 0.075}, {"get_version", 0.005, 0.01}, {"tail_job_logs", 20, 40}} {
		histogram(dash, sel("current", `,endpoint="dash-metrics",exported_endpoint="`+h.name+`",http_status="2xx",Component="dashboard"`), h.lo, h.hi)
	}
	// older
	add(`ray_operation_queue_time_ms{`+sel("older", `,Component="gcs_server",Method="NodeInfoGcsService.grpc_server.GetAllNodeInfo"`)+`}`, "12x40")
	add(`ray_operation_queue_time_ms{`+sel("older", `,Component="gcs_server",Method="GcsInMemoryStore.Put"`)+`}`, "40x40")
	add(`ray_operation_queue_time_ms{`+sel("older", `,Component="raylet",Method="NodeManager.deadline_timer.debug_state_dump"`)+`}`, "99999x40")
	histogram(dash, sel("older", `,endpoint="stop_job",http_status="2xx",Component="dashboard"`), 0.05, 0.075)
	histogram(dash, sel("older", `,endpoint="delete_job",http_status="2xx",Component="dashboard"`), 0.5, 0.75)
	// lagonly, paths
	add(`ray_io_context_event_loop_lag_ms{`+sel("lagonly", `,Component="gcs_server",Name="gcs_server_main_io_context"`)+`}`, "7x40")
	add(`ray_io_context_event_loop_lag_ms{`+sel("lagonly", `,Component="raylet",Name="raylet_main_io_context"`)+`}`, "700x40")
	histogram(dash, sel("paths", `,endpoint="/api/jobs/raysubmit_1/stop",http_status="200"`), 0.5, 0.75)
	histogram(dash, sel("paths", `,endpoint="/api/jobs/raysubmit_1/logs/tail",http_status="200"`), 20, 40)

	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	var tests []map[string]any
	check := func(cluster, panel string, source int, want ...sample) {
		exprs, err := HealthExpressions("team", cluster, w)
		require.NoError(t, err)
		// Rounded to a millionth: the interpolation's last bits are not the test's.
		tests = append(tests, map[string]any{"expr": "round(1e6 * (" + exprs[panel][source] + ")) / 1e6", "eval_time": "8m", "exp_samples": want})
	}
	total := func(v float64) sample { return sample{Labels: "{}", Value: v} }
	// quantile is histogram_quantile's interpolation, to a millionth: q of n observations, before of
	// them below lo, in of them in (lo, hi].
	quantile := func(q, n, before, in, lo, hi float64) float64 {
		return math.Round(1e6*(lo+(hi-lo)*((q*n-before)/in))) / 1e6
	}
	method := func(m string, v float64) sample { return sample{Labels: fmt.Sprintf(`{method="%s"}`, m), Value: v} }
	check("current", "gcsEventPressure", 0, total(30)) // 300 ms over 10 events of the main loop
	check("current", "gcsEventPressure", 1)            // no gauge on Ray 2.50
	check("current", "gcsEventPressure", 2, total(3))
	check("current", "nodeHealthChecks", 0, total(quantile(0.99, 10, 0, 10, 1, 10)))
	// submit_job (0.5, 0.75] and get_job_info (0.05, 0.075], 10 each: the 19th of 20 is in the upper.
	check("current", "jobAPIPressure", 0, total(quantile(0.95, 20, 10, 10, 0.5, 0.75)))
	check("current", "jobAPIPressure.split", 0, method("GET", quantile(0.95, 10, 0, 10, 0.05, 0.075)), method("POST", quantile(0.95, 10, 0, 10, 0.5, 0.75)))
	// and get_version (0.005, 0.01]; the log stream left out: the 28.5th of 30.
	check("current", "dashboardPressure", 0, total(quantile(0.95, 30, 20, 10, 0.5, 0.75)))
	check("older", "gcsEventPressure", 0)
	check("older", "gcsEventPressure", 1, total(40))
	check("older", "jobAPIPressure", 0, total(quantile(0.95, 20, 10, 10, 0.5, 0.75)))
	check("older", "jobAPIPressure.split", 0, method("DELETE", quantile(0.95, 10, 0, 10, 0.5, 0.75)), method("POST", quantile(0.95, 10, 0, 10, 0.05, 0.075)))
	check("lagonly", "gcsEventPressure", 0)
	check("lagonly", "gcsEventPressure", 1)
	check("lagonly", "gcsEventPressure", 2, total(7))
	check("paths", "jobAPIPressure", 0, total(quantile(0.95, 10, 0, 10, 0.5, 0.75)))
	check("paths", "jobAPIPressure.split", 0, method("POST", quantile(0.95, 10, 0, 10, 0.5, 0.75)))
	check("paths", "dashboardPressure", 0, total(quantile(0.95, 10, 0, 10, 0.5, 0.75)))

	promqltest.Run(t, series, tests)
}

// Levels follow the thresholds; the verdict is the worst level with data, naming its panels.
func TestHealthLevelsAndVerdict(t *testing.T) {
	assert.Equal(t, LevelOK, level(99, 100, 1000))
	assert.Equal(t, LevelWarning, level(100, 100, 1000))
	assert.Equal(t, LevelCritical, level(1000, 100, 1000))
	panels := []Panel{{Title: "A", Level: LevelWarning}, {Title: "B", Level: LevelNoData}, {Title: "C", Level: LevelWarning}, {Title: "D", Level: LevelOK}}
	assert.Equal(t, Verdict{Level: LevelWarning, Message: "A, C warning"}, verdict(panels))
	assert.Equal(t, LevelNoData, verdict([]Panel{{Level: LevelNoData}}).Level)
	assert.Equal(t, LevelOK, verdict([]Panel{{Level: LevelOK}, {Level: LevelNoData}}).Level)
}

// PromQL answers NaN for a mean over a window without observations: such samples are gaps, never values,
// so that an answer always encodes as JSON.
func TestPointsLeaveOutWhatIsNoFigure(t *testing.T) {
	s := &model.SampleStream{Values: []model.SamplePair{
		{Timestamp: 1000, Value: 1.5}, {Timestamp: 2000, Value: model.SampleValue(math.NaN())},
		{Timestamp: 3000, Value: model.SampleValue(math.Inf(1))}, {Timestamp: 4000, Value: 2},
	}}
	assert.Equal(t, []Point{{T: 1, V: 1.5}, {T: 4, V: 2}}, points(s))
	_, ok := lastAt(points(&model.SampleStream{Values: []model.SamplePair{{Timestamp: 5000, Value: model.SampleValue(math.NaN())}}}), time.Unix(5, 0))
	assert.False(t, ok, "a NaN at the end of the window is no sample there")
}

//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rayMetricsFixture writes, as OpenMetrics, what Ray nodes export for each cluster: gcs_server's
// event-loop queueing time (a gauge), and the GCS health checks' and the dashboard API's latency
// histograms, every observation of a cluster in one bucket (so each quantile is exact), 10 per 15 s.
func rayMetricsFixture(ns string, clusters map[string]rayLoad, from, to time.Time) string {
	var b strings.Builder
	n := int(to.Sub(from)/(15*time.Second)) + 1
	sample := func(name, labels string, v func(i int) float64) {
		for i := range n {
			ts := from.Unix() + 15*int64(i)
			fmt.Fprintf(&b, "%s{%s} %s %d\n", name, labels, strconv.FormatFloat(v(i), 'f', -1, 64), ts)
		}
	}
	sel := func(c string) string {
		return fmt.Sprintf(`namespace="%s",ray_io_cluster="%s",pod="%s-head-x"`, ns, c, c)
	}
	b.WriteString("# TYPE ray_operation_queue_time_ms gauge\n")
	for c, l := range clusters {
		sample("ray_operation_queue_time_ms", sel(c)+`,Component="gcs_server",Method="NodeInfoGcsService.grpc_server.GetAllNodeInfo"`,
			func(int) float64 { return l.queueMs })
		sample("ray_operation_queue_time_ms", sel(c)+`,Component="raylet",Method="NodeManager.deadline_timer"`,
			func(int) float64 { return 99999 }) // the raylet's: not the GCS
	}
	histogram := func(name string, bounds []float64, pick func(l rayLoad) float64, extra string) {
		fmt.Fprintf(&b, "# TYPE %s_bucket unknown\n", name)
		for c, l := range clusters {
			for _, le := range append(bounds, -1) {
				leText := "+Inf"
				if le >= 0 {
					leText = strconv.FormatFloat(le, 'f', -1, 64)
				}
				counts := le < 0 || le >= pick(l)
				sample(name+"_bucket", sel(c)+extra+`,le="`+leText+`"`, func(i int) float64 {
					if counts {
						return 10 * float64(i)
					}
					return 0
				})
			}
		}
	}
	histogram("ray_health_check_rpc_latency_ms", []float64{1, 10, 100, 1000, 10000}, func(l rayLoad) float64 { return l.checkBucket }, `,Component="gcs_server"`)
	histogram("ray_dashboard_api_requests_duration_seconds", []float64{0.025, 0.05, 0.1, 1, 2.5, 5, 10},
		func(l rayLoad) float64 { return l.jobBucket }, `,endpoint="/api/jobs/",http_status="200",Component="dashboard"`)
	b.WriteString("# EOF\n")
	return b.String()
}

// rayLoad is what a fixture cluster measures: the GCS queueing time, and the upper bound of the bucket
// every health check and every job API call falls in.
type rayLoad struct{ queueMs, checkBucket, jobBucket float64 }

// The cluster health tab of three clusters whose Ray metrics Prometheus holds (calm; GCS queueing and
// a slow job API; failing health checks) gives each panel's exact figure and level; a cluster without
// metrics says no data for each panel, and why; Prometheus away is 200 with warnings.
func TestClusterHealthTab(t *testing.T) {
	ns := namespace(t, "clusterhealth")
	admin := env.tokens["admin"]
	loads := map[string]rayLoad{
		"calm":      {queueMs: 5, checkBucket: 10, jobBucket: 0.05},
		"queued":    {queueMs: 2500, checkBucket: 10, jobBucket: 5},
		"unchecked": {queueMs: 20, checkBucket: 10000, jobBucket: 0.05},
	}
	for _, name := range []string{"calm", "queued", "unchecked", "silent"} {
		require.Equal(t, 201, createClusterAt(t, admin, ns, name, "?start=false").Status)
	}
	end := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	start := end.Add(-5 * time.Minute)
	promURL, stopProm := startPrometheus(t, rayMetricsFixture(ns, loads, end.Add(-10*time.Minute), end))
	svc := startInstance(t, "ray-service-clusterhealth.log", "--prometheus-url", promURL)
	window := fmt.Sprintf("start=%d&end=%d&step=30s", start.Unix(), end.Unix())
	get := func(name, token string) (int, clusterHealthData) {
		r, err := sendTo(svc.url, "GET", itemPath(ns, "rayclusters", name)+"/health?"+window, token, "", nil)
		require.NoError(t, err)
		if r.Status != 200 {
			return r.Status, clusterHealthData{}
		}
		return 200, decode[clusterHealthData](t, r)
	}
	// Each quantile falls in its bucket: lower bound + width × q.
	want := map[string]map[string]struct {
		v     float64
		level string
	}{
		"calm": {"gcsEventPressure": {5, "ok"}, "nodeHealthChecks": {1 + 9*0.99, "ok"},
			"jobAPIPressure": {0.025 + 0.025*0.95, "ok"}, "dashboardPressure": {0.025 + 0.025*0.95, "ok"}},
		"queued": {"gcsEventPressure": {2500, "critical"}, "nodeHealthChecks": {1 + 9*0.99, "ok"},
			"jobAPIPressure": {2.5 + 2.5*0.95, "warning"}, "dashboardPressure": {2.5 + 2.5*0.95, "warning"}},
		"unchecked": {"gcsEventPressure": {20, "ok"}, "nodeHealthChecks": {1000 + 9000*0.99, "critical"},
			"jobAPIPressure": {0.025 + 0.025*0.95, "ok"}, "dashboardPressure": {0.025 + 0.025*0.95, "ok"}},
	}
	verdicts := map[string]string{"calm": "ok", "queued": "critical", "unchecked": "critical"}
	for name, panels := range want {
		status, d := get(name, admin)
		require.Equal(t, 200, status, name)
		assert.Empty(t, d.Warnings, name)
		assert.Equal(t, name, d.Cluster)
		require.Len(t, d.Panels, 4, name)
		for _, p := range d.Panels {
			w := panels[p.Name]
			require.NotNil(t, p.Value, "%s %s: %s", name, p.Name, p.Reason)
			assert.InDelta(t, w.v, *p.Value, 1e-9, "%s %s", name, p.Name)
			assert.Equal(t, w.level, p.Level, "%s %s", name, p.Name)
			assert.Len(t, p.Series, 11, "%s %s: a point per step", name, p.Name)
			assert.Contains(t, p.Query, `ray_io_cluster="`+name+`"`)
		}
		assert.Equal(t, verdicts[name], d.Verdict.Level, name)
		t.Logf("%-9s verdict %s: %s", name, d.Verdict.Level, d.Verdict.Message)
	}
	_, queued := get("queued", admin)
	assert.Equal(t, "GCS event pressure critical", queued.Verdict.Message)

	status, silent := get("silent", admin)
	require.Equal(t, 200, status)
	for _, p := range silent.Panels {
		assert.Equal(t, "no data", p.Level, p.Name)
		assert.Nil(t, p.Value)
		assert.NotEmpty(t, p.Reason, p.Name)
	}
	assert.Equal(t, "no data", silent.Verdict.Level)

	status, viewed := get("calm", env.tokens["viewer"])
	assert.Equal(t, 200, status, "a caller who may get the object")
	assert.Equal(t, "ok", viewed.Verdict.Level)
	status, _ = get("calm", env.tokens["nobody"])
	assert.Equal(t, 403, status)

	stopProm()
	window = fmt.Sprintf("start=%d&end=%d&step=60s", start.Unix(), end.Unix()) // not an answer cached before
	status, away := get("calm", admin)
	require.Equal(t, 200, status, "Prometheus away never fails the answer")
	assert.Len(t, away.Warnings, 4)
	assert.Equal(t, "no data", away.Verdict.Level)
}

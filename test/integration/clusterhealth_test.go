//go:build integration

package integration

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ray's generations, as what their nodes export differs for the cluster health tab.
const (
	// rayCurrent is Ray 2.50 and later, scraped by a PodMonitor without honorLabels (KubeRay's
	// config/prometheus/podMonitor.yaml): gcs_server's event-loop queueing time is a histogram tagged
	// Name (src/ray/common/metrics.h, PR 55762); the dashboard's handler names arrive as
	// exported_endpoint, endpoint being the port's name.
	rayCurrent = "2.52"
	// rayOlderWithStats is Ray 2.41 with RAY_event_stats_metrics=1, honorLabels: a gauge per handler,
	// tagged Method (src/ray/stats/metric_defs.cc); the handler names in endpoint.
	rayOlderWithStats = "2.41+stats"
)

// rayMetricsFixture writes, as OpenMetrics, what Ray nodes of each generation export for each
// cluster: gcs_server's event-loop queueing time, and the GCS health checks' and the dashboard API's
// latency histograms (python/ray/dashboard/dashboard_metrics.py: labels endpoint, http_status,
// SessionName, Component), every observation of a cluster in one bucket (so each quantile is exact), 10
// per 15 s. Each job API call is submit_job (POST) or get_job_info (GET); a job's log stream
// (tail_job_logs), whose duration is the stream's life, lasts 40 s and counts for no panel.
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
		return fmt.Sprintf(`namespace="%s",ray_io_cluster="%s",pod="%s-head-x",SessionName="session_2026_12_02_10_00_00_000000_1"`, ns, c, c)
	}
	b.WriteString("# TYPE ray_operation_queue_time_ms gauge\n")
	for c, l := range clusters {
		if l.gen != rayOlderWithStats {
			continue
		}
		sample("ray_operation_queue_time_ms", sel(c)+`,Component="gcs_server",Method="NodeInfoGcsService.grpc_server.GetAllNodeInfo"`,
			func(int) float64 { return l.queueMs })
		sample("ray_operation_queue_time_ms", sel(c)+`,Component="raylet",Method="NodeManager.deadline_timer"`,
			func(int) float64 { return 99999 }) // the raylet's: not the GCS
	}
	// Ray 2.50's histogram: 10 events per 15 s, each waiting queueMs, on the GCS's main loop; the
	// raylet's main loop far slower.
	b.WriteString("# TYPE ray_operation_queue_time_ms_sum unknown\n")
	b.WriteString("# TYPE ray_operation_queue_time_ms_count unknown\n")
	for c, l := range clusters {
		if l.gen != rayCurrent {
			continue
		}
		for _, loop := range []struct {
			name, component string
			ms              float64
		}{{"gcs_server_main_io_context", "gcs_server", l.queueMs}, {"raylet_main_io_context", "raylet", 99999}} {
			labels := sel(c) + `,endpoint="metrics",Component="` + loop.component + `",Name="` + loop.name + `"`
			sample("ray_operation_queue_time_ms_sum", labels, func(i int) float64 { return 10 * loop.ms * float64(i) })
			sample("ray_operation_queue_time_ms_count", labels, func(i int) float64 { return 10 * float64(i) })
		}
	}
	histogram := func(name string, bounds []float64, pick func(l rayLoad) float64, extra func(l rayLoad) []string) {
		fmt.Fprintf(&b, "# TYPE %s_bucket unknown\n", name)
		for c, l := range clusters {
			for _, labels := range extra(l) {
				for _, le := range append(bounds, -1) {
					leText := "+Inf"
					if le >= 0 {
						leText = strconv.FormatFloat(le, 'f', -1, 64)
					}
					in := pick(l)
					if strings.Contains(labels, "tail_job_logs") {
						in = 40
					}
					counts := le < 0 || le >= in
					sample(name+"_bucket", sel(c)+labels+`,le="`+leText+`"`, func(i int) float64 {
						if counts {
							return 10 * float64(i)
						}
						return 0
					})
				}
			}
		}
	}
	histogram("ray_health_check_rpc_latency_ms", []float64{1, 10, 100, 1000, 10000}, func(l rayLoad) float64 { return l.checkBucket },
		func(rayLoad) []string { return []string{`,Component="gcs_server"`} })
	// Ray's buckets (dashboard_metrics.py).
	histogram("ray_dashboard_api_requests_duration_seconds", []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 60},
		func(l rayLoad) float64 { return l.jobBucket }, func(l rayLoad) []string {
			var out []string
			for _, h := range []string{"submit_job", "get_job_info", "tail_job_logs"} {
				if l.gen == rayCurrent {
					out = append(out, `,endpoint="dash-metrics",exported_endpoint="`+h+`",http_status="2xx",Component="dashboard"`)
				} else {
					out = append(out, `,endpoint="`+h+`",http_status="2xx",Component="dashboard"`)
				}
			}
			return out
		})
	b.WriteString("# EOF\n")
	return b.String()
}

// rayLoad is what a fixture cluster measures: its Ray generation, the GCS queueing time, and the upper
// bound of the bucket every health check and every job API call falls in.
type rayLoad struct {
	gen                             string
	queueMs, checkBucket, jobBucket float64
}

// The cluster health tab of clusters of both Ray generations whose Ray metrics Prometheus holds (calm;
// GCS queueing and a slow job API; failing health checks) gives each panel's exact figure, level and
// source, the job API by method, log streams left out; a cluster without metrics says no data for each
// panel, and what to do; Prometheus away is 200 with warnings.
func TestClusterHealthTab(t *testing.T) {
	ns := namespace(t, "clusterhealth")
	admin := env.tokens["admin"]
	loads := map[string]rayLoad{
		"calm":       {gen: rayCurrent, queueMs: 5, checkBucket: 10, jobBucket: 0.05},
		"queued":     {gen: rayCurrent, queueMs: 2500, checkBucket: 10, jobBucket: 5},
		"unchecked":  {gen: rayCurrent, queueMs: 20, checkBucket: 10000, jobBucket: 0.05},
		"calm-241":   {gen: rayOlderWithStats, queueMs: 5, checkBucket: 10, jobBucket: 0.05},
		"queued-241": {gen: rayOlderWithStats, queueMs: 2500, checkBucket: 10, jobBucket: 5},
	}
	for _, name := range []string{"calm", "queued", "unchecked", "calm-241", "queued-241", "silent"} {
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
	type figure struct {
		v     float64
		level string
	}
	calm := map[string]figure{"gcsEventPressure": {5, "ok"}, "nodeHealthChecks": {1 + 9*0.99, "ok"},
		"jobAPIPressure": {0.025 + 0.025*0.95, "ok"}, "dashboardPressure": {0.025 + 0.025*0.95, "ok"}}
	queued := map[string]figure{"gcsEventPressure": {2500, "critical"}, "nodeHealthChecks": {1 + 9*0.99, "ok"},
		"jobAPIPressure": {2.5 + 2.5*0.95, "warning"}, "dashboardPressure": {2.5 + 2.5*0.95, "warning"}}
	want := map[string]map[string]figure{
		"calm": calm, "queued": queued, "calm-241": calm, "queued-241": queued,
		"unchecked": {"gcsEventPressure": {20, "ok"}, "nodeHealthChecks": {1000 + 9000*0.99, "critical"},
			"jobAPIPressure": {0.025 + 0.025*0.95, "ok"}, "dashboardPressure": {0.025 + 0.025*0.95, "ok"}},
	}
	gcsSource := map[string]string{rayCurrent: "histogram, GCS main loop (Ray 2.50 and later)", rayOlderWithStats: "gauge, gcs_server's handlers"}
	verdicts := map[string]string{"calm": "ok", "queued": "critical", "unchecked": "critical", "calm-241": "ok", "queued-241": "critical"}
	for name, panels := range want {
		status, d := get(name, admin)
		require.Equal(t, 200, status, name)
		assert.Empty(t, d.Warnings, name)
		assert.Equal(t, name, d.Cluster)
		require.Len(t, d.Panels, 4, name)
		for _, p := range d.Panels {
			w := panels[p.Name]
			require.NotNil(t, p.Value, "%s %s: %s", name, p.Name, p.Reason)
			assert.InDelta(t, w.v, *p.Value, 1e-9*max(1, w.v), "%s %s", name, p.Name)
			assert.Equal(t, w.level, p.Level, "%s %s", name, p.Name)
			assert.Len(t, p.Series, 11, "%s %s: a point per step", name, p.Name)
			assert.Contains(t, p.Query, `ray_io_cluster="`+name+`"`)
			assert.NotEmpty(t, p.Source, "%s %s", name, p.Name)
		}
		gcs := panelOf(d, "gcsEventPressure")
		assert.Contains(t, gcs.Source, gcsSource[loads[name].gen], name)
		job := panelOf(d, "jobAPIPressure")
		require.Len(t, job.Split, 2, "%s: the job API by method", name)
		for i, m := range []string{"GET", "POST"} {
			assert.Equal(t, m, job.Split[i].Name)
			require.NotNil(t, job.Split[i].Value, "%s %s", name, m)
			assert.InDelta(t, panels["jobAPIPressure"].v, *job.Split[i].Value, 1e-9*max(1, panels["jobAPIPressure"].v), "%s %s", name, m)
		}
		assert.Equal(t, verdicts[name], d.Verdict.Level, name)
		t.Logf("%-10s verdict %s: %s", name, d.Verdict.Level, d.Verdict.Message)
	}
	_, q := get("queued", admin)
	assert.Equal(t, "GCS event pressure critical", q.Verdict.Message)

	status, silent := get("silent", admin)
	require.Equal(t, 200, status)
	for _, p := range silent.Panels {
		assert.Equal(t, "no data", p.Level, p.Name)
		assert.Nil(t, p.Value)
		assert.NotEmpty(t, p.Reason, p.Name)
	}
	assert.Contains(t, panelOf(silent, "jobAPIPressure").Reason, "dash-metrics", "what to declare on the head")
	assert.Contains(t, panelOf(silent, "gcsEventPressure").Reason, "RAY_event_stats_metrics=1")
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

// headPodIP waits until the head pod of the RayCluster name in ns runs, and returns its IP.
func headPodIP(t *testing.T, ns, name string) string {
	t.Helper()
	var headIP string
	eventually(t, 60*time.Second, "the head pod's IP", func() bool {
		for _, p := range decode[[]podInfo](t, call(t, "GET", itemPath(ns, "rayclusters", name)+"/pods", env.tokens["admin"], "", nil)) {
			if p.NodeType == "head" && p.IP != "" && p.Phase == "Running" {
				headIP = p.IP
			}
		}
		return headIP != ""
	})
	return headIP
}

// healthPath is the health tab of the RayCluster name in ns, from start to end in steps of 30 s.
func healthPath(ns, name string, start, end time.Time) string {
	return itemPath(ns, "rayclusters", name) + "/health?" +
		url.Values{"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"30s"}}.Encode()
}

func panelOf(d clusterHealthData, name string) healthPanel {
	for _, p := range d.Panels {
		if p.Name == name {
			return p
		}
	}
	return healthPanel{}
}

// A Ray 2.41 cluster with default settings exports no event-loop figure: the GCS event pressure panel
// reads what gcs_server.out printed, through the cluster's Ray dashboard (the stand-in serves Ray's log
// API and the file in Ray's format), for a caller who may proxy services there, from the head pod's
// node; the figure is the last print's mean queueing time, with events a second and active events. A
// caller who may not proxy is told so.
func TestClusterHealthFromGCSLog(t *testing.T) {
	ns := namespace(t, "gcslog")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "seed")
	headIP := headPodIP(t, ns, "seed")
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-10 * time.Minute)
	var log strings.Builder
	total := 1000
	for i := 9; i >= 0; i-- { // a print a minute, the last 30 s before the window's end
		at := end.Add(-time.Duration(i)*time.Minute - 30*time.Second)
		fmt.Fprintf(&log, "[%s I 41 41] (gcs_server) gcs_server.cc:302: Main service Event stats:\n\n\n", at.Format("2006-01-02 15:04:05,000"))
		fmt.Fprintf(&log, "Global stats: %d total (%d active)\n", total, i)
		fmt.Fprintf(&log, "Queueing time: mean = %.2fms, max = 99.00ms, min = 0.00ms, total = 1.00ms\n", 10+float64(9-i)*15)
		fmt.Fprintf(&log, "Execution time:  mean = 0.10ms, total = 1.00ms\nEvent stats:\n\tPeriodicalRunner.RunFnPeriodically - 5 total (2 active, 1 running), Execution time: mean = 0.03ms, total = 0.15ms, Queueing time: mean = 580.63ms, max = 1441.07ms, min = 21.12ms, total = 2903.14ms\n")
		fmt.Fprintf(&log, "[%s I 41 41] (gcs_server) gcs_server.cc:310: GcsNodeManager: \n- RegisterNode request count: 1\n", at.Add(time.Millisecond).Format("2006-01-02 15:04:05,000"))
		total += 600 // 10 events a second
	}
	env.dashboards.setGCSLog("seed-head-svc."+ns, headIP, log.String())
	// Prometheus holds none of the cluster's Ray metrics.
	promURL, _ := startPrometheus(t, rayMetricsFixture(ns, map[string]rayLoad{}, start, end))
	svc := startInstance(t, "ray-service-gcslog.log", "--prometheus-url", promURL)
	get := func(token string) healthPanel {
		r, err := sendTo(svc.url, "GET", healthPath(ns, "seed", start, end), token, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return panelOf(decode[clusterHealthData](t, r), "gcsEventPressure")
	}
	p := get(admin)
	require.NotNil(t, p.Value, p.Reason)
	assert.InDelta(t, 145, *p.Value, 1e-9, "the last print's mean queueing time")
	assert.Equal(t, "warning", p.Level)
	assert.Contains(t, p.Source, "gcs_server.out")
	assert.Len(t, p.Series, 10, "a print a minute")
	require.Len(t, p.Figures, 2)
	for _, f := range p.Figures {
		require.NotNil(t, f.Value, f.Name)
		assert.InDelta(t, map[string]float64{"eventsPerSecond": 10, "activeEvents": 0}[f.Name], *f.Value, 1e-9, f.Name)
	}
	assert.Positive(t, env.dashboards.seenQuery("GET", "seed-head-svc."+ns, "/api/v0/logs/file", "node_ip="+headIP))
	assert.False(t, env.dashboards.credentialsSeen("seed-head-svc."+ns), "the caller's token never reaches the dashboard")

	viewer := get(env.tokens["viewer"])
	assert.Nil(t, viewer.Value)
	assert.Contains(t, viewer.Reason, "may not get services/proxy")
}

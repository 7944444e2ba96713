package promql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The cluster health tab: four panels from Ray's own Prometheus metrics, which every Ray node exports
// and KubeRay's PodMonitor examples scrape (labelled with the pod's namespace and, from the pod label
// ray.io/cluster, ray_io_cluster).

// Levels of a panel and of the verdict.
const (
	LevelOK       = "ok"
	LevelWarning  = "warning"
	LevelCritical = "critical"
	LevelNoData   = "no data"
)

// Panel is one figure of the cluster health tab: its value at the end of the window, its series, its
// level by the thresholds, and the metric and query that produced it.
type Panel struct {
	Name  string `json:"name" example:"gcsEventPressure"`
	Title string `json:"title" example:"GCS event pressure"`
	Unit  string `json:"unit" example:"ms"`
	// Value is the figure at the end of the window; null with level "no data".
	Value  *float64 `json:"value"`
	Series []Point  `json:"series"`
	Level  string   `json:"level" enums:"ok,warning,critical,no data" example:"ok"`
	// Warning and Critical are the thresholds: the level is warning from Warning on, critical from
	// Critical on.
	Warning  float64 `json:"warning"`
	Critical float64 `json:"critical"`
	Metric   string  `json:"metric" example:"ray_operation_queue_time_ms"`
	Query    string  `json:"query"`
	// Source says what the figure was read from: which of the metric's forms (Ray's generations
	// export some figures differently), or gcs_server.out's event stats through the Ray dashboard.
	Source string `json:"source,omitempty" example:"ray_operation_queue_time_ms histogram, GCS main loop (Ray 2.50 and later)"`
	// Split breaks the figure down where the panel does: the job API's by request method.
	Split []Figure `json:"split,omitempty"`
	// Figures go with the figure where its source has them: gcs_server.out's events a second
	// (eventsPerSecond) and events not yet run (activeEvents).
	Figures []Figure `json:"figures,omitempty"`
	// Reason says why there is no data.
	Reason string `json:"reason,omitempty"`
}

// Verdict sums the panels up: the worst level among those with data, and which panel it is.
type Verdict struct {
	Level   string `json:"level" enums:"ok,warning,critical,no data"`
	Message string `json:"message"`
}

// ClusterHealth is the data of the cluster health tab.
type ClusterHealth struct {
	Window   Window   `json:"window"`
	Cluster  string   `json:"cluster"`
	Verdict  Verdict  `json:"verdict"`
	Panels   []Panel  `json:"panels"`
	Warnings []string `json:"warnings"`
}

// panelDef defines a panel: the sources of its figure, tried in order (the first with samples answers),
// each a query over the cluster's series with {sel} standing for the matchers of the cluster, {rate} for
// the rate window, {by} for the labels a figure is kept apart by (none: one cluster; in the chart's
// Grafana dashboard, each cluster's) and {by_le} for those and le; and what a user must do when none
// answers.
type panelDef struct {
	name, title, unit string
	sources           []source
	warning, critical float64
	missing           string
	// split, where set, breaks the figure down (e.g. by request method): a query whose series carry
	// the label splitBy.
	split, splitBy string
}

// source is one way Prometheus may hold a panel's figure: Ray's generations and exporters name and
// type it differently.
type source struct {
	// name says what the figure was read from, as the panel reports it.
	name, metric, query string
}

// jobHandlers are the Ray job API's handlers as the dashboard's metrics middleware names them in the
// label endpoint (handler.__name__; python/ray/dashboard/http_server_head.py, Ray 2.9 and later): POST
// /api/jobs/ submit_job, POST .../{id}/stop stop_job, DELETE .../{id} delete_job, GET list_jobs,
// get_job_info and get_job_logs (python/ray/dashboard/modules/job/job_head.py). tail_job_logs, the
// websocket of GET .../{id}/logs/tail, is left out: its duration is the stream's life. Ray before 2.4
// named the request path instead (/api/jobs/..., which says no method).
const (
	jobHandlers = `submit_job|stop_job|delete_job|get_job_info|list_jobs|get_job_logs`
	jobPaths    = `/api/jobs/?|/api/jobs/[^/]+(/stop|/logs)?/?`
	// logStreams are the endpoints whose duration is a stream's life, not a request's.
	logStreams = `tail_job_logs|.*/logs/tail/?`
)

// dashboardRequests is the dashboard's request-duration histogram's buckets where the label endpoint
// (or, where the scrape kept the target's own endpoint label, the port's name, exported_endpoint)
// matches re: a PodMonitor without honorLabels, as KubeRay's (config/prometheus/podMonitor.yaml), gives
// every target the label endpoint, so Ray's own arrives as exported_endpoint.
func dashboardRequests(re string) string {
	const m = `ray_dashboard_api_requests_duration_seconds_bucket`
	return `(label_replace(rate(` + m + `{{sel},exported_endpoint=~"` + re + `"}[{rate}]), "endpoint", "$1", "exported_endpoint", "(.+)")` +
		` or rate(` + m + `{{sel},exported_endpoint="",endpoint=~"` + re + `"}[{rate}]))`
}

// byMethod labels the job API's series with the request method of their handler.
func byMethod(v string) string {
	for _, m := range [][2]string{{"POST", "submit_job|stop_job|/api/jobs/[^/]+/stop/?"}, {"DELETE", "delete_job"},
		{"GET", "get_job_info|list_jobs|get_job_logs|/api/jobs/[^/]+/logs/?"}} {
		v = `label_replace(` + v + `, "method", "` + m[0] + `", "endpoint", "` + m[1] + `")`
	}
	return v
}

// gcsMainLoop is the name of gcs_server's main event loop (instrumented_io_context main_service in
// src/ray/gcs/gcs_server_main.cc, Ray 2.50 and later).
const gcsMainLoop = "gcs_server_main_io_context"

// healthPanels are the four panels.
var healthPanels = []panelDef{
	{name: "gcsEventPressure", title: "GCS event pressure", unit: "ms",
		// How long an event of gcs_server's event loop waits to run: when it grows, the GCS falls behind
		// and calls to it time out.
		sources: []source{
			// Ray 2.50 and later (ray-project/ray PR 55762, src/ray/common/metrics.h): a histogram, tag
			// Name the io_context, buckets 1, 10, 100, 1000, 10000 ms, on by default
			// (RAY_emit_main_service_metrics): the mean queueing time of the main loop's events.
			{name: "ray_operation_queue_time_ms histogram, GCS main loop (Ray 2.50 and later)", metric: "ray_operation_queue_time_ms",
				query: `sum by ({by}) (rate(ray_operation_queue_time_ms_sum{{sel},Name="` + gcsMainLoop + `"}[{rate}])) / sum by ({by}) (rate(ray_operation_queue_time_ms_count{{sel},Name="` + gcsMainLoop + `"}[{rate}]))`},
			// Ray 2.49 and before (src/ray/stats/metric_defs.cc): a gauge per handler, tag Method, exported
			// only with RAY_event_stats_metrics=1: the longest wait among gcs_server's handlers.
			{name: "ray_operation_queue_time_ms gauge, gcs_server's handlers (Ray 2.49 and before, RAY_event_stats_metrics=1)", metric: "ray_operation_queue_time_ms",
				query: `max by ({by}) (ray_operation_queue_time_ms{{sel},Component="gcs_server"})`},
			// Ray 2.39 and later: a probe posted to each GCS io_context at intervals, its wait (a gauge, tag
			// Name; src/ray/stats/metric_defs.cc, PR 47989).
			{name: "ray_io_context_event_loop_lag_ms, GCS event loops", metric: "ray_io_context_event_loop_lag_ms",
				query: `max by ({by}) (ray_io_context_event_loop_lag_ms{{sel},Component="gcs_server"})`},
		},
		warning: 100, critical: 1000,
		missing: "Prometheus has no GCS event-loop figure of the cluster: Ray 2.50 and later export ray_operation_queue_time_ms " +
			"from the head by default; on Ray 2.49 and before set RAY_event_stats_metrics=1 in the head's environment, or grant " +
			"the right to proxy services (services/proxy) in the namespace, so that gcs_server.out's event stats are read " +
			"through the Ray dashboard"},
	{name: "nodeHealthChecks", title: "Node health checks", unit: "ms",
		// p99 latency of the GCS's health checks of the raylets (a histogram without tags of its own,
		// src/ray/gcs/gcs_health_check_manager.cc): a node is marked dead after 5 failed checks in a row
		// (health_check_failure_threshold), one every 3 s, each failed after 10 s
		// (health_check_period_ms, health_check_timeout_ms; src/ray/common/ray_config_def.h).
		sources: []source{{name: "ray_health_check_rpc_latency_ms histogram", metric: "ray_health_check_rpc_latency_ms",
			query: `histogram_quantile(0.99, sum by ({by_le}) (rate(ray_health_check_rpc_latency_ms_bucket{{sel}}[{rate}])))`}},
		warning: 1000, critical: 5000,
		missing: "ray_health_check_rpc_latency_ms is not scraped from the head: scrape the head's metrics port (8080, named metrics)"},
	{name: "jobAPIPressure", title: "Job API pressure", unit: "s",
		// p95 latency of the job API (submit, stop, delete, get, list, logs; log streams left out), and
		// of each method (python/ray/dashboard/dashboard_metrics.py: labels endpoint, http_status,
		// SessionName, Component; no method).
		sources: []source{{name: "ray_dashboard_api_requests_duration_seconds histogram, the job API's handlers", metric: "ray_dashboard_api_requests_duration_seconds",
			query: `histogram_quantile(0.95, sum by ({by_le}) ` + dashboardRequests(jobHandlers+"|"+jobPaths) + `)`}},
		split:   `histogram_quantile(0.95, sum by ({by_le}, method) (` + byMethod(dashboardRequests(jobHandlers+"|"+jobPaths)) + `))`,
		splitBy: "method",
		warning: 1, critical: 5,
		missing: dashPortMissing},
	{name: "dashboardPressure", title: "Dashboard pressure", unit: "s",
		// p95 latency of every dashboard HTTP API call but log streams: the head's network, gcs_server
		// and the dashboard process' load show here. Ray's docs give histogram_quantile(0.95,
		// sum(rate(ray_dashboard_api_requests_duration_seconds_bucket[5m])) by (le)) (the dashboard's
		// metrics section of the observability guide); this is that, of one cluster, but for log streams,
		// whose duration is a stream's life. Neither Ray's default Grafana dashboards
		// (python/ray/dashboard/modules/metrics/dashboards/) nor KubeRay's (config/grafana, copies of
		// them) query any of the four panels' metrics.
		sources: []source{{name: "ray_dashboard_api_requests_duration_seconds histogram, every endpoint", metric: "ray_dashboard_api_requests_duration_seconds",
			query: `histogram_quantile(0.95, sum by ({by_le}) (rate(ray_dashboard_api_requests_duration_seconds_bucket{{sel},endpoint!~"` + logStreams + `",exported_endpoint!~"` + logStreams + `"}[{rate}])))`}},
		warning: 1, critical: 5,
		missing: dashPortMissing},
}

// dashPortMissing says what a cluster whose dashboard is not scraped lacks.
const dashPortMissing = "ray_dashboard_api_requests_duration_seconds is not scraped: the Ray dashboard exports it on its own port, " +
	"44227 (DASHBOARD_METRIC_PORT); declare containerPort 44227 named dash-metrics on the head's Ray container and scrape " +
	"it (the chart's PodMonitor scrapes the ports metrics and dash-metrics)"

// noJobCalls is the reason of a job API panel without data on a cluster whose dashboard is scraped.
const noJobCalls = "no job API request was made in the window (the dashboard's other requests are measured)"

// Figure is a part of a panel's figure (e.g. the job API's requests of one method) or a figure that
// goes with it (e.g. the GCS's events a second).
type Figure struct {
	Name string `json:"name" example:"POST"`
	// Unit, where it is not the panel's.
	Unit   string   `json:"unit,omitempty"`
	Value  *float64 `json:"value"`
	Series []Point  `json:"series"`
}

// HealthExpressions returns the panels' queries for one Ray cluster, selected by its namespace and
// name (both checked as Kubernetes names: nothing else from the request reaches a query): for each
// panel, its sources' queries in order, and under "<panel>.split" its breakdown's.
func HealthExpressions(namespace, cluster string, w Window) (map[string][]string, error) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(cluster); len(errs) > 0 {
		return nil, fmt.Errorf("cluster %q: %s", cluster, strings.Join(errs, "; "))
	}
	sel := `namespace="` + namespace + `",ray_io_cluster="` + cluster + `"`
	// A rate over a step, and at least two minutes: a few scrapes.
	return healthExpressions(strings.NewReplacer("{sel}", sel, "{rate}", model.Duration(max(w.Step, 2*time.Minute)).String(),
		"{by}", "", "{by_le}", "le")), nil
}

// GrafanaHealthExpressions are the panels' queries as the chart's Grafana dashboard asks them: of the
// clusters its variable Cluster selects, each apart.
func GrafanaHealthExpressions() map[string][]string {
	return healthExpressions(strings.NewReplacer("{sel}", `ray_io_cluster=~"$Cluster"`, "{rate}", "2m",
		"{by}", "namespace, ray_io_cluster", "{by_le}", "namespace, ray_io_cluster, le"))
}

func healthExpressions(r *strings.Replacer) map[string][]string {
	out := map[string][]string{}
	for _, p := range healthPanels {
		for _, src := range p.sources {
			out[p.name] = append(out[p.name], r.Replace(src.query))
		}
		if p.split != "" {
			out[p.name+".split"] = []string{r.Replace(p.split)}
		}
	}
	return out
}

// ClusterHealth answers the cluster health tab of one Ray cluster over the window. A panel whose
// sources Prometheus all lacks says "no data" and what to do; the others answer all the same.
func (q *Querier) ClusterHealth(ctx context.Context, w Window, namespace, cluster string) ClusterHealth {
	out := ClusterHealth{Window: w, Cluster: cluster, Panels: make([]Panel, len(healthPanels)), Warnings: []string{}}
	exprs, err := HealthExpressions(namespace, cluster, w)
	for i, d := range healthPanels {
		out.Panels[i] = Panel{Name: d.name, Title: d.title, Unit: d.unit, Metric: d.sources[0].metric, Warning: d.warning,
			Critical: d.critical, Series: []Point{}, Level: LevelNoData}
		if q := exprs[d.name]; len(q) > 0 {
			out.Panels[i].Query = q[0]
		}
	}
	if err != nil {
		out.Warnings = append(out.Warnings, err.Error())
		out.Verdict = verdict(out.Panels)
		return out
	}
	// Every source and breakdown is asked at once; each panel takes its first source with samples.
	type answer struct {
		m   model.Matrix
		err error
	}
	answers := make([][]answer, len(healthPanels))
	splits := make([]answer, len(healthPanels))
	var wg sync.WaitGroup
	for i, d := range healthPanels {
		answers[i] = make([]answer, len(d.sources))
		for j, expr := range exprs[d.name] {
			wg.Go(func() { answers[i][j].m, answers[i][j].err = q.rangeQuery(ctx, expr, w) })
		}
		if d.split != "" {
			expr := exprs[d.name+".split"][0]
			wg.Go(func() { splits[i].m, splits[i].err = q.rangeQuery(ctx, expr, w) })
		}
	}
	wg.Wait()
	for i, d := range healthPanels {
		p := &out.Panels[i]
		var failed error
		for j, a := range answers[i] {
			if a.err != nil {
				failed = a.err
				continue
			}
			// A source answers with a figure, not only with series: a quantile or a mean over a window
			// without observations is NaN at every step (points leaves it out).
			if len(a.m) == 0 || len(points(a.m[0])) == 0 {
				continue
			}
			p.Source, p.Metric, p.Query = d.sources[j].name, d.sources[j].metric, exprs[d.name][j]
			p.Series = points(a.m[0])
			break
		}
		switch {
		case p.Source == "" && failed != nil:
			p.Reason = fmt.Sprintf("Prometheus query failed: %v", failed)
			continue
		case p.Source == "":
			p.Reason = d.missing
			continue
		}
		v, ok := lastAt(p.Series, w.End)
		if !ok {
			p.Reason = "no sample at the end of the window"
			continue
		}
		p.Value = &v
		p.Level = level(v, d.warning, d.critical)
		if d.split != "" && splits[i].err == nil {
			for _, s := range splits[i].m {
				name := string(s.Metric[model.LabelName(d.splitBy)])
				if name == "" {
					continue // a path that says no method
				}
				sp := Figure{Name: name, Series: points(s)}
				if v, ok := lastAt(sp.Series, w.End); ok {
					sp.Value = &v
				}
				p.Split = append(p.Split, sp)
			}
			slices.SortFunc(p.Split, func(a, b Figure) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	// A job API without requests on a cluster whose dashboard is scraped is quiet, not unscraped.
	if job, dash := panelNamed(out.Panels, "jobAPIPressure"), panelNamed(out.Panels, "dashboardPressure"); job.Source == "" &&
		job.Reason == dashPortMissing && dash.Source != "" {
		job.Reason = noJobCalls
	}
	for _, p := range out.Panels {
		if strings.HasPrefix(p.Reason, "Prometheus query failed") {
			out.Warnings = append(out.Warnings, p.Title+": "+p.Reason)
		}
	}
	out.Verdict = verdict(out.Panels)
	return out
}

// panelNamed is the panel of that name.
func panelNamed(panels []Panel, name string) *Panel {
	for i := range panels {
		if panels[i].Name == name {
			return &panels[i]
		}
	}
	return &Panel{}
}

func level(v, warning, critical float64) string {
	switch {
	case v >= critical:
		return LevelCritical
	case v >= warning:
		return LevelWarning
	}
	return LevelOK
}

// verdict is the worst level among the panels with data, naming them.
func verdict(panels []Panel) Verdict {
	rank := map[string]int{LevelOK: 1, LevelWarning: 2, LevelCritical: 3}
	worst := LevelNoData
	var names []string
	for _, p := range panels {
		switch {
		case rank[p.Level] > rank[worst]:
			worst, names = p.Level, []string{p.Title}
		case p.Level == worst && rank[worst] > 0:
			names = append(names, p.Title)
		}
	}
	switch worst {
	case LevelNoData:
		return Verdict{Level: worst, Message: "Prometheus has none of the cluster's Ray metrics in the window: is the cluster scraped?"}
	case LevelOK:
		return Verdict{Level: worst, Message: "every panel with data is within its thresholds"}
	}
	return Verdict{Level: worst, Message: strings.Join(names, ", ") + " " + worst}
}

// GCSLogSource names the GCS event pressure read from gcs_server.out.
const GCSLogSource = "gcs_server.out's main-loop event stats, through the Ray dashboard's log API"

// LoopPrint is one print of gcs_server's main-loop event stats: when, the events posted since the
// start and those not yet run, and the mean time an event waited (ms).
type LoopPrint struct {
	At             time.Time
	Total, Active  int64
	QueueingMeanMs float64
}

// gcsPrintInterval is how often gcs_server prints its event stats (event_stats_print_interval_ms).
const gcsPrintInterval = time.Minute

// WithGCSLog answers the GCS event pressure panel, where Prometheus had none of its sources, from what
// gcs_server printed, as the openFuyao Ray guide's Fluent Bit script reads it: the mean queueing time
// (the panel's figure), and with it the events posted a second (the total's growth between prints) and
// the active events. The value is the last print in the window, if no older than two print intervals.
func (h *ClusterHealth) WithGCSLog(prints []LoopPrint) {
	p := panelNamed(h.Panels, "gcsEventPressure")
	if p.Name == "" || p.Source != "" {
		return
	}
	var queue, rate, active []Point
	for i, pr := range prints {
		if pr.At.Before(h.Window.Start) || pr.At.After(h.Window.End) {
			continue
		}
		t := pr.At.Unix()
		queue = append(queue, Point{T: t, V: pr.QueueingMeanMs})
		active = append(active, Point{T: t, V: float64(pr.Active)})
		if i > 0 {
			if d := pr.At.Sub(prints[i-1].At).Seconds(); d > 0 && pr.Total >= prints[i-1].Total {
				rate = append(rate, Point{T: t, V: float64(pr.Total-prints[i-1].Total) / d})
			}
		}
	}
	if len(queue) == 0 {
		p.Reason += "; gcs_server.out has no event stats printed in the window"
		return
	}
	p.Source, p.Metric, p.Query, p.Reason, p.Series = GCSLogSource, "gcs_server.out", "", "", queue
	p.Figures = []Figure{{Name: "eventsPerSecond", Unit: "1/s", Series: orEmpty(rate)}, {Name: "activeEvents", Unit: "events", Series: active}}
	last := queue[len(queue)-1]
	if h.Window.End.Sub(time.Unix(last.T, 0)) > 2*gcsPrintInterval {
		p.Reason = "gcs_server.out printed no event stats in the last two minutes of the window"
		return
	}
	p.Value = &last.V
	for i := range p.Figures {
		if s := p.Figures[i].Series; len(s) > 0 && s[len(s)-1].T == last.T {
			p.Figures[i].Value = &s[len(s)-1].V
		}
	}
	d := healthPanels[0]
	p.Level = level(last.V, d.warning, d.critical)
	h.Verdict = verdict(h.Panels)
}

// GCSWanting tells whether the GCS event pressure panel has no source yet.
func (h *ClusterHealth) GCSWanting() bool {
	p := panelNamed(h.Panels, "gcsEventPressure")
	return p.Name != "" && p.Source == ""
}

// NoGCSLog says, on a GCS event pressure panel without data, why gcs_server.out was not read either.
func (h *ClusterHealth) NoGCSLog(why string) {
	if p := panelNamed(h.Panels, "gcsEventPressure"); p.Name != "" && p.Source == "" {
		p.Reason += "; gcs_server.out not read: " + why
	}
}

func orEmpty(p []Point) []Point {
	if p == nil {
		return []Point{}
	}
	return p
}

package metrics

import (
	"context"
	"fmt"
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

// panelDef defines a panel: its query over the cluster's series, with {sel} standing for the matchers
// of the cluster and {rate} for the rate window.
type panelDef struct {
	name, title, unit, metric, query string
	warning, critical                float64
	missing                          string
}

// healthPanels are the four panels, with Ray's metric names (src/ray/stats/metric_defs.cc,
// gcs_health_check_manager.cc, python/ray/dashboard/dashboard_metrics.py).
var healthPanels = []panelDef{
	{name: "gcsEventPressure", title: "GCS event pressure", unit: "ms", metric: "ray_operation_queue_time_ms",
		// The longest time an event of any handler of gcs_server's event loop waited to run: when it
		// grows, the GCS falls behind and calls to it time out.
		query:   `max(ray_operation_queue_time_ms{{sel},Component="gcs_server"})`,
		warning: 100, critical: 1000,
		missing: "ray_operation_queue_time_ms is not scraped (Ray exports event-loop stats with RAY_event_stats_metrics=1)"},
	{name: "nodeHealthChecks", title: "Node health checks", unit: "ms", metric: "ray_health_check_rpc_latency_ms",
		// p99 latency of the GCS's health checks of the raylets: a node that does not answer within the
		// timeout (10 s by default) is marked dead and restarted.
		query:   `histogram_quantile(0.99, sum by (le) (rate(ray_health_check_rpc_latency_ms_bucket{{sel}}[{rate}])))`,
		warning: 1000, critical: 5000,
		missing: "ray_health_check_rpc_latency_ms is not scraped from the head"},
	{name: "jobAPIPressure", title: "Job API pressure", unit: "s", metric: "ray_dashboard_api_requests_duration_seconds",
		// p95 latency of the job API (submit, list, get, stop, delete, logs).
		query:   `histogram_quantile(0.95, sum by (le) (rate(ray_dashboard_api_requests_duration_seconds_bucket{{sel},endpoint=~"/api/jobs.*"}[{rate}])))`,
		warning: 1, critical: 5,
		missing: "no job API request was measured in the window (ray_dashboard_api_requests_duration_seconds)"},
	{name: "dashboardPressure", title: "Dashboard pressure", unit: "s", metric: "ray_dashboard_api_requests_duration_seconds",
		// p95 latency of every dashboard HTTP API call: the head's network, gcs_server and the
		// dashboard process' load show here.
		query:   `histogram_quantile(0.95, sum by (le) (rate(ray_dashboard_api_requests_duration_seconds_bucket{{sel}}[{rate}])))`,
		warning: 1, critical: 5,
		missing: "ray_dashboard_api_requests_duration_seconds is not scraped from the head"},
}

// HealthExpressions returns the panels' queries for one Ray cluster, selected by its namespace and
// name (both checked as Kubernetes names: nothing else from the request reaches a query).
func HealthExpressions(namespace, cluster string, w Window) (map[string]string, error) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(cluster); len(errs) > 0 {
		return nil, fmt.Errorf("cluster %q: %s", cluster, strings.Join(errs, "; "))
	}
	sel := `namespace="` + namespace + `",ray_io_cluster="` + cluster + `"`
	// A rate over a step, and at least two minutes: a few scrapes.
	rate := model.Duration(max(w.Step, 2*time.Minute)).String()
	out := map[string]string{}
	for _, p := range healthPanels {
		out[p.name] = strings.NewReplacer("{sel}", sel, "{rate}", rate).Replace(p.query)
	}
	return out, nil
}

// ClusterHealth answers the cluster health tab of one Ray cluster over the window. A panel whose
// metric Prometheus lacks says "no data" and why; the others answer all the same.
func (q *Querier) ClusterHealth(ctx context.Context, w Window, namespace, cluster string) ClusterHealth {
	out := ClusterHealth{Window: w, Cluster: cluster, Panels: make([]Panel, len(healthPanels)), Warnings: []string{}}
	exprs, err := HealthExpressions(namespace, cluster, w)
	for i, d := range healthPanels {
		out.Panels[i] = Panel{Name: d.name, Title: d.title, Unit: d.unit, Metric: d.metric, Warning: d.warning,
			Critical: d.critical, Series: []Point{}, Level: LevelNoData, Query: exprs[d.name]}
	}
	if err != nil {
		out.Warnings = append(out.Warnings, err.Error())
		out.Verdict = verdict(out.Panels)
		return out
	}
	var wg sync.WaitGroup
	for i := range out.Panels {
		wg.Go(func() {
			p, d := &out.Panels[i], healthPanels[i]
			m, err := q.rangeQuery(ctx, p.Query, w)
			switch {
			case err != nil:
				p.Reason = fmt.Sprintf("Prometheus query failed: %v", err)
			case len(m) == 0 || len(m[0].Values) == 0:
				p.Reason = d.missing
			default:
				p.Series = points(m[0])
				v, ok := lastAt(p.Series, w.End)
				if !ok {
					p.Reason = "no sample at the end of the window"
					return
				}
				p.Value = &v
				p.Level = level(v, d.warning, d.critical)
			}
		})
	}
	wg.Wait()
	for _, p := range out.Panels {
		if strings.HasPrefix(p.Reason, "Prometheus query failed") {
			out.Warnings = append(out.Warnings, p.Title+": "+p.Reason)
		}
	}
	out.Verdict = verdict(out.Panels)
	return out
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

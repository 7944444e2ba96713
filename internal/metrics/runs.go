package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"ray-service/internal/ray"
)

// RunStates visits, for every object of a kind that makes runs (a RayCronJob) that the watch cache
// holds, what its runs are doing.
type RunStates func(visit func(kind, namespace, name string, runs *ray.RunsState))

// runsCollector exposes what each RayCronJob's runs are doing, from the watch cache at each scrape,
// for the Grafana dashboard's schedules panel: Prometheus sees no RayCronJob otherwise (the operator
// exports metrics of RayClusters, RayJobs and RayServices only: controllers/ray/metrics, v1.6.0).
// One series of each per RayCronJob: they are few, and each names one.
type runsCollector struct {
	states                 RunStates
	total, active, failing *prometheus.Desc
}

// NewRunsCollector is the collector of the runs' states states gives.
func NewRunsCollector(states RunStates) prometheus.Collector {
	labels := []string{"kind", "namespace", "name"}
	return &runsCollector{states: states,
		total:   prometheus.NewDesc("ray_service_runs", "Runs an object that makes runs (a RayCronJob) has now.", labels, nil),
		active:  prometheus.NewDesc("ray_service_runs_active", "Runs of an object that makes runs that are active (not stopped or ended).", labels, nil),
		failing: prometheus.NewDesc("ray_service_runs_last_failed", "1 when the newest run that ended failed, else 0.", labels, nil),
	}
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.active
	ch <- c.failing
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	c.states(func(kind, ns, name string, runs *ray.RunsState) {
		failed := 0.0
		if runs.LastEnded != nil && runs.LastEnded.Status == ray.StatusFailed {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(runs.Total), kind, ns, name)
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(runs.Active), kind, ns, name)
		ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, failed, kind, ns, name)
	})
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"ray-service/internal/ray"
)

// Degraded visits every object the watch cache holds whose health is Degraded.
type Degraded func(visit func(kind, namespace, name string))

// Idle visits every Ray cluster the idle detection last found idle.
type Idle func(visit func(namespace, name string, idle *ray.Idle))

// healthCollector exposes, from the watch cache at each scrape, the objects that are Degraded and the
// Ray clusters that idle, for the chart's alerts: one series per such object, none for the others.
type healthCollector struct {
	degraded                Degraded
	idle                    Idle
	degradedDesc, idleSince *prometheus.Desc
	idleHolding             *prometheus.Desc
}

// NewHealthCollector is the collector of what degraded and idle give.
func NewHealthCollector(degraded Degraded, idle Idle) prometheus.Collector {
	return &healthCollector{degraded: degraded, idle: idle,
		degradedDesc: prometheus.NewDesc("ray_service_degraded",
			"1 for each Ray object whose health is Degraded now (none for the others).", []string{"kind", "namespace", "name"}, nil),
		idleSince: prometheus.NewDesc("ray_service_idle_since_timestamp_seconds",
			"When each Ray cluster the idle detection finds idle was last seen at work, in seconds since the epoch (none for the others).",
			[]string{"namespace", "name"}, nil),
		idleHolding: prometheus.NewDesc("ray_service_idle_accelerators",
			"The GPUs or NPUs (resource) that each idle Ray cluster's pods request, in device equivalents (a MIG instance, a vNPU or a shared GPU's replica as its share of a device), and so hold while it idles (none where it holds none).",
			[]string{"namespace", "name", "resource"}, nil),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.degradedDesc
	ch <- c.idleSince
	ch <- c.idleHolding
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	c.degraded(func(kind, ns, name string) {
		ch <- prometheus.MustNewConstMetric(c.degradedDesc, prometheus.GaugeValue, 1, kind, ns, name)
	})
	c.idle(func(ns, name string, i *ray.Idle) {
		ch <- prometheus.MustNewConstMetric(c.idleSince, prometheus.GaugeValue, float64(i.Since.UnixMilli())/1000, ns, name)
		for resource, n := range map[string]float64{"gpu": i.Holding.GPU, "npu": i.Holding.NPU} {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(c.idleHolding, prometheus.GaugeValue, n, ns, name, resource)
			}
		}
	})
}

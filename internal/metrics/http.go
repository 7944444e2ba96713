// Package metrics holds the service's own Prometheus metrics: its HTTP server's, its caches' sizes and its
// RayCronJobs' runs. What the service asks Prometheus is internal/promql.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// HTTP are the metrics of the service's HTTP server.
type HTTP struct {
	Requests *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	InFlight prometheus.Gauge
	// Details counts the details served, by where the object was read: "cache" or "apiserver".
	Details *prometheus.CounterVec
}

// methods are the request methods that are label values; any other is "other", so that no client can
// add series at will (Go's server accepts any token as a method).
var methods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// MethodLabel is the label value of a request method.
func MethodLabel(method string) string {
	if methods[method] {
		return method
	}
	return "other"
}

// RegisterSize adds a gauge read from size, for the size of a cache.
func RegisterSize(reg prometheus.Registerer, name, help string, size func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
		func() float64 { return float64(size()) }))
}

// NewRegistry returns a registry with the Go runtime and process collectors and the HTTP metrics.
func NewRegistry() (*prometheus.Registry, *HTTP) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := &HTTP{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ray_service_http_requests_total",
			Help: "HTTP requests served, by method, route and status code.",
		}, []string{"method", "route", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ray_service_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by method and route.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ray_service_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
		Details: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ray_service_details_total",
			Help: "Details of Ray objects served, by where the object was read: the watch cache or the apiserver.",
		}, []string{"source"}),
	}
	reg.MustRegister(h.Requests, h.Duration, h.InFlight, h.Details)
	return reg, h
}

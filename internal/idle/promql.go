package idle

import (
	"context"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

// Prometheus answers instant queries (promql.Querier).
type Prometheus interface {
	// Instants asks the named queries at once; an error is the first that failed, named after what asked.
	Instants(ctx context.Context, what string, qs map[string]string, at time.Time) (map[string]model.Vector, error)
	Instant(ctx context.Context, expr string, at time.Time) (model.Vector, error)
}

// Queries asks Prometheus the idle detection's questions: it is the Detector's Work.
type Queries struct{ Prometheus Prometheus }

var _ Work = Queries{}

// ClusterWork is what Prometheus says of one Ray cluster's work over a window, the idle detection's
// evidence. A nil figure was not measured.
type ClusterWork struct {
	// RayLastUsed is the last step of the window at which any of its Ray logical CPU, GPU or NPU was in
	// use (Ray's ray_resources{State="USED"}); nil: none was.
	RayLastUsed *time.Time
	// RaySeen is the share of the window's steps at which Ray's series of it were there at all (at most 1).
	RaySeen float64
	// CPU is the most CPU cores its containers used at once (cAdvisor).
	CPU *float64
	// GPU and NPU are the highest utilization of one of its GPUs (DCGM) or NPUs (npu-exporter), percent;
	// a MIG instance's or a vNPU's of the slice itself (promql.GPUUtilizationByPod, NPUUtilizationByPod),
	// so that a cluster holding only slices is judged on them.
	GPU, NPU *float64
}

// workQueries are the idle detection's questions, each a vector by namespace and created_by_name, for a
// window w sampled every step s, rates over r.
func workQueries(w, s, r time.Duration) map[string]string {
	sub := "[" + model.Duration(w).String() + ":" + model.Duration(s).String() + "]"
	rayUsed := `sum by (namespace, created_by_name) (ray_resources{State="USED",Name=~"CPU|GPU|NPU"} * on(namespace, pod) group_left(created_by_name) ` + promql.RayClusterPods + `)`
	return map[string]string{
		// The time of the last step at which any was in use: (used > 0) is kept, and worth that time.
		"rayLastUsed": `max_over_time(((` + rayUsed + ` > 0) * 0 + time())` + sub + `)`,
		"raySeen":     `count_over_time(` + rayUsed + sub + `)`,
		"cpu": `max_over_time(sum by (namespace, created_by_name) (rate(container_cpu_usage_seconds_total{container!="",container!="POD"}[` +
			model.Duration(r).String() + `]) * on(namespace, pod) group_left(created_by_name) ` + promql.RayClusterPods + `)` + sub + `)`,
		"gpu": `max_over_time(max by (namespace, created_by_name) (` + promql.GPUUtilizationByPod() +
			` * on(namespace, pod) group_left(created_by_name) ` + promql.RayClusterPods + `)` + sub + `)`,
		"npu": `max_over_time(max by (namespace, created_by_name) (` + promql.NPUUtilizationByPod() +
			` * on(namespace, pod) group_left(created_by_name) ` + promql.RayClusterPods + `)` + sub + `)`,
	}
}

// WorkExpressions renders the idle detection's queries, for tests of the PromQL itself.
func WorkExpressions(window, step time.Duration) map[string]string {
	return workQueries(window, step, promql.RateWindow(step))
}

// ClusterWork asks Prometheus what every Ray cluster did over the window ending at now, sampled every
// step. An error is the first query's that failed: the detection then judges no cluster.
func (q Queries) ClusterWork(ctx context.Context, window, step time.Duration, now time.Time) (map[ray.ClusterRef]*ClusterWork, error) {
	answers, err := q.Prometheus.Instants(ctx, "idle detection", workQueries(window, step, promql.RateWindow(step)), now)
	if err != nil {
		return nil, err
	}
	// The steps a subquery samples: window/step of them, one more only where now falls on a step.
	steps := float64(window / step)
	out := map[ray.ClusterRef]*ClusterWork{}
	each := func(name string, set func(w *ClusterWork, v float64)) {
		for _, s := range answers[name] {
			k := ray.ClusterRef{Namespace: string(s.Metric["namespace"]), Name: string(s.Metric["created_by_name"])}
			if k.Name == "" || math.IsNaN(float64(s.Value)) {
				continue
			}
			if out[k] == nil {
				out[k] = &ClusterWork{}
			}
			set(out[k], float64(s.Value))
		}
	}
	each("raySeen", func(w *ClusterWork, v float64) { w.RaySeen = min(v/steps, 1) })
	each("rayLastUsed", func(w *ClusterWork, v float64) {
		t := time.Unix(0, int64(v*float64(time.Second))).UTC()
		w.RayLastUsed = &t
	})
	each("cpu", func(w *ClusterWork, v float64) { w.CPU = &v })
	each("gpu", func(w *ClusterWork, v float64) { w.GPU = &v })
	each("npu", func(w *ClusterWork, v float64) { w.NPU = &v })
	return out, nil
}

// LastRayUse asks when each of the clusters named last had any Ray logical resource in use, looking
// back as far as lookback at steps of step; a cluster absent from the answer had none.
func (q Queries) LastRayUse(ctx context.Context, clusters []ray.ClusterRef, lookback, step time.Duration, now time.Time) (map[ray.ClusterRef]time.Time, error) {
	if len(clusters) == 0 {
		return nil, nil
	}
	var ns, names []string
	for _, c := range clusters {
		ns, names = append(ns, c.Namespace), append(names, c.Name)
	}
	for i := range ns {
		// as a regular expression, in a PromQL string: each backslash doubled
		ns[i] = strings.ReplaceAll(regexp.QuoteMeta(ns[i]), `\`, `\\`)
		names[i] = strings.ReplaceAll(regexp.QuoteMeta(names[i]), `\`, `\\`)
	}
	pods := `max by (namespace, pod, created_by_name) (kube_pod_info{created_by_kind="RayCluster",namespace=~"` + strings.Join(ns, "|") +
		`",created_by_name=~"` + strings.Join(names, "|") + `"})`
	rayUsed := `sum by (namespace, created_by_name) (ray_resources{State="USED",Name=~"CPU|GPU|NPU"} * on(namespace, pod) group_left(created_by_name) ` + pods + `)`
	expr := `max_over_time(((` + rayUsed + ` > 0) * 0 + time())[` + model.Duration(lookback).String() + ":" + model.Duration(step).String() + `])`
	v, err := q.Prometheus.Instant(ctx, expr, now)
	if err != nil {
		return nil, err
	}
	out := map[ray.ClusterRef]time.Time{}
	for _, s := range v {
		out[ray.ClusterRef{Namespace: string(s.Metric["namespace"]), Name: string(s.Metric["created_by_name"])}] =
			time.Unix(0, int64(float64(s.Value)*float64(time.Second))).UTC()
	}
	return out, nil
}

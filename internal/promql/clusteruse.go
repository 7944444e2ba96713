package promql

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"

	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// useQueries are the utilization accounting's questions, each a vector by namespace and created_by_name:
// the sum, over the steps s of the span d ending at the evaluation time, of what the cluster's pods used
// at each step (cores, working-set bytes, GPUs and NPUs at full utilization); times s, resource-seconds.
// The pods are mapped to their cluster at each step (kube_pod_info), so that a cluster deleted within the
// span is counted up to its deletion.
func useQueries(d, s, r time.Duration) map[string]string {
	// Half a step short of the span: the steps taken are those of (t-d, t] whether the range's start
	// counts (Prometheus 2) or not (Prometheus 3), so that consecutive spans count each step once.
	sub := "[" + model.Duration(d-s/2).String() + ":" + model.Duration(s).String() + "]"
	perCluster := func(podExpr string) string {
		return `sum by (namespace, created_by_name) (sum_over_time((` + podExpr + ` * on(namespace, pod) group_left(created_by_name) ` +
			RayClusterPods + `)` + sub + `))`
	}
	return map[string]string{
		"cpu": perCluster(`sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",container!="POD"}[` +
			model.Duration(r).String() + `]))`),
		"memory": perCluster(`sum by (namespace, pod) (container_memory_working_set_bytes{container!="",container!="POD"})`),
		// Device equivalents in use, MIG instances and vNPUs at their share of a device (slices.go).
		"gpu": perCluster(`sum by (namespace, pod) (` + GPUsInUseByPod() + `)`),
		"npu": perCluster(`sum by (namespace, pod) (` + NPUsInUseByPod() + `)`),
	}
}

// UseExpressions renders the accounting's queries, for tests of the PromQL itself.
func UseExpressions(span, step time.Duration) map[string]string {
	return useQueries(span, step, RateWindow(step))
}

// ClusterUse asks Prometheus what every Ray cluster's pods used over (from, to], sampled every step (to
// and from are best multiples of step: Prometheus aligns a subquery's steps to them). An error is the
// first query's that failed: then nothing of the span is measured.
func (q *Querier) ClusterUse(ctx context.Context, from, to time.Time, step time.Duration) (map[ray.ClusterRef]usage.Used, error) {
	span := to.Sub(from)
	if span < step {
		return nil, fmt.Errorf("use between %s and %s: shorter than a step (%s)", from, to, step)
	}
	answers, err := q.Instants(ctx, "clusters' use", useQueries(span, step, RateWindow(step)), to)
	if err != nil {
		return nil, err
	}
	out := map[ray.ClusterRef]usage.Used{}
	sec := step.Seconds()
	each := func(name string, set func(u *usage.Used, v float64)) {
		for _, s := range answers[name] {
			ref := ray.ClusterRef{Namespace: string(s.Metric["namespace"]), Name: string(s.Metric["created_by_name"])}
			v := float64(s.Value)
			if ref.Name == "" || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			u := out[ref]
			set(&u, v*sec)
			out[ref] = u
		}
	}
	each("cpu", func(u *usage.Used, v float64) { u.CPUSeconds = v })
	each("memory", func(u *usage.Used, v float64) { u.MemoryByteSeconds = v })
	each("gpu", func(u *usage.Used, v float64) { u.GPUSeconds = v })
	each("npu", func(u *usage.Used, v float64) { u.NPUSeconds = v })
	return out, nil
}

// GrafanaUtilizationExpressions are the queries of the Grafana dashboard's utilization panels: for the
// dashboard's range, per namespace, the core-hours and GPU-hours the Ray pods held (their requests while
// Pending or Running, kube-state-metrics; GPUs in device equivalents, grafanaGPURequests) and used
// (cAdvisor; DCGM, as GPUsInUseByPod), sampled every minute. Prometheus
// alone computes them, over what it retains; the service's report keeps them past that. (On Prometheus 2
// the range's first minute is counted too: a minute more of the range.)
func GrafanaUtilizationExpressions() map[string]string {
	rayPods := `max by (namespace, pod) (kube_pod_info{created_by_kind="RayCluster"})`
	holding := `max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1)`
	hours := func(podExpr string) string {
		return `sum by (namespace) (sum_over_time((` + podExpr + ` * on(namespace, pod) group_left() ` + rayPods + `)[$__range:1m])) / 60`
	}
	allocated := func(resource string) string {
		return hours(`sum by (namespace, pod) (kube_pod_container_resource_requests{resource="` + resource + `"}) * on(namespace, pod) group_left() ` + holding)
	}
	return map[string]string{
		"cpu.allocated": allocated("cpu"),
		"cpu.used":      hours(`sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",container!="POD"}[5m]))`),
		"gpu.allocated": hours(`sum by (namespace, pod) (` + grafanaGPURequests() + `) * on(namespace, pod) group_left() ` + holding),
		"gpu.used":      hours(`sum by (namespace, pod) (` + GPUsInUseByPod() + `)`),
	}
}

// grafanaGPURequests are the GPUs each container of a pod requests, in device equivalents, as far as a
// dashboard can tell without the nodes' labels: whole GPUs, and MIG instances at their compute slices
// over their GPU's, 4 for the A30's profiles (1g.6gb, 2g.12gb, 4g.24gb) and 7 for every other GPU's (as
// package accel values them where the node does not name the GPU). A shared GPU's replica is worth one
// over its node's replicas, which kube-state-metrics does not write: the dashboard leaves them out.
func grafanaGPURequests() string {
	req := func(matchers string) string { return `kube_pod_container_resource_requests{` + matchers + `}` }
	slices := func(e string) string {
		return `label_replace(` + e + `, "slices", "$1", "resource", "nvidia_com_mig_([0-9]+)g_.*")`
	}
	const a30 = `nvidia_com_mig_(1g_6gb|2g_12gb|4g_24gb)(_.*)?`
	of7 := map[string]float64{}
	for g := 1; g <= 7; g++ {
		of7[strconv.Itoa(g)] = float64(g) / 7
	}
	return `(` + req(`resource="nvidia_com_gpu"`) +
		` or ` + slices(req(`resource=~"`+a30+`"`)) + ` * on(slices) group_left() ` + table(map[string]float64{"1": 0.25, "2": 0.5, "4": 1}, "slices") +
		` or ` + slices(req(`resource=~"nvidia_com_mig_.*",resource!~"`+a30+`"`)) + ` * on(slices) group_left() ` + table(of7, "slices") + `)`
}

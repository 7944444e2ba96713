package promql

import (
	"strings"
	"testing"
	"time"

	"ray-service/internal/promql/promqltest"
)

// The accounting's PromQL of use, evaluated by Prometheus' own engine (promtool test rules), a sample
// every 15 s over 20 minutes: busy's head uses 3 cores throughout (45 core-seconds a scrape), 1000 bytes
// of working set and a GPU at 60 % (as DCGM's chart scrapes it); gone's head uses 1 core until its pod
// goes at 17m (its series end there, stale). Over the 5 minutes to 20m sampled every 15 s, the sums of the
// 20 steps: busy 60 (× 15 s: 900 core-seconds), 20,000 byte-steps and 12 GPU-steps; gone 8 steps of 1
// core, up to its deletion.
func TestClusterUsePromQL(t *testing.T) {
	q := UseExpressions(5*time.Minute, 15*time.Second)
	pod := promqltest.PodInfo
	series := []map[string]string{
		{"series": pod("busy-head", "busy"), "values": "1x80"},
		{"series": pod("gone-head", "gone"), "values": "1x68 stale"},
		{"series": `kube_pod_info{namespace="ray",pod="web",created_by_kind="ReplicaSet",created_by_name="web"}`, "values": "1x80"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="busy-head",container="ray-head"}`, "values": "0+45x80"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="gone-head",container="ray-head"}`, "values": "0+15x68 stale"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="web",container="web"}`, "values": "0+150x80"},
		{"series": `container_memory_working_set_bytes{namespace="ray",pod="busy-head",container="ray-head"}`, "values": "1000x80"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="busy-head",gpu="1"}`, "values": "60x80"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="busy-head",container="ray-head",resource="cpu"}`, "values": "2x80"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="busy-head",phase="Running"}`, "values": "1x80"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="busy-head",phase="Pending"}`, "values": "0x80"},
	}
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	at := func(cluster string, v float64) sample {
		return sample{Labels: `{created_by_name="` + cluster + `",namespace="ray"}`, Value: v}
	}
	check := func(expr string, want ...sample) map[string]any {
		return map[string]any{"expr": expr, "eval_time": "20m", "exp_samples": want}
	}
	// The Grafana panels' figures over the last 5 minutes, sampled every minute: 2 cores held for 5
	// samples, 10/60 core-hours (a range of 4m30s: the same 5 steps on Prometheus 2, which counts the
	// range's start, as on 3).
	g := GrafanaUtilizationExpressions()
	promqltest.Run(t, series, []map[string]any{
		check(q["cpu"], at("busy", 60), at("gone", 8)),
		check(q["memory"], at("busy", 20000)),
		check(q["gpu"], at("busy", 12)),
		check(q["npu"]),
		check(strings.ReplaceAll(g["cpu.allocated"], "$__range", "4m30s"), sample{Labels: `{namespace="ray"}`, Value: 10.0 / 60}),
	})
}

package idle

import (
	"testing"
	"time"

	"ray-service/internal/promql/promqltest"
)

// The idle detection's PromQL, evaluated by Prometheus' own engine (promtool test rules), a sample every
// 15 s over 20 minutes: cluster idle stops using Ray at 10m (its CPU rate falls to nothing then too, its
// GPU sits at 1 %), busy uses Ray throughout (3 CPUs, its GPU at 60 % as its chart scrapes DCGM), and
// late has Ray's series only from 16m. At 20m over a 5 minute window sampled every 30 s: idle's Ray was
// last used before the window (no answer), busy's at 20m; Ray's series were there at all 11 steps for
// both, at 9 for late.
func TestIdlePromQL(t *testing.T) {
	q := WorkExpressions(5*time.Minute, 30*time.Second)
	pod := promqltest.PodInfo
	series := []map[string]string{
		{"series": pod("idle-head", "idle"), "values": "1x80"},
		{"series": pod("busy-head", "busy"), "values": "1x80"},
		{"series": pod("late-head", "late"), "values": "1x80"},
		{"series": `kube_pod_info{namespace="ray",pod="web",created_by_kind="ReplicaSet",created_by_name="web"}`, "values": "1x80"},
		{"series": `ray_resources{namespace="ray",pod="idle-head",Name="CPU",State="USED"}`, "values": "2x40 0x40"},
		{"series": `ray_resources{namespace="ray",pod="idle-head",Name="CPU",State="AVAILABLE"}`, "values": "2x80"},
		{"series": `ray_resources{namespace="ray",pod="idle-head",Name="memory",State="USED"}`, "values": "1000x80"},
		{"series": `ray_resources{namespace="ray",pod="busy-head",Name="CPU",State="USED"}`, "values": "3x80"},
		{"series": `ray_resources{namespace="ray",pod="late-head",Name="CPU",State="USED"}`, "values": "_x64 0x16"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="idle-head",container="ray-head"}`, "values": "0+15x40 600x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="busy-head",container="ray-head"}`, "values": "0+45x80"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="web",container="web"}`, "values": "0+150x80"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="ray",pod="idle-head",container="ray-head",gpu="0"}`, "values": "90x40 1x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="busy-head",gpu="1"}`, "values": "60x80"},
		// Slices: a MIG instance, busy 40 % then 3 % (GR_ENGINE_ACTIVE, a ratio; its GPU_UTIL is not
		// measured, DCGM writes 0), and a vNPU of a 310P at 20 % (percent of the vNPU).
		{"series": pod("mig-head", "mig"), "values": "1x80"},
		{"series": pod("vnpu-head", "vnpu"), "values": "1x80"},
		{"series": `DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="mig-head",gpu="2",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",modelName="NVIDIA H100 80GB HBM3"}`, "values": "0.4x50 0.03x30"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="mig-head",gpu="2",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",modelName="NVIDIA H100 80GB HBM3"}`, "values": "0x80"},
		{"series": `vnpu_pod_aicore_utilization{namespace="npu-exporter",exported_namespace="ray",pod_name="vnpu-head",container_name="ray-head",id="0",model_name="310P3",v_dev_id="100",aicore_count="2.00",is_virtual="true"}`, "values": "20x80"},
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
	promqltest.Run(t, series, []map[string]any{
		check(q["rayLastUsed"], at("busy", 1200)),
		check(q["raySeen"], at("busy", 11), at("idle", 11), at("late", 9)),
		check(q["cpu"], at("busy", 3), at("idle", 0)),
		check(q["gpu"], at("busy", 60), at("idle", 1), at("mig", 3)),
		check(q["npu"], at("vnpu", 20)),
	})
}

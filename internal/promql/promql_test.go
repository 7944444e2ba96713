package promql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"ray-service/internal/promql/promqltest"
)

// The overview's PromQL, evaluated by Prometheus' own engine with `promtool test rules` on series that
// hold the edge cases: pod-level and pause rows of cAdvisor, a counter reset, pods of no Ray cluster,
// another namespace, a Succeeded Ray pod, duplicate kube_pod_info series, DCGM series labelled each way
// a scrape leaves them (exported_pod under its chart's honorLabels: false, pod_name with
// --use-old-namespace, pod with honorLabels: true), npu-exporter's pod_name with its namespace as is or
// as exported_namespace, vNPU slices, and an exporter that is there while no pod in scope uses it.
func TestPromQLEdgeCases(t *testing.T) {
	exprs, err := Expressions(Scope{Namespaces: []string{"ray"}}, 30*time.Second)
	require.NoError(t, err)
	cluster, err := Expressions(Scope{Namespaces: []string{"ray"}, Cluster: "c1"}, 30*time.Second)
	require.NoError(t, err)
	elsewhere, err := Expressions(Scope{Namespaces: []string{"elsewhere"}}, 30*time.Second)
	require.NoError(t, err)

	rayPod := func(ns, pod, cluster string) string {
		return `kube_pod_info{namespace="` + ns + `",pod="` + pod + `",created_by_kind="RayCluster",created_by_name="` + cluster + `"}`
	}
	series := []map[string]string{
		{"series": rayPod("ray", "c1-head", "c1"), "values": "1x40"},
		// The same pod twice, as two kube-state-metrics replicas report it: counted once.
		{"series": `kube_pod_info{namespace="ray",pod="c1-head",created_by_kind="RayCluster",created_by_name="c1",instance="ksm-2"}`, "values": "1x40"},
		{"series": rayPod("ray", "c1-worker", "c1"), "values": "1x40"},
		{"series": rayPod("ray", "c2-head", "c2"), "values": "1x40"},
		{"series": rayPod("ray", "c1-done", "c1"), "values": "1x40"},
		{"series": rayPod("elsewhere", "c9-head", "c9"), "values": "1x40"},
		{"series": `kube_pod_info{namespace="ray",pod="web",created_by_kind="ReplicaSet",created_by_name="web"}`, "values": "1x40"},
		// CPU: 0.5 (head) + 0.25 (worker, reset at 5m) + 1 (c2) cores; the rest must not count.
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="c1-head",container="ray-head"}`, "values": "100+7.5x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="c1-worker",container="ray-worker"}`, "values": "500+3.75x19 3.75+3.75x20"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="c2-head",container="ray-head"}`, "values": "0+15x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="c1-head",container=""}`, "values": "0+150x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="c1-head",container="POD"}`, "values": "0+150x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="ray",pod="web",container="web"}`, "values": "0+150x40"},
		{"series": `container_cpu_usage_seconds_total{namespace="elsewhere",pod="c9-head",container="ray-head"}`, "values": "0+150x40"},
		{"series": `container_memory_working_set_bytes{namespace="ray",pod="c1-head",container="ray-head"}`, "values": "1000x40"},
		{"series": `container_memory_working_set_bytes{namespace="ray",pod="c1-head",container=""}`, "values": "9000x40"},
		{"series": `container_npu_utilization{namespace="ray",pod_name="c1-worker",id="0"}`, "values": "40x40"},
		{"series": `container_npu_utilization{namespace="ray",pod_name="web",id="1"}`, "values": "90x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="ray",pod="web",gpu="0"}`, "values": "100x40"},
		// dcgm-exporter as its chart scrapes it: the target's pod and namespace are the exporter's.
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="c1-worker",exported_container="ray-worker",gpu="1"}`, "values": "60x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",pod_namespace="ray",pod_name="c2-head",container_name="ray-head",gpu="2"}`, "values": "20x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="ray",pod="c1-head",container="ray-head",gpu="3"}`, "values": "10x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",gpu="4"}`, "values": "100x40"},
		{"series": `DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-exporter-x",exported_namespace="ray",exported_pod="web",gpu="5"}`, "values": "100x40"},
		{"series": `container_npu_utilization{namespace="npu-exporter",exported_namespace="ray",pod_name="c2-head",id="3"}`, "values": "30x40"},
		{"series": `npu_chip_info_utilization{namespace="npu-exporter",id="3"}`, "values": "30x40"},
		{"series": `container_npu_utilization{namespace="ray",exported_namespace="elsewhere",pod_name="c1-head",id="4"}`, "values": "99x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-head",container="ray-head",resource="huawei_com_Ascend910_2c"}`, "values": "1x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-head",container="ray-head",resource="huawei_com_Ascend310P_4c_3cpu"}`, "values": "2x40"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="c1-head",phase="Running"}`, "values": "1x40"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="c1-worker",phase="Pending"}`, "values": "1x40"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="c1-done",phase="Running"}`, "values": "0x40"},
		{"series": `kube_pod_status_phase{namespace="ray",pod="c1-done",phase="Succeeded"}`, "values": "1x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-head",container="ray-head",resource="cpu"}`, "values": "1x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-worker",container="ray-worker",resource="cpu"}`, "values": "2x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-done",container="ray-worker",resource="cpu"}`, "values": "8x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="web",container="web",resource="cpu"}`, "values": "16x40"},
		{"series": `kube_pod_container_resource_requests{namespace="ray",pod="c1-worker",container="ray-worker",resource="huawei_com_Ascend910"}`, "values": "1x40"},
		{"series": `ray_resources{namespace="ray",pod="c1-head",Name="CPU",State="USED"}`, "values": "3x40"},
		{"series": `ray_resources{namespace="ray",pod="c1-head",Name="CPU",State="AVAILABLE"}`, "values": "5x40"},
	}
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	check := func(expr string, want ...sample) map[string]any {
		return map[string]any{"expr": expr, "eval_time": "8m", "exp_samples": want}
	}
	total := func(v float64) sample { return sample{Labels: "{}", Value: v} }
	unmapped := sample{Labels: `{unmapped="true"}`, Value: 0}
	tests := []map[string]any{
		check(exprs["used.cpu"], total(1.75)),
		check(cluster["used.cpu"], total(0.75)),
		check(exprs["used.memoryBytes"], total(1000)),
		check(exprs["used.npu"], total(0.7)),
		check(exprs["used.gpu"], total(0.9)),
		check(cluster["used.gpu"], total(0.7)),
		check(elsewhere["used.gpu"], unmapped), // the exporter is there, no Ray pod in scope has a GPU
		check(elsewhere["used.npu"], unmapped), // npu-exporter is there (its chips), no Ray pod in scope has an NPU
		check(exprs["used.gpuMemoryBytes"]),    // the exporter's memory series are not there at all: no answer
		check(exprs["allocated.cpu"], total(3)),
		check(exprs["allocated.npu"], total(1)),
		// No vNPU series: both slices unmeasured, by resource (not counted as chips above, no share known).
		check(exprs["allocated."+unmeasuredVNPU], sample{Labels: `{resource="huawei_com_Ascend310P_4c_3cpu"}`, Value: 2},
			sample{Labels: `{resource="huawei_com_Ascend910_2c"}`, Value: 1}),
		check(exprs["allocated.gpu"], total(0)),
		check(exprs["used.ray"], sample{Labels: `{Name="CPU"}`, Value: 3}),
	}
	promqltest.Run(t, series, tests)
}

func TestScopeRefusesWhatIsNotAName(t *testing.T) {
	for _, sc := range []Scope{{Namespaces: []string{`ray"}) or vector(1) #`}}, {Namespaces: []string{"ray"}, Cluster: `c1",x="`}} {
		_, err := Expressions(sc, time.Minute)
		require.Error(t, err, "%+v", sc)
	}
}

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 7, 44, 0, time.UTC)
	w, err := ParseWindow("1h", "", "", "", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 30, 10, 7, 0, 0, time.UTC), w.End, "aligned to the step")
	require.Equal(t, w.End.Add(-time.Hour), w.Start)
	require.Equal(t, time.Minute, w.Step)
	w, err = ParseWindow("", "", "", "", now)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, w.Step, "30m by default")
	w, err = ParseWindow("", "2026-11-30T09:00:00Z", "1796032800", "90s", now)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, w.Step)
	for _, bad := range [][4]string{{"2h", "", "", ""}, {"", "10", "5", ""}, {"", "x", "5", ""}, {"1h", "1", "2", ""},
		{"", "", "", "30s"}, {"", "0", "100000", "1s"}, {"", "0", "10", "0.5"},
		{"", "0", "4102444800", ""}, {"", "0", "2592001", "1h"}, {"", "0", "100000", "100001"}} {
		_, err := ParseWindow(bad[0], bad[1], bad[2], bad[3], now)
		require.Error(t, err, "%v", bad)
	}
	_, err = ParseWindow("", "0", "2592000", "1h", now)
	require.NoError(t, err, "30 days is the longest window")
}

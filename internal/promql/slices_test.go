package promql

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/accel"
	"ray-service/internal/promql/promqltest"
)

// Sliced devices in use, evaluated by Prometheus' own engine on series shaped as the exporters write
// them: dcgm-exporter's MIG instances (GPU_I_PROFILE, GPU_I_ID; DCGM_FI_DEV_GPU_UTIL of an instance at 0,
// as DCGM leaves it, and GR_ENGINE_ACTIVE a ratio) as its chart scrapes them (exported_pod), and
// npu-exporter's vNPU series of a 310P (aicore_count "2.00", memory in KB). Cluster mig holds two
// 3g.40gb instances of an H100, busy 70 % and 35 %: 0.7*3/7 + 0.35*3/7 = 0.45 GPU; cluster a30 a 2g.12gb
// of an A30 at 50 %: 0.25 GPU; cluster v a 2-core vNPU of a 310P at 50 %: 0.125 NPU; cluster w eight
// 4-core vNPUs of a 910, of which npu-exporter writes nothing.
func TestSlicesInUse(t *testing.T) {
	held := accel.Holdings{
		{Kind: accel.GPU, Resource: "nvidia.com/mig-2g.12gb", Model: "A30", Count: 1, Devices: 0.5},
		{Kind: accel.GPU, Resource: "nvidia.com/mig-3g.40gb", Model: "H100-80GB-HBM3", Count: 2, Devices: 6.0 / 7},
		{Kind: accel.NPU, Resource: "huawei.com/Ascend310P-2c", Model: "Ascend310P", Count: 1, Devices: 0.25},
		{Kind: accel.NPU, Resource: "huawei.com/Ascend910-4c", Model: "Ascend910", Count: 8, Devices: 1},
	}
	exprs, err := Expressions(Scope{Namespaces: []string{"ray"}, Held: held}, 30*time.Second)
	require.NoError(t, err)
	of := func(cluster string) map[string]string {
		e, err := Expressions(Scope{Namespaces: []string{"ray"}, Cluster: cluster, Held: held}, 30*time.Second)
		require.NoError(t, err)
		return e
	}
	mig, v, w := of("mig"), of("v"), of("w")
	use := UseExpressions(time.Minute, 30*time.Second)
	dcgm := func(metric, profile, id, model, pod string) string {
		return metric + `{gpu="0",UUID="GPU-5fd4",pci_bus_id="00000000:3B:00.0",device="nvidia0",modelName="` + model +
			`",GPU_I_PROFILE="` + profile + `",GPU_I_ID="` + id + `",Hostname="n1",namespace="gpu-operator",pod="dcgm-exporter-x",` +
			`container="exporter",exported_namespace="ray",exported_pod="` + pod + `",exported_container="ray-worker"}`
	}
	vnpu := func(metric, pod string) string {
		return metric + `{id="0",model_name="310P3",v_dev_id="100",aicore_count="2.00",namespace="npu-exporter",pod="npu-exporter-x",` +
			`exported_namespace="ray",pod_name="` + pod + `",container_name="ray-worker",is_virtual="true"}`
	}
	requests := func(pod, resource string, n string) map[string]string {
		return map[string]string{"series": `kube_pod_container_resource_requests{namespace="ray",pod="` + pod + `",container="ray-worker",resource="` + resource + `"}`, "values": n + "x40"}
	}
	series := []map[string]string{
		{"series": promqltest.PodInfo("mig-worker", "mig"), "values": "1x40"},
		{"series": promqltest.PodInfo("a30-worker", "a30"), "values": "1x40"},
		{"series": promqltest.PodInfo("v-worker", "v"), "values": "1x40"},
		{"series": promqltest.PodInfo("w-worker", "w"), "values": "1x40"},
		{"series": dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "3g.40gb", "1", "NVIDIA H100 80GB HBM3", "mig-worker"), "values": "0.7x40"},
		{"series": dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "3g.40gb", "2", "NVIDIA H100 80GB HBM3", "mig-worker"), "values": "0.35x40"},
		{"series": dcgm("DCGM_FI_DEV_GPU_UTIL", "3g.40gb", "1", "NVIDIA H100 80GB HBM3", "mig-worker"), "values": "0x40"},
		{"series": dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2g.12gb", "3", "NVIDIA A30", "a30-worker"), "values": "0.5x40"},
		{"series": vnpu("vnpu_pod_aicore_utilization", "v-worker"), "values": "50x40"},
		{"series": vnpu("vnpu_pod_used_memory", "v-worker"), "values": "1048576x40"},
		{"series": vnpu("vnpu_pod_total_memory", "v-worker"), "values": "4194304x40"},
		{"series": `npu_chip_info_utilization{namespace="npu-exporter",id="1",model_name="910ProA"}`, "values": "0x40"},
		requests("mig-worker", "nvidia_com_mig_3g_40gb", "2"),
		requests("a30-worker", "nvidia_com_mig_2g_12gb", "1"),
		requests("v-worker", "huawei_com_Ascend310P_2c", "1"),
		requests("w-worker", "huawei_com_Ascend910_4c", "8"),
	}
	for _, pod := range []string{"mig-worker", "a30-worker", "v-worker", "w-worker"} {
		series = append(series, map[string]string{"series": `kube_pod_status_phase{namespace="ray",pod="` + pod + `",phase="Running"}`, "values": "1x40"})
	}
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	// In millionths, rounded: the shares are not exact in binary.
	check := func(expr string, want ...sample) map[string]any {
		for i := range want {
			want[i].Value = math.Round(want[i].Value * 1e6)
		}
		return map[string]any{"expr": "round((" + expr + ") * 1e6)", "eval_time": "8m", "exp_samples": want}
	}
	total := func(v float64) sample { return sample{Labels: "{}", Value: v} }
	cluster := func(name string, v float64) sample {
		return sample{Labels: `{created_by_name="` + name + `",namespace="ray"}`, Value: v}
	}
	promqltest.Run(t, series, []map[string]any{
		check(exprs["used.gpu"], total(0.7)),
		check(mig["used.gpu"], total(0.45)),
		check(exprs["used.npu"], total(0.125)),
		check(v["used.npuMemoryBytes"], total(1<<30)),
		check(w["used.npu"], sample{Labels: `{unmapped="true"}`, Value: 0}),
		check(exprs["allocated.gpu"], total(0.5+6.0/7)),
		check(exprs["allocated.npu"], total(1.25)),
		check(exprs["allocated."+unmeasuredVNPU], sample{Labels: `{resource="huawei_com_Ascend910_4c"}`, Value: 8}),
		// Two steps of the minute: GPU- and NPU-seconds over the step.
		check(use["gpu"], cluster("mig", 0.9), cluster("a30", 0.5)),
		check(use["npu"], cluster("v", 0.25)),
		// The Grafana dashboard's: the GPUs in use per cluster, a MIG instance's too, and the GPUs requested
		// in device equivalents (a 3g of an H100 3/7, a 2g.12gb of an A30 2/4).
		check(strings.ReplaceAll(GrafanaGPUExpression(), "$Cluster", ".*"), cluster("a30", 0.25), cluster("mig", 0.45)),
		check(`sum(`+grafanaGPURequests()+`)`, total(6.0/7+0.5)),
	})
}

// GPUs held through resource claims are said to be in the totals and not in the allocated series, with
// how their use is read; none held, nothing is said.
func TestClaimWarnings(t *testing.T) {
	assert.Empty(t, claimWarnings(nil))
	var held accel.Holdings
	held.Add("nvidia.com/mig-3g.40gb", accel.Unit{Kind: accel.GPU, Share: 3.0 / 7}, 2)
	assert.Empty(t, claimWarnings(held), "no claim")
	held.Add(accel.DRAPrefix+"gpu.nvidia.com", accel.Unit{Kind: accel.GPU, Model: "NVIDIA H100 80GB HBM3", Share: 1, Exact: true}, 4)
	held.Add(accel.DRAPrefix+"mig.nvidia.com", accel.Unit{Kind: accel.GPU, Share: 1.0 / 7}, 7)
	w := claimWarnings(held)
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "hold 5 GPUs through resource claims (device classes gpu.nvidia.com, mig.nvidia.com)")
	assert.Contains(t, w[0], "--kubernetes-enable-dra")
}

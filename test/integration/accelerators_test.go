//go:build integration

package integration

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slicedWorkers gives a cluster's worker group n replicas asking for requests, on the stack's node of
// sliced devices named node (tainted: only what tolerates it lands there).
func slicedWorkers(n int, node string, requests map[string]any) func(map[string]any) {
	return func(obj map[string]any) {
		g := group(obj, "spec", "workerGroupSpecs", 0)
		g["replicas"], g["maxReplicas"] = n, n
		spec := group(g, "template", "spec")
		spec["nodeSelector"] = map[string]any{"kubernetes.io/hostname": node}
		spec["tolerations"] = []any{map[string]any{"key": "ray-service.local/sliced", "operator": "Exists", "effect": "NoSchedule"}}
		c := group(spec, "containers", 0)
		res := group(c, "resources")
		for _, part := range []string{"requests", "limits"} {
			maps.Copy(group(res, part), requests)
		}
	}
}

// Slices of devices count as their share of a device, the same in a cluster's summary and in the
// overview's allocated totals, with the raw counts per resource and model beside them: eight 4-core
// vNPUs of a 32-core Ascend chip are one NPU; two mig-3g.40gb instances of an H100 and one replica of a
// GPU shared four ways are 3/7 + 3/7 + 1/4 of a GPU. The node's labels (the stack's kwok-vnpu-0 and
// kwok-gpu-sliced-0, labelled as the device plugins label theirs) say the denominators.
func TestSlicedAcceleratorsCountedAsDevices(t *testing.T) {
	t.Parallel()
	admin := env.tokens["admin"]
	npuNS, gpuNS := namespace(t, "vnpu"), namespace(t, "migs")
	require.Equal(t, 201, createCluster(t, admin, npuNS, "vnpu", slicedWorkers(8, "kwok-vnpu-0",
		map[string]any{"huawei.com/Ascend910-4c": "1"})).Status)
	require.Equal(t, 201, createCluster(t, admin, gpuNS, "migs", slicedWorkers(1, "kwok-gpu-sliced-0",
		map[string]any{"nvidia.com/mig-3g.40gb": "2", "nvidia.com/gpu.shared": "1"})).Status)

	type detail struct {
		Status    string `json:"status"`
		Requested struct {
			GPU          float64       `json:"gpu"`
			NPU          float64       `json:"npu"`
			Accelerators []heldDevices `json:"accelerators"`
		} `json:"requested"`
	}
	show := func(ns, name string) detail {
		t.Helper()
		return decode[detail](t, call(t, "GET", itemPath(ns, "rayclusters", name), admin, "", nil))
	}
	overview := func(ns string) overviewData {
		t.Helper()
		return decode[overviewData](t, call(t, "GET", "/rest/ray/v1/overview?namespace="+ns, admin, "", nil))
	}
	wantNPU := []heldDevices{{Kind: "npu", Resource: "huawei.com/Ascend910-4c", Model: "Ascend910", Count: 8, Devices: 1}}
	wantGPU := []heldDevices{
		{Kind: "gpu", Resource: "nvidia.com/gpu.shared", Model: "H100-80GB-HBM3", Count: 1, Devices: 0.25},
		{Kind: "gpu", Resource: "nvidia.com/mig-3g.40gb", Model: "H100-80GB-HBM3", Count: 2, Devices: 6.0 / 7},
	}
	near := func(want, got []heldDevices) bool {
		if len(want) != len(got) {
			return false
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.Kind != g.Kind || w.Resource != g.Resource || w.Model != g.Model || w.Count != g.Count ||
				g.Devices < w.Devices-1e-9 || g.Devices > w.Devices+1e-9 || g.Estimated {
				return false
			}
		}
		return true
	}
	// The summary: from the pods' templates, valued on what the nodes agree on.
	var d detail
	eventually(t, 30*time.Second, "the vNPU cluster's summary counts one chip", func() bool {
		d = show(npuNS, "vnpu")
		return near(wantNPU, d.Requested.Accelerators)
	})
	assert.InDelta(t, 1.0, d.Requested.NPU, 1e-9)
	assert.Zero(t, d.Requested.GPU)
	eventually(t, 30*time.Second, "the MIG cluster's summary counts 6/7 + 1/4 of a GPU", func() bool {
		d = show(gpuNS, "migs")
		return near(wantGPU, d.Requested.Accelerators)
	})
	assert.InDelta(t, 6.0/7+0.25, d.Requested.GPU, 1e-9)

	// The overview: from the pods, valued on their nodes; the same figures once they run.
	waitStatus(t, npuNS, "rayclusters", "vnpu", "Running")
	waitStatus(t, gpuNS, "rayclusters", "migs", "Running")
	var o overviewData
	eventually(t, 30*time.Second, "the overview counts the vNPUs as one chip", func() bool {
		o = overview(npuNS)
		return near(wantNPU, o.Allocated.Accelerators)
	})
	assert.InDelta(t, 1.0, o.Allocated.NPU, 1e-9)
	eventually(t, 30*time.Second, "the overview counts the GPU slices as the summary does", func() bool {
		o = overview(gpuNS)
		return near(wantGPU, o.Allocated.Accelerators)
	})
	assert.InDelta(t, 6.0/7+0.25, o.Allocated.GPU, 1e-9)
	// The allocated series value the slices as the totals do (kube-state-metrics' requests times each
	// resource's share).
	lastOf := func(pts []point) float64 {
		if len(pts) == 0 {
			return math.NaN()
		}
		return pts[len(pts)-1].V
	}
	eventually(t, 60*time.Second, "the allocated GPU series counts the slices as devices", func() bool {
		o = overview(gpuNS)
		return math.Abs(lastOf(o.Series.Allocated["gpu"])-(6.0/7+0.25)) < 1e-6
	})

	// Used: the MIG instances from dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE (emulated at 50 %, KWOK
	// stack/kwok-metrics.yaml), each at its share of the H100: 2 x 0.5 x 3/7. The 910's vNPUs have no
	// series of npu-exporter: their use is unknown, and a warning names the exporter and the resource.
	eventually(t, 60*time.Second, "the MIG cluster's GPUs in use from GR_ENGINE_ACTIVE", func() bool {
		o = overview(gpuNS)
		return o.Used.GPU != nil && math.Abs(*o.Used.GPU-3.0/7) < 1e-6
	})
	eventually(t, 60*time.Second, "the vNPU cluster's use unknown, with the exporter named", func() bool {
		o = overview(npuNS)
		return o.Used.NPU == nil && slices.ContainsFunc(o.Warnings, func(w string) bool {
			return strings.Contains(w, "hold 8 vNPU slices of huawei_com_Ascend910_4c") && strings.Contains(w, "npu-exporter")
		})
	})
	for _, p := range clusterPods(t, npuNS, "vnpu") {
		if p.Labels["ray.io/node-type"] == "worker" {
			assert.Equal(t, "kwok-vnpu-0", p.Spec.NodeName)
		}
	}
}

// A cluster that holds only slices is judged idle on its slices' own series: its MIG instance's
// DCGM_FI_PROF_GR_ENGINE_ACTIVE (there is no DCGM_FI_DEV_GPU_UTIL of it), at 0 for sleepy and 50 % for
// busy; both use no CPU and hold no Ray resource, so only the MIG instance's use keeps busy from idling.
func TestSlicesOnlyClusterJudgedIdle(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "ray-service-idle-slices.log", "--idle-window=30s", "--idle-interval=5s")
	ns := namespace(t, "idleslices")
	admin := env.tokens["admin"]
	mig := func(gpuUtil string) func(map[string]any) {
		return func(obj map[string]any) {
			slicedWorkers(1, "kwok-gpu-sliced-0", map[string]any{"nvidia.com/mig-3g.40gb": "1"})(obj)
			for _, tpl := range []map[string]any{group(obj, "spec", "headGroupSpec", "template"), group(obj, "spec", "workerGroupSpecs", 0, "template")} {
				group(tpl, "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": "0", "ray-service.local/gpu-utilization": gpuUtil}
			}
		}
	}
	require.Equal(t, 201, createCluster(t, admin, ns, "sleepy", mig("0")).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "busy", mig("50")).Status)
	waitStatus(t, ns, "rayclusters", "sleepy", "Running")
	waitStatus(t, ns, "rayclusters", "busy", "Running")
	defer logIdleQueries(t)
	type item struct {
		Name string `json:"name"`
		Idle *struct {
			Holding struct {
				GPU float64 `json:"gpu"`
			} `json:"holding"`
			Evidence struct {
				GPU *float64 `json:"gpuUtilization"`
			} `json:"evidence"`
		} `json:"idle"`
	}
	list := func(query string) []item {
		r, err := sendTo(svc.url, "GET", nsPath(ns, "rayclusters")+query, admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[struct{ Items []item }](t, r).Items
	}
	var idle []item
	eventually(t, 2*time.Minute, "sleepy idle, judged on its MIG instance's series", func() bool {
		idle = list("?idle=true")
		return len(idle) == 1 && idle[0].Idle != nil && idle[0].Idle.Evidence.GPU != nil
	})
	assert.Equal(t, "sleepy", idle[0].Name)
	assert.Zero(t, *idle[0].Idle.Evidence.GPU)
	assert.InDelta(t, 3.0/7, idle[0].Idle.Holding.GPU, 1e-9, "one 3g.40gb of an H100")
	busy := list("?idle=false")
	require.Len(t, busy, 1)
	assert.Equal(t, "busy", busy[0].Name, "its MIG instance is at work: not idle")
}

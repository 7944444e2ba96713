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

// Every accelerator a Ray cluster holds is counted the same way in every figure: eight 4-core vNPUs of
// a 32-core Ascend chip are one NPU; two mig-3g.40gb instances of an H100 and one replica of a GPU shared
// four ways are 3/7 + 3/7 + 1/4 of a GPU; four GPUs claimed through DRA (a ResourceClaimTemplate of
// NVIDIA's driver's class, allocated by the kube-scheduler on the stack's kwok-dra-0) are four H100s.
// Each namespace's summary, the overview's allocated totals, and the utilization's hours give the same
// device equivalents with the raw counts per resource and model beside them, and for a caller who sees
// the three namespaces alone the overview's totals are their sum. The nodes' labels (the stack's
// kwok-vnpu-0 and kwok-gpu-sliced-0, labelled as the device plugins label theirs) and the driver's
// ResourceSlice say the denominators and the model. A worker asking a GPU more than the DRA node has free
// waits, and its health says DRA's reason.
func TestSlicedAcceleratorsCountedAsDevices(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "ray-service-accelerators.log", "--usage-credit-every=2s", "--idle-window=0")
	admin := env.tokens["admin"]
	npuNS, gpuNS, draNS := namespace(t, "vnpu"), namespace(t, "migs"), namespace(t, "dra")
	reader, readerToken := tenant(t, npuNS, "reader")
	for _, ns := range []string{npuNS, gpuNS, draNS} {
		bind(t, ns, reader, "ray-viewer")
	}
	require.Equal(t, 201, createCluster(t, admin, npuNS, "vnpu", slicedWorkers(8, "kwok-vnpu-0",
		map[string]any{"huawei.com/Ascend910-4c": "1"})).Status)
	require.Equal(t, 201, createCluster(t, admin, gpuNS, "migs", slicedWorkers(1, "kwok-gpu-sliced-0",
		map[string]any{"nvidia.com/mig-3g.40gb": "2", "nvidia.com/gpu.shared": "1"})).Status)
	oneGPU(t, draNS)
	require.Equal(t, 201, createCluster(t, admin, draNS, "claims", draWorkers(4, "one-gpu")).Status)

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

	// DRA: the summary counts the claim template's 4 GPUs until they are allocated, then, as the overview,
	// the 4 H100s allocated (their model from the driver's ResourceSlice).
	wantDRA := []heldDevices{{Kind: "gpu", Resource: "dra:gpu.nvidia.com", Model: "NVIDIA H100 80GB HBM3", Count: 4, Devices: 4}}
	eventually(t, 30*time.Second, "the summary counts the claim template's 4 GPUs", func() bool {
		d = show(draNS, "claims")
		return math.Abs(d.Requested.GPU-4) < 1e-9
	})
	waitStatus(t, draNS, "rayclusters", "claims", "Running")
	eventually(t, 30*time.Second, "the overview counts the 4 allocated H100s", func() bool {
		o = overview(draNS)
		return near(wantDRA, o.Allocated.Accelerators)
	})
	assert.InDelta(t, 4.0, o.Allocated.GPU, 1e-9)
	assert.True(t, slices.ContainsFunc(o.Warnings, func(w string) bool {
		return strings.Contains(w, "hold 4 GPUs through resource claims (device classes gpu.nvidia.com)")
	}), "the overview says the series leave the claimed GPUs out: %q", o.Warnings)
	eventually(t, 30*time.Second, "the summary counts the 4 GPUs as allocated", func() bool {
		d = show(draNS, "claims")
		return near(wantDRA, d.Requested.Accelerators)
	})
	for _, p := range clusterPods(t, draNS, "claims") {
		if p.Labels["ray.io/node-type"] == "worker" {
			assert.Equal(t, "kwok-dra-0", p.Spec.NodeName)
		}
	}

	// A caller who sees the three namespaces alone: the overview's totals are the three's sums.
	all := slices.Concat(wantDRA, wantGPU, wantNPU)
	var seen overviewData
	eventually(t, 30*time.Second, "the reader's overview sums the three", func() bool {
		r, err := send("GET", "/rest/ray/v1/overview", readerToken, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		seen = decode[overviewData](t, r)
		return near(all, seen.Allocated.Accelerators)
	})
	assert.InDelta(t, 6.0/7+0.25+4, seen.Allocated.GPU, 1e-9)
	assert.InDelta(t, 1.0, seen.Allocated.NPU, 1e-9)

	// The utilization, by namespace: per resource and model, the unit-hours are the raw count times the
	// hours held and the device-hours the device equivalents times them; they sum to the GPU- and NPU-hours
	// and, over the three, to the whole's.
	type accelHours struct {
		Kind, Resource, Model string
		Hours, DeviceHours    float64
	}
	type row struct {
		utilizationRow
		Accelerators []accelHours `json:"accelerators"`
	}
	type report struct {
		Items []row `json:"items"`
		Whole row   `json:"whole"`
	}
	counts := map[string]map[string][2]float64{ // namespace: resource: {count, devices}
		npuNS: {"huawei.com/Ascend910-4c": {8, 1}},
		gpuNS: {"nvidia.com/mig-3g.40gb": {2, 6.0 / 7}, "nvidia.com/gpu.shared": {1, 0.25}},
		draNS: {"dra:gpu.nvidia.com": {4, 4}},
	}
	var rep report
	eventually(t, 60*time.Second, "every namespace's accelerators in the utilization", func() bool {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/utilization?groupBy=namespace", readerToken, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		rep = decode[report](t, r)
		if len(rep.Items) != 3 {
			return false
		}
		for _, it := range rep.Items {
			if len(it.Accelerators) == 0 || it.HeldHours == 0 {
				return false
			}
		}
		return true
	})
	var wholeGPU, wholeNPU float64
	for _, it := range rep.Items {
		want := counts[it.Namespace]
		require.NotNil(t, want, it.Namespace)
		got := map[string][2]float64{}
		var gpu, npu float64
		for _, a := range it.Accelerators {
			c := got[a.Resource]
			got[a.Resource] = [2]float64{c[0] + a.Hours, c[1] + a.DeviceHours}
			if a.Kind == "gpu" {
				gpu += a.DeviceHours
			} else {
				npu += a.DeviceHours
			}
			if a.Resource != "dra:gpu.nvidia.com" || a.Model != "" { // a claim's model is known once allocated
				assert.Contains(t, []string{"Ascend910", "H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"}, a.Model, "%s %s", it.Namespace, a.Resource)
			}
		}
		require.Len(t, got, len(want), "%s: %+v", it.Namespace, it.Accelerators)
		for res, w := range want {
			assert.InDelta(t, w[0]*it.HeldHours, got[res][0], 1e-9, "%s %s: unit-hours", it.Namespace, res)
			assert.InDelta(t, w[1]*it.HeldHours, got[res][1], 1e-9, "%s %s: device-hours", it.Namespace, res)
		}
		assert.InDelta(t, it.Allocated.GPUHours, gpu, 1e-9, "%s: the device-hours are the GPU-hours", it.Namespace)
		assert.InDelta(t, it.Allocated.NPUHours, npu, 1e-9, "%s: the device-hours are the NPU-hours", it.Namespace)
		wholeGPU, wholeNPU = wholeGPU+gpu, wholeNPU+npu
	}
	assert.InDelta(t, rep.Whole.Allocated.GPUHours, wholeGPU, 1e-9, "the three sum to the whole")
	assert.InDelta(t, rep.Whole.Allocated.NPUHours, wholeNPU, 1e-9, "the three sum to the whole")

	// Every GPU of the DRA node is taken: a fifth worker's claim cannot be allocated.
	require.Equal(t, 201, createCluster(t, admin, draNS, "one-more", draWorkers(1, "one-gpu")).Status)
	h := waitHealth(t, draNS, "one-more", "Degraded", "Unschedulable")
	assert.Contains(t, h.Health.Message, "cannot allocate all claims")
	t.Logf("a worker asking a GPU more than is free: %s: %s", h.Health.Reason, h.Health.Message)
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

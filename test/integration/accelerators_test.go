//go:build integration

package integration

import (
	"maps"
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
	for _, p := range clusterPods(t, npuNS, "vnpu") {
		if p.Labels["ray.io/node-type"] == "worker" {
			assert.Equal(t, "kwok-vnpu-0", p.Spec.NodeName)
		}
	}
}

package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"ray-service/internal/accel"
)

// A template's claim templates count for every pod the template makes; a claim of its own name, which
// every pod naming it shares, once.
func TestWithClaims(t *testing.T) {
	spec := map[string]any{
		"headGroupSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"resourceClaims": []any{map[string]any{"name": "shared", "resourceClaimName": "team-gpus"}}}}},
		"workerGroupSpecs": []any{map[string]any{"groupName": "w", "replicas": int64(2), "numOfHosts": int64(2),
			"template": map[string]any{"spec": map[string]any{"resourceClaims": []any{
				map[string]any{"name": "own", "resourceClaimTemplateName": "one"},
				map[string]any{"name": "shared", "resourceClaimName": "team-gpus"},
				map[string]any{"name": "none"}}}}}},
	}
	var s Summary
	s.Namespace = "team"
	summarizeClusterSpec(spec, &s, accel.Node{})
	count := func(ns string, c corev1.PodResourceClaim) (accel.Holdings, bool) {
		var h accel.Holdings
		u, _ := accel.DRAClassUnit("gpu.nvidia.com")
		assert.Equal(t, "team", ns)
		if c.ResourceClaimTemplateName != nil {
			h.Add("dra:gpu.nvidia.com", u, 1)
			return h, false
		}
		h.Add("dra:gpu.nvidia.com", u, 2)
		return h, true
	}
	got := WithClaims(&s, count)
	assert.InDelta(t, 2+4*1, got.Requested.GPU, 1e-9, "the shared claim's 2 GPUs once, the template's 1 for each of 4 pods")
	assert.InDelta(t, 3, got.WorkerGroups[0].Resources.GPU, 1e-9, "one worker holds its own and the shared")
	assert.InDelta(t, 2, got.Head.Resources.GPU, 1e-9)
	assert.Zero(t, s.Requested.GPU, "the base is not changed")
	var plain Summary
	assert.Same(t, &plain, WithClaims(&plain, count), "no claims: the summary itself")
}

// What a cluster's pods' claims were allocated counts, per kind, where it is as much as its templates
// ask or more, and replaces the templates' claim holdings of that kind; less changes nothing.
func TestWithPodClaims(t *testing.T) {
	var asked accel.Holdings
	asked.Add(accel.DRAPrefix+"mig.nvidia.com", accel.Unit{Kind: accel.GPU, Share: 1.0 / 7}, 2)
	asked.Add("huawei.com/Ascend910", accel.Unit{Kind: accel.NPU, Share: 1, Exact: true}, 2)
	base := &Summary{Requested: Resources{CPU: 3, GPU: 2.0 / 7, NPU: 2, Accelerators: asked}}

	var less accel.Holdings
	less.Add(accel.DRAPrefix+"mig.nvidia.com", accel.Unit{Kind: accel.GPU, Share: 1.0 / 7}, 1)
	assert.Same(t, base, WithPodClaims(base, less), "one pod of two allocated")
	assert.Same(t, base, WithPodClaims(base, nil))
	var same accel.Holdings
	same.Add(accel.DRAPrefix+"mig.nvidia.com", accel.Unit{Kind: accel.GPU, Model: "NVIDIA H100 80GB HBM3", Share: 1.0 / 7}, 2)
	assert.Equal(t, "NVIDIA H100 80GB HBM3", WithPodClaims(base, same).Requested.Accelerators[0].Model, "as allocated: the model named")

	var more accel.Holdings
	more.Add(accel.DRAPrefix+"gpu.nvidia.com", accel.Unit{Kind: accel.GPU, Model: "NVIDIA H100 80GB HBM3", Share: 1, Exact: true}, 2)
	s := WithPodClaims(base, more)
	assert.InDelta(t, 2.0, s.Requested.GPU, 1e-9)
	assert.InDelta(t, 2.0, s.Requested.NPU, 1e-9, "the NPUs are not claims")
	assert.InDelta(t, 3.0, s.Requested.CPU, 1e-9)
	assert.InDelta(t, 2.0, s.Requested.Accelerators.Devices(accel.GPU), 1e-9)
	var resources []string
	for _, x := range s.Requested.Accelerators {
		resources = append(resources, x.Resource)
	}
	assert.Equal(t, []string{"dra:gpu.nvidia.com", "huawei.com/Ascend910"}, resources, "the template's MIG guess is replaced")
	assert.Len(t, base.Requested.Accelerators, 2, "base unchanged")
	assert.InDelta(t, 2.0/7, base.Requested.GPU, 1e-9)
}

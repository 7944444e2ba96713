//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// draWorkers gives a cluster's worker group n replicas, each claiming its GPUs through the
// ResourceClaimTemplate named template, on the stack's node whose GPUs NVIDIA's DRA driver offers
// (kwok-dra-0, tainted: only what tolerates it lands there).
func draWorkers(n int, template string) func(map[string]any) {
	return func(obj map[string]any) {
		g := group(obj, "spec", "workerGroupSpecs", 0)
		g["replicas"], g["maxReplicas"] = n, n
		spec := group(g, "template", "spec")
		spec["nodeSelector"] = map[string]any{"kubernetes.io/hostname": "kwok-dra-0"}
		spec["tolerations"] = []any{map[string]any{"key": "ray-service.local/sliced", "operator": "Exists", "effect": "NoSchedule"}}
		spec["resourceClaims"] = []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": template}}
		group(spec, "containers", 0, "resources")["claims"] = []any{map[string]any{"name": "gpu"}}
	}
}

// oneGPU makes in ns the ResourceClaimTemplate one-gpu: one device of NVIDIA's driver's class gpu.nvidia.com.
func oneGPU(t *testing.T, ns string) {
	t.Helper()
	_, err := env.admin.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// draProbeProduct is the GPU of the pool draProbePool publishes, told apart from the stack's.
const draProbeProduct = "NVIDIA A100-SXM4-80GB"

// draProbePool publishes, for round step of the ClusterRole's probe in namespace ns, a ResourceSlice of
// NVIDIA's DRA driver for a node that does not exist (the scheduler never allocates from it), pool
// <ns>-<step>, one GPU; it returns the pool's name. A slice each round: a service that does not watch
// them does not value the round's claim in time.
func draProbePool(t *testing.T, ns string, step int) string {
	t.Helper()
	slices := env.admin.ResourceV1().ResourceSlices()
	pool := fmt.Sprint(ns, "-", step)
	product, kind := draProbeProduct, "gpu"
	_, err := slices.Create(context.Background(), &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + pool},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &pool, Pool: resourcev1.ResourcePool{Name: pool, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: &kind}, "productName": {StringValue: &product}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = slices.Delete(context.Background(), "probe-"+pool, metav1.DeleteOptions{}) })
	return pool
}

// draProbe makes, in round step of the ClusterRole's probe, a claim template dra-<step> (2 GPUs), a
// claim dra-<step> allocated the GPU of the round's pool (written as the scheduler would), and a RayCluster
// dra-<step>, not started, whose head names the claim and whose workers name the template.
func draProbe(t *testing.T, ns string, step int) {
	t.Helper()
	ctx := context.Background()
	name, pool := fmt.Sprint("dra-", step), draProbePool(t, ns, step)
	req := func(n int64) []resourcev1.DeviceRequest {
		return []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
			AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}
	}
	_, err := env.admin.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: req(2)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	claims := env.admin.ResourceV1().ResourceClaims(ns)
	c, err := claims.Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: req(1)}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: pool, Device: "gpu-0"}}}}
	_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(strings.Replace(minimalCluster, "NAME", name, 1)), &obj))
	group(obj, "spec", "headGroupSpec", "template", "spec")["resourceClaims"] = []any{map[string]any{"name": "own", "resourceClaimName": name}}
	group(obj, "spec", "workerGroupSpecs", 0, "template", "spec")["resourceClaims"] = []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": name}}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayclusters")+"?start=false", env.tokens["admin"], "application/json", b)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
}

// draProbeLacks says what the service at url does not show yet of round step's draProbe ("" once it
// shows it): the claim's GPU, valued on its slice, and the template's two for each worker.
func draProbeLacks(t *testing.T, url, ns string, step int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, body, err := httpGetHeaders(ctx, url+itemPath(ns, "rayclusters", fmt.Sprint("dra-", step)), map[string]string{"Authorization": "Bearer " + env.tokens["admin"]})
	require.NoError(t, err)
	var d struct {
		Requested struct {
			Accelerators []heldDevices `json:"accelerators"`
		} `json:"requested"`
	}
	if status != 200 || json.Unmarshal(dataOf(t, body), &d) != nil {
		return "the RayCluster with claims"
	}
	claimed, templated := false, false
	for _, h := range d.Requested.Accelerators {
		claimed = claimed || h.Resource == "dra:gpu.nvidia.com" && h.Model == draProbeProduct && h.Count == 1
		templated = templated || h.Resource == "dra:gpu.nvidia.com" && h.Model == "" && h.Count >= 2
	}
	if !claimed || !templated {
		return fmt.Sprintf("the GPUs of the RayCluster's claims (it shows %+v)", d.Requested.Accelerators)
	}
	return ""
}

package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"ray-service/internal/accel"
	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }

// A Ray pod's claims count as the GPUs they are allocated, valued on the slice's devices (a MIG
// device as its profile's share), in the overview's allocated totals; a summary counts its templates'
// claim templates as they ask, before anything is allocated.
func TestDRAClaimsCounted(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx := t.Context()
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "resourceclaims"}, {Name: "resourceclaimtemplates"}, {Name: "resourceslices"}}}}
	store.checkDRA(disc)
	require.True(t, store.dra.started.Load())

	_, err := core.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new("n"), Pool: resourcev1.ResourcePool{Name: "n", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{
				{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3"), "uuid": str("GPU-0")}},
				{Name: "gpu-1-mig-3g40gb-9-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("mig"), "productName": str("NVIDIA H100 80GB HBM3"), "profile": str("3g.40gb")}},
			}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	exactly := func(class string, n int64) []resourcev1.DeviceRequest {
		return []resourcev1.DeviceRequest{{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}
	}
	_, err = core.ResourceV1().ResourceClaimTemplates("team").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "two"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: exactly("gpu.nvidia.com", 2)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-w-gpus-x", Annotations: map[string]string{resourcev1.PodResourceClaimAnnotation: "gpus"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "mig", DeviceClassName: "mig.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}},
			{Name: "g", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1}}}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "r/mig", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-1-mig-3g40gb-9-0"},
			{Request: "g", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0"},
			{Request: "g", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0", AdminAccess: new(true)}}}}}}
	_, err = core.ResourceV1().ResourceClaims("team").Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)

	u := raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, "demo", map[string]any{"state": "ready"})
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
	g := groups[0].(map[string]any)
	require.NoError(t, unstructured.SetNestedSlice(g, []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": "two"}}, "template", "spec", "resourceClaims"))
	require.NoError(t, unstructured.SetNestedField(g, int64(3), "replicas"))
	require.NoError(t, unstructured.SetNestedSlice(u.Object, groups, "spec", "workerGroupSpecs"))
	_, err = dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	held := func() accel.Holdings {
		items := store.Items(kinds.Cluster(), Scopes{Instances: auth.AllNamespaces()})
		if len(items) != 1 {
			return nil
		}
		var out accel.Holdings
		for _, h := range items[0].Summary.Requested.Accelerators {
			if h.Resource == "dra:gpu.nvidia.com" {
				out = append(out, h)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(held()) == 1 }, 5*time.Second, 10*time.Millisecond, "the summary counts the claim template")
	assert.Equal(t, accel.Holdings{{Kind: accel.GPU, Resource: "dra:gpu.nvidia.com", Count: 6, Devices: 6}}, held(), "2 GPUs for each of 3 workers")

	pod := raytest.Pod("demo-w", "demo", ray.NodeTypeWorker, "small", true)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: new("two")}}
	_, err = core.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	allocated := func() accel.Holdings {
		var out accel.Holdings
		for _, h := range store.Allocated(auth.AllNamespaces(), "").Accelerators {
			if h.Resource == "dra:gpu.nvidia.com" || h.Resource == "dra:mig.nvidia.com" {
				out = append(out, h)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(allocated()) == 1 }, 5*time.Second, 10*time.Millisecond, "no claim yet: the template's")
	assert.Equal(t, accel.Holdings{{Kind: accel.GPU, Resource: "dra:gpu.nvidia.com", Count: 2, Devices: 2}}, allocated())

	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: new("demo-w-gpus-x")}}
	_, err = core.CoreV1().Pods("team").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	want := accel.Holdings{
		{Kind: accel.GPU, Resource: "dra:gpu.nvidia.com", Model: "NVIDIA H100 80GB HBM3", Count: 1, Devices: 1},
		{Kind: accel.GPU, Resource: "dra:mig.nvidia.com", Model: "NVIDIA H100 80GB HBM3", Count: 1, Devices: 3.0 / 7},
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, allocated()) }, 5*time.Second, 10*time.Millisecond,
		"the claim as allocated: a whole GPU and a 3g.40gb MIG device, not the device held for admin access")
	a := store.Allocated(auth.AllNamespaces(), "")
	assert.InDelta(t, 1+3.0/7, a.GPU, 1e-9)
}

func TestRequestsHeld(t *testing.T) {
	reqs := []resourcev1.DeviceRequest{
		{Name: "a", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 4}},
		{Name: "b", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeAll}},
		{Name: "c", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "fpga.example.com", Count: 1}},
		{Name: "d", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}},
	}
	assert.Equal(t, accel.Holdings{{Kind: accel.GPU, Resource: "dra:gpu.nvidia.com", Count: 5, Devices: 5}}, requestsHeld(reqs),
		"all the devices of a class say no count; a class of no known driver is not counted; no count is 1")
	assert.Equal(t, "gpu.nvidia.com", classOf(reqs, "a"))
	assert.Empty(t, classOf(reqs, "x/y"))
}

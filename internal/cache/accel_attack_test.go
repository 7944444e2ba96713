package cache

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"ray-service/internal/accel"
	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// lastGPU records the GPUs of the last summary the observer (the utilization's accountant) is told of.
type lastGPU struct {
	mu  sync.Mutex
	gpu map[string]float64
}

func (o *lastGPU) Observe(_ *ray.Kind, u *unstructured.Unstructured, s *ray.Summary) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gpu[u.GetName()] = s.Requested.GPU
}
func (o *lastGPU) Gone(*ray.Kind, *Entry, []corev1.Pod) {}

// Requested takes the GPUs of the requests the store publishes anew; the test's objects are named by
// their UIDs.
func (o *lastGPU) Requested(uid types.UID, r ray.Resources) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gpu[string(uid)] = r.GPU
}
func (o *lastGPU) of(name string) (float64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.gpu[name]
	return g, ok
}

func draStore(t *testing.T, ob Observer) (*ray.Kinds, *dynamicfake.FakeDynamicClient, *fake.Clientset, *Store) {
	t.Helper()
	kinds := ray.NewKinds()
	dyn, core := fakeClients(kinds)
	store, err := NewStore(dyn, core, kinds, signer(t), 0)
	require.NoError(t, err)
	if ob != nil {
		store.SetObserver(ob)
	}
	store.Start(t.Context())
	require.True(t, store.WaitForSync(t.Context()))
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "resourceclaims"}, {Name: "resourceclaimtemplates"}, {Name: "resourceslices"}}}}
	store.checkDRA(disc)
	require.True(t, store.dra.started.Load())
	return kinds, dyn, core, store
}

// Attack: a tenant takes its GPUs through a ResourceClaimTemplate. The summary counts them, but the
// utilization is told of the object's own summary (no claims): its GPU hours are 0.
func TestAttackDRAGPUsNotBilled(t *testing.T) {
	ob := &lastGPU{gpu: map[string]float64{}}
	kinds, dyn, core, store := draStore(t, ob)
	ctx := t.Context()
	template := func(name string) {
		_, err := core.ResourceV1().ResourceClaimTemplates("team").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8}}}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return store.claimTemplate("team", name) != nil }, 5*time.Second, 10*time.Millisecond)
	}
	cluster := func(name, claimTemplate string) {
		u := raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, name, map[string]any{"state": "ready"})
		u.SetUID(types.UID(name))
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
		g := groups[0].(map[string]any)
		require.NoError(t, unstructured.SetNestedSlice(g, []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": claimTemplate}}, "template", "spec", "resourceClaims"))
		require.NoError(t, unstructured.SetNestedField(g, int64(1), "replicas"))
		require.NoError(t, unstructured.SetNestedSlice(u.Object, groups, "spec", "workerGroupSpecs"))
		_, err := dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	published := func(name string) float64 {
		for _, it := range store.Items(kinds.Cluster(), Scopes{Instances: auth.AllNamespaces()}) {
			if it.Summary.Name == name {
				return it.Summary.Requested.GPU
			}
		}
		return -1
	}

	// The claim template is there first.
	template("eight")
	cluster("demo", "eight")
	require.Eventually(t, func() bool { return published("demo") >= 8 }, 5*time.Second, 10*time.Millisecond, "the published summary counts 8 GPUs")
	billed, ok := ob.of("demo")
	require.True(t, ok)
	assert.InDelta(t, published("demo"), billed, 1e-9, "the utilization is told of the GPUs the published summary counts, its claims' included")

	// The claim template comes after the cluster: the utilization is told of its GPUs when it does.
	cluster("later", "late")
	require.Eventually(t, func() bool { return published("later") >= 0 }, 5*time.Second, 10*time.Millisecond)
	first := published("later")
	template("late")
	require.Eventually(t, func() bool { return published("later") == first+8 }, 5*time.Second, 10*time.Millisecond, "the published summary counts the template's 8 GPUs")
	require.Eventually(t, func() bool { g, _ := ob.of("later"); return g == first+8 }, 5*time.Second, 10*time.Millisecond,
		"the utilization is told of the template's GPUs")
}

// Attack: a claim of 8 GPUs shared by one Ray pod and 7 idle pods that are no Ray pods (no GPU of their
// own): the Ray pod, which uses all 8, is counted 1/8 of them in the overview. (Consumers of one claim
// are in one namespace; the test's pods share a UID, which the cache reads only to tell a consumer is
// the pod of its name.)
func TestAttackSharedClaimDilutedByNonRayPods(t *testing.T) {
	_, _, core, store := draStore(t, nil)
	ctx := t.Context()
	devices := make([]resourcev1.Device, 8)
	results := make([]resourcev1.DeviceRequestAllocationResult, 8)
	for i := range devices {
		devices[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3")}}
		results[i] = resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.nvidia.com", Pool: "n", Device: devices[i].Name}
	}
	_, err := core.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new("n"), Pool: resourcev1.ResourcePool{Name: "n", ResourceSliceCount: 1}, Devices: devices}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	reserved := make([]resourcev1.ResourceClaimConsumerReference, 8)
	for i := range reserved {
		reserved[i] = resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("p%d", i), UID: "u"}
	}
	_, err = core.ResourceV1().ResourceClaims("team").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "r",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 8}}}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}, ReservedFor: reserved}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.claim("team", "shared") != nil }, 5*time.Second, 10*time.Millisecond)
	pod := raytest.Pod("p0", "demo", ray.NodeTypeWorker, "small", true)
	pod.UID = "u"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: new("shared")}}
	_, err = core.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return store.Allocated(auth.AllNamespaces(), "").GPU > 0 }, 5*time.Second, 10*time.Millisecond)
	assert.InDelta(t, 8.0, store.Allocated(auth.AllNamespaces(), "").GPU, 1e-9, "the only Ray pod of the claim holds its 8 GPUs")

	// A second Ray pod among the consumers shares it: each holds half, and Ray holds the 8 still.
	other := raytest.Pod("p1", "demo", ray.NodeTypeWorker, "small", true)
	other.UID = "u"
	other.Spec.ResourceClaims = pod.Spec.ResourceClaims
	_, err = core.CoreV1().Pods("team").Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(store.podsIn(auth.AllNamespaces(), nil)) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.InDelta(t, 4.0, store.podClaims(pod).Devices(accel.GPU), 1e-9, "one of two Ray pods sharing the claim holds half")
	assert.InDelta(t, 8.0, store.Allocated(auth.AllNamespaces(), "").GPU, 1e-9, "two Ray pods sharing the claim hold its 8 GPUs")
}

// Attack: claim templates whose requests the service cannot value before allocation (a firstAvailable
// list whose cheap first choice is not taken, allocationMode All, a device class of the tenant's own that
// selects NVIDIA's GPUs) are allocated whole GPUs: the cluster's summary (what is billed) counts the GPUs
// its pods' claims hold.
func TestAttackClaimTemplatesUndervalued(t *testing.T) {
	kinds, dyn, core, store := draStore(t, nil)
	ctx := t.Context()
	devices := make([]resourcev1.Device, 8)
	for i := range devices {
		devices[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3")}}
	}
	_, err := core.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new("n"), Pool: resourcev1.ResourcePool{Name: "n", ResourceSliceCount: 1}, Devices: devices}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	templates := map[string]resourcev1.DeviceRequest{
		"first-cheap": {Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "mig", DeviceClassName: "mig.nvidia.com", Count: 1}, {Name: "whole", DeviceClassName: "gpu.nvidia.com", Count: 2}}},
		"all":  {Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeAll}},
		"mine": {Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "tenant-gpus", Count: 2}},
	}
	results := map[string][]string{"first-cheap": {"r/whole", "r/whole"}, "all": {"r", "r", "r", "r"}, "mine": {"r", "r"}}
	next := 0
	for name, req := range templates {
		_, err := core.ResourceV1().ResourceClaimTemplates("team").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		// The claim the controller made for the cluster's one worker pod, allocated.
		var res []resourcev1.DeviceRequestAllocationResult
		for _, r := range results[name] {
			res = append(res, resourcev1.DeviceRequestAllocationResult{Request: r, Driver: "gpu.nvidia.com", Pool: "n", Device: fmt.Sprintf("gpu-%d", next)})
			next++
		}
		claim := name + "-w-gpus-x"
		_, err = core.ResourceV1().ResourceClaims("team").Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Annotations: map[string]string{resourcev1.PodResourceClaimAnnotation: "gpus"}},
			Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: res}},
				ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name + "-w", UID: types.UID(name + "-w")}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return store.claim("team", claim) != nil && store.claimTemplate("team", name) != nil }, 5*time.Second, 10*time.Millisecond)

		u := raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, name, map[string]any{"state": "ready"})
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
		g := groups[0].(map[string]any)
		require.NoError(t, unstructured.SetNestedSlice(g, []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": name}}, "template", "spec", "resourceClaims"))
		require.NoError(t, unstructured.SetNestedField(g, int64(1), "replicas"))
		require.NoError(t, unstructured.SetNestedSlice(u.Object, groups, "spec", "workerGroupSpecs"))
		_, err = dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
		pod := raytest.Pod(name+"-w", name, ray.NodeTypeWorker, "small", true)
		pod.UID = types.UID(name + "-w")
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: new(name)}}
		pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: new(claim)}}
		_, err = core.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	claimed := func(h accel.Holdings) float64 {
		var n float64
		for _, x := range h {
			if strings.HasPrefix(x.Resource, accel.DRAPrefix) {
				n += x.Devices
			}
		}
		return n
	}
	gpus := func(name string) float64 {
		for _, it := range store.Items(kinds.Cluster(), Scopes{Instances: auth.AllNamespaces()}) {
			if it.Summary.Name == name {
				return claimed(it.Summary.Requested.Accelerators)
			}
		}
		return -1
	}
	for name, n := range map[string]int{"first-cheap": 2, "all": 4, "mine": 2} {
		require.Eventually(t, func() bool { return gpus(name) == float64(n) }, 5*time.Second, 10*time.Millisecond,
			"%s: the summary counts the %d GPUs its pod's claim was allocated (it says %v)", name, n, gpus(name))
	}
	// The overview counts the same.
	assert.InDelta(t, 8.0, claimed(store.Allocated(auth.AllNamespaces(), "").Accelerators), 1e-9)
}

// Attack: a claim of its own name, named by the cluster's template, carries the annotation the
// apiserver writes on claims made for a pod, so that the service would not publish the cluster again when
// the claim is allocated: the summary counts it once allocated all the same.
func TestAttackClaimPassedOffAsMadeForAPod(t *testing.T) {
	kinds, dyn, core, store := draStore(t, nil)
	ctx := t.Context()
	_, err := core.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new("n"), Pool: resourcev1.ResourcePool{Name: "n", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3")}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "team-gpu", Annotations: map[string]string{resourcev1.PodResourceClaimAnnotation: "gpus"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "tenant-gpus", Count: 1}}}}}}
	_, err = core.ResourceV1().ResourceClaims("team").Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)
	u := raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, "demo", map[string]any{"state": "ready"})
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "gpus", "resourceClaimName": "team-gpu"}},
		"spec", "headGroupSpec", "template", "spec", "resourceClaims"))
	_, err = dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	model := func() string {
		items := store.Items(kinds.Cluster(), Scopes{Instances: auth.AllNamespaces()})
		if len(items) != 1 {
			return ""
		}
		for _, x := range items[0].Summary.Requested.Accelerators {
			if x.Resource == accel.DRAPrefix+"tenant-gpus" {
				return x.Model
			}
		}
		return "none"
	}
	require.Eventually(t, func() bool { return model() == "none" }, 5*time.Second, 10*time.Millisecond, "a class the service cannot value counts nothing before allocation")

	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "r", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0"}}}}
	_, err = core.ResourceV1().ResourceClaims("team").UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return model() == "NVIDIA H100 80GB HBM3" }, 5*time.Second, 10*time.Millisecond,
		"the summary counts the GPU the claim was allocated")
}

// Attack: a cluster whose pods' claims hold more than its templates can say (allocationMode All: 4
// GPUs) is billed them once the store publishes it; then the tenant edits the cluster (a label): the
// utilization is told of the new version valued on its templates alone (no GPU), and the store, whose
// published requests did not change, tells it nothing more: the GPUs are billed no longer.
func TestAttackEditDropsPodClaimsFromBilling(t *testing.T) {
	ob := &lastGPU{gpu: map[string]float64{}}
	kinds, dyn, core, store := draStore(t, ob)
	ctx := t.Context()
	devices := make([]resourcev1.Device, 4)
	var res []resourcev1.DeviceRequestAllocationResult
	for i := range devices {
		devices[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3")}}
		res = append(res, resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.nvidia.com", Pool: "n", Device: devices[i].Name})
	}
	_, err := core.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new("n"), Pool: resourcev1.ResourcePool{Name: "n", ResourceSliceCount: 1}, Devices: devices}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	req := resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeAll}}
	_, err = core.ResourceV1().ResourceClaimTemplates("team").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = core.ResourceV1().ResourceClaims("team").Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-w-gpus-x"},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: res}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "demo-w", UID: "demo-w"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return store.claim("team", "demo-w-gpus-x") != nil && store.claimTemplate("team", "all") != nil
	}, 5*time.Second, 10*time.Millisecond)

	pod := raytest.Pod("demo-w", "demo", ray.NodeTypeWorker, "small", true)
	pod.UID = "demo-w"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: new("all")}}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: new("demo-w-gpus-x")}}
	_, err = core.CoreV1().Pods("team").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(store.ClusterPods("team", "demo")) == 1 }, 5*time.Second, 10*time.Millisecond)

	u := raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, "demo", map[string]any{"state": "ready"})
	u.SetUID("demo")
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
	g := groups[0].(map[string]any)
	require.NoError(t, unstructured.SetNestedSlice(g, []any{map[string]any{"name": "gpus", "resourceClaimTemplateName": "all"}}, "template", "spec", "resourceClaims"))
	require.NoError(t, unstructured.SetNestedField(g, int64(1), "replicas"))
	require.NoError(t, unstructured.SetNestedSlice(u.Object, groups, "spec", "workerGroupSpecs"))
	created, err := dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	billed := func() float64 { g, _ := ob.of("demo"); return g }
	require.Eventually(t, func() bool { return billed() >= 4 }, 5*time.Second, 10*time.Millisecond, "the utilization is told of the 4 GPUs")

	// The edit: a label, nothing the requests depend on.
	created.SetLabels(map[string]string{"touched": "yes"})
	created.SetResourceVersion("2")
	_, err = dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	published := -1.0
	require.Eventually(t, func() bool {
		for _, it := range store.Items(kinds.Cluster(), Scopes{Instances: auth.AllNamespaces()}) {
			if it.Summary.Name == "demo" && slices.Contains(it.Labels, ray.LabelPair{Key: "touched", Value: "yes"}) {
				published = it.Summary.Requested.GPU
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the edit is published")
	require.GreaterOrEqual(t, published, 4.0, "the published summary counts the 4 GPUs of the pod's claim")
	assert.InDelta(t, published, billed(), 1e-9, "the utilization still bills the GPUs the published summary counts, its pods' claims'")
}

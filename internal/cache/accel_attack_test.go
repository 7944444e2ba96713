package cache

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	listKinds := map[schema.GroupVersionResource]string{ray.PodGroupResource(): "PodGroupList", ray.WorkloadResource(): "WorkloadList"}
	for _, gvr := range ray.GangPodGroupResources() {
		listKinds[gvr] = "PodGroupList"
	}
	for _, k := range kinds.All() {
		listKinds[k.GVR()] = k.Kind + "List"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	core := fake.NewSimpleClientset()
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

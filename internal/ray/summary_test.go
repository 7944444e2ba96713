package ray

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"ray-service/internal/accel"
	"ray-service/internal/ray/raytest"
)

func container(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container(list("cpu", "100m", "memory", "64Mi"), nil)
	sidecar.RestartPolicy = &always
	pod := corev1.PodSpec{
		InitContainers: []corev1.Container{
			container(list("cpu", "3", "memory", "1Gi"), nil), // larger CPU than the app containers
			sidecar,
		},
		Containers: []corev1.Container{
			container(list("cpu", "500m", "memory", "2Gi"), nil),
			container(nil, list("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "2")), // requests default to limits
			container(list("huawei.com/Ascend910", "1"), list("huawei.com/Ascend910", "1")),
			container(list("huawei.com/Ascend310P", "2"), nil),
		},
		Overhead: list("cpu", "250m", "memory", "128Mi"),
	}
	got := PodRequests(pod)
	// app: cpu 1.5 + sidecar 0.1 = 1.6, init max 3 -> 3; memory app 3Gi+64Mi vs init 1Gi -> app; + overhead
	assert.InDelta(t, 3.25, got.CPU, 1e-9)
	assert.Equal(t, int64(3<<30+64<<20+128<<20), got.MemoryBytes)
	assert.InDelta(t, 2.0, got.GPU, 0)
	assert.InDelta(t, 3.0, got.NPU, 0)
	assert.Equal(t, accel.Holdings{
		{Kind: accel.GPU, Resource: "nvidia.com/gpu", Count: 2, Devices: 2},
		{Kind: accel.NPU, Resource: "huawei.com/Ascend310P", Model: "Ascend310P", Count: 2, Devices: 2},
		{Kind: accel.NPU, Resource: "huawei.com/Ascend910", Model: "Ascend910", Count: 1, Devices: 1},
	}, got.Accelerators, "raw counts beside the equivalents")
}

// Slices count as their share of a device: eight 4-core vNPUs of a 32-core chip are one chip, two
// mig-3g.40gb of an H100 6/7 of a GPU, a shared GPU's replica a quarter of one on a node sharing each GPU
// four ways; the node's labels say the denominators, and where they do not the vendors' defaults are
// taken and the holding says estimated.
func TestPodRequestsOfSlices(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{
		container(list("huawei.com/Ascend910-4c", "1"), nil),
		container(list("nvidia.com/mig-3g.40gb", "2", "nvidia.com/gpu.shared", "1"), nil),
	}}
	node := accel.Node{NPUCores: 32, GPUReplicas: 4, GPUProduct: "H100-80GB-HBM3"}
	on := PodRequestsOn(pod, node, false)
	var eight Resources
	eight.Add(on, 8)
	assert.InDelta(t, 8*(1.0/8), eight.NPU, 1e-9)
	assert.InDelta(t, 8*(6.0/7+0.25), eight.GPU, 1e-9)
	for _, h := range eight.Accelerators {
		assert.False(t, h.Estimated, h.Resource)
	}
	assert.InDelta(t, 8.0, eight.Accelerators[2].Count, 0, "eight raw vNPUs")
	template := PodRequests(pod)
	assert.InDelta(t, 4.0/32, template.NPU, 1e-9, "a plain 910 template is cut from a 32-core chip")
	assert.True(t, template.Accelerators[0].Estimated, "replicas unknown off a node")
	// Soft sharing: 50 of huawei.com/Ascend910 is half a chip.
	fifty := corev1.PodSpec{Containers: []corev1.Container{container(list("huawei.com/Ascend910", "50"), nil)}}
	sharing := node
	sharing.NPUSoftShare = true
	soft := PodRequestsOn(fifty, sharing, true)
	assert.InDelta(t, 0.5, soft.NPU, 1e-9)
	// A pod annotated so on a node that gives whole chips holds 50 of them, and is counted so.
	assert.InDelta(t, 50.0, PodRequestsOn(fifty, node, true).NPU, 1e-9)
}

func TestSummarizeRayCluster(t *testing.T) {
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(raytest.ClusterYAML), &u.Object))
	k, _ := NewKinds().Lookup("rayclusters")
	s := k.Summarize(u)
	assert.Equal(t, "Running", s.Status)
	assert.Equal(t, "2.41.0", s.RayVersion)
	assert.Equal(t, "alice", s.Creator)
	assert.Equal(t, "rayproject/ray:2.41.0", s.Image)
	assert.Equal(t, TypeInstance, s.Type)
	assert.InDelta(t, 0.5, s.Head.Resources.CPU, 1e-9)
	require.Len(t, s.WorkerGroups, 3)
	assert.Equal(t, WorkerGroup{Name: "small", Replicas: 3, MinReplicas: 1, MaxReplicas: 5,
		Resources:    Resources{CPU: 1, MemoryBytes: 1 << 30, GPU: 1, Accelerators: accel.Holdings{{Kind: accel.GPU, Resource: "nvidia.com/gpu", Count: 1, Devices: 1}}},
		RayResources: NewLogical(map[string]float64{"CPU": 1, "GPU": 1, "memory": 1 << 30})}, s.WorkerGroups[0])
	assert.Equal(t, int64(0), s.WorkerGroups[2].Replicas, "a suspended group runs no replicas")
	// head 0.5 + 3*1 + 2 replicas * 2 hosts * 2 = 11.5 CPU
	assert.InDelta(t, 11.5, s.Requested.CPU, 1e-9)
	assert.Equal(t, int64(500<<20+3<<30), s.Requested.MemoryBytes)
	assert.InDelta(t, 3.0, s.Requested.GPU, 0)
}

func TestCreatorLabelValue(t *testing.T) {
	assert.Equal(t, "admin", CreatorLabelValue("admin"))
	assert.Equal(t, "system_serviceaccount_ns_sa", CreatorLabelValue("system:serviceaccount:ns:sa"))
	assert.Equal(t, "user_example.com", CreatorLabelValue("user@example.com"))
	assert.Equal(t, "x", CreatorLabelValue(":x:"))
	long := CreatorLabelValue(string(make([]byte, 0)) + "a" + string(bytesOf('b', 80)))
	assert.Len(t, long, 63)
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestRayResources(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{
		container(list("cpu", "1500m", "memory", "2Gi"), list("cpu", "2500m", "nvidia.com/gpu", "2", "huawei.com/Ascend910", "1")),
		container(list("cpu", "8"), nil), // a sidecar: Ray does not count it
	}}
	assert.Equal(t, map[string]float64{"CPU": 3, "GPU": 2, "NPU": 1, "memory": 2 << 30}, LogicalResources(nil, pod).Map(),
		"from the Ray container's limits, CPUs rounded up")
	params := map[string]any{"num-cpus": "0", "num-gpus": int64(1), "memory": "1000",
		"resources": `'{\"TPU\": 4, \"special\": 1}'`}
	assert.Equal(t, map[string]float64{"GPU": 1, "NPU": 1, "memory": 1000, "TPU": 4, "special": 1}, LogicalResources(params, pod).Map(),
		"rayStartParams win; num-cpus 0 offers no CPU")
}

// podSpecOf reads what the unstructured converter decodes of the fields summaries use, from every pod
// template of the project's manifests and from templates with numbers, sidecars and overhead.
func TestPodSpecOfReadsAsTheConverter(t *testing.T) {
	var templates []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if spec, ok := x["spec"].(map[string]any); ok {
				if _, ok := spec["containers"]; ok {
					templates = append(templates, x)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	files, err := filepath.Glob("../../test/integration/testdata/ray*.yaml")
	require.NoError(t, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(data, &obj), file)
		walk(obj)
	}
	require.NotEmpty(t, templates, "pod templates in the manifests")
	synthetic := `
spec:
  overhead: {cpu: 250m, memory: 64Mi}
  initContainers:
  - {name: setup, image: busybox, resources: {requests: {cpu: 2, memory: 1Gi}}}
  - {name: sidecar, image: envoy, restartPolicy: Always, resources: {limits: {cpu: 0.5, memory: 128Mi}}}
  containers:
  - name: ray-head
    image: rayproject/ray:2.41.0
    resources:
      requests: {cpu: 1.5, memory: "3221225472", nvidia.com/gpu: 1}
      limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1", huawei.com/Ascend910: 8}
  - {name: logs, image: fluent-bit, resources: {requests: {cpu: 100m}}}
`
	var tmpl map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(synthetic), &tmpl))
	templates = append(templates, tmpl)
	// As the apiserver's JSON decodes: whole numbers as int64.
	data, err := json.Marshal(tmpl)
	require.NoError(t, err)
	var asDecoded map[string]any
	require.NoError(t, utiljson.Unmarshal(data, &asDecoded))
	templates = append(templates, asDecoded)
	for i, tmpl := range templates {
		var want corev1.PodSpec
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl["spec"].(map[string]any), &want), "template %d", i)
		got := podSpecOf(tmpl)
		assert.Equal(t, PodRequests(want), PodRequests(got), "template %d: requests", i)
		assert.Equal(t, LogicalResources(nil, want), LogicalResources(nil, got), "template %d: Ray resources", i)
		require.Len(t, got.Containers, len(want.Containers), "template %d", i)
		for j := range want.Containers {
			assert.Equal(t, want.Containers[j].Image, got.Containers[j].Image, "template %d", i)
		}
	}
	t.Logf("%d pod templates compared", len(templates))
}

// A summary's estimated equivalents are valued again on what the nodes agree on once they say it: a
// shared GPU's replica is a whole GPU until the nodes say they share each GPU four ways.
func TestWithDevices(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{container(list("nvidia.com/gpu.shared", "1", "nvidia.com/gpu", "1"), nil)}}
	var s Summary
	s.Head.Resources = PodRequests(pod)
	s.WorkerGroups = []WorkerGroup{{Name: "w", Replicas: 2, Resources: PodRequests(pod)}}
	s.Requested.Add(s.Head.Resources, 1)
	s.Requested.Add(s.WorkerGroups[0].Resources, 2)
	assert.InDelta(t, 6.0, s.Requested.GPU, 1e-9)
	assert.Same(t, &s, WithDevices(&s, accel.Node{}), "nothing known: nothing changes")
	got := WithDevices(&s, accel.Node{GPUReplicas: 4, GPUProduct: "A100-SXM4-80GB"})
	require.NotSame(t, &s, got)
	assert.InDelta(t, 3*1.25, got.Requested.GPU, 1e-9)
	assert.InDelta(t, 1.25, got.WorkerGroups[0].Resources.GPU, 1e-9)
	assert.InDelta(t, 1.25, got.Head.Resources.GPU, 1e-9)
	assert.False(t, got.Requested.Accelerators[1].Estimated)
	assert.InDelta(t, 6.0, s.Requested.GPU, 1e-9, "the summary given is not changed")
	assert.True(t, s.WorkerGroups[0].Resources.Accelerators[1].Estimated)
}

package ray

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"ray-service/internal/accel"
)

// Attack: a template (or a pod) with thousands of distinct accelerator names the patterns accept
// (nvidia.com/mig-<g>g.<m>gb, huawei.com/Ascend910-<n>c.<anything>) makes a summary with as many
// holdings, each merged in order: memory and JSON without bound and quadratic time.
func TestAttackManyAcceleratorNames(t *testing.T) {
	list := corev1.ResourceList{}
	for i := range 20000 {
		list[corev1.ResourceName(fmt.Sprintf("nvidia.com/mig-1g.%dgb", i+1))] = resource.MustParse("1")
	}
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: list}}}}
	start := time.Now()
	r := PodRequestsOn(pod, accel.Node{}, false)
	t.Logf("%d holdings in %s", len(r.Accelerators), time.Since(start))
	assert.LessOrEqual(t, len(r.Accelerators), 64, "a summary's holdings are bounded")
}

// Attack: a template's container asks a negative count (the RayCluster CRD accepts any quantity;
// only a pod's would be refused): the summary, which the utilization bills, nets it off.
func TestAttackNegativeAccelerators(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}},
		{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/mig-7g.80gb": resource.MustParse("-8")}}},
	}}
	r := PodRequestsOn(pod, accel.Node{}, false)
	assert.GreaterOrEqual(t, r.GPU, 8.0, "a negative request counts no less")
}

// Attack: an init container asking NPU slices makes the larger sum, and the pod's GPUs (its app's)
// are dropped: the scheduler takes the larger per resource, the pod holds both.
func TestAttackInitContainerHidesGPUs(t *testing.T) {
	pod := corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}},
		InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"huawei.com/npu-core": resource.MustParse("240")}}}},
	}
	r := PodRequestsOn(pod, accel.Node{}, false)
	assert.InDelta(t, 8.0, r.GPU, 1e-9, "the app's GPUs count")
}

// Attack: the RayCluster CRD takes any key in a container's resources (additionalProperties), and the
// patterns accept any suffix (nvidia.com/mig-1g.10gb.<anything>): a template names a resource of 100
// KB, which no pod could ever be given (a resource's name is a qualified name). The summary shows it,
// the utilization's mark carries it as JSON and every credit writes it into usage_accelerators' key,
// which PostgreSQL's index refuses past 2704 bytes: the whole credit of every object fails with it.
func TestAttackLongAcceleratorName(t *testing.T) {
	long := make([]byte, 100_000)
	for i := range long {
		long[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7919+i/36)%36]
	}
	name := corev1.ResourceName("nvidia.com/mig-1g.10gb." + string(long))
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{name: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("2")}}}}}
	r := PodRequestsOn(pod, accel.Node{}, false)
	for _, h := range r.Accelerators {
		assert.LessOrEqual(t, len(h.Resource), 253+1+63, "a holding's resource is a resource's name")
	}
	assert.InDelta(t, 2.0, r.GPU, 1e-9, "a resource no pod may be given holds nothing")
}

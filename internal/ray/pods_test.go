package ray

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

func rayPod(name, cluster, nodeType string, containers ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{RayClusterLabel: cluster, RayNodeTypeLabel: nodeType}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	return p
}

func TestLogTargetDefaults(t *testing.T) {
	reg := NewKinds()
	service, _ := reg.Lookup("rayservices")
	svc := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"activeServiceStatus":  map[string]any{"rayClusterName": "svc-b"},
		"pendingServiceStatus": map[string]any{"rayClusterName": "svc-a"},
	}}}
	pods := []corev1.Pod{rayPod("svc-a-head", "svc-a", "head", "ray-head"), rayPod("svc-b-head", "svc-b", "head", "ray-head", "sidecar"),
		rayPod("svc-b-worker", "svc-b", "worker", "ray-worker")}
	p, c, err := service.LogTarget(svc, pods, "", "")
	require.NoError(t, err)
	assert.Equal(t, "svc-b-head", p.Name, "the active cluster's head, though the pending one sorts first")
	assert.Equal(t, "ray-head", c)
	_, c, err = service.LogTarget(svc, pods, "svc-b-head", "sidecar")
	require.NoError(t, err)
	assert.Equal(t, "sidecar", c)
	_, _, err = service.LogTarget(svc, pods, "other-pod", "")
	assert.True(t, apierrors.IsBadRequest(err))
	_, _, err = service.LogTarget(svc, pods, "svc-b-worker", "ray-head")
	assert.True(t, apierrors.IsBadRequest(err), "a container the pod does not have")

	job, _ := reg.Lookup("rayjobs")
	j := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "j"},
		"status": map[string]any{"rayClusterName": "j-x"}}}
	submitter := rayPod("j-abcde", "", "", "ray-job-submitter")
	submitter.Labels = map[string]string{JobNameLabel: "j"}
	p, c, err = job.LogTarget(j, []corev1.Pod{rayPod("j-x-head", "j-x", "head", "ray-head"), submitter}, "", "")
	require.NoError(t, err)
	assert.Equal(t, "j-abcde", p.Name)
	assert.Equal(t, "ray-job-submitter", c)

	waiting := rayPod("j-x-head", "j-x", "head", "ray-head")
	waiting.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
	_, _, err = job.LogTarget(j, []corev1.Pod{waiting}, "j-x-head", "")
	assert.True(t, apierrors.IsConflict(err))
	assert.Contains(t, err.Error(), "ImagePullBackOff")
}

// In SidecarMode (KubeRay v1.6) the submitter is container ray-job-submitter of the head pod, appended
// after the Ray container (rayjob_controller.go constructRayClusterForRayJob): the driver log is there.
func TestLogTargetSidecarMode(t *testing.T) {
	job, _ := NewKinds().Lookup("rayjobs")
	j := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "j"},
		"spec": map[string]any{"submissionMode": "SidecarMode"}, "status": map[string]any{"rayClusterName": "j-x"}}}
	p, c, err := job.LogTarget(j, []corev1.Pod{rayPod("j-x-head", "j-x", "head", "ray-head", "ray-job-submitter"),
		rayPod("j-x-worker", "j-x", "worker", "ray-worker")}, "", "")
	require.NoError(t, err)
	assert.Equal(t, "j-x-head", p.Name)
	assert.Equal(t, "ray-job-submitter", c)
}

// A name past 63 characters (Kubernetes allows 253 in an object's name) is no label value: no pod
// carries it, and the apiserver refuses a selector with it, so it is left out.
func TestPodSelectorsLeaveOutNamesNoLabelHolds(t *testing.T) {
	reg := NewKinds()
	job, _ := reg.Lookup("rayjobs")
	long := strings.Repeat("long-", 50) + "abc"
	fits := strings.Repeat("a", 63)
	assert.Equal(t, []string{"ray.io/cluster in (a," + fits + ")", "batch.kubernetes.io/job-name=j"},
		job.PodSelectors("j", []string{"a", long, fits}))
	assert.Equal(t, []string{"batch.kubernetes.io/job-name=" + fits}, job.PodSelectors(fits, []string{long}))
	assert.Empty(t, job.PodSelectors(long, []string{long}))
	assert.Empty(t, reg.Cluster().PodSelectors(long, []string{long}))
	for _, sel := range job.PodSelectors("j", []string{"a", fits}) {
		_, err := labels.Parse(sel)
		require.NoError(t, err, sel)
	}
}

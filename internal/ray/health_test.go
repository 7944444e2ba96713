package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray/raytest"
)

// healthCluster is a RayCluster with one worker group of two, in the given state and conditions.
func healthCluster(state string, conds ...map[string]any) Summary {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": map[string]any{"name": "c", "namespace": "team"},
		"spec": map[string]any{"headGroupSpec": map[string]any{}, "workerGroupSpecs": []any{
			map[string]any{"groupName": "workers", "replicas": int64(2), "maxReplicas": int64(4)}}},
		"status": map[string]any{"state": state},
	}}
	if len(conds) > 0 {
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		o.Object["status"].(map[string]any)["conditions"] = list
	}
	return NewKinds().Cluster().Summarize(o)
}

func readyPod(name, nodeType string) *corev1.Pod {
	return raytest.Pod(name, "c", nodeType, map[string]string{NodeTypeHead: "headgroup"}[nodeType]+map[string]string{NodeTypeWorker: "workers"}[nodeType], true)
}

func withPods(s Summary, pods ...*corev1.Pod) *Summary {
	return NewKinds().Cluster().WithPods(&s, pods, nil)
}

// What each case of an object and its pods makes of its health, and the problem it names first.
func TestHealth(t *testing.T) {
	oom := readyPod("c-workers-b", NodeTypeWorker)
	oom.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray-worker", Ready: false, RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}
	oom.Status.Conditions = nil

	unschedulable := raytest.Pod("c-workers-b", "c", NodeTypeWorker, "workers", false)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
		LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}}

	pulling := raytest.Pod("c-workers-b", "c", NodeTypeWorker, "workers", false)
	pulling.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray-worker",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"ray:none\""}}}}

	crashing := raytest.Pod("c-head-x", "c", NodeTypeHead, "headgroup", false)
	crashing.Status.Phase = corev1.PodRunning
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray-head", RestartCount: 4,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}

	// KubeRay v1.7's SidecarSubmitterRestart: the submitter sidecar of a RayJob's head restarts on failure
	// (restartPolicy OnFailure) while the head runs.
	submitterRestarts := readyPod("c-head-x", NodeTypeHead)
	submitterRestarts.Status.ContainerStatuses = append(submitterRestarts.Status.ContainerStatuses, corev1.ContainerStatus{
		Name: SubmitterContainer, RestartCount: 2,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}})

	evicted := raytest.Pod("c-workers-b", "c", NodeTypeWorker, "workers", false)
	evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."

	head, w1, w2 := readyPod("c-head-x", NodeTypeHead), readyPod("c-workers-a", NodeTypeWorker), readyPod("c-workers-b", NodeTypeWorker)
	for _, c := range []struct {
		what           string
		s              *Summary
		state, reason  string
		message        string
		problemsSource string
	}{
		{"running, every worker ready", withPods(healthCluster("ready"), head, w1, w2), HealthHealthy, "Running", "", ""},
		{"running, a worker not ready yet", withPods(healthCluster("ready"), head, w1), HealthProgressing, "WorkersNotReady", "1 of 2 workers are ready", ""},
		{"head ready, a worker unschedulable", withPods(healthCluster("ready"), head, w1, unschedulable), HealthDegraded, "Unschedulable",
			"0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", "c-workers-b"},
		{"pending, an image that cannot be pulled", withPods(healthCluster(""), head, w1, pulling), HealthDegraded, "ImagePullBackOff",
			`container ray-worker: Back-off pulling image "ray:none"`, "c-workers-b"},
		{"a head that crash-loops", withPods(healthCluster("ready"), crashing, w1, w2), HealthFailed, "CrashLoopBackOff",
			"container ray-head: CrashLoopBackOff; it last ended Error with exit code 1", "c-head-x"},
		{"a submitter sidecar that restarts", withPods(healthCluster("ready"), submitterRestarts, w1, w2), HealthDegraded, "CrashLoopBackOff",
			"container ray-job-submitter: CrashLoopBackOff; it last ended Error with exit code 1", "c-head-x"},
		{"a worker killed for memory", withPods(healthCluster("ready"), head, w1, oom), HealthDegraded, "OOMKilled",
			"container ray-worker was killed for using more memory than its limit (exit code 137)", "c-workers-b"},
		{"an evicted worker", withPods(healthCluster("ready"), head, w1, evicted), HealthDegraded, "Evicted", "The node was low on resource: memory.", "c-workers-b"},
		{"suspended", withPods(healthCluster("suspended"), head), HealthStopped, "Stopped", "", ""},
		{"provisioning, the head not ready", withPods(healthCluster("", map[string]any{"type": "HeadPodReady", "status": "False",
			"reason": "HeadPodNotFound", "message": "no head pod yet", "lastTransitionTime": "2026-01-02T03:04:05Z"})),
			HealthProgressing, "HeadPodNotFound", "no head pod yet", ""},
		{"pods the operator cannot create", withPods(healthCluster("", map[string]any{"type": "ReplicaFailure", "status": "True",
			"reason": "FailedCreateWorkerPod", "message": "pods \"x\" is forbidden: exceeded quota"})),
			HealthFailed, "FailedCreateWorkerPod", "pods \"x\" is forbidden: exceeded quota", "c"},
	} {
		assert.Equal(t, c.state, c.s.Health.State, c.what)
		assert.Equal(t, c.reason, c.s.Health.Reason, c.what)
		assert.Equal(t, c.message, c.s.Health.Message, c.what)
		if c.problemsSource == "" {
			assert.Empty(t, c.s.Problems(), c.what)
		} else {
			require.NotEmpty(t, c.s.Problems(), c.what)
			assert.Equal(t, c.problemsSource, c.s.Problems()[0].Source.Name, c.what)
		}
	}
	s := withPods(healthCluster("ready"), head, w1, unschedulable)
	require.NotNil(t, s.Health.Since)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), *s.Health.Since, "since the pod could not be scheduled")
}

// A RayJob whose deployment failed is Failed with KubeRay's reason and message; one that succeeded is
// Healthy; a template is Stopped.
func TestHealthOfOtherKinds(t *testing.T) {
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": map[string]any{"name": "j", "namespace": "team"},
		"spec":   map[string]any{"entrypoint": "python x.py"},
		"status": map[string]any{"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded", "message": "the job ran past activeDeadlineSeconds"},
	}}
	k, _ := NewKinds().Lookup("rayjobs")
	s := k.Summarize(job)
	assert.Equal(t, Health{State: HealthFailed, Reason: "DeadlineExceeded", Message: "the job ran past activeDeadlineSeconds"}, s.Health)
	job.Object["status"] = map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
	assert.Equal(t, HealthHealthy, k.Summarize(job).Health.State)

	tpl := healthCluster("")
	tpl.Type, tpl.Status = TypeTemplate, StatusStopped
	NewKinds().Cluster().deriveHealth(&tpl, nil)
	assert.Equal(t, HealthStopped, tpl.Health.State)
	assert.Equal(t, "Template", tpl.Health.Reason)
}

// Warning events explain what is not well: a Ray cluster still on its way with a warning about it is
// Degraded for the warning's reason; one running with every worker ready is not made otherwise by an
// old warning.
func TestHealthFromWarnings(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	warning := Problem{Source: InvolvedObjectRef{Kind: ClusterKind, Name: "c"}, Reason: "FailedToCreateHeadPod",
		Message: "pods \"c-head\" is forbidden: exceeded quota", Since: &at}
	k := NewKinds().Cluster()
	pending := healthCluster("")
	s := k.WithPods(&pending, nil, []Problem{warning})
	assert.Equal(t, Health{State: HealthDegraded, Reason: "FailedToCreateHeadPod", Message: warning.Message, Since: &at}, s.Health)
	assert.Equal(t, []Problem{warning}, s.Problems())

	running := healthCluster("ready")
	s = k.WithPods(&running, []*corev1.Pod{readyPod("c-head-x", NodeTypeHead), readyPod("c-workers-a", NodeTypeWorker),
		readyPod("c-workers-b", NodeTypeWorker)}, []Problem{warning})
	assert.Equal(t, HealthHealthy, s.Health.State)
	assert.Empty(t, s.Problems())
}

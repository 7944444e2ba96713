//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Gang scheduling by Kubernetes itself, as KubeRay v1.7.0's KubernetesWAS batch scheduler asks for it
// (ray-operator/controllers/ray/batchscheduler/kubernetes-was/v1alpha2/kubernetes_was_v1alpha2.go), with the
// real kube-scheduler of the stack (1.37, GenericWorkload on: stack/up.sh) deciding.
//
// The stack's operator is KubeRay v1.6, which makes no Workload and whose pods cannot name a scheduling
// group (its k8s.io/api v0.35 PodSpec has no schedulingGroup). So the RayCluster says it is managed
// elsewhere (spec.managedBy, which v1.6 honours: raycluster_controller.go ManagedByExternalController) and
// the test plays the v1.7 operator: the Workload named after the cluster, the PodGroup <cluster>-cluster with
// the gang's minCount (head and workers), both labelled ray.io/cluster and controlled by the RayCluster, and
// the pods labelled as common/pod.go labelPod does, naming the PodGroup in spec.schedulingGroup. v1.7 writes
// scheduling.k8s.io/v1alpha2, which 1.37 no longer serves; the test writes the same objects at v1beta1
// (whose PodGroup names its template in spec.workloadRef {workloadName, templateName}, v1alpha2's
// spec.podGroupTemplateRef.workload {workloadName, podGroupTemplateName}).
//
// The pods select a node label no node has: the real scheduler cannot place the gang and writes so on the
// PodGroup (PodGroupInitiallyScheduled False, reason Unschedulable). The detail, the list and the health
// show the manager, the group and that reason and message. Then a node gets the label: the scheduler places
// the gang whole, and the cluster no longer waits.
func TestKubernetesGangWait(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "wasgang")
	admin := env.tokens["admin"]
	ctx := context.Background()
	pool := "ray-service.test/pool-" + ns
	const name, pgName, minCount = "gang", "gang-cluster", 3

	owner := gangCluster(t, ns, name)
	makeGang(t, ns, name, owner, minCount)

	// The head and two workers, a core each, as the RayCluster asks.
	podGroupName := pgName
	cpu := resource.MustParse("1")
	for i, p := range []struct{ pod, nodeType, group string }{
		{name + "-head-x7k2p", "head", "headgroup"}, {name + "-workers-worker-a1b2c", "worker", "workers"}, {name + "-workers-worker-d3e4f", "worker", "workers"},
	} {
		_, err := env.admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.pod, Namespace: ns, OwnerReferences: owner, Labels: map[string]string{
				"ray.io/is-ray-node": "yes", "ray.io/cluster": name, "ray.io/node-type": p.nodeType, "ray.io/group": p.group,
				"ray.io/identifier": name + "-" + p.nodeType, "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}},
			Spec: corev1.PodSpec{
				SchedulerName:   corev1.DefaultSchedulerName,
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &podGroupName},
				NodeSelector:    map[string]string{pool: "yes"},
				Containers: []corev1.Container{{Name: fmt.Sprintf("ray-%s", p.nodeType), Image: "rayproject/ray:2.46.0",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, "pod %d", i)
	}

	// The real scheduler's verdict, as it wrote it.
	var verdict *metav1.Condition
	eventually(t, 60*time.Second, "the scheduler's verdict on the gang", func() bool {
		pg, err := env.admin.SchedulingV1beta1().PodGroups(ns).Get(ctx, pgName, metav1.GetOptions{})
		require.NoError(t, err)
		verdict = meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		return verdict != nil
	})
	require.Equal(t, metav1.ConditionFalse, verdict.Status, "%+v", verdict)
	require.Equal(t, schedulingv1beta1.PodGroupReasonUnschedulable, verdict.Reason)
	require.NotEmpty(t, verdict.Message)
	t.Logf("the scheduler's verdict: %s: %s", verdict.Reason, verdict.Message)

	type item struct {
		Status     string      `json:"status"`
		Health     health      `json:"health"`
		Scheduling *scheduling `json:"scheduling"`
	}
	want := &scheduling{Manager: "kubernetes", Group: pgName, Phase: "Pending", Reason: "Unschedulable", Message: verdict.Message, MinMember: minCount}
	waiting := func(it item) bool { return it.Scheduling != nil && it.Health.Reason == "WaitingInQueue" }
	var d item
	eventually(t, 30*time.Second, "waiting for its gang, in the detail", func() bool {
		d = decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", name), admin, "", nil))
		return waiting(d) && d.Scheduling.Message == verdict.Message
	})
	assert.Equal(t, want, d.Scheduling)
	assert.Equal(t, "Progressing", d.Health.State)
	assert.Equal(t, "waiting for kubernetes to place its 3 pods at once (PodGroup gang-cluster): "+verdict.Message, d.Health.Message)
	l := decode[struct{ Items []item }](t, call(t, "GET", nsPath(ns, "rayclusters"), admin, "", nil))
	if assert.Len(t, l.Items, 1) {
		assert.Equal(t, want, l.Items[0].Scheduling, "the list item")
		assert.Equal(t, d.Health.Message, l.Items[0].Health.Message)
	}

	// The Kubernetes scheduler has no queue: the queues route lists none for it.
	var ql struct {
		Items []struct{ Manager, Name string }
	}
	r := call(t, "GET", "/rest/ray/v1/queues", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	require.NoError(t, json.Unmarshal(r.Data, &ql))
	for _, q := range ql.Items {
		assert.NotEqual(t, "kubernetes", q.Manager, "no queue of the Kubernetes scheduler: %+v", q)
	}

	// Room appears: a node gets the label the pods select; the scheduler places the gang whole.
	label := func(value any) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{pool: value}}})
		require.NoError(t, err)
		_, err = env.admin.CoreV1().Nodes().Patch(ctx, "kwok-node-1", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	label("yes")
	t.Cleanup(func() { label(nil) })
	eventually(t, 60*time.Second, "the gang placed, no longer waiting", func() bool {
		d = decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", name), admin, "", nil))
		return d.Scheduling != nil && d.Scheduling.Phase == "Scheduled" && d.Health.Reason != "WaitingInQueue"
	})
	pg, err := env.admin.SchedulingV1beta1().PodGroups(ns).Get(ctx, pgName, metav1.GetOptions{})
	require.NoError(t, err)
	verdict = meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	require.NotNil(t, verdict)
	assert.Equal(t, metav1.ConditionTrue, verdict.Status, "the scheduler's own word: %+v", verdict)
	assert.Equal(t, "kubernetes", d.Scheduling.Manager)
	assert.Empty(t, d.Scheduling.Reason)
	// The scheduler writes its verdict on the PodGroup, then binds the pods: each bound, in time.
	eventually(t, 30*time.Second, "every pod of the gang bound to the labelled node", func() bool {
		pods, err := env.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + name})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "kwok-node-1" {
				return false
			}
		}
		return true
	})
}

// gangCluster creates, as the admin, a RayCluster labelled for gang scheduling that the stack's v1.6
// operator leaves alone (spec.managedBy), and returns the reference KubeRay v1.7 makes what it makes of
// it controlled by (ctrl.SetControllerReference: controller and blockOwnerDeletion).
func gangCluster(t *testing.T, ns, name string) []metav1.OwnerReference {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(mustRename(t, "raycluster-minimal.yaml", name), &obj))
	obj["metadata"].(map[string]any)["labels"] = map[string]any{"ray.io/gang-scheduling-enabled": "true"}
	obj["spec"].(map[string]any)["managedBy"] = "kueue.x-k8s.io/multikueue"
	body, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayclusters"), env.tokens["admin"], "application/json", body)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	made, err := getRay(t, rayClusters, ns, name)
	require.NoError(t, err)
	yes := true
	return []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: name, UID: made.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes}}
}

// makeGang makes what KubeRay v1.7 makes of a gang-scheduled cluster name (TestKubernetesGangWait cites
// it): the Workload of its name and the PodGroup <name>-cluster with the gang's minCount, labelled
// ray.io/cluster and controlled by owner, at the v1beta1 the stack serves.
func makeGang(t *testing.T, ns, name string, owner []metav1.OwnerReference, minCount int32) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"ray.io/cluster": name}
	gang := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}
	_, err := env.admin.SchedulingV1beta1().Workloads(ns).Create(ctx, &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, OwnerReferences: owner},
		Spec: schedulingv1beta1.WorkloadSpec{
			ControllerRef:     &schedulingv1beta1.TypedLocalObjectReference{APIGroup: "ray.io", Kind: "RayCluster", Name: name},
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{Name: "cluster", SchedulingPolicy: gang}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-cluster", Namespace: ns, Labels: labels, OwnerReferences: owner},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef:      &schedulingv1beta1.WorkloadReference{WorkloadName: name, TemplateName: "cluster"},
			SchedulingPolicy: gang,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

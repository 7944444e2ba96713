//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Attack: hide a Ray cluster's wait for its gang. KubeRay v1.7.0 makes one Kubernetes PodGroup for a
// gang-scheduled cluster, <cluster>-cluster, controlled by the RayCluster (kubernetes_was_v1alpha2.go
// clusterPodGroupName, SetControllerReference), and the scheduler writes on it why it cannot place the gang.
// A tenant who may create PodGroups in the namespace (and read the RayCluster's UID) makes a decoy
// PodGroup of another name controlled by the same RayCluster, then deletes it: the decoy must not stand
// for the cluster's gang, and its deletion must not erase what the real PodGroup says. The test plays the
// operator and the scheduler (as TestKubernetesGangWait shows them) by writing the PodGroup and its
// PodGroupInitiallyScheduled condition (k8s.io/api v0.37.2 scheduling/v1beta1/types.go).
func TestGangPodGroupDecoyAttack(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "gangdecoy")
	admin := env.tokens["admin"]
	ctx := context.Background()
	const name, pgName = "gang", "gang-cluster"
	user, token := tenant(t, ns, "mallory")
	grantRole(t, ns, user, "podgroups", rbacv1.PolicyRule{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"podgroups"},
		Verbs: []string{"create", "delete", "get", "list"}})

	// Two gang-scheduled clusters the stack's v1.6 operator leaves alone (spec.managedBy): the target, and a
	// witness whose PodGroup's changes tell when the service's watch of PodGroups has seen what came before.
	owners := map[string][]metav1.OwnerReference{}
	for _, c := range []string{name, "witness"} {
		owners[c] = gangCluster(t, ns, c)
	}
	gang := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}
	podGroup := func(pg, cluster string) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: pg, Namespace: ns, OwnerReferences: owners[cluster],
			Labels: map[string]string{"ray.io/cluster": cluster}}, Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: gang}}
	}
	// verdict writes the scheduler's PodGroupInitiallyScheduled False on a PodGroup.
	verdict := func(pg, why string) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
			"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable", "message": why,
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}})
		require.NoError(t, err)
		_, err = env.admin.SchedulingV1beta1().PodGroups(ns).Patch(ctx, pg, types.MergePatchType, b, metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
	type item struct {
		Health     health      `json:"health"`
		Scheduling *scheduling `json:"scheduling"`
	}
	show := func(c string) item {
		return decode[item](t, call(t, "GET", itemPath(ns, "rayclusters", c), admin, "", nil))
	}
	const why = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
	waits := func(it item) bool {
		return it.Scheduling != nil && it.Scheduling.Group == pgName && it.Scheduling.Message == why &&
			it.Health.Reason == "WaitingInQueue"
	}
	for _, c := range []string{name, "witness"} {
		_, err := env.admin.SchedulingV1beta1().PodGroups(ns).Create(ctx, podGroup(c+"-cluster", c), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	verdict(pgName, why)
	eventually(t, 30*time.Second, "waiting for its gang", func() bool { return waits(show(name)) })
	// seen waits until the service shows the witness's latest verdict: every PodGroup event before it is
	// handled (one watch, in order).
	seen := func(step string) {
		t.Helper()
		verdict("witness-cluster", step)
		eventually(t, 30*time.Second, "the witness at "+step, func() bool {
			it := show("witness")
			return it.Scheduling != nil && it.Scheduling.Message == step
		})
	}

	// The decoy, made and deleted as the tenant.
	cfg := seeingCredentials(&rest.Config{Host: env.vars["KUBE_APISERVER_URL"], BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.vars["KUBE_CA_FILE"]}})
	as, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = as.SchedulingV1beta1().PodGroups(ns).Create(ctx, podGroup("decoy", name), metav1.CreateOptions{})
	require.NoError(t, err, "the tenant may make PodGroups")
	seen("decoy made")
	it := show(name)
	assert.True(t, waits(it), "a decoy PodGroup stands for the cluster's gang: %+v %+v", it.Scheduling, it.Health)
	require.NoError(t, as.SchedulingV1beta1().PodGroups(ns).Delete(ctx, "decoy", metav1.DeleteOptions{}))
	seen("decoy deleted")
	it = show(name)
	assert.True(t, waits(it), "the decoy's deletion erased the real PodGroup's verdict: %+v %+v", it.Scheduling, it.Health)
}

package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray/raytest"
)

// gangPodGroup is the PodGroup KubeRay v1.7.0 makes for Ray cluster demo at apiVersion, with the
// scheduler's condition (nil: none yet).
func gangPodGroup(apiVersion string, cond map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "PodGroup",
		"metadata": map[string]any{"name": GangPodGroupName("demo"), "namespace": "team"},
		"spec":     map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(5)}}}}}
	if cond != nil {
		u.Object["status"] = map[string]any{"conditions": []any{cond}}
	}
	return u
}

// The scheduler's verdict on a gang reads alike from Kubernetes 1.37 (v1beta1, PodGroupInitiallyScheduled)
// and 1.36 (v1alpha2, PodGroupScheduled): pending without a word until it tried, waiting with its reason and
// message while it cannot place the gang, scheduled once it did.
func TestGangPodGroupState(t *testing.T) {
	const why = "0/2 nodes are available: 2 Insufficient cpu."
	fresh := GangPodGroupState(gangPodGroup("scheduling.k8s.io/v1beta1", nil))
	assert.Equal(t, &Scheduling{Manager: ManagerKubernetes, Group: "demo-cluster", Phase: GangPhasePending, MinMember: 5}, fresh)
	assert.False(t, fresh.Waiting(), "not tried yet: says nothing")

	for _, c := range []struct{ version, condition string }{
		{"scheduling.k8s.io/v1beta1", "PodGroupInitiallyScheduled"}, {"scheduling.k8s.io/v1alpha2", "PodGroupScheduled"},
	} {
		st := GangPodGroupState(gangPodGroup(c.version, map[string]any{"type": c.condition, "status": "False",
			"reason": "Unschedulable", "message": why, "lastTransitionTime": "2026-12-03T08:00:00Z"}))
		assert.Equal(t, &Scheduling{Manager: ManagerKubernetes, Group: "demo-cluster", Phase: GangPhasePending, Reason: "Unschedulable",
			Message: why, Since: new(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)), MinMember: 5}, st, c.version)
		assert.True(t, st.Waiting(), c.version)
		placed := GangPodGroupState(gangPodGroup(c.version, map[string]any{"type": c.condition, "status": "True", "reason": "Scheduled"}))
		assert.Equal(t, GangPhaseScheduled, placed.Phase, c.version)
		assert.False(t, placed.Waiting(), c.version)
	}

	k := rayClusterKind()
	pending := k.Summarize(raytest.Manifest(t, "RayCluster", k.ClusterSpecPath, "demo", nil))
	require.Equal(t, StatusPending, pending.Status)
	st := GangPodGroupState(gangPodGroup("scheduling.k8s.io/v1beta1", map[string]any{"type": "PodGroupInitiallyScheduled",
		"status": "False", "reason": "Unschedulable", "message": why}))
	s := k.WithScheduling(&pending, st)
	assert.Equal(t, HealthProgressing, s.Health.State)
	assert.Equal(t, ReasonWaitingInQueue, s.Health.Reason)
	assert.Equal(t, "waiting for kubernetes to place its 5 pods at once (PodGroup demo-cluster): "+why, s.Health.Message)
	assert.True(t, st.OwnGroup("demo"))
	assert.False(t, st.OwnGroup("job"), "a RayJob's cluster's group is the cluster's")
}

// Of several managers' groups of one object, the one holding it back speaks; else the gang, then Kueue,
// then Volcano.
func TestPickScheduling(t *testing.T) {
	volcano := &Scheduling{Manager: ManagerVolcano}
	waitingVolcano := &Scheduling{Manager: ManagerVolcano, Phase: "Inqueue", Reason: "NotEnoughResources"}
	gang := &Scheduling{Manager: ManagerKubernetes, Phase: GangPhaseScheduled}
	kueue := &Scheduling{Manager: ManagerKueue, Phase: "Admitted"}
	assert.Nil(t, PickScheduling(nil))
	assert.Same(t, gang, PickScheduling(map[string]*Scheduling{ManagerVolcano: volcano, ManagerKubernetes: gang}))
	assert.Same(t, kueue, PickScheduling(map[string]*Scheduling{ManagerVolcano: volcano, ManagerKueue: kueue}))
	assert.Same(t, waitingVolcano, PickScheduling(map[string]*Scheduling{ManagerVolcano: waitingVolcano, ManagerKubernetes: gang}))
}

// Only the PodGroup KubeRay makes for a cluster, <cluster>-cluster controlled by that RayCluster, is its
// gang: one of another name, or controlled by another kind (a RayJob, a RayService), which anyone who may
// make PodGroups could make, stands for nothing.
func TestGangPodGroupOwner(t *testing.T) {
	yes := true
	owned := func(name, kind, owner string) *unstructured.Unstructured {
		u := gangPodGroup("scheduling.k8s.io/v1beta1", nil)
		u.SetName(name)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: owner, UID: "u", Controller: &yes}})
		return u
	}
	kind, name := GangPodGroupOwner(owned("demo-cluster", "RayCluster", "demo"))
	assert.Equal(t, []string{"RayCluster", "demo"}, []string{kind, name})
	for _, u := range []*unstructured.Unstructured{owned("decoy", "RayCluster", "demo"), owned("demo-cluster", "RayJob", "demo"),
		owned("demo-cluster", "RayService", "demo"), gangPodGroup("scheduling.k8s.io/v1beta1", nil)} {
		kind, name := GangPodGroupOwner(u)
		assert.Empty(t, kind+name, "%s %v", u.GetName(), u.GetOwnerReferences())
	}
}

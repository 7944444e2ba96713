package ray

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Gang scheduling by Kubernetes itself (workload-aware scheduling), as KubeRay v1.7.0 hands a Ray cluster
// to it (operator feature gate KubernetesWAS, exclusive of --batch-scheduler; ray-operator/controllers/ray/
// batchscheduler/kubernetes-was/v1alpha2/kubernetes_was_v1alpha2.go): for a RayCluster labelled
// ray.io/gang-scheduling-enabled=true (case-insensitive, line 353) and not autoscaling, it makes a
// scheduling.k8s.io Workload named after the cluster (lines 242-263) and one PodGroup for the whole cluster,
// named <cluster>-cluster (clusterPodGroupName, line 375), both labelled ray.io/cluster=<cluster> and
// controlled by the RayCluster (SetControllerReference, line 284), the PodGroup's gang minCount being the
// head and every desired worker (line 234); every pod of the cluster names the PodGroup in
// spec.schedulingGroup.podGroupName (line 381). A RayJob's cluster carries the RayJob's labels
// (rayjob_controller.go line 999), so the group is the cluster's, owned by it, not the RayJob's.
//
// KubeRay v1.7.0 writes scheduling.k8s.io/v1alpha2, which only Kubernetes 1.36 serves (KubeRay's
// docs/guidance/kubernetes-was.md: "the version is removed in 1.37"). Kubernetes 1.37 serves the same
// objects as v1beta1 (k8s.io/api v0.37.2 scheduling/v1beta1/types.go, behind the GenericWorkload gate and
// runtime-config scheduling.k8s.io/v1beta1) and its scheduler writes that version (kubernetes v1.37.2
// pkg/scheduler/util/utils.go PatchPodGroupStatus). The service reads whichever of the two the cluster
// serves, v1beta1 first (GangPodGroupResources): what it reads (owner, minCount, conditions) is at the same
// place in both. The scheduler's verdict is a condition of the PodGroup (the Workload has no status):
// PodGroupInitiallyScheduled in 1.37 (pkg/scheduler/schedule_one_podgroup.go lines 887-920: True, reason
// Scheduled; False, reason Unschedulable or SchedulerError, its message the scheduler's), PodGroupScheduled
// in 1.36 (k8s.io/api v0.36.1 scheduling/v1alpha2/types.go line 506).
const (
	// ManagerKubernetes names the Kubernetes scheduler, gang scheduling through a PodGroup, as the manager
	// of a Ray cluster. It has no queue: the object waits for its gang to be placed whole.
	ManagerKubernetes = "kubernetes"
	// GangSchedulingLabel opts a RayCluster in to KubeRay's gang scheduling (ray-operator/controllers/ray/
	// utils/constant.go RayGangSchedulingEnabled).
	GangSchedulingLabel = "ray.io/gang-scheduling-enabled"
	// GangPhaseScheduled is the phase of a PodGroup the scheduler placed whole once; GangPhasePending of
	// one it has not.
	GangPhaseScheduled = "Scheduled"
	GangPhasePending   = "Pending"
)

// GangPodGroupResources are the resources of Kubernetes' PodGroups the service can read, preferred first:
// the service follows the first the cluster serves.
func GangPodGroupResources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"},
		{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "podgroups"},
	}
}

// GangPodGroupName is the PodGroup KubeRay v1.7.0 makes for a Ray cluster.
func GangPodGroupName(cluster string) string { return cluster + "-cluster" }

// GangPodGroupOwner names the Ray cluster a Kubernetes PodGroup is the gang of: the RayCluster that
// controls it, where the PodGroup bears the one name KubeRay v1.7.0 gives it (GangPodGroupName), the
// name its pods name in spec.schedulingGroup.podGroupName. Any other PodGroup, whoever controls it, is
// not the gang the scheduler places the cluster's pods in, and says nothing of it: "" for none. Its
// name taken by KubeRay's, another of that name cannot be made beside it.
func GangPodGroupOwner(pg *unstructured.Unstructured) (kind, name string) {
	kind, name = GroupOwner(pg)
	if kind != ClusterKind || pg.GetName() != GangPodGroupName(name) {
		return "", ""
	}
	return kind, name
}

// GangPodGroupState reads where a Kubernetes PodGroup stands: Scheduled once the scheduler placed it
// whole, else Pending and, once the scheduler tried, why it could not.
func GangPodGroupState(pg *unstructured.Unstructured) *Scheduling {
	s := &Scheduling{Manager: ManagerKubernetes, Group: Clip(pg.GetName(), MaxNameBytes), Phase: GangPhasePending}
	s.MinMember, _ = nestedInt(pg.Object, "spec", "schedulingPolicy", "gang", "minCount")
	for _, c := range nestedSlice(pg.Object, "status", "conditions") {
		cm, _ := c.(map[string]any)
		if t := cm["type"]; t != "PodGroupInitiallyScheduled" && t != "PodGroupScheduled" {
			continue
		}
		if cm["status"] == "True" {
			s.Phase, s.Reason, s.Message, s.Since = GangPhaseScheduled, "", "", nil
			return s
		}
		s.heldBy(cm)
	}
	return s
}

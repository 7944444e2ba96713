package k8s

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/auth"
)

// KindCount counts the objects of a kind: all of them (templates too), and those active (not Stopped,
// Succeeded or Failed).
type KindCount struct {
	Total  int `json:"total"`
	Active int `json:"active"`
}

// Count counts items of kind k: all of them, and those active.
func (k *Kind) Count(items []*Item) KindCount {
	c := KindCount{Total: len(items)}
	for _, it := range items {
		if k.Active(it.Summary.Status) {
			c.Active++
		}
	}
	return c
}

// Allocation is what Ray pods request: Kubernetes resources and Ray logical resources.
type Allocation struct {
	Resources
	// Ray are the Ray logical resources the pods' Ray nodes offer, by name (CPU, GPU, memory, ...).
	Ray map[string]float64 `json:"ray"`
	// ActiveRayClusters counts the Ray clusters with at least one running pod.
	ActiveRayClusters int `json:"-"`
}

// Allocated sums the effective requests of every Pending or Running Ray pod in the scope, of one Ray
// cluster when cluster is not "".
func (s *Store) Allocated(scope auth.Scope, cluster string) Allocation {
	a := Allocation{Ray: map[string]float64{}}
	var sel labels.Selector
	if cluster != "" {
		sel = labels.SelectorFromSet(labels.Set{RayClusterLabel: cluster})
	}
	active := map[string]bool{}
	for _, p := range s.podsIn(scope, sel) {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			active[p.Namespace+"/"+p.Labels[RayClusterLabel]] = true
		}
		a.Add(PodRequests(p.Spec), 1)
		it, ok := s.clusterItem(p.Namespace, p.Labels[RayClusterLabel])
		if !ok {
			continue
		}
		ray := it.Summary.Head.RayResources
		if p.Labels[RayNodeTypeLabel] != NodeTypeHead {
			ray = nil
			for _, g := range it.Summary.WorkerGroups {
				if g.Name == p.Labels[RayGroupLabel] {
					ray = g.RayResources
				}
			}
		}
		for _, r := range ray {
			a.Ray[r.Name] += r.Value
		}
	}
	a.ActiveRayClusters = len(active)
	return a
}

package cache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// Allocation is what Ray pods request: Kubernetes resources and Ray logical resources.
type Allocation struct {
	ray.Resources
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
		sel = labels.SelectorFromSet(labels.Set{ray.RayClusterLabel: cluster})
	}
	active := map[string]bool{}
	for _, p := range s.podsIn(scope, sel) {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			active[p.Namespace+"/"+p.Labels[ray.RayClusterLabel]] = true
		}
		a.Add(ray.PodRequests(p.Spec), 1)
		it, ok := s.clusterItem(p.Namespace, p.Labels[ray.RayClusterLabel])
		if !ok {
			continue
		}
		offered := it.Summary.Head.RayResources
		if p.Labels[ray.RayNodeTypeLabel] != ray.NodeTypeHead {
			offered = nil
			for _, g := range it.Summary.WorkerGroups {
				if g.Name == p.Labels[ray.RayGroupLabel] {
					offered = g.RayResources
				}
			}
		}
		for _, r := range offered {
			a.Ray[r.Name] += r.Value
		}
	}
	a.ActiveRayClusters = len(active)
	return a
}

// Count counts items of kind k: all of them, and those active.
func Count(k *ray.Kind, items []*Item) ray.KindCount {
	c := ray.KindCount{Total: len(items)}
	for _, it := range items {
		if k.Active(it.Summary.Status) {
			c.Active++
		}
	}
	return c
}

package k8s

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// KindCount counts the objects of a kind: all of them (templates too), and those active (not Stopped,
// Succeeded or Failed).
type KindCount struct {
	Total  int `json:"total"`
	Active int `json:"active"`
}

// CountItems counts items: all of them, and those active (not Stopped, Succeeded or Failed).
func CountItems(items []Item) KindCount {
	c := KindCount{Total: len(items)}
	for _, it := range items {
		switch it.Summary.Status {
		case StatusStopped, StatusSucceeded, StatusFailed:
		default:
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

// Allocated sums the effective requests of every Pending or Running Ray pod in the given namespaces
// ([""]: all), of one Ray cluster when cluster is not "".
func (s *Store) Allocated(namespaces []string, cluster string) Allocation {
	a := Allocation{Ray: map[string]float64{}}
	var sel labels.Selector
	if cluster != "" {
		sel = labels.SelectorFromSet(labels.Set{RayClusterLabel: cluster})
	}
	active := map[string]bool{}
	rayClusters := s.kinds.byResource["rayclusters"]
	for _, ns := range namespaces {
		for _, p := range s.Pods(ns, sel) {
			if p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
				continue
			}
			key := p.Namespace + "/" + p.Labels[RayClusterLabel]
			if p.Status.Phase == corev1.PodRunning {
				active[key] = true
			}
			a.Add(PodRequests(p.Spec), 1)
			e, ok := s.entry(rayClusters, p.Namespace, p.Labels[RayClusterLabel])
			if !ok {
				continue
			}
			ray := e.Summary.Head.RayResources
			if p.Labels[RayNodeTypeLabel] != NodeTypeHead {
				ray = nil
				for _, g := range e.Summary.WorkerGroups {
					if g.Name == p.Labels[RayGroupLabel] {
						ray = g.RayResources
					}
				}
			}
			for n, v := range ray {
				a.Ray[n] += v
			}
		}
	}
	a.ActiveRayClusters = len(active)
	return a
}

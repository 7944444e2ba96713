package cache

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/accel"
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
// cluster when cluster is not "". A sum is kept until a pod or a RayCluster changes: every overview
// asks for it, and a thousand pods take a millisecond to sum.
func (s *Store) Allocated(scope auth.Scope, cluster string) Allocation {
	at := [2]uint64{s.podsSeq.Load(), s.Version(s.kinds.Cluster())}
	key := cluster + "\x00*"
	if !scope.IsAll() {
		key = cluster + "\x00" + strings.Join(scope.List(), ",")
	}
	s.allocMu.Lock()
	if s.allocAt != at || s.allocKept == nil || len(s.allocKept) >= maxAllocKept {
		s.allocAt, s.allocKept = at, map[string]Allocation{}
	}
	kept, ok := s.allocKept[key]
	s.allocMu.Unlock()
	if !ok {
		kept = s.allocate(scope, cluster)
		s.allocMu.Lock()
		if s.allocAt == at {
			s.allocKept[key] = kept
		}
		s.allocMu.Unlock()
	}
	kept.Ray = maps.Clone(kept.Ray)
	return kept
}

// maxAllocKept bounds the sums kept: one per scope and cluster asked for since the last change.
const maxAllocKept = 256

func (s *Store) allocate(scope auth.Scope, cluster string) Allocation {
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
		_, soft := p.Annotations[accel.SoftShareAnnotation]
		a.Add(ray.PodRequestsOn(p.Spec, s.kinds.Devices().Of(p.Spec.NodeName), soft), 1)
		if held := s.podClaims(p); len(held) > 0 {
			a.Add(ray.HeldResources(held), 1)
		}
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

// Count counts the items of k that Items would return for the scopes: all of them, and those active.
// Instances are counted per namespace as they are published, so that an overview of a hundred thousand
// objects walks namespaces, not objects; templates, which are few, are walked.
func (s *Store) Count(k *ray.Kind, sc Scopes) ray.KindCount {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var c ray.KindCount
	if k.Runs != nil {
		c.RunsActive = new(int)
	}
	each := func(ns string) {
		c.Total += len(s.instances[k][ns])
		c.Active += s.active[k][ns]
		if c.RunsActive != nil { // the makers of runs are few: walked
			for _, it := range s.instances[k][ns] {
				if it.Summary.Runs != nil {
					*c.RunsActive += it.Summary.Runs.Active
				}
			}
		}
	}
	if sc.Instances.IsAll() {
		for ns := range s.instances[k] {
			each(ns)
		}
	} else {
		for _, ns := range sc.Instances.List() {
			each(ns)
		}
	}
	if sc.Templates.IsEmpty() {
		return c
	}
	for _, t := range s.templated[k].in(sc.Templates) {
		if _, running := s.instances[k].get(t.Summary.Namespace, t.Summary.Name); !running {
			c.Total++
			if k.Active(t.Summary.Status) {
				c.Active++
			}
		}
	}
	return c
}

// EachRunState visits, for every published object of a kind that makes runs, what its runs are doing.
func (s *Store) EachRunState(visit func(kind, namespace, name string, runs *ray.RunsState)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range s.kinds.All() {
		if k.Runs == nil {
			continue
		}
		for ns, byName := range s.instances[k] {
			for name, it := range byName {
				if it.Summary.Runs != nil {
					visit(k.Kind, ns, name, it.Summary.Runs)
				}
			}
		}
	}
}

// countWaitingLocked keeps what an instance requests while a queue manager holds it back (its health
// says so), for Pending: only where the group is its own (ray.Scheduling.OwnGroup), so that a RayService
// or RayJob is not counted again for its clusters.
func (s *Store) countWaitingLocked(k *ray.Kind, it *Item) {
	sum := &it.Summary
	sch := sum.Scheduling
	if sum.WaitingInQueue() && sch.OwnGroup(sum.Name) {
		s.waiting[k].put(sum.Namespace, sum.Name, sum.Requested)
		return
	}
	s.waiting[k].remove(sum.Namespace, sum.Name)
}

// Pending sums what the instances of every kind in their scopes request while a queue manager has
// not admitted them: the demand waiting beside what is allocated.
func (s *Store) Pending(scopes map[*ray.Kind]Scopes) ray.Resources {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var total ray.Resources
	for k, sc := range scopes {
		for _, r := range s.waiting[k].in(sc.Instances) {
			total.Add(r, 1)
		}
	}
	return total
}

// EachDegraded visits every published object whose health is Degraded, for the service's metrics.
func (s *Store) EachDegraded(visit func(kind, namespace, name string)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range s.kinds.All() {
		for ns, byName := range s.instances[k] {
			for name, it := range byName {
				if it.Summary.Health.State == ray.HealthDegraded {
					visit(k.Kind, ns, name)
				}
			}
		}
	}
}

// EachIdle visits every Ray cluster the idle detection last found idle, with what it found, for the
// service's metrics: each cluster once, not again for the RayJob or RayService that runs on it.
func (s *Store) EachIdle(visit func(namespace, name string, idle *ray.Idle)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for ref, i := range s.idle {
		if i != nil {
			visit(ref.Namespace, ref.Name, i)
		}
	}
}

package cache

import (
	"maps"
	"reflect"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// IdleCandidate is a running Ray cluster the idle detection judges, as the cache holds it.
type IdleCandidate struct {
	ray.ClusterRef
	Summary ray.Summary
	// JobRunning: a RayJob runs its job on it now (a RayJob's cluster is idle only between jobs).
	JobRunning bool
	// OwnedBy is the kind that made it ("RayJob", "RayService"; "" for one made on its own): KubeRay's
	// labels ray.io/originated-from-crd and ray.io/originated-from-cr-name, believed only with the owner
	// reference KubeRay sets to that object, whose UID is the one the cache holds (ray.MadeBy), and where
	// that object's status names the cluster (ray.Names). Labels and references anyone may set would
	// otherwise exempt a cluster from its namespace's idle policy.
	OwnedBy string
	// StopAfter is its annotation ray.openfuyao.com/idle-stop-after, "" without.
	StopAfter string
	// Labels are its labels, for the subscriptions' selectors (shared with the cache: never changed).
	Labels ray.LabelSet
}

// IdleCandidates are the Ray clusters that are Running, each with whether a RayJob's job runs on it.
func (s *Store) IdleCandidates() []IdleCandidate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cluster := s.kinds.Cluster()
	jobs := map[ray.ClusterRef]bool{}
	for _, k := range s.kinds.All() {
		if !k.Finishes || k.IsCluster {
			continue
		}
		for ns, byName := range s.instances[k] {
			for _, it := range byName {
				if it.Summary.Status == ray.StatusRunning {
					for _, c := range k.Clusters(&it.Summary) {
						jobs[ray.ClusterRef{Namespace: ns, Name: c}] = true
					}
				}
			}
		}
	}
	var out []IdleCandidate
	for ns, byName := range s.instances[cluster] {
		for name, it := range byName {
			if it.Summary.Status != ray.StatusRunning {
				continue
			}
			ref := ray.ClusterRef{Namespace: ns, Name: name}
			out = append(out, IdleCandidate{ClusterRef: ref, Summary: it.Summary, JobRunning: jobs[ref],
				OwnedBy: s.makerLocked(ns, name, it.MadeBy), StopAfter: it.IdleStopAfter, Labels: it.Labels})
		}
	}
	return out
}

// makerLocked is the kind of the object m names where the cache holds that object with m's UID and its
// status names the cluster, else "".
func (s *Store) makerLocked(ns, cluster string, m *ray.Maker) string {
	if m == nil {
		return ""
	}
	k := s.kinds.ByKind(m.Kind)
	if k == nil || k.IsCluster {
		return ""
	}
	if it, ok := s.instances[k].get(ns, m.Name); ok && it.UID == m.UID && ray.Names(it.Makes, cluster) {
		return m.Kind
	}
	return ""
}

// SetIdle replaces what is idle by Ray cluster; each cluster whose idleness changed is published again,
// with what runs on it.
func (s *Store) SetIdle(idle map[ray.ClusterRef]*ray.Idle) {
	next := maps.Clone(idle)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.idle
	s.idle = next
	for ref, i := range next {
		if !reflect.DeepEqual(old[ref], i) {
			s.clusterChangedLocked(ref.Namespace, ref.Name)
		}
	}
	for ref := range old {
		if _, still := next[ref]; !still {
			s.clusterChangedLocked(ref.Namespace, ref.Name)
		}
	}
}

// idleLocked is the idleness of an object's Ray cluster: its own for a cluster, else that of the
// cluster it runs on now.
func (s *Store) idleLocked(k *ray.Kind, sum *ray.Summary) *ray.Idle {
	if len(s.idle) == 0 {
		return nil
	}
	name := sum.Name
	if !k.IsCluster {
		if name = k.CurrentCluster(sum); name == "" {
			return nil
		}
	}
	return s.idle[ray.ClusterRef{Namespace: sum.Namespace, Name: name}]
}

// IdleTotals counts the idle Ray clusters in scope and what they hold.
func (s *Store) IdleTotals(scope auth.Scope) (clusters int64, holding ray.Resources) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for ref, i := range s.idle {
		if scope.Contains(ref.Namespace) {
			clusters++
			holding.Add(i.Holding, 1)
		}
	}
	return clusters, holding
}

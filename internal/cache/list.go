package cache

import (
	"slices"

	"ray-service/internal/ray"
)

// Items returns the published instances of k in the instance scope and its templates in the template
// scope, leaving out a template whose instance exists: that template is a step of a start or stop, and
// the instance is what runs. The items are shared: callers must not change them.
func (s *Store) Items(k *ray.Kind, sc Scopes) []*Item {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.itemsLocked(k, sc)
}

func (s *Store) itemsLocked(k *ray.Kind, sc Scopes) []*Item {
	out := s.instances[k].in(sc.Instances)
	if sc.Templates.IsEmpty() {
		return out
	}
	for _, t := range s.templated[k].in(sc.Templates) {
		if _, running := s.instances[k].get(t.Summary.Namespace, t.Summary.Name); !running {
			out = append(out, t)
		}
	}
	return out
}

// List returns the page q asks for of the published instances of k in the instance scope and its
// templates in the template scope (see Items), and how many match in all. Without templates to merge
// it walks a kept order. The items are shared: callers must not change them.
func (s *Store) List(k *ray.Kind, sc Scopes, q *Query) ([]*Item, int) {
	s.sortViews(k)
	s.mu.RLock()
	if sc.Templates.IsEmpty() || len(s.templated[k]) == 0 {
		defer s.mu.RUnlock()
		return s.ordered[k].page(sc.Instances, q, s.instances[k].count)
	}
	s.mu.RUnlock()
	return q.Apply(s.Items(k, sc))
}

// Namespaces returns the namespaces that hold published instances or templates of k, sorted: where a
// caller without cluster-wide rights may have something to see.
func (s *Store) Namespaces(k *ray.Kind) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, m := range []namespaced[*Item]{s.instances[k], s.templated[k]} {
		for ns := range m {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sortViews makes the kept orders of k's items at the first list (see views.sort).
func (s *Store) sortViews(k *ray.Kind) {
	s.mu.RLock()
	sorted := s.ordered[k].sorted
	s.mu.RUnlock()
	if !sorted {
		s.mu.Lock()
		s.ordered[k].sort()
		s.mu.Unlock()
	}
}

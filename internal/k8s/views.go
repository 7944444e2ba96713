package k8s

import (
	"cmp"
	"slices"
	"strings"

	"ray-service/internal/auth"
)

// views are the published instances of one kind in every order a list can ask for, kept sorted as
// items are published, so that a list walks one order, counts what matches and copies only its page,
// instead of sorting everything for every request.
type views struct {
	orders map[string][]*Item // by sort key, ascending; ties by namespace, then name
}

func newViews() *views {
	v := &views{orders: map[string][]*Item{}}
	for _, key := range []string{SortByName, SortByCreatedAt, SortByStatus, SortByRayVersion} {
		v.orders[key] = nil
	}
	return v
}

// compareItems orders two items by a sort key, then by namespace, name and type: a total order over
// the instances of a kind.
func compareItems(key string, a, b *Item) int {
	return cmp.Or(lessFunc(key)(&a.Summary, &b.Summary), strings.Compare(a.Summary.Namespace, b.Summary.Namespace),
		strings.Compare(a.Summary.Name, b.Summary.Name), strings.Compare(a.Summary.Type, b.Summary.Type))
}

// replace puts item in every order in place of old (either may be nil).
func (v *views) replace(old, item *Item) {
	for key, order := range v.orders {
		if old != nil {
			if i, found := slices.BinarySearchFunc(order, old, func(x, t *Item) int { return compareItems(key, x, t) }); found {
				order = slices.Delete(order, i, i+1)
			}
		}
		if item != nil {
			i, _ := slices.BinarySearchFunc(order, item, func(x, t *Item) int { return compareItems(key, x, t) })
			order = slices.Insert(order, i, item)
		}
		v.orders[key] = order
	}
}

// page walks the order q asks for and returns the summaries of its page, and how many items in scope
// match in all. inScope counts the items in a scope: a query that filters nothing takes its total from
// it and stops walking at the end of its page.
func (v *views) page(scope auth.Scope, q *Query, inScope func(auth.Scope) int) (page []Summary, total int) {
	key := q.SortBy
	if _, ok := v.orders[key]; !ok {
		key = SortByCreatedAt
	}
	order := v.orders[key]
	search := strings.ToLower(q.Search)
	start := (q.Page - 1) * q.PageSize
	page = make([]Summary, 0, q.PageSize)
	counted := !q.filters()
	if counted {
		total = inScope(scope)
	}
	seen := 0
	visit := func(it *Item) bool {
		if !scope.Contains(it.Summary.Namespace) || !q.matches(it, search) {
			return true
		}
		if seen >= start && len(page) < q.PageSize {
			page = append(page, it.Summary)
		}
		seen++
		return !counted || len(page) < q.PageSize
	}
	if q.Desc {
		// Descending by the key, but ties stay ascending by namespace and name: each run of equal
		// keys is visited forwards.
		less := lessFunc(key)
		for end := len(order); end > 0; {
			start := end - 1
			for start > 0 && less(&order[start-1].Summary, &order[end-1].Summary) == 0 {
				start--
			}
			for _, it := range order[start:end] {
				if !visit(it) {
					return page, total
				}
			}
			end = start
		}
	} else {
		for _, it := range order {
			if !visit(it) {
				break
			}
		}
	}
	if !counted {
		total = seen
	}
	return page, total
}

package cache

import (
	"slices"
	"strings"
	"sync"

	"ray-service/internal/auth"
)

// views are the published instances of one kind in every order a list can ask for, kept sorted as
// items are published, so that a list walks one order, counts what matches and copies only its page,
// instead of sorting everything for every request.
type views struct {
	orders    map[string][]*Item              // by sort key, ascending
	ascending map[string]func(a, b *Item) int // order(key, false) of each key, made once

	// matches holds, for the last filtering queries, every item they matched in their order, so that
	// the next page or refresh of the same query copies its page without walking every item. Any
	// change to the items empties it. Guarded by mu: lists read it under the store's read lock.
	mu          sync.Mutex
	matches     map[string][]*Item
	matchedSize int // items held in matches, at most maxMatched

	// Until the first read (see sort), published items are only gathered: an informer's first list
	// of 100,000 objects, inserted one by one into four sorted orders, moved n²/4 pointers each.
	sorted  bool
	pending []*Item
	dropped map[*Item]bool
}

// maxMatchedQueries bounds the queries whose matches are kept; the items kept are at most
// maxMatchedFactor times the items of the kind (a pointer each).
const (
	maxMatchedQueries = 32
	maxMatchedFactor  = 4
)

func newViews() *views {
	v := &views{orders: map[string][]*Item{}, ascending: map[string]func(a, b *Item) int{}, matches: map[string][]*Item{}}
	for _, key := range []string{SortByName, SortByCreatedAt, SortByStatus, SortByRayVersion} {
		v.orders[key] = nil
		v.ascending[key] = order(key, false)
	}
	return v
}

// replace puts item in every order in place of old (either may be nil).
func (v *views) replace(old, item *Item) {
	v.mu.Lock()
	clear(v.matches)
	v.matchedSize = 0
	v.mu.Unlock()
	if !v.sorted {
		if old != nil {
			if v.dropped == nil {
				v.dropped = map[*Item]bool{}
			}
			v.dropped[old] = true
		}
		if item != nil {
			v.pending = append(v.pending, item)
		}
		return
	}
	for key, items := range v.orders {
		ascending := v.ascending[key]
		if old != nil {
			if i, found := slices.BinarySearchFunc(items, old, ascending); found {
				items = slices.Delete(items, i, i+1)
			}
		}
		if item != nil {
			i, _ := slices.BinarySearchFunc(items, item, ascending)
			items = slices.Insert(items, i, item)
		}
		v.orders[key] = items
	}
}

// sort makes the orders of the items gathered so far, once: from then on each change is put in place.
// It changes the views: the store calls it under its write lock.
func (v *views) sort() {
	if v.sorted {
		return
	}
	live := slices.DeleteFunc(v.pending, func(it *Item) bool { return v.dropped[it] })
	for key := range v.orders {
		v.orders[key] = slices.SortedFunc(slices.Values(live), v.ascending[key])
	}
	v.sorted, v.pending, v.dropped = true, nil, nil
}

// page walks the order q asks for and returns the items of its page, and how many items in scope
// match in all. inScope counts the items in a scope: a query that filters nothing takes its total from
// it and stops walking at the end of its page. A filtering query keeps what it matched for the next
// page or refresh of the same query, until the items change.
func (v *views) page(scope auth.Scope, q *Query, inScope func(auth.Scope) int) (page []*Item, total int) {
	v.sort() // done by the store before, under its write lock; here for the views' own tests
	key := q.SortBy
	if _, ok := v.orders[key]; !ok {
		key = SortByCreatedAt
	}
	start := (q.Page - 1) * q.PageSize
	if !q.filters() {
		page = make([]*Item, 0, q.PageSize)
		v.walk(key, q.Desc, func(it *Item) bool {
			if !scope.Contains(it.Summary.Namespace) {
				return true
			}
			if total >= start {
				page = append(page, it)
			}
			total++
			return len(page) < q.PageSize
		})
		return page, inScope(scope)
	}
	id := q.matchKey(key, scope)
	v.mu.Lock()
	matched, ok := v.matches[id]
	v.mu.Unlock()
	if !ok {
		search := strings.ToLower(q.Search)
		v.walk(key, q.Desc, func(it *Item) bool {
			if scope.Contains(it.Summary.Namespace) && q.matches(it, search) {
				matched = append(matched, it)
			}
			return true
		})
		v.keep(id, matched)
	}
	from, to := min(start, len(matched)), min(start+q.PageSize, len(matched))
	return append(make([]*Item, 0, to-from), matched[from:to]...), len(matched)
}

// matching returns every item in scope that q matches, in q's order, whatever its page.
func (v *views) matching(scope auth.Scope, q *Query) []*Item {
	v.sort() // as in page
	key := q.SortBy
	if _, ok := v.orders[key]; !ok {
		key = SortByCreatedAt
	}
	search := strings.ToLower(q.Search)
	var matched []*Item
	v.walk(key, q.Desc, func(it *Item) bool {
		if scope.Contains(it.Summary.Namespace) && q.matches(it, search) {
			matched = append(matched, it)
		}
		return true
	})
	return matched
}

// walk visits the items in the order of key, descending if desc, until visit returns false. Descending
// by the key, ties stay ascending by namespace and name: each run of equal keys is visited forwards.
func (v *views) walk(key string, desc bool, visit func(*Item) bool) {
	order := v.orders[key]
	if !desc {
		for _, it := range order {
			if !visit(it) {
				return
			}
		}
		return
	}
	less := lessFunc(key)
	for end := len(order); end > 0; {
		start := end - 1
		for start > 0 && less(&order[start-1].Summary, &order[end-1].Summary) == 0 {
			start--
		}
		for _, it := range order[start:end] {
			if !visit(it) {
				return
			}
		}
		end = start
	}
}

// keep keeps the matches of a query, making room within the bounds.
func (v *views) keep(id string, matched []*Item) {
	limit := maxMatchedFactor * len(v.orders[SortByName])
	if len(matched) > limit {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for old, items := range v.matches { // map order: an arbitrary query goes
		if len(v.matches) < maxMatchedQueries && v.matchedSize+len(matched) <= limit {
			break
		}
		delete(v.matches, old)
		v.matchedSize -= len(items)
	}
	v.matches[id] = matched
	v.matchedSize += len(matched)
}

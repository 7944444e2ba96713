package cache

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// The kept orders answer every list exactly as sorting everything does (Query.Apply and Select, the
// references),
// after items are added, replaced and removed, with many ties in every key.
func TestViewsAgreeWithApply(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := newViews()
	current := map[string]*Item{}
	mk := func(ns, name string) *Item {
		return newItem(ray.Summary{Namespace: ns, Name: name, Type: ray.TypeInstance,
			Status:     []string{ray.StatusRunning, ray.StatusStopped, ray.StatusPending}[rnd.Intn(3)],
			RayVersion: []string{"2.9.0", "2.10.1", "2.46.0", ""}[rnd.Intn(4)],
			CreatedAt:  base.Add(time.Duration(rnd.Intn(20)) * time.Minute)}, ray.NewLabelSet(map[string]string{"team": fmt.Sprint(rnd.Intn(3))}))
	}
	for i := range 400 {
		ns, name := fmt.Sprintf("ns-%d", rnd.Intn(4)), fmt.Sprintf("Job-%03d", rnd.Intn(250))
		key := ns + "/" + name
		old := current[key]
		if i%7 == 0 && old != nil {
			v.replace(old, nil)
			delete(current, key)
			continue
		}
		it := mk(ns, name)
		v.replace(old, it)
		current[key] = it
	}
	all := make([]*Item, 0, len(current))
	for _, it := range current {
		all = append(all, it)
	}
	scopes := []auth.Scope{auth.AllNamespaces(), auth.Namespaces("ns-1", "ns-3"), auth.Namespaces()}
	count := func(scope auth.Scope) int { // how the store counts what a scope holds
		n := 0
		for _, it := range all {
			if scope.Contains(it.Summary.Namespace) {
				n++
			}
		}
		return n
	}
	team1, err := labels.Parse("team=1")
	require.NoError(t, err)
	queries := 0
	for _, key := range []string{SortByName, SortByCreatedAt, SortByStatus, SortByRayVersion} {
		for _, desc := range []bool{false, true} {
			for _, q := range []Query{{}, {Search: "JOB-1"}, {Statuses: []string{ray.StatusRunning}}, {RayVersions: []string{"2.10.1", ""}},
				{Labels: team1}, {Labels: labels.Everything(), Type: ray.TypeInstance}, {Type: ray.TypeTemplate}} {
				for _, scope := range scopes {
					for _, page := range []int{1, 2, 4, 7} {
						q := q
						q.SortBy, q.Desc, q.Page, q.PageSize = key, desc, page, 37
						var inScope []*Item
						for _, it := range all {
							if scope.Contains(it.Summary.Namespace) {
								inScope = append(inScope, it)
							}
						}
						wantPage, wantTotal := q.Apply(inScope)
						gotPage, gotTotal := v.page(scope, &q, count)
						require.Equal(t, wantTotal, gotTotal, "%+v", q)
						require.Equal(t, wantPage, gotPage, "%+v", q)
						if page == 1 { // what a stream's snapshot sends: every match, in the query's order
							require.True(t, slices.Equal(q.Select(inScope), v.matching(scope, &q)), "%+v", q)
						}
						queries++
					}
				}
			}
		}
	}
	t.Logf("%d items, %d queries agree", len(all), queries)

	// A kept match list goes with the next change: the same query sees a new item and not a removed one.
	q := &Query{Search: "job-1", SortBy: SortByName, Page: 1, PageSize: 500}
	before, total := v.page(auth.AllNamespaces(), q, count)
	require.Len(t, before, total)
	added := mk("ns-0", "job-1zz")
	v.replace(nil, added)
	removed := before[0]
	v.replace(current[removed.Summary.Namespace+"/"+removed.Summary.Name], nil)
	after, total2 := v.page(auth.AllNamespaces(), q, count)
	assert.Equal(t, total, total2, "one added, one removed")
	assert.Equal(t, "job-1zz", strings.ToLower(after[len(after)-1].Summary.Name), "the added item is listed")
	assert.NotEqual(t, removed.Summary.Namespace+"/"+removed.Summary.Name, after[0].Summary.Namespace+"/"+after[0].Summary.Name, "the removed item is not")
}

// TestKeptMatchesStayBounded: however many distinct queries run, the kept matches stay within their
// bounds.
func TestKeptMatchesStayBounded(t *testing.T) {
	v := newViews()
	for i := range 50 {
		v.replace(nil, newItem(ray.Summary{Namespace: "ns", Name: fmt.Sprintf("item-%02d", i), Type: ray.TypeInstance}, nil))
	}
	for i := range 200 {
		v.page(auth.AllNamespaces(), &Query{Search: fmt.Sprint(i % 100), SortBy: SortByName, Page: 1, PageSize: 10},
			func(auth.Scope) int { return 50 })
		assert.LessOrEqual(t, len(v.matches), maxMatchedQueries)
		assert.LessOrEqual(t, v.matchedSize, maxMatchedFactor*50)
	}
}

// What is published before the first list (an informer's first list, pods changing meanwhile) is
// gathered and sorted once: replaced and removed items are not listed.
func TestViewsGatherUntilTheFirstList(t *testing.T) {
	v := newViews()
	mk := func(name string) *Item {
		return newItem(ray.Summary{Name: name, Namespace: "ns", Type: ray.TypeInstance}, nil)
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	v.replace(nil, c)
	v.replace(nil, a)
	v.replace(nil, b)
	a2 := mk("a")
	v.replace(a, a2)
	v.replace(b, nil)
	require.False(t, v.sorted)
	page, total := v.page(auth.AllNamespaces(), &Query{SortBy: SortByName, Page: 1, PageSize: 10}, func(auth.Scope) int { return 2 })
	assert.Equal(t, 2, total)
	assert.Equal(t, []*Item{a2, c}, page)
	assert.True(t, v.sorted)
	v.replace(nil, b) // from now on put in place
	page, _ = v.page(auth.AllNamespaces(), &Query{SortBy: SortByName, Page: 1, PageSize: 10}, func(auth.Scope) int { return 3 })
	assert.Equal(t, []*Item{a2, b, c}, page)
}

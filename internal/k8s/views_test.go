package k8s

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/stretchr/testify/require"

	"ray-service/internal/auth"
)

// The kept orders answer every list exactly as sorting everything does (Query.Apply, the reference),
// after items are added, replaced and removed, with many ties in every key.
func TestViewsAgreeWithApply(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := newViews()
	current := map[string]*Item{}
	mk := func(ns, name string) *Item {
		return newItem(Summary{Namespace: ns, Name: name, Type: TypeInstance,
			Status:     []string{StatusRunning, StatusStopped, StatusPending}[rnd.Intn(3)],
			RayVersion: []string{"2.9.0", "2.10.1", "2.46.0", ""}[rnd.Intn(4)],
			CreatedAt:  base.Add(time.Duration(rnd.Intn(20)) * time.Minute)}, NewLabelSet(map[string]string{"team": fmt.Sprint(rnd.Intn(3))}))
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
			for _, q := range []Query{{}, {Search: "JOB-1"}, {Statuses: []string{StatusRunning}}, {RayVersions: []string{"2.10.1", ""}},
				{Labels: team1}, {Labels: labels.Everything(), Type: TypeInstance}, {Type: TypeTemplate}} {
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
						queries++
					}
				}
			}
		}
	}
	t.Logf("%d items, %d queries agree", len(all), queries)
}

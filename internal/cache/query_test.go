package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/ray"
)

func TestCompareVersions(t *testing.T) {
	assert.Equal(t, -1, CompareVersions("2.9.0", "2.10.0"))
	assert.Equal(t, 1, CompareVersions("2.41.0", "2.9.3"))
	assert.Equal(t, 0, CompareVersions("2.9.0", "2.9.0"))
	assert.Equal(t, -1, CompareVersions("", "2.9.0"))
	assert.Equal(t, -1, CompareVersions("2.9.0rc1", "2.9.0rc2"))
}

func TestQueryApply(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var items []*Item
	for i := range 25 {
		items = append(items, &Item{
			Summary: ray.Summary{Name: fmt.Sprintf("job-%02d", i), Namespace: []string{"a", "b"}[i%2],
				Status: []string{ray.StatusRunning, ray.StatusStopped, ray.StatusFailed}[i%3], CreatedAt: base.Add(time.Duration(i%5) * time.Minute),
				Creator: []string{"alice", "bob"}[i%2], Type: ray.TypeInstance},
			Labels: ray.NewLabelSet(map[string]string{"team": []string{"x", "y"}[i%2]}),
		})
	}
	q := &Query{SortBy: SortByCreatedAt, Desc: true, Page: 1, PageSize: 10}
	page, total := q.Apply(items)
	assert.Equal(t, 25, total)
	assert.Len(t, page, 10)
	for i := 1; i < len(page); i++ {
		assert.False(t, page[i].Summary.CreatedAt.After(page[i-1].Summary.CreatedAt), "descending createdAt")
	}

	q = &Query{Search: "JOB-1", Statuses: []string{ray.StatusRunning, ray.StatusFailed}, SortBy: SortByName, Page: 1, PageSize: 100}
	page, total = q.Apply(items)
	var names []string
	for _, s := range page {
		names = append(names, s.Summary.Name)
	}
	assert.Equal(t, []string{"job-11", "job-12", "job-14", "job-15", "job-17", "job-18"}, names)
	assert.Equal(t, 6, total)

	sel, _ := labels.Parse("team=y")
	q = &Query{Labels: sel, Creators: []string{"bob"}, SortBy: SortByName, Page: 2, PageSize: 5}
	page, total = q.Apply(items)
	assert.Equal(t, 12, total)
	assert.Equal(t, "job-11", page[0].Summary.Name)

	q.Page = 4
	page, total = q.Apply(items)
	assert.Equal(t, 12, total)
	assert.Empty(t, page)
}

// The list filters by health.
func TestQueryFiltersByHealth(t *testing.T) {
	degraded := ray.Summary{Name: "a", Health: ray.Health{State: ray.HealthDegraded, Reason: "WorkersNotReady"}}
	healthy := ray.Summary{Name: "b", Health: ray.Health{State: ray.HealthHealthy, Reason: "Running"}}
	items := []*Item{newItem(degraded, nil), newItem(healthy, nil)}
	q := &Query{Healths: []string{ray.HealthHealthy}, SortBy: SortByName, Page: 1, PageSize: 10}
	page, total := q.Apply(items)
	require.Equal(t, 1, total)
	assert.Equal(t, ray.HealthHealthy, page[0].Summary.Health.State)
}

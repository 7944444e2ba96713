package history

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "history.db")
	s, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(minutes int) *time.Time { v := t0.Add(time.Duration(minutes) * time.Minute); return &v }

// The schema is migrated at the first open and left as it is at the next.
func TestMigrations(t *testing.T) {
	s, dsn := openTemp(t)
	v, err := s.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, len(migrations), v)
	require.NoError(t, s.Put(t.Context(), Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "x", CreatedAt: t0}))
	require.NoError(t, s.Close())
	again, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = again.Close() }()
	v, err = again.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, len(migrations), v)
	_, err = again.Get(t.Context(), "u1")
	require.NoError(t, err, "kept across opens")
}

// Writing the same record and transition again changes nothing; times once recorded are kept.
func TestWritesAreIdempotent(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	r := Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "job", Creator: "alice", Spec: `{"entrypoint":"x"}`,
		Status: "Running", CreatedAt: t0}
	for range 2 {
		require.NoError(t, s.Put(ctx, r))
		require.NoError(t, s.AddTransition(ctx, "u1", Transition{Status: "Pending", At: t0}))
		require.NoError(t, s.AddTransition(ctx, "u1", Transition{Status: "Running", At: *at(1)}))
	}
	r.Status, r.Reason, r.FinishedAt, r.Spec = "Failed", "DeadlineExceeded", at(5), ""
	require.NoError(t, s.Put(ctx, r))
	r.FinishedAt = nil
	require.NoError(t, s.Put(ctx, r), "a later write without the time")
	require.NoError(t, s.AddTransition(ctx, "u1", Transition{Status: "Failed", At: *at(5)}))

	got, err := s.Get(ctx, "u1")
	require.NoError(t, err)
	assert.Equal(t, "Failed", got.Status)
	assert.Equal(t, "DeadlineExceeded", got.Reason)
	require.NotNil(t, got.FinishedAt)
	assert.Equal(t, *at(5), *got.FinishedAt, "kept")
	assert.JSONEq(t, `{"entrypoint":"x"}`, got.Spec, "a write without the spec keeps it")
	assert.Equal(t, []Transition{{"Pending", t0}, {"Running", *at(1)}, {"Failed", *at(5)}}, got.Timeline, "each once, in order")

	_, err = s.Get(ctx, "none")
	require.ErrorIs(t, err, ErrNotFound)
}

// Lists filter, sort and page as the live lists do.
func TestList(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	for i := range 30 {
		r := Record{UID: fmt.Sprintf("u%02d", i), Kind: "RayJob", Namespace: []string{"a", "b", "c"}[i%3], Name: fmt.Sprintf("job-%02d", i),
			Creator: []string{"alice", "bob"}[i%2], Status: []string{"Succeeded", "Failed"}[i%2], CreatedAt: *at(i), FinishedAt: at(i + 10)}
		require.NoError(t, s.Put(ctx, r))
	}
	require.NoError(t, s.Put(ctx, Record{UID: "c1", Kind: "RayCluster", Namespace: "a", Name: "job-99", CreatedAt: t0}))
	require.NoError(t, s.Put(ctx, Record{UID: "w1", Kind: "RayJob", Namespace: "a", Name: "odd_%name", CreatedAt: t0}))

	page, total, err := s.List(ctx, Query{Kind: "RayJob", Namespaces: []string{"a", "b"}, Statuses: []string{"Failed"},
		SortBy: "name", Desc: true, Page: 1, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 10, total, "20 in a and b, half of them Failed")
	require.Len(t, page, 3)
	assert.Equal(t, []string{"job-27", "job-25", "job-21"}, []string{page[0].Name, page[1].Name, page[2].Name})

	page, total, err = s.List(ctx, Query{Kind: "RayJob", Search: "JOB-1", Creators: []string{"alice"}, SortBy: "finishedAt", Page: 2, PageSize: 2})
	require.NoError(t, err)
	assert.Equal(t, 5, total, "job-10..18 created by alice")
	assert.Equal(t, []string{"job-14", "job-16"}, []string{page[0].Name, page[1].Name})

	_, total, err = s.List(ctx, Query{Kind: "RayJob", FinishedAfter: at(20), FinishedBefore: at(25), PageSize: 50})
	require.NoError(t, err)
	assert.Equal(t, 5, total, "finished at minutes 20 to 24")

	page, total, err = s.List(ctx, Query{Kind: "RayJob", Search: "_%", PageSize: 50})
	require.NoError(t, err)
	require.Equal(t, 1, total, "wildcards in the search are literal")
	assert.Equal(t, "odd_%name", page[0].Name)

	page, total, err = s.List(ctx, Query{Kind: "RayJob", Namespaces: []string{}, PageSize: 50})
	require.NoError(t, err)
	assert.Zero(t, total, "no namespace allowed: nothing")
	assert.Empty(t, page)
}

// A DSN that is none is refused, naming what is wanted, without its password.
func TestDSN(t *testing.T) {
	_, err := Open(t.Context(), "mysql://u:secret@db/x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want sqlite:<file>")
	assert.NotContains(t, err.Error(), "secret")
	_, err = Open(t.Context(), "sqlite:")
	require.Error(t, err)
}

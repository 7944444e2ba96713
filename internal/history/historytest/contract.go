// Package historytest holds the behaviour every database of the history must show: the unit tests run
// it on SQLite, the integration tests on the local stack's PostgreSQL.
package historytest

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/history"
	"ray-service/internal/ray"
	"ray-service/internal/sqldb/sqldbtest"
)

// Open opens a new, empty history and returns it with its DSN (to open it again).
type Open func(t *testing.T) (*history.Store, string)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(minutes int) *time.Time { v := t0.Add(time.Duration(minutes) * time.Minute); return &v }

// Run runs the contract, each part as a subtest with a history of its own.
func Run(t *testing.T, open Open) {
	t.Run("migrations", func(t *testing.T) { migrations(t, open) })
	t.Run("idempotent writes", func(t *testing.T) { idempotent(t, open) })
	t.Run("list", func(t *testing.T) { list(t, open) })
	t.Run("endings, live and gone", func(t *testing.T) { endings(t, open) })
	t.Run("retention", func(t *testing.T) { retention(t, open) })
	t.Run("bounds", func(t *testing.T) { bounds(t, open) })
	t.Run("quotas in bytes", func(t *testing.T) { quotas(t, open) })
}

// The schema is migrated at the first open and left as it is at the next.
func migrations(t *testing.T, open Open) {
	s, dsn := open(t)
	v, err := s.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, history.SchemaVersion, v)
	require.NoError(t, s.Put(t.Context(), history.Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "x", CreatedAt: t0}))
	again, err := history.Open(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = again.Close() }()
	v, err = again.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, history.SchemaVersion, v)
	_, err = again.Get(t.Context(), "u1")
	require.NoError(t, err, "kept across opens")
}

// Writing the same record and transition again changes nothing; times once recorded are kept.
func idempotent(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	r := history.Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "job", Creator: "alice", Spec: `{"entrypoint":"x"}`,
		Generation: 1, Status: "Running", CreatedAt: t0}
	for range 2 {
		require.NoError(t, s.Put(ctx, r))
		require.NoError(t, s.AddTransition(ctx, "u1", history.Transition{Status: "Pending", At: t0}))
		require.NoError(t, s.AddTransition(ctx, "u1", history.Transition{Status: "Running", At: *at(1)}))
	}
	r.Status, r.Reason, r.FinishedAt, r.Spec, r.Generation = "Failed", "DeadlineExceeded", at(5), "", 0
	require.NoError(t, s.Put(ctx, r))
	r.FinishedAt = nil
	require.NoError(t, s.Put(ctx, r), "a later write without the time")
	require.NoError(t, s.AddTransition(ctx, "u1", history.Transition{Status: "Failed", At: *at(5)}))

	got, err := s.Get(ctx, "u1")
	require.NoError(t, err)
	assert.Equal(t, "Failed", got.Status)
	assert.Equal(t, "DeadlineExceeded", got.Reason)
	require.NotNil(t, got.FinishedAt)
	assert.Equal(t, *at(5), *got.FinishedAt, "kept")
	assert.JSONEq(t, `{"entrypoint":"x"}`, got.Spec, "a write without the spec keeps it")
	assert.Equal(t, []history.Transition{{Status: "Pending", At: t0}, {Status: "Running", At: *at(1)}, {Status: "Failed", At: *at(5)}},
		got.Timeline, "each once, in order")
	live, err := s.Live(ctx)
	require.NoError(t, err)
	assert.Equal(t, history.Known{Kind: "RayJob", Namespace: "a", Name: "job", Status: "Failed", Generation: 1, Finished: true}, live["u1"],
		"the generation of the spec kept")

	_, err = s.Get(ctx, "none")
	require.ErrorIs(t, err, history.ErrNotFound)
}

// Lists filter, sort and page as the live lists do.
func list(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	for i := range 30 {
		r := history.Record{UID: fmt.Sprintf("u%02d", i), Kind: "RayJob", Namespace: []string{"a", "b", "c"}[i%3], Name: fmt.Sprintf("job-%02d", i),
			Creator: []string{"alice", "bob"}[i%2], Status: []string{"Succeeded", "Failed"}[i%2], CreatedAt: *at(i), FinishedAt: at(i + 10),
			Spec: `{"big":"manifest"}`}
		require.NoError(t, s.Put(ctx, r))
	}
	require.NoError(t, s.Put(ctx, history.Record{UID: "c1", Kind: "RayCluster", Namespace: "d", Name: "job-99", CreatedAt: t0}))
	require.NoError(t, s.Put(ctx, history.Record{UID: "w1", Kind: "RayJob", Namespace: "a", Name: "odd_%name", CreatedAt: t0}))

	page, total, err := s.List(ctx, history.Query{Kind: "RayJob", Namespaces: []string{"a", "b"}, Statuses: []string{"Failed"},
		SortBy: "name", Desc: true, Page: 1, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 10, total, "20 in a and b, half of them Failed")
	require.Len(t, page, 3)
	assert.Equal(t, []string{"job-27", "job-25", "job-21"}, []string{page[0].Name, page[1].Name, page[2].Name})
	assert.Empty(t, page[0].Spec, "a page leaves manifests out")

	page, total, err = s.List(ctx, history.Query{Kind: "RayJob", Search: "JOB-1", Creators: []string{"alice"}, SortBy: "finishedAt", Page: 2, PageSize: 2})
	require.NoError(t, err)
	assert.Equal(t, 5, total, "job-10..18 created by alice")
	assert.Equal(t, []string{"job-14", "job-16"}, []string{page[0].Name, page[1].Name})

	_, total, err = s.List(ctx, history.Query{Kind: "RayJob", FinishedAfter: at(20), FinishedBefore: at(25), PageSize: 50})
	require.NoError(t, err)
	assert.Equal(t, 5, total, "finished at minutes 20 to 24")

	page, total, err = s.List(ctx, history.Query{Kind: "RayJob", Search: "_%", PageSize: 50})
	require.NoError(t, err)
	require.Equal(t, 1, total, "wildcards in the search are literal")
	assert.Equal(t, "odd_%name", page[0].Name)

	page, total, err = s.List(ctx, history.Query{Kind: "RayJob", Namespaces: []string{}, PageSize: 50})
	require.NoError(t, err)
	assert.Zero(t, total, "no namespace allowed: nothing")
	assert.Empty(t, page)

	ns, err := s.Namespaces(ctx, "RayJob")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ns)
}

// An ending is kept with its record and replaced by a later reading; a record marked gone leaves what
// Live returns, and its first time gone is kept.
func endings(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	require.NoError(t, s.Put(ctx, history.Record{UID: "u1", Kind: "RayCluster", Namespace: "a", Name: "c", Status: "Running", CreatedAt: t0}))
	code := int32(137)
	e := &ray.Ending{Events: []ray.EventInfo{{Type: "Warning", Reason: "BackOff", Message: "restarting", Count: 3}},
		Pods: []ray.PodEnd{{Name: "c-head", NodeType: "head", Phase: "Running", Containers: []ray.ContainerEnd{{Name: "ray-head", State: "waiting",
			ExitCode: &code, Reason: "OOMKilled"}}}},
		Log: &ray.LogTail{Pod: "c-head", Container: "ray-head", Text: "last line\n"}}
	require.NoError(t, s.PutEnding(ctx, "u1", &ray.Ending{}, *at(1)))
	require.NoError(t, s.PutEnding(ctx, "u1", e, *at(2)))
	live, err := s.Live(ctx)
	require.NoError(t, err)
	assert.True(t, live["u1"].HasEnding)
	require.NoError(t, s.MarkDeleted(ctx, "u1", *at(3)))
	require.NoError(t, s.MarkDeleted(ctx, "u1", *at(4)))
	got, err := s.Get(ctx, "u1")
	require.NoError(t, err)
	assert.Equal(t, e, got.Ending)
	assert.Equal(t, *at(2), *got.EndingReadAt)
	assert.Equal(t, *at(3), *got.DeletedAt, "the first time gone")
	live, err = s.Live(ctx)
	require.NoError(t, err)
	assert.NotContains(t, live, "u1")
}

// Retention removes ended records past the age and past the bound per namespace, newest kept, and
// never the record of an object still there.
func retention(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	for i := range 10 {
		require.NoError(t, s.Put(ctx, history.Record{UID: fmt.Sprintf("a%d", i), Kind: "RayJob", Namespace: "a", Name: fmt.Sprint("j", i),
			CreatedAt: t0, FinishedAt: at(i)}))
		require.NoError(t, s.AddTransition(ctx, fmt.Sprintf("a%d", i), history.Transition{Status: "Running", At: t0}))
	}
	require.NoError(t, s.Put(ctx, history.Record{UID: "b0", Kind: "RayJob", Namespace: "b", Name: "old", CreatedAt: t0, DeletedAt: at(0)}))
	require.NoError(t, s.Put(ctx, history.Record{UID: "live", Kind: "RayCluster", Namespace: "a", Name: "still-there", CreatedAt: t0}))
	n, err := s.Prune(ctx, *at(2), 5)
	require.NoError(t, err)
	assert.Equal(t, int64(6), n, "a0, a1 and b0 by age, then a2..a4 past the newest five of a")
	var left []string
	for _, q := range []history.Query{{Kind: "RayJob", SortBy: "name", PageSize: 50}, {Kind: "RayCluster", PageSize: 50}} {
		page, _, err := s.List(ctx, q)
		require.NoError(t, err)
		for _, r := range page {
			left = append(left, r.UID)
		}
	}
	assert.Equal(t, []string{"a5", "a6", "a7", "a8", "a9", "live"}, left)
	_, err = s.Get(ctx, "a0")
	require.ErrorIs(t, err, history.ErrNotFound, "its timeline went with it")
}

// A manifest past the bound is kept in part, with its size and sha256; a status message is cut; of an
// object's transitions the first and the last KeptTransitions are kept, and those dropped counted; an
// ending is cut to its bounds.
func bounds(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	big := `{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"big","namespace":"a"},"spec":{"entrypoint":"` +
		strings.Repeat("x", history.MaxManifestBytes) + `"}}`
	require.NoError(t, s.Put(ctx, history.Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "big", Spec: big, Generation: 1,
		Message: strings.Repeat("m", 10<<10), CreatedAt: t0}))
	for i := range 3 * history.KeptTransitions {
		require.NoError(t, s.AddTransition(ctx, "u1", history.Transition{Status: fmt.Sprint("S", i), At: *at(i)}))
	}
	got, err := s.Get(ctx, "u1")
	require.NoError(t, err)
	require.NotNil(t, got.Cut, "the manifest is kept in part")
	assert.Equal(t, int64(len(big)), got.Cut.Size)
	sum := sha256.Sum256([]byte(big))
	assert.Equal(t, hex.EncodeToString(sum[:]), got.Cut.SHA256)
	assert.Contains(t, got.Cut.Reason, "64 KiB")
	assert.JSONEq(t, `{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"big","namespace":"a"}}`, got.Spec)
	assert.LessOrEqual(t, len(got.Message), history.MaxMessageBytes)
	require.Len(t, got.Timeline, 2*history.KeptTransitions)
	assert.Equal(t, "S0", got.Timeline[0].Status, "the first kept")
	assert.Equal(t, fmt.Sprint("S", history.KeptTransitions-1), got.Timeline[history.KeptTransitions-1].Status)
	assert.Equal(t, fmt.Sprint("S", 2*history.KeptTransitions), got.Timeline[history.KeptTransitions].Status, "then the last")
	assert.Equal(t, fmt.Sprint("S", 3*history.KeptTransitions-1), got.Timeline[len(got.Timeline)-1].Status)
	assert.Equal(t, int64(history.KeptTransitions), got.TransitionsDropped)

	// A manifest within the bound is kept whole, and says nothing of a cut.
	require.NoError(t, s.Put(ctx, history.Record{UID: "u2", Kind: "RayJob", Namespace: "a", Name: "small", Spec: `{"kind":"RayJob"}`, CreatedAt: t0}))
	got, err = s.Get(ctx, "u2")
	require.NoError(t, err)
	assert.Nil(t, got.Cut)
	assert.JSONEq(t, `{"kind":"RayJob"}`, got.Spec)

	// An ending of many pods with long messages, events and a log tail is cut to its bound.
	e := &ray.Ending{Log: &ray.LogTail{Pod: "p", Container: "c", Text: strings.Repeat("l", 256<<10)}}
	for i := range 100 {
		e.Events = append(e.Events, ray.EventInfo{Type: "Warning", Reason: "R", Message: strings.Repeat("e", 64<<10), Count: int32(i)})
	}
	for i := range 200 {
		p := ray.PodEnd{Name: fmt.Sprint("pod-", i)}
		for j := range 20 {
			p.Containers = append(p.Containers, ray.ContainerEnd{Name: fmt.Sprint("c", j), Message: strings.Repeat("t", 4<<10)})
		}
		e.Pods = append(e.Pods, p)
	}
	require.NoError(t, s.PutEnding(ctx, "u1", e, *at(40)))
	got, err = s.Get(ctx, "u1")
	require.NoError(t, err)
	body, err := json.Marshal(got.Ending)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(body), history.MaxEndingBytes)
	assert.LessOrEqual(t, len(got.Ending.Pods), history.MaxEndingPods)
	assert.Equal(t, 200, len(got.Ending.Pods)+got.Ending.PodsOmitted, "what was left out is counted")
	require.NotEmpty(t, got.Ending.Events)
	assert.LessOrEqual(t, len(got.Ending.Events[0].Message), history.MaxMessageBytes)
	assert.LessOrEqual(t, len(got.Ending.Pods[0].Containers), history.MaxEndingContainers)
}

// Past a quota in bytes the records of ended objects are removed, oldest end first, until within it;
// those of objects still there are kept.
func quotas(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	spec := `{"spec":"` + strings.Repeat("x", 10<<10) + `"}`
	for i := range 6 {
		require.NoError(t, s.Put(ctx, history.Record{UID: fmt.Sprint("a", i), Kind: "RayJob", Namespace: "a", Name: fmt.Sprint("j", i),
			Spec: spec, CreatedAt: t0, FinishedAt: at(10 - i)}))
	}
	require.NoError(t, s.Put(ctx, history.Record{UID: "live", Kind: "RayJob", Namespace: "a", Name: "live", Spec: spec, CreatedAt: t0}))
	require.NoError(t, s.Put(ctx, history.Record{UID: "b0", Kind: "RayJob", Namespace: "b", Name: "other", Spec: spec, CreatedAt: t0, FinishedAt: at(0)}))
	all, err := s.Bytes(ctx, "a")
	require.NoError(t, err)
	assert.Greater(t, all, int64(7*10<<10), "the manifests are counted")
	over, err := s.OverQuota(ctx, all-1)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, over)

	n, err := s.Shrink(ctx, "a", all-15<<10)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the two that ended first")
	for _, uid := range []string{"a5", "a4"} {
		_, err := s.Get(ctx, uid)
		require.ErrorIs(t, err, history.ErrNotFound, uid)
	}
	left, err := s.Bytes(ctx, "a")
	require.NoError(t, err)
	assert.LessOrEqual(t, left, all-15<<10)
	n, err = s.Shrink(ctx, "a", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(4), n, "every ended one")
	_, err = s.Get(ctx, "live")
	require.NoError(t, err, "an object still there is kept")
	_, err = s.Get(ctx, "b0")
	require.NoError(t, err, "another namespace is not touched")
	n, err = s.Shrink(ctx, "", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "of all: b0")
}

// DB opens the database behind a history's DSN directly, as someone who reaches it would: to read (or
// break) its tables.
func DB(t *testing.T, dsn string) *sql.DB { return sqldbtest.Raw(t, dsn) }

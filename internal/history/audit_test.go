package history

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/audit"
)

// A history written before the trail had its tables is brought to the current schema with nothing of
// it lost, and the trail starts empty and whole.
func TestAuditMigrationKeepsTheHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(t.Context(), "sqlite:"+path)
	require.NoError(t, err)
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.Put(t.Context(), Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "x", Spec: `{"a":1}`, CreatedAt: created}))
	require.NoError(t, s.Close())
	// Back to the schema without the trail, as a service of an earlier version left it.
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	version := slices.Index(migrations, auditMigration) + 1
	require.Positive(t, version)
	// (and without what came after it).
	for _, stmt := range []string{`DROP TABLE audit_entries`, `DROP TABLE audit_namespaces`, `DROP TABLE audit_head`,
		`DROP TABLE deliveries`, `DROP TABLE subscriptions`, `DROP TABLE notice_head`, `DROP TABLE notices`,
		`DROP TABLE usage_objects`, `DROP TABLE usage_days`, `DROP TABLE usage_totals`, `DROP TABLE usage_measured`, `DROP TABLE usage_state`,
		`DROP TABLE usage_pending`, `DROP TABLE usage_kind_days`,
		fmt.Sprintf(`DELETE FROM schema_migrations WHERE version >= %d`, version)} {
		_, err := db.ExecContext(t.Context(), stmt)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	s, err = Open(t.Context(), "sqlite:"+path)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	v, err := s.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, v)
	r, err := s.Get(t.Context(), "u1")
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, r.Spec)
	assert.Equal(t, created, r.CreatedAt)
	entries, total, err := s.Audit().Entries(t.Context(), audit.Query{Page: 1, PageSize: 10})
	require.NoError(t, err)
	assert.Zero(t, total)
	assert.Empty(t, entries)
}

// What an append costs a write's answer on SQLite, and a check of the whole chain per entry.
func BenchmarkAuditAppend(b *testing.B) {
	s, err := Open(b.Context(), "sqlite:"+filepath.Join(b.TempDir(), "history.db"))
	require.NoError(b, err)
	defer func() { _ = s.Close() }()
	key := audit.Key("0123456789abcdef0123456789abcdef")
	a := s.Audit()
	e := audit.Entry{Time: time.Now(), Action: audit.Create, Kind: "RayCluster", Namespace: "team", Name: "demo", User: "alice",
		RequestID: "r-1", Message: "create RayCluster team/demo by alice (request r-1)"}
	for b.Loop() {
		_, err := a.Append(b.Context(), e, key.Seal)
		require.NoError(b, err)
	}
	b.StopTimer()
	start := time.Now()
	v, err := audit.Check(b.Context(), a, key)
	require.NoError(b, err)
	require.True(b, v.Intact)
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(v.Entries), "check-ns/entry")
}

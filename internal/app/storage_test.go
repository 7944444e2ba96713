package app

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/audit"
	"ray-service/internal/history"
)

// A history written before the trail had its tables is brought to the current schema with nothing of
// it lost, and the trail starts empty and whole.
func TestAuditMigrationKeepsTheHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := openDatabase(t.Context(), "sqlite:"+path)
	require.NoError(t, err)
	s := history.New(db)
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.Put(t.Context(), history.Record{UID: "u1", Kind: "RayJob", Namespace: "a", Name: "x", Spec: `{"a":1}`, CreatedAt: created}))
	require.NoError(t, s.Close())
	// Back to the schema without the trail, as a service of an earlier version left it.
	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	version := audit.Migrations()[0].Version
	// (and without what came after it).
	for _, stmt := range []string{`DROP TABLE audit_entries`, `DROP TABLE audit_namespaces`, `DROP TABLE audit_head`,
		`DROP TABLE deliveries`, `DROP TABLE subscriptions`, `DROP TABLE notice_head`, `DROP TABLE notices`,
		`DROP TABLE usage_objects`, `DROP TABLE usage_days`, `DROP TABLE usage_totals`, `DROP TABLE usage_measured`, `DROP TABLE usage_state`,
		`DROP TABLE usage_pending`, `DROP TABLE usage_kind_days`, `DROP TABLE usage_accelerators`,
		fmt.Sprintf(`DELETE FROM schema_migrations WHERE version >= %d`, version)} {
		_, err := raw.ExecContext(t.Context(), stmt)
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())

	db, err = openDatabase(t.Context(), "sqlite:"+path)
	require.NoError(t, err)
	s = history.New(db)
	defer func() { _ = s.Close() }()
	v, err := db.Version(t.Context())
	require.NoError(t, err)
	all, err := schema()
	require.NoError(t, err)
	assert.Equal(t, all[len(all)-1].Version, v)
	r, err := s.Get(t.Context(), "u1")
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, r.Spec)
	assert.Equal(t, created, r.CreatedAt)
	entries, total, err := audit.NewSQLStore(db).Entries(t.Context(), audit.Query{Page: 1, PageSize: 10})
	require.NoError(t, err)
	assert.Zero(t, total)
	assert.Empty(t, entries)
}

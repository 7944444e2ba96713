package usage

import (
	"database/sql"
	"path/filepath"
	"ray-service/internal/sqldb/sqldbtest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sqliteAt opens a SQLite database in file at schema version v of these migrations.
func sqliteAt(t *testing.T, file string, v int) *sql.DB {
	t.Helper()
	return sqldbtest.SQLiteAt(t, file, Migrations(), v)
}

// versionOf is the schema version of the migration text m.
func versionOf(t *testing.T, m string) int {
	t.Helper()
	for v, text := range migrations {
		if text == m {
			return v
		}
	}
	t.Fatalf("no migration %.40q", m)
	return 0
}

// A history of the version before the kinds' days has them summed from its groups' days when it
// migrates: a report by kind reads them, and gives what the groups' days give.
func TestMigrationSumsTheKindsDays(t *testing.T) {
	file := filepath.Join(t.TempDir(), "history.db")
	db := sqliteAt(t, file, versionOf(t, kindDaysMigration)-1)
	day := int64(1767225600)
	for i := range 8 {
		_, err := db.Exec(`INSERT INTO usage_totals (day, namespace, kind, creator, held_seconds, cpu_seconds, starts)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, day+int64(i%2)*86400, []string{"a", "b"}[i/2%2], []string{"RayJob", "RayCluster"}[i/4],
			"alice", 3600, float64(3600*(i+1)), i%3)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	s, err := Open(t.Context(), "sqlite:"+file)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	q := Query{From: time.Unix(day, 0), To: time.Unix(day+2*86400, 0), Now: time.Unix(day+2*86400, 0), GroupBy: ByKind,
		Scopes: map[string][]string{"RayJob": nil, "RayCluster": nil}}
	kinds, err := s.Utilization(t.Context(), q)
	require.NoError(t, err)
	q.Creators = []string{"alice"} // read from the groups' days
	groups, err := s.Utilization(t.Context(), q)
	require.NoError(t, err)
	require.Len(t, kinds.Groups, 2)
	byKind := map[string]Group{}
	for _, g := range groups.Groups {
		byKind[g.Key.Kind] = g
	}
	for _, g := range kinds.Groups {
		want := byKind[g.Key.Kind]
		assert.Equal(t, want.Total, g.Total, g.Key.Kind)
		assert.Equal(t, want.Days, g.Days, g.Key.Kind)
	}
	assert.InDelta(t, 3600.0*(1+2+3+4), byKind["RayJob"].Total.CPUSeconds, 1e-9)
}

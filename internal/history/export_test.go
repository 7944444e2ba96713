package history

import (
	"database/sql"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// SQLiteBeforeRuns is a SQLite history at file migrated up to the running sums (migration 9), not
// including them.
func SQLiteBeforeRuns(t *testing.T, file string) *sql.DB {
	t.Helper()
	before := slices.Index(migrations, runsMigration)
	require.Positive(t, before)
	return sqliteAt(t, file, before)
}

package usage

import (
	"database/sql"
	"testing"
)

// SQLiteBeforeRuns is a SQLite database at file with the utilization's tables migrated up to the running
// sums (migration 9), not including them.
func SQLiteBeforeRuns(t *testing.T, file string) *sql.DB {
	t.Helper()
	return sqliteAt(t, file, versionOf(t, runsMigration)-1)
}

// Package sqldbtest helps the stored features' tests reach their database directly.
package sqldbtest

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"ray-service/internal/sqldb"
)

// Raw opens the database behind a DSN directly, as someone who reaches it would: to read
// (or break) its tables.
func Raw(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver, source := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, source = "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)"
	}
	db, err := sql.Open(driver, source)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// SQLiteAt opens a SQLite database in file at schema version v of migrations (those up to v, each
// recorded), as a service of an older version left it.
func SQLiteAt(t *testing.T, file string, migrations []sqldb.Migration, v int) *sql.DB {
	t.Helper()
	var upTo []sqldb.Migration
	for _, m := range migrations {
		if m.Version <= v {
			upTo = append(upTo, m)
		}
	}
	d, err := sqldb.Open(t.Context(), "sqlite:"+file, upTo)
	require.NoError(t, err)
	return d.DB
}

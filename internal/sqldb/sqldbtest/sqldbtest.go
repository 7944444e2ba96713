// Package sqldbtest helps the stored features' tests reach their database directly.
package sqldbtest

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

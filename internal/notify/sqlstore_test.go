package notify_test

import (
	"path/filepath"
	"testing"

	"ray-service/internal/notify/notifytest"
)

// The contract on the embedded SQLite (the integration tests run it on PostgreSQL).
func TestSQLStoreOnSQLite(t *testing.T) {
	notifytest.Run(t, func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "history.db") })
}

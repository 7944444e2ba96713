package history_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"ray-service/internal/history"
	"ray-service/internal/history/historytest"
)

func openSQLite(t *testing.T) (*history.Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "history.db")
	s, err := history.Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

// The contract on the embedded SQLite (the integration tests run it on PostgreSQL).
func TestStoreOnSQLite(t *testing.T) { historytest.Run(t, openSQLite) }

package history_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
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

// A DSN that is none is refused, naming what is wanted, without its password.
func TestDSN(t *testing.T) {
	_, err := history.Open(t.Context(), "mysql://u:secret@db/x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want sqlite:<file>")
	assert.NotContains(t, err.Error(), "secret")
	_, err = history.Open(t.Context(), "sqlite:")
	require.Error(t, err)
	_, err = history.Open(t.Context(), "postgres://ray:secret@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.Error(t, err, "nothing listens there")
	assert.NotContains(t, err.Error(), "secret")
}

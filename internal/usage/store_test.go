package usage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"ray-service/internal/usage"
	"ray-service/internal/usage/usagetest"
)

func openSQLite(t *testing.T) (*usage.Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "usage.db")
	s, err := usage.Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

// The contract on the embedded SQLite (the integration tests run it on PostgreSQL).
func TestStoreOnSQLite(t *testing.T) { usagetest.Run(t, openSQLite) }

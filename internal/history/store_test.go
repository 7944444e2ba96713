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

// A DSN is logged without any password: neither in its user information nor in its query.
func TestRedact(t *testing.T) {
	for dsn, kept := range map[string][]string{
		"postgres://ray:s3cret@db:5432/history?sslmode=disable":                          {"postgres://", "ray", "db:5432/history", "sslmode=disable"},
		"postgres://ray@db/history?password=s3cret&sslmode=require":                      {"ray@db/history", "sslmode=require"},
		"postgresql://db/history?sslpassword=s3cret&PassWord=s3cret&application_name=rs": {"db/history", "application_name=rs"},
		"postgres://ray:s3cret@db/history?password=s3cret":                               {"ray", "db/history"},
		"host=db user=ray password=s3cret dbname=history":                                {"host=db", "dbname=history"},
		"postgres://ray:s3cr@t@db/history":                                               {"db/history"},
		"sqlite:/var/lib/ray-service/history.db":                                         {"sqlite:/var/lib/ray-service/history.db"},
	} {
		got := history.Redact(dsn)
		assert.NotContains(t, got, "s3cr", dsn)
		for _, k := range kept {
			assert.Contains(t, got, k, dsn)
		}
	}
}

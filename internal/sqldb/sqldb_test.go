package sqldb

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A DSN that is none is refused, naming what is wanted, without its password.
func TestDSN(t *testing.T) {
	_, err := Open(t.Context(), "mysql://u:secret@db/x", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want sqlite:<file>")
	assert.NotContains(t, err.Error(), "secret")
	_, err = Open(t.Context(), "sqlite:", nil)
	require.Error(t, err)
	_, err = Open(t.Context(), "postgres://ray:secret@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", nil)
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
		got := Redact(dsn)
		assert.NotContains(t, got, "s3cr", dsn)
		for _, k := range kept {
			assert.Contains(t, got, k, dsn)
		}
	}
}

// The features' migrations join into one list numbered from 1 with no gap and none twice.
func TestSchema(t *testing.T) {
	a := []Migration{{Version: 1, Feature: "a"}, {Version: 3, Feature: "a"}}
	b := []Migration{{Version: 2, Feature: "b"}}
	all, err := Schema(a, b)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, []int{all[0].Version, all[1].Version, all[2].Version})
	_, err = Schema(a)
	require.ErrorContains(t, err, "schema migration 3 (a): want version 2")
	_, err = Schema(a, b, []Migration{{Version: 2, Feature: "c"}})
	require.ErrorContains(t, err, "none twice")
}

// A database runs each migration it has not run, whichever feature's, and refuses to open where it ran
// one newer than any it is given.
func TestMigrate(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "db")
	first := []Migration{{Version: 1, Feature: "a", SQL: "CREATE TABLE a (x INTEGER)"}}
	d, err := Open(t.Context(), dsn, first)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	both := append(first, Migration{Version: 2, Feature: "b", SQL: "CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (7)"},
		Migration{Version: 3, Feature: "b", SQL: PostgresOnly + "ALTER TABLE b SET (fillfactor = 50)"})
	d, err = Open(t.Context(), dsn, both)
	require.NoError(t, err, "a is not run again")
	v, err := d.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, v)
	got, err := d.Strings(t.Context(), `SELECT CAST(y AS TEXT) FROM b`)
	require.NoError(t, err)
	assert.Equal(t, []string{"7"}, got)
	require.NoError(t, d.Close())
	_, err = Open(t.Context(), dsn, first)
	require.ErrorContains(t, err, "the history's schema is at version 3, newer than this service knows (1)")
}

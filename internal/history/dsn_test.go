package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The history's PostgreSQL sessions compile no plan (JIT), unless the DSN says otherwise.
func TestPostgresSessionsWithoutJIT(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://ray@db/history":                        "postgres://ray@db/history?jit=off",
		"postgresql://ray@db/history?sslmode=require":      "postgresql://ray@db/history?sslmode=require&jit=off",
		"postgres://ray@db/history?jit=on&sslmode=disable": "postgres://ray@db/history?jit=on&sslmode=disable",
	} {
		driver, source, err := parseDSN(dsn)
		require.NoError(t, err)
		assert.Equal(t, "pgx", driver)
		assert.Equal(t, want, source)
	}
}

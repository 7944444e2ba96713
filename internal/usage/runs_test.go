package usage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/usage"
	"ray-service/internal/usage/usagetest"
)

// A database written before the running sums gets them at its migration, from the days there, and each
// object its totals.
func TestRunningSumsMigrated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.db")
	db := usage.SQLiteBeforeRuns(t, file)
	for _, uid := range []string{"a", "b"} {
		_, err := db.Exec(`INSERT INTO usage_objects (uid, kind, namespace, name, cluster, creator, holding, idle, cpu, memory_bytes,
			gpu, npu, since, gone, first_day, last_day) VALUES ($1, 'RayCluster', 'ns', $1, $1, 'alice', 0, 0, 1, 0, 0, 0, 0, 0, 0, $2)`,
			uid, 5*86400)
		require.NoError(t, err)
		_, err = db.Exec(`INSERT INTO usage_pending (uid, day, namespace, kind, creator, held_seconds, cpu_seconds) VALUES ($1, $2, 'ns',
			'RayCluster', 'alice', 60, $3)`, uid, 5*86400, float64(len(uid)))
		require.NoError(t, err)
		for d := range 5 {
			_, err := db.Exec(`INSERT INTO usage_days (uid, day, held_seconds, cpu_seconds, starts) VALUES ($1, $2, $3, $4, $5)`,
				uid, int64(d)*86400, float64(100*d+len(uid)), float64(7*d), d%2)
			require.NoError(t, err)
		}
	}
	require.NoError(t, db.Close())
	dsn := "sqlite:" + file
	s, err := usage.Open(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	db = usagetest.DB(t, dsn)
	usagetest.CheckRuns(t, db, true)
	var run float64
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT run_cpu_seconds FROM usage_days WHERE uid = 'b' AND day = $1`, 4*86400).Scan(&run))
	assert.InDelta(t, 7.0*(1+2+3+4), run, 1e-9)
}

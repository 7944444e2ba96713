// Package usagetest holds the behaviour every database of the utilization must show: the unit tests run
// it on SQLite, the integration tests on the local stack's PostgreSQL.
package usagetest

import (
	"database/sql"
	"testing"
	"time"

	"ray-service/internal/sqldb/sqldbtest"
	"ray-service/internal/usage"
)

// Open opens a new, empty store of the utilization and returns it with its DSN (to open it again).
type Open func(t *testing.T) (*usage.Store, string)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// Run runs the contract, each part as a subtest with a store of its own.
func Run(t *testing.T, open Open) {
	t.Run("utilization", func(t *testing.T) { utilization(t, open) })
	t.Run("utilization of many clusters at once", func(t *testing.T) { utilizationMany(t, open) })
	t.Run("utilization pending between credits", func(t *testing.T) { utilizationPending(t, open) })
	t.Run("utilization read in one snapshot", func(t *testing.T) { utilizationSnapshot(t, open) })
	t.Run("utilization by cluster, the days of those picked", func(t *testing.T) { utilizationPicked(t, open) })
	t.Run("utilization of the clusters holding now", func(t *testing.T) { utilizationTails(t, open) })
	t.Run("utilization's running sums and totals", func(t *testing.T) { runningSums(t, open) })
	t.Run("utilization's totals summed again by a prune", func(t *testing.T) { pruneSumsTotals(t, open) })
	t.Run("utilization's totals summed again against a write", func(t *testing.T) { pruneAgainstAWrite(t, open) })
	t.Run("utilization by cluster after a prune", func(t *testing.T) { prunedPage(t, open) })
	t.Run("utilization of every kind, or some", func(t *testing.T) { utilizationKinds(t, open) })
	t.Run("utilization in device equivalents", func(t *testing.T) { utilizationFractions(t, open) })
	t.Run("utilization's accelerators, raw and in devices", func(t *testing.T) { utilizationAccelerators(t, open) })
	t.Run("utilization's accelerators, names bounded per object and day", func(t *testing.T) { acceleratorNamesBounded(t, open) })
}

// DB opens the database at dsn for the checks that read its tables.
func DB(t *testing.T, dsn string) *sql.DB { return sqldbtest.Raw(t, dsn) }

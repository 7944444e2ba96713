package audit_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"ray-service/internal/audit"
	"ray-service/internal/audit/audittest"
	"ray-service/internal/sqldb"
)

// The contract on the embedded SQLite (the integration tests run it on PostgreSQL).
func TestSQLStoreOnSQLite(t *testing.T) {
	audittest.Run(t, func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "history.db") })
}

// What an append costs a write's answer on SQLite, and a check of the whole chain per entry.
func BenchmarkAuditAppend(b *testing.B) {
	db, err := sqldb.Open(b.Context(), "sqlite:"+filepath.Join(b.TempDir(), "history.db"), audit.Migrations())
	require.NoError(b, err)
	defer func() { _ = db.Close() }()
	key := audit.Key("0123456789abcdef0123456789abcdef")
	a := audit.NewSQLStore(db)
	e := audit.Entry{Time: time.Now(), Action: audit.Create, Kind: "RayCluster", Namespace: "team", Name: "demo", User: "alice",
		RequestID: "r-1", Message: "create RayCluster team/demo by alice (request r-1)"}
	for b.Loop() {
		_, err := a.Append(b.Context(), e, key.Seal)
		require.NoError(b, err)
	}
	b.StopTimer()
	start := time.Now()
	v, err := audit.Check(b.Context(), a, key)
	require.NoError(b, err)
	require.True(b, v.Intact)
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(v.Entries), "check-ns/entry")
}

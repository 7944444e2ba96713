package history

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"ray-service/internal/sqldb/sqldbtest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// A history written at the first schema version keeps its records through the later migrations, and
// what each takes is counted for them.
func TestMigrationKeepsRecords(t *testing.T) {
	file := filepath.Join(t.TempDir(), "history.db")
	db := sqliteAt(t, file, 1)
	spec := `{"kind":"RayJob","spec":"` + strings.Repeat("x", 100<<10) + `"}`
	for _, stmt := range []string{
		`INSERT INTO records (uid, kind, namespace, name, status, created_at, finished_at) VALUES ('u1', 'RayJob', 'a', 'old', 'Failed', 1, 2)`,
		`INSERT INTO manifests (uid, spec) VALUES ('u1', '` + spec + `')`,
		`INSERT INTO endings (uid, read_at, body) VALUES ('u1', 2, '{"events":[{"type":"Warning","reason":"BackOff"}]}')`,
		`INSERT INTO transitions (uid, status, at) VALUES ('u1', 'Running', 1), ('u1', 'Failed', 2)`,
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())

	s, err := Open(t.Context(), "sqlite:"+file)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	v, err := s.Version(t.Context())
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, v)
	r, err := s.Get(t.Context(), "u1")
	require.NoError(t, err, "kept")
	assert.Equal(t, spec, r.Spec, "a manifest written before the bound is kept whole")
	assert.Nil(t, r.Cut)
	assert.Len(t, r.Timeline, 2)
	require.NotNil(t, r.Ending)
	assert.Equal(t, "BackOff", r.Ending.Events[0].Reason)
	n, err := s.Bytes(t.Context(), "a")
	require.NoError(t, err)
	assert.Greater(t, n, int64(100<<10), "what it takes is counted")
}

// sqliteAt opens a SQLite database in file at schema version v of these migrations.
func sqliteAt(t *testing.T, file string, v int) *sql.DB {
	t.Helper()
	return sqldbtest.SQLiteAt(t, file, Migrations(), v)
}

// A change queued keeps the first and the last KeptTransitions of its transitions, and counts those
// dropped; past the queue's bytes its changes keep their newest state only; past its count the changes
// of deleted objects queued first are dropped.
func TestQueueBounds(t *testing.T) {
	r := &Recorder{MaxPending: 3, MaxPendingBytes: 256 << 10, Log: zap.NewNop()}
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range 3 * KeptTransitions {
		r.queueLocked(&change{record: Record{UID: "live", Namespace: "a"}, transitions: []Transition{{Status: string(rune('A' + i))}}})
	}
	c := r.pending["live"]
	require.Len(t, c.transitions, 2*KeptTransitions)
	assert.Equal(t, "A", c.transitions[0].Status)
	assert.Equal(t, string(rune('A'+3*KeptTransitions-1)), c.transitions[len(c.transitions)-1].Status)
	assert.Equal(t, int64(KeptTransitions), c.dropped)

	big := `{"kind":"RayJob","metadata":{"name":"x","namespace":"a"},"spec":"` + strings.Repeat("x", 60<<10) + `"}`
	now := c.record.CreatedAt
	for _, uid := range []string{"g1", "g2", "g3", "g4", "g5"} {
		r.queueLocked(&change{record: Record{UID: uid, Namespace: "a", Spec: big, DeletedAt: &now}})
	}
	assert.LessOrEqual(t, r.pendingBytes, int64(256<<10), "within the bytes")
	assert.Len(t, r.pending, 3, "within the count")
	assert.Contains(t, r.pending, "live", "the newest state of an object still there is kept")
	assert.Contains(t, r.pending, "g5", "the newest change is kept")
	assert.NotContains(t, r.pending, "g1", "the deleted ones queued first are dropped")
	assert.Equal(t, int64(3), r.Dropped())
	for uid, p := range r.pending {
		if p.record.Cut != nil {
			assert.Equal(t, int64(len(big)), p.record.Cut.Size, uid)
			assert.Contains(t, p.record.Cut.Reason, "queue")
		}
	}
}

// A namespace's quota bounds what a flood of records just within the bound of a manifest makes of the
// SQLite file: the pages of the records removed are used again.
func TestNamespaceQuotaBoundsTheFile(t *testing.T) {
	const quota = 4 << 20
	file := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(t.Context(), "sqlite:"+file)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	spec := `{"spec":"` + strings.Repeat("x", MaxManifestBytes-20) + `"}`
	size := func() int64 {
		_, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		require.NoError(t, err)
		st, err := os.Stat(file)
		require.NoError(t, err)
		return st.Size()
	}
	before := size()
	now := time.Now()
	written := 0
	for i := range 400 {
		end := now.Add(time.Duration(i) * time.Second)
		require.NoError(t, s.Put(t.Context(), Record{UID: fmt.Sprint("u", i), Kind: "RayJob", Namespace: "flood", Name: fmt.Sprint("j", i),
			Spec: spec, CreatedAt: now, DeletedAt: &end}))
		if written += len(spec); written >= 1<<20 {
			_, err := s.Shrink(t.Context(), "flood", quota)
			require.NoError(t, err)
			written = 0
		}
	}
	grown := size() - before
	t.Logf("400 records of %d KiB manifests (%d MiB) under a quota of %d MiB: the file grew by %d KiB", len(spec)>>10, 400*len(spec)>>20, quota>>20, grown>>10)
	assert.Less(t, grown, int64(quota+2<<20), "the quota and what is written between two checks")
	n, err := s.Bytes(t.Context(), "flood")
	require.NoError(t, err)
	assert.LessOrEqual(t, n, int64(quota+1<<20))
	_, err = s.Get(t.Context(), "u399")
	require.NoError(t, err, "the newest are kept")
}

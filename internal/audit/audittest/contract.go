// Package audittest is the contract of the audit trail's SQL store: what it must do on SQLite and on
// PostgreSQL alike.
package audittest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/audit"
	"ray-service/internal/sqldb"
	"ray-service/internal/sqldb/sqldbtest"
)

var (
	auditKey = audit.Key("0123456789abcdef0123456789abcdef")
	t0       = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
)

// NewDSN makes a database of its own for a test and returns its DSN.
type NewDSN func(t *testing.T) string

// open is the audit trail's store in the database at dsn, closed with the test.
func open(t *testing.T, dsn string) *audit.SQLStore {
	t.Helper()
	db, err := sqldb.Open(t.Context(), dsn, audit.Migrations())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return audit.NewSQLStore(db)
}

// Run runs the contract, each part with a database of its own.
func Run(t *testing.T, newDSN NewDSN) {
	t.Run("linear chain from two handles", func(t *testing.T) { auditChain(t, newDSN(t)) })
	t.Run("pages and namespaces", func(t *testing.T) { auditPages(t, newDSN(t)) })
	t.Run("tampering", func(t *testing.T) { auditTampering(t, newDSN(t)) })
}

func entry(ns, name string, i int) audit.Entry {
	return audit.Entry{Time: t0.Add(time.Duration(i) * time.Second), Action: audit.Create, Kind: "RayCluster", Namespace: ns, Name: name,
		UID: fmt.Sprint("uid-", i), User: "alice", RequestID: fmt.Sprint("r-", i), Message: "create"}
}

// Appends through two handles of one database (two replicas) at once make one chain: consecutive
// sequence numbers, each linked to the one before.
func auditChain(t *testing.T, dsn string) {
	s, other := open(t, dsn), open(t, dsn)
	const writers, each = 4, 15
	var wg sync.WaitGroup
	for w := range writers {
		a := s
		if w%2 == 1 {
			a = other
		}
		wg.Go(func() {
			for i := range each {
				_, err := a.Append(t.Context(), entry(fmt.Sprint("ns-", w), fmt.Sprint("o-", i), w*each+i), auditKey.Seal)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	v, err := audit.Check(t.Context(), s, auditKey)
	require.NoError(t, err)
	assert.Equal(t, audit.Verification{Intact: true, Entries: writers * each, Head: writers * each}, v)
	var seqs []int64
	_, _, err = other.Walk(t.Context(), func(l audit.Link) error { seqs = append(seqs, l.Seq); return nil })
	require.NoError(t, err)
	for i, seq := range seqs {
		assert.Equal(t, int64(i+1), seq)
	}
}

// The entries come newest first, a page at a time, of the namespaces asked for; the namespaces are
// those entries were appended in.
func auditPages(t *testing.T, dsn string) {
	a := open(t, dsn)
	ns, err := a.Namespaces(t.Context())
	require.NoError(t, err)
	assert.Empty(t, ns)
	for i := range 7 {
		stored, err := a.Append(t.Context(), entry([]string{"a", "b"}[i%2], fmt.Sprint("o-", i), i), auditKey.Seal)
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), stored.Seq)
	}
	ns, err = a.Namespaces(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ns)

	all, total, err := a.Entries(t.Context(), audit.Query{Page: 1, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 7, total)
	require.Len(t, all, 3)
	assert.Equal(t, []int64{7, 6, 5}, []int64{all[0].Seq, all[1].Seq, all[2].Seq})
	want := entry("a", "o-6", 6)
	want.Seq = 7
	assert.Equal(t, want, all[0], "as appended")

	onlyA, total, err := a.Entries(t.Context(), audit.Query{Namespaces: []string{"a"}, Page: 2, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 4, total)
	require.Len(t, onlyA, 1)
	assert.Equal(t, int64(1), onlyA[0].Seq)
	none, total, err := a.Entries(t.Context(), audit.Query{Namespaces: []string{}, Page: 1, PageSize: 3})
	require.NoError(t, err)
	assert.Zero(t, total)
	assert.Empty(t, none)
	past, total, err := a.Entries(t.Context(), audit.Query{Page: 9, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 7, total)
	assert.Empty(t, past)
}

// A row changed, removed or added in the database directly breaks the chain where it was; a head row
// removed stops the appends rather than starting a new chain.
func auditTampering(t *testing.T, dsn string) {
	a := open(t, dsn)
	for i := range 5 {
		_, err := a.Append(t.Context(), entry("a", "o", i), auditKey.Seal)
		require.NoError(t, err)
	}
	db := sqldbtest.Raw(t, dsn)
	check := func() audit.Verification {
		t.Helper()
		v, err := audit.Check(t.Context(), a, auditKey)
		require.NoError(t, err)
		return v
	}
	_, err := db.ExecContext(t.Context(), `UPDATE audit_entries SET request_id = 'forged' WHERE seq = 3`)
	require.NoError(t, err)
	v := check()
	assert.False(t, v.Intact)
	assert.Equal(t, int64(3), v.BrokenAt)
	_, err = db.ExecContext(t.Context(), `UPDATE audit_entries SET request_id = 'r-2' WHERE seq = 3`)
	require.NoError(t, err)
	require.True(t, check().Intact)

	_, err = db.ExecContext(t.Context(), `DELETE FROM audit_entries WHERE seq = 5`)
	require.NoError(t, err)
	v = check()
	assert.Equal(t, int64(5), v.BrokenAt, "%+v", v)
	// An append after it chains to the head, not to the entry left last: the gap stays visible.
	_, err = a.Append(t.Context(), entry("a", "o", 9), auditKey.Seal)
	require.NoError(t, err)
	assert.Equal(t, int64(5), check().BrokenAt)

	_, err = db.ExecContext(t.Context(), `DELETE FROM audit_head`)
	require.NoError(t, err)
	_, err = a.Append(t.Context(), entry("a", "o", 10), auditKey.Seal)
	require.ErrorContains(t, err, "head row is missing")
	v, err = audit.Check(t.Context(), a, auditKey)
	require.NoError(t, err)
	assert.False(t, v.Intact)
	assert.Contains(t, v.Problem, "head row is missing")
}

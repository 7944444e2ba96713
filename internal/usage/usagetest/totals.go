package usagetest

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// figureColumns are the figures' columns, each prefixed.
func figureColumns(prefix string) string {
	cols := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

// CheckRuns asserts that each object's days have running sums that grow by each day's figures: from the
// first day kept, or from nothing where wholeFrom (no day was pruned); and CheckTotals.
func CheckRuns(t *testing.T, db *sql.DB, wholeFrom bool) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT uid, day, `+figureColumns("")+`, `+figureColumns("run_")+` FROM usage_days ORDER BY uid, day`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var prevUID string
	var prevRun usage.Figures
	n := 0
	for rows.Next() {
		var uid string
		var day int64
		var f, run usage.Figures
		require.NoError(t, rows.Scan(append(append([]any{&uid, &day}, f.Fields()...), run.Fields()...)...))
		want := f
		if uid == prevUID {
			want.Add(prevRun)
		}
		if uid == prevUID || wholeFrom {
			// Whole seconds and bytes: the sums are exact.
			assert.Equal(t, want, run, "%s day %d", uid, day)
		}
		prevUID, prevRun = uid, run
		n++
	}
	require.NoError(t, rows.Err())
	require.NotZero(t, n)
	CheckTotals(t, db)
}

// CheckTotals asserts that each object's totals are the sums of its days and of its figures pending, and
// each kind's days the sums of its groups' days.
func CheckTotals(t *testing.T, db *sql.DB) {
	t.Helper()
	sums := func(query string) map[string]usage.Figures {
		rows, err := db.QueryContext(t.Context(), query)
		require.NoError(t, err)
		defer func() { _ = rows.Close() }()
		out := map[string]usage.Figures{}
		for rows.Next() {
			var uid string
			var f usage.Figures
			require.NoError(t, rows.Scan(append([]any{&uid}, f.Fields()...)...))
			out[uid] = f
		}
		require.NoError(t, rows.Err())
		return out
	}
	// Whole seconds and bytes: the sums are exact. A sum of counts is NUMERIC to PostgreSQL.
	summed := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		summed[i] = "COALESCE(SUM(f." + c + "), 0)"
		if c == "starts" {
			summed[i] = "CAST(" + summed[i] + " AS BIGINT)"
		}
	}
	assert.Equal(t, sums(`SELECT o.uid, `+strings.Join(summed, ", ")+` FROM usage_objects o LEFT JOIN (SELECT uid, `+figureColumns("")+` FROM usage_days
			UNION ALL SELECT uid, `+figureColumns("")+` FROM usage_pending) f ON f.uid = o.uid GROUP BY o.uid`),
		sums(`SELECT uid, `+figureColumns("total_")+` FROM usage_objects`), "each object's totals")
	const dayKind = `CAST(day AS TEXT) || ' ' || kind`
	assert.Equal(t, sums(`SELECT `+dayKind+`, `+strings.Join(summed, ", ")+` FROM usage_totals f GROUP BY day, kind`),
		sums(`SELECT `+dayKind+`, `+figureColumns("")+` FROM usage_kind_days`), "each kind's days")
}

// The running sums stay those of the days whatever the order the days are written in: several days of
// an object at once, a day before those there (late use, a credit across midnight), a day pending moved
// with others, use measured, and days pruned before; and each object's totals those of its days and
// figures pending.
func runningSums(t *testing.T, open Open) {
	s, dsn := open(t)
	db := DB(t, dsn)
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	day := func(d int) time.Time { return t0.Add(time.Duration(d) * 24 * time.Hour) }
	mark := func(uid string, cpu float64) *usage.Mark {
		return &usage.Mark{UID: uid, Since: t0, State: usage.State{Kind: "RayCluster", Namespace: "ns", Name: uid, Cluster: uid,
			Creator: "alice", Holding: true, Requests: ray.Resources{CPU: cpu, MemoryBytes: 1 << 30, GPU: 1}}}
	}
	a, b, c := mark("a", 2), mark("b", 3), mark("c", 1)
	// a: days 0 to 2 in one credit; b: day 1 alone; c: day 0 alone (pruned whole below).
	l := usage.NewLedger()
	l.Credit(a, day(2).Add(6*time.Hour))
	l.Credit(c, day(0).Add(time.Hour))
	b.Since = day(1)
	l.Credit(b, day(1).Add(time.Hour))
	require.NoError(t, s.PutUsage(ctx, l))
	CheckRuns(t, db, true)
	// Pending: a's day 1 (before its day 2), b's day 0 (before its first) and day 3 (after its last).
	l = usage.NewLedger()
	l.Used(a, usage.DayOf(day(1)), 100, 1<<30, 50, 0)
	l.Used(b, usage.DayOf(day(0)), 10, 0, 0, 0)
	b.Since = day(3)
	l.Credit(b, day(3).Add(2*time.Hour))
	require.NoError(t, s.PutPending(ctx, l))
	// Use measured of a's day 0, pending too; then the minute's credit moves them all.
	l = usage.NewLedger()
	l.Used(a, usage.DayOf(day(0)), 7, 0, 0, 0)
	require.NoError(t, s.PutMeasured(ctx, l, day(3)))
	require.NoError(t, s.PutUsage(ctx, usage.NewLedger()))
	CheckRuns(t, db, true)
	// A credit written straight with a day between two there (a's day 1 and b's day 2, new).
	l = usage.NewLedger()
	l.Used(a, usage.DayOf(day(1)), 5, 0, 0, 0)
	l.Used(b, usage.DayOf(day(2)), 5, 0, 0, 0)
	require.NoError(t, s.PutUsage(ctx, l))
	CheckRuns(t, db, true)
	// Use read of a cluster whose first mark is still to be written (the writer had not written it yet),
	// then its mark: its totals count both.
	x := mark("x", 1)
	l = usage.NewLedger()
	l.Used(x, usage.DayOf(day(2)), 30, 0, 0, 0)
	require.NoError(t, s.PutMeasured(ctx, l, day(3)))
	l = usage.NewLedger()
	x.Since = day(2)
	l.Credit(x, day(2).Add(time.Hour))
	require.NoError(t, s.PutUsage(ctx, l))
	CheckRuns(t, db, true)
	// Use of b's day 0 pending when the days before day 1 are pruned with it.
	l = usage.NewLedger()
	l.Used(b, usage.DayOf(day(0)), 4, 0, 0, 0)
	require.NoError(t, s.PutPending(ctx, l))
	// Days before day 1 pruned: what is left still grows by its days, and later writes keep it so.
	_, err := s.PruneUsage(ctx, day(1), false)
	require.NoError(t, err)
	l = usage.NewLedger()
	l.Used(a, usage.DayOf(day(1)), 3, 0, 0, 0)
	a.Since = day(2).Add(6 * time.Hour)
	l.Credit(a, day(4))
	require.NoError(t, s.PutUsage(ctx, l))
	CheckRuns(t, db, false)
	var days int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_days`).Scan(&days))
	assert.Equal(t, 7, days, "a's days 1 to 3, b's and x's")
	// A page by cluster over every day: c, whose days were all pruned, has none in it.
	q := usage.Query{From: day(0), To: day(5), Now: day(0).Add(time.Hour), GroupBy: usage.ByCluster,
		Scopes: map[string][]string{"RayCluster": nil}, Page: &usage.Page{SortBy: "name", Limit: 10}}
	res, err := s.Utilization(ctx, q)
	require.NoError(t, err)
	var uids []string
	for _, g := range res.Groups {
		uids = append(uids, g.Key.UID)
	}
	assert.Equal(t, []string{"a", "b", "x"}, uids)
	assert.Equal(t, 3, res.Count)
}

// On PostgreSQL a prune sums the objects' totals again where they differ from their days: when asked (a
// replica's first prune of its term of writing), and at each that removes figures. Days deleted without
// their totals taken off (an older replica's prune in a rolling upgrade) are healed so. SQLite has one
// writer, this process, which takes them off.
func pruneSumsTotals(t *testing.T, open Open) {
	s, db := drifted(t, open, "SQLite has one writer: no other prunes its days", "a", "b", "c")
	ctx := t.Context()
	// And all b's days before 4: the totals still count them.
	_, err := db.ExecContext(ctx, `DELETE FROM usage_days WHERE uid = 'b' AND day < $1`, usage.DayOf(pruneDay(4)))
	require.NoError(t, err)
	// A prune asked to, with nothing to remove, heals both.
	pruned, err := s.PruneUsage(ctx, pruneDay(-1), true)
	require.NoError(t, err)
	assert.Equal(t, usage.Pruned{Corrected: 2}, pruned)
	CheckTotals(t, db)
	// One not asked to, removing nothing, leaves the totals as they are (it reads no day)...
	_, err = db.ExecContext(ctx, `DELETE FROM usage_days WHERE uid = 'c' AND day = $1`, usage.DayOf(pruneDay(3)))
	require.NoError(t, err)
	pruned, err = s.PruneUsage(ctx, pruneDay(-1), false)
	require.NoError(t, err)
	assert.Equal(t, usage.Pruned{}, pruned)
	// ...and one that removes figures sums them again: c's day 0, the group's and the kind's go, c is
	// corrected.
	pruned, err = s.PruneUsage(ctx, pruneDay(1), false)
	require.NoError(t, err)
	assert.Equal(t, usage.Pruned{Removed: 3, Corrected: 1}, pruned)
	CheckTotals(t, db)
}

// On PostgreSQL a batch's credit written while a prune sums the totals again keeps its figures: the
// batch adds to the totals without the fold's lock, and the prune waits for it to commit before it
// reads the sums.
func pruneAgainstAWrite(t *testing.T, open Open) {
	s, db := drifted(t, open, "SQLite has one writer: a prune and a batch's credit do not overlap", "a")
	ctx := t.Context()
	// A batch's credit in flight, as PutPending writes it: a's figures pending, and its totals.
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `INSERT INTO usage_pending (uid, day, namespace, kind, creator, used_cpu_seconds, totalled)
		VALUES ('a', $1, 'ns', 'RayCluster', 'alice', 10, 1)`, usage.DayOf(pruneDay(3)))
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `UPDATE usage_objects SET total_used_cpu_seconds = total_used_cpu_seconds + 10 WHERE uid = 'a'`)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.PruneUsage(ctx, pruneDay(-1), true)
		done <- err
	}()
	// The prune waits for the batch (a lock not granted), which commits then.
	require.Eventually(t, func() bool {
		var waiting int
		return db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting) == nil && waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the prune waits for the batch")
	require.NoError(t, tx.Commit())
	require.NoError(t, <-done)
	CheckTotals(t, db)
}

// pruneDay is day d of the prunes' cases.
func pruneDay(d int) time.Time {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(d) * 24 * time.Hour)
}

// drifted is a PostgreSQL history (on SQLite the test is skipped, saying why) where the clusters uids
// held 2 cores and 1 GiB each from day 0 to day 4, and a's day 0 was deleted behind the store's back
// (as an older replica's prune would), its totals still counting it; and its database.
func drifted(t *testing.T, open Open, why string, uids ...string) (*usage.Store, *sql.DB) {
	t.Helper()
	s, dsn := open(t)
	if strings.HasPrefix(dsn, "sqlite:") {
		t.Skip(why)
	}
	db := DB(t, dsn)
	l := usage.NewLedger()
	for _, uid := range uids {
		m := &usage.Mark{UID: uid, Since: pruneDay(0), State: usage.State{Kind: "RayCluster", Namespace: "ns", Name: uid, Cluster: uid,
			Creator: "alice", Holding: true, Requests: ray.Resources{CPU: 2, MemoryBytes: 1 << 30}}}
		l.Credit(m, pruneDay(4))
	}
	require.NoError(t, s.PutUsage(t.Context(), l))
	_, err := db.ExecContext(t.Context(), `DELETE FROM usage_days WHERE uid = 'a' AND day = $1`, usage.DayOf(pruneDay(0)))
	require.NoError(t, err)
	return s, db
}

// A page by cluster sorts a cluster whose days were pruned by what is kept of them: its days' running
// sums still count the days pruned, so a prune records the first days it left, and the clusters that
// start there are looked up in their days (the others from their totals and their first day in the
// window). The first days left by a prune that did not record them (a replica of a version before)
// are found in the days by a prune asked to sum the totals again.
func prunedPage(t *testing.T, open Open) {
	s, dsn := open(t)
	db := DB(t, dsn)
	ctx := t.Context()
	day := pruneDay
	mark := func(uid string, cpu float64, since time.Time) *usage.Mark {
		return &usage.Mark{UID: uid, Since: since, State: usage.State{Kind: "RayCluster", Namespace: "ns", Name: uid, Cluster: uid,
			Creator: "alice", Holding: true, Requests: ray.Resources{CPU: cpu, MemoryBytes: 1 << 30}}}
	}
	// p held 100 cores on day 0 and 3 from day 1; q 2 cores from day 1; both up to day 4.
	p, q := mark("p", 100, day(0)), mark("q", 2, day(1))
	l := usage.NewLedger()
	st := p.State
	st.Requests.CPU = 3
	l.Change(p, st, day(1))
	l.Credit(p, day(4))
	l.Credit(q, day(4))
	require.NoError(t, s.PutUsage(ctx, l))
	first := func(from int) string {
		t.Helper()
		res, err := s.Utilization(ctx, usage.Query{From: day(from), To: day(4), Now: day(4), GroupBy: usage.ByCluster,
			Scopes: map[string][]string{"RayCluster": nil}, Page: &usage.Page{SortBy: "cpuCoreHours", Desc: true, Limit: 1}})
		require.NoError(t, err)
		require.Len(t, res.Groups, 1)
		return res.Groups[0].Key.UID
	}
	assert.Equal(t, "p", first(2), "3 cores against 2 over days 2 and 3")
	_, err := s.PruneUsage(ctx, day(1), false)
	require.NoError(t, err)
	assert.Equal(t, "p", first(2), "after day 0 is pruned")
	// Day 1 pruned as a version before did: its days and their totals, and the first days moved.
	subtract := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		subtract[i] = "total_" + c + " = total_" + c + " - COALESCE((SELECT SUM(d." + c + ") FROM usage_days d WHERE d.uid = usage_objects.uid AND d.day < $1), 0)"
	}
	for _, stmt := range []string{`UPDATE usage_objects SET ` + strings.Join(subtract, ", "), `DELETE FROM usage_days WHERE day < $1`,
		`DELETE FROM usage_totals WHERE day < $1`, `UPDATE usage_objects SET first_day = $1 WHERE first_day < $1`} {
		_, err := db.ExecContext(ctx, stmt, usage.DayOf(day(2)))
		require.NoError(t, err)
	}
	_, err = s.PruneUsage(ctx, day(1), true)
	require.NoError(t, err)
	assert.Equal(t, "p", first(3), "3 cores against 2 on day 3, after day 1 is pruned by a version before")
}

package usage

import (
	"context"
	"strings"
	"time"
)

// Pruned is what a PruneUsage did.
type Pruned struct {
	// Removed is the number of rows removed: days, groups' and kinds' days, seconds measured, figures pending
	// and the marks of objects gone.
	Removed int64
	// Corrected is the number of objects whose totals were not the sums of their days and figures
	// pending, and were set to them.
	Corrected int64
}

// PruneUsage removes the figures of days before `before`, and the marks of objects gone whose last day
// with figures is before it. One transaction, after any fold on PostgreSQL.
//
// The objects' totals lose the figures removed. On SQLite, where this process is the only writer, they
// are taken off. On PostgreSQL the totals are summed again from what is left, where they differ: when
// resum is set (the first prune of a replica's term of writing) and whenever figures are removed (once
// a day, as a day leaves the retention). Taking the figures off would keep the totals only as long as
// every writer does so: a replica of a version before the totals, leading in a rolling upgrade, prunes
// days without touching them, and no guard refuses a DELETE. Summing again heals that, and any other
// drift, within a day. It reads every day kept: 240 ms over a month of 10,000 objects (prune-ms in
// BenchmarkUtilization), against 1.2 s on SQLite. The marks are locked against writes for the prune (a
// batch's credit adds to the totals without the fold's lock): one written between the sums' snapshot
// and their write would lose its figures.
func (s *Store) PruneUsage(ctx context.Context, before time.Time, resum bool) (Pruned, error) {
	var out Pruned
	day := DayOf(before)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return out, err
	}
	defer func() { _ = tx.Rollback() }()
	if s.postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, foldLock); err != nil {
			return out, err
		}
		// Before any row is locked here: a batch waiting for a row this prune changed, while the prune
		// waits for the batch's lock of the table, would deadlock.
		if _, err := tx.ExecContext(ctx, `LOCK TABLE usage_objects IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return out, err
		}
	}
	if !s.postgres {
		subtract := make([]string, len(Columns))
		for i, c := range Columns {
			subtract[i] = totalColumns[i] + " = usage_objects." + totalColumns[i] + " - p." + c
		}
		if _, err := tx.ExecContext(ctx, `UPDATE usage_objects SET `+strings.Join(subtract, ", ")+` FROM `+objectSums("day < $1")+` p
			WHERE usage_objects.uid = p.uid`, day); err != nil {
			return out, err
		}
	}
	figures := int64(0)
	for i, stmt := range []string{`DELETE FROM usage_days WHERE day < $1`, `DELETE FROM usage_pending WHERE day < $1`,
		`DELETE FROM usage_totals WHERE day < $1`, `DELETE FROM usage_kind_days WHERE day < $1`, `DELETE FROM usage_measured WHERE day < $1`,
		`DELETE FROM usage_objects WHERE gone = 1 AND (last_day IS NULL OR last_day < $1)`, `DELETE FROM usage_accelerators WHERE day < $1`} {
		res, err := tx.ExecContext(ctx, stmt, day)
		if err != nil {
			return out, err
		}
		c, _ := res.RowsAffected()
		out.Removed += c
		if i < 2 {
			figures += c
		}
	}
	// What is left of an object starts at the first day kept, which is recorded (see clustersPaged);
	// asked to, found in the days as well (what a replica of a version before the record pruned).
	if _, err := tx.ExecContext(ctx, `UPDATE usage_objects SET first_day = $1 WHERE first_day < $1`, day); err != nil {
		return out, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage_state (name, value) VALUES ('`+prunedBeforeKey+`', $1)`+laterPruned, day); err != nil {
		return out, err
	}
	if resum {
		if _, err := tx.ExecContext(ctx, prunedFound); err != nil {
			return out, err
		}
	}
	if s.postgres && (figures > 0 || resum) {
		res, err := tx.ExecContext(ctx, resumTotals)
		if err != nil {
			return out, err
		}
		out.Corrected, _ = res.RowsAffected()
	}
	return out, tx.Commit()
}

// prunedBeforeKey is usage_state's row holding the first day the last prune left (see clustersPaged).
const prunedBeforeKey = "pruned_before"

// laterPruned keeps the latest of the first days that prunes left (usage_state's prunedBeforeKey).
const laterPruned = ` ON CONFLICT (name) DO UPDATE SET value = excluded.value WHERE excluded.value > usage_state.value`

// prunedFound records the first day left of the objects whose days' running sums count days pruned
// (where their first day's differ from its own figures), as a prune does.
var prunedFound = func() string {
	differ := make([]string, len(Columns))
	for i, c := range Columns {
		differ[i] = "d." + runColumns[i] + " <> d." + c
	}
	return `INSERT INTO usage_state (name, value) SELECT '` + prunedBeforeKey + `', MAX(o.first_day) FROM usage_objects o
		JOIN usage_days d ON d.uid = o.uid AND d.day = o.first_day WHERE ` + strings.Join(differ, " OR ") + `
		HAVING MAX(o.first_day) IS NOT NULL` + laterPruned
}()

// resumTotals sets each object's totals to the sums of its days and figures pending, where they differ
// by more than the rounding of sums added in another order.
var resumTotals = func() string {
	sets, differ := make([]string, len(Columns)), make([]string, len(Columns))
	for i, c := range Columns {
		t := "usage_objects." + totalColumns[i]
		sets[i] = totalColumns[i] + " = f." + c
		differ[i] = "ABS(" + t + " - f." + c + ") > 1e-9 * ABS(f." + c + ") + 1e-6"
	}
	sums := make([]string, len(Columns))
	for i, c := range Columns {
		sums[i] = castFigure(c, "COALESCE(s."+c+", 0)") + " AS " + c
	}
	return `UPDATE usage_objects SET ` + strings.Join(sets, ", ") + ` FROM (SELECT o.uid, ` + strings.Join(sums, ", ") + `
		FROM usage_objects o LEFT JOIN ` + objectSums("true") + ` s ON s.uid = o.uid) f
		WHERE usage_objects.uid = f.uid AND (` + strings.Join(differ, " OR ") + `)`
}()

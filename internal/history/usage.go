package history

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"ray-service/internal/usage"
)

// usageMigration keeps the utilization accounting (package usage): each Ray cluster's mark (what it
// holds since when, to whom it is counted) and the days it held anything; its figures per UTC day; the
// same summed per day, namespace, kind and creator (what a month of a hundred namespaces is read
// from); the seconds of each day whose use was read from Prometheus, and up to when it was. None of
// it refers to the records: the figures outlive the records' retention.
const usageMigration = `CREATE TABLE usage_objects (
		uid TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		cluster TEXT NOT NULL,
		creator TEXT NOT NULL,
		holding INTEGER NOT NULL,
		idle INTEGER NOT NULL,
		cpu DOUBLE PRECISION NOT NULL,
		memory_bytes BIGINT NOT NULL,
		gpu BIGINT NOT NULL,
		npu BIGINT NOT NULL,
		since BIGINT NOT NULL,
		gone INTEGER NOT NULL,
		first_day BIGINT,
		last_day BIGINT
	);
	CREATE INDEX usage_objects_live ON usage_objects (gone, holding);
	CREATE INDEX usage_objects_by_days ON usage_objects (last_day, first_day, kind, namespace, creator);
	CREATE TABLE usage_days (
		uid TEXT NOT NULL,
		day BIGINT NOT NULL,
		` + usageColumnsDDL + `,
		PRIMARY KEY (uid, day)
	);
	CREATE INDEX usage_days_by_day ON usage_days (day, uid);
	CREATE TABLE usage_totals (
		day BIGINT NOT NULL,
		namespace TEXT NOT NULL,
		kind TEXT NOT NULL,
		creator TEXT NOT NULL,
		` + usageColumnsDDL + `,
		PRIMARY KEY (day, namespace, kind, creator)
	);
	CREATE TABLE usage_measured (
		day BIGINT PRIMARY KEY,
		seconds DOUBLE PRECISION NOT NULL
	);
	CREATE TABLE usage_state (
		name TEXT PRIMARY KEY,
		value BIGINT NOT NULL
	)`

// kindSummedMigration adds to each group's day the column of kindsGuarded: its figures are in its
// kind's day too (kindDaysMigration). On SQLite the default stays, to keep one shape of rows.
const kindSummedMigration = `ALTER TABLE usage_totals ADD COLUMN kind_summed SMALLINT NOT NULL DEFAULT 1`

// kindsGuarded takes the default off kindSummedMigration's column on PostgreSQL, so that its writer
// must fill it: a replica of a version before the kinds' days, still running while a new one migrated,
// fails to write a group's day (its rows lack it) instead of writing one its kind's day does not count;
// its credit is taken up from the marks by the writer after it. It comes before the kinds' days are
// summed, so that no group's day is written between that and the guard. SQLite has one process.
const kindsGuarded = postgresOnly + `ALTER TABLE usage_totals ALTER COLUMN kind_summed DROP DEFAULT`

// kindDaysMigration keeps the groups' days summed per day and kind, over the namespaces and creators:
// what a report reads for a kind it counts in every namespace (groupDays). A month of three kinds is
// 90 rows, where its groups' days in 100 namespaces are 3,000: the whole's days of a page by cluster
// of every namespace took 0.6 ms against 4.3 ms on SQLite. Written with the groups' days: in the same
// statement on PostgreSQL (foldKinds), summed again from them on SQLite (kindsSummed); pruned with
// them. A replica of a version before, leading in a rolling upgrade, prunes the groups' days and
// leaves the kinds' (no guard refuses a DELETE): until this version's next prune, within the hour, a
// report of a window before the retention may read figures by kind, or for the whole, that it no
// longer has by namespace.
var kindDaysMigration = `CREATE TABLE usage_kind_days (
		day BIGINT NOT NULL,
		kind TEXT NOT NULL,
		` + usageColumnsDDL + `,
		PRIMARY KEY (day, kind)
	);
	` + kindDaysSummed("true")

// usageColumnsDDL declares the figures (usage.Columns).
const usageColumnsDDL = `held_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		memory_byte_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		gpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		npu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		idle_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		idle_gpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		idle_npu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		used_cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		used_memory_byte_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		used_gpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		used_npu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
		starts BIGINT NOT NULL DEFAULT 0`

// pendingMigration keeps the figures of the changes between the minute's credits (PutPending): a
// row a change, with the group it was credited to, and no index. The minute's credit (PutUsage) adds
// them to the days and the groups and empties it, so it holds at most a minute of changes.
const pendingMigration = `CREATE TABLE usage_pending (
		uid TEXT NOT NULL,
		day BIGINT NOT NULL,
		namespace TEXT NOT NULL,
		kind TEXT NOT NULL,
		creator TEXT NOT NULL,
		` + usageColumnsDDL + `
	)`

// runsMigration gives each object's day the running sums of its figures: what it has had up to that day,
// that day included (runColumns). A window's figures of a cluster are then two rows, the window's last
// and first (the sums of the last, less those of the first, plus the first's own figures: the days
// pruned before count in both), not a row a day: over 10,000 clusters and 30 days, 20,000 rows read
// instead of 300,000. The days there are summed once, in the order of their days.
var runsMigration = func() string {
	var b strings.Builder
	for i, c := range runColumns {
		fmt.Fprintf(&b, "ALTER TABLE usage_days ADD COLUMN %s %s NOT NULL DEFAULT 0;\n", c, columnType(usage.Columns[i]))
	}
	sets, sums := make([]string, len(runColumns)), make([]string, len(runColumns))
	for i, c := range runColumns {
		sets[i] = c + " = w." + c
		sums[i] = castFigure(usage.Columns[i], "SUM("+usage.Columns[i]+") OVER (PARTITION BY uid ORDER BY day)") + " AS " + c
	}
	b.WriteString("UPDATE usage_days SET " + strings.Join(sets, ", ") + " FROM (SELECT uid, day, " + strings.Join(sums, ", ") +
		" FROM usage_days) w WHERE usage_days.uid = w.uid AND usage_days.day = w.day")
	return b.String()
}()

// runsRequired takes the default off the running sums on PostgreSQL: a replica of a version before
// them, still running while a new one migrated, then fails to write a day (its rows lack them) instead
// of writing one whose sums are wrong; its credit is taken up from the marks by the writer after it.
// SQLite has one process.
var runsRequired = func() string {
	stmts := make([]string, len(runColumns))
	for i, c := range runColumns {
		stmts[i] = "ALTER TABLE usage_days ALTER COLUMN " + c + " DROP DEFAULT"
	}
	return postgresOnly + strings.Join(stmts, ";\n")
}()

// totalsGuarded takes the default off a column of each day and each row pending on PostgreSQL
// (totalledMigration), so that its writer must fill it: a replica of a version before the objects'
// totals (totalsMigration), still running while a new one migrated, fails to write figures (its rows
// lack it) instead of writing some that the totals do not count; its credit is taken up from the marks
// by the writer after it. It comes before the totals, so that no such figure is written between their
// backfill and the guard. SQLite has one process.
const totalsGuarded = postgresOnly + `ALTER TABLE usage_days ALTER COLUMN totalled DROP DEFAULT;
	ALTER TABLE usage_pending ALTER COLUMN totalled DROP DEFAULT`

// totalledMigration adds the column of totalsGuarded (on SQLite, where the default stays, to keep one
// shape of rows).
const totalledMigration = `ALTER TABLE usage_days ADD COLUMN totalled SMALLINT NOT NULL DEFAULT 1;
	ALTER TABLE usage_pending ADD COLUMN totalled SMALLINT NOT NULL DEFAULT 1`

// totalsMigration gives each object's mark its figures summed over all it has, its days kept and those
// pending (totalColumns): the figures of a window that holds all its days, read from its mark. A report
// by cluster over a month then looks days up only for the clusters with days on both sides of one of the
// window's ends, not for each cluster. Each write of a ledger adds its figures to their objects' marks in
// the same write as the marks (moving figures pending into the days changes no total); the pruning of
// days takes them off, or sums them again (PruneUsage).
var totalsMigration = func() string {
	var b strings.Builder
	sets := make([]string, len(totalColumns))
	for i, c := range totalColumns {
		fmt.Fprintf(&b, "ALTER TABLE usage_objects ADD COLUMN %s %s NOT NULL DEFAULT 0;\n", c, columnType(usage.Columns[i]))
		sets[i] = c + " = s." + usage.Columns[i]
	}
	b.WriteString("UPDATE usage_objects SET " + strings.Join(sets, ", ") + " FROM " + objectSums("true") + " s WHERE usage_objects.uid = s.uid")
	return b.String()
}()

// objectSums sums each object's figures of its days and those pending where where holds (of their day):
// a table of uid and usage.Columns.
func objectSums(where string) string {
	return "(SELECT uid, " + summedAs(usage.Columns) + " FROM (SELECT uid, " + prefixed("") + " FROM usage_days WHERE " + where +
		" UNION ALL SELECT uid, " + prefixed("") + " FROM usage_pending WHERE " + where + ") f GROUP BY uid)"
}

// summedAs is the sums of the figures' columns cols, each named as its column.
func summedAs(cols []string) string {
	sums := make([]string, len(cols))
	for i, c := range cols {
		sums[i] = castFigure(c, "SUM("+c+")") + " AS " + c
	}
	return strings.Join(sums, ", ")
}

// totalColumns are the objects' totals' columns in usage_objects, in the order of usage.Columns.
var totalColumns = func() []string {
	out := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		out[i] = "total_" + c
	}
	return out
}()

// runColumns are the running sums' columns in usage_days, in the order of usage.Columns.
var runColumns = func() []string {
	out := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		out[i] = "run_" + c
	}
	return out
}()

// columnType is a figure's column's type (starts are counted, the others summed seconds).
func columnType(c string) string {
	if c == "starts" {
		return "BIGINT"
	}
	return "DOUBLE PRECISION"
}

// castFigure is expr as a figure's column's type: a sum of counts is a count (PostgreSQL's SUM of
// BIGINT is NUMERIC).
func castFigure(c, expr string) string {
	if c == "starts" {
		return "CAST(" + expr + " AS BIGINT)"
	}
	return expr
}

// The statements that add a ledger's figures, built once from usage.Columns.
var (
	// addUsageTotal adds to the groups' days, each saying that its kind's day counts it (kindsGuarded).
	addUsageTotal = func() upsert {
		u := addFigures("usage_totals", []string{"day", "namespace", "kind", "creator"}, []string{"bigint", "text", "text", "text"})
		u.head = strings.Replace(u.head, ") VALUES ", ", kind_summed) VALUES ", 1)
		u.columns++
		u.types = append(u.types, "smallint")
		return u
	}()
	addKindDay = addFigures("usage_kind_days", []string{"day", "kind"}, []string{"bigint", "text"})
	// addPending appends figures to usage_pending: plain rows, whatever is there, each saying that its
	// object's totals count it (totalsGuarded).
	addPending = func() upsert {
		u := addFigures("usage_pending", []string{"uid", "day", "namespace", "kind", "creator"}, []string{"text", "bigint", "text", "text", "text"})
		u.head = strings.Replace(u.head, ") VALUES ", ", totalled) VALUES ", 1)
		u.tail = ""
		u.columns++
		u.types = append(u.types, "integer")
		return u
	}()
	sumFigures = summedAs(usage.Columns)
)

// addFigures inserts rows of table keyed by key (of keyTypes), or adds their figures to the rows there.
func addFigures(table string, key, keyTypes []string) upsert {
	cols := append(slices.Clone(key), usage.Columns...)
	types := slices.Clone(keyTypes)
	sets := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		sets[i] = c + " = " + table + "." + c + " + excluded." + c
		t := "double precision"
		if c == "starts" {
			t = "bigint"
		}
		types = append(types, t)
	}
	return upsert{head: "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES ",
		tail: "ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(sets, ", "), columns: len(cols), types: types}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PutUsage writes the minute's credit: the ledger's figures and those pending (PutPending) are added to
// the objects' days, with their running sums, and to their groups' days, with the marks the ledger moved
// and the seconds measured; written whole or not at all. An empty ledger only moves what is pending.
func (s *Store) PutUsage(ctx context.Context, l *usage.Ledger) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.credit(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit()
}

// writeUnsynced runs write in a transaction on SQLite whose commit does not wait for the disk
// (synchronous NORMAL, for that commit alone): a batch's credit (PutPending), written right after the
// batch's records. The next record's commit, or the minute's credit, which wait, take its part of the
// log to the disk with their own. Only a power loss or a crash of the system before then loses it, and
// then whole, as if it had failed: the marks are left where they were, and the credit is taken up from
// them. A batch's credit of 50 changes took 1.48 to 1.64 ms with the wait and 1.25 to 1.36 ms without
// (120 batches, five runs each).
func (s *Store) writeUnsynced(ctx context.Context, write func(*sql.Tx) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	// The safety level may not change within a transaction: it is set on the connection around it. It
	// is set back whatever happens (the PRAGMA may have run though its call failed), and a connection
	// that cannot have it back is closed, not left to commit the records so.
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = `+s.synchronous); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = cmp.Or(err, rerr)
		}
	}()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := write(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// credit writes l in tx and moves the figures pending into the days and groups.
func (s *Store) credit(ctx context.Context, tx *sql.Tx, l *usage.Ledger) error {
	rows, err := usageRowsOf(l)
	if err != nil {
		return err
	}
	if s.postgres {
		// One at a time: a running sum is written from the sums the credit read (SQLite has one writer).
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, foldLock); err != nil {
			return err
		}
		// The ledger's figures go with those pending, not through usage_pending: each row deleted there
		// is dead until vacuumed, and the reports scan it.
		return creditPostgres.exec(ctx, tx, rows.marks, rows.spans, rows.measured, rows.pending)
	}
	if err := s.writeUsageRows(ctx, tx, rows); err != nil {
		return err
	}
	// A day at a time, in chunks of rows (SQLite took 470 ms to upsert 10,000 rows in one statement,
	// 65 ms in chunks of 256): each chunk is moved whole, and reads the running sums the one before
	// wrote. Within a day an object's figures moved are its day's, with no window of running sums to
	// add up.
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MIN(rowid), MAX(rowid) FROM usage_pending`).Scan(&lo, &hi); err != nil || !lo.Valid {
		return err
	}
	var pendingDays []int64
	if err := scanRows(ctx, tx, `SELECT DISTINCT day FROM usage_pending ORDER BY day`, nil, func(r *sql.Rows) error {
		var d int64
		err := r.Scan(&d)
		pendingDays = append(pendingDays, d)
		return err
	}); err != nil {
		return err
	}
	for _, day := range pendingDays {
		// No object has a day after the last of the groups' (each day of an object is in its group's):
		// the figures of the day that ends there, the usual, leave the later days alone.
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(day) FROM usage_totals`).Scan(&last); err != nil {
			return err
		}
		for from := lo.Int64 - 1; from < hi.Int64; from += foldChunk {
			for i, st := range s.folds {
				if i == foldLater && (!last.Valid || last.Int64 <= day) {
					continue
				}
				if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, day, from, from+foldChunk); err != nil {
					return err
				}
			}
		}
	}
	// The kinds' days of the days moved, summed again from their groups' days.
	for _, day := range pendingDays {
		if _, err := tx.ExecContext(ctx, kindsSummed, day); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM usage_pending`)
	return err
}

// kindsSummed sets the kinds' days of day $1 to the sums of its groups' days, on SQLite, once the
// credit has moved that day's figures. Adding the figures of each chunk moved to them instead
// (foldKinds, as PostgreSQL does in its one statement, where the groups' days it writes are not yet
// visible) sorted and summed the chunk's rows a second time, where a day has a row a group: a fold of
// 2,000 changes took a median 31.9 ms against 29.4 ms so (nine runs of each, alternated).
var kindsSummed = kindDaysSummed("day = $1")

// kindDaysSummed sets the kinds' days of the groups' days where where holds to their sums: the
// backfill of kindDaysMigration, and kindsSummed.
func kindDaysSummed(where string) string {
	sets := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		sets[i] = c + " = excluded." + c
	}
	return strings.TrimSuffix(addKindDay.head, "VALUES ") + "SELECT day, kind, " + sumFigures + ` FROM usage_totals WHERE ` + where + `
		GROUP BY day, kind ORDER BY day, kind ON CONFLICT (day, kind) DO UPDATE SET ` + strings.Join(sets, ", ")
}

// foldChunk is the number of pending rows (by rowid) a chunk of SQLite's fold moves.
const foldChunk = 256

// foldLater is the index in foldSQLite of the statement that adds to the days after.
const foldLater = 1

// foldSQLite are the statements that move the figures pending of day $1 and rowids $2 (excluded) to $3
// into the objects' days, with their running sums, and into their groups' days, on SQLite:
//   - a day's running sums are those of the object's last day up to it (itself, if there) plus its
//     figures moved; its figures are added to those there;
//   - the days after it add its figures moved to their running sums.
var foldSQLite = func() []string {
	const where = "day = $1 AND rowid > $2 AND rowid <= $3"
	sums, cols, runs, sets, adds := make([]string, len(usage.Columns)), make([]string, len(usage.Columns)),
		make([]string, len(usage.Columns)), make([]string, len(usage.Columns)), make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		r := runColumns[i]
		sums[i] = "SUM(" + c + ") AS " + c
		cols[i] = "c." + c
		runs[i] = "COALESCE(p." + r + ", 0) + c." + c
		sets[i] = c + " = usage_days." + c + " + excluded." + c + ", " + r + " = excluded." + r
		adds[i] = r + " = usage_days." + r + " + c." + c
	}
	moved := `(SELECT uid, day, ` + strings.Join(sums, ", ") + ` FROM usage_pending WHERE ` + where + ` GROUP BY uid) c`
	return []string{
		`INSERT INTO usage_days (uid, day, ` + strings.Join(usage.Columns, ", ") + `, ` + strings.Join(runColumns, ", ") + `)
			SELECT c.uid, c.day, ` + strings.Join(cols, ", ") + `, ` + strings.Join(runs, ", ") + ` FROM ` + moved + `
			LEFT JOIN usage_days p ON p.rowid = (SELECT x.rowid FROM usage_days x WHERE x.uid = c.uid AND x.day <= c.day
				ORDER BY x.day DESC LIMIT 1)
			WHERE true ON CONFLICT (uid, day) DO UPDATE SET ` + strings.Join(sets, ", "),
		`UPDATE usage_days SET ` + strings.Join(adds, ", ") + ` FROM ` + moved + `
			WHERE usage_days.uid = c.uid AND usage_days.day > c.day`,
		foldTotals("usage_pending", where),
	}
}()

// foldLock is the PostgreSQL advisory lock a fold of the pending figures holds.
const foldLock = migrationLock + 1

// PutPending writes the credit of changes between the minute's credits: the marks the ledger moved, and
// its figures as rows pending, which the reports add and the next PutUsage moves into the days and
// groups. Written whole or not at all. It upserts the marks and appends rows to a table without an
// index, where PutUsage upserts each object's day and each group's too: on PostgreSQL a batch of 50
// changes took about half the time, and the days and groups are written once a minute.
func (s *Store) PutPending(ctx context.Context, l *usage.Ledger) error {
	if l.Empty() {
		return nil
	}
	rows, err := usageRowsOf(l)
	if err != nil {
		return err
	}
	if s.postgres {
		return pendingArrays.exec(ctx, s.db, rows.marks, rows.spans, rows.pending, rows.measured)
	}
	return s.writeUnsynced(ctx, func(tx *sql.Tx) error { return s.writeUsageRows(ctx, tx, rows) })
}

// foldDays are the WITH queries that add the figures moved (from %s: usage_pending's columns) to the
// objects' days with their running sums, on PostgreSQL (foldSQLite does it on SQLite), in one statement:
//   - d: the figures moved, summed by object and day; c: the same with their running sums (cum_*);
//   - days: a day's running sums are those of the object's last day up to it (itself, if there) as they
//     were, plus those moved up to it; its figures are added to those there. In the order of the keys
//     (as usageRowsOf: two writers lock in the same order).
//     Each day written says so (totalled: see totalsGuarded).
//   - late: a day after one moved, with nothing moved itself, adds what was moved before it. None is
//     after the last day of the groups' (each day of an object is in its group's), the usual.
func foldDays(source string) string {
	cols, cums, runs, sets, adds, lateSums := make([]string, len(usage.Columns)), make([]string, len(usage.Columns)),
		make([]string, len(usage.Columns)), make([]string, len(usage.Columns)), make([]string, len(usage.Columns)),
		make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		r := runColumns[i]
		cols[i] = "c." + c
		cums[i] = castFigure(c, "SUM("+c+") OVER w") + " AS cum_" + c
		runs[i] = "COALESCE(p." + r + ", 0) + c.cum_" + c
		sets[i] = c + " = usage_days." + c + " + excluded." + c + ", " + r + " = excluded." + r
		adds[i] = r + " = usage_days." + r + " + l." + c
		lateSums[i] = castFigure(c, "SUM(d."+c+")") + " AS " + c
	}
	return `d AS (SELECT uid, day, ` + summedAs(usage.Columns) + ` FROM ` + source + ` GROUP BY uid, day),
		c AS (SELECT uid, day, ` + prefixed("") + `, ` + strings.Join(cums, ", ") + ` FROM d
			WINDOW w AS (PARTITION BY uid ORDER BY day)),
		days AS (INSERT INTO usage_days (uid, day, ` + strings.Join(usage.Columns, ", ") + `, ` + strings.Join(runColumns, ", ") + `, totalled)
			SELECT c.uid, c.day, ` + strings.Join(cols, ", ") + `, ` + strings.Join(runs, ", ") + `, 1 FROM c
			LEFT JOIN LATERAL (SELECT ` + strings.Join(runColumns, ", ") + ` FROM usage_days x WHERE x.uid = c.uid AND x.day <= c.day
				ORDER BY x.day DESC LIMIT 1) p ON true
			ORDER BY c.uid, c.day ON CONFLICT (uid, day) DO UPDATE SET ` + strings.Join(sets, ", ") + `),
		late AS (UPDATE usage_days SET ` + strings.Join(adds, ", ") + ` FROM (SELECT r.uid, r.day, ` + strings.Join(lateSums, ", ") + `
			FROM d JOIN usage_days r ON r.uid = d.uid AND r.day > d.day
			WHERE d.day < (SELECT MAX(day) FROM usage_totals) AND NOT EXISTS (SELECT 1 FROM d e WHERE e.uid = r.uid AND e.day = r.day)
			GROUP BY r.uid, r.day) l
			WHERE usage_days.uid = l.uid AND usage_days.day = l.day)`
}

// foldTotals adds the figures of source's rows (usage_pending's columns, where where holds) to their
// groups' days, summed first, in the order of their keys.
func foldTotals(source, where string) string {
	const key = "day, namespace, kind, creator"
	return strings.TrimSuffix(addUsageTotal.head, "VALUES ") + "SELECT " + key + ", " + sumFigures + ", 1 FROM " + source +
		" WHERE " + where + " GROUP BY " + key + " ORDER BY " + key + " " + addUsageTotal.tail
}

// foldKinds adds the figures of source's rows (as foldTotals) to their kinds' days.
func foldKinds(source, where string) string {
	const key = "day, kind"
	return strings.TrimSuffix(addKindDay.head, "VALUES ") + "SELECT " + key + ", " + sumFigures + " FROM " + source +
		" WHERE " + where + " GROUP BY " + key + " ORDER BY " + key + " " + addKindDay.tail
}

// creditPostgres writes a ledger on PostgreSQL in one statement (usageRows' parts: marks, spans, the
// seconds measured, its figures as usage_pending's rows) and moves its figures with those pending into
// the days and groups: the rows it deletes there are the rows it adds, whatever another writer appends
// meanwhile.
var creditPostgres = arrays(putMarks.part(), putSpans.part(), addMeasured.part(), arrayPart{columns: addPending.columns, text: func(n int) string {
	// The last part of arrays follows the WITH queries of the others: it carries on their list.
	return ", pending AS (DELETE FROM usage_pending RETURNING *), src AS (SELECT * FROM pending UNION ALL SELECT * FROM unnest(" +
		addPending.arrays(n) + ")), " + foldDays("src") + ", kinds AS (" + foldKinds("src", "true") + ") " + foldTotals("src", "true")
}})

// usageRows are a ledger's rows, in the columns of their upserts: the marks, the days of objects whose
// marks did not move with their totals (putSpans), each object's figures per day with its group, pending,
// and the seconds measured per day.
type usageRows struct {
	marks, spans, pending, measured [][]any
}

// usageRowsOf are a ledger's rows, each part in the order of its keys: two writers that change the same
// rows (the credit and the reading of use) lock them in the same order, and never deadlock.
func usageRowsOf(l *usage.Ledger) (usageRows, error) {
	// The days each object has figures of, for its first and last day.
	type span struct {
		first, last int64
		total       usage.Figures
		owner       usage.State
	}
	days := map[string]*span{}
	out := usageRows{marks: make([][]any, 0, len(l.Marks)), pending: make([][]any, 0, len(l.Deltas))}
	for k, f := range l.Deltas {
		m, ok := l.Owner(k.UID)
		if !ok {
			return usageRows{}, fmt.Errorf("usage of %s credited without its mark", k.UID)
		}
		out.pending = append(out.pending, append(append([]any{k.UID, k.Day, m.Namespace, m.Kind, m.Creator}, f.Values()...), 1))
		d := days[k.UID]
		if d == nil {
			d = &span{first: k.Day, last: k.Day, owner: m}
			days[k.UID] = d
		}
		d.first, d.last = min(d.first, k.Day), max(d.last, k.Day)
		d.total.Add(*f)
	}
	for _, m := range l.Marks {
		r := m.Requests
		var first, last any
		var total usage.Figures
		if d := days[m.UID]; d != nil {
			first, last, total = d.first, d.last, d.total
			delete(days, m.UID)
		}
		out.marks = append(out.marks, append([]any{m.UID, m.Kind, m.Namespace, m.Name, m.Cluster, m.Creator, boolInt(m.Holding),
			boolInt(m.Idle), r.CPU, r.MemoryBytes, r.GPU, r.NPU, m.Since.UnixNano(), boolInt(m.Gone), first, last}, total.Values()...))
	}
	// Objects whose use was credited without their marks: only their days and totals (putSpans).
	for uid, d := range days {
		o := d.owner
		out.spans = append(out.spans, append([]any{uid, o.Kind, o.Namespace, o.Name, o.Cluster, o.Creator, 0, 0, 0.0, int64(0), int64(0),
			int64(0), int64(0), 1, d.first, d.last}, d.total.Values()...))
	}
	out.measured = make([][]any, 0, len(l.Measured))
	for day, sec := range l.Measured {
		out.measured = append(out.measured, []any{day, sec})
	}
	for _, part := range [][][]any{out.marks, out.spans, out.pending, out.measured} {
		slices.SortFunc(part, compareKeys)
	}
	return out, nil
}

// compareKeys orders rows by their first values (their keys: strings or days), then the next.
func compareKeys(a, b []any) int {
	for i := range min(len(a), len(b), 4) {
		var c int
		switch x := a[i].(type) {
		case string:
			c = strings.Compare(x, b[i].(string))
		case int64:
			c = cmp.Compare(x, b[i].(int64))
		default:
			return 0
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// writeUsageRows writes a ledger's rows on SQLite, in tx.
func (s *Store) writeUsageRows(ctx context.Context, tx *sql.Tx, rows usageRows) error {
	if err := s.insertRows(ctx, tx, &putMarks, rows.marks); err != nil {
		return err
	}
	if err := s.insertRows(ctx, tx, &putSpans, rows.spans); err != nil {
		return err
	}
	if err := s.insertRows(ctx, tx, &addPending, rows.pending); err != nil {
		return err
	}
	return s.insertRows(ctx, tx, &addMeasured, rows.measured)
}

// execer runs a statement: the database, or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// arrayStatement is a statement of PostgreSQL taking each column of each of its parts as one array: its
// text is the same whatever the rows, so the driver (in its default mode) prepares it once a
// connection, and a ledger is one round trip.
type arrayStatement struct {
	text string
	// widths are the parts' numbers of columns.
	widths []int
}

// exec runs a with the rows of each of its parts.
func (a arrayStatement) exec(ctx context.Context, ex execer, parts ...[][]any) error {
	var args []any
	for i, part := range parts {
		args = append(args, columnsOf(part, a.widths[i])...)
	}
	_, err := ex.ExecContext(ctx, a.text, args...)
	return err
}

// columnsOf are the rows' columns, each a slice of its values (a NULL is nil).
func columnsOf(rows [][]any, width int) []any {
	cols := make([][]any, width)
	for j := range cols {
		cols[j] = make([]any, len(rows))
	}
	for i, r := range rows {
		for j, v := range r {
			cols[j][i] = v
		}
	}
	out := make([]any, width)
	for j, c := range cols {
		out[j] = c
	}
	return out
}

// upsert is an INSERT of many rows at once: its head (up to VALUES), its tail (ON CONFLICT …), and the
// columns of a row.
type upsert struct {
	head, tail string
	columns    int
	// types are the columns' types in PostgreSQL, for their arrays (unnest).
	types []string
}

// unnest is u's statement on PostgreSQL taking one array a column, its parameters numbered from first.
func (u *upsert) unnest(first int) string {
	return strings.TrimSuffix(u.head, "VALUES ") + "SELECT * FROM unnest(" + u.arrays(first) + ") " + u.tail
}

// arrays are u's columns as PostgreSQL's typed arrays, parameters numbered from first.
func (u *upsert) arrays(first int) string {
	arrays := make([]string, len(u.types))
	for i, t := range u.types {
		arrays[i] = fmt.Sprintf("$%d::%s[]", first+i, t)
	}
	return strings.Join(arrays, ", ")
}

// chunkSizes are the numbers of rows one statement of an upsert writes, largest first: rows go in
// chunks of these sizes on SQLite, so that an upsert has a few statements, prepared once (see
// prepareUpserts), however many rows it writes (SQLite takes 32,766 arguments: 256 rows of 16).
var chunkSizes = []int{256, 64, 16, 4, 1}

// upserts are the upserts whose statements the store prepares.
var upserts = []*upsert{&putMarks, &putSpans, &addPending, &addMeasured}

// statement is u's statement of n rows on SQLite.
func (u *upsert) statement(n int) string {
	var b strings.Builder
	b.WriteString(u.head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := range u.columns {
			if j > 0 {
				b.WriteString(", ")
			}
			// SQLite looks a numbered parameter up by its name, linearly: a statement of
			// thousands would spend its time there. Its ? is taken in order.
			b.WriteString("?")
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(u.tail)
	return b.String()
}

// upsertKey names a prepared statement: an upsert and its rows.
type upsertKey struct {
	u    *upsert
	rows int
}

// prepareUpserts prepares the upserts' statements of SQLite, whose driver parses a statement at each
// run otherwise (for a credit of 50 clusters, a quarter of its time). PostgreSQL's driver keeps the
// statements it prepared on each connection by itself.
func (s *Store) prepareUpserts(ctx context.Context) error {
	if s.postgres {
		return nil
	}
	s.prepared = map[upsertKey]*sql.Stmt{}
	for _, text := range foldSQLite {
		st, err := s.db.PrepareContext(ctx, text)
		if err != nil {
			return err
		}
		s.folds = append(s.folds, st)
	}

	for _, u := range upserts {
		for _, n := range chunkSizes {
			st, err := s.db.PrepareContext(ctx, u.statement(n))
			if err != nil {
				return err
			}
			s.prepared[upsertKey{u, n}] = st
		}
	}
	return nil
}

// insertRows runs u for the rows in tx on SQLite, in chunks of chunkSizes. No two rows may have the same
// key (a statement may not change a row twice).
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, u *upsert, rows [][]any) error {
	for len(rows) > 0 {
		n := chunkSizes[slices.IndexFunc(chunkSizes, func(c int) bool { return c <= len(rows) })]
		args := make([]any, 0, n*u.columns)
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := tx.StmtContext(ctx, s.prepared[upsertKey{u, n}]).ExecContext(ctx, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// putMarks writes marks, and widens the days their objects have figures of.
var putMarks = upsert{head: `INSERT INTO usage_objects (uid, kind, namespace, name, cluster, creator, holding, idle,
		cpu, memory_bytes, gpu, npu, since, gone, first_day, last_day, ` + strings.Join(totalColumns, ", ") + `) VALUES `,
	tail: `ON CONFLICT (uid) DO UPDATE SET kind = excluded.kind, namespace = excluded.namespace, name = excluded.name,
		cluster = excluded.cluster, creator = excluded.creator, holding = excluded.holding, idle = excluded.idle,
		cpu = excluded.cpu, memory_bytes = excluded.memory_bytes, gpu = excluded.gpu, npu = excluded.npu,
		since = excluded.since, gone = excluded.gone, ` + mergeDays + `, ` + addTotals("excluded."),
	columns: 16 + len(totalColumns), types: append([]string{"text", "text", "text", "text", "text", "text", "integer", "integer", "double precision", "bigint",
		"bigint", "bigint", "bigint", "integer", "bigint", "bigint"}, totalTypes...)}

// mergeDays widens an object's first and last day to take in those of the row proposed.
const mergeDays = `first_day = CASE WHEN excluded.first_day IS NULL THEN usage_objects.first_day
			WHEN usage_objects.first_day IS NULL OR usage_objects.first_day > excluded.first_day THEN excluded.first_day
			ELSE usage_objects.first_day END,
		last_day = CASE WHEN excluded.last_day IS NULL THEN usage_objects.last_day
			WHEN usage_objects.last_day IS NULL OR usage_objects.last_day < excluded.last_day THEN excluded.last_day
			ELSE usage_objects.last_day END`

// addTotals adds to an object's totals the figures of p (a row's columns prefixed, in the order of
// totalColumns).
func addTotals(p string) string {
	sets := make([]string, len(totalColumns))
	for i, c := range totalColumns {
		sets[i] = c + " = usage_objects." + c + " + " + p + c
	}
	return strings.Join(sets, ", ")
}

// totalTypes are the types of totalColumns in PostgreSQL, for their arrays.
var totalTypes = func() []string {
	out := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		out[i] = strings.ToLower(columnType(c))
	}
	return out
}()

// addMeasured adds the seconds measured of days.
var addMeasured = upsert{head: `INSERT INTO usage_measured (day, seconds) VALUES `,
	tail: `ON CONFLICT (day) DO UPDATE SET seconds = usage_measured.seconds + excluded.seconds`, columns: 2,
	types: []string{"bigint", "double precision"}}

// arrayPart is a part of an arrayStatement: its text, taking its arrays numbered from first, and its
// number of columns.
type arrayPart struct {
	text    func(first int) string
	columns int
}

// part is u as a part of an arrayStatement.
func (u *upsert) part() arrayPart {
	if len(u.types) != u.columns {
		panic(fmt.Sprintf("history: an upsert of %d columns names %d types", u.columns, len(u.types)))
	}
	return arrayPart{text: u.unnest, columns: u.columns}
}

// putSpans widens the days of the objects whose marks did not move and adds to their totals (putMarks'
// columns: the mark's own are left as they are). An object without a mark yet (its first is still to be
// written, and its use was read meanwhile) gets a placeholder, gone and holding nothing, which its mark
// replaces: its totals and days are then those of all its figures.
var putSpans = upsert{head: putMarks.head,
	tail: `ON CONFLICT (uid) DO UPDATE SET ` + mergeDays + `, ` + addTotals("excluded."), columns: putMarks.columns, types: putMarks.types}

// arrays is one statement of parts: each but the last a WITH query, the last the statement's own. No
// two of them may change the same row.
func arrays(parts ...arrayPart) arrayStatement {
	var b strings.Builder
	a := arrayStatement{}
	n := 1
	for i, p := range parts {
		switch {
		case i == 0 && len(parts) > 1:
			b.WriteString("WITH ")
		case i < len(parts)-1:
			b.WriteString(", ")
		default:
			b.WriteString(" ")
		}
		if i < len(parts)-1 {
			fmt.Fprintf(&b, "p%d AS (%s)", i, p.text(n))
		} else {
			b.WriteString(p.text(n))
		}
		n += p.columns
		a.widths = append(a.widths, p.columns)
	}
	a.text = b.String()
	return a
}

// pendingArrays writes a ledger on PostgreSQL in one statement: the marks, the days of the objects whose
// marks did not move, their figures pending, and the seconds measured.
var pendingArrays = arrays(putMarks.part(), putSpans.part(), addPending.part(), addMeasured.part())

// UsageMarks are the marks of the objects not gone, by UID: where a new writer takes their credit up.
func (s *Store) UsageMarks(ctx context.Context) (map[string]*usage.Mark, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT uid, kind, namespace, name, cluster, creator, holding, idle, cpu, memory_bytes,
		gpu, npu, since FROM usage_objects WHERE gone = 0`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]*usage.Mark{}
	for rows.Next() {
		m := &usage.Mark{}
		var holding, idle int
		var since int64
		r := &m.Requests
		if err := rows.Scan(&m.UID, &m.Kind, &m.Namespace, &m.Name, &m.Cluster, &m.Creator, &holding, &idle, &r.CPU,
			&r.MemoryBytes, &r.GPU, &r.NPU, &since); err != nil {
			return nil, err
		}
		m.Holding, m.Idle, m.Since = holding == 1, idle == 1, time.Unix(0, since).UTC()
		out[m.UID] = m
	}
	return out, rows.Err()
}

// measuredToKey is usage_state's row holding up to when use was measured.
const measuredToKey = "measured_to"

// MeasuredTo is up to when use was measured (zero: never).
func (s *Store) MeasuredTo(ctx context.Context) (time.Time, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT value FROM usage_state WHERE name = $1`, measuredToKey).Scan(&v)
	if err == sql.ErrNoRows {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, v).UTC(), nil
}

// PutMeasured writes what was measured from Prometheus up to `to`: the ledger (its figures of use and
// seconds measured) and the new bound, in one transaction.
func (s *Store) PutMeasured(ctx context.Context, l *usage.Ledger, to time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage_state (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, measuredToKey, to.UnixNano()); err != nil {
		return err
	}
	if err := s.credit(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit()
}

// UsageNamespaces are the namespaces with any object counted.
func (s *Store) UsageNamespaces(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT namespace FROM usage_objects`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, rows.Err()
}

// scopeClause is the SQL condition of q's scopes and creators on the columns of alias ("" or "o."),
// its arguments numbered after n.
func scopeClause(q usage.Query, alias string, n int) (string, []any) {
	return scopedBy(q, alias, n, false)
}

// scopedBy is scopeClause, with no condition on the kinds and namespaces where anyKind is set (the
// creators' alone).
func scopedBy(q usage.Query, alias string, n int, anyKind bool) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", n+len(args))
	}
	clause := "1 = 1"
	if !anyKind {
		kinds := make([]string, 0, len(q.Scopes))
		for k := range q.Scopes {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		var ors []string
		for _, k := range kinds {
			ns := q.Scopes[k]
			if ns != nil && len(ns) == 0 {
				continue // none: every argument must be used (PostgreSQL types each by its use)
			}
			c := alias + "kind = " + arg(k)
			if ns != nil {
				in := make([]string, len(ns))
				for i, v := range ns {
					in[i] = arg(v)
				}
				c += " AND " + alias + "namespace IN (" + strings.Join(in, ", ") + ")"
			}
			ors = append(ors, "("+c+")")
		}
		if len(ors) == 0 {
			return "1 = 0", args
		}
		clause = "(" + strings.Join(ors, " OR ") + ")"
	}
	if len(q.Creators) > 0 {
		in := make([]string, len(q.Creators))
		for i, v := range q.Creators {
			in[i] = arg(v)
		}
		clause += " AND " + alias + "creator IN (" + strings.Join(in, ", ") + ")"
	}
	return clause, args
}

// groupColumn is the column a grouping other than by cluster sums by.
func groupColumn(by string) string {
	switch by {
	case usage.ByCreator:
		return "creator"
	case usage.ByKind:
		return "kind"
	}
	return "namespace"
}

func setGroup(k *usage.GroupKey, by, v string) {
	switch by {
	case usage.ByCreator:
		k.Creator = v
	case usage.ByKind:
		k.Kind = v
	case usage.ByCluster:
		k.UID = v
	default:
		k.Namespace = v
	}
}

// Utilization sums the figures of q's window by q's grouping, per group and day, with the objects of
// each group, and the seconds measured per day; an object holding now is credited from its last credit
// up to q.Now. By cluster for a page (q.Page), see clustersPaged.
func (s *Store) Utilization(ctx context.Context, q usage.Query) (usage.Result, error) {
	// One snapshot: a credit written while the report reads (moving pending figures into the days, or
	// a mark's credit into its day) is in it whole or not at all.
	opts := &sql.TxOptions{ReadOnly: true}
	if s.postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return usage.Result{}, err
	}
	defer func() { _ = tx.Rollback() }()
	if s.postgres {
		// No compilation of plans (JIT): PostgreSQL compiles a plan priced over jit_above_cost (100,000
		// by default) at each run. The page by cluster over 10,000 clusters is priced about 56,000;
		// priced past it (as about twice as many would be), it took 37 to 38 ms against 25 to 27 ms, and
		// 126 ms at its first run. Set here, for the report alone: set when the session starts, it
		// would override the database's and role's settings, and a pooler may refuse it.
		if _, err := tx.ExecContext(ctx, `SET LOCAL jit = off`); err != nil {
			return usage.Result{}, err
		}
	}
	r := report{tx: tx, q: q}
	if r.anyKind, err = everyKind(ctx, tx, q); err != nil {
		return usage.Result{}, err
	}
	var res usage.Result
	if q.GroupBy == usage.ByCluster && q.Page != nil {
		res, err = s.clustersPaged(ctx, r)
	} else {
		res, err = utilizationDays(ctx, r)
	}
	if err != nil {
		return usage.Result{}, err
	}
	// The seconds measured.
	res.Measured = map[int64]float64{}
	rows, err := tx.QueryContext(ctx, `SELECT day, seconds FROM usage_measured WHERE day >= $1 AND day < $2`, q.From.Unix(), q.To.Unix())
	if err != nil {
		return usage.Result{}, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var day int64
		var sec float64
		if err := rows.Scan(&day, &sec); err != nil {
			return usage.Result{}, err
		}
		res.Measured[day] = sec
	}
	return res, rows.Err()
}

// report is what a report reads from: its snapshot, and what it asks.
type report struct {
	tx *sql.Tx
	q  usage.Query
	// anyKind is set where q counts every namespace of each kind the marks have (everyKind).
	anyKind bool
}

// marks is the condition of r's scopes and creators on the marks (usage_objects), as scopeClause: none
// on their kinds and namespaces where r counts them all.
func (r report) marks(alias string, n int) (string, []any) {
	return scopedBy(r.q, alias, n, r.anyKind)
}

// everyKind reports whether q counts every namespace of each kind the marks have: a report then needs
// no condition on a mark's kind and namespace, three comparisons of text a mark, a millisecond a pass
// over 10,000 marks on SQLite (a page by cluster makes three). The kinds are read a seek each in their
// index. The days of the groups (usage_totals) keep theirs: they outlive the marks of their objects.
// SQLite writes the index's entry again with each mark (the upsert sets the kind). The kinds kept in
// this process instead took writing the credit from a median 4.1 % of the recorder's time to 3.7 %
// (eight runs each, alternated), and would trust that nothing else writes the file: the marks of a
// kind it had not seen would be read without their scope.
func everyKind(ctx context.Context, tx *sql.Tx, q usage.Query) (bool, error) {
	every := false
	for _, ns := range q.Scopes {
		every = every || ns == nil
	}
	if !every {
		return false, nil
	}
	// gone >= 0 holds for every mark: it names the index (usage_objects_kind, partial on it).
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE k (kind) AS (SELECT MIN(kind) FROM usage_objects WHERE gone >= 0
		UNION ALL SELECT (SELECT MIN(x.kind) FROM usage_objects x WHERE x.gone >= 0 AND x.kind > k.kind) FROM k WHERE k.kind IS NOT NULL)
		SELECT kind FROM k WHERE kind IS NOT NULL`)
	if err != nil {
		return false, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var kind string
		if err := rows.Scan(&kind); err != nil {
			return false, err
		}
		if ns, ok := q.Scopes[kind]; !ok || ns != nil {
			every = false
		}
	}
	return every, rows.Err()
}

// groupDays adds the days of q's window of each group by col (a grouping's column; "" sums the whole),
// and those pending. A kind counted in every namespace, where no creator is asked, is read from its
// kind's days (usage_kind_days), by kind or for the whole; the others from the groups' days.
func groupDays(ctx context.Context, tx *sql.Tx, q usage.Query, col string, add func(usage.GroupKey, int64, usage.Figures)) error {
	from, to := q.From.Unix(), q.To.Unix()
	value, by := "''", "day"
	if col != "" {
		value, by = col, col+", day"
	}
	rest, whole := q, []string(nil)
	if len(q.Creators) == 0 && (col == "" || col == groupColumn(usage.ByKind)) {
		rest.Scopes = map[string][]string{}
		for k, ns := range q.Scopes {
			if ns == nil {
				whole = append(whole, k)
			} else {
				rest.Scopes[k] = ns
			}
		}
		slices.Sort(whole)
	}
	read := func(table, where string, args []any) error {
		return addDays(ctx, tx, `SELECT `+value+`, day, `+sumFigures+` FROM `+table+` WHERE day >= $1 AND day < $2 AND `+where+
			` GROUP BY `+by, append([]any{from, to}, args...), false, q.GroupBy, add)
	}
	if len(whole) > 0 {
		in, args := inList(whole, 3)
		if err := read("usage_kind_days", "kind IN ("+in+")", args); err != nil {
			return err
		}
	}
	if len(rest.Scopes) > 0 {
		where, args := scopeClause(rest, "", 2)
		if err := read("usage_totals", where, args); err != nil {
			return err
		}
	}
	where, args := scopeClause(q, "", 2)
	return read("usage_pending", where, args)
}

// groupsOf makes the groups of a report as they are first named.
type groupsOf map[usage.GroupKey]*usage.Group

func (m groupsOf) group(k usage.GroupKey) *usage.Group {
	g := m[k]
	if g == nil {
		g = &usage.Group{Key: k, Days: map[int64]*usage.Figures{}}
		m[k] = g
	}
	return g
}

// addDay adds f to g's day.
func addDay(g *usage.Group, day int64, f usage.Figures) {
	g.Total.Add(f)
	addTo(g.Days, day, f)
}

// utilizationDays reads every group's days of q's window: by namespace, creator or kind from the groups'
// days, by cluster from each cluster's.
func utilizationDays(ctx context.Context, r report) (usage.Result, error) {
	tx, q := r.tx, r.q
	from, to := q.From.Unix(), q.To.Unix()
	groups := groupsOf{}
	byCluster := q.GroupBy == usage.ByCluster
	col := groupColumn(q.GroupBy)
	// The figures of the days, then those pending (PutPending).
	if byCluster {
		ow, oa := r.marks("o.", 2)
		for _, table := range []string{"usage_days", "usage_pending"} {
			err := addDays(ctx, tx, `SELECT o.uid, o.namespace, o.cluster, o.kind, o.name, o.creator, d.day, `+prefixed("d.")+
				` FROM `+table+` d JOIN usage_objects o ON o.uid = d.uid WHERE d.day >= $1 AND d.day < $2 AND `+ow,
				append([]any{from, to}, oa...), true, q.GroupBy, func(k usage.GroupKey, day int64, f usage.Figures) {
					addDay(groups.group(k), day, f)
				})
			if err != nil {
				return usage.Result{}, err
			}
		}
	} else {
		err := groupDays(ctx, tx, q, col, func(k usage.GroupKey, day int64, f usage.Figures) { addDay(groups.group(k), day, f) })
		if err != nil {
			return usage.Result{}, err
		}
	}
	// The tails, and (but by cluster, where each is one) the objects counted, in the same pass.
	if err := tails(ctx, r, nil, !byCluster, groups.group, addDay); err != nil {
		return usage.Result{}, err
	}
	res := usage.Result{Groups: make([]usage.Group, 0, len(groups))}
	for _, g := range groups {
		if byCluster {
			g.Objects = 1
		}
		res.Groups = append(res.Groups, *g)
	}
	return res, nil
}

// clustersPaged reads a page of a report by cluster (q.Page). The database sums each cluster by what the
// page is sorted by over the window: its totals where all its days are in the window, else the difference
// of the running sums of its last and first days there (two rows, however many days) and what is pending;
// and the credit of its hold since its last credit. It sorts them and gives the page's worth from each
// of its queries, merged here. One pass over the clusters counts them all and sums the whole's tails.
// The clusters on the page are then read whole (their days, those pending and their tails), and the
// whole's days from the groups' days (or the kinds', groupDays) and those pending. With no Limit, every cluster is given with
// every figure summed, without its days.
func (s *Store) clustersPaged(ctx context.Context, r report) (usage.Result, error) {
	tx, q := r.tx, r.q
	from, to := q.From.Unix(), q.To.Unix()
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	p := *q.Page
	sums := usage.SortColumns(p.SortBy)
	if p.Limit == 0 {
		sums = usage.Columns
	}
	// A cluster holding since before the window's end (or now), and the seconds it held since its last
	// credit, up to there, from the window's start.
	tailing := holdingBefore("o.", "$3")
	held := `(CASE WHEN ` + tailing + `
		THEN CAST($3 - (CASE WHEN o.since > $4 THEN o.since ELSE $4 END) AS DOUBLE PRECISION) / 1000000000.0 ELSE 0 END)`
	idle := idleAccelerators("o.")
	// A cluster with all its days in the window.
	const inside = `(o.first_day >= $1 AND o.last_day < $2)`
	tailOf := map[string]string{"held_seconds": held, "cpu_seconds": "o.cpu * " + held, "memory_byte_seconds": "o.memory_bytes * " + held,
		"gpu_seconds": "o.gpu * " + held, "npu_seconds": "o.npu * " + held, "idle_seconds": idle + " * " + held,
		"idle_gpu_seconds": idle + " * o.gpu * " + held, "idle_npu_seconds": idle + " * o.npu * " + held}
	// A figure over the window: its days', those pending and the tail's. A cluster whose days are all in
	// the window has its totals (its days' and those pending); one with days outside has the difference
	// of its running sums, and those pending in the window.
	ranged := func(c string) string {
		return `(CASE WHEN h.day >= $1 THEN h.run_` + c + ` - l.run_` + c + ` + l.` + c + ` ELSE 0 END)`
	}
	// A page on PostgreSQL looks the days up in subqueries of the figure, which run only for a cluster
	// with days outside the window: joined (below), their plan ran for every cluster, 5 ms over 10,000
	// of them with all their days inside, with nothing to look up. Two lookups a figure (the window's
	// last day, and its first), where the join has two whatever the figures: a page sorts by one or
	// two; a report of every cluster, with all thirteen, joins.
	lookups := s.postgres && p.Limit > 0
	// A cluster's days before the window: the running sums of its first day in it less that day's own.
	before := func(c string) string { return `(l.run_` + c + ` - l.` + c + `)` }
	if lookups {
		before = func(c string) string {
			return `(SELECT x.run_` + c + ` - x.` + c + ` FROM usage_days x WHERE x.uid = o.uid AND x.day >= $1 ORDER BY x.day LIMIT 1)`
		}
		ranged = func(c string) string {
			return `COALESCE((SELECT x.run_` + c + ` FROM usage_days x WHERE x.uid = o.uid AND x.day >= $1 AND x.day < $2
					ORDER BY x.day DESC LIMIT 1) - ` + before(c) + `, 0)`
		}
	}
	// A figure of a cluster with all its days in the window, of one with days outside, and of either.
	totalled := func(c string) string { return `o.total_` + c }
	looked := func(c string) string { return `(` + ranged(c) + ` + COALESCE(pp.` + c + `, 0))` }
	// On a page, a cluster with no day after the window, whose running sums count no day pruned, is
	// looked up once: its figure is its totals less what is pending outside the window and less its
	// days before the window (before). With no day in the window, it has its figures pending there
	// alone. The last week of 10,000 clusters held since before it (the API's default window) looked
	// two days up for each.
	// A prune records the first day it left (pruned_before): a cluster whose first day is up to there
	// may count days pruned and is looked up twice. Until a replica of this version has pruned with
	// its totals summed again (PruneUsage, at the start of its term of writing), what a replica of a
	// version before pruned is not recorded, and a page sorts those clusters by less than they hold;
	// the figures it gives are read from their days.
	const kept = `(o.first_day > COALESCE((SELECT s.value FROM usage_state s WHERE s.name = '` + prunedBeforeKey + `'), -1) AND o.last_day < $2)`
	quick := p.Limit > 0
	if quick {
		slow := looked
		looked = func(c string) string {
			return `(CASE WHEN ` + kept + ` THEN (CASE WHEN o.last_day >= $1 THEN ` + totalled(c) + ` - COALESCE(pp.out_` + c + `, 0) - ` + before(c) + `
					ELSE COALESCE(pp.` + c + `, 0) END)
				ELSE ` + slow(c) + ` END)`
		}
	}
	either := func(c string) string {
		return `(CASE WHEN ` + inside + ` THEN ` + totalled(c) + ` ELSE ` + looked(c) + ` END)`
	}
	// The figures pending in the window of each cluster (and on a page those outside it, out_*).
	pending := []string{"uid"} // none summed where the page is sorted by name
	for _, c := range sums {
		pending = append(pending, castFigure(c, `SUM(CASE WHEN day >= $1 AND day < $2 THEN `+c+` ELSE 0 END)`)+` AS `+c)
		if quick {
			pending = append(pending, castFigure(c, `SUM(CASE WHEN day >= $1 AND day < $2 THEN 0 ELSE `+c+` END)`)+` AS out_`+c)
		}
	}
	pendingJoin := ` LEFT JOIN (SELECT ` + strings.Join(pending, ", ") + ` FROM usage_pending GROUP BY uid) pp`
	// What a join looks up only for a cluster with days outside the window.
	guard := func(sub string) string { return `(CASE WHEN ` + inside + ` THEN NULL ELSE ` + sub + ` END)` }
	unguarded := func(sub string) string { return sub }
	// The window's last day of each cluster (h) and its first (l); on a page, l alone for those looked
	// up once.
	lastOf := func(g func(string) string) string {
		h := `(SELECT x.rowid FROM usage_days x WHERE x.uid = o.uid AND x.day < $2 ORDER BY x.day DESC LIMIT 1)`
		if quick {
			h = `(CASE WHEN ` + kept + ` THEN NULL ELSE ` + h + ` END)`
		}
		return `usage_days h ON h.rowid = ` + g(h) + `
		LEFT JOIN usage_days l ON l.rowid = ` + g(`(SELECT x.rowid FROM usage_days x WHERE x.uid = o.uid AND x.day >= $1 ORDER BY x.day LIMIT 1)`)
	}
	last := lastOf(guard)
	// As Build sorts: by the figure (none for the name and the objects: a cluster is one), ties by the
	// name ascending (namespace, cluster, UID), byte by byte. Three columns, not their concatenation:
	// over 10,000 clusters of a few distinct figures, building the strings took half the sort.
	label := `o.namespace%[1]s, o.cluster%[1]s, o.uid%[1]s`
	collate := ""
	if s.postgres {
		// The condition on o alone is checked before the scan of the index (a one-time filter).
		last = `LATERAL (SELECT * FROM usage_days x WHERE NOT COALESCE(` + inside + `, false) AND x.uid = o.uid AND x.day < $2
				ORDER BY x.day DESC LIMIT 1) h ON true
			LEFT JOIN LATERAL (SELECT * FROM usage_days x WHERE NOT COALESCE(` + inside + `, false) AND x.uid = o.uid AND x.day >= $1
				ORDER BY x.day LIMIT 1) l ON true`
		collate = ` COLLATE "C"`
	}
	dir := " ASC"
	if p.Desc {
		dir = " DESC"
	}
	key := usage.SortColumns(p.SortBy)
	byKey := p.SortBy != "name" && len(key) > 0
	order := fmt.Sprintf(label, collate+dir)
	if p.SortBy != "name" {
		order = fmt.Sprintf(label, collate+" ASC")
		if byKey {
			order = "sort_key" + dir + ", " + order
		}
	}
	ow, oa := r.marks("o.", 4)
	args := append([]any{from, to, end.UnixNano(), q.From.UnixNano()}, oa...)
	res := usage.Result{Whole: map[int64]*usage.Figures{}, Paged: true}
	groups := groupsOf{}
	// The clusters that may be in the window (days in it, or holding since before its end), with a tail,
	// figures pending there, or days in it. A cluster with all its days in the window has days there
	// unless they were all pruned (its first day is then after its last). The count looks no day up for
	// a cluster holding. The cheapest test first, the one that holds for most clusters over a month (all
	// their days in it): the count took half the time (SQLite 3.40, 10,000 clusters, 5 ms before), where
	// the tail's seconds were computed for each.
	near := nearWindow("o.", tailing)
	const pendingThere = `o.uid IN (SELECT uid FROM usage_pending WHERE day >= $1 AND day < $2)`
	const daysThere = `EXISTS (SELECT 1 FROM usage_days x WHERE x.uid = o.uid AND x.day >= $1 AND x.day < $2)`
	clusters := near + ` AND ` + ow + `
		AND ((` + inside + ` AND o.first_day <= o.last_day) OR ` + held + ` > 0 OR ` + pendingThere + `
			OR (CASE WHEN ` + inside + ` THEN 1 = 0 ELSE ` + daysThere + ` END))`
	// The page's queries, each sorted and cut by the database, merged here. One, of every cluster (the
	// figures pending joined only to one with days outside the window: those of the others are in
	// their totals); or on SQLite, where a kind is read in every namespace, two: the clusters with all
	// their days in the window, whose figures are their totals, and the others, whose figures are looked
	// up in their days. In one query every cluster goes through the joins and the tests of which it is;
	// two scan the marks twice. Over a month of 10,000 clusters, all inside, two took 30.4 ms at p50
	// against 33.0, and 18.2 against 15.8 for three namespaces' 300 (the reports alternated, 60 each).
	// On PostgreSQL one: two took 12 to 13 ms against 7.3 ms for the three namespaces' page.
	type part struct {
		where, joins string
		figure       func(string) string
	}
	parts := []part{{where: clusters, joins: pendingJoin + ` ON pp.uid = ` + guard(`o.uid`), figure: either}}
	if !lookups {
		parts[0].joins += ` LEFT JOIN ` + last
	}
	everyNamespace := false
	for _, ns := range q.Scopes {
		everyNamespace = everyNamespace || ns == nil
	}
	if !s.postgres && everyNamespace {
		parts = []part{
			{where: inside + ` AND ` + near + ` AND ` + ow + ` AND (o.first_day <= o.last_day OR ` + held + ` > 0 OR ` + pendingThere + `)`,
				figure: totalled},
			{where: `NOT COALESCE(` + inside + `, false) AND ` + near + ` AND ` + ow + ` AND (` + held + ` > 0 OR ` + pendingThere + ` OR ` + daysThere + `)`,
				joins: pendingJoin + ` ON pp.uid = o.uid LEFT JOIN ` + lastOf(unguarded), figure: looked},
		}
	}
	// One query gives the page; two each give what may be on it (a page deep in the report reads that
	// many clusters of each), and the merge cuts it.
	limit := ""
	if p.Limit > 0 {
		limit = fmt.Sprintf(" LIMIT %d OFFSET %d", p.Limit, p.Offset)
		if len(parts) > 1 {
			limit = fmt.Sprintf(" LIMIT %d", p.Offset+p.Limit)
		}
	}
	type pageRow struct {
		k   usage.GroupKey
		f   usage.Figures
		key float64
	}
	// Merged in the databases' order: the figure, then the name byte by byte (COLLATE "C", or SQLite's).
	byLabel := func(a, b pageRow) int {
		return cmp.Or(strings.Compare(a.k.Namespace, b.k.Namespace), strings.Compare(a.k.Cluster, b.k.Cluster),
			strings.Compare(a.k.UID, b.k.UID))
	}
	compare := func(a, b pageRow) int {
		c := 0
		switch {
		case p.SortBy == "name":
			c = byLabel(a, b)
		case byKey:
			c = cmp.Compare(a.key, b.key)
		}
		if p.Desc {
			c = -c
		}
		return cmp.Or(c, byLabel(a, b))
	}
	var merged []pageRow
	for _, pt := range parts {
		// Every figure for a report of every cluster; for a page, only what it is sorted by (its
		// figures are its days', below).
		figure := func(c string) string {
			e := pt.figure(c)
			if t, ok := tailOf[c]; ok {
				e += " + " + t
			}
			return e
		}
		selected := []string{"o.uid, o.namespace, o.cluster, o.kind, o.name, o.creator"}
		if p.Limit == 0 {
			for _, c := range usage.Columns {
				selected = append(selected, figure(c))
			}
		}
		if byKey {
			terms := make([]string, len(key))
			for i, c := range key {
				terms[i] = "(" + figure(c) + ")"
			}
			selected = append(selected, strings.Join(terms, " + ")+" AS sort_key")
		}
		var rows []pageRow
		err := scanRows(ctx, tx, `SELECT `+strings.Join(selected, ", ")+` FROM usage_objects o`+pt.joins+`
			WHERE `+pt.where+` ORDER BY `+order+limit, args, func(r *sql.Rows) error {
			var row pageRow
			dest := []any{&row.k.UID, &row.k.Namespace, &row.k.Cluster, &row.k.Kind, &row.k.Name, &row.k.Creator}
			if p.Limit == 0 {
				dest = append(dest, cells(&row.f)...)
			}
			if byKey {
				dest = append(dest, floatCell{&row.key})
			}
			if err := r.Scan(dest...); err != nil {
				return err
			}
			rows = append(rows, row)
			return nil
		})
		if err != nil {
			return usage.Result{}, err
		}
		both := make([]pageRow, 0, len(merged)+len(rows))
		for len(merged) > 0 || len(rows) > 0 {
			if len(rows) == 0 || (len(merged) > 0 && compare(merged[0], rows[0]) <= 0) {
				both, merged = append(both, merged[0]), merged[1:]
			} else {
				both, rows = append(both, rows[0]), rows[1:]
			}
		}
		merged = both
	}
	if p.Limit > 0 && len(parts) > 1 {
		merged = merged[min(p.Offset, len(merged)):min(p.Offset+p.Limit, len(merged))]
	}
	keys := make([]usage.GroupKey, len(merged))
	for i, row := range merged {
		keys[i] = row.k
		g := groups.group(row.k)
		g.Objects = 1
		if p.Limit == 0 {
			g.Total = row.f
		}
	}
	// The count of all and the whole's tails, in one pass over the clusters, grouped by the last
	// credit of those holding (the writer credits all at once: a few groups), the others in one group
	// (NULL). Apart, the count and the tails took a pass each over 10,000 clusters. In the page's
	// query, a window over every row before the sort took 18 ms more on SQLite, 12 ms more on
	// PostgreSQL 15.
	err := scanRows(ctx, tx, `SELECT CASE WHEN `+tailing+` THEN o.since END, `+tailSums("o.")+`
		FROM usage_objects o WHERE `+clusters+` GROUP BY CASE WHEN `+tailing+` THEN o.since END`, args, func(r *sql.Rows) error {
		var since sql.NullInt64
		var t tail
		if err := r.Scan(append([]any{&since}, t.fields()...)...); err != nil {
			return err
		}
		res.Count += int(t.held)
		if since.Valid {
			t.credit(since.Int64, q.From, end, func(day int64, f usage.Figures) { addTo(res.Whole, day, f) })
		}
		return nil
	})
	if err != nil {
		return usage.Result{}, err
	}
	// The whole's days: the groups' days (or the kinds'), those pending, and the tails summed.
	if err := groupDays(ctx, tx, q, "", func(_ usage.GroupKey, day int64, f usage.Figures) { addTo(res.Whole, day, f) }); err != nil {
		return usage.Result{}, err
	}
	if p.Limit > 0 && len(keys) > 0 {
		// The clusters on the page, whole: their days, those pending and their tails.
		uids := make([]string, len(keys))
		byUID := make(map[string]usage.GroupKey, len(keys))
		for i, k := range keys {
			uids[i] = k.UID
			byUID[k.UID] = k
		}
		for part := range slices.Chunk(uids, 500) {
			in, args := inList(part, 3)
			for _, table := range []string{"usage_days", "usage_pending"} {
				err := addDays(ctx, tx, `SELECT uid, day, `+prefixed("")+` FROM `+table+` WHERE day >= $1 AND day < $2 AND uid IN (`+in+`)`,
					append([]any{from, to}, args...), false, usage.ByCluster, func(k usage.GroupKey, day int64, f usage.Figures) {
						addDay(groups.group(byUID[k.UID]), day, f)
					})
				if err != nil {
					return usage.Result{}, err
				}
			}
		}
		if err := tails(ctx, r, uids, false, groups.group, addDay); err != nil {
			return usage.Result{}, err
		}
	}
	res.Groups = make([]usage.Group, len(keys))
	for i, k := range keys {
		g := groups[k]
		g.Objects = 1 // a cluster, however its tail was counted
		res.Groups[i] = *g
	}
	return res, nil
}

// inList is a list of parameters for values, numbered from first, and the values.
func inList(values []string, first int) (string, []any) {
	in := make([]string, len(values))
	args := make([]any, len(values))
	for i, v := range values {
		in[i] = fmt.Sprintf("$%d", first+i)
		args[i] = v
	}
	return strings.Join(in, ", "), args
}

// scanRows runs query and hands each row to scan.
func scanRows(ctx context.Context, tx *sql.Tx, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// addTo adds f to days' day.
func addTo(days map[int64]*usage.Figures, day int64, f usage.Figures) {
	if days[day] == nil {
		days[day] = &usage.Figures{}
	}
	days[day].Add(f)
}

// addDays runs query (of a grouping's column, or of a cluster's, then the day and the figures) and adds
// each row's figures to its group's day.
func addDays(ctx context.Context, tx *sql.Tx, query string, args []any, byCluster bool, groupBy string,
	add func(usage.GroupKey, int64, usage.Figures)) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var f usage.Figures
		var day int64
		var k usage.GroupKey
		if byCluster {
			err = rows.Scan(append([]any{&k.UID, &k.Namespace, &k.Cluster, &k.Kind, &k.Name, &k.Creator, &day}, cells(&f)...)...)
		} else {
			var v string
			err = rows.Scan(append([]any{&v, &day}, cells(&f)...)...)
			setGroup(&k, groupBy, v)
		}
		if err != nil {
			return err
		}
		add(k, day, f)
	}
	return rows.Err()
}

// cells are f's fields as destinations of a row's columns that take their values as the drivers give
// them (float64 or int64), where database/sql converts a value to a *float64 by reflection: a page's
// 600 days of thirteen figures took 0.45 ms less to read on SQLite.
func cells(f *usage.Figures) []any {
	fields := f.Fields()
	out := make([]any, len(fields))
	for i, p := range fields {
		switch p := p.(type) {
		case *float64:
			out[i] = floatCell{p}
		case *int64:
			out[i] = intCell{p}
		}
	}
	return out
}

// floatCell scans a number into a float64.
type floatCell struct{ p *float64 }

// Scan implements sql.Scanner.
func (c floatCell) Scan(v any) error {
	switch v := v.(type) {
	case float64:
		*c.p = v
	case int64:
		*c.p = float64(v)
	default:
		f, err := strconv.ParseFloat(cellText(v), 64)
		if err != nil {
			return fmt.Errorf("a figure: %w", err)
		}
		*c.p = f
	}
	return nil
}

// intCell scans a count into an int64.
type intCell struct{ p *int64 }

// Scan implements sql.Scanner.
func (c intCell) Scan(v any) error {
	switch v := v.(type) {
	case int64:
		*c.p = v
	case float64:
		if v != math.Trunc(v) {
			return fmt.Errorf("a count of %v", v)
		}
		*c.p = int64(v)
	default:
		n, err := strconv.ParseInt(cellText(v), 10, 64)
		if err != nil {
			return fmt.Errorf("a count: %w", err)
		}
		*c.p = n
	}
	return nil
}

// cellText is a value given as text (a NUMERIC, say), or its type.
func cellText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprintf("%T", v)
}

// holdingBefore is the condition of a mark holding since before end (a parameter: the window's end, or
// now), its columns prefixed by p: what a tail is credited to.
func holdingBefore(p, end string) string {
	return `(` + p + `gone = 0 AND ` + p + `holding = 1 AND ` + p + `since < ` + end + `)`
}

// nearWindow is the condition of a mark with days in the window ($1 to $2) or tailing (holdingBefore),
// its columns prefixed by p: what a report may count.
func nearWindow(p, tailing string) string {
	return `((` + p + `last_day >= $1 AND ` + p + `first_day < $2) OR ` + tailing + `)`
}

// tails credits the objects holding now from their last credit (or q.From) up to q.Now (or q.To), split
// at UTC midnights: summed by the database, by group and since (the writer credits all at once, so a
// group is a few rows), and each sum credited here. Only those of only where it is set. Where counted
// is set, the same pass counts each group's objects of the window: those with days in it, and those
// holding with none there (counted by their tail alone, once).
func tails(ctx context.Context, r report, only []string, counted bool, group func(usage.GroupKey) *usage.Group,
	addDay func(*usage.Group, int64, usage.Figures)) error {
	q := r.q
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	byCluster := q.GroupBy == usage.ByCluster
	cols := groupColumn(q.GroupBy)
	if byCluster {
		cols = "uid, namespace, cluster, kind, name, creator"
	}
	// Each cluster's tail is its requests times the time since its last credit: the database sums the
	// requests of those credited at the same moment (by cluster, a group is one), and each sum is
	// multiplied here. (Multiplying in the database instead, with no sort, was tried for a report's
	// whole: its tails took 10 ms against 11 on SQLite.) One pass over the marks: those credited before
	// the day that ends there (no writer for a while) are in the same rows, and split at midnights
	// here; a pass of their own cost a scan of every mark (3 ms on PostgreSQL).
	args := []any{end.UnixNano()}
	tailing := holdingBefore("", "$1")
	key, objects, marks := `since`, `0`, tailing
	switch {
	case counted:
		// The marks with days in the window, or holding: those not holding come in one group of their
		// own (its since NULL, its sums not credited). An object with days after the window alone is
		// not counted. A pass of their own scanned every mark again: over 10,000 by namespace, the two
		// passes took 18.4 ms against 15.2 on SQLite, 12.2 against 7.3 on PostgreSQL 15.
		args = []any{q.From.Unix(), q.To.Unix()}
		tailing = `1 = 0` // no tail, the count alone
		if end.After(q.From) {
			args = append(args, end.UnixNano())
			tailing = holdingBefore("", "$3")
		}
		key = `CASE WHEN ` + tailing + ` THEN since END`
		objects = `SUM(CASE WHEN first_day >= $2 AND last_day >= $1 THEN 0 ELSE 1 END)`
		marks = nearWindow("", tailing)
	case !end.After(q.From):
		return nil
	}
	where, a := r.marks("", len(args))
	args = append(args, a...)
	if only != nil {
		in, a := inList(only, len(args)+1)
		where += " AND uid IN (" + in + ")"
		args = append(args, a...)
	}
	return scanRows(ctx, r.tx, `SELECT `+cols+`, `+key+`, `+objects+`, `+tailSums("")+`
		FROM usage_objects WHERE `+marks+` AND `+where+` GROUP BY `+cols+`, `+key, args, func(r *sql.Rows) error {
		var since sql.NullInt64
		var objects int64
		var t tail
		var k usage.GroupKey
		dest := append([]any{&since, &objects}, t.fields()...)
		var err error
		if byCluster {
			err = r.Scan(append([]any{&k.UID, &k.Namespace, &k.Cluster, &k.Kind, &k.Name, &k.Creator}, dest...)...)
		} else {
			var v string
			err = r.Scan(append([]any{&v}, dest...)...)
			setGroup(&k, q.GroupBy, v)
		}
		if err != nil {
			return err
		}
		g := group(k)
		g.Objects += objects
		if since.Valid {
			t.credit(since.Int64, q.From, end, func(day int64, f usage.Figures) { addDay(g, day, f) })
		}
		return nil
	})
}

// tail is the requests of objects holding since the same moment, summed: the objects (held), their
// cores, bytes of memory, GPUs and NPUs, and the idle ones among them holding accelerators, with these.
type tail struct {
	held, cpu, memory, gpu, npu, idle, idleGPU, idleNPU float64
}

// idleAccelerators is 1 for a mark idle while it holds accelerators, else 0 (as usage.Ledger.Credit
// counts the idle figures), its columns prefixed by p.
func idleAccelerators(p string) string {
	return `(CASE WHEN ` + p + `idle = 1 AND (` + p + `gpu > 0 OR ` + p + `npu > 0) THEN 1 ELSE 0 END)`
}

// tailSums are the sums of the marks' requests their tails are credited from, in the order of
// tail.fields, the marks' columns prefixed by p. The idle accelerators are sums of their own, not a
// key of the groups: sorting the rows by one key fewer took 2 ms less over 10,000 marks on SQLite.
// Their sums are filtered, not of a condition times a request: an idle mark's GPUs or NPUs are none
// but where it holds accelerators. Over 10,000 marks, the count's pass took 5.8 ms against 6.8 ms
// (SQLite 3.40), the condition having been evaluated three times a mark.
func tailSums(p string) string {
	idle := p + `idle = 1`
	return `COUNT(*), CAST(SUM(` + p + `cpu) AS DOUBLE PRECISION), CAST(SUM(` + p + `memory_bytes) AS DOUBLE PRECISION),
		CAST(SUM(` + p + `gpu) AS DOUBLE PRECISION), CAST(SUM(` + p + `npu) AS DOUBLE PRECISION),
		CAST(COUNT(*) FILTER (WHERE ` + idle + ` AND (` + p + `gpu > 0 OR ` + p + `npu > 0)) AS DOUBLE PRECISION),
		CAST(COALESCE(SUM(` + p + `gpu) FILTER (WHERE ` + idle + `), 0) AS DOUBLE PRECISION),
		CAST(COALESCE(SUM(` + p + `npu) FILTER (WHERE ` + idle + `), 0) AS DOUBLE PRECISION)`
}

// fields are t's fields in the order of tailSums.
func (t *tail) fields() []any {
	return []any{&t.held, &t.cpu, &t.memory, &t.gpu, &t.npu, &t.idle, &t.idleGPU, &t.idleNPU}
}

// credit adds to each day the tail's figures from since (or from) up to end, split at UTC midnights as
// usage.Ledger.Credit does.
func (t tail) credit(since int64, from, end time.Time, add func(int64, usage.Figures)) {
	for at := time.Unix(0, max(since, from.UnixNano())).UTC(); at.Before(end); {
		day := usage.DayOf(at)
		to := time.Unix(day+86400, 0)
		if to.After(end) {
			to = end
		}
		s := to.Sub(at).Seconds()
		add(day, usage.Figures{HeldSeconds: t.held * s, CPUSeconds: t.cpu * s, MemoryByteSeconds: t.memory * s,
			GPUSeconds: t.gpu * s, NPUSeconds: t.npu * s, IdleSeconds: t.idle * s, IdleGPUSeconds: t.idleGPU * s,
			IdleNPUSeconds: t.idleNPU * s})
		at = to
	}
}

// prefixed is the figures' columns, each prefixed.
func prefixed(p string) string {
	cols := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		cols[i] = p + c
	}
	return strings.Join(cols, ", ")
}

// UsagePruned is what a PruneUsage did.
type UsagePruned struct {
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
func (s *Store) PruneUsage(ctx context.Context, before time.Time, resum bool) (UsagePruned, error) {
	var out UsagePruned
	day := usage.DayOf(before)
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
		subtract := make([]string, len(usage.Columns))
		for i, c := range usage.Columns {
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
		`DELETE FROM usage_objects WHERE gone = 1 AND (last_day IS NULL OR last_day < $1)`} {
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
	differ := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		differ[i] = "d." + runColumns[i] + " <> d." + c
	}
	return `INSERT INTO usage_state (name, value) SELECT '` + prunedBeforeKey + `', MAX(o.first_day) FROM usage_objects o
		JOIN usage_days d ON d.uid = o.uid AND d.day = o.first_day WHERE ` + strings.Join(differ, " OR ") + `
		HAVING MAX(o.first_day) IS NOT NULL` + laterPruned
}()

// resumTotals sets each object's totals to the sums of its days and figures pending, where they differ
// by more than the rounding of sums added in another order.
var resumTotals = func() string {
	sets, differ := make([]string, len(usage.Columns)), make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		t := "usage_objects." + totalColumns[i]
		sets[i] = totalColumns[i] + " = f." + c
		differ[i] = "ABS(" + t + " - f." + c + ") > 1e-9 * ABS(f." + c + ") + 1e-6"
	}
	sums := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		sums[i] = castFigure(c, "COALESCE(s."+c+", 0)") + " AS " + c
	}
	return `UPDATE usage_objects SET ` + strings.Join(sets, ", ") + ` FROM (SELECT o.uid, ` + strings.Join(sums, ", ") + `
		FROM usage_objects o LEFT JOIN ` + objectSums("true") + ` s ON s.uid = o.uid) f
		WHERE usage_objects.uid = f.uid AND (` + strings.Join(differ, " OR ") + `)`
}()

package usage

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"ray-service/internal/accel"
)

// PutUsage writes the minute's credit: the ledger's figures and those pending (PutPending) are added to
// the objects' days, with their running sums, and to their groups' days, with the marks the ledger moved
// and the seconds measured; written whole or not at all. An empty ledger only moves what is pending.
func (s *Store) PutUsage(ctx context.Context, l *Ledger) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.credit(ctx, tx, l); err != nil {
		return err
	}
	if err := putHeld(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit()
}

// putHeld adds the ledger's accelerator-seconds to the objects' days, and writes the accelerators of the
// marks whose changed (after the marks: a new mark's row is there). In the order of the keys, as the
// figures (two writers lock in the same order).
func putHeld(ctx context.Context, tx execer, l *Ledger) error {
	if len(l.Held) > 0 {
		keys := slices.SortedFunc(maps.Keys(l.Held), func(a, b HeldKey) int {
			return cmp.Or(cmp.Compare(a.UID, b.UID), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Kind, b.Kind),
				cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Model, b.Model))
		})
		for _, k := range keys {
			h := l.Held[k]
			if _, err := tx.ExecContext(ctx, putHeldRow, k.UID, k.Day, string(k.Kind), k.Resource, k.Model, h.CountSeconds,
				h.DeviceSeconds, accel.MaxHeld, accel.OtherResource); err != nil {
				return err
			}
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(l.HeldMarks)) {
		text := ""
		if held := l.HeldMarks[uid]; len(held) > 0 {
			b, err := json.Marshal(held)
			if err != nil {
				return err
			}
			text = string(b)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE usage_objects SET accelerators = $2 WHERE uid = $1`, uid, text); err != nil {
			return err
		}
	}
	return nil
}

// putHeldRow adds an object's accelerator-seconds of one day, resource and model to its row; where the
// object's day has accel.MaxHeld rows already and none of them, to the row of its kind named
// accel.OtherResource: a summary bounds the names held at once, not those a cluster edited again and
// again names over a day, each of which would be a row. (The SELECT's WHERE tells SQLite's parser
// that ON CONFLICT is the upsert's.)
const putHeldRow = `INSERT INTO usage_accelerators (uid, day, kind, resource, model, count_seconds, device_seconds)
	SELECT $1, $2, $3, CASE WHEN k.kept THEN $4 ELSE $9 END, CASE WHEN k.kept THEN $5 ELSE '' END, $6, $7
	FROM (SELECT EXISTS (SELECT 1 FROM usage_accelerators WHERE uid = $1 AND day = $2 AND kind = $3 AND resource = $4 AND model = $5)
		OR (SELECT COUNT(*) FROM usage_accelerators WHERE uid = $1 AND day = $2) < $8 AS kept) k WHERE true
	ON CONFLICT (uid, day, kind, resource, model) DO UPDATE SET
	count_seconds = usage_accelerators.count_seconds + excluded.count_seconds,
	device_seconds = usage_accelerators.device_seconds + excluded.device_seconds`

// writeUnsynced runs write in a transaction on SQLite whose commit does not wait for the disk
// (synchronous NORMAL, for that commit alone): the credit of changes between the minute's credits
// (PutPending). The next commit in the database that waits (a history's record, the minute's credit)
// takes its part of the log to the disk with its own. Only a power loss or a crash of the system before then loses it, and
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
func (s *Store) credit(ctx context.Context, tx *sql.Tx, l *Ledger) error {
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
	sets := make([]string, len(Columns))
	for i, c := range Columns {
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
	sums, cols, runs, sets, adds := make([]string, len(Columns)), make([]string, len(Columns)),
		make([]string, len(Columns)), make([]string, len(Columns)), make([]string, len(Columns))
	for i, c := range Columns {
		r := runColumns[i]
		sums[i] = "SUM(" + c + ") AS " + c
		cols[i] = "c." + c
		runs[i] = "COALESCE(p." + r + ", 0) + c." + c
		sets[i] = c + " = usage_days." + c + " + excluded." + c + ", " + r + " = excluded." + r
		adds[i] = r + " = usage_days." + r + " + c." + c
	}
	moved := `(SELECT uid, day, ` + strings.Join(sums, ", ") + ` FROM usage_pending WHERE ` + where + ` GROUP BY uid) c`
	return []string{
		`INSERT INTO usage_days (uid, day, ` + strings.Join(Columns, ", ") + `, ` + strings.Join(runColumns, ", ") + `)
			SELECT c.uid, c.day, ` + strings.Join(cols, ", ") + `, ` + strings.Join(runs, ", ") + ` FROM ` + moved + `
			LEFT JOIN usage_days p ON p.rowid = (SELECT x.rowid FROM usage_days x WHERE x.uid = c.uid AND x.day <= c.day
				ORDER BY x.day DESC LIMIT 1)
			WHERE true ON CONFLICT (uid, day) DO UPDATE SET ` + strings.Join(sets, ", "),
		`UPDATE usage_days SET ` + strings.Join(adds, ", ") + ` FROM ` + moved + `
			WHERE usage_days.uid = c.uid AND usage_days.day > c.day`,
		foldTotals("usage_pending", where),
	}
}()

// PutPending writes the credit of changes between the minute's credits: the marks the ledger moved, and
// its figures as rows pending, which the reports add and the next PutUsage moves into the days and
// groups. Written whole or not at all. It upserts the marks and appends rows to a table without an
// index, where PutUsage upserts each object's day and each group's too: on PostgreSQL a batch of 50
// changes took about half the time, and the days and groups are written once a minute.
func (s *Store) PutPending(ctx context.Context, l *Ledger) error {
	if l.Empty() {
		return nil
	}
	rows, err := usageRowsOf(l)
	if err != nil {
		return err
	}
	if s.postgres {
		if len(l.Held) == 0 && len(l.HeldMarks) == 0 {
			return pendingArrays.exec(ctx, s.db, rows.marks, rows.spans, rows.pending, rows.measured)
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if err := pendingArrays.exec(ctx, tx, rows.marks, rows.spans, rows.pending, rows.measured); err != nil {
			return err
		}
		if err := putHeld(ctx, tx, l); err != nil {
			return err
		}
		return tx.Commit()
	}
	return s.writeUnsynced(ctx, func(tx *sql.Tx) error {
		if err := s.writeUsageRows(ctx, tx, rows); err != nil {
			return err
		}
		return putHeld(ctx, tx, l)
	})
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
	cols, cums, runs, sets, adds, lateSums := make([]string, len(Columns)), make([]string, len(Columns)),
		make([]string, len(Columns)), make([]string, len(Columns)), make([]string, len(Columns)),
		make([]string, len(Columns))
	for i, c := range Columns {
		r := runColumns[i]
		cols[i] = "c." + c
		cums[i] = castFigure(c, "SUM("+c+") OVER w") + " AS cum_" + c
		runs[i] = "COALESCE(p." + r + ", 0) + c.cum_" + c
		sets[i] = c + " = usage_days." + c + " + excluded." + c + ", " + r + " = excluded." + r
		adds[i] = r + " = usage_days." + r + " + l." + c
		lateSums[i] = castFigure(c, "SUM(d."+c+")") + " AS " + c
	}
	return `d AS (SELECT uid, day, ` + summedAs(Columns) + ` FROM ` + source + ` GROUP BY uid, day),
		c AS (SELECT uid, day, ` + prefixed("") + `, ` + strings.Join(cums, ", ") + ` FROM d
			WINDOW w AS (PARTITION BY uid ORDER BY day)),
		days AS (INSERT INTO usage_days (uid, day, ` + strings.Join(Columns, ", ") + `, ` + strings.Join(runColumns, ", ") + `, totalled)
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
func usageRowsOf(l *Ledger) (usageRows, error) {
	// The days each object has figures of, for its first and last day.
	type span struct {
		first, last int64
		total       Figures
		owner       State
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
		var total Figures
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
		"double precision", "double precision", "bigint", "integer", "bigint", "bigint"}, totalTypes...)}

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
	out := make([]string, len(Columns))
	for i, c := range Columns {
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
		panic(fmt.Sprintf("utilization: an upsert of %d columns names %d types", u.columns, len(u.types)))
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
func (s *Store) UsageMarks(ctx context.Context) (map[string]*Mark, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT uid, kind, namespace, name, cluster, creator, holding, idle, cpu, memory_bytes,
		gpu, npu, since, accelerators FROM usage_objects WHERE gone = 0`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]*Mark{}
	for rows.Next() {
		m := &Mark{}
		var holding, idle int
		var since int64
		var held string
		r := &m.Requests
		if err := rows.Scan(&m.UID, &m.Kind, &m.Namespace, &m.Name, &m.Cluster, &m.Creator, &holding, &idle, &r.CPU,
			&r.MemoryBytes, &r.GPU, &r.NPU, &since, &held); err != nil {
			return nil, err
		}
		if held != "" {
			if err := json.Unmarshal([]byte(held), &r.Accelerators); err != nil {
				return nil, fmt.Errorf("the accelerators of mark %s: %w", m.UID, err)
			}
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
func (s *Store) PutMeasured(ctx context.Context, l *Ledger, to time.Time) error {
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
	if err := putHeld(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit()
}

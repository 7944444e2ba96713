package usage

import (
	"context"
	"database/sql"
	"fmt"
	"ray-service/internal/sqldb"
	"slices"
	"strings"
)

// Store is the utilization's figures, in the service's database beside the other stored features'
// tables (sqldb.Schema): each Ray cluster's mark, its days and their running sums, the groups' days and
// what was measured. What writes them is store.go's, what reads them for reports report.go's, what
// removes them past their retention prune.go's.
type Store struct {
	db       *sql.DB
	postgres bool
	// prepared are the upserts' statements on SQLite (see prepareUpserts).
	prepared map[upsertKey]*sql.Stmt
	// folds are the statements of a chunk of the fold of pending figures on SQLite (foldSQLite).
	folds []*sql.Stmt
	// synchronous is SQLite's safety level as the connection opens (PRAGMA synchronous): what
	// writeUnsynced sets back.
	synchronous string
	// owned is the database Open opened, which Close closes.
	owned *sqldb.DB
}

// Open opens the utilization's figures alone at dsn ("sqlite:<file>" or a PostgreSQL URL) and brings
// their tables to the current version; closing the store closes the database. The service opens one
// database for every stored feature and hands it to NewStore.
func Open(ctx context.Context, dsn string) (*Store, error) {
	d, err := sqldb.Open(ctx, dsn, Migrations())
	if err != nil {
		return nil, err
	}
	s, err := NewStore(ctx, d)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	s.owned = d
	return s, nil
}

// NewStore is the utilization's figures in d, whose schema has the utilization's migrations.
func NewStore(ctx context.Context, d *sqldb.DB) (*Store, error) {
	s := &Store{db: d.DB, postgres: d.Postgres}
	if err := s.prepareUpserts(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if !s.postgres {
		if err := d.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&s.synchronous); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes the store's statements, and the database where Open opened it (NewStore's is its
// opener's to close).
func (s *Store) Close() error {
	for _, st := range s.prepared {
		_ = st.Close()
	}
	for _, st := range s.folds {
		_ = st.Close()
	}
	if s.owned != nil {
		return s.owned.Close()
	}
	return nil
}

// migrations are the utilization's versions of the service's schema, by number: the numbers are shared
// with the other stored features' (sqldb.Schema), and kept as they were when the history held these
// tables, so that every database opens unchanged.
var migrations = map[int]string{
	// 5: the utilization accounting.
	5: usageMigration,
	// 6: half of each page of the marks left free on PostgreSQL. The writer rewrites each holding
	// cluster's mark every minute without changing an indexed column: with room in its page, the new
	// version goes there and the old ones are pruned as the page is read (heap-only tuples), so the
	// table that reports scan stays near its live size between autovacuum's passes.
	6: postgresOnly + `ALTER TABLE usage_objects SET (fillfactor = 50)`,
	// 7: the secondary indexes dropped. Every credit wrote them (a mark's five-column index of days,
	// kind, namespace and creator; a day's figures by day), and the reports read as fast without them:
	// a month's objects are counted in one pass over the marks, and a cluster's days are found by their
	// key (uid, day).
	7: `DROP INDEX usage_objects_by_days;
	DROP INDEX usage_days_by_day`,
	// 8: the figures of the changes between the minute's credits, pending.
	8: pendingMigration,
	// 9: each object's days with the running sums of its figures.
	9: runsMigration,
	// 10: the running sums required on PostgreSQL.
	10: runsRequired,
	// 11: each day and row pending says its object's totals count it.
	11: totalledMigration,
	// 12: on PostgreSQL, what writes them must say so.
	12: totalsGuarded,
	// 13: each object's figures summed over its days and those pending.
	13: totalsMigration,
	// 14: the first days that prunes left, found in the days.
	14: prunedFound,
	// 15: the marks' kinds, read a seek each (everyKind). Partial, on a condition every mark meets that
	// only those seeks state: SQLite does not take it for a report's condition on the kinds (a third of
	// the marks each, most often), whatever its statistics. Whole, it took it for a database migrated
	// and not yet analyzed, and a page by cluster scoped to two kinds took 58 ms against 32. PostgreSQL,
	// whose statistics are kept, may take it where a report asks for gone = 0 too (the tails).
	15: `CREATE INDEX usage_objects_kind ON usage_objects (kind) WHERE gone >= 0`,
	// 16: each group's day says its kind's day counts it.
	16: kindSummedMigration,
	// 17: on PostgreSQL, what writes them must say so.
	17: kindsGuarded,
	// 18: the groups' days summed per kind.
	18: kindDaysMigration,
	// 20: GPUs and NPUs held in device equivalents (a vNPU, a MIG instance, a shared GPU's replica count
	// as their share of a device). SQLite keeps a fraction in the INTEGER column as it is (its type
	// affinity stores a REAL that is not a whole number as REAL).
	20: postgresOnly + `ALTER TABLE usage_objects ALTER COLUMN gpu TYPE DOUBLE PRECISION, ALTER COLUMN npu TYPE DOUBLE PRECISION`,
	// 21: the raw counts beside the device equivalents: each object's accelerator-seconds per day,
	// resource and model, and what its mark holds of each.
	21: heldMigration,
}

// heldMigration keeps the accelerators each object held, per UTC day, resource (nvidia.com/mig-3g.40gb,
// huawei.com/Ascend910-4c, dra:gpu.nvidia.com) and model: the units held times the seconds, and their
// device equivalents times the seconds (what gpu_seconds and npu_seconds sum); and on each mark, as JSON,
// the accelerators it holds since its last credit (a report credits the rest up to now, and a new writer
// takes them up). A row is an object's day of one resource and model; the reports read them by day
// range and join the marks for the groups.
const heldMigration = `CREATE TABLE usage_accelerators (
		uid TEXT NOT NULL,
		day BIGINT NOT NULL,
		kind TEXT NOT NULL,
		resource TEXT NOT NULL,
		model TEXT NOT NULL,
		count_seconds DOUBLE PRECISION NOT NULL,
		device_seconds DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (uid, day, kind, resource, model)
	);
	CREATE INDEX usage_accelerators_by_day ON usage_accelerators (day);
	ALTER TABLE usage_objects ADD COLUMN accelerators TEXT NOT NULL DEFAULT ''`

// Migrations are the utilization's schema migrations, numbered.
func Migrations() []sqldb.Migration {
	out := make([]sqldb.Migration, 0, len(migrations))
	for v, m := range migrations {
		out = append(out, sqldb.Migration{Version: v, Feature: "utilization", SQL: m})
	}
	slices.SortFunc(out, func(a, b sqldb.Migration) int { return a.Version - b.Version })
	return out
}

// postgresOnly begins a migration that has nothing to do on SQLite (which rewrites a row in place).
const postgresOnly = sqldb.PostgresOnly

// foldLock is the PostgreSQL advisory lock the fold of pending figures holds, beside the migrations'.
const foldLock = sqldb.MigrationLock + 1

// Optimize refreshes the statistics PostgreSQL's planner chooses the reports' plans by: the tables grow
// by a day's rows at midnight, faster than autovacuum's thresholds notice. (SQLite's are refreshed for
// the whole database by the history's pass.)
func (s *Store) Optimize(ctx context.Context) error {
	if !s.postgres {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `ANALYZE usage_objects, usage_days, usage_totals`)
	return err
}

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

// usageColumnsDDL declares the figures (Columns).
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
		fmt.Fprintf(&b, "ALTER TABLE usage_days ADD COLUMN %s %s NOT NULL DEFAULT 0;\n", c, columnType(Columns[i]))
	}
	sets, sums := make([]string, len(runColumns)), make([]string, len(runColumns))
	for i, c := range runColumns {
		sets[i] = c + " = w." + c
		sums[i] = castFigure(Columns[i], "SUM("+Columns[i]+") OVER (PARTITION BY uid ORDER BY day)") + " AS " + c
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
		fmt.Fprintf(&b, "ALTER TABLE usage_objects ADD COLUMN %s %s NOT NULL DEFAULT 0;\n", c, columnType(Columns[i]))
		sets[i] = c + " = s." + Columns[i]
	}
	b.WriteString("UPDATE usage_objects SET " + strings.Join(sets, ", ") + " FROM " + objectSums("true") + " s WHERE usage_objects.uid = s.uid")
	return b.String()
}()

// objectSums sums each object's figures of its days and those pending where where holds (of their day):
// a table of uid and Columns.
func objectSums(where string) string {
	return "(SELECT uid, " + summedAs(Columns) + " FROM (SELECT uid, " + prefixed("") + " FROM usage_days WHERE " + where +
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

// totalColumns are the objects' totals' columns in usage_objects, in the order of Columns.
var totalColumns = func() []string {
	out := make([]string, len(Columns))
	for i, c := range Columns {
		out[i] = "total_" + c
	}
	return out
}()

// runColumns are the running sums' columns in usage_days, in the order of Columns.
var runColumns = func() []string {
	out := make([]string, len(Columns))
	for i, c := range Columns {
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

// The statements that add a ledger's figures, built once from Columns.
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
	sumFigures = summedAs(Columns)
)

// addFigures inserts rows of table keyed by key (of keyTypes), or adds their figures to the rows there.
func addFigures(table string, key, keyTypes []string) upsert {
	cols := append(slices.Clone(key), Columns...)
	types := slices.Clone(keyTypes)
	sets := make([]string, len(Columns))
	for i, c := range Columns {
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

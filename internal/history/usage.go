package history

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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

// The statements that add a ledger's figures, built once from usage.Columns.
var (
	addUsageDay   = addFigures("usage_days", []string{"uid", "day"})
	addUsageTotal = addFigures("usage_totals", []string{"day", "namespace", "kind", "creator"})
	sumFigures    = func() string {
		sums := make([]string, len(usage.Columns))
		for i, c := range usage.Columns {
			sums[i] = "SUM(" + c + ")"
			if c == "starts" {
				sums[i] = "CAST(SUM(starts) AS BIGINT)"
			}
		}
		return strings.Join(sums, ", ")
	}()
)

// addFigures is the statement that inserts a row of table keyed by key, or adds its figures to the row
// there.
func addFigures(table string, key []string) string {
	cols := append(slices.Clone(key), usage.Columns...)
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	sets := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		sets[i] = c + " = " + table + "." + c + " + excluded." + c
	}
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(params, ", ") +
		") ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(sets, ", ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PutUsage writes a ledger in one transaction: the marks it moved, the figures it adds to each object's
// day and to its group's, and the seconds measured. Either all of it is written or none.
func (s *Store) PutUsage(ctx context.Context, l *usage.Ledger) error {
	if l.Empty() {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := putUsage(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit()
}

func putUsage(ctx context.Context, tx *sql.Tx, l *usage.Ledger) error {
	for _, m := range l.Marks {
		r := m.Requests
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_objects (uid, kind, namespace, name, cluster, creator, holding, idle,
				cpu, memory_bytes, gpu, npu, since, gone) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (uid) DO UPDATE SET kind = excluded.kind, namespace = excluded.namespace, name = excluded.name,
				cluster = excluded.cluster, creator = excluded.creator, holding = excluded.holding, idle = excluded.idle,
				cpu = excluded.cpu, memory_bytes = excluded.memory_bytes, gpu = excluded.gpu, npu = excluded.npu,
				since = excluded.since, gone = excluded.gone`,
			m.UID, m.Kind, m.Namespace, m.Name, m.Cluster, m.Creator, boolInt(m.Holding), boolInt(m.Idle),
			r.CPU, r.MemoryBytes, r.GPU, r.NPU, m.Since.UnixNano(), boolInt(m.Gone)); err != nil {
			return err
		}
	}
	// The groups' figures are summed first: a statement per group and day, not per object.
	type totalKey struct {
		day                     int64
		namespace, kind, author string
	}
	totals := map[totalKey]*usage.Figures{}
	for k, f := range l.Deltas {
		m, ok := l.Owner(k.UID)
		if !ok {
			return fmt.Errorf("usage of %s credited without its mark", k.UID)
		}
		if _, err := tx.ExecContext(ctx, addUsageDay, append([]any{k.UID, k.Day}, f.Values()...)...); err != nil {
			return err
		}
		tk := totalKey{k.Day, m.Namespace, m.Kind, m.Creator}
		if totals[tk] == nil {
			totals[tk] = &usage.Figures{}
		}
		totals[tk].Add(*f)
		if _, err := tx.ExecContext(ctx, `UPDATE usage_objects SET
				first_day = CASE WHEN first_day IS NULL OR first_day > $2 THEN $2 ELSE first_day END,
				last_day = CASE WHEN last_day IS NULL OR last_day < $2 THEN $2 ELSE last_day END
			WHERE uid = $1`, k.UID, k.Day); err != nil {
			return err
		}
	}
	for k, f := range totals {
		if _, err := tx.ExecContext(ctx, addUsageTotal, append([]any{k.day, k.namespace, k.kind, k.author}, f.Values()...)...); err != nil {
			return err
		}
	}
	for day, sec := range l.Measured {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_measured (day, seconds) VALUES ($1, $2)
			ON CONFLICT (day) DO UPDATE SET seconds = usage_measured.seconds + excluded.seconds`, day, sec); err != nil {
			return err
		}
	}
	return nil
}

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
	if err := putUsage(ctx, tx, l); err != nil {
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
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", n+len(args))
	}
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
	clause := "(" + strings.Join(ors, " OR ") + ")"
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
	default:
		k.Namespace = v
	}
}

// Utilization sums the figures of q's window by q's grouping, per group and day, with the objects of
// each group; an object holding now is credited from its last credit up to q.Now. It returns the
// seconds measured per day too.
func (s *Store) Utilization(ctx context.Context, q usage.Query) ([]usage.Group, map[int64]float64, error) {
	from, to := q.From.Unix(), q.To.Unix()
	groups := map[usage.GroupKey]*usage.Group{}
	group := func(k usage.GroupKey) *usage.Group {
		g := groups[k]
		if g == nil {
			g = &usage.Group{Key: k, Days: map[int64]*usage.Figures{}}
			groups[k] = g
		}
		return g
	}
	addDay := func(g *usage.Group, day int64, f usage.Figures) {
		if g.Days[day] == nil {
			g.Days[day] = &usage.Figures{}
		}
		g.Days[day].Add(f)
		g.Total.Add(f)
	}
	byCluster := q.GroupBy == usage.ByCluster
	col := groupColumn(q.GroupBy)
	keyOf := func(uid, ns, cluster, kind, name, creator string) usage.GroupKey {
		var k usage.GroupKey
		if byCluster {
			return usage.GroupKey{Namespace: ns, Cluster: cluster, Kind: kind, Name: name, Creator: creator, UID: uid}
		}
		v := map[string]string{"namespace": ns, "creator": creator, "kind": kind}[col]
		setGroup(&k, q.GroupBy, v)
		return k
	}
	// The figures of the days.
	var rows *sql.Rows
	var err error
	if byCluster {
		where, args := scopeClause(q, "o.", 2)
		rows, err = s.db.QueryContext(ctx, `SELECT o.uid, o.namespace, o.cluster, o.kind, o.name, o.creator, d.day, `+
			prefixed("d.")+` FROM usage_days d JOIN usage_objects o ON o.uid = d.uid WHERE d.day >= $1 AND d.day < $2 AND `+where,
			append([]any{from, to}, args...)...)
	} else {
		where, args := scopeClause(q, "", 2)
		rows, err = s.db.QueryContext(ctx, `SELECT `+col+`, day, `+sumFigures+` FROM usage_totals WHERE day >= $1 AND day < $2 AND `+
			where+` GROUP BY `+col+`, day`, append([]any{from, to}, args...)...)
	}
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var f usage.Figures
		var day int64
		var k usage.GroupKey
		if byCluster {
			err = rows.Scan(append([]any{&k.UID, &k.Namespace, &k.Cluster, &k.Kind, &k.Name, &k.Creator, &day}, f.Fields()...)...)
		} else {
			var v string
			err = rows.Scan(append([]any{&v, &day}, f.Fields()...)...)
			setGroup(&k, q.GroupBy, v)
		}
		if err != nil {
			_ = rows.Close()
			return nil, nil, err
		}
		addDay(group(k), day, f)
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	// The objects that held anything in the window.
	counted := map[string]bool{}
	where, args := scopeClause(q, "", 2)
	rows, err = s.db.QueryContext(ctx, `SELECT uid, namespace, cluster, kind, name, creator FROM usage_objects
		WHERE last_day >= $1 AND first_day < $2 AND `+where, append([]any{from, to}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var uid, ns, cluster, kind, name, creator string
		if err := rows.Scan(&uid, &ns, &cluster, &kind, &name, &creator); err != nil {
			_ = rows.Close()
			return nil, nil, err
		}
		counted[uid] = true
		group(keyOf(uid, ns, cluster, kind, name, creator)).Objects++
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	// What the objects holding now hold since their last credit.
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	where, args = scopeClause(q, "", 1)
	rows, err = s.db.QueryContext(ctx, `SELECT uid, kind, namespace, name, cluster, creator, idle, cpu, memory_bytes, gpu, npu, since
		FROM usage_objects WHERE gone = 0 AND holding = 1 AND since < $1 AND `+where, append([]any{end.UnixNano()}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	tail := usage.NewLedger()
	for rows.Next() {
		m := &usage.Mark{}
		m.Holding = true
		var idle int
		var since int64
		r := &m.Requests
		if err := rows.Scan(&m.UID, &m.Kind, &m.Namespace, &m.Name, &m.Cluster, &m.Creator, &idle, &r.CPU, &r.MemoryBytes,
			&r.GPU, &r.NPU, &since); err != nil {
			_ = rows.Close()
			return nil, nil, err
		}
		m.Idle, m.Since = idle == 1, time.Unix(0, since).UTC()
		if m.Since.Before(q.From) {
			m.Since = q.From
		}
		before := len(tail.Deltas)
		tail.Credit(m, end)
		if len(tail.Deltas) > before && !counted[m.UID] {
			counted[m.UID] = true
			group(keyOf(m.UID, m.Namespace, m.Cluster, m.Kind, m.Name, m.Creator)).Objects++
		}
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	for k, f := range tail.Deltas {
		m := tail.Marks[k.UID]
		addDay(group(keyOf(m.UID, m.Namespace, m.Cluster, m.Kind, m.Name, m.Creator)), k.Day, *f)
	}
	// The seconds measured.
	measured := map[int64]float64{}
	rows, err = s.db.QueryContext(ctx, `SELECT day, seconds FROM usage_measured WHERE day >= $1 AND day < $2`, from, to)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var day int64
		var sec float64
		if err := rows.Scan(&day, &sec); err != nil {
			_ = rows.Close()
			return nil, nil, err
		}
		measured[day] = sec
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	out := make([]usage.Group, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	return out, measured, nil
}

// prefixed is the figures' columns, each prefixed.
func prefixed(p string) string {
	cols := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		cols[i] = p + c
	}
	return strings.Join(cols, ", ")
}

// PruneUsage removes the figures of days before `before`, and the marks of objects gone whose last day
// with figures is before it.
func (s *Store) PruneUsage(ctx context.Context, before time.Time) (int64, error) {
	day := usage.DayOf(before)
	var n int64
	for _, stmt := range []string{`DELETE FROM usage_days WHERE day < $1`, `DELETE FROM usage_totals WHERE day < $1`,
		`DELETE FROM usage_measured WHERE day < $1`,
		`DELETE FROM usage_objects WHERE gone = 1 AND (last_day IS NULL OR last_day < $1)`} {
		res, err := s.db.ExecContext(ctx, stmt, day)
		if err != nil {
			return n, err
		}
		c, _ := res.RowsAffected()
		n += c
	}
	// What is left of an object starts at the first day kept.
	_, err := s.db.ExecContext(ctx, `UPDATE usage_objects SET first_day = $1 WHERE first_day < $1`, day)
	return n, err
}

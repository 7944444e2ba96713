package usage

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"ray-service/internal/accel"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
func scopeClause(q Query, alias string, n int) (string, []any) {
	return scopedBy(q, alias, n, false)
}

// scopedBy is scopeClause, with no condition on the kinds and namespaces where anyKind is set (the
// creators' alone).
func scopedBy(q Query, alias string, n int, anyKind bool) (string, []any) {
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
	case ByCreator:
		return "creator"
	case ByKind:
		return "kind"
	}
	return "namespace"
}

// groupValue is what setGroup set of k: the value of its grouping's column.
func groupValue(k GroupKey, by string) string {
	switch by {
	case ByCreator:
		return k.Creator
	case ByKind:
		return k.Kind
	case ByCluster:
		return k.UID
	}
	return k.Namespace
}

func setGroup(k *GroupKey, by, v string) {
	switch by {
	case ByCreator:
		k.Creator = v
	case ByKind:
		k.Kind = v
	case ByCluster:
		k.UID = v
	default:
		k.Namespace = v
	}
}

// Utilization sums the figures of q's window by q's grouping, per group and day, with the objects of
// each group, and the seconds measured per day; an object holding now is credited from its last credit
// up to q.Now. By cluster for a page (q.Page), see clustersPaged.
func (s *Store) Utilization(ctx context.Context, q Query) (Result, error) {
	// One snapshot: a credit written while the report reads (moving pending figures into the days, or
	// a mark's credit into its day) is in it whole or not at all.
	opts := &sql.TxOptions{ReadOnly: true}
	if s.postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = tx.Rollback() }()
	if s.postgres {
		// No compilation of plans (JIT): PostgreSQL compiles a plan priced over jit_above_cost (100,000
		// by default) at each run. The page by cluster over 10,000 clusters is priced about 56,000;
		// priced past it (as about twice as many would be), it took 37 to 38 ms against 25 to 27 ms, and
		// 126 ms at its first run. Set here, for the report alone: set when the session starts, it
		// would override the database's and role's settings, and a pooler may refuse it.
		if _, err := tx.ExecContext(ctx, `SET LOCAL jit = off`); err != nil {
			return Result{}, err
		}
	}
	r := report{tx: tx, q: q}
	if r.anyKind, err = everyKind(ctx, tx, q); err != nil {
		return Result{}, err
	}
	var res Result
	if q.GroupBy == ByCluster && q.Page != nil {
		res, err = s.clustersPaged(ctx, r)
	} else {
		res, err = utilizationDays(ctx, r)
	}
	if err != nil {
		return Result{}, err
	}
	if err := heldOf(ctx, r, &res); err != nil {
		return Result{}, err
	}
	// The seconds measured.
	res.Measured = map[int64]float64{}
	rows, err := tx.QueryContext(ctx, `SELECT day, seconds FROM usage_measured WHERE day >= $1 AND day < $2`, q.From.Unix(), q.To.Unix())
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var day int64
		var sec float64
		if err := rows.Scan(&day, &sec); err != nil {
			return Result{}, err
		}
		res.Measured[day] = sec
	}
	return res, rows.Err()
}

// report is what a report reads from: its snapshot, and what it asks.
type report struct {
	tx *sql.Tx
	q  Query
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
func everyKind(ctx context.Context, tx *sql.Tx, q Query) (bool, error) {
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
func groupDays(ctx context.Context, tx *sql.Tx, q Query, col string, add func(GroupKey, int64, Figures)) error {
	from, to := q.From.Unix(), q.To.Unix()
	value, by := "''", "day"
	if col != "" {
		value, by = col, col+", day"
	}
	rest, whole := q, []string(nil)
	if len(q.Creators) == 0 && (col == "" || col == groupColumn(ByKind)) {
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
type groupsOf map[GroupKey]*Group

func (m groupsOf) group(k GroupKey) *Group {
	g := m[k]
	if g == nil {
		g = &Group{Key: k, Days: map[int64]*Figures{}}
		m[k] = g
	}
	return g
}

// addDay adds f to g's day.
func addDay(g *Group, day int64, f Figures) {
	g.Total.Add(f)
	addTo(g.Days, day, f)
}

// utilizationDays reads every group's days of q's window: by namespace, creator or kind from the groups'
// days, by cluster from each cluster's.
func utilizationDays(ctx context.Context, r report) (Result, error) {
	tx, q := r.tx, r.q
	from, to := q.From.Unix(), q.To.Unix()
	groups := groupsOf{}
	byCluster := q.GroupBy == ByCluster
	col := groupColumn(q.GroupBy)
	// The figures of the days, then those pending (PutPending).
	if byCluster {
		ow, oa := r.marks("o.", 2)
		for _, table := range []string{"usage_days", "usage_pending"} {
			err := addDays(ctx, tx, `SELECT o.uid, o.namespace, o.cluster, o.kind, o.name, o.creator, d.day, `+prefixed("d.")+
				` FROM `+table+` d JOIN usage_objects o ON o.uid = d.uid WHERE d.day >= $1 AND d.day < $2 AND `+ow,
				append([]any{from, to}, oa...), true, q.GroupBy, func(k GroupKey, day int64, f Figures) {
					addDay(groups.group(k), day, f)
				})
			if err != nil {
				return Result{}, err
			}
		}
	} else {
		err := groupDays(ctx, tx, q, col, func(k GroupKey, day int64, f Figures) { addDay(groups.group(k), day, f) })
		if err != nil {
			return Result{}, err
		}
	}
	// The tails, and (but by cluster, where each is one) the objects counted, in the same pass.
	if err := tails(ctx, r, nil, !byCluster, groups.group, addDay); err != nil {
		return Result{}, err
	}
	res := Result{Groups: make([]Group, 0, len(groups))}
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
func (s *Store) clustersPaged(ctx context.Context, r report) (Result, error) {
	tx, q := r.tx, r.q
	from, to := q.From.Unix(), q.To.Unix()
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	p := *q.Page
	sums := SortColumns(p.SortBy)
	if p.Limit == 0 {
		sums = Columns
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
	key := SortColumns(p.SortBy)
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
	res := Result{Whole: map[int64]*Figures{}, Paged: true}
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
		k   GroupKey
		f   Figures
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
			for _, c := range Columns {
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
			return Result{}, err
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
	keys := make([]GroupKey, len(merged))
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
			t.credit(since.Int64, q.From, end, func(day int64, f Figures) { addTo(res.Whole, day, f) })
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	// The whole's days: the groups' days (or the kinds'), those pending, and the tails summed.
	if err := groupDays(ctx, tx, q, "", func(_ GroupKey, day int64, f Figures) { addTo(res.Whole, day, f) }); err != nil {
		return Result{}, err
	}
	if p.Limit > 0 && len(keys) > 0 {
		// The clusters on the page, whole: their days, those pending and their tails.
		uids := make([]string, len(keys))
		byUID := make(map[string]GroupKey, len(keys))
		for i, k := range keys {
			uids[i] = k.UID
			byUID[k.UID] = k
		}
		for part := range slices.Chunk(uids, 500) {
			in, args := inList(part, 3)
			for _, table := range []string{"usage_days", "usage_pending"} {
				err := addDays(ctx, tx, `SELECT uid, day, `+prefixed("")+` FROM `+table+` WHERE day >= $1 AND day < $2 AND uid IN (`+in+`)`,
					append([]any{from, to}, args...), false, ByCluster, func(k GroupKey, day int64, f Figures) {
						addDay(groups.group(byUID[k.UID]), day, f)
					})
				if err != nil {
					return Result{}, err
				}
			}
		}
		if err := tails(ctx, r, uids, false, groups.group, addDay); err != nil {
			return Result{}, err
		}
	}
	res.Groups = make([]Group, len(keys))
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
func addTo(days map[int64]*Figures, day int64, f Figures) {
	if days[day] == nil {
		days[day] = &Figures{}
	}
	days[day].Add(f)
}

// addDays runs query (of a grouping's column, or of a cluster's, then the day and the figures) and adds
// each row's figures to its group's day.
func addDays(ctx context.Context, tx *sql.Tx, query string, args []any, byCluster bool, groupBy string,
	add func(GroupKey, int64, Figures)) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var f Figures
		var day int64
		var k GroupKey
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
func cells(f *Figures) []any {
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
func tails(ctx context.Context, r report, only []string, counted bool, group func(GroupKey) *Group,
	addDay func(*Group, int64, Figures)) error {
	q := r.q
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	byCluster := q.GroupBy == ByCluster
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
		var k GroupKey
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
			t.credit(since.Int64, q.From, end, func(day int64, f Figures) { addDay(g, day, f) })
		}
		return nil
	})
}

// tail is the requests of objects holding since the same moment, summed: the objects (held), their
// cores, bytes of memory, GPUs and NPUs, and the idle ones among them holding accelerators, with these.
type tail struct {
	held, cpu, memory, gpu, npu, idle, idleGPU, idleNPU float64
}

// idleAccelerators is 1 for a mark idle while it holds accelerators, else 0 (as Ledger.Credit
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
// Ledger.Credit does.
func (t tail) credit(since int64, from, end time.Time, add func(int64, Figures)) {
	for at := time.Unix(0, max(since, from.UnixNano())).UTC(); at.Before(end); {
		day := DayOf(at)
		to := time.Unix(day+86400, 0)
		if to.After(end) {
			to = end
		}
		s := to.Sub(at).Seconds()
		add(day, Figures{HeldSeconds: t.held * s, CPUSeconds: t.cpu * s, MemoryByteSeconds: t.memory * s,
			GPUSeconds: t.gpu * s, NPUSeconds: t.npu * s, IdleSeconds: t.idle * s, IdleGPUSeconds: t.idleGPU * s,
			IdleNPUSeconds: t.idleNPU * s})
		at = to
	}
}

// prefixed is the figures' columns, each prefixed.
func prefixed(p string) string {
	cols := make([]string, len(Columns))
	for i, c := range Columns {
		cols[i] = p + c
	}
	return strings.Join(cols, ", ")
}

// heldOf sums the accelerator-seconds of res's groups over r's window by resource and model (and of
// every group in the scope where the groups are a page), from the objects' days and, for those holding
// now, their marks' accelerators from their last credit up to the window's end or now (as tails do).
// An object's seconds go to the group its mark is counted to now, as its figures do.
func heldOf(ctx context.Context, r report, res *Result) error {
	q := r.q
	col := "o." + groupColumn(q.GroupBy)
	if q.GroupBy == ByCluster {
		col = "o.uid"
	}
	groups := make(map[string]*Group, len(res.Groups))
	for i := range res.Groups {
		res.Groups[i].Held = HeldSums{}
		groups[groupValue(res.Groups[i].Key, q.GroupBy)] = &res.Groups[i]
	}
	paged := res.Paged
	if paged {
		res.WholeHeld = HeldSums{}
	}
	if len(groups) == 0 && !paged {
		return nil
	}
	end := q.To
	if q.Now.Before(end) {
		end = q.Now
	}
	cond, args := r.marks("o.", 2)
	args = append([]any{q.From.Unix(), q.To.Unix()}, args...)
	add := func(key string, id HeldID, h HeldSeconds) {
		if g := groups[key]; g != nil {
			g.Held.add(id, h)
		}
		if paged {
			res.WholeHeld.add(id, h)
		}
	}
	if err := scanRows(ctx, r.tx, `SELECT `+col+`, a.kind, a.resource, a.model, SUM(a.count_seconds), SUM(a.device_seconds)
		FROM usage_accelerators a JOIN usage_objects o ON o.uid = a.uid
		WHERE a.day >= $1 AND a.day < $2 AND `+cond+` GROUP BY `+col+`, a.kind, a.resource, a.model`, args, func(rows *sql.Rows) error {
		var key string
		var id HeldID
		var h HeldSeconds
		if err := rows.Scan(&key, &id.Kind, &id.Resource, &id.Model, &h.CountSeconds, &h.DeviceSeconds); err != nil {
			return err
		}
		add(key, id, h)
		return nil
	}); err != nil {
		return err
	}
	cond, args = r.marks("o.", 1)
	args = append([]any{end.UnixNano()}, args...)
	return scanRows(ctx, r.tx, `SELECT `+col+`, o.since, o.accelerators FROM usage_objects o
		WHERE o.gone = 0 AND o.holding = 1 AND o.accelerators <> '' AND o.since < $1 AND `+cond, args, func(rows *sql.Rows) error {
		var key, text string
		var since int64
		if err := rows.Scan(&key, &since, &text); err != nil {
			return err
		}
		var held accel.Holdings
		if err := json.Unmarshal([]byte(text), &held); err != nil {
			return fmt.Errorf("the accelerators of a mark: %w", err)
		}
		sec := end.Sub(time.Unix(0, max(since, q.From.UnixNano()))).Seconds()
		if sec <= 0 {
			return nil
		}
		for _, x := range held {
			add(key, HeldID{Kind: x.Kind, Resource: x.Resource, Model: x.Model}, HeldSeconds{CountSeconds: x.Count * sec, DeviceSeconds: x.Devices * sec})
		}
		return nil
	})
}

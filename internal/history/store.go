// Package history keeps what Ray objects were and how they ended after they are gone: a record per
// object (by UID) with its spec, a timeline of status transitions, its final status and why. It is
// stored in SQL: SQLite embedded by default (pure Go), PostgreSQL for several replicas, with the same
// statements and versioned migrations run at start. Writes are idempotent (keyed by UID, and by UID,
// status and time for transitions), so that a writer that takes over duplicates nothing.
package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"ray-service/internal/ray"
	"ray-service/internal/sqldb"
	// PostgreSQL for several replicas, and the embedded SQLite; both pure Go: the static build stays
	// free of cgo.
)

// Record is what the history keeps of one object.
type Record struct {
	UID       string `json:"uid"`
	Kind      string `json:"kind" example:"RayJob"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Creator   string `json:"creator"`
	// Spec is the manifest as last seen, JSON (shown as the detail's manifest).
	Spec       string     `json:"-"`
	Status     string     `json:"status" example:"Failed"`
	Reason     string     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DeletedAt  *time.Time `json:"deletedAt,omitempty"`
	// Generation is the object's metadata.generation when its spec was recorded.
	Generation int64 `json:"-"`
	// Timeline holds the status transitions observed, oldest first (filled by Get): the first 10 and
	// the last 10 of them (KeptTransitions).
	Timeline []Transition `json:"timeline,omitempty"`
	// TransitionsDropped counts the transitions dropped between the first and the last kept.
	TransitionsDropped int64 `json:"transitionsDropped,omitempty"`
	// Cut says, when set, that the manifest was not kept whole: the manifest shown is what was kept
	// (apiVersion, kind, name and namespace), and a rerun is refused.
	Cut *ManifestCut `json:"manifestTruncated,omitempty"`
	// Ending is what explains how it ended, read when it finished or went (filled by Get).
	Ending *ray.Ending `json:"ending,omitempty"`
	// EndingReadAt is when the ending was read.
	EndingReadAt *time.Time `json:"endingReadAt,omitempty"`
}

// Transition is one change of normalized status, when it was observed.
type Transition struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// Store is the history's database.
type Store struct {
	db       *sql.DB
	postgres bool
	sqldb    *sqldb.DB
}

// Open opens the history at dsn: "sqlite:<file>" (the default, embedded) or a PostgreSQL URL
// ("postgres://…"), and brings its schema to the current version.
func Open(ctx context.Context, dsn string) (*Store, error) {
	d, err := sqldb.Open(ctx, dsn, Migrations())
	if err != nil {
		return nil, err
	}
	return New(d), nil
}

// New is the history in d, whose schema has the history's migrations; closing it closes d.
func New(d *sqldb.DB) *Store {
	return &Store{db: d.DB, postgres: d.Postgres, sqldb: d}
}

// Close closes the database.
func (s *Store) Close() error {
	return s.db.Close()
}

// migrations are the schema's versions the history holds, by number (version v at v-1): the numbers
// are shared with the other features' (sqldb.Schema), whose versions are empty here.
var migrations = []string{
	// 1: records, their manifests, timelines and endings. A record's row stays small (a page scans
	// many); what only a detail shows is in tables of its own.
	`CREATE TABLE records (
		uid TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		creator TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL DEFAULT '',
		reason TEXT NOT NULL DEFAULT '',
		message TEXT NOT NULL DEFAULT '',
		generation BIGINT NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		finished_at BIGINT,
		deleted_at BIGINT
	);
	CREATE INDEX records_by_namespace ON records (kind, namespace, created_at);
	CREATE INDEX records_by_creator ON records (kind, creator);
	CREATE INDEX records_by_created ON records (kind, created_at, namespace, name, uid);
	CREATE INDEX records_by_name ON records (kind, name, namespace, uid);
	CREATE INDEX records_by_ended ON records (kind, (COALESCE(finished_at, deleted_at)), namespace, name, uid);
	CREATE INDEX records_by_status ON records (kind, status, (COALESCE(finished_at, deleted_at)), creator, namespace);
	CREATE TABLE manifests (
		uid TEXT PRIMARY KEY REFERENCES records (uid) ON DELETE CASCADE,
		spec TEXT NOT NULL
	);
	CREATE TABLE endings (
		uid TEXT PRIMARY KEY REFERENCES records (uid) ON DELETE CASCADE,
		read_at BIGINT NOT NULL,
		body TEXT NOT NULL
	);
	CREATE TABLE transitions (
		uid TEXT NOT NULL REFERENCES records (uid) ON DELETE CASCADE,
		status TEXT NOT NULL,
		at BIGINT NOT NULL,
		PRIMARY KEY (uid, status, at)
	);`,
	// 2: what each record takes, for the bounds: the bytes of its manifest and ending and its count of
	// transitions (those kept, those dropped), counted for the records already there; what a manifest
	// kept in part was. Quotas per namespace sum the records of a namespace by their end.
	`ALTER TABLE records ADD COLUMN spec_bytes BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE records ADD COLUMN ending_bytes BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE records ADD COLUMN transition_count BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE records ADD COLUMN transitions_dropped BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE manifests ADD COLUMN whole_bytes BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE manifests ADD COLUMN whole_sha256 TEXT NOT NULL DEFAULT '';
	ALTER TABLE manifests ADD COLUMN cut_reason TEXT NOT NULL DEFAULT '';
	UPDATE records SET
		spec_bytes = COALESCE((SELECT LENGTH(spec) FROM manifests m WHERE m.uid = records.uid), 0),
		ending_bytes = COALESCE((SELECT LENGTH(body) FROM endings e WHERE e.uid = records.uid), 0),
		transition_count = (SELECT COUNT(*) FROM transitions t WHERE t.uid = records.uid);
	CREATE INDEX records_by_namespace_ended ON records (namespace, (COALESCE(finished_at, deleted_at)), uid)`,
	// 3: the audit trail's (internal/audit).
	"",
	// 4: the notifications' (internal/notify).
	"",
	// 5 to 18: the utilization's (internal/usage).
	"", "", "", "", "", "", "", "", "", "", "", "", "", "",
	// 19: the notifications' (internal/notify).
	"",
}

// recordBytes is what a record takes, as the quotas count it: its row, manifest, ending and
// transitions.
const recordBytes = `(256 + LENGTH(kind) + LENGTH(namespace) + LENGTH(name) + LENGTH(creator) + LENGTH(reason) + LENGTH(message)
	+ spec_bytes + ending_bytes + 64 * transition_count)`

// SchemaVersion is the newest schema version of the history's own migrations.
var SchemaVersion = func() int {
	m := Migrations()
	return m[len(m)-1].Version
}()

// Migrations are the history's schema migrations, numbered.
func Migrations() []sqldb.Migration {
	var out []sqldb.Migration
	for i, m := range migrations {
		if m != "" {
			out = append(out, sqldb.Migration{Version: i + 1, Feature: "history", SQL: m})
		}
	}
	return out
}

// Optimize refreshes the statistics SQLite's query planner chooses indexes by, for the whole database
// (the other stored features' tables too). The recorder runs it after each retention pass. On PostgreSQL
// autovacuum keeps the records' (and the utilization analyzes its own, usage.Store.Optimize).
func (s *Store) Optimize(ctx context.Context) error {
	if s.postgres {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `PRAGMA optimize=0x10002`)
	return err
}

// Version is the schema version in the database.
func (s *Store) Version(ctx context.Context) (int, error) { return s.sqldb.Version(ctx) }

func unixOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// Put writes a record as it is now; writing it again with the same content changes nothing. Times
// once set (finished, deleted) are kept: a later write without them does not erase them.
func (s *Store) Put(ctx context.Context, r Record) error {
	clipRecord(&r)
	if r.Cut == nil {
		r.Spec, r.Cut = boundManifest(r.Spec)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO records (uid, kind, namespace, name, creator, status, reason, message, created_at, finished_at, deleted_at, generation, spec_bytes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $14)
		ON CONFLICT (uid) DO UPDATE SET
			creator = excluded.creator,
			generation = CASE WHEN $13 THEN excluded.generation ELSE records.generation END,
			spec_bytes = CASE WHEN $13 THEN excluded.spec_bytes ELSE records.spec_bytes END,
			status = excluded.status, reason = excluded.reason, message = excluded.message,
			finished_at = COALESCE(excluded.finished_at, records.finished_at),
			deleted_at = COALESCE(excluded.deleted_at, records.deleted_at)`,
		r.UID, r.Kind, r.Namespace, r.Name, r.Creator, r.Status, r.Reason, r.Message, r.CreatedAt.UnixNano(),
		unixOrNil(r.FinishedAt), unixOrNil(r.DeletedAt), r.Generation, r.Spec != "", len(r.Spec)); err != nil {
		return err
	}
	if r.Spec != "" {
		var whole int64
		var sum, why string
		if r.Cut != nil {
			whole, sum, why = r.Cut.Size, r.Cut.SHA256, r.Cut.Reason
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO manifests (uid, spec, whole_bytes, whole_sha256, cut_reason) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (uid) DO UPDATE SET spec = excluded.spec, whole_bytes = excluded.whole_bytes, whole_sha256 = excluded.whole_sha256,
			cut_reason = excluded.cut_reason`, r.UID, r.Spec, whole, sum, why); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// PutEnding records what explains how uid ended, read at a time; a later reading replaces it.
// The ending is cut to its bounds first (boundEnding).
func (s *Store) PutEnding(ctx context.Context, uid string, e *ray.Ending, at time.Time) error {
	body, err := json.Marshal(boundEnding(e))
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err = tx.ExecContext(ctx, `INSERT INTO endings (uid, read_at, body) VALUES ($1, $2, $3)
		ON CONFLICT (uid) DO UPDATE SET read_at = excluded.read_at, body = excluded.body`, uid, at.UnixNano(), string(body)); err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, `UPDATE records SET ending_bytes = $1 WHERE uid = $2`, len(body), uid); err != nil {
		return err
	}
	return tx.Commit()
}

// MarkDeleted records that uid went at a time, unless a time is recorded already.
func (s *Store) MarkDeleted(ctx context.Context, uid string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE records SET deleted_at = $1 WHERE uid = $2 AND deleted_at IS NULL`, at.UnixNano(), uid)
	return err
}

// Known is what the history holds of an object that has not gone: what a writer taking over compares
// the objects it sees with, so that it writes only what changed.
type Known struct {
	Kind, Namespace, Name string
	Status                string
	Generation            int64
	Finished, HasEnding   bool
}

// Live returns what is known of every recorded object not recorded as gone, by UID.
func (s *Store) Live(ctx context.Context) (map[string]Known, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.uid, r.kind, r.namespace, r.name, r.status, r.generation, r.finished_at IS NOT NULL,
		e.uid IS NOT NULL FROM records r LEFT JOIN endings e ON e.uid = r.uid WHERE r.deleted_at IS NULL`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]Known{}
	for rows.Next() {
		var uid string
		var k Known
		if err := rows.Scan(&uid, &k.Kind, &k.Namespace, &k.Name, &k.Status, &k.Generation, &k.Finished, &k.HasEnding); err != nil {
			return nil, err
		}
		out[uid] = k
	}
	return out, rows.Err()
}

// Namespaces returns the namespaces that hold records of a kind.
func (s *Store) Namespaces(ctx context.Context, kind string) ([]string, error) {
	return s.sqldb.Strings(ctx, `SELECT DISTINCT namespace FROM records WHERE kind = $1 ORDER BY namespace`, kind)
}

// Prune removes the records of objects that ended (finished or went) before a time, and in each
// namespace those of ended objects past the newest keep (0: no bound); it returns how many it removed.
// Records of objects still there are kept whatever their age.
func (s *Store) Prune(ctx context.Context, endedBefore time.Time, keep int) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM records WHERE COALESCE(finished_at, deleted_at) < $1`, endedBefore.UnixNano())
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if keep <= 0 {
		return n, nil
	}
	res, err = s.db.ExecContext(ctx, `DELETE FROM records WHERE uid IN (
		SELECT uid FROM (
			SELECT uid, ROW_NUMBER() OVER (PARTITION BY namespace ORDER BY COALESCE(finished_at, deleted_at) DESC, uid) AS n
			FROM records WHERE COALESCE(finished_at, deleted_at) IS NOT NULL
		) ranked WHERE n > $1)`, keep)
	if err != nil {
		return n, err
	}
	m, _ := res.RowsAffected()
	return n + m, nil
}

// AddTransition records that uid reached status at a time; the same transition again is no change.
// Of an object's transitions the first and the last KeptTransitions are kept: one past them drops the
// oldest of those between, and counts it.
func (s *Store) AddTransition(ctx context.Context, uid string, t Transition) error {
	return s.AddTransitions(ctx, uid, []Transition{t}, 0)
}

// AddTransitions records transitions of uid, and dropped more that were dropped before they were
// written.
func (s *Store) AddTransitions(ctx context.Context, uid string, ts []Transition, dropped int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	added := int64(0)
	for _, t := range ts {
		res, err := tx.ExecContext(ctx, `INSERT INTO transitions (uid, status, at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			uid, t.Status, t.At.UnixNano())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		added += n
	}
	if added == 0 && dropped == 0 {
		return tx.Commit()
	}
	var count int64
	if err := tx.QueryRowContext(ctx, `UPDATE records SET transition_count = transition_count + $1, transitions_dropped = transitions_dropped + $2
		WHERE uid = $3 RETURNING transition_count`, added, dropped, uid).Scan(&count); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return tx.Commit()
		}
		return err
	}
	if over := count - 2*KeptTransitions; over > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM transitions WHERE uid = $1 AND (status, at) IN (
			SELECT status, at FROM transitions WHERE uid = $1 ORDER BY at, status LIMIT $2 OFFSET $3)`, uid, over, KeptTransitions); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE records SET transition_count = transition_count - $1, transitions_dropped = transitions_dropped + $1
			WHERE uid = $2`, over, uid); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Shrink removes the records of ended objects, oldest end first, until what the records of namespace
// ns (""; all) take is at most limit bytes; it returns how many it removed. Records of objects still
// there are kept.
func (s *Store) Shrink(ctx context.Context, ns string, limit int64) (int64, error) {
	where, args := "", []any{}
	if ns != "" {
		where, args = "namespace = $1 AND ", []any{ns}
	}
	var total int64
	if err := s.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(`+recordBytes+`), 0) AS BIGINT) FROM records WHERE `+where+`1 = 1`, args...).Scan(&total); err != nil {
		return 0, err
	}
	if total <= limit {
		return 0, nil
	}
	args = append(args, total-limit)
	res, err := s.db.ExecContext(ctx, `DELETE FROM records WHERE uid IN (
		SELECT uid FROM (
			SELECT uid, `+recordBytes+` AS size, SUM(`+recordBytes+`) OVER (ORDER BY COALESCE(finished_at, deleted_at), uid ROWS UNBOUNDED PRECEDING) AS upto
			FROM records WHERE `+where+`COALESCE(finished_at, deleted_at) IS NOT NULL
		) ranked WHERE upto - size < $`+fmt.Sprint(len(args))+`)`, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// OverQuota returns the namespaces whose records take more than limit bytes.
func (s *Store) OverQuota(ctx context.Context, limit int64) ([]string, error) {
	return s.sqldb.Strings(ctx, `SELECT namespace FROM records GROUP BY namespace HAVING SUM(`+recordBytes+`) > $1`, limit)
}

// Bytes is what the records of namespace ns ("": all) take, as the quotas count it.
func (s *Store) Bytes(ctx context.Context, ns string) (int64, error) {
	var total int64
	err := s.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(`+recordBytes+`), 0) AS BIGINT) FROM records WHERE namespace = $1 OR $1 = ''`, ns).Scan(&total)
	return total, err
}

// ErrNotFound says there is no record of that UID.
var ErrNotFound = errors.New("no such record")

// Get reads one record with its timeline.
func (s *Store) Get(ctx context.Context, uid string) (*Record, error) {
	rows, err := s.query(ctx, true, `WHERE uid = $1`, "", 1, 0, uid)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	r := rows[0]
	var whole int64
	var sum, why string
	switch err := s.db.QueryRowContext(ctx, `SELECT r.transitions_dropped, COALESCE(m.whole_bytes, 0), COALESCE(m.whole_sha256, ''),
		COALESCE(m.cut_reason, '') FROM records r LEFT JOIN manifests m ON m.uid = r.uid WHERE r.uid = $1`, uid).Scan(&r.TransitionsDropped, &whole, &sum, &why); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ErrNotFound
	case err != nil:
		return nil, err
	}
	if whole > 0 {
		r.Cut = &ManifestCut{Size: whole, SHA256: sum, Reason: why}
	}
	tl, err := s.db.QueryContext(ctx, `SELECT status, at FROM transitions WHERE uid = $1 ORDER BY at, status`, uid)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tl.Close() }()
	for tl.Next() {
		var t Transition
		var at int64
		if err := tl.Scan(&t.Status, &at); err != nil {
			return nil, err
		}
		t.At = time.Unix(0, at).UTC()
		r.Timeline = append(r.Timeline, t)
	}
	if err := tl.Err(); err != nil {
		return nil, err
	}
	var readAt int64
	var body string
	switch err := s.db.QueryRowContext(ctx, `SELECT read_at, body FROM endings WHERE uid = $1`, uid).Scan(&readAt, &body); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		r.Ending = &ray.Ending{}
		if err := json.Unmarshal([]byte(body), r.Ending); err != nil {
			return nil, fmt.Errorf("the ending of %s: %w", uid, err)
		}
		t := time.Unix(0, readAt).UTC()
		r.EndingReadAt = &t
	}
	return &r, nil
}

// Query selects records of one kind.
type Query struct {
	Kind string
	// Namespaces limit the records to these namespaces (nil: every namespace).
	Namespaces []string
	Search     string // a case-insensitive substring of the name
	Statuses   []string
	Creators   []string
	// FinishedAfter and FinishedBefore bound when the object finished or was deleted.
	FinishedAfter, FinishedBefore *time.Time
	// SortBy is name, createdAt, finishedAt or status; Desc reverses it.
	SortBy         string
	Desc           bool
	Page, PageSize int
}

// fewMatches is how many matches a page of SQLite sorts rather than walking an index in order.
const fewMatches = 5000

// List returns the page the query asks for and how many records match in all.
func (s *Store) List(ctx context.Context, q Query) ([]Record, int, error) {
	where, args := []string{"kind = $1"}, []any{q.Kind}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	in := func(col string, values []string) {
		ph := make([]string, len(values))
		for i, v := range values {
			ph[i] = arg(v)
		}
		where = append(where, col+" IN ("+strings.Join(ph, ", ")+")")
	}
	if q.Namespaces != nil {
		if len(q.Namespaces) == 0 {
			return []Record{}, 0, nil
		}
		in("namespace", q.Namespaces)
	}
	if len(q.Statuses) > 0 {
		in("status", q.Statuses)
	}
	if len(q.Creators) > 0 {
		in("creator", q.Creators)
	}
	if q.Search != "" {
		// Kubernetes names are lower case: the search is, and the names need no folding.
		where = append(where, "name LIKE "+arg("%"+escapeLike(strings.ToLower(q.Search))+"%")+" ESCAPE '\\'")
	}
	ended := "COALESCE(finished_at, deleted_at)"
	if q.FinishedAfter != nil {
		where = append(where, ended+" >= "+arg(q.FinishedAfter.UnixNano()))
	}
	if q.FinishedBefore != nil {
		where = append(where, ended+" < "+arg(q.FinishedBefore.UnixNano()))
	}
	clause := "WHERE " + strings.Join(where, " AND ")
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM records `+clause, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	order := map[string]string{"name": "name", "createdAt": "created_at", "finishedAt": ended, "status": "status"}[q.SortBy]
	if order == "" {
		order = "created_at"
	}
	dir := "ASC"
	if q.Desc {
		dir = "DESC"
	}
	page, size := max(q.Page, 1), max(q.PageSize, 1)
	if total <= (page-1)*size {
		return []Record{}, total, nil
	}
	// Ties are broken by namespace, name and UID in the same direction, so that an index of the kind,
	// the sort key and these gives a page in order without sorting every match. When few match a filter
	// that has an index (status, creator, namespace), SQLite is told (a unary +) to find them by it and
	// sort them instead: walking the order's index for a rare match would read most of the kind.
	by := []string{order, "namespace", "name", "uid"}
	if order == "name" {
		by = []string{"name", "namespace", "uid"}
	}
	indexed := len(q.Statuses) > 0 || len(q.Creators) > 0 || q.Namespaces != nil
	if !s.postgres && total <= fewMatches && indexed {
		for i := range by {
			by[i] = "+" + by[i]
		}
	}
	// A page leaves the manifests out: only a record's detail shows its manifest.
	rows, err := s.query(ctx, false, clause, strings.Join(by, " "+dir+", ")+" "+dir, size, (page-1)*size, args...)
	return rows, total, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func (s *Store) query(ctx context.Context, withSpec bool, clause, order string, limit, offset int, args ...any) ([]Record, error) {
	spec := "''"
	if withSpec {
		spec = "COALESCE((SELECT spec FROM manifests m WHERE m.uid = records.uid), '')"
	}
	stmt := `SELECT uid, kind, namespace, name, creator, ` + spec + `, status, reason, message, created_at, finished_at, deleted_at FROM records ` + clause
	if order != "" {
		stmt += " ORDER BY " + order
	}
	stmt += fmt.Sprintf(" LIMIT %d OFFSET %d", limit, offset)
	rows, err := s.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := []Record{}
	for rows.Next() {
		var r Record
		var created int64
		var finished, deleted sql.NullInt64
		if err := rows.Scan(&r.UID, &r.Kind, &r.Namespace, &r.Name, &r.Creator, &r.Spec, &r.Status, &r.Reason, &r.Message,
			&created, &finished, &deleted); err != nil {
			return nil, err
		}
		r.CreatedAt = time.Unix(0, created).UTC()
		if finished.Valid {
			t := time.Unix(0, finished.Int64).UTC()
			r.FinishedAt = &t
		}
		if deleted.Valid {
			t := time.Unix(0, deleted.Int64).UTC()
			r.DeletedAt = &t
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

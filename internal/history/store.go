// Package history keeps what Ray objects were and how they ended after they are gone: a record per
// object (by UID) with its spec, a timeline of status transitions, its final status and why. It is
// stored in SQL: SQLite embedded by default (pure Go), PostgreSQL for several replicas, with the same
// statements and versioned migrations run at start. Writes are idempotent (keyed by UID, and by UID,
// status and time for transitions), so that a writer that takes over duplicates nothing.
package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	// The embedded SQLite, pure Go: the static build stays free of cgo.
	_ "modernc.org/sqlite"
)

// Record is what the history keeps of one object.
type Record struct {
	UID        string     `json:"uid"`
	Kind       string     `json:"kind" example:"RayJob"`
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	Creator    string     `json:"creator"`
	Spec       string     `json:"spec,omitempty"`
	Status     string     `json:"status" example:"Failed"`
	Reason     string     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DeletedAt  *time.Time `json:"deletedAt,omitempty"`
	// Timeline holds the status transitions observed, oldest first (filled by Get).
	Timeline []Transition `json:"timeline,omitempty"`
}

// Transition is one change of normalized status, when it was observed.
type Transition struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// Store is the history's database.
type Store struct {
	db *sql.DB
}

// Open opens the history at dsn: "sqlite:<file>" (the default, embedded) or a PostgreSQL URL
// ("postgres://…"), and brings its schema to the current version.
func Open(ctx context.Context, dsn string) (*Store, error) {
	driver, source, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return nil, err
	}
	if driver == "sqlite" {
		// One writer at a time is what SQLite allows; readers share the file in WAL mode.
		db.SetMaxOpenConns(1)
	}
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func parseDSN(dsn string) (driver, source string, err error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return "", "", errors.New("history DSN sqlite: names no file")
		}
		return "sqlite", "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)", nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "", "", errors.New("history DSN: PostgreSQL is not built into this version yet; use sqlite:<file>")
	}
	return "", "", fmt.Errorf("history DSN %q: want sqlite:<file> or postgres://…", redact(dsn))
}

// redact keeps a DSN's password out of messages.
func redact(dsn string) string {
	if at := strings.LastIndex(dsn, "@"); at > 0 {
		if scheme := strings.Index(dsn, "://"); scheme > 0 && scheme < at {
			return dsn[:scheme+3] + "…" + dsn[at:]
		}
	}
	return dsn
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrations are the schema's versions, in order; each runs once, in a transaction.
var migrations = []string{
	// 1: records and their timelines.
	`CREATE TABLE records (
		uid TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		creator TEXT NOT NULL DEFAULT '',
		spec TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL DEFAULT '',
		reason TEXT NOT NULL DEFAULT '',
		message TEXT NOT NULL DEFAULT '',
		created_at BIGINT NOT NULL,
		finished_at BIGINT,
		deleted_at BIGINT
	);
	CREATE INDEX records_by_kind_namespace ON records (kind, namespace, created_at);
	CREATE TABLE transitions (
		uid TEXT NOT NULL REFERENCES records (uid) ON DELETE CASCADE,
		status TEXT NOT NULL,
		at BIGINT NOT NULL,
		PRIMARY KEY (uid, status, at)
	);`,
}

// migrate brings the schema to the last version, recording each version applied.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("history schema: %w", err)
	}
	var current int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("history schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("the history's schema is at version %d, newer than this service knows (%d)", current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for stmt := range strings.SplitSeq(migrations[v-1], ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("history schema version %d: %w", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, v, time.Now().Unix()); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Version is the schema version in the database.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func unixOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// Put writes a record as it is now; writing it again with the same content changes nothing. Times
// once set (finished, deleted) are kept: a later write without them does not erase them.
func (s *Store) Put(ctx context.Context, r Record) error {
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO records (uid, kind, namespace, name, creator, spec, status, reason, message, created_at, finished_at, deleted_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (uid) DO UPDATE SET
			creator = excluded.creator, spec = CASE WHEN excluded.spec = '' THEN records.spec ELSE excluded.spec END,
			status = excluded.status, reason = excluded.reason, message = excluded.message,
			finished_at = COALESCE(excluded.finished_at, records.finished_at),
			deleted_at = COALESCE(excluded.deleted_at, records.deleted_at)`,
		r.UID, r.Kind, r.Namespace, r.Name, r.Creator, r.Spec, r.Status, r.Reason, r.Message, r.CreatedAt.UnixNano(),
		unixOrNil(r.FinishedAt), unixOrNil(r.DeletedAt))
	return err
}

// AddTransition records that uid reached status at a time; the same transition again is no change.
func (s *Store) AddTransition(ctx context.Context, uid string, t Transition) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO transitions (uid, status, at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		uid, t.Status, t.At.UnixNano())
	return err
}

// ErrNotFound says there is no record of that UID.
var ErrNotFound = errors.New("no such record")

// Get reads one record with its timeline.
func (s *Store) Get(ctx context.Context, uid string) (*Record, error) {
	rows, err := s.query(ctx, `WHERE uid = $1`, "", 1, 0, uid)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	r := rows[0]
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
	return &r, tl.Err()
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
		where = append(where, "LOWER(name) LIKE "+arg("%"+escapeLike(strings.ToLower(q.Search))+"%")+" ESCAPE '\\'")
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
	rows, err := s.query(ctx, clause, order+" "+dir+", namespace, name, uid", size, (page-1)*size, args...)
	return rows, total, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func (s *Store) query(ctx context.Context, clause, order string, limit, offset int, args ...any) ([]Record, error) {
	stmt := `SELECT uid, kind, namespace, name, creator, spec, status, reason, message, created_at, finished_at, deleted_at FROM records ` + clause
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

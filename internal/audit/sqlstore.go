package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"ray-service/internal/sqldb"
)

// auditMigration keeps the audit trail: its entries in sequence order, each with the hash of the one
// before and its own; the head, a single row that every append locks and moves (so that the appends
// of several replicas make one linear chain, and a removed last entry is still found); and the
// namespaces the trail has entries of, for the callers' access reviews.
const auditMigration = `CREATE TABLE audit_entries (
		seq BIGINT PRIMARY KEY,
		at BIGINT NOT NULL,
		action TEXT NOT NULL,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		uid TEXT NOT NULL DEFAULT '',
		user_name TEXT NOT NULL,
		request_id TEXT NOT NULL,
		message TEXT NOT NULL,
		prev TEXT NOT NULL,
		hash TEXT NOT NULL
	);
	CREATE INDEX audit_entries_by_namespace ON audit_entries (namespace, seq);
	CREATE TABLE audit_namespaces (namespace TEXT PRIMARY KEY);
	CREATE TABLE audit_head (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		seq BIGINT NOT NULL,
		hash TEXT NOT NULL
	);
	INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '')`

// Migrations are the audit trail's schema migrations, in the one list of the service's database.
func Migrations() []sqldb.Migration {
	return []sqldb.Migration{{Version: 3, Feature: "audit", SQL: auditMigration}}
}

// SQLStore is the audit trail's store in the service's database (Store). Any replica appends to it, not
// only the Lease's holder: each append is one transaction under the head row's lock.
type SQLStore struct {
	db *sqldb.DB
}

// NewSQLStore is the audit trail's store in db, whose schema has the trail's migrations.
func NewSQLStore(db *sqldb.DB) *SQLStore { return &SQLStore{db: db} }

// Append stores e after the last entry, chained to it by seal.
func (a *SQLStore) Append(ctx context.Context, e Entry, seal func(prev string, e Entry) string) (Entry, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return e, err
	}
	defer func() { _ = tx.Rollback() }()
	// The update takes the head's lock (SQLite's write lock, PostgreSQL's row lock) before anything is
	// read: another append waits for this one to commit, then reads the head it left.
	var prev string
	switch err := tx.QueryRowContext(ctx, `UPDATE audit_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash`).Scan(&e.Seq, &prev); {
	case errors.Is(err, sql.ErrNoRows):
		return e, ErrNoHead
	case err != nil:
		return e, err
	}
	hash := seal(prev, e)
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_entries (seq, at, action, kind, namespace, name, uid, user_name, request_id, message, prev, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, e.Seq, e.Time.UnixNano(), e.Action, e.Kind, e.Namespace, e.Name, e.UID,
		e.User, e.RequestID, e.Message, prev, hash); err != nil {
		return e, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE audit_head SET hash = $1 WHERE id = 1`, hash); err != nil {
		return e, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_namespaces (namespace) VALUES ($1) ON CONFLICT DO NOTHING`, e.Namespace); err != nil {
		return e, err
	}
	return e, tx.Commit()
}

const auditColumns = `seq, at, action, kind, namespace, name, uid, user_name, request_id, message`

func scanEntry(rows *sql.Rows, extra ...any) (Entry, error) {
	var e Entry
	var at int64
	if err := rows.Scan(append([]any{&e.Seq, &at, &e.Action, &e.Kind, &e.Namespace, &e.Name, &e.UID, &e.User, &e.RequestID, &e.Message}, extra...)...); err != nil {
		return e, err
	}
	e.Time = time.Unix(0, at).UTC()
	return e, nil
}

// Entries returns a page of the entries of q's namespaces, newest first.
func (a *SQLStore) Entries(ctx context.Context, q Query) ([]Entry, int, error) {
	clause, args := "", []any{}
	if q.Namespaces != nil {
		if len(q.Namespaces) == 0 {
			return []Entry{}, 0, nil
		}
		ph := make([]string, len(q.Namespaces))
		for i, ns := range q.Namespaces {
			args = append(args, ns)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		clause = "WHERE namespace IN (" + strings.Join(ph, ", ") + ")"
	}
	var total int
	if err := a.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_entries `+clause, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, size := max(q.Page, 1), max(q.PageSize, 1)
	out := []Entry{}
	if total <= (page-1)*size {
		return out, total, nil
	}
	rows, err := a.db.QueryContext(ctx, fmt.Sprintf(`SELECT `+auditColumns+` FROM audit_entries %s ORDER BY seq DESC LIMIT %d OFFSET %d`,
		clause, size, (page-1)*size), args...)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, total, rows.Err()
}

// Namespaces returns the namespaces the trail has entries of, sorted.
func (a *SQLStore) Namespaces(ctx context.Context) ([]string, error) {
	return a.db.Strings(ctx, `SELECT namespace FROM audit_namespaces ORDER BY namespace`)
}

// Walk calls fn with every entry in sequence order, then returns the head, all read in one snapshot
// of the database: an append while it walks is left for the next check.
func (a *SQLStore) Walk(ctx context.Context, fn func(Link) error) (int64, string, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if a.db.Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := a.db.BeginTx(ctx, opts)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = tx.Rollback() }()
	var seq int64
	var hash string
	switch err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, "", ErrNoHead
	case err != nil:
		return 0, "", err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+auditColumns+`, prev, hash FROM audit_entries ORDER BY seq`)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var l Link
		e, err := scanEntry(rows, &l.Prev, &l.Hash)
		if err != nil {
			return 0, "", err
		}
		l.Entry = e
		if err := fn(l); err != nil {
			return 0, "", err
		}
	}
	return seq, hash, rows.Err()
}

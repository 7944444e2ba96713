// Package sqldb is the SQL layer the stored features share: opening a database (SQLite embedded, or
// PostgreSQL for several replicas), keeping DSNs' secrets out of messages, the dialect's differences,
// and the one list of schema migrations every feature adds its own to, numbered once for all.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver, "pgx"
	_ "modernc.org/sqlite"             // the SQLite driver, "sqlite"
)

// DB is an open database and its dialect.
type DB struct {
	*sql.DB
	// Postgres tells PostgreSQL from SQLite.
	Postgres bool
}

// Migration is one version of the schema: its number, fixed once released (a database records the
// numbers it ran), the feature whose tables it changes, and its statements, separated by semicolons.
type Migration struct {
	Version int
	Feature string
	SQL     string
}

// PostgresOnly begins a migration that has nothing to do on SQLite (which rewrites a row in place, or
// has no such setting).
const PostgresOnly = "-- PostgreSQL only\n"

// MigrationLock is the PostgreSQL advisory lock held while the schema is migrated; a feature that needs
// a lock of its own across replicas takes one above it.
const MigrationLock = 0x7261795f68697374 // "ray_hist"

// Schema joins the features' migrations into the one list a database is brought to, in the order of
// their numbers, which must run from 1 with no gap and no number twice.
func Schema(features ...[]Migration) ([]Migration, error) {
	var all []Migration
	for _, f := range features {
		all = append(all, f...)
	}
	slices.SortFunc(all, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range all {
		if m.Version != i+1 {
			return nil, fmt.Errorf("schema migration %d (%s): want version %d; the numbers run from 1 with no gap and none twice", m.Version, m.Feature, i+1)
		}
	}
	return all, nil
}

// Open opens the database at dsn: "sqlite:<file>" (embedded) or a PostgreSQL URL ("postgres://…"),
// and brings its schema to the last of migrations.
func Open(ctx context.Context, dsn string, migrations []Migration) (*DB, error) {
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
	} else {
		db.SetMaxOpenConns(8)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	d := &DB{DB: db, Postgres: driver == "pgx"}
	if err := d.migrate(ctx, migrations); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}

func parseDSN(dsn string) (driver, source string, err error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return "", "", errors.New("history DSN sqlite: names no file")
		}
		// The directory is made if missing; temporary tables stay in memory (the root file system of
		// the service's container is read-only).
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", "", fmt.Errorf("history DSN: %w", err)
		}
		return "sqlite", "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)" +
			"&_pragma=temp_store(MEMORY)&_pragma=cache_size(-65536)&_pragma=mmap_size(268435456)", nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "pgx", dsn, nil
	}
	return "", "", fmt.Errorf("history DSN %q: want sqlite:<file> or postgres://…", Redact(dsn))
}

// migrate runs each migration the database has not run, in order, each in a transaction that records
// its number.
func (d *DB) migrate(ctx context.Context, migrations []Migration) error {
	conn, err := d.Conn(ctx)
	if err != nil {
		return fmt.Errorf("history database: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if d.Postgres {
		// Replicas starting at once migrate one after the other.
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, MigrationLock); err != nil {
			return fmt.Errorf("history schema lock: %w", err)
		}
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, MigrationLock)
		}()
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("history schema: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("history schema version: %w", err)
	}
	newest := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close()
			return fmt.Errorf("history schema version: %w", err)
		}
		applied[v], newest = true, max(newest, v)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	known := 0
	for _, m := range migrations {
		known = max(known, m.Version)
	}
	if newest > known {
		return fmt.Errorf("the history's schema is at version %d, newer than this service knows (%d)", newest, known)
	}
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		if err := d.apply(ctx, conn, m); err != nil {
			return err
		}
	}
	return nil
}

// apply runs one migration and records it, in one transaction.
func (d *DB) apply(ctx context.Context, conn *sql.Conn, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	text := m.SQL
	if strings.HasPrefix(text, PostgresOnly) && !d.Postgres {
		text = ""
	}
	for stmt := range strings.SplitSeq(strings.TrimPrefix(text, PostgresOnly), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("history schema version %d (%s): %w", m.Version, m.Feature, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, m.Version, time.Now().Unix()); err != nil {
		return err
	}
	return tx.Commit()
}

// Version is the newest schema version the database ran.
func (d *DB) Version(ctx context.Context) (int, error) {
	var v int
	err := d.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// Strings runs a query of one text column and returns its values.
func (d *DB) Strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := d.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

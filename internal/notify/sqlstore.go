package notify

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"ray-service/internal/sqldb"
)

// noticesMigration keeps the notifications: the notices in the order they happened (numbered under a
// head row that every insert locks and moves, as the audit trail's), the subscriptions with the number
// of the first notice each has still to deliver, and what became of each delivery.
const noticesMigration = `CREATE TABLE notices (
		seq BIGINT PRIMARY KEY,
		at BIGINT NOT NULL,
		type TEXT NOT NULL,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		uid TEXT NOT NULL DEFAULT '',
		labels TEXT NOT NULL DEFAULT '{}',
		data TEXT NOT NULL DEFAULT '{}'
	);
	CREATE INDEX notices_by_namespace ON notices (namespace, seq);
	CREATE TABLE notice_head (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		seq BIGINT NOT NULL
	);
	INSERT INTO notice_head (id, seq) VALUES (1, 0);
	CREATE TABLE subscriptions (
		id TEXT PRIMARY KEY,
		namespace TEXT NOT NULL,
		url TEXT NOT NULL,
		secret TEXT NOT NULL,
		events TEXT NOT NULL,
		kinds TEXT NOT NULL,
		selector TEXT NOT NULL,
		creator TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		next_seq BIGINT NOT NULL
	);
	CREATE INDEX subscriptions_by_namespace ON subscriptions (namespace, created_at);
	CREATE TABLE deliveries (
		subscription_id TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
		seq BIGINT NOT NULL,
		type TEXT NOT NULL,
		kind TEXT NOT NULL,
		name TEXT NOT NULL,
		status TEXT NOT NULL,
		attempts INTEGER NOT NULL,
		last_error TEXT NOT NULL,
		first_at BIGINT NOT NULL,
		last_at BIGINT NOT NULL,
		PRIMARY KEY (subscription_id, seq)
	)`

// creatorGroupsMigration keeps each subscription's creator's groups: with its name, who its deliveries
// are authorized as. A subscription made before has none: authorized as its creator's name alone.
const creatorGroupsMigration = `ALTER TABLE subscriptions ADD COLUMN creator_groups TEXT NOT NULL DEFAULT '[]'`

// Migrations are the notifications' schema migrations, in the one list of the service's database.
func Migrations() []sqldb.Migration {
	return []sqldb.Migration{{Version: 4, Feature: "notifications", SQL: noticesMigration},
		{Version: 19, Feature: "notifications", SQL: creatorGroupsMigration}}
}

// SQLStore keeps the notices, the subscriptions and their deliveries in the service's database (Store),
// so that a replica that takes over, or one restarted, delivers from where the last stopped.
type SQLStore struct {
	db *sqldb.DB
}

// NewSQLStore is the notifications' store in db, whose schema has their migrations.
func NewSQLStore(db *sqldb.DB) *SQLStore { return &SQLStore{db: db} }

// maxErrorBytes bounds a delivery's last error as kept.
const maxErrorBytes = 1024

// ErrNoSubscription is the error of a subscription that is not there.
var ErrNoSubscription = errors.New("no such subscription")

// AddNotices numbers the notices after the last and stores them, in one transaction.
func (s *SQLStore) AddNotices(ctx context.Context, ns []Notice) error {
	if len(ns) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, n := range ns {
		if err := tx.QueryRowContext(ctx, `UPDATE notice_head SET seq = seq + 1 WHERE id = 1 RETURNING seq`).Scan(&n.Seq); err != nil {
			return err
		}
		labels, err := json.Marshal(n.Labels)
		if err != nil {
			return err
		}
		data, err := json.Marshal(n.Data)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO notices (seq, at, type, kind, namespace, name, uid, labels, data)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, n.Seq, n.Time.UnixNano(), n.Type, n.Kind, n.Namespace, n.Name, n.UID,
			string(labels), string(data)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// NoticesFrom returns up to limit notices of ns numbered from on, in order.
func (s *SQLStore) NoticesFrom(ctx context.Context, ns string, from int64, limit int) ([]Notice, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, at, type, kind, name, uid, labels, data FROM notices
		WHERE namespace = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, ns, from, limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []Notice
	for rows.Next() {
		n := Notice{Namespace: ns}
		var at int64
		var labels, data string
		if err := rows.Scan(&n.Seq, &at, &n.Type, &n.Kind, &n.Name, &n.UID, &labels, &data); err != nil {
			return nil, err
		}
		n.Time = time.Unix(0, at).UTC()
		if err := json.Unmarshal([]byte(labels), &n.Labels); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(data), &n.Data); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// CreateSubscription stores sub, which is delivered the notices made from now on.
func (s *SQLStore) CreateSubscription(ctx context.Context, sub Subscription) (Subscription, error) {
	events, err := json.Marshal(sub.Events)
	if err != nil {
		return sub, err
	}
	kinds, err := json.Marshal(sub.Kinds)
	if err != nil {
		return sub, err
	}
	groups, err := json.Marshal(append([]string{}, sub.CreatorGroups...))
	if err != nil {
		return sub, err
	}
	if err := s.db.QueryRowContext(ctx, `INSERT INTO subscriptions (id, namespace, url, secret, events, kinds, selector, creator, created_at, next_seq, creator_groups)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, (SELECT seq + 1 FROM notice_head WHERE id = 1), $10) RETURNING next_seq`,
		sub.ID, sub.Namespace, sub.URL, sub.Secret, string(events), string(kinds), sub.Selector, sub.Creator,
		sub.CreatedAt.UnixNano(), string(groups)).Scan(&sub.Next); err != nil {
		return sub, err
	}
	return sub, nil
}

const subscriptionColumns = `id, namespace, url, secret, events, kinds, selector, creator, created_at, next_seq, creator_groups`

func scanSubscriptions(rows *sql.Rows) ([]Subscription, error) {
	defer func() { _ = rows.Close() }()
	out := []Subscription{}
	for rows.Next() {
		var sub Subscription
		var events, kinds, groups string
		var at int64
		if err := rows.Scan(&sub.ID, &sub.Namespace, &sub.URL, &sub.Secret, &events, &kinds, &sub.Selector, &sub.Creator, &at, &sub.Next, &groups); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(groups), &sub.CreatorGroups); err != nil {
			return nil, err
		}
		sub.CreatedAt = time.Unix(0, at).UTC()
		if err := json.Unmarshal([]byte(events), &sub.Events); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(kinds), &sub.Kinds); err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, rows.Err()
}

// AllSubscriptions returns every subscription, with its secret.
func (s *SQLStore) AllSubscriptions(ctx context.Context) ([]Subscription, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	return scanSubscriptions(rows)
}

// Subscriptions returns ns's subscriptions, oldest first, without their secrets.
func (s *SQLStore) Subscriptions(ctx context.Context, ns string) ([]Subscription, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions WHERE namespace = $1 ORDER BY created_at, id`, ns)
	if err != nil {
		return nil, err
	}
	subs, err := scanSubscriptions(rows)
	for i := range subs {
		subs[i].Secret = ""
	}
	return subs, err
}

// Subscription returns ns's subscription id, without its secret: ErrNoSubscription where it has none.
func (s *SQLStore) Subscription(ctx context.Context, ns, id string) (*Subscription, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions WHERE namespace = $1 AND id = $2`, ns, id)
	if err != nil {
		return nil, err
	}
	subs, err := scanSubscriptions(rows)
	if err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, ErrNoSubscription
	}
	subs[0].Secret = ""
	return &subs[0], nil
}

// DeleteSubscription deletes ns's subscription id and its deliveries: ErrNoSubscription where it has none.
func (s *SQLStore) DeleteSubscription(ctx context.Context, ns, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM deliveries WHERE subscription_id = $1 AND EXISTS
		(SELECT 1 FROM subscriptions WHERE id = $1 AND namespace = $2)`, id, ns); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM subscriptions WHERE id = $1 AND namespace = $2`, id, ns)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmpErr(err, ErrNoSubscription)
	}
	return tx.Commit()
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// Advance records that subscription id's notices before next are done with.
func (s *SQLStore) Advance(ctx context.Context, id string, next int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE subscriptions SET next_seq = $1 WHERE id = $2 AND next_seq < $1`, next, id)
	return err
}

// RecordDelivery records a try of a delivery: the first, or one more of the same notice, counted after
// those before (of this replica or another, before a restart). It returns the delivery as recorded.
func (s *SQLStore) RecordDelivery(ctx context.Context, id string, d Delivery) (Delivery, error) {
	msg := d.LastError
	if len(msg) > maxErrorBytes {
		msg = msg[:maxErrorBytes]
	}
	var first int64
	err := s.db.QueryRowContext(ctx, `INSERT INTO deliveries (subscription_id, seq, type, kind, name, status, attempts, last_error, first_at, last_at)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9)
		ON CONFLICT (subscription_id, seq) DO UPDATE SET status = excluded.status, attempts = deliveries.attempts + 1,
			last_error = excluded.last_error, last_at = excluded.last_at
		RETURNING attempts, first_at`,
		id, d.Seq, d.Type, d.Kind, d.Name, d.Status, msg, d.FirstAt.UnixNano(), d.LastAt.UnixNano()).Scan(&d.Attempts, &first)
	d.FirstAt = time.Unix(0, first).UTC()
	return d, err
}

// Deliveries returns a page of subscription id's deliveries, newest first, and how many it has.
func (s *SQLStore) Deliveries(ctx context.Context, id string, page, pageSize int) ([]Delivery, int, error) {
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries WHERE subscription_id = $1`, id).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, type, kind, name, status, attempts, last_error, first_at, last_at FROM deliveries
		WHERE subscription_id = $1 ORDER BY seq DESC LIMIT $2 OFFSET $3`, id, pageSize, (page-1)*pageSize)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = rows.Close() }()
	out := []Delivery{}
	for rows.Next() {
		var d Delivery
		var first, last int64
		if err := rows.Scan(&d.Seq, &d.Type, &d.Kind, &d.Name, &d.Status, &d.Attempts, &d.LastError, &first, &last); err != nil {
			return nil, 0, err
		}
		d.FirstAt, d.LastAt = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, d)
	}
	return out, total, rows.Err()
}

// PruneNotices removes the notices every subscription of their namespace has passed that are older than before, and the
// deliveries last tried before deliveredBefore; it returns how many notices went.
func (s *SQLStore) PruneNotices(ctx context.Context, before, deliveredBefore time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM notices WHERE at < $1
		AND seq < COALESCE((SELECT MIN(s.next_seq) FROM subscriptions s WHERE s.namespace = notices.namespace),
			(SELECT seq + 1 FROM notice_head WHERE id = 1))`, before.UnixNano())
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM deliveries WHERE last_at < $1`, deliveredBefore.UnixNano()); err != nil {
		return n, err
	}
	return n, nil
}

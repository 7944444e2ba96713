// Package notifytest is the contract of the notifications' SQL store: what it must do on SQLite and on
// PostgreSQL alike.
package notifytest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/notify"
	"ray-service/internal/sqldb"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// NewDSN makes a database of its own for a test and returns its DSN.
type NewDSN func(t *testing.T) string

// open is the notifications' store in the database at dsn, and that database.
func open(t *testing.T, dsn string) (*notify.SQLStore, *sqldb.DB) {
	t.Helper()
	db, err := sqldb.Open(t.Context(), dsn, notify.Migrations())
	require.NoError(t, err)
	return notify.NewSQLStore(db), db
}

// Run runs the contract, with a database of its own.
func Run(t *testing.T, newDSN NewDSN) {
	t.Run("notifications", func(t *testing.T) { notifications(t, newDSN(t)) })
}

// Notices are numbered in order; a subscription is delivered those made after it, of its namespace;
// its place and its deliveries survive a reopening; deleting it takes its deliveries.
func notifications(t *testing.T, dsn string) {
	s, db := open(t, dsn)
	ctx := t.Context()
	notice := func(ns, name, typ string) notify.Notice {
		return notify.Notice{Type: typ, Kind: "RayJob", Namespace: ns, Name: name, UID: "u-" + name, Time: t0,
			Labels: map[string]string{"team": "a"}, Data: map[string]any{"status": "Succeeded"}}
	}
	require.NoError(t, s.AddNotices(ctx, []notify.Notice{notice("a", "before", "job.succeeded")}))
	sub, err := s.CreateSubscription(ctx, notify.Subscription{ID: "3f1c9a4e-0b7d-4c1e-9a57-2d8e6f0b1c3a", Namespace: "a",
		URL: "https://hooks.example/x", Secret: "s3cret", Events: []string{"job.failed"}, Kinds: []string{}, Creator: "alice",
		CreatorGroups: []string{"team-a", "system:authenticated"}, CreatedAt: t0})
	require.NoError(t, err)
	assert.Equal(t, int64(2), sub.Next, "delivered what is made from now on")
	require.NoError(t, s.AddNotices(ctx, []notify.Notice{notice("a", "one", "job.failed"), notice("b", "other", "job.failed"),
		notice("a", "two", "job.succeeded")}))
	got, err := s.NoticesFrom(ctx, "a", sub.Next, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []int64{2, 4}, []int64{got[0].Seq, got[1].Seq})
	assert.Equal(t, "one", got[0].Name)
	assert.Equal(t, map[string]string{"team": "a"}, got[0].Labels)
	assert.Equal(t, "Succeeded", got[0].Data["status"])
	assert.Equal(t, t0, got[0].Time)

	d, err := s.RecordDelivery(ctx, sub.ID, notify.Delivery{Seq: 2, Type: "job.failed", Kind: "RayJob", Name: "one",
		Status: notify.Delivering, LastError: "refused", FirstAt: t0, LastAt: t0})
	require.NoError(t, err)
	assert.Equal(t, 1, d.Attempts)
	// A try made later (after a restart, say) counts after the first and keeps its time.
	d, err = s.RecordDelivery(ctx, sub.ID, notify.Delivery{Seq: 2, Type: "job.failed", Kind: "RayJob", Name: "one",
		Status: notify.Delivered, FirstAt: t0.Add(time.Minute), LastAt: t0.Add(time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, 2, d.Attempts)
	assert.Equal(t, t0, d.FirstAt)
	require.NoError(t, s.Advance(ctx, sub.ID, 3))
	require.NoError(t, s.Advance(ctx, sub.ID, 2), "never backwards")
	require.NoError(t, db.Close())

	s, db = open(t, dsn)
	defer func() { _ = db.Close() }()
	all, err := s.AllSubscriptions(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, int64(3), all[0].Next)
	assert.Equal(t, "s3cret", all[0].Secret, "the deliverer signs with it")
	assert.Equal(t, []string{"team-a", "system:authenticated"}, all[0].CreatorGroups, "the deliveries are authorized as the creator")
	listed, err := s.Subscriptions(ctx, "a")
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Empty(t, listed[0].Secret, "a list never shows it")
	assert.Equal(t, []string{"job.failed"}, listed[0].Events)
	ds, total, err := s.Deliveries(ctx, sub.ID, 1, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, total)
	assert.Equal(t, notify.Delivered, ds[0].Status)
	assert.Equal(t, 2, ds[0].Attempts)
	pruned, err := s.PruneNotices(ctx, t0.Add(time.Hour), t0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), pruned, "a's before its subscription's place (1 and 2), and b's, which none wants (3)")
	left, err := s.NoticesFrom(ctx, "a", 0, 10)
	require.NoError(t, err)
	assert.Len(t, left, 1)
	_, err = s.Subscription(ctx, "b", sub.ID)
	require.ErrorIs(t, err, notify.ErrNoSubscription, "another namespace's")
	require.ErrorIs(t, s.DeleteSubscription(ctx, "b", sub.ID), notify.ErrNoSubscription)
	require.NoError(t, s.DeleteSubscription(ctx, "a", sub.ID))
	_, total, err = s.Deliveries(ctx, sub.ID, 1, 10)
	require.NoError(t, err)
	assert.Zero(t, total)
}

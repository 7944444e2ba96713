package notify

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"ray-service/internal/auth"
)

// Store keeps the subscriptions, the notices and the deliveries (history.Store): in the history's
// database, so that a replica that takes over, or one restarted, delivers from where the last stopped.
type Store interface {
	AllSubscriptions(ctx context.Context) ([]Subscription, error)
	// NoticesFrom returns up to limit notices of ns numbered from on, in order.
	NoticesFrom(ctx context.Context, ns string, from int64, limit int) ([]Notice, error)
	// Advance records that the subscription's notices before next are done with.
	Advance(ctx context.Context, id string, next int64) error
	// RecordDelivery records a try, counted after those before of the same notice, and returns the
	// delivery as recorded (its attempts and first try).
	RecordDelivery(ctx context.Context, id string, d Delivery) (Delivery, error)
}

// Deliverer delivers the notices to the subscriptions that want them, while this replica leads: one
// worker per subscription, in the notices' order (so in order per object), each retried with backoff
// for RetryFor, and marked done only once delivered or given up (at least once).
type Deliverer struct {
	Store  Store
	Sender *Sender
	// Leading tells whether this replica delivers (the history's Lease holder); nil: it does.
	Leading func() bool
	// RetryFor bounds how long a notice is tried; MaxBackoff the wait between two tries.
	RetryFor, MaxBackoff time.Duration
	// Poll is how often the subscriptions and new notices are looked for.
	Poll time.Duration
	Log  *zap.Logger
	// Access asks whether a subscription's creator may still read each notice (Rights) before it is
	// sent, as the object streams check their callers' rights again; Kinds names each notice's kind's
	// group and resource. Nil Access: not asked (tests of the delivery alone).
	Access Access
	Kinds  map[string]auth.Attributes
	// Prune, when set, removes the notices every subscription has passed and that are older than a day,
	// and the deliveries recorded before KeepDeliveries (0: kept always): at the first poll this replica
	// leads, and every hour after while it does.
	Prune          func(ctx context.Context, before, deliveredBefore time.Time) (int64, error)
	KeepDeliveries time.Duration

	// delivered, failedTries and givenUp count the notices delivered, the tries that failed and the
	// notices given up, for the service's metrics.
	delivered, failedTries, givenUp atomic.Int64
}

// Delivered is how many notices this replica delivered.
func (d *Deliverer) Delivered() int64 { return d.delivered.Load() }

// FailedTries is how many of this replica's tries to deliver a notice failed (refused, unreachable,
// answered with an error, or no longer allowed to be read by the subscription's creator).
func (d *Deliverer) FailedTries() int64 { return d.failedTries.Load() }

// GivenUp is how many notices this replica gave up: tried for RetryFor, refused, or no longer allowed.
func (d *Deliverer) GivenUp() int64 { return d.givenUp.Load() }

// pruneEvery is how often the notices and deliveries past their retention are removed.
const pruneEvery = time.Hour

// prune removes what is past its retention.
func (d *Deliverer) prune(ctx context.Context, now time.Time) {
	deliveredBefore := time.Unix(0, 0)
	if d.KeepDeliveries > 0 {
		deliveredBefore = now.Add(-d.KeepDeliveries)
	}
	if _, err := d.Prune(ctx, now.Add(-24*time.Hour), deliveredBefore); err != nil && ctx.Err() == nil {
		d.Log.Warn("notifications: removing the notices delivered", zap.Error(err))
	}
}

// batch is how many notices a worker reads at once.
const batch = 100

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	workers := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range workers {
			cancel()
		}
	}()
	t := time.NewTicker(d.Poll)
	defer t.Stop()
	var pruned time.Time
	for {
		want := map[string]bool{}
		leading := d.Leading == nil || d.Leading()
		if !leading {
			pruned = time.Time{} // pruned again as soon as this replica leads again
		} else if now := time.Now(); d.Prune != nil && now.Sub(pruned) >= pruneEvery {
			d.prune(ctx, now)
			pruned = now
		}
		if leading {
			subs, err := d.Store.AllSubscriptions(ctx)
			if err != nil && ctx.Err() == nil {
				d.Log.Warn("notifications: reading the subscriptions", zap.Error(err))
				for id := range workers { // as they were
					want[id] = true
				}
			}
			for _, s := range subs {
				want[s.ID] = true
				if _, ok := workers[s.ID]; !ok {
					wctx, cancel := context.WithCancel(ctx)
					workers[s.ID] = cancel
					go d.work(wctx, s)
				}
			}
		}
		for id, cancel := range workers {
			if !want[id] {
				cancel()
				delete(workers, id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// work delivers a subscription's notices until ctx ends.
func (d *Deliverer) work(ctx context.Context, s Subscription) {
	log := d.Log.With(zap.String("subscription", s.ID), zap.String("namespace", s.Namespace))
	next := s.Next
	for ctx.Err() == nil {
		ns, err := d.Store.NoticesFrom(ctx, s.Namespace, next, batch)
		if err != nil && ctx.Err() == nil {
			log.Warn("notifications: reading the notices", zap.Error(err))
		}
		for _, n := range ns {
			if s.Wants(&n) {
				if !d.deliver(ctx, log, &s, &n) {
					return
				}
				if err := d.Store.Advance(ctx, s.ID, n.Seq+1); err != nil && ctx.Err() == nil {
					log.Warn("notifications: recording a delivery done", zap.Error(err))
				}
			}
			next = n.Seq + 1
		}
		if len(ns) > 0 {
			if err := d.Store.Advance(ctx, s.ID, next); err != nil && ctx.Err() == nil {
				log.Warn("notifications: recording the notices passed", zap.Error(err))
			}
		}
		if len(ns) < batch {
			sleep(ctx, d.Poll)
		}
	}
}

// deliver sends n until it is delivered or given up, recording each try; false when ctx ended first.
// The time it is tried for counts from its first try, recorded, whichever replica made it.
func (d *Deliverer) deliver(ctx context.Context, log *zap.Logger, s *Subscription, n *Notice) bool {
	first := time.Now().UTC()
	for attempt := 1; ; attempt++ {
		forbidden, err := d.mayRead(ctx, s, n)
		if err == nil && !forbidden {
			err = d.Sender.Send(ctx, Target{URL: s.URL, Secret: s.Secret}, *n)
		}
		if ctx.Err() != nil {
			return false
		}
		dl := Delivery{Seq: n.Seq, Type: n.Type, Kind: n.Kind, Name: n.Name, Status: Delivered, Attempts: attempt,
			FirstAt: first, LastAt: time.Now().UTC()}
		var refused *RefusedError
		var lost *lostRights
		if err != nil {
			dl.LastError = err.Error()
			dl.Status = Delivering
			if errors.As(err, &refused) || errors.As(err, &lost) || time.Since(first) >= d.RetryFor {
				dl.Status = Failed
			}
			d.failedTries.Add(1)
			log.Debug("notifications: a try failed", zap.Int64("seq", n.Seq), zap.Error(errors.Unwrap(err)))
		}
		recorded, rerr := d.Store.RecordDelivery(ctx, s.ID, dl)
		switch {
		case rerr != nil && ctx.Err() == nil:
			log.Warn("notifications: recording a delivery", zap.Error(rerr))
		case rerr == nil:
			dl.Attempts, first = recorded.Attempts, recorded.FirstAt
			if dl.Status == Delivering && time.Since(first) >= d.RetryFor {
				// Tried since before a restart: given up at the next try's record.
				dl.Status = Failed
			}
		}
		switch dl.Status {
		case Delivered:
			d.delivered.Add(1)
			return true
		case Failed:
			d.givenUp.Add(1)
			log.Warn("notifications: a notice given up", zap.Int64("seq", n.Seq), zap.String("type", n.Type), zap.Int("attempts", dl.Attempts),
				zap.String("lastError", dl.LastError))
			return true
		}
		if !sleep(ctx, min(Backoff(attempt), d.MaxBackoff)) {
			return false
		}
	}
}

// lostRights is a notice not sent: the subscription's creator may no longer read it.
type lostRights struct{ msg string }

func (e *lostRights) Error() string { return e.msg }

// mayRead asks whether s's creator may still read n (Rights): forbidden with an error that says so
// (given up, not retried), or an error where it could not be asked (retried).
func (d *Deliverer) mayRead(ctx context.Context, s *Subscription, n *Notice) (forbidden bool, err error) {
	if d.Access == nil {
		return false, nil
	}
	kind, ok := d.Kinds[n.Kind]
	if !ok {
		return true, &lostRights{msg: fmt.Sprintf("not sent: the kind %s is not one the service serves", n.Kind)}
	}
	id := auth.Identity{Name: s.Creator, Groups: s.CreatorGroups}
	for _, a := range Rights(s.Namespace, []auth.Attributes{kind}) {
		allowed, err := d.Access.AllowedAs(ctx, id, a)
		if err != nil {
			return false, &Failure{Shown: "not sent: the rights of the subscription's creator could not be checked", cause: err}
		}
		if !allowed {
			return true, &lostRights{msg: fmt.Sprintf("not sent: the subscription's creator %s may no longer %s %s in namespace %q",
				s.Creator, a.Verb, a.Resource, s.Namespace)}
		}
	}
	return false, nil
}

// sleep waits for d or ctx's end; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

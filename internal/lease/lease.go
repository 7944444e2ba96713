// Package lease holds the one Lease the service's replicas compete for. Its holder alone does what must
// be done once for all of them: it writes the history, credits the utilization, acts on the idle
// policies and delivers the notifications. Each of those tells the Lease what it does as this replica
// takes the lead and as it loses it, whether or not the others are on.
package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Timings are the Lease's: how long a holder's claim lasts unrenewed, how long it tries to renew before
// it gives the lead up, and how often a replica tries to take or renew it.
type Timings struct {
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// Hooks are what a feature does as this replica takes the lead and as it loses it. Lead runs in a
// goroutine of its own with a context that ends when the lead is lost, and must return soon after;
// Follow runs once it is lost (or given up as the service stops), after that context has ended and every
// Lead of that lead has returned, so that nothing a Lead does lands after its Follow. Either may be nil.
type Hooks struct {
	// Name names the feature in logs.
	Name   string
	Lead   func(ctx context.Context)
	Follow func()
}

// Lease elects the replica that acts for all.
type Lease struct {
	Lock resourcelock.Interface
	Timings
	Log *zap.Logger

	mu    sync.Mutex
	hooks []Hooks
	// turn orders lead and follow: the elector starts a lead in a goroutine and may end it before that
	// goroutine runs.
	turn    sync.Mutex
	leading atomic.Bool
	leads   sync.WaitGroup
	// term counts the Leads of the lead now (or last) held, which its follow waits for; under turn.
	term sync.WaitGroup
}

// Add registers a feature's hooks; call it before Run.
func (l *Lease) Add(h Hooks) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = append(l.hooks, h)
}

// Leading tells whether this replica holds the Lease now.
func (l *Lease) Leading() bool { return l.leading.Load() }

// Run competes for the Lease until ctx ends, then gives it up if held (so that another replica takes
// over at once rather than when it expires) and returns once every hook has returned.
func (l *Lease) Run(ctx context.Context) {
	l.mu.Lock()
	hooks := append([]Hooks(nil), l.hooks...)
	l.mu.Unlock()
	defer l.leads.Wait()
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: l.Lock, LeaseDuration: l.Duration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod,
			ReleaseOnCancel: true, Name: "ray-service",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { l.lead(lctx, hooks) },
				OnStoppedLeading: func() { l.follow(hooks) },
			},
		})
		if err != nil {
			l.Log.Error("the Lease: leader election", zap.Error(err))
			return
		}
		le.Run(ctx)
	}
}

// lead starts each hook's Lead with the lead's context.
func (l *Lease) lead(ctx context.Context, hooks []Hooks) {
	l.turn.Lock()
	defer l.turn.Unlock()
	if ctx.Err() != nil {
		return // lost before it began: the elector ends a lead's context before it calls follow
	}
	l.leading.Store(true)
	var leads []string
	for _, h := range hooks {
		if h.Lead == nil {
			continue
		}
		leads = append(leads, h.Name)
		l.term.Add(1)
		l.leads.Go(func() {
			defer l.term.Done()
			h.Lead(ctx)
		})
	}
	l.Log.Info("the Lease: this replica acts for all", zap.String("lease", l.Lock.Describe()), zap.Strings("leading", leads))
}

// follow tells each hook the lead is lost, once the Leads it started have returned. The leader elector
// calls it after the lead's context has ended (and also when this replica never led, as Run returns): a
// Lead still at work then (the history's, reading what is recorded, then taking over) would otherwise
// finish after its Follow and leave this replica acting beside the Lease's next holder.
func (l *Lease) follow(hooks []Hooks) {
	l.turn.Lock()
	defer l.turn.Unlock()
	if !l.leading.Swap(false) {
		return
	}
	l.term.Wait()
	for _, h := range hooks {
		if h.Follow != nil {
			h.Follow()
		}
	}
	l.Log.Info("the Lease: this replica no longer acts for all")
}

package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func hooksCounting(leads, follows *atomic.Int32) []Hooks {
	return []Hooks{{Name: "a", Lead: func(context.Context) { leads.Add(1) }, Follow: func() { follows.Add(1) }},
		{Name: "no hooks"}}
}

// The elector starts a lead in a goroutine and may end it (and call follow) before that goroutine runs:
// the lead then starts nothing, and this replica does not believe it leads.
func TestLeadThatEndedBeforeItBeganStartsNothing(t *testing.T) {
	var leads, follows atomic.Int32
	l := &Lease{Lock: &resourcelock.LeaseLock{}, Log: zap.NewNop()}
	hooks := hooksCounting(&leads, &follows)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.follow(hooks)
	l.lead(ctx, hooks)
	l.leads.Wait()
	assert.False(t, l.Leading())
	assert.Zero(t, leads.Load())
	assert.Zero(t, follows.Load(), "no follow without a lead")
}

// A lead starts every hook's Lead and a follow calls every Follow, once each.
func TestLeadThenFollow(t *testing.T) {
	var leads, follows atomic.Int32
	l := &Lease{Lock: &resourcelock.LeaseLock{}, Log: zap.NewNop()}
	hooks := hooksCounting(&leads, &follows)
	ctx, cancel := context.WithCancel(context.Background())
	l.lead(ctx, hooks)
	l.leads.Wait()
	assert.True(t, l.Leading())
	assert.Equal(t, int32(1), leads.Load())
	cancel()
	l.follow(hooks)
	l.follow(hooks) // the elector's deferred call as Run returns
	assert.False(t, l.Leading())
	assert.Equal(t, int32(1), follows.Load())
}

// A lead lost is followed only once every Lead it started has returned: a Lead still at work when its
// context ended (the history's, reading what is recorded) would otherwise finish after its Follow and
// leave this replica acting for all beside the new holder.
func TestFollowWaitsForTheLeadsToReturn(t *testing.T) {
	gate := make(chan struct{})
	var returned, followedFirst atomic.Bool
	hooks := []Hooks{{Name: "slow",
		Lead:   func(ctx context.Context) { <-ctx.Done(); <-gate; returned.Store(true) },
		Follow: func() { followedFirst.Store(!returned.Load()) }}}
	l := &Lease{Lock: &resourcelock.LeaseLock{}, Log: zap.NewNop()}
	ctx, cancel := context.WithCancel(context.Background())
	l.lead(ctx, hooks)
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.follow(hooks)
	}()
	assert.Never(t, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, 200*time.Millisecond, 10*time.Millisecond, "followed while a Lead was at work")
	close(gate)
	<-done
	l.leads.Wait()
	assert.False(t, followedFirst.Load(), "the Follow ran before the Lead returned")
	assert.False(t, l.Leading())
}

package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The checker walks the chain at once and then periodically: intact, then broken once an entry is
// changed outside the service (logged with where and how).
func TestCheckerFindsABrokenChain(t *testing.T) {
	store := &memStore{}
	tr, _ := trail(store)
	for _, user := range []string{"alice", "bob", "carol"} {
		tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: user, User: user, RequestID: "r"})
	}
	tr.Wait()
	core, logs := observer.New(zap.WarnLevel)
	c := &Checker{Trail: tr, Every: time.Hour, Log: zap.New(core)}
	assert.Nil(t, c.Last(), "no verdict before the first walk")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return c.Last() != nil }, 5*time.Second, 10*time.Millisecond, "a walk at once")
	cancel()
	<-done
	assert.Equal(t, Verification{Intact: true, Entries: 3, Head: 3}, *c.Last())

	store.mu.Lock()
	store.links[1].User = "mallory"
	store.mu.Unlock()
	c.check(t.Context())
	v := c.Last()
	assert.False(t, v.Intact)
	assert.Equal(t, int64(2), v.BrokenAt)
	require.Equal(t, 1, logs.FilterMessage("audit: the trail's chain is broken").Len())
	assert.Equal(t, "entry 2 is not as it was appended", logs.All()[0].ContextMap()["problem"])

}

// Attack: someone who can write the database changes an entry, then makes the trail unwalkable (a row
// that cannot be read): every walk fails from then on. The verdict must not stay the last intact one,
// and the failed walks are counted, so that an alert says the trail can no longer be verified.
func TestAttackUnwalkableTrailKeepsIntact(t *testing.T) {
	store := &memStore{}
	tr, _ := trail(store)
	tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: "a", User: "alice", RequestID: "r"})
	tr.Wait()
	c := &Checker{Trail: tr, Every: time.Hour, Log: zap.NewNop()}
	c.check(t.Context())
	require.True(t, c.Last().Intact)

	store.mu.Lock()
	store.links[0].User = "mallory"
	store.err = errors.New("sql: Scan error on column index 1, name \"at\"")
	store.mu.Unlock()
	c.check(t.Context())
	assert.Nil(t, c.Last(), "a trail that cannot be walked has no verdict, not the last intact one")
	assert.Equal(t, int64(1), c.WalkFailures())
}

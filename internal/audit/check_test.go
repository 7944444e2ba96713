package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The checker walks the chain at once and then periodically: intact, then broken once an entry is
// changed outside the service (logged with where and how), and a walk that fails leaves the last verdict.
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

	off := &Checker{Trail: &Trail{}, Every: time.Hour, Log: zap.New(core)}
	off.last = v
	off.check(t.Context())
	assert.Equal(t, v, off.Last(), "a walk that fails keeps the last verdict")
}

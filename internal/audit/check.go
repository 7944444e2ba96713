package audit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Checker verifies the trail's chain every Every (Trail.Verify, the walk GET /audit/verify makes),
// so that a trail changed, cut or added to outside the service is found without anyone asking: its
// last verdict is what the service's metrics say (ray_service_audit_chain_intact) and what an alert
// reads. A walk that fails (the store unreachable, or a row it cannot read, which someone who writes
// the database can make) leaves no verdict and is counted: an intact verdict kept from before would
// hide a trail changed and then made unreadable.
type Checker struct {
	Trail *Trail
	Every time.Duration
	Log   *zap.Logger

	mu       sync.Mutex
	last     *Verification
	failures atomic.Int64
}

// Last is the last verdict of a walk that ended: nil before the first.
func (c *Checker) Last() *Verification {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return nil
	}
	v := *c.last
	return &v
}

// Run checks the chain at once, then every Every, until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	t := time.NewTicker(c.Every)
	defer t.Stop()
	for {
		c.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Checker) check(ctx context.Context) {
	v, err := c.Trail.Verify(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.Log.Warn("audit: the trail's chain could not be walked", zap.Error(err))
		c.failures.Add(1)
		c.mu.Lock()
		c.last = nil
		c.mu.Unlock()
		return
	}
	if !v.Intact {
		c.Log.Error("audit: the trail's chain is broken", zap.Int64("brokenAt", v.BrokenAt), zap.String("problem", v.Problem),
			zap.Int64("entries", v.Entries), zap.Int64("head", v.Head))
	}
	c.mu.Lock()
	c.last = &v
	c.mu.Unlock()
}

// WalkFailures counts the walks that failed (the store unreachable, or a row it cannot read).
func (c *Checker) WalkFailures() int64 { return c.failures.Load() }

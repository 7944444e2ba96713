package audit

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Checker verifies the trail's chain every Every (Trail.Verify, the walk GET /audit/verify makes),
// so that a trail changed, cut or added to outside the service is found without anyone asking: its
// last verdict is what the service's metrics say (ray_service_audit_chain_intact) and what an alert
// reads. A walk that fails (the store unreachable) leaves the last verdict as it was.
type Checker struct {
	Trail *Trail
	Every time.Duration
	Log   *zap.Logger

	mu   sync.Mutex
	last *Verification
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
		if ctx.Err() == nil {
			c.Log.Warn("audit: verifying the trail's chain", zap.Error(err))
		}
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

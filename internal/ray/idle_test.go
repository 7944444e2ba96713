package ray

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A running, healthy object whose cluster idles says so in its health, since when and what it holds; a
// problem it has is not hidden by it.
func TestWithIdle(t *testing.T) {
	today := time.Now().UTC().Truncate(time.Minute)
	idle := &Idle{Since: today, Holding: Resources{CPU: 4, GPU: 8}}
	base := &Summary{Type: TypeInstance, Status: StatusRunning, Health: Health{State: HealthHealthy}}
	s := WithIdle(base, idle)
	assert.Same(t, idle, s.Idle)
	assert.Equal(t, ReasonIdle, s.Health.Reason)
	assert.Equal(t, "idle since "+today.Format("15:04")+" UTC, holding 8 GPUs", s.Health.Message)
	assert.Nil(t, base.Idle, "the base is not changed")

	degraded := &Summary{Type: TypeInstance, Status: StatusRunning, Health: Health{State: HealthDegraded, Reason: "Unschedulable"}}
	assert.Equal(t, "Unschedulable", WithIdle(degraded, idle).Health.Reason, "a problem comes first")
	assert.Same(t, base, WithIdle(base, nil))

	long := &Idle{Since: time.Date(2026, 11, 30, 9, 5, 0, 0, time.UTC), Holding: Resources{CPU: 2, GPU: 1, NPU: 2}}
	assert.Equal(t, "idle since 2026-11-30 09:05 UTC, holding 1 GPU and 2 NPUs", IdleMessage(long))
	assert.Equal(t, "idle since 2026-11-30 09:05 UTC, holding 2.5 CPUs", IdleMessage(&Idle{Since: long.Since, Holding: Resources{CPU: 2.5}}))
}

package idle

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

var settings = Settings{Window: 30 * time.Minute, Interval: time.Minute, Step: time.Minute, Lookback: 24 * time.Hour,
	CPUShare: 0.05, AcceleratorPercent: 5}

// What makes a running cluster idle, and each thing that keeps it from being so.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	sum := &ray.Summary{CreatedAt: now.Add(-2 * time.Hour), Requested: ray.Resources{CPU: 8, GPU: 2}}
	quiet := ClusterWork{RaySeen: 1, CPU: new(0.2), GPU: new(1.0)}
	ev, ok := Judge(settings, sum, false, &quiet, now)
	require.True(t, ok)
	assert.Equal(t, ray.IdleEvidence{Window: "30m0s", CPU: new(0.2), GPUUtilization: new(1.0)}, ev)

	used := now.Add(-10 * time.Minute)
	young := *sum
	young.CreatedAt = now.Add(-10 * time.Minute)
	noNPU := *sum
	noNPU.Requested.NPU = 1
	for what, tc := range map[string]struct {
		sum        *ray.Summary
		jobRunning bool
		w          *ClusterWork
	}{
		"a RayJob's job runs on it":      {sum, true, &quiet},
		"Prometheus knows nothing of it": {sum, false, nil},
		"younger than the window":        {&young, false, &quiet},
		"Ray's series are missing":       {sum, false, &ClusterWork{RaySeen: 0.5, CPU: new(0.2)}},
		"Ray used it in the window":      {sum, false, &ClusterWork{RaySeen: 1, RayLastUsed: &used, CPU: new(0.2)}},
		"its CPU is not measured":        {sum, false, &ClusterWork{RaySeen: 1}},
		"its CPU is busy":                {sum, false, &ClusterWork{RaySeen: 1, CPU: new(0.5)}},
		"its GPU is busy":                {sum, false, &ClusterWork{RaySeen: 1, CPU: new(0.2), GPU: new(40.0)}},
		"its NPU is busy":                {&noNPU, false, &ClusterWork{RaySeen: 1, CPU: new(0.2), NPU: new(30.0)}},
	} {
		_, ok := Judge(settings, tc.sum, tc.jobRunning, tc.w, now)
		assert.False(t, ok, what)
	}
	// A GPU no exporter measures leaves the judgement to Ray and the CPU.
	_, ok = Judge(settings, sum, false, &ClusterWork{RaySeen: 1, CPU: new(0.2)}, now)
	assert.True(t, ok)
}

type fakeWork struct {
	work  map[ray.ClusterRef]*ClusterWork
	last  map[ray.ClusterRef]time.Time
	asked [][]ray.ClusterRef
}

func (w *fakeWork) ClusterWork(context.Context, time.Duration, time.Duration, time.Time) (map[ray.ClusterRef]*ClusterWork, error) {
	return w.work, nil
}

func (w *fakeWork) LastRayUse(_ context.Context, cs []ray.ClusterRef, _, _ time.Duration, _ time.Time) (map[ray.ClusterRef]time.Time, error) {
	w.asked = append(w.asked, cs)
	return w.last, nil
}

type fakeClusters struct {
	cands []cache.IdleCandidate
	idle  map[ray.ClusterRef]*ray.Idle
}

func (c *fakeClusters) IdleCandidates() []cache.IdleCandidate     { return c.cands }
func (c *fakeClusters) SetIdle(idle map[ray.ClusterRef]*ray.Idle) { c.idle = idle }

// The detector hands the cache the idle clusters with what they hold, since their last Ray work (looked
// up once, when a cluster becomes idle), or since they began where they never worked in the look-back.
func TestDetectorOnce(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	created := now.Add(-3 * time.Hour)
	quiet := &ClusterWork{RaySeen: 1, CPU: new(0.0)}
	work := &fakeWork{work: map[ray.ClusterRef]*ClusterWork{{Namespace: "team", Name: "a"}: quiet,
		{Namespace: "team", Name: "b"}: quiet, {Namespace: "team", Name: "busy"}: {RaySeen: 1, RayLastUsed: &now, CPU: new(3.0)}},
		last: map[ray.ClusterRef]time.Time{{Namespace: "team", Name: "a"}: now.Add(-45 * time.Minute)}}
	cand := func(name string) cache.IdleCandidate {
		return cache.IdleCandidate{ClusterRef: ray.ClusterRef{Namespace: "team", Name: name},
			Summary: ray.Summary{CreatedAt: created, Requested: ray.Resources{CPU: 4, GPU: 1}}}
	}
	clusters := &fakeClusters{cands: []cache.IdleCandidate{cand("a"), cand("b"), cand("busy")}}
	d := &Detector{Settings: settings, Work: work, Clusters: clusters, Log: zap.NewNop()}
	require.NoError(t, d.Once(context.Background(), now))
	require.Len(t, clusters.idle, 2)
	a := clusters.idle[ray.ClusterRef{Namespace: "team", Name: "a"}]
	assert.Equal(t, now.Add(-45*time.Minute), a.Since, "its last Ray work")
	assert.InDelta(t, 1.0, a.Holding.GPU, 0)
	assert.Equal(t, created, clusters.idle[ray.ClusterRef{Namespace: "team", Name: "b"}].Since, "no Ray work in the look-back: since it began")

	require.NoError(t, d.Once(context.Background(), now.Add(time.Minute)))
	assert.Len(t, work.asked, 1, "the start of a spell is looked up once")
	assert.Equal(t, now.Add(-45*time.Minute), clusters.idle[ray.ClusterRef{Namespace: "team", Name: "a"}].Since)

	work.work[ray.ClusterRef{Namespace: "team", Name: "a"}] = &ClusterWork{RaySeen: 1, RayLastUsed: &now, CPU: new(2.0)}
	require.NoError(t, d.Once(context.Background(), now.Add(2*time.Minute)))
	assert.NotContains(t, clusters.idle, ray.ClusterRef{Namespace: "team", Name: "a"}, "at work again")
}

func TestStepOf(t *testing.T) {
	assert.Equal(t, time.Minute, StepOf(30*time.Minute))
	assert.Equal(t, 5*time.Second, StepOf(30*time.Second))
	assert.Equal(t, 10*time.Second, StepOf(5*time.Minute))
}

// The start of many spells at once (after a restart, say) is looked up a hundred clusters a query.
func TestDetectorLooksUpInBatches(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	work := &fakeWork{work: map[ray.ClusterRef]*ClusterWork{}}
	clusters := &fakeClusters{}
	for i := range 250 {
		name := "c" + strconv.Itoa(i)
		work.work[ray.ClusterRef{Namespace: "team", Name: name}] = &ClusterWork{RaySeen: 1, CPU: new(0.0)}
		clusters.cands = append(clusters.cands, cache.IdleCandidate{ClusterRef: ray.ClusterRef{Namespace: "team", Name: name},
			Summary: ray.Summary{CreatedAt: now.Add(-time.Hour), Requested: ray.Resources{CPU: 1}}})
	}
	d := &Detector{Settings: settings, Work: work, Clusters: clusters, Log: zap.NewNop()}
	require.NoError(t, d.Once(context.Background(), now))
	assert.Len(t, clusters.idle, 250)
	require.Len(t, work.asked, 3)
	assert.Len(t, work.asked[0], 100)
	assert.Len(t, work.asked[2], 50)
}

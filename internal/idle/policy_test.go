package idle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// fakeEnforcement records what a policy does.
type fakeEnforcement struct {
	told, warned, stopped []string
	stopErr               error
}

func (f *fakeEnforcement) Idle(_ context.Context, c *cache.IdleCandidate, _ *ray.Idle) error {
	f.told = append(f.told, c.Name)
	return nil
}

func (f *fakeEnforcement) Warn(_ context.Context, c *cache.IdleCandidate, _ *ray.Idle) error {
	f.warned = append(f.warned, c.Name)
	return nil
}

func (f *fakeEnforcement) Stop(_ context.Context, c *cache.IdleCandidate, _ *ray.Idle) error {
	if f.stopErr != nil {
		return f.stopErr
	}
	f.stopped = append(f.stopped, c.Name)
	return nil
}

// An idle cluster is stopped by its annotation or its namespace's policy, announced a warning's time
// ahead and stopped no sooner than that after; one with no policy, one exempted, one a RayJob made and
// one with a policy that is no duration are told of and never touched.
func TestPolicyWarnsThenStops(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	created := now.Add(-5 * time.Hour)
	quiet := &ClusterWork{RaySeen: 1, CPU: new(0.0)}
	work := &fakeWork{work: map[ray.ClusterRef]*ClusterWork{},
		last: map[ray.ClusterRef]time.Time{}}
	clusters := &fakeClusters{}
	add := func(ns, name, stopAfter, owner string, lastUse time.Time) {
		k := ray.ClusterRef{Namespace: ns, Name: name}
		work.work[k], work.last[k] = quiet, lastUse
		clusters.cands = append(clusters.cands, cache.IdleCandidate{ClusterRef: ray.ClusterRef{Namespace: ns, Name: name},
			Summary:   ray.Summary{Kind: "RayCluster", CreatedAt: created, Requested: ray.Resources{CPU: 4, GPU: 8}},
			StopAfter: stopAfter, OwnedBy: owner})
	}
	add("team", "annotated", "2h", "", now.Add(-110*time.Minute)) // due in 10 min: announced now, stopped in 15
	add("team", "old", "1h", "", now.Add(-3*time.Hour))           // overdue: announced now, stopped in 15 min
	add("team", "exempt", "never", "", now.Add(-3*time.Hour))
	add("team", "bad", "soon", "", now.Add(-3*time.Hour))
	add("team", "job", "", "RayJob", now.Add(-3*time.Hour))
	add("ruled", "plain", "", "", now.Add(-4*time.Hour)) // the namespace's 3h: overdue
	add("free", "plain", "", "", now.Add(-4*time.Hour))  // no policy
	enf := &fakeEnforcement{}
	policy := &Policy{Stopping: true, Warning: 15 * time.Minute, Enforce: enf, Log: zap.NewNop(),
		Namespaces: func(_ context.Context, ns string) (*NamespacePolicy, error) {
			if ns == "ruled" {
				return &NamespacePolicy{StopAfter: 3 * time.Hour, Name: "namespace policy ruled"}, nil
			}
			return nil, nil
		}}
	d := &Detector{Settings: settings, Work: work, Clusters: clusters, Log: zap.NewNop(), Policy: policy}
	idleOf := func(ns, name string) *ray.Idle { return clusters.idle[ray.ClusterRef{Namespace: ns, Name: name}] }

	require.NoError(t, d.Once(context.Background(), now))
	assert.Len(t, enf.told, 7, "every idle cluster is told of")
	assert.ElementsMatch(t, []string{"annotated", "old", "plain"}, enf.warned)
	assert.Empty(t, enf.stopped)
	a := idleOf("team", "annotated")
	require.NotNil(t, a.StopAt)
	assert.Equal(t, now.Add(15*time.Minute), *a.StopAt, "no sooner than a warning's time after the announcement")
	assert.Equal(t, "annotation ray.openfuyao.com/idle-stop-after=2h", a.Policy)
	assert.Equal(t, now.Add(15*time.Minute), *idleOf("team", "old").StopAt)
	assert.Equal(t, "namespace policy ruled", idleOf("ruled", "plain").Policy)
	for _, none := range [][2]string{{"team", "exempt"}, {"team", "bad"}, {"team", "job"}, {"free", "plain"}} {
		assert.Nil(t, idleOf(none[0], none[1]).StopAt, none[1])
	}

	require.NoError(t, d.Once(context.Background(), now.Add(10*time.Minute)))
	assert.Empty(t, enf.stopped, "not before the warning's time")
	assert.Len(t, enf.told, 7, "told once per spell")

	enf.stopErr = errors.New("conflict")
	require.NoError(t, d.Once(context.Background(), now.Add(15*time.Minute)))
	assert.Empty(t, enf.stopped)
	enf.stopErr = nil
	require.NoError(t, d.Once(context.Background(), now.Add(16*time.Minute)))
	assert.ElementsMatch(t, []string{"annotated", "old", "plain"}, enf.stopped, "a failed stop is tried again")
	require.NoError(t, d.Once(context.Background(), now.Add(17*time.Minute)))
	assert.Len(t, enf.stopped, 3, "stopped once per spell")
	assert.Len(t, enf.warned, 3)
}

// Without the stop by policy, and on a replica that does not lead, nothing is stopped.
func TestPolicyOffOrFollowing(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	k := ray.ClusterRef{Namespace: "team", Name: "a"}
	work := &fakeWork{work: map[ray.ClusterRef]*ClusterWork{k: {RaySeen: 1, CPU: new(0.0)}},
		last: map[ray.ClusterRef]time.Time{k: now.Add(-5 * time.Hour)}}
	cands := []cache.IdleCandidate{{ClusterRef: ray.ClusterRef{Namespace: "team", Name: "a"},
		Summary: ray.Summary{Kind: "RayCluster", CreatedAt: now.Add(-6 * time.Hour), Requested: ray.Resources{CPU: 1}}, StopAfter: "1h"}}
	for _, p := range []*Policy{{Stopping: false}, {Stopping: true, Leading: func() bool { return false }}} {
		enf := &fakeEnforcement{}
		p.Enforce, p.Log = enf, zap.NewNop()
		clusters := &fakeClusters{cands: cands}
		d := &Detector{Settings: settings, Work: work, Clusters: clusters, Log: zap.NewNop(), Policy: p}
		for i := range 3 {
			require.NoError(t, d.Once(context.Background(), now.Add(time.Duration(i)*time.Hour)))
		}
		assert.Empty(t, enf.warned)
		assert.Empty(t, enf.stopped)
	}
}

func TestParseIdleStopAfter(t *testing.T) {
	d, err := ParseStopAfter("90m")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, d)
	d, err = ParseStopAfter("never")
	require.NoError(t, err)
	assert.Zero(t, d)
	_, err = ParseStopAfter("30s")
	require.ErrorContains(t, err, "shorter than")
	_, err = ParseStopAfter("soon")
	assert.ErrorContains(t, err, "not a duration")
}

// Package idle holds the idle detection: which running Ray clusters do no Ray work while they hold
// their resources, judged from Prometheus every interval over a window, and handed to the watch cache
// so that lists, details, streams and the overview show it; the PromQL it asks (promql.go), the
// namespace policy's ConfigMap (policyconfigmap.go) and what a stop by policy does (policy.go,
// enforcer.go).
package idle

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// Settings are the detection's: a cluster is idle when over Window no Ray logical CPU, GPU or NPU of it
// was in use, its containers used at most CPUShare of the CPU its pods request, and none of its GPUs or
// NPUs (where measured) was busier than AcceleratorPercent.
type Settings struct {
	Window   time.Duration
	Interval time.Duration
	// Step is how finely the window is sampled; Lookback how far back the start of an idle spell is
	// looked for.
	Step, Lookback     time.Duration
	CPUShare           float64
	AcceleratorPercent float64
}

// Work is what Prometheus says of the clusters' work (Queries).
type Work interface {
	ClusterWork(ctx context.Context, window, step time.Duration, now time.Time) (map[ray.ClusterRef]*ClusterWork, error)
	LastRayUse(ctx context.Context, clusters []ray.ClusterRef, lookback, step time.Duration, now time.Time) (map[ray.ClusterRef]time.Time, error)
}

// Clusters are the running Ray clusters and where their idleness goes (cache.Store).
type Clusters interface {
	IdleCandidates() []cache.IdleCandidate
	SetIdle(map[ray.ClusterRef]*ray.Idle)
}

// maxLookups bounds the clusters one look-up of the start of their spells names.
const maxLookups = 100

// Detector judges the clusters every interval.
type Detector struct {
	Settings Settings
	Work     Work
	Clusters Clusters
	Log      *zap.Logger
	// Policy stops idle clusters that ask for it (nil: none is stopped).
	Policy *Policy

	// since keeps when each idle cluster's spell began, found when it became idle.
	since map[ray.ClusterRef]time.Time
}

// Run judges the clusters every interval until ctx ends.
func (d *Detector) Run(ctx context.Context) {
	t := time.NewTicker(d.Settings.Interval)
	defer t.Stop()
	for {
		if err := d.Once(ctx, time.Now()); err != nil && ctx.Err() == nil {
			// What was found stands until Prometheus answers again.
			d.Log.Warn("idle detection: Prometheus did not answer", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once judges the clusters as of now and hands the cache what is idle.
func (d *Detector) Once(ctx context.Context, now time.Time) error {
	st := d.Settings
	work, err := d.Work.ClusterWork(ctx, st.Window, st.Step, now)
	if err != nil {
		return err
	}
	idle := map[ray.ClusterRef]*ray.Idle{}
	created := map[ray.ClusterRef]time.Time{}
	var fresh []ray.ClusterRef
	cands := map[ray.ClusterRef]*cache.IdleCandidate{}
	for _, c := range d.Clusters.IdleCandidates() {
		w := work[c.ClusterRef]
		ev, ok := Judge(st, &c.Summary, c.JobRunning, w, now)
		if !ok {
			continue
		}
		idle[c.ClusterRef] = &ray.Idle{Holding: c.Summary.Requested, Evidence: ev}
		cands[c.ClusterRef] = &c
		created[c.ClusterRef] = c.Summary.CreatedAt
		if _, known := d.since[c.ClusterRef]; !known {
			fresh = append(fresh, c.ClusterRef)
		}
	}
	since := map[ray.ClusterRef]time.Time{}
	for ref := range idle {
		if t, ok := d.since[ref]; ok {
			since[ref] = t
		}
	}
	last := map[ray.ClusterRef]time.Time{}
	for batch := range slices.Chunk(fresh, maxLookups) { // a query names its clusters: bounded in length
		found, err := d.Work.LastRayUse(ctx, batch, st.Lookback, max(st.Step, 5*time.Minute), now)
		if err != nil {
			return err
		}
		maps.Copy(last, found)
	}
	for _, ref := range fresh {
		t, ok := last[ref]
		if !ok { // not at work in the look-back: since it began, or as far as was looked
			t = now.Add(-st.Lookback)
			if created[ref].After(t) {
				t = created[ref]
			}
		}
		since[ref] = t.UTC().Truncate(time.Second)
	}
	for ref, i := range idle {
		i.Since = since[ref]
	}
	d.since = since
	if d.Policy != nil {
		d.Policy.plan(ctx, cands, idle, now)
	}
	d.Clusters.SetIdle(idle)
	if d.Policy != nil {
		d.Policy.act(ctx, cands, idle, now)
	}
	return nil
}

// Judge tells whether a running cluster was idle over the window ending at now, and the evidence: no
// job of a RayJob runs on it, it was created a window ago or more, Ray's series of it were there at 90 %
// of the window's steps at least and show no logical CPU, GPU or NPU in use, its containers' CPU was
// measured and stayed within CPUShare of what its pods request, and its GPUs and NPUs, where it holds
// and Prometheus measures them, stayed within AcceleratorPercent.
func Judge(st Settings, sum *ray.Summary, jobRunning bool, w *ClusterWork, now time.Time) (ray.IdleEvidence, bool) {
	ev := ray.IdleEvidence{Window: st.Window.String()}
	if jobRunning || w == nil || now.Sub(sum.CreatedAt) < st.Window || w.RaySeen < 0.9 || w.RayLastUsed != nil || w.CPU == nil {
		return ev, false
	}
	ev.CPU = w.CPU
	if *w.CPU > st.CPUShare*sum.Requested.CPU {
		return ev, false
	}
	if sum.Requested.GPU > 0 && w.GPU != nil {
		if ev.GPUUtilization = w.GPU; *w.GPU > st.AcceleratorPercent {
			return ev, false
		}
	}
	if sum.Requested.NPU > 0 && w.NPU != nil {
		if ev.NPUUtilization = w.NPU; *w.NPU > st.AcceleratorPercent {
			return ev, false
		}
	}
	return ev, true
}

// StepOf is how finely a window is sampled: a thirtieth of it, from 5 s (the scrape interval of a
// busy Prometheus) to a minute.
func StepOf(window time.Duration) time.Duration {
	return min(max(window/30, 5*time.Second), time.Minute).Truncate(time.Second)
}

package idle

import (
	"context"
	"time"

	"go.uber.org/zap"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// NamespacePolicy is a namespace's idle policy, as its admins wrote it through the service.
type NamespacePolicy struct {
	// StopAfter is how long its RayClusters may idle before they are stopped.
	StopAfter time.Duration
	// Name names it in an idle cluster's summary, its events and the audit trail.
	Name string
}

// Enforcement is what a policy does to an idle cluster (Enforcer): announce the stop a while ahead,
// then stop it.
type Enforcement interface {
	// Idle tells that a cluster became idle.
	Idle(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error
	Warn(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error
	Stop(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error
}

// Policy stops the idle RayClusters that ask for it, by their annotation ray.openfuyao.com/idle-stop-after
// or their namespace's policy; a RayCluster with neither is never touched, nor is one a RayJob or a
// RayService made (its owner's to stop). A stop is announced Warning ahead (Enforcement.Warn) and made
// no sooner than that after the announcement.
type Policy struct {
	// Stopping is on where the stop by policy is (the chart made its identity): without it idle
	// clusters are told of, and none is stopped.
	Stopping bool
	// Namespaces reads a namespace's policy (nil: no namespace has one).
	Namespaces func(ctx context.Context, ns string) (*NamespacePolicy, error)
	Warning    time.Duration
	Enforce    Enforcement
	// Leading tells whether this replica acts (the history's Lease holder); nil: it always does.
	Leading func() bool
	Log     *zap.Logger

	// told holds the spells told of; warned when each cluster's current spell's stop was announced;
	// stopped the spells stopped.
	told    map[ray.ClusterRef]time.Time
	warned  map[ray.ClusterRef]warning
	stopped map[ray.ClusterRef]time.Time
}

type warning struct{ since, at time.Time }

// plan completes each idle cluster by its policy: the policy's name and when it stops the cluster.
func (p *Policy) plan(ctx context.Context, cands map[ray.ClusterRef]*cache.IdleCandidate, idle map[ray.ClusterRef]*ray.Idle, now time.Time) {
	namespaces := map[string]*NamespacePolicy{}
	for ref, i := range idle {
		c := cands[ref]
		if !p.Stopping || c == nil || c.OwnedBy != "" {
			continue
		}
		var after time.Duration
		var name string
		if c.StopAfter != "" {
			d, err := ParseStopAfter(c.StopAfter)
			if err != nil {
				p.Log.Warn("idle policy: the annotation of a RayCluster is not a policy; it is not stopped for idling",
					zap.String("cluster", ref.Namespace+"/"+ref.Name), zap.String("annotation", ray.IdleStopAfterKey), zap.Error(err))
				continue
			}
			after, name = d, "annotation "+ray.IdleStopAfterKey+"="+c.StopAfter
		} else if p.Namespaces != nil {
			np, seen := namespaces[ref.Namespace]
			if !seen {
				var err error
				if np, err = p.Namespaces(ctx, ref.Namespace); err != nil {
					p.Log.Warn("idle policy: reading a namespace's policy", zap.String("namespace", ref.Namespace), zap.Error(err))
				}
				namespaces[ref.Namespace] = np
			}
			if np != nil {
				after, name = np.StopAfter, np.Name
			}
		}
		if after <= 0 {
			continue
		}
		// No sooner than a warning's time after the announcement, made now at the earliest.
		announced := now
		if w, ok := p.warned[ref]; ok && w.since.Equal(i.Since) {
			announced = w.at
		}
		at := i.Since.Add(after)
		if earliest := announced.Add(p.Warning); at.Before(earliest) {
			at = earliest
		}
		at = at.UTC().Truncate(time.Second)
		i.StopAt, i.Policy = &at, name
	}
}

// act announces the stops due within Warning and makes those due, once per idle spell.
func (p *Policy) act(ctx context.Context, cands map[ray.ClusterRef]*cache.IdleCandidate, idle map[ray.ClusterRef]*ray.Idle, now time.Time) {
	if p.warned == nil {
		p.told, p.warned, p.stopped = map[ray.ClusterRef]time.Time{}, map[ray.ClusterRef]warning{}, map[ray.ClusterRef]time.Time{}
	}
	for ref, w := range p.warned {
		if i, ok := idle[ref]; !ok || !i.Since.Equal(w.since) || i.StopAt == nil {
			delete(p.warned, ref)
		}
	}
	for _, spells := range []map[ray.ClusterRef]time.Time{p.told, p.stopped} {
		for ref, since := range spells {
			if i, ok := idle[ref]; !ok || !i.Since.Equal(since) {
				delete(spells, ref)
			}
		}
	}
	if p.Leading != nil && !p.Leading() {
		return
	}
	for ref, i := range idle {
		if _, done := p.told[ref]; !done {
			if err := p.Enforce.Idle(ctx, cands[ref], i); err != nil {
				p.Log.Warn("idle policy: notifying an idle cluster; notified at the next judgement", zap.Error(err))
			} else {
				p.told[ref] = i.Since
			}
		}
		if i.StopAt == nil {
			continue
		}
		if _, done := p.stopped[ref]; done {
			continue
		}
		log := p.Log.With(zap.String("cluster", ref.Namespace+"/"+ref.Name), zap.String("policy", i.Policy))
		w, warned := p.warned[ref]
		if !warned {
			if now.Before(i.StopAt.Add(-p.Warning)) {
				continue
			}
			if err := p.Enforce.Warn(ctx, cands[ref], i); err != nil {
				log.Warn("idle policy: announcing a stop; announced again at the next judgement", zap.Error(err))
				continue
			}
			log.Info("idle policy: a stop announced", zap.Time("stopAt", *i.StopAt))
			p.warned[ref] = warning{since: i.Since, at: now}
			continue
		}
		if now.Before(*i.StopAt) || now.Before(w.at.Add(p.Warning)) {
			continue
		}
		if err := p.Enforce.Stop(ctx, cands[ref], i); err != nil {
			log.Warn("idle policy: stopping an idle cluster; tried again at the next judgement", zap.Error(err))
			continue
		}
		log.Info("idle policy: an idle cluster stopped", zap.Time("idleSince", i.Since))
		p.stopped[ref] = i.Since
	}
}

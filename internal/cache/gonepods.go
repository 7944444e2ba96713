package cache

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// gonePods keeps the Ray pods the cache saw deleted lately, by namespace/cluster: a Ray cluster deleted
// in the background, whose pods' deletions by the garbage collector reached the cache before its own,
// still hands them to the observer (Gone). At most gonePodsMax are kept, for gonePodsFor.
type gonePods struct {
	mu sync.Mutex
	// kept are the pods, oldest first.
	kept []gonePod
}

type gonePod struct {
	cluster string
	at      time.Time
	pod     *corev1.Pod
}

const (
	gonePodsMax = 4096
	gonePodsFor = time.Minute
)

// add keeps p, deleted at now, of namespace/cluster key, and forgets what is past the bounds.
func (g *gonePods) add(key string, p *corev1.Pod, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kept = append(g.kept, gonePod{cluster: key, at: now, pod: p})
	drop := 0
	for drop < len(g.kept) && (len(g.kept)-drop > gonePodsMax || now.Sub(g.kept[drop].at) > gonePodsFor) {
		drop++
	}
	if drop > 0 {
		clear(g.kept[:drop])
		g.kept = g.kept[drop:]
	}
}

// of are the pods of namespace/cluster key deleted since since (an object's creation: not those of an
// earlier one of its name) and within gonePodsFor of now.
func (g *gonePods) of(key string, since, now time.Time) []*corev1.Pod {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*corev1.Pod
	for _, k := range g.kept {
		if k.cluster == key && !k.at.Before(since) && now.Sub(k.at) <= gonePodsFor {
			out = append(out, k.pod)
		}
	}
	return out
}

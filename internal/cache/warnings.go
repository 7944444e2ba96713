package cache

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/ray"
)

// The Warning events the store reads health from are kept in a cache of their own, bounded: whoever
// may create events, or make the cluster write them (a pod that keeps failing), chooses how many there
// are and how long their messages are. Only events about pods and Ray objects are kept, their reason
// and message cut as a summary's are (MaxWordBytes, MaxMessageBytes), and at most MaxWarnings of them,
// MaxWarningsPerNamespace in one namespace and MaxWarningBytes in all: past a bound the oldest (by
// their last time) are let go, those of the namespace over its bound first. An event let go no longer
// counts as a problem of what it was about.
const (
	MaxWarnings             = 10000
	MaxWarningsPerNamespace = 1000
	MaxWarningBytes         = 8 << 20
)

// warning is what the store keeps of a Warning event.
type warning struct {
	ns, name        string
	kind, object    string // what it is about
	reason, message string
	last            time.Time
	bytes           int
}

// warningOverhead is what a kept warning holds besides its strings, with its place in the indexes.
const warningOverhead = 256

func (w *warning) involved() string { return involvedKey(w.ns, w.kind, w.object) }

// warningCache holds the kept warnings, by key and by what they are about. Its methods are what a
// reflector feeds (cache.ReflectorStore); each change is told to onChange, outside the cache's lock, once
// per object the changed events are about.
type warningCache struct {
	keep                         func(kind string) bool
	onChange                     func(ns, kind, name string)
	maxCount, maxPerNS, maxBytes int

	mu       sync.RWMutex
	byKey    map[string]*warning
	byObject map[string]map[string]*warning
	byNS     map[string]int
	bytes    int
	synced   atomic.Bool
}

func newWarningCache(keep func(kind string) bool, onChange func(ns, kind, name string), maxCount, maxPerNS, maxBytes int) *warningCache {
	return &warningCache{keep: keep, onChange: onChange, maxCount: maxCount, maxPerNS: maxPerNS, maxBytes: maxBytes,
		byKey: map[string]*warning{}, byObject: map[string]map[string]*warning{}, byNS: map[string]int{}}
}

// toWarning is what is kept of obj, nil when it is not kept: no Warning event, or one about something
// that is neither a pod nor a Ray object.
func (c *warningCache) toWarning(obj any) *warning {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, ok := obj.(*corev1.Event)
	if !ok || e.Type != corev1.EventTypeWarning || !c.keep(e.InvolvedObject.Kind) || lostARace(e.Message) {
		return nil
	}
	last := e.LastTimestamp.UTC()
	if last.IsZero() {
		last = e.EventTime.UTC()
	}
	w := &warning{ns: e.Namespace, name: e.Name, kind: ray.Clip(e.InvolvedObject.Kind, ray.MaxWordBytes), object: ray.Clip(e.InvolvedObject.Name, ray.MaxNameBytes),
		reason: ray.Clip(e.Reason, ray.MaxWordBytes), message: ray.Clip(e.Message, ray.MaxMessageBytes), last: last}
	w.bytes = warningOverhead + len(w.ns) + len(w.name) + len(w.kind) + len(w.object) + len(w.reason) + len(w.message)
	return w
}

// optimisticLockMessage is how the apiserver refuses a write made on a stale resourceVersion
// (k8s.io/apiserver pkg/registry/generic/registry/store.go, OptimisticLockErrorMsg, v0.37).
const optimisticLockMessage = "the object has been modified; please apply your changes to the latest version and try again"

// lostARace tells a warning that says only that its controller wrote on a stale version: KubeRay
// records one (FailedToUpdateHTTPRoute, FailedToUpdateService, ...) each time it meets another writer,
// and reconciles again at once. It says nothing of the object's health.
func lostARace(message string) bool { return strings.Contains(message, optimisticLockMessage) }

func (w *warning) key() string { return w.ns + "/" + w.name }

// touched collects the objects whose warnings changed, to tell once the lock is let go.
type touched map[[3]string]bool

func (ch touched) add(w *warning) { ch[[3]string{w.ns, w.kind, w.object}] = true }

func (c *warningCache) tell(ch touched) {
	for k := range ch {
		c.onChange(k[0], k[1], k[2])
	}
}

func (c *warningCache) Add(obj any) error    { return c.Update(obj) }
func (c *warningCache) Resync() error        { return nil }
func (c *warningCache) Delete(obj any) error { return c.remove(obj) }

// Update keeps the event (or lets it go when it is no longer one that is kept), then keeps the bounds.
func (c *warningCache) Update(obj any) error {
	w := c.toWarning(obj)
	if w == nil {
		return c.remove(obj)
	}
	ch := touched{}
	c.mu.Lock()
	c.putLocked(w, ch)
	c.boundLocked(w.ns, ch)
	c.mu.Unlock()
	c.tell(ch)
	return nil
}

func (c *warningCache) remove(obj any) error {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	ch := touched{}
	c.mu.Lock()
	c.dropLocked(key, ch)
	c.mu.Unlock()
	c.tell(ch)
	return nil
}

// Replace keeps list in place of everything kept: every object whose warnings were or are kept is told.
func (c *warningCache) Replace(list []any, _ string) error {
	ch := touched{}
	c.mu.Lock()
	for _, w := range c.byKey {
		ch.add(w)
	}
	c.byKey, c.byObject, c.byNS, c.bytes = map[string]*warning{}, map[string]map[string]*warning{}, map[string]int{}, 0
	for _, obj := range list {
		if w := c.toWarning(obj); w != nil {
			c.putLocked(w, ch)
		}
	}
	for ns := range c.byNS {
		c.boundLocked(ns, ch)
	}
	c.mu.Unlock()
	c.synced.Store(true)
	c.tell(ch)
	return nil
}

func (c *warningCache) putLocked(w *warning, ch touched) {
	c.dropLocked(w.key(), ch)
	c.byKey[w.key()] = w
	ik := w.involved()
	if c.byObject[ik] == nil {
		c.byObject[ik] = map[string]*warning{}
	}
	c.byObject[ik][w.key()] = w
	c.byNS[w.ns]++
	c.bytes += w.bytes
	ch.add(w)
}

func (c *warningCache) dropLocked(key string, ch touched) {
	w, ok := c.byKey[key]
	if !ok {
		return
	}
	delete(c.byKey, key)
	ik := w.involved()
	delete(c.byObject[ik], key)
	if len(c.byObject[ik]) == 0 {
		delete(c.byObject, ik)
	}
	if c.byNS[w.ns]--; c.byNS[w.ns] <= 0 {
		delete(c.byNS, w.ns)
	}
	c.bytes -= w.bytes
	ch.add(w)
}

// boundLocked lets the oldest warnings go while ns holds more than its bound or the cache more than
// its own. It lets a tenth more go than it must, so that a stream of new events sorts seldom.
func (c *warningCache) boundLocked(ns string, ch touched) {
	if n := c.byNS[ns]; n > c.maxPerNS {
		var in []*warning
		for _, w := range c.byKey {
			if w.ns == ns {
				in = append(in, w)
			}
		}
		c.dropOldestLocked(in, n-c.maxPerNS+c.maxPerNS/10, ch)
	}
	if len(c.byKey) > c.maxCount || c.bytes > c.maxBytes {
		all := make([]*warning, 0, len(c.byKey))
		for _, w := range c.byKey {
			all = append(all, w)
		}
		slices.SortFunc(all, func(a, b *warning) int { return a.last.Compare(b.last) })
		n := max(len(c.byKey)-c.maxCount, 0) + c.maxCount/10
		i := 0
		for ; i < len(all) && (i < n || c.bytes > c.maxBytes*9/10); i++ {
			c.dropLocked(all[i].key(), ch)
		}
	}
}

func (c *warningCache) dropOldestLocked(ws []*warning, n int, ch touched) {
	slices.SortFunc(ws, func(a, b *warning) int { return a.last.Compare(b.last) })
	for _, w := range ws[:min(n, len(ws))] {
		c.dropLocked(w.key(), ch)
	}
}

// about returns the kept warnings about one object as problems, newest first.
func (c *warningCache) about(ns string, ref ray.InvolvedObjectRef) []ray.Problem {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ws := c.byObject[involvedKey(ns, ref.Kind, ref.Name)]
	out := make([]ray.Problem, 0, len(ws))
	for _, w := range ws {
		out = append(out, ray.EventProblem(ref, w.reason, w.message, w.last))
	}
	slices.SortFunc(out, func(a, b ray.Problem) int { return b.Since.Compare(*a.Since) })
	return out
}

// size returns how many warnings are kept and what they hold.
func (c *warningCache) size() (count, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byKey), c.bytes
}

// warningReflector lists and watches the cluster's Warning events into c.
func warningReflector(core kubernetes.Interface, c *warningCache, resync time.Duration) *cache.Reflector {
	sel := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = "type=" + corev1.EventTypeWarning
		return o
	}
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.CoreV1().Events(metav1.NamespaceAll).List(ctx, sel(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, sel(o))
		},
	}, core)
	return cache.NewReflectorWithOptions(lw, &corev1.Event{}, c, cache.ReflectorOptions{Name: "warning events", ResyncPeriod: resync})
}

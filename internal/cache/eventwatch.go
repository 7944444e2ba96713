package cache

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/ray"
)

// EventWatches watch the Kubernetes events of the namespaces that object streams look at: one watch
// per namespace, with the service's own identity, shared by every stream there and stopped when the
// last one leaves. Each caller's right to see them is checked by the stream.
type EventWatches struct {
	core kubernetes.Interface

	mu   sync.Mutex
	byNS map[string]*namespaceEvents
	// lingering are the holds details keep, by namespace (see Lingering).
	lingering map[string]*lingeringHold
}

// lingeringHold is a detail's hold on a namespace's events, released when unused for Linger.
type lingeringHold struct {
	hold *NamespaceEvents
	last time.Time // the last detail's
}

// Linger is how long the events of a namespace stay watched after its last detail; MaxLingering bounds
// the namespaces watched that way.
const (
	Linger       = 2 * time.Minute
	MaxLingering = 64
)

type namespaceEvents struct {
	refs   int
	inf    cache.SharedIndexInformer
	stop   context.CancelFunc
	notify *notifier
}

// NewEventWatches returns the event watches made with core, the service's own client.
func NewEventWatches(core kubernetes.Interface) *EventWatches {
	return &EventWatches{core: core, byNS: map[string]*namespaceEvents{}, lingering: map[string]*lingeringHold{}}
}

// Lingering returns a hold on the events of ns for a detail, which needs no release: it lasts until
// no detail has asked for the namespace for Linger, so that the details after the first read the
// namespace's events from the watch. ok is false where MaxLingering namespaces are held already.
func (w *EventWatches) Lingering(ns string) (events *NamespaceEvents, ok bool) {
	w.mu.Lock()
	if l := w.lingering[ns]; l != nil {
		l.last = time.Now()
		w.mu.Unlock()
		return l.hold, true
	}
	full := len(w.lingering) >= MaxLingering
	w.mu.Unlock()
	if full {
		return nil, false
	}
	hold := w.Acquire(ns)
	w.mu.Lock()
	if l := w.lingering[ns]; l != nil { // another detail came first
		l.last = time.Now()
		w.mu.Unlock()
		hold.Release()
		return l.hold, true
	}
	l := &lingeringHold{hold: hold, last: time.Now()}
	var expire func()
	expire = func() {
		w.mu.Lock()
		if idle := time.Since(l.last); idle < Linger {
			time.AfterFunc(Linger-idle, expire)
			w.mu.Unlock()
			return
		}
		delete(w.lingering, ns)
		w.mu.Unlock()
		hold.Release()
	}
	time.AfterFunc(Linger, expire)
	w.lingering[ns] = l
	w.mu.Unlock()
	return hold, true
}

// NamespaceEvents is one stream's hold on the events of a namespace.
type NamespaceEvents struct {
	w  *EventWatches
	ns string
	e  *namespaceEvents
}

// Acquire starts watching the events of ns, or joins the watch already there. Release it when done.
func (w *EventWatches) Acquire(ns string) *NamespaceEvents {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.byNS[ns]
	if e == nil {
		f := informers.NewSharedInformerFactoryWithOptions(w.core, 0, informers.WithNamespace(ns))
		inf := f.Core().V1().Events().Informer()
		_ = inf.SetTransform(trimEvent)
		_ = inf.AddIndexers(cache.Indexers{involvedIndex: involvedObject})
		ctx, cancel := context.WithCancel(context.Background())
		e = &namespaceEvents{inf: inf, stop: cancel, notify: newNotifier()}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { e.notify.Notify() },
			UpdateFunc: func(any, any) { e.notify.Notify() },
		})
		f.Start(ctx.Done())
		w.byNS[ns] = e
	}
	e.refs++
	return &NamespaceEvents{w: w, ns: ns, e: e}
}

// Release ends this hold; the watch stops with the last one.
func (n *NamespaceEvents) Release() {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	if n.e.refs--; n.e.refs == 0 {
		n.e.stop()
		delete(n.w.byNS, n.ns)
	}
}

// Synced tells whether the events of the namespace have been listed once.
func (n *NamespaceEvents) Synced() bool { return n.e.inf.HasSynced() }

// Changed returns a channel closed at the next event added or updated in the namespace.
func (n *NamespaceEvents) Changed() <-chan struct{} { return n.e.notify.Wait() }

// Of returns the events of the object s sums up, of kind k: its own, its Ray clusters', the named
// pods' and its submitter Job's, newest first, as a detail shows them. Only those events are read, by
// the index of what they are about, not every event of the namespace.
func (n *NamespaceEvents) Of(k *ray.Kind, s *ray.Summary, pods []string) []ray.EventInfo {
	clusters := k.Clusters(s)
	var events []corev1.Event
	for _, ref := range k.EventRefs(s.Name, clusters, pods) {
		objs, _ := n.e.inf.GetIndexer().ByIndex(involvedIndex, involvedKey(n.ns, ref.Kind, ref.Name))
		for _, o := range objs {
			if e, ok := o.(*corev1.Event); ok {
				events = append(events, *e)
			}
		}
	}
	return k.EventsOf(s.Name, clusters, pods, events)
}

// involvedIndex indexes a namespace's events by the object they are about.
const involvedIndex = "involvedObject"

func involvedObject(obj any) ([]string, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil
	}
	return []string{involvedKey(e.Namespace, e.InvolvedObject.Kind, e.InvolvedObject.Name)}, nil
}

// trimEvent keeps of an event what a detail shows.
func trimEvent(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	e.ManagedFields = nil
	e.Annotations = nil
	return e, nil
}

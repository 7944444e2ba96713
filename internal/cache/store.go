// Package cache is the watch cache behind the lists, details and streams: informers on the Ray kinds,
// their templates, Ray pods and Warning events; the summaries they publish; the sorted views and
// queries a list reads; the change feed streams resume from; and per-namespace event watches.
package cache

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

const (
	podsByClusterIndex    = "rayCluster"
	entriesByClusterIndex = "rayCluster"
	// runsIndexPrefix, followed by a maker kind's resource, indexes the runs of that kind (a RayCronJob's
	// RayJobs) by namespace/maker name, from the label the kind names (Kind.Runs).
	runsIndexPrefix = "runOf/"
)

func involvedKey(ns, kind, name string) string { return ns + "/" + kind + "/" + name }

// Store is the watch cache behind lists and the overview: one informer per Ray kind, one for Ray pods
// and one for template ConfigMaps. Their event handlers publish each object's whole summary whenever
// the object or a pod of its Ray cluster changes, so that reads only select what is published.
type Store struct {
	kinds     *ray.Kinds
	informers map[*ray.Kind]cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	templates cache.SharedIndexInformer
	// watchErrors counts the informers' failed lists and watches (WatchErrors).
	watchErrors atomic.Int64
	// signer tells the templates and the creators the service signed.
	signer *signing.Signer
	// warnings are the Warning events about pods and Ray objects, by the object they are about, within
	// bounds (see warningCache): a health source.
	warnings *warningCache
	start    []func(stop <-chan struct{})
	handled  []cache.ResourceEventHandlerRegistration
	// optional are the informers of the optional kinds, started once their CRD is found (SetInstalled);
	// stop is what Start was given, for them.
	optional map[*ray.Kind]*optionalInformer
	stop     <-chan struct{}
	// groups are the queue managers' groups (Volcano's PodGroups, Kueue's Workloads), once discovery
	// finds their CRD.
	groups *queueGroups
	// dra follows the claims, claim templates and slices of Dynamic Resource Allocation (dra.go).
	dra *dra
	// declared is the last OpenAPI document read for the fields the CRDs declare (CheckDeclared).
	declared declaredCheck
	// idle is what the idle detection last found idle, by Ray cluster, guarded by mu.
	idle map[ray.ClusterRef]*ray.Idle
	// makers are, for a kind whose objects are runs (a RayJob), the kinds that make them (RayCronJob):
	// a run's change publishes its maker again.
	makers map[*ray.Kind][]*ray.Kind

	// mu serializes publishing (so that the last published item of an object is derived from the newest
	// object and pods) and guards the published items.
	mu        sync.RWMutex
	instances map[*ray.Kind]namespaced[*Item]
	templated map[*ray.Kind]namespaced[*Item]
	// ordered holds each kind's instances in every order a list asks for.
	ordered map[*ray.Kind]*views
	// active counts each kind's active instances per namespace, for the overview; waiting holds what
	// those a queue manager has not admitted request, by namespace and name (see Pending).
	active  map[*ray.Kind]map[string]int
	waiting map[*ray.Kind]namespaced[ray.Resources]
	// feeds keep each kind's last changes for live streams; notify wakes them at every change.
	feeds  map[*ray.Kind]*feed
	notify *notifier
	epoch  string
	// observer, when set (before Start), is told of every Ray object received and of every one gone;
	// requests, the observer where it follows the requests published after (RequestsObserver).
	observer Observer
	requests RequestsObserver
	// manifests are the whole manifests of the objects recently shown in detail.
	manifests *manifests

	// podsSeq counts the changes of Ray pods the handlers were told of; allocKept are the sums of
	// Allocated made at the pods' and RayClusters' versions allocAt.
	podsSeq atomic.Uint64
	// gone are the Ray pods deleted lately (see gonePods).
	gone      gonePods
	allocMu   sync.Mutex
	allocAt   [2]uint64
	allocKept map[string]Allocation
}

// Observer is told of every version of a Ray object the watch cache receives, whole, before it is
// trimmed to its entry, and of every object that leaves the cache. It is called on the informers'
// goroutines and must not block; it must not keep o past the call unless it copies what it needs.
type Observer interface {
	Observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary)
	// Gone is told of an object deleted, with the pods of its Ray clusters as the cache holds them
	// still (the garbage collector deletes them right after), and those it saw deleted within a minute.
	Gone(k *ray.Kind, e *Entry, pods []corev1.Pod)
}

// RequestsObserver is an Observer also told of a Ray cluster's requests anew where what values them
// changed after its version was observed: a claim made or allocated, a claim template, the nodes' word
// on what a device is worth. It is told the requests of the summary the store publishes, with the
// store's lock held: it must not block, nor call the store.
type RequestsObserver interface {
	Requested(uid types.UID, r ray.Resources)
}

// SetObserver sets the observer of Ray objects; call it before Start.
func (s *Store) SetObserver(o Observer) {
	s.observer = o
	s.requests, _ = o.(RequestsObserver)
}

// Observers tells each of its observers, in order.
type Observers []Observer

// Observe tells each observer of o.
func (os Observers) Observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary) {
	for _, ob := range os {
		ob.Observe(k, o, s)
	}
}

// Requested tells each observer that follows requests of a cluster's.
func (os Observers) Requested(uid types.UID, r ray.Resources) {
	for _, ob := range os {
		if ro, ok := ob.(RequestsObserver); ok {
			ro.Requested(uid, r)
		}
	}
}

// Gone tells each observer of e gone.
func (os Observers) Gone(k *ray.Kind, e *Entry, pods []corev1.Pod) {
	for _, ob := range os {
		ob.Gone(k, e, pods)
	}
}

// fromIndex lists what an informer holds in one namespace ("" for all), as T.
func fromIndex[T any](inf cache.SharedIndexInformer, namespace string) []T {
	var objs []any
	if namespace == "" {
		objs = inf.GetStore().List()
	} else {
		objs, _ = inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// NewStore prepares the informers; nothing is listed until Start. The clients are the service's own.
// Only template ConfigMaps that templates signed are published.
func NewStore(dyn dynamic.Interface, core kubernetes.Interface, kinds *ray.Kinds, templates *signing.Signer, resync time.Duration) (*Store, error) {
	s := &Store{kinds: kinds, signer: templates, informers: map[*ray.Kind]cache.SharedIndexInformer{},
		instances: map[*ray.Kind]namespaced[*Item]{}, templated: map[*ray.Kind]namespaced[*Item]{}, ordered: map[*ray.Kind]*views{},
		active: map[*ray.Kind]map[string]int{}, waiting: map[*ray.Kind]namespaced[ray.Resources]{}, feeds: map[*ray.Kind]*feed{}, notify: newNotifier(), epoch: newEpoch(), manifests: newManifests()}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, resync)
	s.optional = map[*ray.Kind]*optionalInformer{}
	for _, k := range kinds.All() {
		s.instances[k], s.templated[k], s.ordered[k] = namespaced[*Item]{}, namespaced[*Item]{}, newViews()
		s.active[k] = map[string]int{}
		s.waiting[k] = namespaced[ray.Resources]{}
		s.feeds[k] = newFeed(FeedWindow, FeedBytes)
		var inf cache.SharedIndexInformer
		if k.Optional {
			// Not the factory's: its Start would list a resource the cluster may not have.
			inf = dynamicinformer.NewFilteredDynamicInformer(dyn, k.GVR(), metav1.NamespaceAll, resync,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
			s.optional[k] = &optionalInformer{inf: inf}
		} else {
			inf = df.ForResource(k.GVR()).Informer()
		}
		if err := inf.SetTransform(s.entryTransform(k)); err != nil {
			return nil, err
		}
		// Which entries a pod change concerns: those running on the pod's Ray cluster. A Ray cluster
		// is found by its own key, without an index.
		if k.IsCluster {
			s.informers[k] = inf
			continue
		}
		if err := inf.AddIndexers(cache.Indexers{entriesByClusterIndex: func(obj any) ([]string, error) {
			e, ok := obj.(*Entry)
			if !ok {
				return nil, nil
			}
			keys := []string{}
			for _, c := range k.Clusters(e.Summary()) {
				keys = append(keys, e.Namespace+"/"+c)
			}
			return keys, nil
		}}); err != nil {
			return nil, err
		}
		s.informers[k] = inf
	}
	if err := s.indexRuns(); err != nil {
		return nil, err
	}
	s.groups = newQueueGroups(dyn)
	if err := s.followGroups(); err != nil {
		return nil, err
	}
	pf := informers.NewSharedInformerFactoryWithOptions(core, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ray.RayNodeLabel + "=yes" }))
	s.pods = pf.Core().V1().Pods().Informer()
	if err := s.pods.SetTransform(trimPod); err != nil {
		return nil, err
	}
	if err := s.pods.AddIndexers(cache.Indexers{podsByClusterIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels[ray.RayClusterLabel] == "" {
			return nil, nil
		}
		return []string{p.Namespace + "/" + p.Labels[ray.RayClusterLabel]}, nil
	}}); err != nil {
		return nil, err
	}
	s.warnings = newWarningCache(func(kind string) bool { return kind == "Pod" || kinds.ByKind(kind) != nil }, s.warningChanged,
		MaxWarnings, MaxWarningsPerNamespace, MaxWarningBytes)
	warnings := warningReflector(core, s.warnings, resync)
	tf := informers.NewSharedInformerFactoryWithOptions(core, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ray.TemplateLabel + "=true" }))
	s.templates = tf.Core().V1().ConfigMaps().Informer()
	if err := s.templates.SetTransform(templateTransform(kinds, templates)); err != nil {
		return nil, err
	}
	if err := s.addHandlers(); err != nil {
		return nil, err
	}
	nodes, err := s.followNodes(core)
	if err != nil {
		return nil, err
	}
	if s.dra, err = s.newDRA(core, resync); err != nil {
		return nil, err
	}
	if err := s.countWatchErrors(); err != nil {
		return nil, err
	}
	s.start = []func(<-chan struct{}){nodes, df.Start, pf.Start, tf.Start, func(stop <-chan struct{}) { go warnings.Run(stop) }}
	return s, nil
}

// indexRuns indexes the runs of each kind that makes runs by their maker, and notes which kinds make
// the runs of which.
func (s *Store) indexRuns() error {
	s.makers = map[*ray.Kind][]*ray.Kind{}
	for _, mk := range s.kinds.All() {
		if mk.Runs == nil {
			continue
		}
		rk, ok := s.kinds.Lookup(mk.Runs.Resource)
		if !ok {
			continue
		}
		label := mk.Runs.Label
		if err := s.informers[rk].AddIndexers(cache.Indexers{runsIndexPrefix + mk.Resource: func(obj any) ([]string, error) {
			e, ok := obj.(*Entry)
			if !ok || e.item == nil || e.item.Labels.Get(label) == "" {
				return nil, nil
			}
			return []string{e.Namespace + "/" + e.item.Labels.Get(label)}, nil
		}}); err != nil {
			return err
		}
		s.makers[rk] = append(s.makers[rk], mk)
	}
	return nil
}

// Start runs the informers until ctx ends; those of optional kinds once their CRD is found.
func (s *Store) Start(ctx context.Context) {
	s.mu.Lock()
	s.stop = ctx.Done()
	s.mu.Unlock()
	for _, f := range s.start {
		f(ctx.Done())
	}
	if s.dra.installed.Load() && s.dra.started.CompareAndSwap(false, true) {
		s.runDRA(ctx.Done())
	}
	for _, o := range s.optional {
		if o.installed.Load() {
			o.run(ctx.Done())
		}
	}
}

// optionalInformer is the informer of an optional kind.
type optionalInformer struct {
	inf       cache.SharedIndexInformer
	handled   cache.ResourceEventHandlerRegistration
	installed atomic.Bool
	once      sync.Once
}

func (o *optionalInformer) run(stop <-chan struct{}) { o.once.Do(func() { go o.inf.Run(stop) }) }

// SetInstalled tells the store whether the cluster has the CRD of optional kind k now: its informer is
// started the first time it has (and runs from then on: objects of a CRD deleted are deleted first, and
// the informer lists again when it comes back). Required kinds are always installed.
func (s *Store) SetInstalled(k *ray.Kind, installed bool) {
	o := s.optional[k]
	if o == nil {
		return
	}
	o.installed.Store(installed)
	s.mu.RLock()
	stop := s.stop
	s.mu.RUnlock()
	if installed && stop != nil {
		o.run(stop)
	}
}

// Serves tells whether the store serves kind k: a required kind always; an optional one while its CRD
// is installed, once its informer has listed.
func (s *Store) Serves(k *ray.Kind) bool {
	o := s.optional[k]
	return o == nil || (o.installed.Load() && o.handled != nil && o.handled.HasSynced())
}

// HasSynced tells whether every informer has listed once and its handlers have published what it listed.
func (s *Store) HasSynced() bool {
	if !s.warnings.synced.Load() {
		return false
	}
	for _, h := range s.handled {
		if !h.HasSynced() {
			return false
		}
	}
	for _, k := range s.kinds.All() { // what the informers listed, sorted before the first list asks
		s.sortViews(k)
	}
	return true
}

// WaitForSync blocks until the store has synced or ctx ends.
func (s *Store) WaitForSync(ctx context.Context) bool {
	syncs := make([]cache.InformerSynced, 0, len(s.handled)+1)
	syncs = append(syncs, s.warnings.synced.Load)
	for _, h := range s.handled {
		syncs = append(syncs, h.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), syncs...)
}

// addHandlers publishes items as objects, pods and templates change.
func (s *Store) addHandlers() error {
	for k, inf := range s.informers {
		h, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.publishInstance(k, obj) },
			UpdateFunc: func(_, obj any) { s.publishInstance(k, obj) },
			DeleteFunc: func(obj any) { s.unpublishInstance(k, obj) },
		})
		if err != nil {
			return err
		}
		if o := s.optional[k]; o != nil {
			o.handled = h // the store syncs without it (see Serves)
			continue
		}
		s.handled = append(s.handled, h)
	}
	h, err := s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.podChanged,
		UpdateFunc: func(_, obj any) { s.podChanged(obj) },
		DeleteFunc: func(obj any) {
			s.podDeleted(obj)
			s.podChanged(obj)
		},
	})
	if err != nil {
		return err
	}
	s.handled = append(s.handled, h)
	h, err = s.templates.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.templateChanged(nil, obj) },
		UpdateFunc: s.templateChanged,
		DeleteFunc: func(obj any) { s.templateChanged(obj, nil) },
	})
	if err != nil {
		return err
	}
	s.handled = append(s.handled, h)
	return nil
}

func (s *Store) publishInstance(k *ray.Kind, obj any) {
	e, ok := obj.(*Entry)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.putInstanceLocked(k, e) {
		s.notify.Notify()
	}
}

// putInstanceLocked publishes an entry's summary, completed with its Ray cluster's pods as of now, and
// tells whether that changed what is published.
func (s *Store) putInstanceLocked(k *ray.Kind, e *Entry) bool {
	item := e.item
	sum := s.withRunsLocked(k, s.withPods(k, &e.item.Summary))
	sum = k.WithScheduling(sum, s.schedulingLocked(k, sum))
	sum = s.valued(k, sum)
	if sum = ray.WithIdle(sum, s.idleLocked(k, sum)); sum != &e.item.Summary {
		item = newItem(*sum, e.item.Labels)
		item.IdleStopAfter, item.UID, item.MadeBy, item.Makes = e.item.IdleStopAfter, e.item.UID, e.item.MadeBy, e.item.Makes
	}
	old, _ := s.instances[k].get(e.Namespace, e.Name)
	if sameItem(old, item) {
		return false
	}
	tpl, _ := s.templated[k].get(e.Namespace, e.Name)
	s.feeds[k].record(e.Namespace, e.Name, old, tpl)
	s.instances[k].put(e.Namespace, e.Name, item)
	s.ordered[k].replace(old, item)
	s.countActiveLocked(k, e.Namespace, old, item)
	s.countWaitingLocked(k, item)
	s.runChangedLocked(k, e.Namespace, old, item)
	if s.requests != nil && k.IsCluster && (old == nil || !reflect.DeepEqual(old.Summary.Requested, item.Summary.Requested)) {
		s.requests.Requested(e.UID, item.Summary.Requested)
	}
	return true
}

// withRunsLocked returns the summary of an object of a kind that makes runs completed by its runs as
// published: base itself for any other kind.
func (s *Store) withRunsLocked(k *ray.Kind, base *ray.Summary) *ray.Summary {
	if k.Runs == nil {
		return base
	}
	rk, ok := s.kinds.Lookup(k.Runs.Resource)
	if !ok {
		return base
	}
	objs, _ := s.informers[rk].GetIndexer().ByIndex(runsIndexPrefix+k.Resource, base.Namespace+"/"+base.Name)
	runs := make([]*ray.Summary, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*Entry); ok {
			if it, ok := s.instances[rk].get(e.Namespace, e.Name); ok {
				runs = append(runs, &it.Summary)
			}
		}
	}
	return k.WithRuns(base, runs)
}

// runChangedLocked publishes again the makers of a run of kind rk that went from old to now (nil:
// none): their summaries count it.
func (s *Store) runChangedLocked(rk *ray.Kind, ns string, old, now *Item) {
	for _, mk := range s.makers[rk] {
		var owners []string
		for _, it := range []*Item{old, now} {
			if it != nil {
				if o := it.Labels.Get(mk.Runs.Label); o != "" && !slices.Contains(owners, o) {
					owners = append(owners, o)
				}
			}
		}
		for _, o := range owners {
			if obj, found, _ := s.informers[mk].GetIndexer().GetByKey(ns + "/" + o); found {
				if e, ok := obj.(*Entry); ok {
					s.putInstanceLocked(mk, e)
				}
			}
		}
	}
}

func (s *Store) unpublishInstance(k *ray.Kind, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, ok := obj.(*Entry)
	if !ok {
		return
	}
	s.manifests.forget(k, e.Namespace, e.Name, false)
	if s.observer != nil {
		var pods []corev1.Pod
		if sum := e.Summary(); sum != nil {
			now := time.Now()
			for _, c := range k.Clusters(sum) {
				held := map[string]bool{}
				for _, p := range s.ClusterPods(e.Namespace, c) {
					pods = append(pods, *p)
					held[p.Name] = true
				}
				// Those the garbage collector deleted before the cache saw the cluster go.
				for _, p := range s.gone.of(e.Namespace+"/"+c, e.CreationTimestamp.Time, now) {
					if !held[p.Name] {
						pods = append(pods, *p)
						held[p.Name] = true
					}
				}
			}
		}
		s.observer.Gone(k, e, pods)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.instances[k].get(e.Namespace, e.Name); ok {
		tpl, _ := s.templated[k].get(e.Namespace, e.Name)
		s.feeds[k].record(e.Namespace, e.Name, old, tpl)
		s.instances[k].remove(e.Namespace, e.Name)
		s.ordered[k].replace(old, nil)
		s.countActiveLocked(k, e.Namespace, old, nil)
		s.waiting[k].remove(e.Namespace, e.Name)
		s.runChangedLocked(k, e.Namespace, old, nil)
		s.notify.Notify()
	}
}

// countActiveLocked keeps the count of k's active instances in ns as an instance there goes from old to
// now (nil: none).
func (s *Store) countActiveLocked(k *ray.Kind, ns string, old, now *Item) {
	n := s.active[k][ns]
	if old != nil && k.Active(old.Summary.Status) {
		n--
	}
	if now != nil && k.Active(now.Summary.Status) {
		n++
	}
	if n == 0 {
		delete(s.active[k], ns)
	} else {
		s.active[k][ns] = n
	}
}

// podDeleted keeps a Ray pod deleted for a while (gonePods).
func (s *Store) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok && p.Labels[ray.RayClusterLabel] != "" {
		s.gone.add(p.Namespace+"/"+p.Labels[ray.RayClusterLabel], p, time.Now())
	}
}

// podChanged publishes again every object that runs on the pod's Ray cluster.
func (s *Store) podChanged(obj any) {
	s.podsSeq.Add(1)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[ray.RayClusterLabel] == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusterChangedLocked(p.Namespace, p.Labels[ray.RayClusterLabel])
	// A pod change is a change of the overview's allocated figures and of pod lists, even when no
	// summary changes.
	s.notify.Notify()
}

// warningChanged publishes again what the Warning events about ns/kind/name are about: the object
// itself, or whatever runs on the Ray cluster it names or whose pod it names.
func (s *Store) warningChanged(ns, kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case "Pod":
		o, found, _ := s.pods.GetIndexer().GetByKey(ns + "/" + name)
		if p, ok := o.(*corev1.Pod); found && ok && p.Labels[ray.RayClusterLabel] != "" {
			s.clusterChangedLocked(ns, p.Labels[ray.RayClusterLabel])
		}
	case s.kinds.Cluster().Kind:
		s.clusterChangedLocked(ns, name)
	default:
		k := s.kinds.ByKind(kind)
		if k == nil {
			return
		}
		o, found, _ := s.informers[k].GetIndexer().GetByKey(ns + "/" + name)
		if en, ok := o.(*Entry); found && ok && s.putInstanceLocked(k, en) {
			s.notify.Notify()
		}
	}
}

// clusterChangedLocked publishes again every object that runs on the Ray cluster ns/cluster.
func (s *Store) clusterChangedLocked(ns, cluster string) {
	key := ns + "/" + cluster
	changed := false
	for k, inf := range s.informers {
		var objs []any
		if k.IsCluster {
			if o, ok, _ := inf.GetIndexer().GetByKey(key); ok {
				objs = []any{o}
			}
		} else {
			objs, _ = inf.GetIndexer().ByIndex(entriesByClusterIndex, key)
		}
		for _, o := range objs {
			if e, ok := o.(*Entry); ok && s.putInstanceLocked(k, e) {
				changed = true
			}
		}
	}
	if changed {
		s.notify.Notify()
	}
}

// templateChanged publishes a template under its object's name, in place of what old published. A
// ConfigMap that is no readable template of a known kind publishes nothing.
func (s *Store) templateChanged(old, obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, e := s.templateEntry(old); k != nil {
		s.templateReplacedLocked(k, e.Namespace, e.item.Summary.Name)
		s.templated[k].remove(e.Namespace, e.item.Summary.Name)
	}
	if k, e := s.templateEntry(obj); k != nil {
		s.templateReplacedLocked(k, e.Namespace, e.item.Summary.Name)
		s.templated[k].put(e.Namespace, e.item.Summary.Name, e.item)
	}
	s.notify.Notify()
}

// templateReplacedLocked records that the template of ns/name is about to change.
func (s *Store) templateReplacedLocked(k *ray.Kind, ns, name string) {
	inst, _ := s.instances[k].get(ns, name)
	tpl, _ := s.templated[k].get(ns, name)
	s.feeds[k].record(ns, name, inst, tpl)
}

func (s *Store) templateEntry(obj any) (*ray.Kind, *Entry) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, ok := obj.(*Entry)
	if !ok {
		return nil, nil
	}
	return s.kinds.ByKind(e.Kind), e
}

// Valued is a summary's requests valued on what the cache knows now, as the store publishes them: its
// estimated device equivalents on the nodes' word, its templates' resource claims counted, and its
// pods' claims where they hold more (withPodClaims). The observer is told of each version so valued: a
// version valued on its templates alone would bill a cluster whose pods' claims hold more as its
// templates say, and the store tells it again only where the requests it publishes change.
func (s *Store) Valued(sum *ray.Summary) *ray.Summary {
	if k := s.kinds.ByKind(sum.Kind); k != nil {
		return s.valued(k, sum)
	}
	return s.withClaims(s.withDevices(sum))
}

// valued is Valued of a summary of kind k: what every summary the store publishes or completes is
// valued by, and what its observer is told.
func (s *Store) valued(k *ray.Kind, sum *ray.Summary) *ray.Summary {
	return s.withPodClaims(k, s.withClaims(s.withDevices(sum)))
}

// summarize is k's summary of o, with whether the service signed its creator.
func (s *Store) summarize(k *ray.Kind, o *unstructured.Unstructured) ray.Summary {
	sum := k.Summarize(o)
	sum.CreatorSigned = s.signer.CreatorSigned(k, o)
	return sum
}

// Summarize computes the whole summary of an object read from the apiserver, as the store would publish
// it: from the object, and from the cached pods of its Ray cluster.
func (s *Store) Summarize(k *ray.Kind, o *unstructured.Unstructured) ray.Summary {
	base := s.summarize(k, o)
	return *s.complete(k, &base)
}

// complete is the summary base completed by what the cache holds of its pods, warnings, runs and
// queue manager.
func (s *Store) complete(k *ray.Kind, base *ray.Summary) *ray.Summary {
	sum := s.withPods(k, base)
	s.mu.RLock()
	defer s.mu.RUnlock()
	sum = s.withRunsLocked(k, sum)
	sum = k.WithScheduling(sum, s.schedulingLocked(k, sum))
	sum = s.valued(k, sum)
	return ray.WithIdle(sum, s.idleLocked(k, sum))
}

// SummarizeManifest is Summarize of a manifest the cache keeps (see Manifest). A kept manifest is
// what the apiserver stored at its resource version, so where the informer's entry is of the same
// version, the summary the entry was made with is that manifest's, and is not made again. (An object
// of the same version from elsewhere, such as a dry run's answer, may differ: it is summarized anew.)
func (s *Store) SummarizeManifest(k *ray.Kind, m *Manifest) ray.Summary {
	e := s.entry(k, m.GetNamespace(), m.GetName())
	if e == nil || e.item == nil || e.ResourceVersion != m.GetResourceVersion() {
		return s.Summarize(k, m.Unstructured)
	}
	base := e.item.Summary
	return *s.complete(k, &base)
}

// withPods returns the summary completed by what the pods of the object's current Ray cluster say,
// and by the Warning events about the object, its clusters and those pods: base itself when they add
// nothing.
func (s *Store) withPods(k *ray.Kind, base *ray.Summary) *ray.Summary {
	cluster := k.CurrentCluster(base)
	var pods []*corev1.Pod
	if cluster != "" {
		pods = s.ClusterPods(base.Namespace, cluster)
	}
	var warnings []ray.Problem
	k.WarningSources(base, pods, func(ref ray.InvolvedObjectRef) {
		warnings = append(warnings, s.warningsAbout(base.Namespace, ref)...)
	})
	if cluster == "" && len(warnings) == 0 {
		return base
	}
	return k.WithPods(base, pods, warnings)
}

// warningsAbout returns the Warning events about one object as problems, newest first.
func (s *Store) warningsAbout(ns string, ref ray.InvolvedObjectRef) []ray.Problem {
	return s.warnings.about(ns, ref)
}

// ClusterPods returns the cached pods of one Ray cluster.
func (s *Store) ClusterPods(namespace, cluster string) []*corev1.Pod {
	objs, _ := s.pods.GetIndexer().ByIndex(podsByClusterIndex, namespace+"/"+cluster)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// podsIn returns every cached Ray pod in the scope matching the selector (nil: all).
func (s *Store) podsIn(scope auth.Scope, sel labels.Selector) []*corev1.Pod {
	var all []*corev1.Pod
	if scope.IsAll() {
		all = fromIndex[*corev1.Pod](s.pods, "")
	} else {
		for _, ns := range scope.List() {
			all = append(all, fromIndex[*corev1.Pod](s.pods, ns)...)
		}
	}
	if sel == nil {
		return all
	}
	return slices.DeleteFunc(all, func(p *corev1.Pod) bool { return !sel.Matches(labels.Set(p.Labels)) })
}

// clusterItem returns the published RayCluster of that name.
func (s *Store) clusterItem(ns, name string) (*Item, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.instances[s.kinds.Cluster()].get(ns, name)
}

// CheckInstalled asks the apiserver which optional kinds it serves now (discovery of the Ray group,
// which needs no rights) and tells the store (SetInstalled); it returns the kinds whose presence changed,
// each with whether it is installed now.
func (s *Store) CheckInstalled(disc discovery.DiscoveryInterface) (map[*ray.Kind]bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(ray.RayGroupVersion.String())
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	s.checkGroups(disc)
	s.checkDRA(disc)
	changed := map[*ray.Kind]bool{}
	for _, k := range s.kinds.All() {
		if o := s.optional[k]; o != nil {
			if o.installed.Load() != have[k.Resource] {
				changed[k] = have[k.Resource]
			}
			s.SetInstalled(k, have[k.Resource])
		}
	}
	return changed, nil
}

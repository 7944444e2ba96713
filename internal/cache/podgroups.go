package cache

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/ray"
)

// podGroups follows Volcano's PodGroups, where the cluster has their CRD (asked with the optional
// kinds, see CheckInstalled): what each says of the Ray object it belongs to, by namespace, owner kind
// and owner name. The state is guarded by the store's mu.
type podGroups struct {
	inf       cache.SharedIndexInformer
	installed atomic.Bool
	started   atomic.Bool
	byOwner   map[string]*ray.Scheduling
}

func newPodGroups(dyn dynamic.Interface) *podGroups {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, ray.PodGroupResource(), metav1.NamespaceAll, 0,
		cache.Indexers{}, nil).Informer()
	return &podGroups{inf: inf, byOwner: map[string]*ray.Scheduling{}}
}

// followPodGroups publishes again the owner of each PodGroup that changes.
func (s *Store) followPodGroups() error {
	// Only what the summaries read is kept of a PodGroup.
	if err := s.groups.inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		kind, name := ray.PodGroupOwner(u)
		return &groupEntry{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(),
			ResourceVersion: u.GetResourceVersion()}, kind: kind, owner: name, state: ray.PodGroupState(u)}, nil
	}); err != nil {
		return err
	}
	_, err := s.groups.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podGroupChanged(nil, obj) },
		UpdateFunc: s.podGroupChanged,
		DeleteFunc: func(obj any) { s.podGroupChanged(obj, nil) },
	})
	return err
}

// groupEntry is what the cache keeps of a PodGroup.
type groupEntry struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	kind, owner string
	state       *ray.Scheduling
}

// DeepCopyObject implements runtime.Object; the state is never changed once made.
func (g *groupEntry) DeepCopyObject() runtime.Object {
	c := *g
	g.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func asGroup(obj any) *groupEntry {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	g, _ := obj.(*groupEntry)
	return g
}

// podGroupChanged records a PodGroup's state under its owner and publishes the owner again: a Ray
// cluster with everything that runs on it, or the RayJob it belongs to.
func (s *Store) podGroupChanged(old, now any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range []*groupEntry{asGroup(old), asGroup(now)} {
		if g == nil || g.owner == "" {
			continue
		}
		key := involvedKey(g.Namespace, g.kind, g.owner)
		if g == asGroup(now) {
			s.groups.byOwner[key] = g.state
		} else {
			delete(s.groups.byOwner, key)
		}
		s.ownerChangedLocked(g.Namespace, g.kind, g.owner)
	}
}

// ownerChangedLocked publishes again the Ray object ns/kind/name and, for a Ray cluster, what runs on it.
func (s *Store) ownerChangedLocked(ns, kind, name string) {
	if kind == s.kinds.Cluster().Kind {
		s.clusterChangedLocked(ns, name)
		return
	}
	k := s.kinds.ByKind(kind)
	if k == nil {
		return
	}
	if o, found, _ := s.informers[k].GetIndexer().GetByKey(ns + "/" + name); found {
		if e, ok := o.(*Entry); ok && s.putInstanceLocked(k, e) {
			s.notify.Notify()
		}
	}
}

// schedulingLocked is where an object stands with its queue manager: its own PodGroup, else that of
// the Ray cluster it runs on (a RayService's); nil when none.
func (s *Store) schedulingLocked(k *ray.Kind, sum *ray.Summary) *ray.Scheduling {
	if len(s.groups.byOwner) == 0 {
		return nil
	}
	if st := s.groups.byOwner[involvedKey(sum.Namespace, k.Kind, sum.Name)]; st != nil {
		return st
	}
	if c := k.CurrentCluster(sum); c != "" && !k.IsCluster {
		return s.groups.byOwner[involvedKey(sum.Namespace, s.kinds.Cluster().Kind, c)]
	}
	return nil
}

// checkPodGroups starts following PodGroups the first time discovery finds their CRD, and tells
// whether it is installed now.
func (s *Store) checkPodGroups(disc discovery.DiscoveryInterface) bool {
	gv := ray.PodGroupResource().GroupVersion().String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	have := false
	if err == nil {
		for _, r := range list.APIResources {
			have = have || r.Name == ray.PodGroupResource().Resource
		}
	}
	s.groups.installed.Store(have)
	s.mu.RLock()
	stop := s.stop
	s.mu.RUnlock()
	if have && stop != nil && s.groups.started.CompareAndSwap(false, true) {
		go s.groups.inf.Run(stop)
	}
	return have
}

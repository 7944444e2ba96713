package cache

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/ray"
)

// queueGroups follows the queue managers' groups of Ray objects where the cluster serves their resource
// (asked with discovery, see checkGroups): Volcano's PodGroups, Kueue's Workloads and Kubernetes'
// PodGroups. byOwner is what each manager says of the Ray object its group belongs to, by namespace, owner
// kind and owner name, then by manager, guarded by the store's mu.
type queueGroups struct {
	followed []*followed
	byOwner  map[string]map[string]*ray.Scheduling
}

// followed is one resource of groups: its informer, and how an object of it reads. Resources of one
// family are versions of the same objects, preferred first: only the first the cluster serves is followed.
type followed struct {
	gvr       schema.GroupVersionResource
	family    string
	owner     func(u *unstructured.Unstructured) (kind, name string)
	read      func(u *unstructured.Unstructured) *ray.Scheduling
	inf       cache.SharedIndexInformer
	installed atomic.Bool
	started   atomic.Bool
}

func newQueueGroups(dyn dynamic.Interface) *queueGroups {
	g := &queueGroups{byOwner: map[string]map[string]*ray.Scheduling{}}
	all := []*followed{{gvr: ray.PodGroupResource(), owner: ray.GroupOwner, read: ray.PodGroupState},
		{gvr: ray.WorkloadResource(), owner: ray.GroupOwner, read: ray.WorkloadState}}
	for _, gvr := range ray.GangPodGroupResources() {
		all = append(all, &followed{gvr: gvr, family: ray.ManagerKubernetes, owner: ray.GangPodGroupOwner, read: ray.GangPodGroupState})
	}
	for _, f := range all {
		f.inf = dynamicinformer.NewFilteredDynamicInformer(dyn, f.gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		g.followed = append(g.followed, f)
	}
	return g
}

// followGroups publishes again the owner of each group that changes.
func (s *Store) followGroups() error {
	for _, f := range s.groups.followed {
		// Only what the summaries read is kept of a group.
		if err := f.inf.SetTransform(func(obj any) (any, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return obj, nil
			}
			kind, name := f.owner(u)
			return &groupEntry{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(),
				ResourceVersion: u.GetResourceVersion()}, kind: kind, owner: name, state: f.read(u)}, nil
		}); err != nil {
			return err
		}
		if _, err := f.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.groupChanged(nil, obj) },
			UpdateFunc: s.groupChanged,
			DeleteFunc: func(obj any) { s.groupChanged(obj, nil) },
		}); err != nil {
			return err
		}
	}
	return nil
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

// groupChanged records a group's state under its owner and publishes the owner again: a Ray
// cluster with everything that runs on it, or the RayJob it belongs to.
func (s *Store) groupChanged(old, now any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range []*groupEntry{asGroup(old), asGroup(now)} {
		if g == nil || g.owner == "" {
			continue
		}
		key := involvedKey(g.Namespace, g.kind, g.owner)
		if g == asGroup(now) {
			if s.groups.byOwner[key] == nil {
				s.groups.byOwner[key] = map[string]*ray.Scheduling{}
			}
			s.groups.byOwner[key][g.state.Manager] = g.state
		} else if byManager := s.groups.byOwner[key]; byManager[g.state.Manager] != nil &&
			byManager[g.state.Manager].Group == g.state.Group {
			// Only the group that stands for the owner is forgotten with it: another of the same
			// manager and owner going (one anyone who may make groups made) leaves it be.
			delete(byManager, g.state.Manager)
			if len(byManager) == 0 {
				delete(s.groups.byOwner, key)
			}
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

// schedulingLocked is where an object stands with its queue manager: its own group, else that of the
// Ray cluster it runs on (a RayService's, a RayJob's under Kubernetes' gang scheduling); nil when none.
// Of several managers' groups, ray.PickScheduling chooses.
func (s *Store) schedulingLocked(k *ray.Kind, sum *ray.Summary) *ray.Scheduling {
	if len(s.groups.byOwner) == 0 {
		return nil
	}
	if st := ray.PickScheduling(s.groups.byOwner[involvedKey(sum.Namespace, k.Kind, sum.Name)]); st != nil {
		return st
	}
	if c := k.CurrentCluster(sum); c != "" && !k.IsCluster {
		return ray.PickScheduling(s.groups.byOwner[involvedKey(sum.Namespace, s.kinds.Cluster().Kind, c)])
	}
	return nil
}

// checkGroups starts following each kind of group the first time discovery finds its resource served;
// of a family, only the first version served (or the one already followed).
func (s *Store) checkGroups(disc discovery.DiscoveryInterface) {
	s.mu.RLock()
	stop := s.stop
	s.mu.RUnlock()
	taken := map[string]bool{}
	for _, f := range s.groups.followed {
		if f.family != "" && f.started.Load() {
			taken[f.family] = true
		}
	}
	for _, f := range s.groups.followed {
		if f.family != "" && taken[f.family] && !f.started.Load() {
			f.installed.Store(false)
			continue
		}
		list, err := disc.ServerResourcesForGroupVersion(f.gvr.GroupVersion().String())
		have := false
		if err == nil {
			for _, r := range list.APIResources {
				have = have || r.Name == f.gvr.Resource
			}
		}
		f.installed.Store(have)
		if have && f.family != "" {
			taken[f.family] = true
		}
		if have && stop != nil && f.started.CompareAndSwap(false, true) {
			go f.inf.Run(stop)
		}
	}
}

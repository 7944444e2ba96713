// Package queues holds the queues of the queue managers that admit Ray work, read as the caller, and the
// Ray objects waiting in each: Volcano's Queues (scheduling.volcano.sh/v1beta1, cluster-scoped;
// volcano.sh/apis v1.13.0 pkg/apis/scheduling/v1beta1/types.go) and Kueue's LocalQueues
// (kueue.x-k8s.io/v1beta2, namespaced; sigs.k8s.io/kueue v0.17.0 apis/kueue/v1beta2/localqueue_types.go).
package queues

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"ray-service/internal/ray"
)

// LocalQueueResource is the resource of Kueue's LocalQueues.
func LocalQueueResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
}

// VolcanoResource is the resource of Volcano's Queues.
func VolcanoResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
}

// Queue is one queue: what it may hold and holds, and the Ray objects waiting in it.
type Queue struct {
	// Manager is the queue manager: volcano or kueue.
	Manager string `json:"manager" enums:"volcano,kueue"`
	// Namespace is a Kueue LocalQueue's; Volcano's queues have none.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// ClusterQueue is the Kueue ClusterQueue a LocalQueue submits to.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Workloads counts a LocalQueue's Workloads: pending, reserving quota, admitted.
	Workloads *WorkloadCounts `json:"workloads,omitempty"`
	// Usage is what a LocalQueue's admitted Workloads use, by flavor and resource.
	Usage map[string]map[string]string `json:"usage,omitempty"`
	// Quota is what a LocalQueue's ClusterQueue may admit and admits, for a caller who may read
	// ClusterQueues.
	Quota *ClusterQuota `json:"quota,omitempty"`
	// State is Volcano's: Open, Closed, Closing or Unknown.
	State  string `json:"state,omitempty"`
	Weight int64  `json:"weight,omitempty"`
	// Capability, Deserved and Guarantee bound what the queue holds; Allocated is what its running
	// PodGroups hold now. Quantities as Kubernetes writes them, by resource name.
	Capability map[string]string `json:"capability,omitempty"`
	Deserved   map[string]string `json:"deserved,omitempty"`
	Guarantee  map[string]string `json:"guarantee,omitempty"`
	Allocated  map[string]string `json:"allocated,omitempty"`
	// PodGroups counts its PodGroups by phase.
	PodGroups *GroupCounts `json:"podGroups,omitempty"`
	// Waiting are the Ray objects the caller may list that wait in it, by kind, namespace and name.
	Waiting []Waiting `json:"waiting"`
	// Withheld says why the figures are left out: the caller may not list the queues.
	Withheld string `json:"withheld,omitempty"`
}

// ClusterQuota is a Kueue ClusterQueue's quota and use (kueue v0.17.0 apis/kueue/v1beta2/clusterqueue_types.go),
// shared by all the LocalQueues that submit to it. Quantities as Kubernetes writes them, by flavor and
// resource.
type ClusterQuota struct {
	// Nominal is each flavor's nominal quota (spec.resourceGroups[].flavors[].resources[].nominalQuota).
	Nominal map[string]map[string]string `json:"nominal"`
	// Usage is what its admitted Workloads use (status.flavorsUsage).
	Usage map[string]map[string]string `json:"usage,omitempty"`
	// Workloads counts its Workloads, of all its LocalQueues.
	Workloads WorkloadCounts `json:"workloads"`
}

// ClusterQueueResource is the resource of Kueue's ClusterQueues.
func ClusterQueueResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
}

// FromClusterQueue reads a Kueue ClusterQueue.
func FromClusterQueue(u *unstructured.Unstructured) *ClusterQuota {
	q := &ClusterQuota{Nominal: map[string]map[string]string{}}
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		flavors, _ := gm["flavors"].([]any)
		for _, f := range flavors {
			fm, _ := f.(map[string]any)
			addQuantities(q.Nominal, fm, "nominalQuota")
		}
	}
	q.Usage, q.Workloads = kueueStatus(u)
	return q
}

// kueueStatus reads what a LocalQueue's or a ClusterQueue's status says alike: the use of its admitted
// Workloads by flavor and resource (flavorsUsage; nil where none), and its Workloads by state.
func kueueStatus(u *unstructured.Unstructured) (map[string]map[string]string, WorkloadCounts) {
	var usage map[string]map[string]string
	flavors, _, _ := unstructured.NestedSlice(u.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		fm, _ := f.(map[string]any)
		if usage == nil {
			usage = map[string]map[string]string{}
		}
		addQuantities(usage, fm, "total")
	}
	var w WorkloadCounts
	w.Pending, _, _ = unstructured.NestedInt64(u.Object, "status", "pendingWorkloads")
	w.Reserving, _, _ = unstructured.NestedInt64(u.Object, "status", "reservingWorkloads")
	w.Admitted, _, _ = unstructured.NestedInt64(u.Object, "status", "admittedWorkloads")
	return usage, w
}

// addQuantities adds to into[flavor] the quantity field of each of a flavor's resources (Kueue's
// {name, resources: [{name, <field>}]}).
func addQuantities(into map[string]map[string]string, flavor map[string]any, field string) {
	name, _ := flavor["name"].(string)
	rs, _ := flavor["resources"].([]any)
	for _, r := range rs {
		rm, _ := r.(map[string]any)
		res, _ := rm["name"].(string)
		v, ok := rm[field].(string)
		if !ok {
			continue
		}
		if into[name] == nil {
			into[name] = map[string]string{}
		}
		into[name][res] = v
	}
}

// WorkloadCounts counts a Kueue LocalQueue's Workloads.
type WorkloadCounts struct {
	Pending   int64 `json:"pending"`
	Reserving int64 `json:"reserving"`
	Admitted  int64 `json:"admitted"`
}

// FromLocalQueue reads a Kueue LocalQueue.
func FromLocalQueue(u *unstructured.Unstructured) Queue {
	q := Queue{Manager: ray.ManagerKueue, Namespace: u.GetNamespace(), Name: u.GetName(), Waiting: []Waiting{}}
	q.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "spec", "clusterQueue")
	usage, w := kueueStatus(u)
	q.Usage, q.Workloads = usage, &w
	return q
}

// Key names a queue among all: manager, namespace (Kueue's) and name.
func Key(manager, namespace, name string) string {
	if manager != ray.ManagerKueue {
		namespace = ""
	}
	return manager + "/" + namespace + "/" + name
}

// GroupCounts counts a queue's PodGroups by phase.
type GroupCounts struct {
	Pending   int64 `json:"pending"`
	Inqueue   int64 `json:"inqueue"`
	Running   int64 `json:"running"`
	Unknown   int64 `json:"unknown"`
	Completed int64 `json:"completed"`
}

// Waiting is a Ray object the queue manager has not admitted yet.
type Waiting struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Group is its Volcano PodGroup or Kueue Workload; Phase, Reason and Message are the group's (see
	// ray.Scheduling).
	Group   string `json:"group,omitempty"`
	Phase   string `json:"phase"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Position is its Workload's place in line, where Kueue's visibility API serves it and the caller
	// may read it.
	Position *Position `json:"position,omitempty"`
}

// Position is a pending Workload's place in line as Kueue's visibility API tells it (kueue v0.17.0
// apis/visibility/v1beta2/types.go PendingWorkload): 0 is next.
type Position struct {
	InLocalQueue   int64 `json:"inLocalQueue"`
	InClusterQueue int64 `json:"inClusterQueue"`
}

// PendingWorkloadsResource is the resource whose subresource pendingworkloads is Kueue's visibility API
// of a LocalQueue (served by Kueue's own API server, aggregated; absent where it is not installed).
func PendingWorkloadsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "visibility.kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
}

// Positions reads, as the caller, the place in line of the pending Workloads of Kueue's LocalQueue
// ns/name, by Workload name: none where the visibility API is not served or the caller may not read
// it, which is no error (the queues are shown without).
func (l *Lister) Positions(ctx context.Context, token, ns, name string) (map[string]Position, error) {
	dyn, err := l.Dynamic(token)
	if err != nil {
		return nil, err
	}
	u, err := dyn.Resource(PendingWorkloadsResource()).Namespace(ns).Get(ctx, name, metav1.GetOptions{}, "pendingworkloads")
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) || apierrors.IsServiceUnavailable(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	out := map[string]Position{}
	items, _, _ := unstructured.NestedSlice(u.Object, "items")
	for _, it := range items {
		im, _ := it.(map[string]any)
		wl, _, _ := unstructured.NestedString(im, "metadata", "name")
		local, _, _ := unstructured.NestedInt64(im, "positionInLocalQueue")
		cluster, _, _ := unstructured.NestedInt64(im, "positionInClusterQueue")
		if wl != "" {
			out[wl] = Position{InLocalQueue: local, InClusterQueue: cluster}
		}
	}
	return out, nil
}

// FromVolcano reads a Volcano Queue.
func FromVolcano(u *unstructured.Unstructured) Queue {
	q := Queue{Manager: ray.ManagerVolcano, Name: u.GetName(), Waiting: []Waiting{}}
	q.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
	q.Weight, _, _ = unstructured.NestedInt64(u.Object, "spec", "weight")
	q.Capability, _, _ = unstructured.NestedStringMap(u.Object, "spec", "capability")
	q.Deserved, _, _ = unstructured.NestedStringMap(u.Object, "spec", "deserved")
	q.Guarantee, _, _ = unstructured.NestedStringMap(u.Object, "spec", "guarantee", "resource")
	q.Allocated, _, _ = unstructured.NestedStringMap(u.Object, "status", "allocated")
	c := &GroupCounts{}
	for field, n := range map[string]*int64{"pending": &c.Pending, "inqueue": &c.Inqueue, "running": &c.Running,
		"unknown": &c.Unknown, "completed": &c.Completed} {
		*n, _, _ = unstructured.NestedInt64(u.Object, "status", field)
	}
	q.PodGroups = c
	return q
}

// Lister lists the queues as a caller sees them.
type Lister struct {
	// Dynamic is the dynamic client of the caller with the token given.
	Dynamic func(token string) (dynamic.Interface, error)
}

// ErrWithheld is the text of Queue.Withheld.
const ErrWithheld = "the caller may not list queues.scheduling.volcano.sh or localqueues.kueue.x-k8s.io: only the queue's name and the objects waiting in it are shown"

// List lists Volcano's Queues and Kueue's LocalQueues as the caller: none of a manager whose CRD the
// cluster lacks; forbidden tells that the caller may list neither.
func (l *Lister) List(ctx context.Context, token string) (qs []Queue, forbidden bool, err error) {
	dyn, err := l.Dynamic(token)
	if err != nil {
		return nil, false, err
	}
	denied := 0
	for _, m := range []struct {
		gvr  schema.GroupVersionResource
		read func(*unstructured.Unstructured) Queue
	}{{VolcanoResource(), FromVolcano}, {LocalQueueResource(), FromLocalQueue}} {
		list, err := dyn.Resource(m.gvr).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			denied++
			continue
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, false, err
		}
		for i := range list.Items {
			qs = append(qs, m.read(&list.Items[i]))
		}
	}
	return withQuota(ctx, dyn, qs), denied == 2, nil
}

// withQuota adds to each LocalQueue its ClusterQueue's quota, where the caller may list ClusterQueues.
func withQuota(ctx context.Context, dyn dynamic.Interface, qs []Queue) []Queue {
	if !slices.ContainsFunc(qs, func(q Queue) bool { return q.ClusterQueue != "" }) {
		return qs
	}
	list, err := dyn.Resource(ClusterQueueResource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return qs // forbidden, or not served: the LocalQueues' own figures stand
	}
	quota := map[string]*ClusterQuota{}
	for i := range list.Items {
		quota[list.Items[i].GetName()] = FromClusterQueue(&list.Items[i])
	}
	for i := range qs {
		if qs[i].Manager == ray.ManagerKueue {
			qs[i].Quota = quota[qs[i].ClusterQueue]
		}
	}
	return qs
}

// WithWaiting adds to the queues each waiting object, in the queue its scheduling names; a queue named
// by a waiting object but not listed (the caller may not list queues) is added with its name alone.
// Queues and their waiting objects are ordered by name.
func WithWaiting(qs []Queue, waiting map[string][]Waiting, withheld bool) []Queue {
	byName := map[string]int{}
	for i, q := range qs {
		byName[Key(q.Manager, q.Namespace, q.Name)] = i
	}
	for key, ws := range waiting {
		i, ok := byName[key]
		if !ok {
			parts := strings.SplitN(key, "/", 3)
			q := Queue{Manager: parts[0], Namespace: parts[1], Name: parts[2]}
			if withheld {
				q.Withheld = ErrWithheld
			}
			qs = append(qs, q)
			i = len(qs) - 1
			byName[key] = i
		}
		qs[i].Waiting = append(qs[i].Waiting, ws...)
	}
	for i := range qs {
		if qs[i].Waiting == nil {
			qs[i].Waiting = []Waiting{}
		}
		slices.SortFunc(qs[i].Waiting, func(a, b Waiting) int {
			return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
		})
	}
	slices.SortFunc(qs, func(a, b Queue) int {
		return strings.Compare(Key(a.Manager, a.Namespace, a.Name), Key(b.Manager, b.Namespace, b.Name))
	})
	return qs
}

// Use finds the queue name that the caller may put Ray work in, in namespace ns: a Volcano Queue that
// is open, or a Kueue LocalQueue of ns, read as the caller; manager (volcano or kueue) says where to
// look, "" in both. It answers the manager of the queue found, or an error to answer the caller with:
// Invalid (422, field queue) when there is no such queue, it is closed, or both managers have one of
// that name; the apiserver's Forbidden (403) when none is found and the caller may not read one.
func (l *Lister) Use(ctx context.Context, token, ns, manager, name string) (string, error) {
	dyn, err := l.Dynamic(token)
	if err != nil {
		return "", err
	}
	invalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: "ray.openfuyao.com", Kind: "Queue"}, name,
			field.ErrorList{field.Invalid(field.NewPath("queue"), name, msg)})
	}
	var found []string
	var forbidden error
	for _, m := range []struct {
		manager string
		get     func() (*unstructured.Unstructured, error)
	}{
		{ray.ManagerVolcano, func() (*unstructured.Unstructured, error) {
			return dyn.Resource(VolcanoResource()).Get(ctx, name, metav1.GetOptions{})
		}},
		{ray.ManagerKueue, func() (*unstructured.Unstructured, error) {
			return dyn.Resource(LocalQueueResource()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	} {
		if manager != "" && manager != m.manager {
			continue
		}
		u, err := m.get()
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case apierrors.IsForbidden(err):
			forbidden = err
			continue
		case err != nil:
			return "", err
		}
		if m.manager == ray.ManagerVolcano {
			if state, _, _ := unstructured.NestedString(u.Object, "status", "state"); state != "" && state != "Open" {
				return "", invalid("the Volcano queue is " + state + ": it takes no new work")
			}
		}
		found = append(found, m.manager)
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return "", invalid("both a Volcano Queue and a Kueue LocalQueue have this name: say which with queueManager")
	case forbidden != nil:
		return "", forbidden
	case manager == ray.ManagerVolcano:
		return "", invalid("no Volcano Queue has this name")
	case manager == ray.ManagerKueue:
		return "", invalid("no Kueue LocalQueue of namespace " + ns + " has this name")
	}
	return "", invalid("no Volcano Queue, nor Kueue LocalQueue of namespace " + ns + ", has this name")
}

// Label is the label that puts a Ray object in a queue of manager.
func Label(manager string) string {
	if manager == ray.ManagerKueue {
		return ray.KueueQueueLabel
	}
	return ray.VolcanoQueueLabel
}

// Package queues holds the queues of the queue managers that admit Ray work: Volcano's Queues
// (scheduling.volcano.sh/v1beta1, cluster-scoped; volcano.sh/apis v1.13.0
// pkg/apis/scheduling/v1beta1/types.go), read as the caller, and the Ray objects waiting in each.
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
	"k8s.io/client-go/dynamic"

	"ray-service/internal/ray"
)

// VolcanoResource is the resource of Volcano's Queues.
func VolcanoResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
}

// Queue is one queue: what it may hold and holds, and the Ray objects waiting in it.
type Queue struct {
	// Manager is the queue manager: volcano.
	Manager string `json:"manager" enums:"volcano"`
	Name    string `json:"name"`
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
	// Phase, Reason and Message are its PodGroup's (see ray.Scheduling).
	Phase   string `json:"phase"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
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
const ErrWithheld = "the caller may not list queues.scheduling.volcano.sh: only the queue's name and the objects waiting in it are shown"

// List lists Volcano's Queues as the caller: none where the cluster has no Queue CRD; forbidden
// tells that the caller may not list them.
func (l *Lister) List(ctx context.Context, token string) (qs []Queue, forbidden bool, err error) {
	dyn, err := l.Dynamic(token)
	if err != nil {
		return nil, false, err
	}
	list, err := dyn.Resource(VolcanoResource()).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, true, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	for i := range list.Items {
		qs = append(qs, FromVolcano(&list.Items[i]))
	}
	return qs, false, nil
}

// WithWaiting adds to the queues each waiting object, in the queue its scheduling names; a queue named
// by a waiting object but not listed (the caller may not list queues) is added with its name alone.
// Queues and their waiting objects are ordered by name.
func WithWaiting(qs []Queue, waiting map[string][]Waiting, withheld bool) []Queue {
	byName := map[string]int{}
	for i, q := range qs {
		byName[q.Manager+"/"+q.Name] = i
	}
	for key, ws := range waiting {
		i, ok := byName[key]
		if !ok {
			manager, name, _ := strings.Cut(key, "/")
			q := Queue{Manager: manager, Name: name}
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
	slices.SortFunc(qs, func(a, b Queue) int { return strings.Compare(a.Manager+"/"+a.Name, b.Manager+"/"+b.Name) })
	return qs
}

package cache

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// Entry is what the informer of a Ray kind (or of templates) keeps of one object: a little metadata
// and the item of the object alone (its summary and labels; ObjectMeta.Labels stays empty, one copy is
// enough). The manifest itself is not kept: details are read from the apiserver. What depends on pods
// is added when the entry is published: the entry's own item when the pods add nothing, else a new one.
type Entry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	item              *Item
}

// Summary is the summary of the object alone (nil for a ConfigMap that is no template).
func (e *Entry) Summary() *ray.Summary {
	if e.item == nil {
		return nil
	}
	return &e.item.Summary
}

// DeepCopyObject implements runtime.Object. It copies the metadata; the item is shared, as nothing
// changes it once an entry is made.
func (e *Entry) DeepCopyObject() runtime.Object {
	c := *e
	e.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// String helps in logs.
func (e *Entry) String() string { return fmt.Sprintf("%s %s/%s", e.Kind, e.Namespace, e.Name) }

// Item is what a list filters, sorts and shows of one object: its whole summary and its labels. An item
// is never changed once published (a change publishes a new one), so readers share it without locks.
// The summary is held in the item, so that a list walking thousands of items reads each from one place.
type Item struct {
	Summary ray.Summary
	Labels  ray.LabelSet
	// IdleStopAfter is the object's annotation ray.openfuyao.com/idle-stop-after ("" without), for the
	// idle policy.
	IdleStopAfter string
	// UID is the object's; MadeBy, of a Ray cluster, the object that made it as its labels and owner
	// reference say (ray.MadeBy; nil: none), believed where MadeBy.UID is that object's UID and that
	// object's Makes names the cluster; Makes, of a RayJob or RayService, the clusters its status says
	// KubeRay made for it (Kind.MadeClusters).
	UID    types.UID
	MadeBy *ray.Maker
	Makes  []string
	// lowerName is the name lower-cased, for a search.
	lowerName string
	// bytes estimates the memory the item holds, for the change feed's bound.
	bytes int
	// encoded is the summary's JSON, made at the first page that shows it (see JSON).
	encoded atomic.Pointer[[]byte]
}

// JSON is the summary encoded as a list item is, without actions (its last field, which a page adds
// for each caller): made once per item, at the first page that shows it, and shared by every page
// after, as the item never changes.
func (it *Item) JSON() ([]byte, error) {
	if b := it.encoded.Load(); b != nil {
		return *b, nil
	}
	s := it.Summary
	s.Actions = nil
	b, err := json.Marshal(&s)
	if err != nil {
		return nil, err
	}
	it.encoded.Store(&b)
	return b, nil
}

func newItem(s ray.Summary, labels ray.LabelSet) *Item {
	it := &Item{Summary: s, Labels: labels, lowerName: strings.ToLower(s.Name)}
	it.bytes = itemBytes(it)
	return it
}

// namespaced holds values by namespace, then name.
type namespaced[T any] map[string]map[string]T

func (m namespaced[T]) put(ns, name string, v T) {
	if m[ns] == nil {
		m[ns] = map[string]T{}
	}
	m[ns][name] = v
}

func (m namespaced[T]) remove(ns, name string) {
	delete(m[ns], name)
	if len(m[ns]) == 0 {
		delete(m, ns)
	}
}

// count returns how many values are in the namespaces of scope.
func (m namespaced[T]) count(scope auth.Scope) int {
	n := 0
	for ns, byName := range m {
		if scope.Contains(ns) {
			n += len(byName)
		}
	}
	return n
}

func (m namespaced[T]) get(ns, name string) (T, bool) {
	v, ok := m[ns][name]
	return v, ok
}

// in returns the values in the namespaces of scope.
func (m namespaced[T]) in(scope auth.Scope) []T {
	var out []T
	each := func(byName map[string]T) {
		for _, v := range byName {
			out = append(out, v)
		}
	}
	if scope.IsAll() {
		for _, byName := range m {
			each(byName)
		}
		return out
	}
	for _, ns := range scope.List() {
		each(m[ns])
	}
	return out
}

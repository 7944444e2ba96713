package auth

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Bindings tells in which namespaces a RoleBinding names a caller: where Kubernetes RBAC can grant it
// more than its ClusterRoleBindings do. Under RBAC, a namespaced request is allowed by the
// ClusterRoleBindings (which a cluster-wide review answers) or by the RoleBindings of its namespace: in
// a namespace where no RoleBinding names the caller, its user name or any of its groups, the answer is
// the cluster-wide one. A caller's first list across a thousand namespaces is then reviewed in those
// that name it, not in all. Authorizers other than RBAC that grant per namespace (a webhook) are not
// seen: turn it off for them (--review-every-namespace).
type Bindings struct {
	inf cache.SharedIndexInformer
	// version counts the RoleBindings' changes.
	version atomic.Uint64
}

const bySubject = "subject"

// NewBindings watches every RoleBinding with core, the service's own client, keeping its subjects and
// role only.
func NewBindings(core kubernetes.Interface, resync time.Duration) (*Bindings, error) {
	f := informers.NewSharedInformerFactory(core, resync)
	inf := f.Rbac().V1().RoleBindings().Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		rb, ok := obj.(*rbacv1.RoleBinding)
		if !ok {
			return obj, nil
		}
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rb.Name, Namespace: rb.Namespace,
			UID: rb.UID, ResourceVersion: rb.ResourceVersion}, Subjects: rb.Subjects, RoleRef: rb.RoleRef}, nil
	}); err != nil {
		return nil, err
	}
	if err := inf.AddIndexers(cache.Indexers{bySubject: func(obj any) ([]string, error) {
		rb, ok := obj.(*rbacv1.RoleBinding)
		if !ok {
			return nil, nil
		}
		keys := make([]string, 0, len(rb.Subjects))
		for _, s := range rb.Subjects {
			switch s.Kind {
			case rbacv1.UserKind:
				keys = append(keys, "user:"+s.Name)
			case rbacv1.GroupKind:
				keys = append(keys, "group:"+s.Name)
			case rbacv1.ServiceAccountKind:
				ns := s.Namespace
				if ns == "" {
					ns = rb.Namespace
				}
				keys = append(keys, "user:system:serviceaccount:"+ns+":"+s.Name)
			}
		}
		return keys, nil
	}}); err != nil {
		return nil, err
	}
	b := &Bindings{inf: inf}
	count := func() { b.version.Add(1) }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { count() },
		UpdateFunc: func(any, any) { count() },
		DeleteFunc: func(any) { count() },
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// Version is the number of RoleBinding changes seen: where a caller's rights come from changed only
// when it changed.
func (b *Bindings) Version() uint64 { return b.version.Load() }

// Run watches until ctx ends.
func (b *Bindings) Run(ctx context.Context) { b.inf.Run(ctx.Done()) }

// HasSynced tells whether every RoleBinding has been listed once.
func (b *Bindings) HasSynced() bool { return b.inf.HasSynced() }

// Classes returns, for each namespace where a RoleBinding names the user or one of its groups, the
// roles bound to it there, as a key: two namespaces with the same key grant the caller the same under
// RBAC (the same ClusterRoles, besides the ClusterRoleBindings that hold everywhere), so one review
// answers for both. A namespace that binds it a Role of its own has a key of its own. ok is false until
// the RoleBindings are listed.
func (b *Bindings) Classes(u Identity) (classes map[string]string, ok bool) {
	if !b.inf.HasSynced() {
		return nil, false
	}
	roles := map[string][]string{}
	seen := map[string]bool{}
	add := func(key string) {
		objs, _ := b.inf.GetIndexer().ByIndex(bySubject, key)
		for _, o := range objs {
			rb, ok := o.(*rbacv1.RoleBinding)
			if !ok || seen[rb.Namespace+"/"+rb.Name] {
				continue
			}
			seen[rb.Namespace+"/"+rb.Name] = true
			role := rb.RoleRef.Kind + ":" + rb.RoleRef.Name
			if rb.RoleRef.Kind != "ClusterRole" {
				role = rb.RoleRef.Kind + ":" + rb.Namespace + "/" + rb.RoleRef.Name
			}
			roles[rb.Namespace] = append(roles[rb.Namespace], role)
		}
	}
	add("user:" + u.Name)
	for _, g := range u.Groups {
		add("group:" + g)
	}
	classes = make(map[string]string, len(roles))
	for ns, rs := range roles {
		slices.Sort(rs)
		classes[ns] = strings.Join(slices.Compact(rs), "\x00")
	}
	return classes, true
}

package auth

import (
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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
}

const bySubject = "subject"

// NewBindings watches every RoleBinding with core, the service's own client, keeping its subjects only.
func NewBindings(core kubernetes.Interface, resync time.Duration) (*Bindings, error) {
	f := informers.NewSharedInformerFactory(core, resync)
	inf := f.Rbac().V1().RoleBindings().Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		rb, ok := obj.(*rbacv1.RoleBinding)
		if !ok {
			return obj, nil
		}
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rb.Name, Namespace: rb.Namespace,
			UID: rb.UID, ResourceVersion: rb.ResourceVersion}, Subjects: rb.Subjects}, nil
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
	return &Bindings{inf: inf}, nil
}

// Run watches until ctx ends.
func (b *Bindings) Run(ctx context.Context) { b.inf.Run(ctx.Done()) }

// HasSynced tells whether every RoleBinding has been listed once.
func (b *Bindings) HasSynced() bool { return b.inf.HasSynced() }

// Naming returns the namespaces where a RoleBinding names the user or one of its groups; ok is false
// until the RoleBindings are listed.
func (b *Bindings) Naming(u Identity) (namespaces sets.Set[string], ok bool) {
	if !b.inf.HasSynced() {
		return nil, false
	}
	out := sets.New[string]()
	add := func(key string) {
		objs, _ := b.inf.GetIndexer().ByIndex(bySubject, key)
		for _, o := range objs {
			if rb, ok := o.(*rbacv1.RoleBinding); ok {
				out.Insert(rb.Namespace)
			}
		}
	}
	add("user:" + u.Name)
	for _, g := range u.Groups {
		add("group:" + g)
	}
	return out, true
}

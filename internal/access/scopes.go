// Package access holds the rules of what a caller may see and do, asked of the apiserver through
// auth: where it may see each kind (its scopes), which actions it may take on an object, and which
// health reasons it may be shown. The HTTP handlers and the watch streams apply the same rules.
package access

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// Authorizer answers what a caller may do, asking with the caller's token (auth.Reviewer).
type Authorizer interface {
	Allowed(ctx context.Context, token string, a auth.Attributes) (bool, error)
	// AllowedAll is Allowed for each of asks at once, in their order.
	AllowedAll(ctx context.Context, token string, asks []auth.Attributes) ([]bool, error)
	// Scope returns where the caller may do a: everywhere, or those of candidates where it may.
	Scope(ctx context.Context, token string, a auth.Attributes, candidates []string) (auth.Scope, error)
}

// Namespaces tells which namespaces hold instances or templates of a kind (cache.Store), the
// candidates of a caller's scope.
type Namespaces interface {
	Namespaces(k *ray.Kind) []string
}

// Rules asks what callers may see and do.
type Rules struct {
	Kinds *ray.Kinds
	Authz Authorizer
	Store Namespaces
}

// Visible returns where the caller may see the instances of k in ns ("" for all namespaces): where it
// may list the kind; and, with templates, where it may see its templates, which are ConfigMaps: where
// it may also list ConfigMaps. Asking for one namespace where the caller may not list the kind is
// Forbidden.
func (r *Rules) Visible(ctx context.Context, tok string, k *ray.Kind, ns string, templates bool) (cache.Scopes, error) {
	candidates := r.Store.Namespaces(k)
	// Both scopes are asked at once: each may take the apiserver a round trip or two.
	var cmScope auth.Scope
	var cmErr error
	var asked sync.WaitGroup
	if templates {
		asked.Go(func() {
			cmScope, cmErr = r.Authz.Scope(ctx, tok, auth.Attributes{Verb: "list", Resource: "configmaps", Namespace: ns}, candidates)
		})
	}
	instances, err := r.Authz.Scope(ctx, tok, auth.Attributes{Verb: "list", Group: ray.RayGroupVersion.Group, Resource: k.Resource, Namespace: ns}, candidates)
	asked.Wait()
	switch {
	case err != nil:
		return cache.Scopes{}, err
	case ns != "" && instances.IsEmpty():
		return cache.Scopes{}, Forbidden(k, "list", ns)
	case cmErr != nil:
		return cache.Scopes{}, cmErr
	}
	sc := cache.Scopes{Instances: instances}
	if templates {
		sc.Templates = instances.Intersect(cmScope)
	}
	return sc, nil
}

// Forbidden is the error of a caller who may not verb the kind k in ns ("": in all namespaces).
func Forbidden(k *ray.Kind, verb, ns string) error {
	where := "in all namespaces"
	if ns != "" {
		where = "in namespace " + strconv.Quote(ns)
	}
	return apierrors.NewForbidden(k.GVR().GroupResource(), "", fmt.Errorf("the caller may not %s %s %s", verb, k.Resource, where))
}

// Overview returns where the caller may see each kind, in ns or everywhere ("").
func (r *Rules) Overview(ctx context.Context, tok, ns string) (map[*ray.Kind]cache.Scopes, error) {
	out := map[*ray.Kind]cache.Scopes{}
	for _, k := range r.Kinds.All() {
		sc, err := r.Visible(ctx, tok, k, ns, true)
		// The overview of a namespace is refused only where Ray clusters may not be listed; other kinds
		// the caller may not list there count nothing.
		if err != nil && (k.IsCluster || !apierrors.IsForbidden(err)) {
			return nil, err
		}
		out[k] = sc
	}
	return out, nil
}

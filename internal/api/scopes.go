package api

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// visibleScopes returns where the caller may see the instances of k in ns ("" for all namespaces):
// where it may list the kind; and, with templates, where it may see its templates, which are
// ConfigMaps: where it may also list ConfigMaps. Asking for one namespace where the caller may not
// list the kind is Forbidden.
func (s *Server) visibleScopes(ctx context.Context, tok string, k *ray.Kind, ns string, templates bool) (cache.Scopes, error) {
	candidates := s.Store.Namespaces(k)
	// Both scopes are asked at once: each may take the apiserver a round trip or two.
	var cmScope auth.Scope
	var cmErr error
	var asked sync.WaitGroup
	if templates {
		asked.Go(func() {
			cmScope, cmErr = s.Authz.Scope(ctx, tok, auth.Attributes{Verb: "list", Resource: "configmaps", Namespace: ns}, candidates)
		})
	}
	instances, err := s.Authz.Scope(ctx, tok, auth.Attributes{Verb: "list", Group: ray.RayGroupVersion.Group, Resource: k.Resource, Namespace: ns}, candidates)
	asked.Wait()
	switch {
	case err != nil:
		return cache.Scopes{}, err
	case ns != "" && instances.IsEmpty():
		return cache.Scopes{}, forbidden(k, "list", ns)
	case cmErr != nil:
		return cache.Scopes{}, cmErr
	}
	sc := cache.Scopes{Instances: instances}
	if templates {
		sc.Templates = instances.Intersect(cmScope)
	}
	return sc, nil
}

func forbidden(k *ray.Kind, verb, ns string) error {
	where := "in all namespaces"
	if ns != "" {
		where = "in namespace " + strconv.Quote(ns)
	}
	return apierrors.NewForbidden(k.GVR().GroupResource(), "", fmt.Errorf("the caller may not %s %s %s", verb, k.Resource, where))
}

// overviewScopes returns where the caller may see each kind, in ns or everywhere ("").
func (s *Server) overviewScopes(ctx context.Context, tok, ns string) (map[*ray.Kind]cache.Scopes, error) {
	out := map[*ray.Kind]cache.Scopes{}
	for _, k := range s.Kinds.All() {
		sc, err := s.visibleScopes(ctx, tok, k, ns, true)
		// The overview of a namespace is refused only where Ray clusters may not be listed; other kinds
		// the caller may not list there count nothing.
		if err != nil && (k.IsCluster || !apierrors.IsForbidden(err)) {
			return nil, err
		}
		out[k] = sc
	}
	return out, nil
}

// scopeHash names scopes in event ids, so that a stream resumed by a caller whose rights changed in
// between starts again from a snapshot.
func scopeHash(sc cache.Scopes) string {
	h := fnv.New32a()
	for _, s := range []auth.Scope{sc.Instances, sc.Templates} {
		switch {
		case s.IsAll():
			h.Write([]byte("*"))
		default:
			h.Write([]byte(strings.Join(s.List(), ",")))
		}
		h.Write([]byte{0})
	}
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

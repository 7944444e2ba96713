package auth

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Scope is the set of namespaces a caller may act in: every namespace, or a finite set (possibly
// empty). The zero value is the empty scope, so a forgotten scope shows nothing rather than everything.
type Scope struct {
	all        bool
	namespaces sets.Set[string]
}

// AllNamespaces is the scope of every namespace.
func AllNamespaces() Scope { return Scope{all: true} }

// Namespaces is the scope of the named namespaces only.
func Namespaces(ns ...string) Scope { return Scope{namespaces: sets.New(ns...)} }

// IsAll tells whether the scope holds every namespace.
func (s Scope) IsAll() bool { return s.all }

// IsEmpty tells whether the scope holds no namespace.
func (s Scope) IsEmpty() bool { return !s.all && s.namespaces.Len() == 0 }

// Contains tells whether ns is in the scope.
func (s Scope) Contains(ns string) bool { return s.all || s.namespaces.Has(ns) }

// List returns the namespaces of a finite scope, sorted; nil for the scope of every namespace.
func (s Scope) List() []string {
	if s.all {
		return nil
	}
	return sets.List(s.namespaces)
}

// Intersect returns the namespaces in both scopes.
func (s Scope) Intersect(o Scope) Scope {
	switch {
	case s.all:
		return o
	case o.all:
		return s
	}
	return Scope{namespaces: s.namespaces.Intersection(o.namespaces)}
}

// Narrow returns the scope limited to ns; "" leaves it as it is.
func (s Scope) Narrow(ns string) Scope {
	if ns == "" {
		return s
	}
	return s.Intersect(Namespaces(ns))
}

// reviewsInParallel bounds the access reviews one request makes at once.
const reviewsInParallel = 8

// Scope returns where the holder of token may do a: every namespace when a.Namespace is "" and the
// caller may do it cluster-wide; otherwise those of candidates (for a.Namespace "") or a.Namespace
// itself where it is allowed. Reviews of several namespaces run in parallel, bounded; with bindings
// (UseBindings), one namespace of each class is reviewed (see AllowedAll).
func (r *Reviewer) Scope(ctx context.Context, token string, a Attributes, candidates []string) (Scope, error) {
	if r.bindings != nil && a.Namespace == "" {
		// A caller not allowed everywhere is asked per class of namespaces next, which needs who it is:
		// both are asked at once, so that a tenant's first list waits for one round trip, not two.
		go func() { _, _ = r.Identity(context.WithoutCancel(ctx), token) }()
	}
	allowed, err := r.Allowed(ctx, token, a)
	if err != nil {
		return Scope{}, err
	}
	switch {
	case allowed && a.Namespace == "":
		return AllNamespaces(), nil
	case allowed:
		return Namespaces(a.Namespace), nil
	case a.Namespace != "":
		return Scope{}, nil
	}
	candidates = slices.Compact(slices.Sorted(slices.Values(candidates)))
	asks := make([]Attributes, len(candidates))
	for i, ns := range candidates {
		asks[i] = a
		asks[i].Namespace = ns
	}
	verdicts, err := r.AllowedAll(ctx, token, asks)
	if err != nil {
		return Scope{}, err
	}
	out := Namespaces()
	for i, ns := range candidates {
		if verdicts[i] {
			out.namespaces.Insert(ns)
		}
	}
	return out, nil
}

// Equal tells whether both scopes hold the same namespaces.
func (s Scope) Equal(o Scope) bool {
	if s.all || o.all {
		return s.all == o.all
	}
	return s.namespaces.Equal(o.namespaces)
}

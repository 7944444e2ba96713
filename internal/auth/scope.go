package auth

import (
	"context"
	"slices"

	"golang.org/x/sync/errgroup"
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
// itself where it is allowed. Reviews of several namespaces run in parallel, bounded.
func (r *Reviewer) Scope(ctx context.Context, token string, a Attributes, candidates []string) (Scope, error) {
	hash := TokenHash(token)
	allowed, err := r.allowedAs(ctx, token, hash, a)
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
	verdicts := make([]bool, len(candidates))
	// Cached verdicts first, without a goroutine each; only the others are asked for, in parallel.
	now := r.now()
	var missing []int
	for i, ns := range candidates {
		na := a
		na.Namespace = ns
		var ok bool
		if verdicts[i], ok = r.cached(verdictKey(hash, na), now); !ok {
			missing = append(missing, i)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsInParallel)
	for _, i := range missing {
		g.Go(func() error {
			na := a
			na.Namespace = candidates[i]
			var err error
			verdicts[i], err = r.allowedAs(gctx, token, hash, na)
			return err
		})
	}
	if err := g.Wait(); err != nil {
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

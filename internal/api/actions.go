package api

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// reviewsAtOnce bounds the access reviews one page's actions make at once.
const reviewsAtOnce = 8

// seeing is the right to be shown what was read from resource (pods, events) in ns.
func seeing(resource, ns string) auth.Attributes {
	return auth.Attributes{Verb: "list", Resource: resource, Namespace: ns}
}

// withActions sets, in each summary, the actions its caller may take now: those its state allows
// whose every permission the caller has in the object's namespace; and withholds a health reason read
// from pods or events the caller may not list there, as the pods and events routes would refuse them.
// Each distinct permission of the page is reviewed once (the verdicts are cached as for lists), not
// once per item.
func (s *Server) withActions(ctx context.Context, tok string, k *ray.Kind, items []ray.Summary) error {
	possible := make([]map[string][]auth.Attributes, len(items))
	verdicts := map[auth.Attributes]bool{}
	for i := range items {
		possible[i] = k.Possible(&items[i])
		for _, needs := range possible[i] {
			for _, a := range needs {
				a.Name = ""
				verdicts[a] = false
			}
		}
		if on := items[i].Health.SeenOn(); on != "" {
			verdicts[seeing(on, items[i].Namespace)] = false
		}
	}
	asks := make([]auth.Attributes, 0, len(verdicts))
	for a := range verdicts {
		asks = append(asks, a)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsAtOnce)
	for _, a := range asks {
		g.Go(func() error {
			ok, err := s.Authz.Allowed(gctx, tok, a)
			mu.Lock()
			verdicts[a] = ok
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range items {
		actions := []string{}
		for _, action := range ray.ActionOrder {
			needs, ok := possible[i][action]
			if !ok {
				continue
			}
			allowed := true
			for _, a := range needs {
				a.Name = ""
				allowed = allowed && verdicts[a]
			}
			if allowed {
				actions = append(actions, action)
			}
		}
		items[i].Actions = actions
		if on := items[i].Health.SeenOn(); on != "" && !verdicts[seeing(on, items[i].Namespace)] {
			items[i].Health = items[i].Health.Withheld()
		}
	}
	return nil
}

// rightsAsked asks the caller's rights once each and remembers the answers; an answer it could not get
// is false and asked again next time.
type rightsAsked struct {
	s     *Server
	ctx   context.Context
	token string
	known map[auth.Attributes]bool
}

func (r *rightsAsked) allowed(a auth.Attributes) bool {
	if ok, asked := r.known[a]; asked {
		return ok
	}
	ok, err := r.s.Authz.Allowed(r.ctx, r.token, a)
	if err != nil {
		return false
	}
	if r.known == nil {
		r.known = map[auth.Attributes]bool{}
	}
	r.known[a] = ok
	return ok
}

// shown is sum as the caller may see it: a health reason read from pods or events it may not list in
// the namespace is withheld, as in a list.
func (r *rightsAsked) shown(sum *ray.Summary) *ray.Summary {
	if on := sum.Health.SeenOn(); on == "" || r.allowed(seeing(on, sum.Namespace)) {
		return sum
	}
	c := *sum
	c.Health = c.Health.Withheld()
	return &c
}

// visibleProblems are the problems of a detail the caller may be shown: those read from pods or
// events only where it may list them in ns.
func (r *rightsAsked) visibleProblems(ns string, problems []ray.Problem) []ray.Problem {
	shown := []ray.Problem{}
	for _, p := range problems {
		if on := p.SeenOn(); on == "" || r.allowed(seeing(on, ns)) {
			shown = append(shown, p)
		}
	}
	return shown
}
